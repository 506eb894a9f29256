"""Plots of estimates with their uncertainty: interval bands, dose-response, a forest plot.

Chapter 5's verdicts drawn: a paired difference along training inside its band
(:func:`interval_bands`), a measured response with its intervals at each dose
(:func:`dose_response`), and one interval per comparison against a margin (:func:`forest`). Each
checks its inputs (:mod:`kvattn.course.plots.checks`) and returns a plotly figure in the house
style (:mod:`kvattn.course.plots.style`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from numbers import Real

import numpy as np
import plotly.graph_objects as go
import torch

from .checks import (
    _require_array,
    _require_color,
    _require_distinct,
    _require_items,
    _require_length,
    _require_number,
)
from .legibility import place_point_labels
from .style import (
    LAYOUT,
    _round,
    color,
)


def interval_bands(
    x: Sequence[float] | torch.Tensor,
    series: Mapping[str, tuple[Sequence[float], Sequence[float], Sequence[float]]],
    *,
    title: str,
    xaxis: str,
    yaxis: str,
    reference: float | None = 0.0,
    height: int = 400,
) -> go.Figure:
    """One line per entry of ``series`` against the shared ``x``, inside a shaded interval: a
    paired difference along training with its confidence interval, say.

    ``series``: name → ``(center, lower, upper)``, three sequences of ``len(x)`` values with
    ``lower ≤ center ≤ upper``; each takes the house colour of its name. ``reference`` draws a
    dotted horizontal line (``None``: none), such as the zero of a difference.

    Raises
    ------
    TypeError
        ``series`` is not a mapping of triples, or ``reference`` is not a number.
    ValueError
        No series, a sequence whose length differs from ``x``'s, a value that is not finite, a
        center outside its interval, an infinite reference, or ``height`` < 1.
    """
    xs = _require_array("x", x, 1)
    _require_items("series", series, container=Mapping)
    _require_number("height", height, 1, integer=True)
    if reference is not None:
        biggest = float(np.finfo(float).max)  # refuses ±inf
        _require_number("reference", reference, -biggest, biggest)
    x = _round(xs)
    fig = go.Figure()
    for name, triple in series.items():
        if not isinstance(triple, tuple | list) or len(triple) != 3:
            raise TypeError(f"series[{name!r}] must be (center, lower, upper), got {triple!r:.80}")
        center, lower, upper = (
            _require_array(f"series[{name!r}] {part}", values, xs.shape, "one value per x")
            for part, values in zip(("center", "lower", "upper"), triple, strict=True)
        )
        outside = (lower > center) | (center > upper)
        if outside.any():
            i = int(np.argmax(outside))
            raise ValueError(
                f"series[{name!r}] center {center[i]} lies outside its interval "
                f"[{lower[i]}, {upper[i]}] at index {i}"
            )
        rgb = (color(name) or "#0072B2").lstrip("#")
        shade = "rgba({}, {}, {}, 0.2)".format(*(int(rgb[j : j + 2], 16) for j in (0, 2, 4)))
        for edge, fill in ((upper, {}), (lower, dict(fill="tonexty", fillcolor=shade))):
            fig.add_trace(
                go.Scatter(
                    x=x,
                    y=_round(edge, 5),
                    mode="lines",
                    line=dict(width=0),
                    hoverinfo="skip",
                    showlegend=False,
                    legendgroup=name,
                    **fill,
                )
            )
        fig.add_trace(
            go.Scatter(
                x=x,
                y=_round(center, 5),
                mode="lines+markers",
                name=name,
                legendgroup=name,
                marker=dict(size=4),
                line=dict(color="#" + rgb),
            )
        )
    if reference is not None:
        fig.add_hline(y=float(reference), line_dash="dot", line_color="#777777")
    fig.update_layout(title=title, xaxis_title=xaxis, yaxis_title=yaxis, height=height, **LAYOUT)
    return fig


def dose_response(
    betas: Sequence[float],
    violation: Sequence[Sequence[float]],
    final: Sequence[Sequence[float]],
    *,
    title: str,
    height: int = 420,
) -> go.Figure:
    """Final loss against measured exchange violation, one point per β (mean over seeds, ± one
    standard error both ways) over small grey points, one per run (one trace per seed, so the
    hover names β and seed): chapter 5's Swish-β dose-response.

    ``violation[i][s]`` and ``final[i][s]`` are the trained layer's violation and its final loss
    (nats/token) at ``betas[i]`` and seed s.

    Raises ValueError when ``betas`` is empty, a β is not > 0 (Swish-β is defined for β > 0), the
    two tables are not ``(len(betas), seeds)`` with at least 2 seeds, or a value (β included) is
    not finite; TypeError when a β is no number (a bool or a str included: it would be drawn as
    1 or read as a number).
    """
    listed = _require_items("betas", betas)
    n = len(listed)
    for i, b in enumerate(listed):
        if isinstance(b, bool) or not isinstance(b, Real):
            raise TypeError(f"betas must hold numbers, got {type(b).__name__} {b!r} at index {i}")
    if (_require_array("betas", betas, 1) <= 0).any():
        i = next(i for i, b in enumerate(listed) if b <= 0)
        raise ValueError(f"betas must be > 0 (a Swish-β), got {listed[i]!r} at index {i}")
    v = _require_array("violation", violation, 2, "one row per β, one column per seed")
    if v.shape[0] != n:
        raise ValueError(f"violation has {v.shape[0]} rows, expected one per β ({n})")
    y = _require_array("final", final, v.shape, "the shape of violation")
    if v.shape[1] < 2:
        raise ValueError(f"need at least 2 seeds per β for error bars, got {v.shape[1]}")
    root = np.sqrt(v.shape[1])
    fig = go.Figure()
    for s in range(v.shape[1]):
        fig.add_trace(
            go.Scatter(
                x=_round(v[:, s]), y=_round(y[:, s], 5), mode="markers",
                marker=dict(color="#BBBBBB", size=6), showlegend=s == 0, name="one run",
                text=[f"β = {b:g}, seed {s}" for b in betas], hoverinfo="text+x+y",
            )
        )  # fmt: skip
    fig.add_trace(
        go.Scatter(
            x=_round(v.mean(1)),
            y=_round(y.mean(1), 5),
            mode="markers+text",
            text=[f"β = {b:g}" for b in betas],
            textposition="top center",
            marker=dict(size=11, color="#D55E00"),
            name="mean over seeds",
            error_x=dict(type="data", array=_round(v.std(1, ddof=1) / root), color="#555555"),
            error_y=dict(type="data", array=_round(y.std(1, ddof=1) / root, 5), color="#555555"),
        )
    )
    fig.update_layout(
        title=title,
        xaxis_title="exchange violation of the trained layer on its inputs",
        yaxis_title="final validation loss (nats/token)",
        height=height,
        **LAYOUT,
    )
    return place_point_labels(fig)  # beside its marker, clear of the runs' grey points


def forest(
    names: Sequence[str],
    means: Sequence[float],
    lower: Sequence[float],
    upper: Sequence[float],
    *,
    band: float | None,
    title: str,
    xaxis: str,
    colors: Sequence[str | None] | None = None,
    height: int | None = None,
) -> go.Figure:
    """A forest plot: one row per name (top to bottom in the order given), its estimate as a
    point and its interval as a horizontal bar, a dotted line at 0 and, when ``band`` is given,
    the shaded region ±``band`` (an equivalence margin: an interval wholly inside it passes the
    equivalence test at the interval's level).

    ``colors``: one per name (None: the house colour of the name's first word, or blue).

    Raises
    ------
    TypeError
        ``names`` or ``colors`` is not a sequence, or a colour is neither a str nor None.
    ValueError
        ``names`` empty or repeating a name, ``means``/``lower``/``upper``/``colors`` not one per
        name, a value that is not finite, an estimate outside its interval, ``band`` not positive,
        or ``height`` < 1.
    """
    n = len(_require_items("names", names))
    _require_distinct("names", names, "rows of one name would overlap")
    center = _require_array("means", means, (n,), "one per name")
    lo = _require_array("lower", lower, (n,), "one per name")
    hi = _require_array("upper", upper, (n,), "one per name")
    outside = (lo > center) | (center > hi)
    if outside.any():
        i = int(np.argmax(outside))
        raise ValueError(
            f"names[{i}] = {names[i]!r}: estimate {center[i]} outside [{lo[i]}, {hi[i]}]"
        )
    if band is not None:
        _require_number("band", band, 0.0)
        if band <= 0:
            raise ValueError(f"band must be positive, got {band!r}")
    if colors is not None:
        _require_length("colors", _require_items("colors", colors, empty=True), n, "name")
        for i, c in enumerate(colors):
            if c is not None:
                _require_color(f"colors[{i}]", c)
    height = 120 + 28 * n if height is None else height
    _require_number("height", height, 1, integer=True)
    picked = [
        (None if colors is None else colors[i])
        or color(str(name).split()[0].strip(",:"))
        or "#0072B2"
        for i, name in enumerate(names)
    ]
    fig = go.Figure(
        go.Scatter(
            x=_round(center, 5),
            y=list(names),
            mode="markers",
            marker=dict(size=10, color=picked),
            error_x=dict(
                type="data",
                symmetric=False,
                array=_round(hi - center, 5),
                arrayminus=_round(center - lo, 5),
                color="#555555",
                thickness=1.5,
            ),
            showlegend=False,
        )
    )
    if band is not None:
        fig.add_vrect(x0=-band, x1=band, fillcolor="rgba(0, 158, 115, 0.12)", line_width=0)
    fig.add_vline(x=0.0, line_dash="dot", line_color="#777777")
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(title=title, xaxis_title=xaxis, height=height, **LAYOUT)
    return fig
