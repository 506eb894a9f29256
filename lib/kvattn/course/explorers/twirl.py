"""The twirl explorer (chapter 10): a head's normalised density A0/S over the first S tokens beside
its projection onto the RoPE commutant, as S grows.

Compute functions: :func:`kvattn.diagnostics.heads.twirl`,
:func:`kvattn.diagnostics.heads.commutant_projection` and
:func:`kvattn.diagnostics.heads.commutant_residual`. :func:`figure` is the static face (a slider
over precomputed lengths); :func:`widget` the live face (any layer, head and length).
"""

from __future__ import annotations

from collections.abc import Mapping

import ipywidgets as widgets
import plotly.graph_objects as go
import sentencepiece as spm
import torch
from plotly.subplots import make_subplots

from ..._checks import check_bool
from ...diagnostics import commutant_projection, commutant_residual, twirl
from ...pldr import DecoderLM
from ..plots.checks import _require_array, _require_items, _require_number
from ..plots.style import LAYOUT, SIGNED_SCALE, _round, slider, widget_axes
from ._live import _layer_head_boxes, _live, _require_prompt


def figure(densities: Mapping[int, torch.Tensor], interleaved: bool = True) -> go.Figure:
    """The static face of chapter 10's explorer: a slider over the sequence length S showing the
    normalised density A0/S (left) and its projection onto the RoPE commutant (right).

    ``densities`` maps each length S ≥ 1 to a finite ``(d_k, d_k)`` matrix (a tensor); anything
    else raises ValueError (TypeError for a length that is no int, a matrix that is no tensor or
    an ``interleaved`` that is not a bool).
    """
    check_bool("interleaved", interleaved, typed=True)
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
            go.Heatmap(
                z=_round(M, 4), colorscale=SIGNED_SCALE, zmin=-zmax, zmax=zmax, showscale=i == 1
            )
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


def widget(
    model: DecoderLM,
    tokenizer: spm.SentencePieceProcessor,
    text: str,
    layer: int = 0,
    head: int = 0,
) -> widgets.VBox:
    """Pick a layer, a head and a length S: the head's normalised density over the first S tokens
    of ``text`` beside its projection onto the RoPE commutant (chapter 10).

    Raises TypeError when ``text`` is no str, ValueError when it is empty or white space (or
    encodes to no tokens), or ``layer`` or ``head`` is one that the model does not have.
    """
    _require_prompt("text", text)

    cfg = model.config
    device = next(model.parameters()).device
    tokens = tokenizer.encode(text)[: cfg.max_position_embeddings]
    if not tokens:  # text that the tokenizer drops entirely, such as a zero-width space
        raise ValueError(f"text {text!r} encodes to no tokens: type a prompt")
    ids = torch.tensor([tokens], device=device)
    layer_box, head_box = _layer_head_boxes(cfg, layer, head)
    length_box = widgets.IntSlider(
        value=min(16, ids.shape[1]),
        min=1,
        max=ids.shape[1],
        description="S",
        continuous_update=False,
    )

    def draw() -> None:
        S = length_box.value
        A = twirl(model, ids, layer_box.value, head_box.value, [S])[S]
        P = commutant_projection(A, cfg.reference_rope)
        lim = float(A.abs().max()) or 1.0
        fig, axes = widget_axes(2, panel_height=3.5)
        for ax, M, name in zip(axes, (A, P), ("A0 / S", "commutant projection"), strict=True):
            ax.imshow(M.numpy(), cmap=SIGNED_SCALE, vmin=-lim, vmax=lim)
            ax.set(title=name, xticks=[], yticks=[])
        fig.suptitle(
            f"S = {S}: commutant residual {float(commutant_residual(A, cfg.reference_rope)):.2f}"
        )
        fig.tight_layout()

    return _live([layer_box, head_box, length_box], draw)
