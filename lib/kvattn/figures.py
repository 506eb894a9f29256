"""Plotly figures of the course: the static-book face of every explorer, and the chapters' plots.

Figures are built from the outputs of the compute functions in the other modules; nothing here
trains or measures. Every explorer's plotly face precomputes its frames, so sliders and buttons
work in the static book with no kernel. Sizes are kept small (rounded values, modest grids)
because each figure's data is embedded in its page.

Bad arguments raise before anything is drawn: a ``ValueError`` naming the argument, the value and
what is allowed (plotly itself would silently drop unmatched or non-finite points, and sliders
would clamp), a ``TypeError`` for the wrong kind of value. The checks are the ``_require_*``
helpers below, shared with :mod:`kvattn.widgets`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Sized
from itertools import pairwise
from numbers import Integral, Real

import numpy as np
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from .benchmark import BARS, Ratio
from .diagnostics import (
    DEDUCTIVE,
    DeductiveProfile,
    HeadProfile,
    commutant_projection,
    commutant_residual,
)
from .interaction import eigendecompose, symmetrise
from .memories import SlotReport, lift_labels
from .symmetry import SymmetryProfile, input_contour

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

LAYOUT = dict(template="plotly_white", font=dict(size=13), margin=dict(l=60, r=20, t=90, b=50))


# ---------------------------------------------------------------------------------------------
# Validation shared with widgets.py


def _require_number(
    name: str, value: object, low: float, high: float = np.inf, *, integer: bool = False
) -> None:
    """``value`` is a real number (an int when ``integer``) in ``[low, high]``."""
    if isinstance(value, bool) or not isinstance(value, Integral if integer else Real):
        kind = "an int" if integer else "a number"
        raise TypeError(f"{name} must be {kind}, got {type(value).__name__} {value!r}")
    if not low <= value <= high:  # also refuses NaN
        allowed = f"≥ {low:g}" if high == np.inf else f"in [{low:g}, {high:g}]"
        raise ValueError(f"{name} must be {allowed}, got {value!r}")


def _require_index(name: str, value: object, n: int, of: str) -> None:
    """``value`` indexes one of ``n`` items; ``of`` names them for the message ("layers")."""
    if n < 1:
        raise ValueError(f"there is no {name} to choose: the number of {of} is 0")
    try:
        _require_number(name, value, 0, n - 1, integer=True)
    except ValueError:
        raise ValueError(
            f"{name} must be in 0 … {n - 1} (number of {of}: {n}), got {value!r}"
        ) from None


def _require_choice(name: str, value: object, options: Sequence) -> None:
    if value not in options:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, options))}; got {value!r}")


def _require_items(
    name: str,
    items: object,
    kind: type | None = None,
    *,
    container: type = Sequence,
    empty: bool = False,
) -> list:
    """``items`` (a ``container``: a Sequence, or a Mapping whose keys are listed) as a list,
    non-empty unless ``empty``, each item of type ``kind`` when given."""
    if isinstance(items, str | bytes) or not isinstance(items, container):
        what = "a mapping" if container is Mapping else "a sequence"
        raise TypeError(f"{name} must be {what}, got {type(items).__name__}")
    if len(items) == 0 and not empty:
        raise ValueError(f"{name} is empty: nothing to show")
    listed = list(items)
    if kind is not None:
        for i, item in enumerate(listed):
            if not isinstance(item, kind):
                raise TypeError(f"{name}[{i}] must be a {kind.__name__}, got {type(item).__name__}")
    return listed


def _require_length(name: str, items: Sized, n: int, per: str) -> None:
    if len(items) != n:
        raise ValueError(f"{name} has length {len(items)}, expected {n} (one per {per})")


def _require_array(
    name: str,
    values: object,
    shape: tuple[int, ...] | int,
    per: str = "",
    *,
    positive: bool = False,
    nonnegative: bool = False,
    square: bool = False,
) -> np.ndarray:
    """``values`` (a tensor or nested sequence of numbers) as a finite float array of ``shape``
    (an int: that many dimensions, any sizes); ``per`` says what sets the expected sizes.
    ``positive`` is for logarithmic axes, ``nonnegative`` for error bars, ``square`` for
    matrices in the last two axes."""
    if isinstance(values, torch.Tensor):
        if values.device.type == "meta":
            raise ValueError(f"{name} is a meta tensor: it has a shape but no values to draw")
        array = values.detach().cpu().to(torch.float64).numpy()
    elif isinstance(values, str | bytes):
        raise TypeError(f"{name} must hold numbers, got a string {values!r}")
    else:
        try:
            array = np.asarray(values, dtype=float)
        except (TypeError, ValueError):
            raise TypeError(f"{name} must hold numbers, got {values!r:.80}") from None
    ndim = shape if isinstance(shape, int) else len(shape)
    if array.ndim != ndim or (not isinstance(shape, int) and array.shape != shape):
        why = f" ({per})" if per else ""
        if isinstance(shape, int):
            raise ValueError(f"{name} has shape {array.shape}, expected {ndim} dimensions{why}")
        if ndim == 1:
            raise ValueError(f"{name} has {array.size} values, expected {shape[0]}{why}")
        raise ValueError(f"{name} has shape {array.shape}, expected {shape}{why}")
    if square and (0 in array.shape[-2:] or array.shape[-1] != array.shape[-2]):
        raise ValueError(
            f"{name} has shape {array.shape}, expected square matrices (last two axes)"
        )
    for bad, what in (
        (~np.isfinite(array), "finite"),
        (array <= 0 if positive else None, "positive on a logarithmic axis"),
        (array < 0 if nonnegative else None, "≥ 0"),
    ):
        if bad is not None and bad.any():
            index = tuple(int(i) for i in np.argwhere(bad)[0])
            where = "" if ndim == 0 else f" at index {index[0] if ndim == 1 else index}"
            raise ValueError(f"{name} must be {what}, got {float(array[index])}{where}")
    return array


def _require_cloud(cloud: object) -> tuple[np.ndarray, np.ndarray]:
    """``cloud`` = (a, b, name): points a, b of equal length and their legend name, as arrays."""
    if not isinstance(cloud, tuple | list) or len(cloud) != 3 or not isinstance(cloud[2], str):
        raise TypeError(f"cloud must be (a, b, name), got {cloud!r:.80}")
    a = _require_array("cloud's a", cloud[0], 1)
    return a, _require_array("cloud's b", cloud[1], a.shape, "one per a")


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


def _round(x: torch.Tensor | np.ndarray | Sequence[float], digits: int = 4) -> list:
    """Round for embedding in a page (keeps figure JSON small)."""
    array = x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)
    return np.round(array.astype(float), digits).tolist()


def color(kind: str) -> str | None:
    """The house colour of a layer kind or activation name (None: plotly's default cycle)."""
    return COLORS.get(kind)


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
    """One line per entry of ``series`` against the shared ``x``.

    With no series it is an empty, styled figure to add traces to. Raises ValueError when a
    series' length differs from ``x``'s, a value is not finite, an ``x`` is not positive on a
    logarithmic x axis, or ``height`` < 1. (On a logarithmic y axis a value ≤ 0, such as an exact
    zero, has no place and is not drawn.)
    """
    xs = _require_array("x", x, 1, positive=log_x)
    _require_items("series", series, container=Mapping, empty=True)
    for name, y in series.items():
        _require_array(f"series {name!r}", y, xs.shape, "one value per x")
    _require_number("height", height, 1, integer=True)
    fig = go.Figure()
    for name, y in series.items():
        c = (colors or {}).get(name) or color(name)
        fig.add_trace(
            go.Scatter(x=_round(x), y=_round(y, 5), mode="lines", name=name, line=dict(color=c))
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
    """Training-loss curves of several :class:`kvattn.train.History` records.

    ``log_y`` (the default) draws the losses on a logarithmic axis, where a loss must be positive:
    a loss is never negative, and an exact 0 or a negative value there is a bug in the input that
    plotly would hide by dropping the point, so it is refused (pass ``log_y=False`` for a linear
    axis).

    Raises
    ------
    TypeError
        ``histories`` is not a mapping, or a record has no ``steps`` and ``loss``.
    ValueError
        No records, a record whose ``loss`` and ``steps`` differ in length, a loss that is not
        finite, or not positive with ``log_y`` (the message names the record, the value and its
        index), or ``height`` < 1.
    """
    _require_items("histories", histories, container=Mapping)
    for name, h in histories.items():
        if not (hasattr(h, "steps") and hasattr(h, "loss")):
            raise TypeError(
                f"histories[{name!r}] must be a History (steps, loss), got {type(h).__name__}"
            )
        steps = _require_array(f"steps of {name!r}", h.steps, 1)
        _require_array(f"loss of {name!r}", h.loss, steps.shape, "one per step", positive=log_y)
    _require_number("height", height, 1, integer=True)
    fig = go.Figure()
    for name, h in histories.items():
        fig.add_trace(
            go.Scatter(
                x=h.steps,
                y=_round(h.loss, 5),
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
    ``shared_scale`` (otherwise each panel has its own range, shown on hover).

    Raises ValueError when ``panels`` is empty, ``x`` or ``y`` is empty, a panel's shape is not
    ``(len(y), len(x))``, a value is not finite, or ``cols`` or ``height`` < 1.
    """
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
    fig = make_subplots(
        rows=rows, cols=cols, subplot_titles=names, horizontal_spacing=0.04, vertical_spacing=0.12
    )
    zmax = max(float(np.abs(a).max()) for a in arrays.values()) if symmetric else None
    for i, name in enumerate(names):
        if not shared_scale:
            zmax = (float(np.abs(arrays[name]).max()) or 1.0) if symmetric else None
        fig.add_trace(
            go.Heatmap(
                z=_round(panels[name], 3),
                x=_round(x, 3),
                y=_round(y, 3),
                colorscale="RdBu_r" if symmetric else "Viridis",
                zmin=-zmax if symmetric else None,
                zmax=zmax,
                showscale=shared_scale and i == 0,
                colorbar=dict(len=0.8),
            ),
            row=i // cols + 1,
            col=i % cols + 1,
        )
        fig.update_xaxes(title_text=xaxis, row=i // cols + 1, col=i % cols + 1)
    fig.update_yaxes(title_text=yaxis, col=1)
    fig.update_layout(title=title, height=height or 320 * rows + 80, **LAYOUT)
    return fig


def _short(label: str) -> str:
    """The value part of a label like "Swish-β (β=2)" (for slider ticks)."""
    return label.split("=")[-1].rstrip(")") if "=" in label else label


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


def symmetry_explorer(
    profiles: Sequence[SymmetryProfile],
    reference: SymmetryProfile,
    *,
    labels: Sequence[str] | None = None,
    prefix: str = "β = ",
    cloud: tuple[Sequence[float], Sequence[float], str] | None = None,
) -> go.Figure:
    """The static face of the symmetry explorer: a slider over precomputed profiles.

    Left: the pointwise exchange violation σ(a)b − σ(b)a, with the 1σ and 2σ contours of the
    input distribution that the metrics average over (unit variances, correlation ρ, common
    mean; circles for independent standard inputs) and, if ``cloud`` = (a, b, name) is given,
    those points (e.g. a trained unit's standardised pre-activations). Middle: the gate
    g(z) = σ(z)/z, with ``reference`` dashed for comparison. Right: the scale violation E_sc(α)
    against ``|α|``, circles for α > 0 and squares for α < 0. The title reports E_ex (and ρ and the
    mean when they are not 0). ``profiles`` are typically Swish-β for a range of β (the default
    slider labels read β from each label) or one σ under several input distributions (pass
    ``labels`` and a ``prefix``).

    Raises ValueError when ``profiles`` is empty, ``labels`` does not match it one to one, or
    the cloud's a and b differ in length or are not finite; TypeError when an item is no
    :class:`~kvattn.symmetry.SymmetryProfile` or ``cloud`` is not (a, b, name).
    """
    _require_items("profiles", profiles, SymmetryProfile)
    if not isinstance(reference, SymmetryProfile):
        raise TypeError(f"reference must be a SymmetryProfile, got {type(reference).__name__}")
    if labels is not None:
        _require_length("labels", labels, len(profiles), "profile")
    if cloud is not None:
        cloud_a, cloud_b = _require_cloud(cloud)
    fig = make_subplots(
        rows=1,
        cols=3,
        column_widths=[0.34, 0.33, 0.33],
        horizontal_spacing=0.1,
        subplot_titles=(
            "σ(a)b − σ(b)a",
            f"gate g(z) (dashed: {reference.label})",
            "E_sc vs |α|: ● α>0, ■ α<0",
        ),
    )
    zmax = max(float(p.violation.abs().max()) for p in profiles)

    def contours(p: SymmetryProfile) -> tuple[list, list]:
        xs: list = []
        ys: list = []
        for radius in (1.0, 2.0):  # a gap (None) between the two closed curves
            a, b = input_contour(p.rho, p.mean, radius)
            ys += [*_round(a, 3), None]
            xs += [*_round(b, 3), None]
        return xs, ys

    def traces(p: SymmetryProfile) -> list:
        pos = p.alphas > 0
        ex, ey = contours(p)
        return [
            go.Heatmap(
                z=_round(p.violation, 3),
                x=_round(p.grid, 3),
                y=_round(p.grid, 3),
                colorscale="RdBu_r",
                zmin=-zmax,
                zmax=zmax,
                colorbar=dict(x=0.27, len=0.85, thickness=12),
            ),
            go.Scatter(
                x=_round(p.grid, 3),
                y=_round(p.gate, 4),
                name="gate",
                line=dict(color=COLORS["swiglu"]),
            ),
            go.Scatter(
                x=_round(p.alphas[pos], 4),
                y=_round(p.scale[pos], 4),
                name="α > 0",
                mode="lines+markers",
                line=dict(color=COLORS["swiglu"]),
                marker=dict(symbol="circle"),
            ),
            go.Scatter(
                x=_round(-p.alphas[~pos], 4),
                y=_round(p.scale[~pos], 4),
                name="α < 0",
                mode="lines+markers",
                line=dict(color=COLORS["bilinear"]),
                marker=dict(symbol="square"),
            ),
            go.Scatter(
                x=ex, y=ey, name="inputs: 1σ, 2σ", mode="lines",
                line=dict(color="#333333", width=1.5, dash="dot"),
            ),
        ]  # fmt: skip

    def title(p: SymmetryProfile) -> str:
        inputs = f" (ρ = {p.rho:g}, mean {p.mean:g})" if p.rho or p.mean else ""
        return f"{p.label}: exchange violation E_ex = {p.exchange:.3f}{inputs}"

    heat, gate, scale_pos, scale_neg, ellipse = traces(profiles[0])
    fig.add_trace(heat, 1, 1)
    fig.add_trace(gate, 1, 2)
    fig.add_trace(
        go.Scatter(
            x=_round(reference.grid, 3),
            y=_round(reference.gate, 4),
            name=reference.label,
            line=dict(color="#999999", dash="dash"),
        ),
        1,
        2,
    )
    fig.add_trace(scale_pos, 1, 3)
    fig.add_trace(scale_neg, 1, 3)
    fig.add_trace(ellipse, 1, 1)
    if cloud is not None:
        fig.add_trace(
            go.Scatter(
                x=_round(cloud_b, 3), y=_round(cloud_a, 3), mode="markers", name=cloud[2],
                marker=dict(size=3, color="#009E73", opacity=0.5),
            ),
            1,
            1,
        )  # fmt: skip
    names = [f"{i}: {p.label}" for i, p in enumerate(profiles)]  # unique frame names
    shown = list(labels) if labels is not None else [_short(p.label) for p in profiles]
    # Frames carry complete traces (with their axes), mapped onto traces 0, 1, 3, 4 and 5.
    axes = [("x", "y"), ("x2", "y2"), ("x3", "y3"), ("x3", "y3"), ("x", "y")]
    fig.frames = [
        go.Frame(
            name=name,
            data=[
                t.update(xaxis=ax, yaxis=ay) for t, (ax, ay) in zip(traces(p), axes, strict=True)
            ],
            traces=[0, 1, 3, 4, 5],
            layout=dict(title_text=title(p)),
        )
        for name, p in zip(names, profiles, strict=True)
    ]
    extent = float(profiles[0].grid.abs().max())
    fig.update_layout(
        title=title(profiles[0]),
        height=460,
        showlegend=False,
        sliders=[slider(names, shown, prefix)],
        **LAYOUT,
    )
    fig.update_xaxes(range=[-extent, extent], row=1, col=1)
    fig.update_yaxes(range=[-extent, extent], row=1, col=1)
    fig.update_xaxes(title_text="b", row=1, col=1)
    fig.update_yaxes(title_text="a", row=1, col=1)
    fig.update_xaxes(title_text="z", row=1, col=2)
    fig.update_yaxes(range=[-0.05, 1.05], row=1, col=2)
    log_axis(fig, "x", [0.1, 1, 10], row=1, col=3)
    fig.update_xaxes(title_text="|α|", row=1, col=3)
    return fig


def slot_explorer(reports: Sequence[SlotReport], title: str) -> go.Figure:
    """The static face of the key-value memory explorer: a slider over precomputed slots.

    Left, the slot's top trigger examples (context, **last token**, the token that followed);
    right, the top next tokens of its value. Tokens are SentencePiece pieces (▁ = space).

    Raises ValueError when ``reports`` is empty, TypeError when an item is no
    :class:`~kvattn.memories.SlotReport`.
    """
    _require_items("reports", reports, SlotReport)
    fig = make_subplots(
        rows=1,
        cols=2,
        column_widths=[0.62, 0.38],
        horizontal_spacing=0.1,
        specs=[[{"type": "table"}, {"type": "xy"}]],
        subplot_titles=("key: top trigger examples", "value: most raised next tokens"),
    )

    def cells(r: SlotReport) -> list[list[str]]:
        return [
            ["…" + c[-32:] for c, _, _, _ in r.triggers],
            [last for _, last, _, _ in r.triggers],
            [nxt for _, _, nxt, _ in r.triggers],
            [f"{coef:.2f}" for *_, coef in r.triggers],
        ]

    def bars(r: SlotReport) -> tuple[list[float], list[str], list[str]]:
        lifts = [p for _, p in r.value_tokens]
        return (
            [round(p, 5) for p in lifts][::-1],
            [f"{t} " for t, _ in r.value_tokens][::-1],
            lift_labels(lifts)[::-1],
        )

    first = reports[0]
    fig.add_trace(
        go.Table(
            header=dict(values=["context", "last token", "next token", "σ(x·k)"], align="left"),
            cells=dict(values=cells(first), align="left", height=24),
            columnwidth=[3.2, 1.2, 1.2, 0.8],
        ),
        1,
        1,
    )
    px, py, pt = bars(first)
    fig.add_trace(
        go.Bar(
            x=px,
            y=py,
            text=pt,
            textposition="inside",
            orientation="h",
            marker_color=COLORS["bilinear"],
        ),
        1,
        2,
    )

    def label(r: SlotReport) -> str:
        return f"{title}: layer {r.layer}, slot {r.slot}"

    fig.frames = [
        go.Frame(
            name=str(r.slot),
            data=[
                go.Table(cells=dict(values=cells(r))),
                go.Bar(x=bars(r)[0], y=bars(r)[1], text=bars(r)[2]),
            ],
            traces=[0, 1],
            layout=dict(title_text=label(r)),
        )
        for r in reports
    ]
    fig.update_layout(
        title=label(first),
        height=430,
        showlegend=False,
        sliders=[slider([str(r.slot) for r in reports], [str(r.slot) for r in reports], "slot ")],
        **LAYOUT,
    )
    # lifts of a small model differ in their second or third decimal: the axis starts at the
    # uniform level (×1), not at 0, so that the differences show
    lifts = [p for r in reports for _, p in r.value_tokens]
    low = min(1.0, 0.98 * min(lifts))
    fig.update_xaxes(
        title_text="probability ÷ uniform", range=[low, 1.02 * max(lifts)], row=1, col=2
    )
    return fig


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
    differs from ``x``'s, a value is not finite, an ``x`` is not positive on a logarithmic x
    axis, or ``height`` < 1; TypeError when a frame is not a mapping of series.
    """
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
            _require_array(f"{where} series {name!r}", y, xs.shape, "one value per x")
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
    fig.frames = [
        go.Frame(
            name=label,
            data=[go.Scatter(y=_round(frames[label][n], 6), name=n) for n in first],
            traces=list(range(n_fixed, n_fixed + len(first))),
        )
        for label in labels
    ]
    fig.update_layout(
        title=title,
        xaxis_title=xaxis,
        yaxis_title=yaxis,
        height=height,
        sliders=[slider(labels, labels, prefix)],
        **LAYOUT,
    )
    if log_x:
        log_axis(fig, "x", _round(x))
    if log_y:
        log_axis(fig, "y")
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
    truncated axis, it does not exaggerate small differences).

    Raises ValueError when ``names`` is empty, ``means``, ``errors`` or ``colors`` do not match
    ``names`` one to one, a mean or error is not finite, an error is negative, or ``height`` < 1.
    """
    n = len(_require_items("names", names))
    _require_array("means", means, (n,), "one per name")
    if errors is not None:
        _require_array("errors", errors, (n,), "one per name", nonnegative=True)
    if colors is not None:
        _require_length("colors", colors, n, "name")
    _require_number("height", height, 1, integer=True)
    fig = go.Figure(
        go.Scatter(
            x=list(names),
            y=_round(means, 5),
            mode="markers",
            marker=dict(
                size=12,
                color=list(colors) if colors else [color(n) or "#0072B2" for n in names],
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

    Raises ValueError when ``betas`` is empty, the two tables are not ``(len(betas), seeds)``
    with at least 2 seeds, or a value (β included) is not finite; TypeError when a β is no
    number.
    """
    n = len(_require_items("betas", betas))
    _require_array("betas", betas, 1)
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
    return fig


def interaction_explorer(
    B: torch.Tensor,
    feature_names: Sequence[str],
    output_names: Sequence[str],
    target: torch.Tensor | None = None,
) -> go.Figure:
    """The static face of the interaction-tensor explorer: a slider over outputs o.

    Shows sym(B_o) as a heat-map (beside ``target[o]`` if given, same colour scale) and the
    eigenvalues of sym(B_o), from :func:`kvattn.interaction.eigendecompose`.

    Raises ValueError when ``B`` is not ``(n_out, d, d)`` with finite values, ``feature_names``
    does not have d entries, ``output_names`` does not have n_out, or ``target`` has another
    shape than ``B``.
    """
    matrices = _require_array("B", B, 3, square=True)
    n_out, d, _ = matrices.shape
    _require_length("feature_names", feature_names, d, "row of B_o")
    _require_length("output_names", _require_items("output_names", output_names), n_out, "B_o")
    if target is not None:
        target = _require_array("target", target, matrices.shape, "the shape of B")

    S = symmetrise(torch.from_numpy(matrices))
    eigenvalues, _ = eigendecompose(S)
    panels = ["target A_o", "learned sym(B_o)"] if target is not None else ["sym(B_o)"]
    cols = len(panels) + 1
    fig = make_subplots(
        rows=1,
        cols=cols,
        subplot_titles=[*panels, "eigenvalues of sym(B_o)"],
        horizontal_spacing=0.08,
    )
    zmax = float(S.abs().max())
    if target is not None:
        zmax = max(zmax, float(np.abs(target).max()))
    names = list(feature_names)

    def heat(matrix: torch.Tensor, show: bool) -> go.Heatmap:
        return go.Heatmap(
            z=_round(matrix, 3),
            x=names,
            y=names,
            colorscale="RdBu_r",
            zmin=-zmax,
            zmax=zmax,
            showscale=show,
        )

    def traces(o: int) -> list:
        out = [heat(target[o], False)] if target is not None else []
        out.append(heat(S[o], True))
        out.append(
            go.Bar(
                x=list(range(1, len(names) + 1)),
                y=_round(eigenvalues[o].flip(0), 4),
                marker_color=COLORS["bilinear"],
            )
        )
        return out

    for c, trace in enumerate(traces(0), start=1):
        fig.add_trace(trace, 1, c)
    fig.frames = [
        go.Frame(name=output_names[o], data=traces(o), traces=list(range(cols)))
        for o in range(len(output_names))
    ]
    for c in range(1, cols):
        fig.update_yaxes(autorange="reversed", scaleanchor=f"x{c if c > 1 else ''}", row=1, col=c)
    fig.update_xaxes(title_text="eigenvalue index (descending)", row=1, col=cols)
    fig.update_layout(
        title="Interaction matrices of a trained bilinear layer",
        height=420,
        showlegend=False,
        sliders=[slider(list(output_names), list(output_names), "output: ")],
        **LAYOUT,
    )
    return fig


def attention_explorer(profiles: Sequence[HeadProfile], tokens: Sequence[str]) -> go.Figure:
    """The static face of chapter 6's attention explorer: a slider over (layer, head).

    Left, the head's attention weights E on the input (rows: queries, columns: keys); right, the
    asymmetry ‖M − Mᵀ‖/‖M‖ of its bilinear form at each query–key distance δ.

    Raises ValueError when ``profiles`` or ``tokens`` is empty (an empty prompt), ``tokens`` does
    not match a profile's ``E`` one token per row, or a profile holds a value that is not
    finite; TypeError when an item is no :class:`~kvattn.diagnostics.heads.HeadProfile` or a token
    no
    str.
    """
    _require_items("profiles", profiles, HeadProfile)
    _require_items("tokens", tokens, str)
    for p in profiles:
        head = f"layer {p.layer}, head {p.head}"
        _require_length("tokens", tokens, p.E.shape[-1], f"row of E of {head}")
        _require_array(f"E of {head}", p.E, 2)
        _require_array(f"asymmetry of {head}", p.asym, 1)
    fig = make_subplots(
        rows=1,
        cols=2,
        column_widths=[0.6, 0.4],
        horizontal_spacing=0.14,
        subplot_titles=("attention weights E", "asymmetry of M_h(δ)"),
    )
    labels = [f"{i}:{t}" for i, t in enumerate(tokens)]

    def traces(p: HeadProfile) -> list:
        return [
            go.Heatmap(
                z=_round(p.E, 3),
                x=labels,
                y=labels,
                colorscale="Blues",
                zmin=0,
                zmax=1,
                colorbar=dict(x=0.52, len=0.85, thickness=12),
            ),
            go.Scatter(
                x=list(range(len(p.asym))),
                y=_round(p.asym, 4),
                mode="lines+markers",
                line=dict(color=COLORS["bilinear"]),
            ),
        ]

    def name(p: HeadProfile) -> str:
        return f"layer {p.layer}, head {p.head}"

    for c, trace in enumerate(traces(profiles[0]), start=1):
        fig.add_trace(trace, 1, c)
    fig.frames = [
        go.Frame(
            name=name(p),
            data=traces(p),
            traces=[0, 1],
            layout=dict(title_text=f"Attention of {name(p)}"),
        )
        for p in profiles
    ]
    fig.update_yaxes(autorange="reversed", row=1, col=1)
    fig.update_xaxes(showticklabels=False, row=1, col=1)
    fig.update_xaxes(title_text="distance δ = i − j", row=1, col=2)
    fig.update_yaxes(range=[0, 2.05], row=1, col=2)
    fig.update_layout(
        title=f"Attention of {name(profiles[0])}",
        height=470,
        showlegend=False,
        sliders=[slider([name(p) for p in profiles], [name(p) for p in profiles], "")],
        **LAYOUT,
    )
    return fig


def deductive_explorer(profiles: Sequence[DeductiveProfile]) -> go.Figure:
    """The static face of the G_LM invariance explorer: a slider over (model, layer, head).

    Top row: A, A_LM, A_P and G_LM on the first prompt, each with its own symmetric colour scale;
    bottom row: their entry-wise standard deviation across the prompts, each on its own scale
    (so a small spread is still visible; the colour bars give its size), every panel with its
    colour bar. The title gives, per tensor, both order parameters (by the magnitude of the mean
    and by the RMS) and the relative spread (rms of the spread over rms of the tensor), with the
    ratio of relative spreads from one stage to the next (below 1: that stage made the prompts'
    tensors more alike). Profiles labelled with their model (``DeductiveProfile.label``) let the
    slider compare e.g. an initial, a trained and a constant-G model; a tensor a model does not
    compute (a constant-G model's A) is drawn blank and marked "not computed".

    Raises ValueError when ``profiles`` is empty, TypeError when an item is no
    :class:`~kvattn.diagnostics.heads.DeductiveProfile`.
    """
    _require_items("profiles", profiles, DeductiveProfile)
    names = list(DEDUCTIVE)
    fig = make_subplots(
        rows=2,
        cols=4,
        vertical_spacing=0.1,
        horizontal_spacing=0.07,
        subplot_titles=[f"{n}, first prompt" for n in names] + [f"spread of {n}" for n in names],
    )
    bars = []
    for i in range(8):
        suffix = "" if i == 0 else str(i + 1)
        xd, yd = fig.layout[f"xaxis{suffix}"].domain, fig.layout[f"yaxis{suffix}"].domain
        bars.append(
            dict(
                x=xd[1] + 0.004, y=(yd[0] + yd[1]) / 2, len=yd[1] - yd[0], thickness=8,
                xanchor="left", tickfont=dict(size=9), exponentformat="e",
            )
        )  # fmt: skip

    def traces(p: DeductiveProfile) -> list:
        out = []
        for r, row in enumerate(("first", "spread")):
            for c, n in enumerate(names):
                bar = bars[4 * r + c]
                if n not in p.first:
                    out.append(go.Heatmap(z=[[0.0]], colorscale="Greys", zmin=0, zmax=1,
                                          showscale=False))  # fmt: skip
                    continue
                z = getattr(p, row)[n]
                top = float(z.abs().max())
                if row == "first":
                    scale = top or 1.0
                    kwargs = dict(colorscale="RdBu_r", zmin=-scale, zmax=scale)
                else:
                    kwargs = dict(colorscale="Viridis", zmin=0, zmax=top or 1.0)
                # three significant digits of the panel's largest entry keep pages small
                digits = 2 - int(np.floor(np.log10(top))) if top > 0 else 0
                out.append(go.Heatmap(z=_round(z, max(digits, 0)), colorbar=bar, **kwargs))
        return out

    def title(p: DeductiveProfile) -> str:
        who = f"{p.label}: " if p.label else ""
        parts = []
        for n in names:
            if n not in p.first:
                parts.append(f"{n} not computed")
                continue
            parts.append(
                f"{n} {p.order[n]:.2g} | {p.order_rms.get(n, float('nan')):.2g} | "
                f"{p.relative_spread(n):.2g}"
            )
        present = [n for n in names if n in p.first]
        steps = [
            f"{a}→{b} {p.relative_spread(b) / p.relative_spread(a):.2f}"
            for a, b in pairwise(present)
            if p.relative_spread(a) > 0
        ]
        return (
            f"{who}layer {p.layer}, head {p.head}; order parameter by |mean| | by RMS | relative "
            "spread:<br>"
            + "; ".join(parts)
            + ("<br>stage ratios of the relative spread: " + ", ".join(steps) if steps else "")
        )

    for i, trace in enumerate(traces(profiles[0])):
        fig.add_trace(trace, i // 4 + 1, i % 4 + 1)
    keys = [f"{i}: {p.label} L{p.layer} H{p.head}" for i, p in enumerate(profiles)]
    fig.frames = [
        go.Frame(name=key, data=traces(p), traces=list(range(8)), layout=dict(title_text=title(p)))
        for key, p in zip(keys, profiles, strict=True)
    ]
    fig.update_xaxes(showticklabels=False)
    fig.update_yaxes(showticklabels=False, autorange="reversed")
    fig.update_layout(
        title=dict(text=title(profiles[0]), font=dict(size=11)),
        height=620,
        sliders=[
            slider(
                keys,
                [f"{p.label + ' ' if p.label else ''}L{p.layer} H{p.head}" for p in profiles],
                "",
            )
        ],
        **{**LAYOUT, "margin": dict(l=30, r=40, t=120, b=50)},
    )
    return fig


def twirl_explorer(densities: Mapping[int, torch.Tensor], interleaved: bool = True) -> go.Figure:
    """The static face of chapter 10's explorer: a slider over the sequence length S showing the
    normalised density A0/S (left) and its projection onto the RoPE commutant (right).

    ``densities`` maps each length S ≥ 1 to a finite ``(d_k, d_k)`` matrix (a tensor); anything
    else raises ValueError (TypeError for a length that is no int or a matrix that is no tensor).
    """
    _require_items("densities", densities, container=Mapping)
    for S, A in densities.items():
        _require_number("sequence length S", S, 1, integer=True)
        if not isinstance(A, torch.Tensor):
            raise TypeError(f"densities[{S}] must be a torch.Tensor, got {type(A).__name__}")
        _require_array(f"densities[{S}]", A, 2, square=True)

    lengths = list(densities)
    zmax = max(float(A.abs().max()) for A in densities.values())
    fig = make_subplots(
        rows=1,
        cols=2,
        horizontal_spacing=0.08,
        subplot_titles=("A0 / S", "projection onto the commutant"),
    )

    def traces(A: torch.Tensor) -> list:
        P = commutant_projection(A, interleaved)
        return [
            go.Heatmap(z=_round(M, 4), colorscale="RdBu_r", zmin=-zmax, zmax=zmax, showscale=i == 1)
            for i, M in enumerate((A, P))
        ]

    def title(S: int) -> str:
        res = float(commutant_residual(densities[S], interleaved))
        return f"S = {S}: commutant residual {res:.2f}"

    for c, trace in enumerate(traces(densities[lengths[0]]), start=1):
        fig.add_trace(trace, 1, c)
    fig.frames = [
        go.Frame(
            name=str(S), data=traces(densities[S]), traces=[0, 1], layout=dict(title_text=title(S))
        )
        for S in lengths
    ]
    fig.update_yaxes(autorange="reversed", showticklabels=False)
    fig.update_xaxes(showticklabels=False)
    fig.update_layout(
        title=title(lengths[0]),
        height=420,
        sliders=[slider([str(S) for S in lengths], [str(S) for S in lengths], "S = ")],
        **LAYOUT,
    )
    return fig


def benchmark_ratios(results: Sequence[dict]) -> go.Figure:
    """The ratios of :mod:`kvattn.benchmark` results as a dot plot on a log axis: the median of
    each ratio with its quartiles as error bars; a flagged ratio (impossible, implausible or
    unstable) is drawn hollow, and its hover text says why. A dash marks the target in
    :data:`~kvattn.benchmark.BARS` of each ratio that has one (for the training step, its FLOP
    ratio, which a diamond marks, times ``BARS["train_over_flops"]``), the ceiling being held to
    the bar of the ratio it bounds; a dotted line marks 1. The ceiling is the constant-G
    model's decoding speed over GPT's, the most that PLDR-LLM with the KV + G cache can reach
    (see :func:`~kvattn.benchmark.bench_generate`). Training lines are time ratios (the lower
    the better), generation lines speed ratios (the higher the better).

    ``results``: dicts from :func:`~kvattn.benchmark.bench_train` and/or
    :func:`~kvattn.benchmark.bench_generate`; ratios a result does not hold are skipped. Raises
    TypeError when ``results`` is not a sequence of dicts, ValueError when they hold no ratio.
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
        ("course's bar", 2, "line-ew-open", "#D55E00", 22, 3),
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
        title="Ratios: medians and quartiles (hollow: flagged), with the course's bars",
        yaxis_title="ratio",
        height=480,
        legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0),
        **{**LAYOUT, "margin": {**LAYOUT["margin"], "t": 110}},  # room for the legend's row
    )
    return fig


#: One colour per decoder layer in the trajectory plots (Okabe-Ito order, then greys).
LAYER_COLORS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")

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


def _require_value(name: str, value: object) -> float | None:
    """A finite real number or None (a measure that is undefined there, drawn as a gap)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, Real) or not np.isfinite(value):
        raise ValueError(f"{name} must be a finite number or null, got {value!r}")
    return float(f"{float(value):.4g}")  # four significant digits: values span many decades


def collapse_trajectories(probes: Mapping, *, log_y: bool = True, height: int = 620) -> go.Figure:
    """The collapse measures of a pre-training run against the step: one panel per measure
    family, a line per layer (the mean over heads), and a last panel with the G_LM
    substitution's loss change, greedy agreement and share of the G effect.

    ``probes``: the trajectories as :func:`kvattn.diagnostics.collapse.load_probes` returns them (or
    ``PretrainResult.probes``): ``step`` (ints, increasing) and, for each per-layer measure of
    :data:`kvattn.diagnostics.collapse.COLLAPSE_LAYER_MEASURES`, one list of L numbers per step,
    for each
    whole-model one a number per step; ``None`` (undefined) is drawn as a gap. ``log_y``: the
    five per-layer panels on logarithmic axes (collapse spans decades; an exact 0 is not drawn
    there).

    Raises
    ------
    TypeError
        ``probes`` is not a mapping.
    ValueError
        No steps, steps that are not increasing ints ≥ 0, a missing measure, a measure without
        one entry per step or with a different number of layers, a value that is neither a
        finite number nor None, or ``height`` < 1.
    """
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
        vertical_spacing=0.16,
        horizontal_spacing=0.08,
    )
    x = list(steps)
    for k, name in enumerate(_COLLAPSE_PANELS):
        for layer in range(layers):
            fig.add_trace(
                go.Scatter(
                    x=x,
                    y=[row[layer] for row in per_layer[name]],
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
        if log_y:
            fig.update_yaxes(type="log", exponentformat="power", row=k // 3 + 1, col=k % 3 + 1)
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
    fig.update_xaxes(title_text="step", row=2)
    blocks = probes.get("probe_blocks")
    fig.update_layout(
        title="Collapse measures during training"
        + (f" ({blocks} probe blocks, mean over heads)" if blocks else " (mean over heads)"),
        height=height,
        **LAYOUT,
    )
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
        ``curves`` is not a mapping of pairs.
    ValueError
        No runs, a run with no points, a run whose x and y differ in length or hold a non-finite
        value, a y that is not positive with ``log_y`` (the message names the run, the value and
        its index), a threshold that is not (finite number, str) or not positive on a
        logarithmic axis, or ``height`` < 1.
    """
    _require_items("curves", curves, container=Mapping)
    _require_number("height", height, 1, integer=True)
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
        if (
            not isinstance(threshold, tuple | list)
            or len(threshold) != 2
            or not isinstance(threshold[1], str)
        ):
            raise ValueError(f"threshold must be (value, label), got {threshold!r:.80}")
        biggest = float(np.finfo(float).max)  # refuses ±inf
        _require_number(
            "threshold value", threshold[0], np.nextafter(0.0, 1.0) if log_y else -biggest, biggest
        )
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
