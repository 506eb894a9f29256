"""The house style of the course's plotly figures: colours, layout, rounding, logarithmic axes and
the frame slider that every explorer's static face uses.

Every figure's data is embedded in its page, so values are rounded before they are drawn, and
sliders jump between precomputed frames without animation.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
import torch

from .checks import _require_array, _require_choice, _require_items, _require_length

#: One colour per layer kind, the same in every chapter (Okabe-Ito, colour-blind safe).
COLORS = {
    "key_value": "#000000",
    "bilinear": "#0072B2",
    "symmetric_rank1": "#56B4E9",
    "reglu": "#E69F00",
    "swiglu": "#D55E00",
    "geglu": "#009E73",
    "glu": "#CC79A7",
    "full_bilinear": "#F0E442",
    "gated_rank_r": "#999999",
    "identity": "#0072B2",
    "relu": "#E69F00",
    "silu": "#D55E00",
    "gelu": "#009E73",
    "sigmoid": "#CC79A7",
}

#: The layout every figure shares (white template, 13 pt font, margins with room for a title).
LAYOUT = dict(template="plotly_white", font=dict(size=13), margin=dict(l=60, r=20, t=90, b=50))

#: One colour per decoder layer in the trajectory plots (Okabe-Ito order, then greys).
LAYER_COLORS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")


def color(kind: str) -> str | None:
    """The house colour of a layer kind or activation name (None: plotly's default cycle)."""
    return COLORS.get(kind)


def _round(x: torch.Tensor | np.ndarray | Sequence[float], digits: int = 4) -> list:
    """Round for embedding in a page (keeps figure JSON small)."""
    array = x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)
    return np.round(array.astype(float), digits).tolist()


#: The most points a line of a figure embeds. A column is about 700 px wide, so more points than
#: this draw nothing new and only weigh the page (a 3,000-step loss curve of five runs made
#: chapter 4's full build weigh over 1 MB).
MAX_LINE_POINTS = 500


def thinned(n: int, most: int = MAX_LINE_POINTS) -> np.ndarray:
    """Indices of the points of a line of ``n`` points that a figure keeps: all of them up to
    ``most``, else every k-th (k the smallest step that keeps at most ``most``) and always the
    last, so a curve still ends where the run ended."""
    if n <= most:
        return np.arange(n)
    step = -(-n // (most - 1))
    return np.unique(np.append(np.arange(0, n, step), n - 1))


def round_significant(x: torch.Tensor | np.ndarray, significant: int) -> list:
    """``x`` rounded to ``significant`` digits of its largest magnitude, as nested lists whose
    whole numbers are ints: how a heat map's values are embedded in a page, where the colour scale
    shows no more and every character counts (a panel of zeros stays zeros)."""
    array = x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)
    array = array.astype(float)
    top = float(np.abs(array).max()) if array.size else 0.0
    digits = significant - 1 - int(np.floor(np.log10(top))) if top > 0 else 0
    rounded = np.round(array, digits) + 0.0  # + 0.0 turns -0.0 into 0.0

    def plain(v: object) -> object:
        if isinstance(v, list):
            return [plain(u) for u in v]
        return int(v) if v == int(v) else v

    return plain(rounded.tolist())


def log_axis(fig: go.Figure, axis: str, values: Sequence[float] | None = None, **where) -> None:
    """Make ``axis`` ("x" or "y") logarithmic with readable ticks: at the sampled ``values`` when
    there are at most 12 of them, else one tick per decade (plotly's default labels minor ticks
    with bare digits such as "2 3 4", which read as values). Raises ValueError for an ``axis``
    other than "x"/"y" or ``values`` that are not positive and finite."""
    _require_choice("axis", axis, ("x", "y"))
    update = fig.update_xaxes if axis == "x" else fig.update_yaxes
    values = None if values is None else _require_array("values", values, 1, positive=True).tolist()
    if values is not None and len(values) <= 12:
        update(type="log", tickvals=values, ticktext=[f"{v:g}" for v in values], **where)
    else:
        update(type="log", dtick=1, **where)


def _short(label: str) -> str:
    """The value part of a label like "Swish-β (β=2)" (for slider ticks)."""
    return label.split("=")[-1].rstrip(")") if "=" in label else label


def _frame_names(names: Sequence[object]) -> list:
    """``names`` as they are when no two read alike, else each prefixed with its index ("0: o"):
    plotly keys frames by name (as a str), so a repeated name would make a slider entry show
    another's frame. Distinct names stay as they were, so a figure's frames keep their names."""
    if len({str(n) for n in names}) == len(names):
        return list(names)
    return [f"{i}: {n}" for i, n in enumerate(names)]


def slider(frame_names: Sequence[str], labels: Sequence[str], prefix: str) -> dict:
    """A plotly slider that jumps (no animation) between the named frames, one label per frame.

    Raises ValueError when there are no frames or the labels do not match them one to one.
    """
    _require_length("labels", labels, len(_require_items("frame_names", frame_names)), "frame")
    steps = [
        dict(
            method="animate",
            label=label,
            args=[
                [name],
                dict(
                    mode="immediate",
                    frame=dict(duration=0, redraw=True),
                    transition=dict(duration=0),
                ),
            ],
        )
        for name, label in zip(frame_names, labels, strict=True)
    ]
    return dict(active=0, currentvalue=dict(prefix=prefix), pad=dict(t=60), steps=steps)
