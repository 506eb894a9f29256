"""The interaction-tensor explorer (chapter 3): a trained layer's interaction matrix B_o for
each output o and its eigenvalues.

Compute functions: :func:`kvattn.interaction.interaction_tensor`,
:func:`kvattn.interaction.gated_interaction`, :func:`kvattn.interaction.symmetrise` and
:func:`kvattn.interaction.eigendecompose`. :func:`figure` is the static face (a slider over
outputs, beside a target if given); :func:`widget` the live face (for a gated layer, also the
input x that B_o(x) depends on).
"""

from __future__ import annotations

from collections.abc import Sequence

import ipywidgets as widgets
import numpy as np
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots
from torch import Tensor

from ...interaction import eigendecompose, gated_interaction, interaction_tensor, symmetrise
from ...mlp import SlotMLP
from ..plots.checks import _require_array, _require_items, _require_length
from ..plots.style import (
    COLORS,
    LAYOUT,
    SIGNED_SCALE,
    _frame_names,
    _round,
    covering_range,
    slider,
    widget_axes,
)
from ._live import _live


def figure(
    B: torch.Tensor,
    feature_names: Sequence[str],
    output_names: Sequence[str],
    target: torch.Tensor | None = None,
) -> go.Figure:
    """The static face of the interaction-tensor explorer: a slider over outputs o.

    Shows sym(B_o) as a heat-map (beside ``target[o]`` if given, same colour scale) and the
    eigenvalues of sym(B_o), from :func:`kvattn.interaction.eigendecompose`.

    Frames are named by output, or "index: name" where two outputs share a name (so that each
    stays reachable from the slider).

    Raises ValueError when ``B`` is not ``(n_out, d, d)`` with finite values, ``feature_names``
    does not have d entries, ``output_names`` does not have n_out, or ``target`` has another
    shape than ``B``; TypeError when ``feature_names`` or ``output_names`` is not a sequence of
    str (a single str would be read as one-letter names).
    """
    matrices = _require_array("B", B, 3, square=True)
    n_out, d, _ = matrices.shape
    features = _require_items("feature_names", feature_names, str)
    _require_length("feature_names", features, d, "row of B_o")
    outputs = _require_items("output_names", output_names, str)
    _require_length("output_names", outputs, n_out, "B_o")
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
            colorscale=SIGNED_SCALE,
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
    keys = _frame_names(outputs)
    fig.frames = [
        go.Frame(name=keys[o], data=traces(o), traces=list(range(cols))) for o in range(n_out)
    ]
    for c in range(1, cols):
        fig.update_yaxes(autorange="reversed", scaleanchor=f"x{c if c > 1 else ''}", row=1, col=c)
    fig.update_xaxes(title_text="eigenvalue index (descending)", row=1, col=cols)
    # every output's eigenvalues and the bars' base at 0: plotly keeps the first frame's
    # autorange, which clipped the other outputs' bars (chapter 3)
    every = np.append(_round(eigenvalues, 4), 0.0)
    fig.update_yaxes(range=covering_range(every), row=1, col=cols)
    fig.update_layout(
        title="Interaction matrices of a trained bilinear layer",
        height=420,
        showlegend=False,
        sliders=[slider(keys, outputs, "output: ")],
        **LAYOUT,
    )
    return fig


def widget(
    module: SlotMLP,
    feature_names: Sequence[str],
    output_names: Sequence[str],
    inputs: Tensor | None = None,
) -> widgets.VBox:
    """Pick an output o: its interaction matrix and eigenvalues. For a gated layer, also pick an
    input (index into ``inputs``) to see the input-dependent B_o(x) of
    :func:`kvattn.interaction.gated_interaction`; otherwise B_o is fixed.

    Raises ValueError when ``feature_names`` does not have ``module.d_model`` entries,
    ``output_names`` does not have ``module.d_out``, or a gated layer gets no ``inputs`` (or an
    empty or non-finite ``(n, d_model)`` tensor); TypeError when ``feature_names`` or
    ``output_names`` is not a sequence of str (a single str would be read as one-letter names).
    """
    features = _require_items("feature_names", feature_names, str)
    _require_length("feature_names", features, module.d_model, "input feature")
    outputs = _require_items("output_names", output_names, str)
    _require_length("output_names", outputs, module.d_out, "output")
    gated = getattr(module, "form", None) == "gated" and module.variant != "bilinear"
    out_box = widgets.Dropdown(
        options=[(name, i) for i, name in enumerate(output_names)], value=0, description="output"
    )
    sym_box = widgets.Checkbox(value=True, description="symmetrise")
    controls = [out_box, sym_box]
    if gated:
        if inputs is None:
            raise ValueError("a gated layer's interaction matrix depends on x: pass inputs")
        shape = _require_array("inputs", inputs, 2).shape
        if shape[0] == 0 or shape[1] != module.d_model:
            raise ValueError(f"inputs must have shape (n ≥ 1, {module.d_model}), got {shape}")
        x_box = widgets.IntSlider(
            value=0, min=0, max=len(inputs) - 1, description="input x", continuous_update=False
        )
        controls.append(x_box)

    def draw() -> None:
        o = out_box.value
        if gated:
            B = gated_interaction(module, inputs[x_box.value])[o]
        else:
            B = interaction_tensor(module)[o]
        B = B.detach().cpu().double()
        M = symmetrise(B) if sym_box.value else B
        lim = float(M.abs().max()) or 1.0
        fig, axes = widget_axes(2, panel_height=3.8)
        im = axes[0].imshow(M.numpy(), cmap=SIGNED_SCALE, vmin=-lim, vmax=lim)
        axes[0].set_xticks(range(len(feature_names)), feature_names, rotation=90)
        axes[0].set_yticks(range(len(feature_names)), feature_names)
        fig.colorbar(im, ax=axes[0], shrink=0.8)
        axes[0].set_title(("sym(B_o)" if sym_box.value else "B_o") + (" at x" if gated else ""))
        lam, _ = eigendecompose(B)
        axes[1].bar(range(1, len(lam) + 1), lam.flip(0).numpy())
        axes[1].set(title="eigenvalues of sym(B_o)", xlabel="index (descending)")
        fig.suptitle(output_names[o])
        fig.tight_layout()

    return _live(controls, draw)
