"""The chapters' general plots: lines, loss curves, heat-map grids, a slider, error bars, runs.

Lines, loss curves, heat-map grids, a line plot with a slider, points with error bars and runs on
their own x axes; the plots of estimates with their intervals are in
:mod:`kvattn.course.plots.estimates`.

Each takes tensors or sequences, checks them (:mod:`kvattn.course.plots.checks`) and returns a
plotly figure in the house style (:mod:`kvattn.course.plots.style`); nothing here trains or
measures.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from ..._checks import check_bool
from .checks import (
    _require_array,
    _require_color,
    _require_color_map,
    _require_distinct,
    _require_items,
    _require_length,
    _require_number,
    _require_threshold,
)
from .style import (
    LAYOUT,
    SIGNED_SCALE,
    _frame_names,
    _round,
    color,
    covering_range,
    log_axis,
    round_significant,
    slider,
    thinned,
)


def line_plot(
    x: Sequence[float] | torch.Tensor,
    series: Mapping[str, Sequence[float] | torch.Tensor],
    *,
    title: str,
    xaxis: str,
    yaxis: str,
    log_x: bool = False,
    log_y: bool = False,
    colors: Mapping[str, str] | None = None,
    height: int = 400,
) -> go.Figure:
    """One line per entry of ``series`` against the shared ``x``, at most
    :data:`~kvattn.course.plots.style.MAX_LINE_POINTS` points a line
    (:func:`~kvattn.course.plots.style.thinned`).

    With no series it is an empty, styled figure to add traces to. ``colors`` maps a series to
    its colour (missing or None: the house colour of its name). On a logarithmic axis every value
    must be positive: plotly would drop a 0 or a negative value without a word (use a linear
    axis for values that can be 0).

    Raises
    ------
    TypeError
        ``log_x`` or ``log_y`` is not a bool, ``series`` or ``colors`` is not a mapping, or a
        colour is not a str.
    ValueError
        A series' length differs from ``x``'s, a value is not finite, an ``x`` (with ``log_x``)
        or a series' value (with ``log_y``) is not positive (the message names the series, the
        value and its index), a colour is one plotly does not know, or ``height`` < 1.
    """
    check_bool("log_x", log_x, typed=True)
    check_bool("log_y", log_y, typed=True)
    xs = _require_array("x", x, 1, positive=log_x)
    _require_items("series", series, container=Mapping, empty=True)
    for name, y in series.items():
        _require_array(f"series {name!r}", y, xs.shape, "one value per x", positive=log_y)
    _require_color_map(colors)
    _require_number("height", height, 1, integer=True)
    fig = go.Figure()
    keep = thinned(len(xs))
    for name, y in series.items():
        c = (colors or {}).get(name) or color(name)
        y = _require_array(f"series {name!r}", y, xs.shape, "one value per x")[keep]
        fig.add_trace(
            go.Scatter(
                x=_round(xs[keep]), y=_round(y, 5), mode="lines", name=name, line=dict(color=c)
            )
        )
    fig.update_layout(title=title, xaxis_title=xaxis, yaxis_title=yaxis, height=height, **LAYOUT)
    if log_x:
        log_axis(fig, "x", _round(x))
    if log_y:
        log_axis(fig, "y")
    return fig


def loss_curves(
    histories: Mapping[str, object],
    *,
    title: str,
    yaxis: str = "loss",
    log_y: bool = True,
    height: int = 400,
) -> go.Figure:
    """Training-loss curves of several :class:`kvattn.train.History` records, at most
    :data:`~kvattn.course.plots.style.MAX_LINE_POINTS` points a curve
    (:func:`~kvattn.course.plots.style.thinned`).

    ``log_y`` (the default) draws the losses on a logarithmic axis, where a loss must be positive:
    a loss is never negative, and an exact 0 or a negative value there is a bug in the input that
    plotly would hide by dropping the point, so it is refused (pass ``log_y=False`` for a linear
    axis).

    Raises
    ------
    TypeError
        ``histories`` is not a mapping, a record has no ``steps`` and ``loss``, or ``log_y`` is
        not a bool.
    ValueError
        No records, a record whose ``loss`` and ``steps`` differ in length, steps that do not
        increase (a repeated step would draw a vertical line), a loss that is not finite, or not
        positive with ``log_y`` (the message names the record, the value and its index), or
        ``height`` < 1.
    """
    check_bool("log_y", log_y, typed=True)
    _require_items("histories", histories, container=Mapping)
    for name, h in histories.items():
        if not (hasattr(h, "steps") and hasattr(h, "loss")):
            raise TypeError(
                f"histories[{name!r}] must be a History (steps, loss), got {type(h).__name__}"
            )
        steps = _require_array(f"steps of {name!r}", h.steps, 1)
        back = np.diff(steps) <= 0
        if back.any():
            i = int(np.argmax(back)) + 1
            raise ValueError(
                f"steps of {name!r} must increase, got {steps[i - 1]} then {steps[i]} at index {i}"
            )
        _require_array(f"loss of {name!r}", h.loss, steps.shape, "one per step", positive=log_y)
    _require_number("height", height, 1, integer=True)
    fig = go.Figure()
    for name, h in histories.items():
        steps = _require_array(f"steps of {name!r}", h.steps, 1)
        keep = thinned(len(steps))
        fig.add_trace(
            go.Scatter(
                x=np.asarray(h.steps)[keep].tolist(),  # ints stay ints
                y=_round(_require_array(f"loss of {name!r}", h.loss, steps.shape)[keep], 5),
                mode="lines",
                name=name,
                line=dict(color=color(name)),
            )
        )
    fig.update_layout(title=title, xaxis_title="step", yaxis_title=yaxis, height=height, **LAYOUT)
    if log_y:
        log_axis(fig, "y")
    return fig


def heatmap_grid(
    panels: Mapping[str, torch.Tensor],
    *,
    x: torch.Tensor,
    y: torch.Tensor,
    title: str,
    xaxis: str,
    yaxis: str,
    cols: int = 4,
    symmetric: bool = True,
    shared_scale: bool = True,
    height: int | None = None,
) -> go.Figure:
    """Small multiples: one heat-map per entry of ``panels`` (each ``(len(y), len(x))``), on a
    diverging colour scale centred at 0 when ``symmetric``, shared by all panels when
    ``shared_scale``; otherwise each panel has its own scale and colour bar, and a panel whose
    entries are all positive (A_LM, A_P) a sequential scale over its range. Each panel's values
    are embedded to two significant digits of its largest magnitude.

    Raises ValueError when ``panels`` is empty, ``x`` or ``y`` is empty, a panel's shape is not
    ``(len(y), len(x))``, a value is not finite, or ``cols`` or ``height`` < 1; TypeError when
    ``symmetric`` or ``shared_scale`` is not a bool.
    """
    check_bool("symmetric", symmetric, typed=True)
    check_bool("shared_scale", shared_scale, typed=True)
    xs, ys = _require_array("x", x, 1), _require_array("y", y, 1)
    if xs.size == 0 or ys.size == 0:
        raise ValueError(f"x and y must not be empty, got {xs.size} x and {ys.size} y values")
    _require_items("panels", panels, container=Mapping)
    arrays = {
        name: _require_array(f"panel {name!r}", panel, (len(ys), len(xs)), "len(y), len(x)")
        for name, panel in panels.items()
    }
    _require_number("cols", cols, 1, integer=True)
    if height is not None:
        _require_number("height", height, 1, integer=True)
    names = list(panels)
    rows = -(-len(names) // cols)
    # a panel of its own scale has its colour bar and its labels (about 45 px at 9 px) between
    # it and the next panel: at 0.04 of the width they ran over the next panel (chapter 7)
    spacing = 0.04 if shared_scale else 0.1
    fig = make_subplots(
        rows=rows,
        cols=cols,
        subplot_titles=names,
        horizontal_spacing=spacing,
        vertical_spacing=0.12,
    )
    zmax = max(float(np.abs(a).max()) for a in arrays.values()) if symmetric else None
    for i, name in enumerate(names):
        scale = dict(colorscale=SIGNED_SCALE if symmetric else "Viridis")
        if symmetric:
            scale.update(zmin=-zmax, zmax=zmax)
        bar = dict(len=0.8)
        if not shared_scale:
            low, high = float(arrays[name].min()), float(arrays[name].max())
            if low > 0:  # a positive panel: its own range, not half a scale no entry reaches
                scale = dict(colorscale="Viridis", zmin=low, zmax=max(high, low * (1 + 1e-6)))
            elif symmetric:
                top = max(-low, high) or 1.0
                scale.update(zmin=-top, zmax=top)
            bar = _panel_colorbar(fig, i)
        fig.add_trace(
            go.Heatmap(
                # two significant digits of the panel's largest entry, as fine as the colour
                # scale: at three decimals chapter 4's four 61 × 61 panels embedded 99 kB
                z=round_significant(arrays[name], 2),
                x=_round(x, 3),
                y=_round(y, 3),
                showscale=not shared_scale or i == 0,
                colorbar=bar,
                **scale,
            ),
            row=i // cols + 1,
            col=i % cols + 1,
        )
        fig.update_xaxes(title_text=xaxis, row=i // cols + 1, col=i % cols + 1)
    fig.update_yaxes(title_text=yaxis, col=1)
    fig.update_layout(title=title, height=height or 320 * rows + 80, **LAYOUT)
    return fig


def _panel_colorbar(fig: go.Figure, i: int) -> dict:
    """A thin colour bar just right of subplot ``i`` (0-based), as tall as the subplot."""
    suffix = "" if i == 0 else str(i + 1)
    xd, yd = fig.layout[f"xaxis{suffix}"].domain, fig.layout[f"yaxis{suffix}"].domain
    return dict(
        x=xd[1] + 0.003, y=(yd[0] + yd[1]) / 2, len=yd[1] - yd[0], thickness=6,
        xanchor="left", tickfont=dict(size=10), exponentformat="e", nticks=4, xpad=2,
    )  # fmt: skip


def line_slider(
    x: Sequence[float] | torch.Tensor,
    fixed: Mapping[str, Sequence[float]],
    frames: Mapping[str, Mapping[str, Sequence[float]]],
    *,
    title: str,
    xaxis: str,
    yaxis: str,
    prefix: str,
    log_x: bool = False,
    log_y: bool = False,
    height: int = 440,
    colors: Mapping[str, str] | None = None,
) -> go.Figure:
    """Lines against a shared ``x``: the ``fixed`` series always, plus series that a slider
    switches between. ``frames`` maps each slider label to its series (same names in every frame).

    Raises ValueError when ``frames`` is empty, frames name different series, a series' length
    differs from ``x``'s, a value is not finite, an ``x`` (with ``log_x``) or a series' value
    (with ``log_y``) is not positive (plotly would drop it from the logarithmic axis), a colour
    is one plotly does not know, or ``height`` < 1; TypeError when a frame is not a mapping of
    series, ``log_x`` or ``log_y`` is not a bool, or a colour is not a str. Frames are named by
    their labels, or "index: label" where two labels read alike (so that each stays reachable).
    """
    check_bool("log_x", log_x, typed=True)
    check_bool("log_y", log_y, typed=True)
    xs = _require_array("x", x, 1, positive=log_x)
    labels = _require_items("frames", frames, container=Mapping)
    for label, series in frames.items():
        _require_items(f"frame {label!r}", series, container=Mapping, empty=True)
    names = list(frames[labels[0]])
    for label, series in frames.items():
        if list(series) != names:
            raise ValueError(
                f"frame {label!r} has series {list(series)}, expected {names} (as the first frame)"
            )
    _require_items("fixed", fixed, container=Mapping, empty=True)
    for where, series in [("fixed", fixed), *((f"frame {k!r}", v) for k, v in frames.items())]:
        for name, y in series.items():
            _require_array(
                f"{where} series {name!r}", y, xs.shape, "one value per x", positive=log_y
            )
    _require_color_map(colors)
    _require_number("height", height, 1, integer=True)
    fig = go.Figure()
    for name, y in fixed.items():
        fig.add_trace(
            go.Scatter(
                x=_round(x),
                y=_round(y, 6),
                mode="lines",
                name=name,
                line=dict(color=(colors or {}).get(name) or color(name)),
            )
        )
    first = frames[labels[0]]
    n_fixed = len(fixed)
    for name, y in first.items():
        fig.add_trace(
            go.Scatter(
                x=_round(x),
                y=_round(y, 6),
                mode="lines+markers",
                name=name,
                line=dict(color=(colors or {}).get(name) or color(name), width=3),
            )
        )
    names = _frame_names(labels)
    fig.frames = [
        go.Frame(
            name=name,
            data=[go.Scatter(y=_round(frames[label][n], 6), name=n) for n in first],
            traces=list(range(n_fixed, n_fixed + len(first))),
        )
        for name, label in zip(names, labels, strict=True)
    ]
    fig.update_layout(
        title=title,
        xaxis_title=xaxis,
        yaxis_title=yaxis,
        height=height,
        sliders=[slider(names, labels, prefix)],
        **LAYOUT,
    )
    if log_x:
        log_axis(fig, "x", _round(x))
    every = np.concatenate(
        [np.ravel(np.asarray(y, dtype=float)) for y in fixed.values()]
        + [np.ravel(np.asarray(y, dtype=float)) for f in frames.values() for y in f.values()]
    )
    if log_y:  # ticks and range over every frame: plotly keeps the first frame's autorange
        log_axis(fig, "y", every)
    fig.update_yaxes(range=covering_range(every, log=log_y))
    return fig


def points_with_errors(
    names: Sequence[str],
    means: Sequence[float],
    errors: Sequence[float] | None = None,
    *,
    title: str,
    yaxis: str,
    colors: Sequence[str | None] | None = None,
    height: int = 380,
) -> go.Figure:
    """One point per name with optional symmetric error bars (a dot plot: unlike bars on a
    truncated axis, it does not exaggerate small differences). ``colors``: one per name (None
    in the list, or no list: the house colour of the name, or the default blue).

    Raises
    ------
    TypeError
        ``names`` or ``colors`` is not a sequence, or a colour is neither a str nor None.
    ValueError
        ``names`` is empty or repeats a name (the two points would share one x and overlap),
        ``means``, ``errors`` or ``colors`` do not match ``names`` one to one, a mean or error is
        not finite, an error is negative, a colour is one plotly does not know, or ``height`` < 1.
    """
    n = len(_require_items("names", names))
    _require_distinct("names", names, "points of one name share one x and would overlap")
    _require_array("means", means, (n,), "one per name")
    if errors is not None:
        _require_array("errors", errors, (n,), "one per name", nonnegative=True)
    if colors is not None:
        _require_length("colors", _require_items("colors", colors, empty=True), n, "name")
        for i, c in enumerate(colors):
            if c is not None:
                _require_color(f"colors[{i}]", c)
    _require_number("height", height, 1, integer=True)
    default = [color(name) or "#0072B2" for name in names]
    fig = go.Figure(
        go.Scatter(
            x=list(names),
            y=_round(means, 5),
            mode="markers",
            marker=dict(
                size=12,
                color=default
                if colors is None
                else [d if c is None else c for c, d in zip(colors, default, strict=True)],
            ),
            # one colour for every bar: plotly would take the markers' colour list, which error bars
            # cannot use (the browser logs "Invalid color specifier" and draws them black)
            error_y=None
            if errors is None
            else dict(type="data", array=_round(errors, 5), color="#555555", thickness=1.5),
        )
    )
    fig.update_layout(title=title, yaxis_title=yaxis, height=height, **LAYOUT)
    return fig


def run_curves(
    curves: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    *,
    title: str,
    xaxis: str,
    yaxis: str,
    log_y: bool = False,
    threshold: tuple[float, str] | None = None,
    height: int = 400,
) -> go.Figure:
    """One line per run, each against its own x (runs measured at different points, e.g. a
    larger batch probed at other token counts), and an optional dashed horizontal line at a
    threshold, labelled, such as the value below which a run counts as collapsed.

    ``curves``: run label → ``(x, y)``, two sequences of equal length (one point per
    measurement); ``threshold``: ``(value, label)``, drawn across the whole x range. With
    ``log_y`` every y must be positive: plotly would drop a 0 or a negative value without a word
    (use ``log_y=False`` for values that can be 0, such as a loss change).

    Raises
    ------
    TypeError
        ``curves`` is not a mapping of pairs, or ``log_y`` is not a bool.
    ValueError
        No runs, a run with no points, a run whose x and y differ in length or hold a non-finite
        value, a y that is not positive with ``log_y`` (the message names the run, the value and
        its index), a threshold that is not (finite number, str) or not positive on a
        logarithmic axis, or ``height`` < 1.
    """
    check_bool("log_y", log_y, typed=True)
    _require_items("curves", curves, container=Mapping)
    _require_number("height", height, 1, integer=True)
    _require_threshold(threshold, log_y)
    drawn = {}
    for label, pair in curves.items():
        if not isinstance(pair, tuple | list) or len(pair) != 2:
            raise TypeError(f"curves[{label!r}] must be a pair (x, y), got {pair!r:.80}")
        x = _require_array(f"curves[{label!r}] x", pair[0], 1)
        if x.size == 0:
            raise ValueError(f"curves[{label!r}] has no points")
        y = _require_array(f"curves[{label!r}] y", pair[1], x.shape, "one y per x", positive=log_y)
        drawn[label] = (x, y)
    fig = go.Figure()
    for label, (x, y) in drawn.items():
        fig.add_trace(
            go.Scatter(
                x=_round(x),
                y=_round(y, 5),
                mode="lines+markers",
                name=label,
                marker=dict(size=4),
                line=dict(color=color(label)),
            )
        )
    if threshold is not None:
        lo = min(float(x.min()) for x, _ in drawn.values())
        hi = max(float(x.max()) for x, _ in drawn.values())
        fig.add_trace(
            go.Scatter(
                x=[lo, hi],
                y=[float(threshold[0])] * 2,
                mode="lines",
                name=threshold[1],
                line=dict(color="#000000", dash="dash"),
            )
        )
    fig.update_layout(title=title, xaxis_title=xaxis, yaxis_title=yaxis, height=height, **LAYOUT)
    if log_y:
        fig.update_yaxes(type="log", exponentformat="power")
    return fig
