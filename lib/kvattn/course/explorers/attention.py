"""The attention explorer (chapter 6): a head's attention weights on a prompt and the asymmetry
of its bilinear form at each query–key distance.

Compute function: :func:`kvattn.diagnostics.heads.head_profile`. :func:`figure` is the static
face (a slider over precomputed (layer, head) profiles); :func:`widget` the live face (any prompt,
layer and head).
"""

from __future__ import annotations

from collections.abc import Sequence

import ipywidgets as widgets
import plotly.graph_objects as go
import sentencepiece as spm
import torch
from plotly.subplots import make_subplots

from ...diagnostics import HeadProfile, head_profile
from ...pldr import DecoderLM
from ..plots.checks import _require_array, _require_items, _require_length
from ..plots.style import COLORS, LAYOUT, _frame_names, _round, slider, widget_axes
from ._live import _encode, _layer_head_boxes, _live, _require_prompt

#: The most tokens the live face names beside its attention map (every k-th beyond that).
MAX_TOKEN_LABELS = 16


def figure(profiles: Sequence[HeadProfile], tokens: Sequence[str]) -> go.Figure:
    """The static face of chapter 6's attention explorer: a slider over (layer, head).

    Left, the head's attention weights E on the input (rows: queries, columns: keys); right, the
    asymmetry ‖M − Mᵀ‖/‖M‖ of its bilinear form at each query–key distance δ.

    Frames are named "layer L, head H", or "index: layer L, head H" where two profiles are of
    the same head (e.g. of two models), so that each stays reachable from the slider.

    Raises ValueError when ``profiles`` or ``tokens`` is empty (an empty prompt), a profile's
    ``E`` is not ``(S, S)`` with S = ``len(tokens)`` (one row, a query, and one column, a key,
    per token), or a profile holds a value that is not finite; TypeError when an item is no
    :class:`~kvattn.diagnostics.heads.HeadProfile` or a token no str.
    """
    _require_items("profiles", profiles, HeadProfile)
    n = len(_require_items("tokens", tokens, str))
    for p in profiles:
        head = f"layer {p.layer}, head {p.head}"
        E = _require_array(f"E of {head}", p.E, 2)
        _require_length("tokens", tokens, E.shape[-1], f"row of E of {head}")
        if E.shape[0] != n:
            raise ValueError(
                f"E of {head} has shape {E.shape}, expected ({n}, {n}): one row (query) and one "
                "column (key) per token"
            )
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
    keys = _frame_names([name(p) for p in profiles])
    fig.frames = [
        go.Frame(
            name=key,
            data=traces(p),
            traces=[0, 1],
            layout=dict(title_text=f"Attention of {name(p)}"),
        )
        for key, p in zip(keys, profiles, strict=True)
    ]
    fig.update_yaxes(autorange="reversed", row=1, col=1)
    fig.update_xaxes(showticklabels=False, row=1, col=1)
    fig.update_xaxes(title_text="distance δ = i − j", row=1, col=2)
    fig.update_yaxes(range=[0, 2.05], row=1, col=2)
    fig.update_layout(
        title=f"Attention of {name(profiles[0])}",
        height=470,
        showlegend=False,
        sliders=[slider(keys, [name(p) for p in profiles], "")],
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
    """Type a prompt and pick a layer and head: the head's attention weights on the prompt and
    the asymmetry of its bilinear form (chapter 6). ``tokenizer`` is a SentencePiece processor.

    Every argument is checked before anything is drawn. A prompt longer than the model's
    context is cut to its first tokens, and the page says so. The image is a book column wide
    (:func:`~kvattn.course.plots.style.widget_axes`); beside the attention map it names at most
    :data:`MAX_TOKEN_LABELS` tokens (every k-th of a longer prompt).

    Raises TypeError when ``model`` is not a :class:`kvattn.pldr.DecoderLM` or ``text`` is no
    str; ValueError when ``text`` encodes to no tokens (empty, white space, only characters the
    tokenizer drops), when the model's attention is not scaled dot-product attention in every
    layer (a PLGA PLDR-LLM's score q G kᵀ has no bilinear form per distance: chapter 7's
    deductive explorer shows it), or ``layer`` or ``head`` is one that the model does not have.
    """
    if not isinstance(model, DecoderLM):
        raise TypeError(f"model must be a kvattn DecoderLM (a GPT), got {type(model).__name__}")
    kinds = sorted({layer.mha1.kind for layer in model.decoder.dec_layers})
    if kinds != ["sdpa"]:
        raise ValueError(
            f"the attention explorer shows scaled dot-product attention heads (a GPT, or a "
            f"PLDR-LLM with custom_G_type 'identity'); this model's attention is {kinds}, whose "
            "score q G kᵀ has no bilinear form per distance: use the deductive explorer"
        )
    _require_prompt("text", text, tokenizer)

    cfg = model.config
    text_box = widgets.Text(
        value=text,
        description="prompt",
        continuous_update=False,
        layout=widgets.Layout(width="100%"),
    )
    layer_box, head_box = _layer_head_boxes(cfg, layer, head)

    def draw() -> None:
        ids, note = _encode(tokenizer, text_box.value, cfg.max_position_embeddings)
        if note:
            print(note)
        if not ids:
            return
        device = next(model.parameters()).device
        p = head_profile(model, torch.tensor([ids], device=device), layer_box.value, head_box.value)
        pieces = [tokenizer.id_to_piece(i) for i in ids]
        fig, axes = widget_axes(2, cols=2, panel_height=3.4)
        axes[0].imshow(p.E.numpy(), cmap="Blues", vmin=0, vmax=1)
        # at most MAX_TOKEN_LABELS tokens named, every k-th: at 9 pt a long prompt's labels
        # would print on one another (at 7 pt they were 7 px on the page)
        step = -(-len(pieces) // MAX_TOKEN_LABELS)
        shown = range(0, len(pieces), step)
        axes[0].set_yticks(shown, [f"{i}:{pieces[i]}" for i in shown], fontsize=9)
        axes[0].set_xticks([])
        axes[0].set(xlabel="keys", title="attention weights E")
        axes[1].plot(p.asym.numpy(), "o-", color=COLORS["bilinear"])
        axes[1].set(xlabel="distance δ", ylim=(0, 2.05), title="asymmetry of M_h(δ)")
        fig.suptitle(f"layer {p.layer}, head {p.head} (rows of E: queries)")
        fig.tight_layout()

    return _live([text_box, layer_box, head_box], draw)
