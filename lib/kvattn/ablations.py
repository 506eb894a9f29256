"""The ablations of PLDR-LLM that the course measures: the constant-G model built from a trained
one, and the loss of generation (each position sees only its prefix).

* :func:`constant_g_from` — the G ablation of the papers (v510G/v510Gi [gokden2025kvg]): a
  model's weights with fixed per-layer G_LM instead of its metric learner;
* :func:`generation_mode_logits`, :func:`generation_mode_loss` — the next-token logits and
  cross-entropy that decoding one token at a time computes, which differ from a full pass when
  the block density lets positions see later tokens;
* :func:`reparametrise_heads`, :func:`scramble_keys` — changes of every head's query and key
  weights: one that keeps each head's bilinear form W_Qᵀ W_K (an invertible A and its inverse
  transpose), and the control that destroys the learned keys at their size (chapter 6).

Bracketed keys cite ``book/references.bib``.
"""

from __future__ import annotations

import copy

import torch

from .config import PLDRConfig
from .losses import lm_cross_entropy
from .pldr import PLDRLLM, DecoderLM

Tensor = torch.Tensor


@torch.no_grad()
def generation_mode_logits(model: DecoderLM, ids: Tensor) -> Tensor:
    """Next-token logits ``[B, S, vocab]`` when every position sees only its prefix (see
    :func:`generation_mode_loss`, whose checks and errors it shares): row t is the last logits of
    a full pass over ``ids[:, :t + 1]``.
    """
    return _generation_mode(model, ids)[0]


def generation_mode_loss(model: DecoderLM, ids: Tensor) -> float:
    """Mean next-token cross-entropy, in nats per token, when every position sees only its prefix.

    ``ids [B, S + 1]`` (int64 or int32, on the model's device) holds blocks as
    :func:`kvattn.data.blocks` cuts them: inputs ``ids[:, :-1]``, targets ``ids[:, 1:]``, with
    S <= ``max_position_embeddings``. The logits for target t are the last logits of a full pass
    over ``ids[:, :t + 1]``: what decoding mode ``"none"`` of :meth:`kvattn.pldr.DecoderLM.generate`
    computes for the token after that prefix, so this is the loss of a decoder teacher-forced one
    token at a time. As in the training loss (:func:`kvattn.losses.lm_cross_entropy`), targets
    equal to ``pad_token_id`` are left out and pad ids are masked as keys.

    For a causal model (GPT, a constant-G model, ``density="prefix"``) it equals the full-pass
    loss ``lm_cross_entropy(model(ids[:, :-1]).logits, ids[:, 1:])`` up to float32 rounding
    (both take the cross-entropy in float32, as training does). The published block density
    sums over the whole block [gokden2025kvg], so in a full pass every position's G_LM is built
    with later tokens too; the full-pass loss, which the reference's training and validation
    report, then differs from the loss of generation, which this gives.
    The ``"kv"`` cache would be cheaper, but with the block density and more than one layer it is
    not exact (see :meth:`kvattn.pldr.DecoderLM.generate`), so every prefix is recomputed: S passes
    of lengths 1 to S, each batched over B, about S/2 times the work of one full pass. The model
    runs in eval mode and gets its mode back.

    Raises
    ------
    TypeError
        ``model`` is not a :class:`~kvattn.pldr.DecoderLM`; ``ids`` is not an int64/int32 tensor.
    ValueError
        ``ids`` not of shape ``[B >= 1, S + 1]`` with 1 <= S <= ``max_position_embeddings``;
        ids outside [0, vocab_size); ``ids`` on another device than the model; no target that
        is not padding.
    """
    logits, targets = _generation_mode(model, ids)
    return float(lm_cross_entropy(logits, targets, model.config.pad_token_id))


@torch.no_grad()
def _generation_mode(model: DecoderLM, ids: Tensor) -> tuple[Tensor, Tensor]:
    if not isinstance(model, DecoderLM):
        raise TypeError(f"model must be a PLDRLLM or GPT, got {type(model).__name__}")
    if not isinstance(ids, Tensor) or ids.dtype not in (torch.int64, torch.int32):
        got = ids.dtype if isinstance(ids, Tensor) else type(ids).__name__
        raise TypeError(f"ids must be an int64 (or int32) tensor of token ids, got {got}")
    if ids.ndim != 2 or ids.shape[0] < 1 or ids.shape[1] < 2:
        raise ValueError(
            "ids must have shape (batch >= 1, S + 1) with S >= 1 (inputs, then the last "
            f"target), got {tuple(ids.shape)}"
        )
    device = next(model.parameters()).device
    if ids.device != device:
        raise ValueError(f"ids are on {ids.device}, the model on {device}")
    # The inputs' length and values; the targets are the inputs shifted by one, plus the last id.
    model._check_inputs(ids[:, :-1], None, 0)
    model._check_inputs(ids[:, -1:], None, 0)
    targets = ids[:, 1:]
    if bool((targets == model.config.pad_token_id).all()):
        raise ValueError(
            f"every target is pad_token_id = {model.config.pad_token_id}: no loss to average"
        )
    was_training = model.training
    model.eval()
    try:
        logits = []
        for t in range(targets.shape[1]):
            prefix = ids[:, : t + 1]
            padding = model._default_padding(prefix, None)
            logits.append(model.forward_unchecked(prefix, padding, None, None, False).logits[:, -1])
        return torch.stack(logits, dim=1), targets
    finally:
        model.train(was_training)


def constant_g_from(model: PLDRLLM, G: list[Tensor]) -> PLDRLLM:
    """A constant-G model with ``model``'s weights and the given per-layer G_LM ``[H, d_k, d_k]``.

    This is the G ablation of the papers (v510G/v510Gi): every weight outside the metric learner
    and the PLGA tensors transfers; ``G`` is typically the G_LM a trained model produces.

    Raises ``TypeError`` when ``model`` is not a :class:`~kvattn.pldr.PLDRLLM` or ``G`` is not a
    list of floating-point tensors, ``ValueError`` for a wrong number of layers or a wrong shape;
    both before the new model is built.
    """
    if not isinstance(model, PLDRLLM):
        raise TypeError(f"model must be a PLDRLLM, got {type(model).__name__}")
    if not isinstance(G, list | tuple) or not all(
        isinstance(g, Tensor) and g.is_floating_point() for g in G
    ):
        raise TypeError("G must be a list of floating-point tensors, one G_LM per layer")
    cfg = PLDRConfig.from_dict({**model.config.to_dict(), "custom_G_type": "external"})
    if len(G) != cfg.num_hidden_layers:
        raise ValueError(f"need one G_LM per layer ({cfg.num_hidden_layers}), got {len(G)}")
    expected = (cfg.num_attention_heads, cfg.d_k, cfg.d_k)
    for i, g in enumerate(G):
        if tuple(g.shape) != expected:
            raise ValueError(f"G_LM of layer {i} must have shape {expected}, got {tuple(g.shape)}")
    reference = next(model.parameters())
    new = PLDRLLM(cfg).to(device=reference.device, dtype=reference.dtype)
    state = {k: v for k, v in model.state_dict().items() if k in new.state_dict()}
    for i, g in enumerate(G):
        state[f"decoder.dec_layers.{i}.mha1.G_LM"] = g.detach().to(new.final_layer.weight)
    new.load_state_dict(state)
    return new


def _head_rows(model: DecoderLM) -> list[tuple[torch.nn.Module, slice]]:
    """(attention layer, rows of one head in W_Q and W_K) for every layer and head, in order."""
    cfg = model.config
    return [
        (layer.mha1, slice(h * cfg.d_k, (h + 1) * cfg.d_k))
        for layer in model.decoder.dec_layers
        for h in range(cfg.num_attention_heads)
    ]


def reparametrise_heads(model: DecoderLM, A: Tensor) -> DecoderLM:
    """A copy of ``model`` with W_Q,h -> A W_Q,h and W_K,h -> A⁻ᵀ W_K,h in every head (biases
    alike), which leaves every form W_Q,hᵀ W_K,h unchanged.

    ``A [L, H, d_k, d_k]`` holds one invertible matrix per layer and head (any float dtype and
    device: the inverse is taken on the CPU in float64, then cast to the model's weights). Without
    RoPE the copy computes the same logits as ``model`` for every A; with RoPE only for matrices
    that commute with every rotation (chapter 6; the forms are
    W_Q,hᵀ Aᵀ R(δ) A⁻ᵀ W_K,h). The model is not changed.

    Raises
    ------
    TypeError
        ``model`` is not a :class:`~kvattn.pldr.DecoderLM`; ``A`` is not a floating-point tensor.
    ValueError
        ``A`` not of shape ``[num_hidden_layers, num_attention_heads, d_k, d_k]``, not finite, or
        holding a singular matrix.
    """
    if not isinstance(model, DecoderLM):
        raise TypeError(f"model must be a PLDRLLM or GPT, got {type(model).__name__}")
    if not isinstance(A, Tensor) or not A.is_floating_point():
        got = A.dtype if isinstance(A, Tensor) else type(A).__name__
        raise TypeError(f"A must be a floating-point tensor, got {got}")
    cfg = model.config
    shape = (cfg.num_hidden_layers, cfg.num_attention_heads, cfg.d_k, cfg.d_k)
    if tuple(A.shape) != shape:
        raise ValueError(
            f"A must have shape {shape} (layers, heads, d_k, d_k), got {tuple(A.shape)}"
        )
    A64 = A.detach().to("cpu", torch.float64)
    if not torch.isfinite(A64).all():
        raise ValueError("A must be finite")
    A_inv, info = torch.linalg.inv_ex(A64)
    if bool((info != 0).any()) or not torch.isfinite(A_inv).all():
        raise ValueError("every matrix of A must be invertible")
    new = copy.deepcopy(model)
    with torch.no_grad():
        flat = zip(A64.flatten(0, 1), A_inv.transpose(-1, -2).flatten(0, 1), strict=True)
        for (attn, rows), (a, a_inv_t) in zip(_head_rows(new), flat, strict=True):
            for proj, m in ((attn.wq, a), (attn.wk, a_inv_t)):
                m = m.to(proj.weight)
                proj.weight[rows] = m @ proj.weight[rows]
                if proj.bias is not None:
                    proj.bias[rows] = m @ proj.bias[rows]
    return new


def scramble_keys(model: DecoderLM, generator: torch.Generator) -> DecoderLM:
    """A copy of ``model`` whose every head's key weights W_K,h ``[d_k, d]`` are replaced by
    standard normal ones rescaled to the same Frobenius norm (key biases and everything else
    kept).

    The control for the exchange of W_Q and W_K (:func:`kvattn.diagnostics.heads.swap_attention_qk`)
    on the same trained model: it destroys what the keys learned while keeping their size, so
    the two losses say whether the exchange costs as much as losing the keys. The draws come from
    ``generator`` (a CPU :class:`torch.Generator`, seed it for a reproducible copy), in float64,
    layer by layer and head by head. The model is not changed.

    Raises
    ------
    TypeError
        ``model`` is not a :class:`~kvattn.pldr.DecoderLM`; ``generator`` is not a
        :class:`torch.Generator`.
    ValueError
        ``generator`` is not on the CPU.
    """
    if not isinstance(model, DecoderLM):
        raise TypeError(f"model must be a PLDRLLM or GPT, got {type(model).__name__}")
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    if generator.device.type != "cpu":
        raise ValueError(f"generator must be a CPU generator, got one on {generator.device}")
    new = copy.deepcopy(model)
    with torch.no_grad():
        for attn, rows in _head_rows(new):
            W = attn.wk.weight[rows]
            R = torch.randn(W.shape, generator=generator, dtype=torch.float64)
            # the norm in float64 on the CPU: MPS has no float64
            R = R * (W.detach().cpu().double().norm() / R.norm())
            attn.wk.weight[rows] = R.to(W)
    return new
