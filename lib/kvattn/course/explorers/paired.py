"""The paired comparison (chapter 5): two configurations of a multi-seed experiment, their
per-seed final validation losses and the paired differences (same seed, same batches).

Its input: the :class:`kvattn.train.SeedRuns` of :func:`kvattn.train.train_lm_seeds`. Live face
only (:func:`widget`).
"""

from __future__ import annotations

from collections.abc import Mapping

import ipywidgets as widgets

from ...train import SeedRuns
from ..plots.checks import _require_array, _require_choice, _require_items
from ..plots.style import SIGNED_COLORS, widget_axes
from ._live import _live


def widget(runs: Mapping[str, SeedRuns], first: str, second: str) -> widgets.VBox:
    """Pick two configurations of a multi-seed experiment: their per-seed final validation losses
    and the paired differences (same seed = same batches), with the mean difference.

    Raises ValueError when ``first`` or ``second`` is not a key of ``runs``, a run has no seeds,
    a seed has no validation loss or a final one that is not finite, or the runs were not made
    with the same seeds (then there is nothing to pair); TypeError when a run is no
    :class:`~kvattn.train.SeedRuns`.
    """
    names = _require_items("runs", runs, container=Mapping)
    _require_choice("first", first, names)
    _require_choice("second", second, names)
    for name, run in runs.items():
        if not isinstance(run, SeedRuns):
            raise TypeError(f"runs[{name!r}] must be a SeedRuns, got {type(run).__name__}")
        _require_items(f"runs[{name!r}].seeds", run.seeds)
        if not all(run.evals):
            raise ValueError(f"runs[{name!r}] has a seed without validation losses (empty evals)")
        _require_array(
            f"final losses of runs[{name!r}]", run.final, (len(run.seeds),), "one per seed"
        )
    for name in names:
        if runs[name].seeds != runs[first].seeds:
            raise ValueError(
                f"runs {first!r} and {name!r} used different seeds ({runs[first].seeds} and "
                f"{runs[name].seeds}): a paired comparison needs the same seeds"
            )
    a_box = widgets.Dropdown(options=names, value=first, description="model A")
    b_box = widgets.Dropdown(options=names, value=second, description="model B")

    def draw() -> None:
        a, b = runs[a_box.value], runs[b_box.value]
        diffs = [x - y for x, y in zip(a.final, b.final, strict=True)]
        fig, axes = widget_axes(2, panel_height=3.2)
        seeds = [str(s) for s in a.seeds]
        width = 0.4
        axes[0].bar([i - width / 2 for i in range(len(seeds))], a.final, width, label=a_box.value)
        axes[0].bar([i + width / 2 for i in range(len(seeds))], b.final, width, label=b_box.value)
        axes[0].set_xticks(range(len(seeds)), seeds)
        lo = min(a.final + b.final)
        axes[0].set(xlabel="seed", ylabel="final validation loss", ylim=(lo - 0.1, None))
        axes[0].legend(fontsize=9)
        axes[1].bar(seeds, diffs, color=[SIGNED_COLORS[x > 0] for x in diffs])
        axes[1].axhline(0, color="black", lw=0.8)
        mean = sum(diffs) / len(diffs)
        axes[1].set(xlabel="seed", title=f"A − B per seed (mean {mean:+.3f})")
        fig.tight_layout()

    return _live([a_box, b_box], draw)
