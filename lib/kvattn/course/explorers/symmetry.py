"""The symmetry explorer (chapter 4): for an activation σ, the exchange violation σ(a)b − σ(b)a
with the inputs' contours, the gate g(z) = σ(z)/z and the scale violation E_sc(α).

Compute function: :func:`kvattn.symmetry.symmetry_profile`. :func:`figure` is the static face (a
slider over precomputed profiles, e.g. Swish-β over β); :func:`widget` the live face (σ, β and the
inputs' correlation and mean chosen freely, and optionally a trained layer's transforms).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import ipywidgets as widgets
import numpy as np
import plotly.graph_objects as go
from matplotlib.ticker import NullFormatter
from plotly.subplots import make_subplots
from torch import Tensor

from ..._checks import is_real
from ...symmetry import SymmetryProfile, input_contour, symmetry_profile
from ..plots.checks import (
    _require_array,
    _require_choice,
    _require_cloud,
    _require_items,
    _require_length,
    _require_number,
)
from ..plots.style import (
    COLORS,
    LAYOUT,
    SIGNED_SCALE,
    _round,
    _short,
    covering_range,
    log_axis,
    log_ticks,
    round_significant,
    slider,
    widget_axes,
)
from ._live import _live

#: The activations the symmetry explorer offers (label, name).
ACTIVATIONS = (
    ("identity (bilinear)", "identity"),
    ("ReLU", "relu"),
    ("Swish-β", "swish"),
    ("GELU", "gelu"),
    ("sigmoid (GLU)", "sigmoid"),
)

#: The β slider's range as powers of ten (β from about 0.05 to 20).
BETA_LOG10 = (-1.3, 1.3)
#: The ρ slider's range (correlation of the two factors a, b).
RHO_RANGE = (-0.9, 0.9)
#: The mean slider's range (common mean of a and b).
MEAN_RANGE = (-2.0, 2.0)


def figure(
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

    Raises ValueError when ``profiles`` is empty, ``labels`` does not match it one to one, the
    cloud's a and b differ in length or are not finite, or a profile (``reference`` included)
    is degenerate: a grid of fewer than 2 values or of one value repeated (from
    ``symmetry_profile(extent=0)``), a violation that is not ``(n, n)`` on its grid of n, a gate
    that is missing (σ(0) ≠ 0: this figure draws the gate) or not one value per grid value, an α
    of 0, a scale that is not one value per α, or a value that is not finite (the message names
    the profile, its field and the first bad value); TypeError when an item is no
    :class:`~kvattn.symmetry.SymmetryProfile`, a profile's field is no tensor, or ``cloud`` is
    not (a, b, name).
    """
    _require_items("profiles", profiles, SymmetryProfile)
    if not isinstance(reference, SymmetryProfile):
        raise TypeError(f"reference must be a SymmetryProfile, got {type(reference).__name__}")
    for i, p in enumerate(profiles):
        _require_profile(f"profiles[{i}]", p)
    _require_profile("reference", reference)
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
    extent = float(profiles[0].grid.abs().max())

    def contours(p: SymmetryProfile) -> tuple[list, list]:
        xs: list = []
        ys: list = []
        for radius in (1.0, 2.0):  # a gap (None) between the two closed curves
            a, b = input_contour(p.rho, p.mean, radius)
            # drawn inside the map only: past its edge the panel would have to widen per frame
            inside = (a.abs() <= extent) & (b.abs() <= extent)
            ys += [v if keep else None for v, keep in zip(_round(a, 3), inside, strict=True)]
            xs += [v if keep else None for v, keep in zip(_round(b, 3), inside, strict=True)]
            ys.append(None)
            xs.append(None)
        return xs, ys

    def traces(p: SymmetryProfile) -> list:
        pos = p.alphas > 0
        ex, ey = contours(p)
        return [
            go.Heatmap(
                # two significant digits of the frame's largest entry: as fine as the colour
                # scale, and chapter 4's two explorers of 50 and 36 frames stay under the page limit
                z=round_significant(p.violation, 2),
                x=_round(p.grid, 3),
                y=_round(p.grid, 3),
                colorscale=SIGNED_SCALE,
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
        return f"{p.label}: exchange violation E_ex = {p.exchange:.3g}{_inputs(p)}"

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
    # E_sc's axes hold every frame: plotly keeps the first frame's range (it clipped ρ's frames)
    alphas = np.concatenate([p.alphas.abs().numpy() for p in profiles])
    log_axis(fig, "x", sorted({float(f"{a:.3g}") for a in alphas}), row=1, col=3)
    scales = np.concatenate([p.scale.numpy() for p in profiles])
    fig.update_yaxes(range=covering_range(scales), row=1, col=3)
    fig.update_xaxes(title_text="|α|", row=1, col=3)
    return fig


def _inputs(p: SymmetryProfile) -> str:
    """The inputs' correlation and mean for a title, to three significant digits (nothing for
    independent standard inputs)."""
    return f" (ρ = {p.rho:.3g}, mean {p.mean:.3g})" if p.rho or p.mean else ""


def _require_profile(where: str, p: SymmetryProfile) -> None:
    """``p`` is a profile :func:`figure` can draw: a grid spanning an interval, its violation map,
    gate and scale violations finite and of matching shapes. A degenerate grid gave an axis range
    of [0, 0], a NaN map a blank heat-map, and an empty one or α as a list failed deep inside."""
    who = f"{where} ({p.label!r})"
    for field in ("grid", "violation", "gate", "alphas", "scale"):
        value = getattr(p, field)
        if field == "gate" and value is None:
            raise ValueError(
                f"{who} has no gate (σ(0) ≠ 0): the figure's middle panel draws the gate "
                "g(z) = σ(z)/z, so leave this σ out (the live explorer shows it)"
            )
        if not isinstance(value, Tensor):
            raise TypeError(f"{who}: {field} must be a torch.Tensor, got {type(value).__name__}")
    grid = _require_array(f"{who}: grid", p.grid, 1)
    if grid.size < 2:
        raise ValueError(f"{who}: grid has {grid.size} values, expected at least 2")
    if grid.min() == grid.max():
        raise ValueError(f"{who}: grid must span an interval, got all values {grid[0]}")
    n = grid.size
    _require_array(f"{who}: violation", p.violation, (n, n), "one row and column per grid value")
    _require_array(f"{who}: gate", p.gate, (n,), "one per grid value")
    alphas = _require_array(f"{who}: alphas", p.alphas, 1)
    if (alphas == 0).any():
        raise ValueError(
            f"{who}: alphas must be non-zero, got 0.0 at index {int(np.argmax(alphas == 0))}"
        )
    _require_array(f"{who}: scale", p.scale, alphas.shape, "one per α")
    for field in ("exchange", "rho", "mean"):
        value = getattr(p, field)
        if not is_real(value):
            raise ValueError(f"{who}: {field} must be a finite number, got {value!r}")


def widget(
    act: str = "swish",
    beta: float = 1.0,
    rho: float = 0.0,
    mean: float = 0.0,
    *,
    cloud: tuple[Tensor, Tensor, str] | None = None,
    transforms: Mapping[str, Mapping[str, object]] | None = None,
) -> widgets.VBox:
    """Pick an activation (and β for Swish-β) and the inputs' correlation ρ and common mean: see
    σ(a)b − σ(b)a with the inputs' 1σ and 2σ contours, the gate g(z) and E_sc(α); the title gives
    E_ex for those inputs (:func:`kvattn.symmetry.exchange_violation` with ``rho``, ``mean``).

    ``cloud`` = (a, b, name) adds points to the first panel (e.g. a trained unit's standardised
    pre-activations). ``transforms`` adds a fourth panel, a trained layer per name with keys
    ``"alphas"`` (positive α), ``"scaled"`` (its loss after (q, k) → (αq, k/α) at each α) and
    ``"swap"`` (its loss after q ↔ k), as chapter 4 measures them.

    ``act`` is a name of :data:`ACTIVATIONS`; ``beta`` lies in [10^−1.3, 10^1.3]
    (:data:`BETA_LOG10`), ``rho`` in :data:`RHO_RANGE`, ``mean`` in :data:`MEAN_RANGE`; anything
    else, a cloud whose a and b differ in length, or a transform entry without those keys, with
    a ``"scaled"`` loss per α that is not positive and finite (it is drawn on a logarithmic
    axis) or a ``"swap"`` loss that is not a finite number raises ValueError (TypeError for a
    cloud that is not (a, b, name)).
    """
    _require_choice("act", act, [name for _, name in ACTIVATIONS])
    _require_number("beta", beta, 10 ** BETA_LOG10[0], 10 ** BETA_LOG10[1])
    _require_number("rho", rho, *RHO_RANGE)
    _require_number("mean", mean, *MEAN_RANGE)
    if cloud is not None:
        cloud_a, cloud_b = _require_cloud(cloud)
    for name, entry in (transforms or {}).items():
        missing = {"alphas", "scaled", "swap"} - set(entry)
        if missing:
            raise ValueError(f"transforms[{name!r}] lacks {sorted(missing)}")
        alphas = _require_array(
            f"transforms[{name!r}]['alphas']", entry["alphas"], 1, positive=True
        )
        _require_array(
            f"transforms[{name!r}]['scaled']", entry["scaled"], alphas.shape, "one per α",
            positive=True,
        )  # fmt: skip
        _require_array(f"transforms[{name!r}]['swap']", entry["swap"], 0)
    act_box = widgets.Dropdown(options=list(ACTIVATIONS), value=act, description="σ")
    beta_box = widgets.FloatLogSlider(
        value=beta, base=10, min=BETA_LOG10[0], max=BETA_LOG10[1], step=0.05, description="β",
        continuous_update=False,
    )  # fmt: skip
    rho_box = widgets.FloatSlider(
        value=rho, min=RHO_RANGE[0], max=RHO_RANGE[1], step=0.1, description="ρ",
        continuous_update=False,
    )  # fmt: skip
    mean_box = widgets.FloatSlider(
        value=mean, min=MEAN_RANGE[0], max=MEAN_RANGE[1], step=0.25, description="mean",
        continuous_update=False,
    )  # fmt: skip

    def draw() -> None:
        beta_box.disabled = act_box.value != "swish"
        p = symmetry_profile(
            act_box.value,
            beta_box.value if act_box.value == "swish" else None,
            rho=rho_box.value,
            mean=mean_box.value,
        )
        fig, axes = widget_axes(4 if transforms else 3, cols=2, panel_height=3.1)
        lim = float(p.violation.abs().max()) or 1.0
        g = p.grid.numpy()
        im = axes[0].imshow(
            p.violation.numpy(),
            origin="lower",
            cmap=SIGNED_SCALE,  # the course's signed colours: red positive, blue negative
            vmin=-lim,
            vmax=lim,
            extent=(g[0], g[-1], g[0], g[-1]),
        )
        fig.colorbar(im, ax=axes[0], shrink=0.8)
        for radius in (1.0, 2.0):
            a, b = input_contour(p.rho, p.mean, radius)
            axes[0].plot(b, a, "k:", lw=1)
        if cloud is not None:
            axes[0].scatter(cloud_b, cloud_a, s=3, alpha=0.4, color="#009E73")
        axes[0].set(xlim=(g[0], g[-1]), ylim=(g[0], g[-1]))
        dots = f"; green: {cloud[2]}" if cloud is not None else ""
        axes[0].set(xlabel="b", ylabel="a", title=f"σ(a)b − σ(b)a{dots}")
        if p.gate is None:
            axes[1].text(0.5, 0.5, "no gate: σ(0) ≠ 0", ha="center", va="center")
        else:
            axes[1].plot(g, p.gate.numpy(), color=COLORS["swiglu"])
        axes[1].set(xlabel="z", title="gate g(z) = σ(z)/z")
        pos = p.alphas > 0
        axes[2].plot(
            p.alphas[pos].numpy(), p.scale[pos].numpy(), "o-", label="α > 0", color=COLORS["swiglu"]
        )
        axes[2].plot(
            -p.alphas[~pos].numpy(),
            p.scale[~pos].numpy(),
            "s-",
            label="α < 0",
            color=COLORS["bilinear"],
        )
        _log_ticks(axes[2], p.alphas.abs().numpy())
        axes[2].set(xlabel="|α|", title="scale violation E_sc(α)")
        # beside the panel, where it covers no line and no label
        axes[2].legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=9, frameon=False)
        if transforms:
            for name, entry in transforms.items():
                axes[3].plot(
                    entry["alphas"], entry["scaled"], "o-", ms=3, color=COLORS.get(name),
                    label=f"{name} (swap {float(entry['swap']):.3g})",
                )  # fmt: skip
            every = transforms.values()
            _log_ticks(axes[3], np.concatenate([np.asarray(e["alphas"], float) for e in every]))
            scaled = np.concatenate([np.asarray(e["scaled"], float) for e in every])
            _log_ticks(axes[3], scaled, "y")
            axes[3].set(xlabel="α > 0", title="trained: loss after (αq, k/α)")
            axes[3].legend(loc="upper center", bbox_to_anchor=(0.5, -0.3), fontsize=9, ncol=2)
        fig.suptitle(f"{p.label}: E_ex = {p.exchange:.3g}{_inputs(p)}")
        fig.tight_layout()

    return _live([act_box, beta_box, rho_box, mean_box], draw)


def _log_ticks(ax: object, values: np.ndarray, axis: str = "x") -> None:
    """A logarithmic ``axis`` ("x" or "y") on ``ax`` labelled at round values over ``values``
    (at least two): matplotlib's default labelled a range within a decade once, or not at all."""
    values = values[values > 0]
    low, high = float(values.min()), float(values.max())
    decades = range(int(np.floor(np.log10(low))), 1 + int(np.ceil(np.log10(high))))
    ticks = log_ticks(low, high) or [10.0**e for e in decades]
    getattr(ax, f"set_{axis}scale")("log")
    getattr(ax, f"set_{axis}ticks")(ticks, [f"{t:g}" for t in ticks])
    getattr(ax, f"{axis}axis").set_minor_formatter(NullFormatter())
