"""The figure check (issue 38, "legible on every screen"): what a reader must be able to read in
every figure the course draws, plotly or matplotlib. :func:`figure_problems` lists the problems,
:func:`check_figure` raises them, :func:`install_figure_check` checks every figure when it is
shown (``KVATTN_FIGURE_CHECK``), and :func:`place_point_labels` puts point labels where they
cover nothing.

A matplotlib figure is drawn and measured; a plotly figure, whose layout happens in the browser,
is laid out here as plotly lays it out (margins, domains, autorange with its padding) with text
widths estimated from its default font: near enough to catch labels printed on one another.
"""

from __future__ import annotations

import functools
import os
import warnings
from collections.abc import Callable
from numbers import Real

import numpy as np
import plotly.graph_objects as go
from matplotlib.backend_bases import FigureCanvasBase
from matplotlib.figure import Figure
from matplotlib.legend import Legend
from plotly.basedatatypes import BaseFigure

from .checks import MIN_TEXT_PX, PAGE_WIDTH, _require_choice
from .geometry import (
    PlotlyGeometry,
    axis_values,
    data_to_px,
    layout_axes,
    numbers,
    overlap,
    overlaps,
    point_label_boxes,
    text_box,
    text_width,
    trace_axes,
)

#: The environment variable that installs the check on every figure shown
#: (:func:`install_figure_check`): ``1`` (or ``error``) raises, ``warn`` warns, unset or ``0``
#: leaves figures unchecked.
FIGURE_CHECK_ENV = "KVATTN_FIGURE_CHECK"


class FigureCheckError(ValueError):
    """A figure a reader cannot read: the message lists each problem."""


class FigureCheckWarning(UserWarning):
    """The problems of :class:`FigureCheckError`, when the check only warns."""


# ---- matplotlib --------------------------------------------------------------------------


def _mpl_texts(fig: object) -> list[tuple[str, object, bool]]:
    """Every text a drawn matplotlib figure shows: (kind, artist, is a tick label)."""
    texts: list[tuple[str, object, bool]] = []
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for tick in axis._update_ticks():  # the ticks drawn: inside the view limits
                texts += [("tick label", tick.label1, True), ("tick label", tick.label2, True)]
            texts += [("axis label", axis.label, False), ("offset", axis.get_offset_text(), False)]
        texts += [("title", t, False) for t in (ax.title, ax._left_title, ax._right_title)]
        texts += [("text", t, False) for t in ax.texts]
    texts += [("figure text", t, False) for t in fig.texts if t is not fig._suptitle]
    if fig._suptitle is not None:
        texts.append(("suptitle", fig._suptitle, False))
    for legend in fig.findobj(Legend):
        texts += [("legend", t, False) for t in [*legend.get_texts(), legend.get_title()]]
    return [(kind, t, tick) for kind, t, tick in texts if t.get_visible() and t.get_text().strip()]


def _mpl_problems(fig: object, page_width: float | None, min_text_px: float | None) -> list[str]:
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    problems = []
    texts = _mpl_texts(fig)
    for ax in fig.axes:
        for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            if axis.get_scale() != "log":
                continue
            labels = [
                t.label1.get_text() for t in axis._update_ticks()
                if t.label1.get_visible() and t.label1.get_text().strip()
            ]  # fmt: skip
            if len(labels) < 2:
                where = ax.get_title() or f"axes {fig.axes.index(ax)}"
                problems.append(
                    f"log {name} axis of {where!r} shows {len(labels)} labelled tick(s) "
                    f"({', '.join(labels) or 'none'}): a log axis needs at least two"
                )
    boxes = [
        (f"{kind} {t.get_text()[:30]!r}", tuple(t.get_window_extent(renderer).extents))
        for kind, t, _ in texts
    ]
    problems += overlaps(boxes)
    legend_texts = {id(t) for legend in fig.findobj(Legend) for t in legend.get_texts()}
    for legend in fig.findobj(Legend):
        frame = tuple(legend.get_window_extent(renderer).extents)
        for kind, t, _ in texts:
            if kind == "legend" or id(t) in legend_texts:
                continue
            if overlap(frame, tuple(t.get_window_extent(renderer).extents)):
                problems.append(f"the legend covers the {kind} {t.get_text()[:30]!r}")
    bars = [ax for ax in fig.axes if getattr(ax, "_colorbar", None) is not None]
    for cax in bars:
        extent = tuple(cax.get_tightbbox(renderer).extents)
        for ax in fig.axes:
            if ax is not cax and overlap(extent, tuple(ax.get_window_extent(renderer).extents)):
                where = ax.get_title() or f"axes {fig.axes.index(ax)}"
                problems.append(f"a colour bar (with its labels) runs over the panel {where!r}")
    if min_text_px is not None and texts:
        shown = fig.get_tightbbox(renderer).width * fig.dpi + 0.2 * fig.dpi  # savefig's pad
        scale = min(1.0, (page_width or PAGE_WIDTH) / shown)
        smallest = min(texts, key=lambda k: k[1].get_fontsize())[1]
        px = smallest.get_fontsize() * fig.dpi / 72 * scale
        if px < min_text_px - 0.05:
            problems.append(
                f"text {smallest.get_text()[:30]!r} is {px:.1f} px on the page (the image is "
                f"{shown:.0f} px wide, shown at most {page_width or PAGE_WIDTH} px): at least "
                f"{min_text_px:g} px"
            )
    return problems


# ---- plotly ------------------------------------------------------------------------------

#: Width of characters in ems, roughly as plotly's default font (Open Sans) draws them.


def _log_ticks(ax: object, low: float, high: float) -> list[str]:
    """The labelled ticks of a log axis over [low, high] (log10 units), as plotly labels them."""
    if ax.tickvals is not None:
        texts = list(ax.ticktext) if ax.ticktext is not None else None
        shown = []
        for i, v in enumerate(ax.tickvals):
            if isinstance(v, Real) and v > 0 and low - 1e-9 <= np.log10(v) <= high + 1e-9:
                label = str(texts[i]) if texts is not None and i < len(texts) else f"{v:g}"
                shown += [label] if label.strip() else []
        return shown
    dtick = ax.dtick
    if isinstance(dtick, str) and dtick[:1] == "D":
        digits = (1, 2, 5) if dtick == "D2" else range(1, 10)
        return [
            f"{d}e{e}"
            for e in range(int(np.floor(low)), int(np.ceil(high)) + 1)
            for d in digits
            if low - 1e-9 <= e + np.log10(d) <= high + 1e-9
        ]
    if isinstance(dtick, Real) and dtick > 0:
        tick0 = float(ax.tick0) if isinstance(ax.tick0, Real) else 0.0
        first = np.ceil((low - tick0) / dtick - 1e-9)
        ticks = tick0 + dtick * np.arange(first, np.floor((high - tick0) / dtick + 1e-9) + 1)
        return [f"1e{t:g}" for t in ticks]
    return ["auto", "auto"]  # plotly's own choice: whole decades or labelled intermediates


def _plotly_log_problems(fig: go.Figure) -> list[str]:
    problems = []
    for name in layout_axes(fig):
        ax = fig.layout[f"{name[0]}axis{name[1:]}"]
        if ax.type != "log":
            continue
        if ax.range is not None and ax.autorange is not True:
            low, high = (float(v) for v in ax.range)
            spans = [(min(low, high), max(low, high))]
        else:
            spans = []
            for values in axis_values(fig, name):
                positive = values[values > 0]
                if positive.size:
                    spans.append((np.log10(positive.min()), np.log10(positive.max())))
        for low, high in spans:
            labels = _log_ticks(ax, low, high)
            if len(labels) < 2:
                problems.append(
                    f"log axis {name} shows {len(labels)} labelled tick(s) "
                    f"({', '.join(labels) or 'none'}) over {10**low:.3g} … {10**high:.3g}: a log "
                    "axis needs at least two (kvattn.course.plots.log_axis with the values, or "
                    "dtick='D2')"
                )
                break
    return problems


def _plotly_frame_problems(fig: go.Figure) -> list[str]:
    """A framed figure's axes must hold every frame: plotly keeps the first frame's autorange."""
    if not fig.frames:
        return []
    problems = []
    for name in layout_axes(fig):
        ax = fig.layout[f"{name[0]}axis{name[1:]}"]
        sets = axis_values(fig, name)
        frames = [s for s in sets[1:] if s.size]
        if not frames:
            continue
        log = ax.type == "log"
        every = np.concatenate(frames)
        every = np.log10(every[every > 0]) if log else every
        if not every.size:
            continue
        lo, hi = float(every.min()), float(every.max())
        if ax.range is not None and ax.autorange is not True:
            low, high = sorted(float(v) for v in ax.range)
            slack = 1e-6 * max(1.0, high - low)
            if lo < low - slack or hi > high + slack:
                problems.append(
                    f"axis {name}'s range [{low:.3g}, {high:.3g}] cuts off frames' values "
                    f"[{lo:.3g}, {hi:.3g}]{' (log10)' if log else ''}"
                )
            continue
        first = sets[0]
        first = np.log10(first[first > 0]) if log else first
        if not first.size:
            continue
        f_lo, f_hi = float(first.min()), float(first.max())
        pad = 0.05 * max(f_hi - f_lo, 1e-12)
        if lo < f_lo - pad or hi > f_hi + pad:
            problems.append(
                f"axis {name} takes its range from the first frame [{f_lo:.3g}, {f_hi:.3g}]"
                f"{' (log10)' if log else ''}, which clips other frames [{lo:.3g}, {hi:.3g}]: "
                "give it a range that covers every frame"
            )
    return problems


def _colorbar_problems(geo: PlotlyGeometry, fig: go.Figure) -> list[str]:
    problems = []
    panels = [
        (x, y, geo.domain_box(x, y))
        for x, y in {trace_axes(t) for t in fig.data if t.type not in ("table",)}
    ]
    for trace in fig.data:
        if trace.type not in ("heatmap", "contour") or trace.showscale is False:
            continue
        bar = trace.colorbar
        x = 1.02 if bar.x is None else float(bar.x)
        left = geo.px(x, 0)[0]
        if (bar.xanchor or "left") == "center":
            left -= (bar.thickness or 30) / 2
        elif bar.xanchor == "right":
            left -= bar.thickness or 30
        zs = numbers(trace.z)
        ends = [trace.zmin, trace.zmax] if trace.zmin is not None else []
        ends = ends or ([float(zs.min()), float(zs.max())] if zs.size else [0.0])
        exp = bar.exponentformat or "B"
        size = float(bar.tickfont.size or geo.font)
        label = max(  # the widest label, not the largest string ("1.2e-05" over "-1.2e-05")
            (f"{v:.2g}" if exp in ("e", "E", "power") or abs(v) < 1e-2 else f"{v:.3g}"
             for v in ends),
            key=lambda text: text_width(text, size),
        )  # fmt: skip
        right = left + (bar.thickness or 30) + 4 + text_width(label, size) + (bar.xpad or 10)
        length = 1.0 if bar.len is None else float(bar.len)
        y = 0.5 if bar.y is None else float(bar.y)
        top, bottom = geo.px(0, y + length / 2)[1], geo.px(0, y - length / 2)[1]
        own = trace_axes(trace)
        for xname, yname, box in panels:
            if (xname, yname) == own:
                continue
            if overlap((left + (bar.thickness or 30), top, right, bottom), box, 2.0):
                problems.append(
                    f"a colour bar's labels (about {right - left:.0f} px from its left edge) "
                    f"run over the panel of axes {xname}/{yname}"
                )
    return problems


def _plotly_text_problems(geo: PlotlyGeometry, fig: go.Figure) -> list[str]:
    problems = []
    title = fig.layout.title.text
    boxes = []
    if title:
        # plotly draws a title at 1.4 × the layout's font, from x = 0.05 of the figure (the
        # house template), on one line: a longer one runs off the figure's right edge
        size = float(fig.layout.title.font.size or round(geo.font * 1.4))
        w = text_width(title, size)
        x0 = (0.05 if fig.layout.title.x is None else float(fig.layout.title.x)) * geo.width
        x0 = x0 - w / 2 if fig.layout.title.xanchor == "center" else x0
        if x0 + 0.97 * w > geo.width:
            problems.append(
                f"the title runs {x0 + w - geo.width:.0f} px past the figure's edge at "
                f"{geo.width:.0f} px (break it with <br> or shorten it): {title[:50]!r}"
            )
        boxes.append(
            (f"title {title[:30]!r}", text_box(title, size, x0, geo.top / 2, "left", "middle"))
        )
    for note in fig.layout.annotations:
        if not note.text or note.visible is False:
            continue
        size = float(note.font.size or geo.font)
        if not (isinstance(note.x, Real) and isinstance(note.y, Real)):
            continue  # a category or a date: not placed here
        at = data_to_px(geo, fig, note.xref, note.yref)(float(note.x), float(note.y))
        if at is None:
            continue
        x, y = at
        box = text_box(
            note.text, size, x + (note.xshift or 0), y - (note.yshift or 0),
            note.xanchor or "center",
            {"top": "top", "bottom": "bottom"}.get(note.yanchor or "middle", "middle"),
        )  # fmt: skip
        boxes.append((f"annotation {note.text[:30]!r}", box))
    labels, markers = point_label_boxes(geo, fig)
    boxes += [(f"point label {text[:30]!r}", box) for _, _, text, box in labels]
    problems += overlaps(boxes)
    hit = []
    for t_label, i_label, text, box in labels:
        for t_marker, i_marker, marker in markers:
            if overlap(box, marker):
                own = (t_label, i_label) == (t_marker, i_marker)
                hit.append(
                    f"point label {text[:30]!r} is printed on {'its' if own else 'a'} marker"
                )
                break
    return problems + hit[:4]


def _plotly_problems(fig: go.Figure, width: float) -> list[str]:
    geo = PlotlyGeometry(fig, width)
    return (
        _plotly_log_problems(fig)
        + _plotly_frame_problems(fig)
        + _plotly_text_problems(geo, fig)
        + _colorbar_problems(geo, fig)
    )


def figure_problems(
    fig: object,
    *,
    width: float = PAGE_WIDTH,
    min_text_px: float | None = None,
) -> list[str]:
    """What a reader could not read in ``fig`` (a plotly or a matplotlib figure), one line per
    problem; an empty list for a legible figure.

    Every figure: each logarithmic axis shows at least two labelled ticks over what it draws;
    no two texts overlap (titles, subplot titles, annotations, point labels, and for matplotlib
    tick and axis labels and legends, measured at the rendered size), no point label sits on a
    marker, no legend covers a label, and no colour bar with its tick labels runs over another
    panel. A plotly figure is laid out at ``width`` px (a book column at 1280 px unless its
    layout sets a width), text widths estimated from plotly's default font; its title must fit
    that width; a figure with frames must give each axis a range holding every frame (plotly
    keeps the first frame's autorange, and clips the others). With ``min_text_px``, a matplotlib
    figure's smallest text must be at least that many px when its image is shown at most
    ``width`` px wide (a static widget image: :data:`~kvattn.course.plots.checks.MIN_TEXT_PX` at
    :data:`~kvattn.course.plots.checks.PAGE_WIDTH`).

    Raises TypeError for anything but a plotly or a matplotlib figure.
    """
    if isinstance(fig, go.Figure):
        return _plotly_problems(fig, width)
    if isinstance(fig, Figure):
        return _mpl_problems(fig, width, min_text_px)
    raise TypeError(f"fig must be a plotly or a matplotlib figure, got {type(fig).__name__}")


def check_figure(
    fig: object, *, width: float = PAGE_WIDTH, min_text_px: float | None = None
) -> None:
    """Raise :class:`FigureCheckError` naming every problem :func:`figure_problems` finds in
    ``fig`` (TypeError for anything but a plotly or matplotlib figure)."""
    problems = figure_problems(fig, width=width, min_text_px=min_text_px)
    if problems:
        raise FigureCheckError(_describe(fig, problems))


def _describe(fig: object, problems: list[str]) -> str:
    if isinstance(fig, go.Figure):
        name = fig.layout.title.text or "untitled plotly figure"
    else:
        suptitle = getattr(fig, "_suptitle", None)
        titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
        name = (suptitle.get_text() if suptitle else "") or ", ".join(titles[:2]) or "untitled"
    return f"figure {name[:70]!r} is not legible:\n  " + "\n  ".join(problems)


#: What :func:`install_figure_check` replaced: (owner, attribute) → the original.
_ORIGINALS: dict[tuple[type, str], Callable] = {}


def _checked(original: Callable, raise_error: bool, **options: object) -> Callable:
    """``original`` (a figure's or canvas's method that shows a figure) checking it first."""

    @functools.wraps(original)
    def show(self: object, *args: object, **kwargs: object) -> object:
        fig = self.figure if isinstance(self, FigureCanvasBase) else self
        if isinstance(fig, go.Figure | Figure):
            problems = figure_problems(fig, **options if isinstance(fig, Figure) else {})
            if problems and raise_error:
                raise FigureCheckError(_describe(fig, problems))
            if problems:
                warnings.warn(FigureCheckWarning(_describe(fig, problems)), stacklevel=2)
        return original(self, *args, **kwargs)

    return show


def install_figure_check(mode: str | None = None) -> bool:
    """Check every figure when it is shown: a plotly figure when it is displayed
    (``fig.show()`` or as a cell's value), a matplotlib figure when it is turned into an image
    (the inline backend's display, ``savefig``: the live explorers' images), with
    :func:`figure_problems` (matplotlib figures also at
    :data:`~kvattn.course.plots.checks.MIN_TEXT_PX` on the page).

    ``mode``: ``"1"``/``"error"`` raises :class:`FigureCheckError`, ``"warn"`` warns with
    :class:`FigureCheckWarning`, ``"0"``/``""`` removes the check; ``None`` reads the
    environment variable :data:`FIGURE_CHECK_ENV` (``KVATTN_FIGURE_CHECK``), which importing
    :mod:`kvattn.course.plots` does, so a build or an nbval run with ``KVATTN_FIGURE_CHECK=1``
    checks every figure every chapter shows. Returns whether the check is now installed; ValueError
    for another ``mode``.
    """
    mode = os.environ.get(FIGURE_CHECK_ENV, "") if mode is None else mode
    mode = mode.strip().lower()
    _require_choice(FIGURE_CHECK_ENV, mode, ("", "0", "1", "error", "warn"))
    for (owner, name), original in _ORIGINALS.items():
        setattr(owner, name, original)
    _ORIGINALS.clear()
    if mode in ("", "0"):
        return False
    raise_error = mode != "warn"
    targets = [
        (BaseFigure, "show", {}),
        (BaseFigure, "_repr_mimebundle_", {}),
        (BaseFigure, "_ipython_display_", {}),
        (FigureCanvasBase, "print_figure", {"min_text_px": MIN_TEXT_PX}),
    ]
    for owner, name, options in targets:
        original = getattr(owner, name, None)
        if original is not None:
            _ORIGINALS[(owner, name)] = original
            setattr(owner, name, _checked(original, raise_error, **options))
    return True


#: Where :func:`place_point_labels` tries a point's label, in order.
LABEL_POSITIONS = (
    "top center", "bottom center", "middle right", "middle left",
    "top right", "top left", "bottom right", "bottom left",
)  # fmt: skip


def place_point_labels(fig: go.Figure, *, width: float = PAGE_WIDTH) -> go.Figure:
    """Give each text label of the figure's scatter points the first place of
    :data:`LABEL_POSITIONS` where it covers no marker and no label placed before it, at the
    figure's size in a book column of ``width`` px (where none is free, the first place): labels
    printed on markers or on one another were unreadable (chapters 5 and 11). Returns ``fig``,
    changed in place; call it after the last trace is added."""
    for index, trace in enumerate(fig.data):
        if trace.type not in ("scatter", "scattergl") or "text" not in (trace.mode or ""):
            continue
        n = len(trace.x or [])
        positions = [LABEL_POSITIONS[0]] * n
        for i in range(n):
            for where in LABEL_POSITIONS:
                positions[i] = where
                trace.textposition = positions
                labels, markers = point_label_boxes(PlotlyGeometry(fig, width), fig)
                mine = [b for t, j, _, b in labels if (t, j) == (index, i)]
                others = [b for t, j, _, b in labels if t < index or (t == index and j < i)]
                if not mine or not any(
                    overlap(mine[0], box) for box in others + [m for *_, m in markers]
                ):
                    break
            else:
                positions[i] = LABEL_POSITIONS[0]
        trace.textposition = positions
    return fig
