"""Attention heads read as bilinear forms, RoPE and its commutant, and the deductive tensors.

The RoPE planes and the projection of G_LM onto the matrices that commute with every rotation
(:func:`commutant_projection`, :func:`commutant_residual`); a head's bilinear form q G kᵀ at a
distance (:func:`head_bilinear_form`, :func:`head_profile`); the profile of the deductive
tensors A, A_LM, A_P, G_LM across prompts (:func:`deductive_profile`, the G_LM invariance
explorer's compute function); and the three steps of the collapse mechanism of chapter 10
(:func:`attention_input`, :func:`layer_queries`, :func:`twirl`). Results are CPU float64
(:func:`kvattn.diagnostics.measures.cpu64`).
"""

from __future__ import annotations

import copy
import dataclasses
import math
from dataclasses import dataclass, field

import torch

from .._checks import check_square
from ..pldr import DecoderLM
from ..plga import Attention
from .measures import (
    _attention,
    _check_attention,
    _check_probes,
    _check_sequence,
    _index,
    _matrices,
    _ratio,
    asymmetry,
    cpu64,
    order_parameter,
)

Tensor = torch.Tensor


def rope_planes(d_k: int, interleaved: bool = True) -> list[tuple[int, int]]:
    """The coordinate pairs RoPE rotates: (2i, 2i+1) interleaved, (i, i + d_k/2) half-split."""
    if not isinstance(d_k, int) or isinstance(d_k, bool) or d_k < 2 or d_k % 2:
        raise ValueError(f"d_k must be an even int ≥ 2, got {d_k!r}")
    if interleaved:
        return [(2 * i, 2 * i + 1) for i in range(d_k // 2)]
    return [(i, i + d_k // 2) for i in range(d_k // 2)]


def commutant_projection(G: Tensor, interleaved: bool = True) -> Tensor:
    """Project ``G [..., d_k, d_k]`` onto the matrices that commute with every RoPE rotation.

    With distinct frequencies per plane, the commutant is block-diagonal in the RoPE planes with
    each 2×2 block of the form [[α, −β], [β, α]] (a rotation-scaling). The orthogonal
    (Frobenius) projection keeps, per plane, α = mean of the diagonal pair and β = mean of
    (G[j,i], −G[i,j]), and zeroes everything else. Stays on G's device and dtype.

    Raises
    ------
    TypeError
        If G is not a floating-point tensor (an integer G would truncate the averages α, β).
    ValueError
        If G is not ``[..., d_k, d_k]`` with d_k even.
    """
    check_square(G, "G")
    out = torch.zeros_like(G)
    for i, j in rope_planes(G.shape[-1], interleaved):
        alpha = 0.5 * (G[..., i, i] + G[..., j, j])
        beta = 0.5 * (G[..., j, i] - G[..., i, j])
        out[..., i, i] = alpha
        out[..., j, j] = alpha
        out[..., j, i] = beta
        out[..., i, j] = -beta
    return out


def commutant_residual(G: Tensor, interleaved: bool = True) -> Tensor:
    """‖G − Π(G)‖_F / ‖G‖_F per matrix ``[...]`` (CPU, float64): 0 when G commutes with RoPE (the
    score q G kᵀ then depends only on relative positions), near 1 when G uses absolute-position
    directions; 0 for G = 0, which is in the commutant.

    Raises
    ------
    TypeError
        If G is not a real (floating-point or integer) tensor.
    ValueError
        If G is not ``[..., d_k, d_k]`` with d_k even, or has non-finite entries.
    """
    X = cpu64(G, "G")
    _matrices(X, "G")
    residual = X - commutant_projection(X, interleaved)
    return _ratio(residual.norm(dim=(-2, -1)), X.norm(dim=(-2, -1)))


def rope_rotation(attention: Attention, distance: int) -> Tensor:
    """The d_k × d_k matrix R(δ) by which an attention layer's RoPE rotates a row vector at
    position δ (so that q_rot = q R(i) and R(i) R(j)ᵀ = R(i − j)); CPU, float64, whatever the
    device of ``attention`` (RoPE keeps its angle tables in float64 on the CPU).

    Raises
    ------
    TypeError
        If ``attention`` is not a layer's attention module (``model.decoder.dec_layers[i].mha1``).
    ValueError
        If ``distance`` is not in 0 … max_position_embeddings − 1.
    """
    _check_attention(attention)
    _index(distance, "distance", attention.cfg.max_position_embeddings)
    return attention.rope.matrix(distance)


def head_bilinear_form(
    attention: Attention, head: int, distance: int = 0, with_bias: bool = False
) -> Tensor:
    """The learned bilinear form of one SDPA head at query–key distance δ = i − j, d × d:

        M_h(δ) = W_Q,hᵀ R(δ) W_K,h,   score(i, j) = x_i M_h(i − j) x_jᵀ / √d_k (+ bias terms),

    where W_Q,h, W_K,h are the head's d_k × d rows of ``wq`` and ``wk`` and R is RoPE
    (course, chapter 6). With ``with_bias`` the form acts on [x, 1] and includes the biases,
    shape (d + 1) × (d + 1), so that the score is exactly [x_i, 1] M [x_j, 1]ᵀ / √d_k. CPU,
    float64, for a layer on any device.

    Raises
    ------
    TypeError
        If ``attention`` is not a layer's attention module (``model.decoder.dec_layers[i].mha1``).
    ValueError
        For PLGA and constant-G layers, whose score q G kᵀ does not reduce to one form per δ; for
        ``head`` outside 0 … H − 1 or ``distance`` outside 0 … max_position_embeddings − 1.
    """
    _check_attention(attention)
    if attention.kind != "sdpa":
        raise ValueError("only scaled dot-product attention has one bilinear form per distance")
    d_k = attention.cfg.d_k
    _index(head, "head", attention.cfg.num_attention_heads)
    R = rope_rotation(attention, distance)
    rows = slice(head * d_k, (head + 1) * d_k)
    Wq, Wk = cpu64(attention.wq.weight[rows]), cpu64(attention.wk.weight[rows])
    if with_bias:
        zeros = torch.zeros(d_k, 1, dtype=torch.float64)
        bq, bk = (
            zeros if b is None else cpu64(b[rows])[:, None]
            for b in (attention.wq.bias, attention.wk.bias)
        )
        Wq, Wk = torch.cat([Wq, bq], 1), torch.cat([Wk, bk], 1)
    # q_rot = x Wqᵀ R(i) and k_rot = x Wkᵀ R(j), so q_rot k_rotᵀ = x Wqᵀ R(i) R(j)ᵀ Wk xᵀ and
    # R(i) R(j)ᵀ = R(i − j).
    return Wq.T @ R @ Wk


def swap_attention_qk(model: DecoderLM) -> DecoderLM:
    """A copy of ``model`` whose attention layers exchange their query and key projections
    (weights and biases), i.e. whose bilinear forms are transposed: token i then scores token j
    as token j scored token i before."""

    new = copy.deepcopy(model)
    with torch.no_grad():
        for layer in new.decoder.dec_layers:
            attn = layer.mha1
            wq, wk = attn.wq.weight.clone(), attn.wk.weight.clone()
            attn.wq.weight.copy_(wk)
            attn.wk.weight.copy_(wq)
            if attn.wq.bias is not None:
                bq, bk = attn.wq.bias.clone(), attn.wk.bias.clone()
                attn.wq.bias.copy_(bk)
                attn.wk.bias.copy_(bq)
    return new


@dataclass(frozen=True)
class HeadProfile:
    """One head of a GPT on one input: its attention weights ``E`` ``[S, S]`` and the asymmetry
    of its bilinear form M_h(δ) for δ = 0 … len(asym) − 1."""

    layer: int
    head: int
    E: Tensor
    asym: Tensor


@torch.no_grad()
def head_profile(
    model: DecoderLM, ids: Tensor, layer: int, head: int, max_distance: int = 16
) -> HeadProfile:
    """The compute function of chapter 6's attention explorer (both faces): ``ids`` ``(1, S)`` on
    the model's device; results on the CPU in float64.

    Raises
    ------
    TypeError
        For a model that is not a PLDRLLM or GPT, ids that are not an int64 (or int32) tensor,
        a ``max_distance`` that is not an int.
    ValueError
        For ids not of shape (1, S), ``layer``/``head`` out of range, ``max_distance`` outside
        1 … max_position_embeddings, or a PLDRLLM (PLGA and constant-G heads have no bilinear
        form per distance: see :func:`head_bilinear_form`).
    """
    _check_sequence(ids, "ids")
    attn = _attention(model, layer)
    _index(head, "head", model.config.num_attention_heads)
    n_positions = model.config.max_position_embeddings
    if not isinstance(max_distance, int) or isinstance(max_distance, bool):
        raise TypeError(f"max_distance must be an int, got {type(max_distance).__name__}")
    if not 1 <= max_distance <= n_positions:
        raise ValueError(f"max_distance must be in 1 … {n_positions}, got {max_distance}")
    # the forms first: they refuse a PLDRLLM's heads before the forward pass
    asym = torch.tensor(
        [asymmetry(head_bilinear_form(attn, head, d)) for d in range(max_distance)],
        dtype=torch.float64,
    )
    out = model(ids, output_pldr_attentions=True)
    E = cpu64(out.pldr_attentions[layer].E[0, head])
    return HeadProfile(layer, head, E, asym)


#: The deductive tensors the explorers and order parameters look at, in pipeline order.
DEDUCTIVE = ("A", "A_LM", "A_P", "G_LM")


@dataclass(frozen=True)
class DeductiveProfile:
    """One head of a PLGA layer over several prompts.

    ``first[name]``: the tensor on the first prompt, ``[d_k, d_k]``; ``spread[name]``: its standard
    deviation across the prompts, entry by entry; ``order[name]``: the order parameter (SOC
    normalisation: RMSE over the magnitude of the mean) between the first prompt and each other,
    averaged; ``order_rms[name]``: the same with the audit's RMS normalisation; for every name in
    :data:`~kvattn.diagnostics.heads.DEDUCTIVE` that the model computes (a constant-G model has G_LM
    only). ``order`` is ``nan`` where its normalisation is undefined (the first prompt's tensor has
    mean exactly 0 and another prompt's differs, as A of a freshly initialised model): see
    :func:`~kvattn.diagnostics.measures.order_parameter`. ``label`` names the model (e.g. "trained")
    for explorers that compare several.
    """

    layer: int
    head: int
    first: dict[str, Tensor]
    spread: dict[str, Tensor]
    order: dict[str, float]
    order_rms: dict[str, float] = field(default_factory=dict)
    label: str = ""

    def relative_spread(self, name: str) -> float:
        """rms of the spread over rms of the first prompt's tensor (0: input-invariant)."""
        rms = float(self.first[name].pow(2).mean().sqrt())
        return float(self.spread[name].pow(2).mean().sqrt()) / rms if rms else math.nan


@torch.no_grad()
def _last_position(outputs):
    """The deductive outputs of a prefix-density layer (``[B, H, S, d_k, d_k]``) at the last
    position, whose density sums over the whole probe as the block density does; others as
    they are."""
    return dataclasses.replace(
        outputs,
        **{
            name: t[:, :, -1]
            for name in (*DEDUCTIVE, "A0")
            if (t := getattr(outputs, name)) is not None and t.ndim == 5
        },
    )


def deductive_tensors(model: DecoderLM, prompts: list[Tensor]) -> list[list]:
    """The deductive outputs of every prompt: ``out[p][layer]`` is a
    :class:`kvattn.plga.DeductiveOutputs`; each prompt is token ids of shape ``(1, S)``.

    Raises
    ------
    TypeError
        ``prompts`` is not a list or tuple, or a prompt is not an int64 (or int32) tensor.
    ValueError
        No prompts, a prompt not of shape ``(1, S)`` with S ≥ 1 (a batch would be profiled
        by its first row only) or on the meta device, or two prompts with the same ids (a repeat
        would read as an input-invariant G_LM in :func:`deductive_profile`).
    """
    _check_probes(prompts, 1, "need a list of one or more prompts", "prompts", distinct=True)
    return [model(ids, output_pldr_attentions=True).pldr_attentions for ids in prompts]


def deductive_profile(
    outputs: list[list], layer: int, head: int, label: str = ""
) -> DeductiveProfile:
    """Summarise :func:`deductive_tensors` for one layer and head (needs 2+ prompts); tensors on
    any device, results on the CPU in float64. Tensors the model does not compute (None, as A of
    a constant-G model) are left out; a constant-G model's G_LM ``[H, d_k, d_k]`` is the same for
    every prompt. For the prefix density (tensors ``[1, H, S, d_k, d_k]``), each prompt's tensors
    are taken at its last position, whose density sums over the whole prompt (as
    :func:`~kvattn.diagnostics.collapse.collapse_measures` does).

    Raises
    ------
    TypeError
        For outputs that are not a list of per-prompt lists of
        :class:`~kvattn.plga.DeductiveOutputs` (what :func:`deductive_tensors` returns; objects
        with its fields A, A_LM, A_P and G_LM do), or outputs without G_LM (a GPT's).
    ValueError
        For fewer than two prompts, prompts with different numbers of layers, outputs of a batch
        of more than one prompt, or ``layer``/``head`` out of range.
    """
    _check_outputs(outputs)
    if len(outputs) < 2:
        raise ValueError("need the deductive tensors of at least two prompts")
    if len({len(o) for o in outputs}) > 1:
        raise ValueError(
            "outputs must hold every layer for every prompt, got "
            f"{', '.join(str(len(o)) for o in outputs)} layers"
        )
    _index(layer, "layer", len(outputs[0]))
    G = outputs[0][layer].G_LM
    if G is None:
        raise TypeError("the outputs have no G_LM (a GPT's): profile a PLDRLLM's outputs")
    if G.ndim >= 4 and G.shape[0] != 1:
        raise ValueError(
            f"outputs must be of one prompt each (batch 1, as deductive_tensors gives), got "
            f"G_LM of shape {tuple(G.shape)}"
        )
    _index(head, "head", G.shape[0] if G.ndim == 3 else G.shape[1])
    first, spread, order, order_rms = {}, {}, {}, {}
    for name in DEDUCTIVE:
        if getattr(outputs[0][layer], name) is None:
            continue
        stack = torch.stack(
            [
                cpu64(t[head] if t.ndim == 3 else t[0, head] if t.ndim == 4 else t[0, head, -1])
                for t in (getattr(o[layer], name) for o in outputs)
            ]
        )
        first[name] = stack[0]
        spread[name] = stack.std(0)
        if float(stack[0].mean()) == 0.0 and not bool((stack == stack[0]).all()):
            order[name] = math.nan
        else:
            order[name] = sum(order_parameter(stack[0], s) for s in stack[1:]) / (len(stack) - 1)
        order_rms[name] = sum(order_parameter(stack[0], s, "rms") for s in stack[1:]) / (
            len(stack) - 1
        )
    return DeductiveProfile(layer, head, first, spread, order, order_rms, label)


def _check_outputs(outputs: object) -> None:
    """Raise unless ``outputs`` is a list (or tuple) of per-prompt lists of
    :class:`~kvattn.plga.DeductiveOutputs` (or objects with its fields A, A_LM, A_P, G_LM)."""
    bad = None
    if not isinstance(outputs, list | tuple):
        bad = type(outputs).__name__
    else:
        for p, per_prompt in enumerate(outputs):
            if not isinstance(per_prompt, list | tuple):
                bad = f"outputs[{p}] = {type(per_prompt).__name__}"
            else:
                bad = next(
                    (
                        f"outputs[{p}][{i}] = {type(t).__name__}"
                        for i, t in enumerate(per_prompt)
                        # read by name, as DeductiveOutputs has them (built by hand too)
                        if not all(hasattr(t, name) for name in DEDUCTIVE)
                    ),
                    None,
                )
            if bad is not None:
                break
    if bad is not None:
        raise TypeError(
            "outputs must be a list with, per prompt, the list of DeductiveOutputs of every layer "
            f"(what deductive_tensors returns), got {bad}"
        )


@torch.no_grad()
def attention_input(model: DecoderLM, ids: Tensor, layer: int) -> Tensor:
    """What enters the attention of ``layer`` when ``model`` reads ``ids``: the hidden states
    ``[B, S, d]`` on the model's device (for PLDR-LLM v51, the previous layer's output; for
    layer 0, the LayerNorm of the scaled embedding).

    Raises
    ------
    TypeError
        For a model that is not a PLDRLLM or GPT.
    ValueError
        For ``layer`` out of range.
    """
    captured = {}

    def keep_input(module, args) -> None:  # returns None: the layer's arguments stay as they are
        captured["x"] = args[0]

    handle = _attention(model, layer).register_forward_pre_hook(keep_input)
    try:
        model(ids)
    finally:
        handle.remove()
    return captured["x"]


@torch.no_grad()
def layer_queries(model: DecoderLM, ids: Tensor, layer: int, rope: bool = True) -> Tensor:
    """The queries of every head of ``layer`` on ``ids`` (shape ``(1, S)``, on the model's
    device), as ``[H, S, d_k]`` on the CPU in float64, after RoPE (``rope=True``, what the density
    sums) or before it.

    Raises
    ------
    TypeError
        For a model that is not a PLDRLLM or GPT, or ids that are not an int64 (or int32) tensor.
    ValueError
        For ids not of shape (1, S) or ``layer`` out of range.
    """
    _check_sequence(ids, "ids")
    attn = _attention(model, layer)
    x = attention_input(model, ids, layer)
    q = attn.wq(x).view(x.shape[0], x.shape[1], attn.cfg.num_attention_heads, attn.cfg.d_k)
    if rope:
        q = attn.rope(q)
    return cpu64(q[0].transpose(0, 1))


def twirl(
    model: DecoderLM, ids: Tensor, layer: int, head: int, lengths: list[int]
) -> dict[int, Tensor]:
    """The normalised density A0/S of one head over the first S tokens, for each S in
    ``lengths`` (CPU float64 ``[d_k, d_k]``): the compute function of chapter 10's explorer.

    Raises
    ------
    TypeError
        For a model that is not a PLDRLLM or GPT, ids that are not an int64 (or int32) tensor,
        or ``lengths`` that is not a list or tuple of ints.
    ValueError
        For ids not of shape (1, S), ``layer``/``head`` out of range, no lengths, a length
        outside 1 … S, or a length given twice (the result has one entry per length).
    """
    _check_sequence(ids, "ids")
    _index(head, "head", _attention(model, layer).cfg.num_attention_heads)
    if not isinstance(lengths, list | tuple) or not all(
        isinstance(S, int) and not isinstance(S, bool) for S in lengths
    ):
        raise TypeError(f"lengths must be a list of ints, got {lengths!r}")
    if not lengths or min(lengths) < 1:
        raise ValueError(f"lengths must be a non-empty list of ints ≥ 1, got {lengths!r}")
    duplicates = sorted({S for S in lengths if lengths.count(S) > 1})
    if duplicates:
        raise ValueError(f"lengths has duplicates {duplicates}, got {lengths!r}")
    if max(lengths) > ids.shape[1]:
        raise ValueError(f"lengths go up to {max(lengths)} but the input has {ids.shape[1]} tokens")
    q = layer_queries(model, ids, layer)[head]
    return {S: q[:S].T @ q[:S] / S for S in lengths}
