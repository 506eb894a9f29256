"""Run-time environment: device choice, seeding, the fast-mode flag and the plotly renderer.

Every notebook calls :func:`setup` in its first cell, so these four decisions are made in one place.
"""

from __future__ import annotations

import os
import random
import sys
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import torch

T = TypeVar("T")

#: Environment variable that shortens every training loop (set by ``make test``/CI).
FAST_ENV = "KVATTN_FAST"

#: Name under which :func:`use_book_renderer` registers the plotly renderer for the static book.
BOOK_RENDERER = "book"


def in_colab() -> bool:
    """True when running inside Google Colab (its ``google.colab`` module is imported)."""
    return "google.colab" in sys.modules


def fast_mode() -> bool:
    """Whether the fast mode is on: ``KVATTN_FAST`` set to ``1``, ``true`` or ``yes``.

    Fast mode shortens training loops so that a notebook runs in CI in well under three minutes;
    everything else (models, metrics, figures) is the same code. Any other non-empty value raises
    ``ValueError`` rather than being read silently as "off".
    """
    value = os.environ.get(FAST_ENV, "").strip().lower()
    if value in ("", "0", "false", "no"):
        return False
    if value in ("1", "true", "yes"):
        return True
    raise ValueError(f"{FAST_ENV} must be one of 1/true/yes or 0/false/no, got {value!r}")


def pick(full: T, fast: T) -> T:
    """Return ``fast`` in fast mode and ``full`` otherwise (e.g. ``steps = pick(2000, 200)``)."""
    return fast if fast_mode() else full


def default_device() -> torch.device:
    """The best available device: CUDA, then Apple MPS, then CPU."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def seed_everything(seed: int) -> None:
    """Seed Python's, NumPy's and PyTorch's (CPU and every CUDA device) random generators."""
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    random.seed(seed)
    np.random.seed(seed % 2**32)  # noqa: NPY002 - seeds the legacy global RNG other code may use
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)


class _BookHtmlRenderer:
    """Plotly renderer whose output is HTML that expects ``window.Plotly`` to exist already.

    plotly's own ``HtmlRenderer`` always adds a MathJax ``<script>`` from a CDN, which fails
    offline; this one adds no script tags besides the figure's own call to ``Plotly.newPlot``.
    """

    def to_mimebundle(self, fig_dict: dict) -> dict:
        import plotly.io as pio

        html = pio.to_html(
            fig_dict,
            include_plotlyjs=False,
            include_mathjax=False,
            full_html=False,
            auto_play=False,  # figures with frames wait for their slider instead of animating
            default_width="100%",
            config={"responsive": True, "displaylogo": False},
        )
        return {"text/html": html}


def use_book_renderer() -> None:
    """Make plotly figures visible both in Jupyter and in the static book.

    Under nbclient (the book build, nbval) plotly's default renderer emits only its own JSON
    mimetype, which the book cannot display. We pair that mimetype (rendered natively by
    JupyterLab, Notebook 7 and VS Code) with HTML that does *not* inline plotly.js: the book serves
    one ``plotly.min.js`` from its static folder, and ``kvattn.course.book`` tells the book to skip
    the JSON twin. In Colab the ``colab`` renderer is used.
    """
    import plotly.io as pio
    from plotly.io.base_renderers import MimetypeRenderer

    if in_colab():
        pio.renderers.default = "colab"
        return
    renderer = type("BookHtmlRenderer", (_BookHtmlRenderer, MimetypeRenderer), {})()
    pio.renderers[BOOK_RENDERER] = renderer
    pio.renderers.default = f"plotly_mimetype+{BOOK_RENDERER}"


@dataclass(frozen=True)
class Setup:
    """What :func:`setup` decided: the device, the seed and whether fast mode is on."""

    device: torch.device
    seed: int
    fast: bool

    def __str__(self) -> str:
        if self.device.type == "cuda":
            where = f"cuda ({torch.cuda.get_device_name(self.device)})"
        elif self.device.type == "mps":
            where = "mps (Apple GPU)"
        else:
            where = "cpu"
            if in_colab():
                where += " - for a GPU: Runtime > Change runtime type > T4 GPU, then rerun"
        mode = "fast (short training runs)" if self.fast else "full"
        return f"kvattn: device {where}; seed {self.seed}; mode {mode}; torch {torch.__version__}"


def setup(seed: int = 0, device: str | torch.device | None = None) -> Setup:
    """Prepare a notebook: seed everything, pick the device, set the plotly renderer.

    Parameters
    ----------
    seed:
        Seed for Python, NumPy and PyTorch.
    device:
        ``None`` picks CUDA > MPS > CPU; otherwise anything ``torch.device`` accepts.

    Returns
    -------
    Setup
        A small record whose ``str`` is a one-line report for the notebook's output.
    """
    seed_everything(seed)
    use_book_renderer()
    return Setup(
        device=default_device() if device is None else torch.device(device),
        seed=seed,
        fast=fast_mode(),
    )
