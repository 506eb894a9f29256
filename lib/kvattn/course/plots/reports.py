"""Plots of the package's run records: benchmark ratios (:mod:`kvattn.benchmark`) and the
collapse measures that pre-training probes (:func:`kvattn.diagnostics.probes.load_probes`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from itertools import pairwise

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..._checks import check_bool
from ...benchmark import BARS, Ratio
from .checks import (
    _require_array,
    _require_color_map,
    _require_items,
    _require_number,
    _require_threshold,
    _require_value,
)
from .style import LAYER_COLORS, LAYOUT, _round, log_axis


def benchmark_ratios(results: Sequence[dict]) -> go.Figure:
    """The ratios of :mod:`kvattn.benchmark` results as a dot plot on a log axis: the median of
    each ratio with its quartiles as error bars; a flagged ratio (impossible, implausible or
    unstable) is drawn hollow, and its hover text says why. A dash marks the target in
    :data:`~kvattn.benchmark.reporting.BARS` of each ratio that has one (for the training step,
    its FLOP ratio, which a diamond marks, times ``BARS["train_over_flops"]``), the ceiling being
    held to the bar of the ratio it bounds; a dotted line marks 1. The ceiling is the constant-G
    model's decoding speed over GPT's, the most that PLDR-LLM with the KV + G cache can reach
    (see :func:`~kvattn.benchmark.runs.bench_generate`). Training lines are time ratios (the
    lower the better), generation lines speed ratios (the higher the better).

    ``results``: dicts from :func:`~kvattn.benchmark.runs.bench_train` and/or
    :func:`~kvattn.benchmark.runs.bench_generate`; ratios a result does not hold are skipped.
    Raises TypeError when ``results`` is not a sequence of dicts, ValueError when they hold no
    ratio.
    """
    _require_items("results", results, Mapping, empty=True)
    metrics = {
        "train_pldr_over_gpt": "train step: PLDR / GPT",
        "kvg_over_none": "generate: kv+g / none",
        "kv_over_none": "generate: kv / none",
        "pldr_kvg_over_gpt_kv": "generate: PLDR kv+g / GPT kv",
        "constant_g_kv_over_gpt_kv": "generate: ceiling, constant-G kv / GPT kv",
    }
    bars = {
        "kvg_over_none": BARS["kvg_over_none"],
        "pldr_kvg_over_gpt_kv": BARS["pldr_kvg_over_gpt_kv"],
        "constant_g_kv_over_gpt_kv": BARS["pldr_kvg_over_gpt_kv"],
    }
    points = []  # (name, ratio, bar or None, FLOP ratio or None)
    for r in results:
        for key, label in metrics.items():
            if not isinstance(r.get(key), Ratio):
                continue
            flops = r.get("train_flops_pldr_over_gpt") if key == "train_pldr_over_gpt" else None
            bar = BARS["train_over_flops"] * flops if flops else bars.get(key)
            points.append((f"{label} ({r['config']})", r[key], bar, flops))
    if not points:
        raise ValueError("results hold no benchmark ratios (expected bench_train/bench_generate)")
    fig = go.Figure(
        go.Scatter(
            x=[name for name, *_ in points],
            y=[round(r.median, 4) for _, r, *_ in points],
            name="measured",
            mode="markers",
            marker=dict(
                size=12,
                color="#0072B2",
                symbol=["circle-open" if r.flag else "circle" for _, r, *_ in points],
            ),
            error_y=dict(
                type="data",
                symmetric=False,
                array=[round(r.q3 - r.median, 4) for _, r, *_ in points],
                arrayminus=[round(r.median - r.q1, 4) for _, r, *_ in points],
                color="#555555",
                thickness=1.5,
            ),
            text=[f"⚠ {r.flag}" if r.flag else f"{r.rounds} rounds" for _, r, *_ in points],
            hovertemplate="%{x}: %{y:.2f}×<br>%{text}<extra></extra>",
        )
    )
    for name, column, symbol, color, size, width in (
        ("course's target", 2, "line-ew-open", "#D55E00", 22, 3),
        ("FLOP ratio", 3, "diamond-open", "#009E73", 10, 1.5),
    ):
        marked = [(p[0], p[column]) for p in points if p[column] is not None]
        if marked:
            fig.add_trace(
                go.Scatter(
                    x=[x for x, _ in marked],
                    y=[round(y, 4) for _, y in marked],
                    name=name,
                    mode="markers",
                    marker=dict(size=size, symbol=symbol, color=color, line=dict(width=width)),
                    hovertemplate=f"%{{x}}: {name} %{{y:.2f}}×<extra></extra>",
                )
            )
    fig.add_hline(y=1, line_dash="dot", line_color="#888888")
    fig.update_yaxes(type="log")
    fig.update_layout(
        title="Ratios: medians and quartiles (hollow: flagged), with the course's targets",
        yaxis_title="ratio",
        height=480,
        legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0),
        **{**LAYOUT, "margin": {**LAYOUT["margin"], "t": 110}},  # room for the legend's row
    )
    return fig


#: The panels of :func:`collapse_trajectories`: per-layer measure and its panel title.
_COLLAPSE_PANELS = {  # short titles: three panels share a row on a book page
    "G_order_mean": "G_LM order, |mean|",
    "G_order_rms": "G_LM order, RMS",
    "G_spread": "G_LM rel. spread",
    "A_sigma_ratio": "A: σ2/σ1",
    "A_row_spread": "A: row spread",
}
#: The whole-model measures of the last panel: name, legend label, colour, dash.
_COLLAPSE_FUNCTIONAL = (
    ("delta_loss", "Δloss, donor's G_LM (nats/token)", "#000000", "solid"),
    ("agreement", "greedy agreement, donor's G_LM", "#0072B2", "dot"),
    ("share_of_g_effect", "Δloss / Δloss of G_LM = I", "#D55E00", "dash"),
)


def _zeros_at_floor(
    x: list, rows: list[list[float | None]], zeros: list[tuple[int, int]], legend: bool
) -> go.Scatter:
    """The exact zeros ``(step index, layer)`` of one panel's ``rows`` as crosses at its floor:
    one decade below the decade of the smallest positive value (1 when there is none)."""
    positive = [v for row in rows for v in row if v is not None and v > 0]
    floor = float(f"1e{math.floor(math.log10(min(positive))) - 1}") if positive else 1.0
    return go.Scatter(
        x=[x[i] for i, _ in zeros],
        y=[floor] * len(zeros),
        mode="markers",
        name="exactly 0 (drawn at the axis floor)",
        legendgroup="exactly 0",
        showlegend=legend,
        marker=dict(
            symbol="x", size=9, color=[LAYER_COLORS[j % len(LAYER_COLORS)] for _, j in zeros]
        ),
        text=[f"layer {j}: exactly 0" for _, j in zeros],
        hovertemplate="step %{x}: %{text}, drawn at %{y}<extra></extra>",
    )


def collapse_trajectories(probes: Mapping, *, log_y: bool = True, height: int = 620) -> go.Figure:
    """The collapse measures of a pre-training run against the step: one panel per measure
    family, a line per layer (the mean over heads), and a last panel with the G_LM
    substitution's loss change, greedy agreement and share of the G effect.

    ``probes``: the trajectories as :func:`kvattn.diagnostics.probes.load_probes` returns them
    (or ``PretrainResult.probes``): ``step`` (ints, increasing) and, for each per-layer measure of
    :data:`kvattn.diagnostics.collapse.COLLAPSE_LAYER_MEASURES`, one list of L numbers per step,
    for each whole-model one a number per step; ``None`` (undefined) is drawn as a gap.
    ``log_y``: the five per-layer panels on logarithmic axes (collapse spans decades). A log axis
    has no place for 0, and plotly would drop the point without a word, yet an exact 0 is
    collapse itself: it is drawn at the panel's floor, one decade below the decade of its
    smallest positive value (1 if it has none), as a cross in the layer's colour, where the
    layer's line stops; the crosses' legend entry says "exactly 0" and their hover gives the layer
    and the floor. Figures without an exact 0 have no such trace.

    Raises
    ------
    TypeError
        ``probes`` is not a mapping, or ``log_y`` is not a bool.
    ValueError
        No steps, steps that are not increasing ints ≥ 0, a missing measure, a measure without
        one entry per step or with a different number of layers, a value that is neither a
        finite number nor None, a negative per-layer value with ``log_y`` (the measures are
        sizes, and a log axis would drop it), or ``height`` < 1.
    """
    check_bool("log_y", log_y, typed=True)
    _require_items("probes", probes, container=Mapping)
    _require_number("height", height, 1, integer=True)
    needed = ["step", *_COLLAPSE_PANELS, *(n for n, *_ in _COLLAPSE_FUNCTIONAL)]
    missing = [n for n in needed if n not in probes]
    if missing:
        raise ValueError(
            f"probes lack {', '.join(missing)} (expected kvattn.diagnostics.load_probes)"
        )
    steps = probes["step"]
    if not isinstance(steps, Sequence) or len(steps) == 0:
        raise ValueError(f"probes['step'] must be a non-empty list of steps, got {steps!r:.80}")
    for i, s in enumerate(steps):
        _require_number(f"probes['step'][{i}]", s, 0, integer=True)
    if any(b <= a for a, b in pairwise(steps)):
        raise ValueError(f"probes['step'] must increase, got {list(steps)!r:.80}")
    n = len(steps)
    layers = None
    per_layer = {}
    for name in _COLLAPSE_PANELS:
        rows = probes[name]
        if not isinstance(rows, Sequence) or len(rows) != n:
            raise ValueError(f"probes[{name!r}] must be a list with one entry per step ({n})")
        for i, row in enumerate(rows):
            if not isinstance(row, Sequence) or isinstance(row, str) or len(row) == 0:
                raise ValueError(f"probes[{name!r}][{i}] must be a non-empty list, one per layer")
            layers = len(row) if layers is None else layers
            if len(row) != layers:
                raise ValueError(
                    f"probes[{name!r}][{i}] has {len(row)} layers, expected {layers} (as before)"
                )
        per_layer[name] = [
            [_require_value(f"probes[{name!r}][{i}][{j}]", v) for j, v in enumerate(row)]
            for i, row in enumerate(rows)
        ]
        for i, row in enumerate(per_layer[name] if log_y else []):
            for j, v in enumerate(row):
                if v is not None and v < 0:
                    raise ValueError(
                        f"probes[{name!r}][{i}][{j}] must be ≥ 0 on a logarithmic axis (the "
                        f"measure is a size), got {probes[name][i][j]!r}"
                    )
    functional = {}
    for name, *_ in _COLLAPSE_FUNCTIONAL:
        values = probes[name]
        if not isinstance(values, Sequence) or len(values) != n:
            raise ValueError(f"probes[{name!r}] must be a list with one entry per step ({n})")
        functional[name] = [
            _require_value(f"probes[{name!r}][{i}]", v) for i, v in enumerate(values)
        ]

    fig = make_subplots(
        rows=2,
        cols=3,
        subplot_titles=[*_COLLAPSE_PANELS.values(), "donor's G_LM"],
        vertical_spacing=0.2,
        horizontal_spacing=0.1,
    )
    x = list(steps)
    zeros_shown = False
    for k, name in enumerate(_COLLAPSE_PANELS):
        zeros = [
            (i, j) for i, row in enumerate(per_layer[name]) for j, v in enumerate(row) if v == 0
        ]
        zeros = zeros if log_y else []  # a linear axis draws 0 itself
        for layer in range(layers):
            fig.add_trace(
                go.Scatter(
                    x=x,
                    # the line stops where the measure is exactly 0: its cross is drawn below
                    y=[
                        None if zeros and row[layer] == 0 else row[layer] for row in per_layer[name]
                    ],
                    mode="lines+markers",
                    name=f"layer {layer}",
                    legendgroup=f"layer {layer}",
                    showlegend=k == 0,
                    line=dict(color=LAYER_COLORS[layer % len(LAYER_COLORS)]),
                    marker=dict(size=4),
                ),
                k // 3 + 1,
                k % 3 + 1,
            )
        if zeros:
            fig.add_trace(
                _zeros_at_floor(x, per_layer[name], zeros, not zeros_shown), k // 3 + 1, k % 3 + 1
            )
            zeros_shown = True
        if log_y:  # at least two labels over what the panel draws
            fig.update_yaxes(exponentformat="power", row=k // 3 + 1, col=k % 3 + 1)
            log_axis(fig, "y", row=k // 3 + 1, col=k % 3 + 1)
    for name, label, c, dash in _COLLAPSE_FUNCTIONAL:
        fig.add_trace(
            go.Scatter(
                x=x,
                y=functional[name],
                mode="lines+markers",
                name=label,
                line=dict(color=c, dash=dash),
                marker=dict(size=4),
            ),
            2,
            3,
        )
    # a few unrotated step ticks, and the legend in rows under the panels: at the side it took a
    # third of a book page's width and the panels' titles ran into each other
    fig.update_xaxes(nticks=4, tickangle=0)
    fig.update_xaxes(title_text="step", row=2)
    blocks = probes.get("probe_blocks")
    fig.update_layout(
        title="Collapse measures during training"
        + (f" ({blocks} probe blocks, mean over heads)" if blocks else " (mean over heads)"),
        height=height,
        legend=dict(orientation="h", x=0, xanchor="left", y=-0.14, yanchor="top"),
        **{**LAYOUT, "margin": {**LAYOUT["margin"], "b": 120}},
    )
    return fig


def run_panels(
    panels: Mapping[str, Mapping[str, tuple[Sequence[float], Sequence[float]]]],
    *,
    title: str,
    xaxis: str,
    yaxis: str,
    log_y: bool = False,
    threshold: tuple[float, str] | None = None,
    dashed: Sequence[str] = (),
    colors: Mapping[str, str] | None = None,
    cols: int = 3,
    panel_height: int = 210,
) -> go.Figure:
    """Small multiples of run records: one panel per group of runs (the collapse hunt's runs
    grouped by the knob they turn), a line per series in each, on shared axes so that panels
    compare at a glance (ten runs in one panel are a tangle of lines of similar colours).

    ``panels``: panel title → (series name → ``(x, y)``, two sequences of equal length). A series
    name keeps one style in every panel and appears once in the legend, under the panels: its
    colour is ``colors[name]`` when given, else :data:`~kvattn.course.plots.style.LAYER_COLORS` in
    order of first appearance, and it is dashed when named in ``dashed`` (a series and its dashed
    companion, e.g. two measures of one run, can share a colour). ``threshold``:
    ``(value, label)``, a black dotted line across every panel. With ``log_y`` every y must be
    positive (plotly would drop a 0 without a word).

    Raises
    ------
    TypeError
        ``panels`` is not a mapping of mappings of pairs, ``log_y`` is not a bool, or ``colors``
        is not a mapping.
    ValueError
        No panels, an empty panel, a series with no points, x and y of different lengths, a
        non-finite value, a y that is not positive with ``log_y``, more series names than
        :data:`~kvattn.course.plots.style.LAYER_COLORS` has colours, a threshold that is not
        (positive number on a log axis, str), or ``cols`` or ``panel_height`` < 1.
    """
    check_bool("log_y", log_y, typed=True)
    _require_items("panels", panels, container=Mapping)
    if colors is not None:
        _require_color_map(colors)
    _require_number("cols", cols, 1, integer=True)
    _require_number("panel_height", panel_height, 1, integer=True)
    drawn: dict[str, dict[str, tuple]] = {}
    names: list[str] = []
    for panel, series in panels.items():
        _require_items(f"panels[{panel!r}]", series, container=Mapping)
        drawn[panel] = {}
        for name, pair in series.items():
            where = f"panels[{panel!r}][{name!r}]"
            if not isinstance(pair, tuple | list) or len(pair) != 2:
                raise TypeError(f"{where} must be a pair (x, y), got {pair!r:.80}")
            x = _require_array(f"{where} x", pair[0], 1)
            if x.size == 0:
                raise ValueError(f"{where} has no points")
            y = _require_array(f"{where} y", pair[1], x.shape, "one y per x", positive=log_y)
            drawn[panel][name] = (x, y)
            names += [name] if name not in names else []
    if len(names) > len(LAYER_COLORS):
        raise ValueError(f"{len(names)} series names, more than the {len(LAYER_COLORS)} colours")
    _require_threshold(threshold, log_y)
    rows = -(-len(drawn) // cols)
    fig = make_subplots(
        rows=rows,
        cols=cols,
        subplot_titles=list(drawn),
        shared_xaxes="all",
        shared_yaxes="all",
        vertical_spacing=0.5 / max(rows * 2, 1) if rows > 1 else 0.1,
        horizontal_spacing=0.04,
    )
    shown: set[str] = set()
    for k, series in enumerate(drawn.values()):
        at = dict(row=k // cols + 1, col=k % cols + 1)
        for name, (x, y) in series.items():
            colour = (colors or {}).get(name) or LAYER_COLORS[names.index(name)]
            fig.add_trace(
                go.Scatter(
                    x=_round(x, 3),
                    y=_round(y, 6),
                    mode="lines",
                    name=name,
                    legendgroup=name,
                    showlegend=name not in shown,
                    line=dict(color=colour, dash="dash" if name in dashed else None, width=1.6),
                ),
                **at,
            )
            shown.add(name)
        if threshold is not None:
            lo = min(float(x.min()) for x, _ in series.values())
            hi = max(float(x.max()) for x, _ in series.values())
            fig.add_trace(
                go.Scatter(
                    x=[lo, hi],
                    y=[float(threshold[0])] * 2,
                    mode="lines",
                    name=threshold[1],
                    legendgroup="threshold",
                    showlegend=k == 0,
                    line=dict(color="#000000", dash="dot", width=1),
                ),
                **at,
            )
    if log_y:  # a label a decade, or round values where the panels span less than two
        fig.update_yaxes(exponentformat="power")
        log_axis(fig, "y")
    fig.update_xaxes(nticks=4, tickangle=0)
    fig.update_xaxes(title_text=xaxis, row=rows)
    fig.update_yaxes(title_text=yaxis, col=1)
    fig.update_annotations(font_size=12)
    fig.update_layout(
        title=title,
        height=rows * panel_height + 140,
        legend=dict(orientation="h", x=0, xanchor="left", y=-0.3 / rows, yanchor="top"),
        **{**LAYOUT, "margin": {**LAYOUT["margin"], "b": 110}},
    )
    return fig
