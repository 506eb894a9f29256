"""The house style of the course's plotly figures: colours, layout, rounding, logarithmic axes and
the frame slider that every explorer's static face uses.

Every figure's data is embedded in its page, so values are rounded before they are drawn, and
sliders jump between precomputed frames without animation.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import plotly.graph_objects as go
import torch

from .checks import (
    PAGE_WIDTH,
    _require_array,
    _require_choice,
    _require_items,
    _require_length,
    _require_number,
)

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

#: The colour convention for signed values, as the notation page states it. Every signed heat
#: map uses this diverging map centred at 0, red positive, blue negative, white 0.
SIGNED_SCALE = "RdBu_r"
#: The two ends of :data:`SIGNED_SCALE` for a signed bar or point, indexed by ``value > 0``.
SIGNED_COLORS = ("#2166AC", "#B2182B")

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


def log_ticks(low: float, high: float) -> list[float] | None:
    """Ticks to label on a logarithmic axis over the positive ``[low, high]``: None when it
    holds two powers of ten or more (one label a decade, plotly's ``dtick=1``), else values of
    the 1-2-5 series (then every digit, then round steps) inside it, at least two of them, so
    that no log axis shows a single label (a loss between 0.009 and 0.03 showed only "0.01")."""
    if not (np.isfinite(low) and np.isfinite(high)) or low <= 0 or high < low:
        raise ValueError(f"log_ticks needs 0 < low ≤ high, got {low!r}, {high!r}")
    decades = range(int(np.floor(np.log10(low))) - 1, int(np.ceil(np.log10(high))) + 1)
    if sum(low <= 10.0**e <= high for e in decades) >= 2:
        return None
    for mantissas in ((1, 2, 5), range(1, 10)):
        ticks = [
            float(f"{m}e{e}") for e in decades for m in mantissas if low <= m * 10.0**e <= high
        ]
        if len(ticks) >= 2:
            return ticks
    step = (
        10.0 ** np.floor(np.log10(high - low))
        if high > low
        else 10.0 ** np.floor(np.log10(low) - 1)
    )
    ticks = []
    for factor in (0.1, 0.2, 0.5, 1.0, 2.0, 5.0):  # the finest round step: at most 6 ticks
        grid = step * factor * np.arange(np.ceil(low / (step * factor)), high / (step * factor) + 1)
        ticks = [float(f"{v:.3g}") for v in grid if low <= v <= high]
        if len(ticks) <= 6:
            break
    if len(ticks) < 2:  # a single value: label it and one round value either side
        ticks = [float(f"{v:.2g}") for v in (low * 0.9, low, low * 1.1)]
    return ticks


def _drawn(fig: go.Figure, axis: str, **where) -> np.ndarray:
    """The positive values the figure's traces draw along ``axis`` ("x" or "y"), in the
    subplots ``where`` selects (``row``, ``col``: as plotly's ``select_traces``)."""
    chosen = {k: v for k, v in where.items() if k in ("row", "col")}
    traces = fig.select_traces(**chosen) if chosen and fig._has_subplots() else fig.data
    parts = [
        np.asarray([v for v in np.ravel(getattr(t, axis)) if isinstance(v, int | float)], float)
        for t in traces
        if getattr(t, axis, None) is not None and t.type not in ("table", "heatmap")
    ]
    values = np.concatenate(parts) if parts else np.zeros(0)
    return values[np.isfinite(values) & (values > 0)]


def log_axis(fig: go.Figure, axis: str, values: Sequence[float] | None = None, **where) -> None:
    """Make ``axis`` ("x" or "y") logarithmic with readable ticks, at least two labelled: at the
    sampled ``values`` when there are at most 12 of them, else at :func:`log_ticks` of their
    range (``values`` None: of the values the figure's traces already draw on that axis; with
    none drawn yet, plotly chooses, and it always labels two or more). Plotly's default labels
    minor ticks with bare digits such as "2 3 4", which read as values, and one label per decade
    left an axis within a decade a single label. Raises ValueError for an ``axis`` other than
    "x"/"y" or ``values`` that are not positive and finite."""
    _require_choice("axis", axis, ("x", "y"))
    update = fig.update_xaxes if axis == "x" else fig.update_yaxes
    values = None if values is None else _require_array("values", values, 1, positive=True).tolist()
    if values is not None and len(set(values)) <= 12:
        update(type="log", tickvals=values, ticktext=[f"{v:g}" for v in values], **where)
        return
    drawn = np.asarray(values) if values is not None else _drawn(fig, axis, **where)
    if drawn.size == 0:
        update(type="log", exponentformat="power", **where)
        return
    ticks = log_ticks(float(drawn.min()), float(drawn.max()))
    if ticks is None:
        update(type="log", dtick=1, **where)
    else:
        update(type="log", tickvals=ticks, ticktext=[f"{v:g}" for v in ticks], **where)


def covering_range(values: np.ndarray, *, log: bool = False, pad: float = 0.05) -> list[float]:
    """An axis range (log10 units when ``log``) holding every value, with ``pad`` of the span on
    each side: what a figure with frames sets, since plotly keeps the first frame's autorange
    and clips the others. ValueError when no value is finite (and positive when ``log``)."""
    v = np.asarray(values, dtype=float).ravel()
    v = v[np.isfinite(v) & ((v > 0) if log else True)]
    if not v.size:
        raise ValueError("covering_range needs at least one finite (positive for log) value")
    v = np.log10(v) if log else v
    low, high = float(v.min()), float(v.max())
    margin = pad * (high - low) or (0.1 if log else 0.05 * max(abs(high), 1.0))
    return [round(low - margin, 6), round(high + margin, 6)]


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


#: The resolution of a live explorer's image, in dots per inch (its 10 pt text is 12.5 px).
WIDGET_DPI = 90


def widget_axes(panels: int, *, cols: int = 2, panel_height: float = 3.0) -> tuple:
    """A matplotlib figure for a live explorer's image, ``panels`` axes on a grid of ``cols``
    columns (one panel a row with ``cols=1``), as wide as a book column at 1280 px
    (:data:`~kvattn.course.plots.checks.PAGE_WIDTH`) at :data:`WIDGET_DPI`, so that the page shows
    it unscaled and its smallest text (9 pt) is 11 px: four panels in a row, 1,065 px wide, were
    shrunk to the column and their labels to 6 px. Returns ``(fig, axes)``, axes a list;
    ValueError for ``panels``, ``cols`` < 1 or ``panel_height`` ≤ 0."""
    _require_number("panels", panels, 1, integer=True)
    _require_number("cols", cols, 1, integer=True)
    _require_number("panel_height", panel_height, 0.5)
    cols = min(cols, panels)
    rows = -(-panels // cols)
    width = 0.94 * PAGE_WIDTH / WIDGET_DPI  # savefig's tight box adds a margin
    fig, grid = plt.subplots(
        rows, cols, figsize=(width, panel_height * rows), dpi=WIDGET_DPI, squeeze=False
    )
    axes = list(grid.ravel())
    for ax in axes[panels:]:
        ax.remove()
    return fig, axes[:panels]
