"""The PLDR-LLM decoder's mathematics, read top to bottom: RoPE, metric learner, PLGA, decoder.

The architecture follows the published PLDR-LLM v51 reference code [gokden2025kvg] (arXiv
2502.13502; its PyTorch implementation is the authority). For one head, with post-RoPE queries q_s
and keys k_s of a block of S tokens (row vectors of size d_k, as everywhere in the course, so q_sᵀ
q_s is a d_k × d_k matrix):

    A0   = Σ_s q_sᵀ q_s                         density (Gram) operator, d_k × d_k
    A    = MetricLearner(LayerNorm(A0))          num_reslayerA residual SwiGLU units on the rows
    A_LM = iSwiGLU(W A + b_W) + ε,  iSwiGLU(u) = u·silu(u)          positive metric tensor
    A_P  = A_LM^{∘P}                             elementwise power (potential tensor)
    G_LM = a A_P + b_a                           matrix product: the learned bilinear form
    E    = softmax(q G_LM kᵀ / √d_k + causal mask)

``W, b_W, P, a, b_a`` are per-head ``[H, d_k, d_k]`` tensors; the metric learner's weights are
shared by all heads. Scaled dot-product attention (SDPA) is the special case G_LM = I.

This file imports only torch and :mod:`kvattn.config`; it is the model a chapter shows. The
public models add input checks, decoding, saving and loading around :class:`LanguageModel`
(:mod:`kvattn.pldr`, :mod:`kvattn.generation`, :mod:`kvattn.pretrained`).

Models
------
* :class:`~kvattn.pldr.PLDRLLM` — the published decoder: embedding × √d then LayerNorm, post-LN
  blocks with biases, SwiGLU FFN of width ``intermediate_size``, untied output layer with bias. With
  ``custom_G_type`` set it is the *constant-G* model (the G ablation): no metric learner, one
  fixed G_LM per layer and head, attention through
  ``torch.nn.functional.scaled_dot_product_attention`` on q' = q G_LM.
* :class:`~kvattn.pldr.GPT` — the same block with SDPA (G_LM = I) and nothing else, for comparisons.

Module and parameter names reproduce the published ``state_dict`` keys
(``decoder.dec_layers.i.mha1.wq.weight`` ...), except that the five PLGA tensors carry the
papers' symbols (``W, b_W, P, a, b_a`` for ``Wlst, blst, pwlst, alst, balst``);
:mod:`kvattn.checkpoint` maps between the two.

Two additions, both off by default and marked as deviations where they live:

* ``density="prefix"``: position t's density sums over its own prefix s ≤ t only, so no
  position depends on later tokens. The published ``"block"`` density sums over the whole block,
  so during training a position's logits depend on later tokens. The prefix variant costs
  S times the memory and work of everything between the density and the scores.
* decoding mode ``"kv"``: a KV cache that also caches the running density and reruns the metric
  learner every step (the published cache freezes A at the prompt). The new token's attention
  is that of a full pass; earlier positions keep their states (see
  :meth:`kvattn.generation.GenerationMixin.generate`).

Where the code departs from the native reference otherwise, each place says so:
:func:`attention_mask` (a query whose causal keys are all padding keeps them),
:meth:`LanguageModel.reset_parameters` (the reference's ``wv`` initialisation bug is not
reproduced), :func:`random_G` and ``cache_first_G`` (from the Hugging Face port).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .config import EPSILON_A, MASK_VALUE, PLDRConfig

Tensor = torch.Tensor


class RotaryEmbedding(nn.Module):
    """RoPE on ``[B, S, H, d_k]`` tensors, base ``theta``, for positions < ``max_positions``.

    ``interleaved=True`` rotates the planes (2i, 2i+1), the GPT-J layout of PLDR-LLM v51
    (``reference_rope=True``); ``False`` rotates (i, i + d_k/2), the GPT-NeoX half-split layout
    of v52. Angle of plane i at position p: p·theta^(−2i/d_k). The cos/sin tables are kept in
    float64 outside the module's buffers (so ``.float()``/``.double()`` cannot round them) and
    cast to the input's dtype and device on use.
    """

    def __init__(self, d_k: int, max_positions: int, theta: float, interleaved: bool):
        super().__init__()
        self.interleaved = interleaved
        self.max_positions = max_positions
        inv_freq = theta ** (-torch.arange(0, d_k, 2, dtype=torch.float64) / d_k)
        angles = torch.arange(max_positions, dtype=torch.float64)[:, None] * inv_freq[None, :]
        # plain attributes, not buffers: module dtype casts must not round them
        self.cos, self.sin = angles.cos(), angles.sin()
        self._cast: dict = {}

    def _table(self, dtype: torch.dtype, device: torch.device) -> tuple[Tensor, Tensor]:
        key = (dtype, device)
        if key not in self._cast:
            self._cast[key] = (
                self.cos.to(device=device, dtype=dtype),
                self.sin.to(device=device, dtype=dtype),
            )
        return self._cast[key]

    def matrix(self, position: int) -> Tensor:
        """R(p), float64 ``[d_k, d_k]`` on the CPU: the matrix with rope(x) = x R(p) for a row x
        at ``position`` (row m of R(p) is what the rotation makes of the m-th basis vector)."""
        d_k = 2 * self.cos.shape[1]
        eye = torch.eye(d_k, dtype=torch.float64).view(d_k, 1, 1, d_k)
        return self(eye, start=position).view(d_k, d_k)

    def forward(self, x: Tensor, start: int = 0) -> Tensor:
        S = x.shape[1]
        if start + S > self.max_positions:
            raise ValueError(
                f"positions up to {start + S - 1} exceed max_position_embeddings "
                f"= {self.max_positions}"
            )
        cos, sin = self._table(x.dtype, x.device)
        cos = cos[start : start + S][None, :, None, :]  # [1, S, 1, d_k/2]
        sin = sin[start : start + S][None, :, None, :]
        if self.interleaved:
            x1, x2 = x[..., 0::2], x[..., 1::2]
            return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)
        half = x.shape[-1] // 2
        x1, x2 = x[..., :half], x[..., half:]
        return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)


def iswiglu(u: Tensor) -> Tensor:
    """iSwiGLU(u) = u·silu(u) = u²·sigmoid(u) ≥ 0 ("SwiGLU with W = V = I and
    no bias")."""
    return u * F.silu(u)


class GLUVariant(nn.Module):
    """SwiGLU block ``y = gluw3(silu(gluw1 x) ⊙ gluw2 x)`` with biases
    (reference ``GLUVariant``).

    Acts on the last axis: ``(..., d_in)`` → ``(..., d_out)``. Used as the
    decoder's FFN (d → intermediate_size → d) and inside the metric learner
    (d_k → A_dff → d_k, on each row).
    """

    def __init__(
        self,
        d_in: int,
        d_hidden: int,
        d_out: int,
        bias: bool = True,
    ):
        super().__init__()
        self.gluw1 = nn.Linear(d_in, d_hidden, bias=bias)
        self.gluw2 = nn.Linear(d_in, d_hidden, bias=bias)
        self.gluw3 = nn.Linear(d_hidden, d_out, bias=bias)

    def forward(self, x: Tensor) -> Tensor:
        return self.gluw3(F.silu(self.gluw1(x)) * self.gluw2(x))


class ResLayerA(nn.Module):
    """One residual unit of the metric learner: ``num_denseA`` GLU blocks in
    sequence, then ``LayerNorm(A + A_in)`` over the last axis (post-LN, no
    inner norm or dropout)."""

    def __init__(self, cfg: PLDRConfig):
        super().__init__()
        d_k, bias, n = cfg.d_k, cfg.glu_bias, cfg.num_denseA
        blocks = [GLUVariant(d_k, cfg.A_dff, d_k, bias) for _ in range(n)]
        self.denseAs = nn.ModuleList(blocks)
        self.layernormA = nn.LayerNorm(d_k, eps=cfg.layer_norm_eps)

    def forward(self, A: Tensor) -> Tensor:
        out = A
        for dense in self.denseAs:
            out = dense(out)
        return self.layernormA(out + A)


class PowerLawGraph(nn.Module):
    """The per-head tensors of PLGA and the map A → (A_LM, A_P, G_LM).

    ``W, b_W, P, a, b_a`` have shape ``[H, d_k, d_k]`` (reference ``Wlst,
    blst, pwlst, alst, balst``). :meth:`forward` takes A of shape
    ``[B, H, d_k, d_k]`` (or ``[B, H, S, d_k, d_k]`` for the prefix density)
    and returns A_LM, A_P and G_LM of the same shape.
    """

    def __init__(self, cfg: PLDRConfig):
        super().__init__()
        shape = (cfg.num_attention_heads, cfg.d_k, cfg.d_k)
        self.W = nn.Parameter(torch.empty(shape))
        self.b_W = nn.Parameter(torch.zeros(shape))
        self.P = nn.Parameter(torch.empty(shape))
        self.a = nn.Parameter(torch.empty(shape))
        self.b_a = nn.Parameter(torch.zeros(shape))
        normal = cfg.plga_init == "xavier_normal"
        init = nn.init.xavier_normal_ if normal else nn.init.xavier_uniform_
        for t in (self.W, self.P, self.a):
            init(t)

    @staticmethod
    def _per_head(t: Tensor, like: Tensor) -> Tensor:
        # [H, d, d] -> [H, 1, ..., d, d], to broadcast with [B, H, (S,) d, d]
        return t.view(t.shape[0], *([1] * (like.ndim - 4)), *t.shape[1:])

    def forward(self, A: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """(A_LM, A_P, G_LM) for a metric-learner output A (shapes as A)."""
        heads = (self.W, self.b_W, self.P, self.a, self.b_a)
        W, b_W, P, a, b_a = (self._per_head(t, A) for t in heads)
        A_LM = iswiglu(W @ A + b_W) + EPSILON_A  # positive metric tensor
        A_P = A_LM.pow(P)  # elementwise power: the potential tensor
        G_LM = a @ A_P + b_a  # the learned bilinear form
        return A_LM, A_P, G_LM


@dataclass
class DeductiveOutputs:
    """The intermediate tensors of one attention layer.

    For PLGA: density A0, metric-learner output A, A_LM, A_P and G_LM, each ``[B, H, d_k, d_k]``
    (an extra S axis after H for the prefix density). For every kind of attention: the attention
    weights E ``[B, H, S_q, S_k]``. A constant-G model reports its fixed G_LM ``[H, d_k, d_k]``
    and E; a GPT reports E only (the other fields are None).
    """

    A0: Tensor | None = None
    A: Tensor | None = None
    A_LM: Tensor | None = None
    A_P: Tensor | None = None
    G_LM: Tensor | None = None
    E: Tensor | None = None


def random_G(num_heads: int, d_k: int) -> Tensor:
    """The initial G_LM of a ``custom_G_type="random"`` model: ``[num_heads, d_k, d_k]`` entries
    drawn i.i.d. from N(0, 1) with the global torch generator.

    Source: the HF port's ``PldrllmModel.G_values_init`` (``torch.randn``; transformers @
    ``a28acc8``, ``modeling_pldrllm.py``). The native code's predefined file named
    ``RANDOM_NORMAL`` (KVG ``src/ablation/predefined-G_LM``) holds U[0, 1) values instead
    [gokden2025kvg]; this follows the port, whose ``custom_G_type`` field it shares.
    """
    return torch.randn(num_heads, d_k, d_k)


@dataclass
class LayerCache:
    """Decoding state of one attention layer: post-RoPE keys and values ``[B, H, T, d_k]``, the
    key mask ``padding`` (bool ``[B, T]``, True at blocked keys), the running density Σ qᵀ q
    ``[B, H, d_k, d_k]`` (mode ``"kv"``), and the G_LM to use and the deductive tensors
    ``frozen`` of the prompt's pass (mode ``"kv+g"``)."""

    k: Tensor
    v: Tensor
    padding: Tensor | None = None
    density: Tensor | None = None
    G_LM: Tensor | None = None
    frozen: DeductiveOutputs | None = None

    @property
    def length(self) -> int:
        return self.k.shape[2]


def attention_mask(
    S: int, T: int, key_padding: Tensor | None, device: torch.device | str
) -> Tensor:
    """Which keys each of the last ``S`` of ``T`` positions attends to: bool ``[B or 1, 1, S, T]``,
    True = attend.

    Causal (query i sees keys ≤ its position), minus the keys that ``key_padding`` (bool
    ``[B, T]``, True at a blocked key) blocks. A query whose causal keys are all padding (left
    padding) keeps its causal keys: the reference would spread it uniformly over every key,
    future ones included, which makes earlier positions depend on later tokens; no row is ever
    empty, so neither softmax nor SDPA can return NaN.

    The knock-on: the pad positions' outputs therefore differ from the reference's, and from the
    second layer on they are queries of the published density, which sums over every position
    (pad ones included). In a PLGA model with two or more layers, the real tokens of a
    left-padded row then get logits that differ from the reference's (all but the first real
    token, whose only key is itself); with one layer, or without a density (GPT, constant G),
    real tokens' logits are the reference's. Unpadded rows are never affected. (Left padding is
    not transparent for the block density in either code: even a one-layer model's real-token
    logits differ from those of the same tokens unpadded, because the density sums the pad
    queries and RoPE positions shift.)
    """
    mask = torch.ones(S, T, dtype=torch.bool, device=device).tril(T - S)[None, None]
    if key_padding is None:
        return mask
    padded = mask & ~key_padding[:, None, None, :T]
    return torch.where(padded.any(-1, keepdim=True), padded, mask)


class Attention(nn.Module):
    """Multi-head attention of a decoder layer: PLGA, constant-G or SDPA (``kind``).

    Input ``[B, S, d]``; q, k, v projections with biases (``wq, wk, wv``), RoPE on q and k,
    output projection ``dense``. ``kind="plga"`` builds G_LM from the density as in the module
    docstring; ``"constant_g"`` uses a fixed buffer ``G_LM [H, d_k, d_k]`` (identity, or
    :func:`random_G` for ``custom_G_type="random"``); ``"sdpa"`` is G_LM = I.
    """

    def __init__(self, cfg: PLDRConfig, kind: str):
        super().__init__()
        if kind not in ("plga", "constant_g", "sdpa"):
            raise ValueError(f"unknown attention kind {kind!r}")
        self.kind = kind
        self.cfg = cfg
        d, H, d_k = cfg.hidden_size, cfg.num_attention_heads, cfg.d_k
        self.wq = nn.Linear(d, d, bias=cfg.attention_bias)
        self.wk = nn.Linear(d, d, bias=cfg.attention_bias)
        self.wv = nn.Linear(d, d, bias=cfg.attention_bias)
        self.dense = nn.Linear(d, d, bias=cfg.attention_bias)
        self.rope = RotaryEmbedding(
            d_k, cfg.max_position_embeddings, cfg.rope_theta, interleaved=cfg.reference_rope
        )
        if kind == "plga":
            self.layernorm1 = nn.LayerNorm(d_k, eps=cfg.layer_norm_eps)
            self.reslayerAs = nn.ModuleList(ResLayerA(cfg) for _ in range(cfg.num_reslayerA))
            self.plgatt_layer = PowerLawGraph(cfg)
        elif kind == "constant_g":
            if cfg.custom_G_type == "random":
                G = random_G(H, d_k)
            else:
                G = torch.eye(d_k).expand(H, d_k, d_k).clone()
            self.register_buffer("G_LM", G)

    # -- the density-to-G pipeline -------------------------------------------------------------

    def metric(self, A0: Tensor) -> DeductiveOutputs:
        """Run the metric learner and the power-law graph on a density A0
        ``[..., d_k, d_k]``."""
        A = self.layernorm1(A0)
        for unit in self.reslayerAs:
            A = unit(A)
        A_LM, A_P, G_LM = self.plgatt_layer(A)
        return DeductiveOutputs(A0=A0, A=A, A_LM=A_LM, A_P=A_P, G_LM=G_LM)

    def _split(self, x: Tensor, proj: nn.Linear) -> Tensor:
        B, S, _ = x.shape
        return proj(x).view(B, S, self.cfg.num_attention_heads, self.cfg.d_k)

    def forward(
        self,
        x: Tensor,
        mask: Tensor,
        cache: LayerCache | None = None,
        cache_mode: str | None = None,
        need_outputs: bool = False,
    ) -> tuple[Tensor, LayerCache | None, DeductiveOutputs | None]:
        """Attention output ``[B, S, d]``, the updated cache and (if asked) deductive outputs.

        ``mask``: bool ``[B or 1, 1, S, S_total]``, True where a query may attend to a key
        (from :func:`attention_mask`); the published density still sums over every query,
        padded ones included, as the reference does. ``cache_mode``: None (no cache), ``"kv"``
        or ``"kv+g"``; with a cache, x holds only the new tokens.
        """
        B, S, _ = x.shape
        start = cache.length if cache is not None else 0
        q = self.rope(self._split(x, self.wq), start).transpose(1, 2)  # [B, H, S, d_k]
        k = self.rope(self._split(x, self.wk), start).transpose(1, 2)
        v = self._split(x, self.wv).transpose(1, 2)
        if cache is not None:
            k = torch.cat([cache.k, k], dim=2)
            v = torch.cat([cache.v, v], dim=2)
        outputs = None

        if self.kind == "sdpa":
            qg = q
            if need_outputs:
                outputs = DeductiveOutputs()
        elif self.kind == "constant_g":
            qg = q @ self.G_LM.to(q.dtype)
            if need_outputs:
                outputs = DeductiveOutputs(G_LM=self.G_LM)
        else:
            qg, outputs, new_state = self._plga_queries(q, cache, cache_mode)

        if need_outputs:
            # Explicit softmax when the weights E are wanted; blocked logits get the reference's
            # −1e9. Otherwise SDPA (no row is fully blocked, see attention_mask).
            scores = (qg @ k.transpose(-1, -2)) / math.sqrt(self.cfg.d_k)
            scores = scores.masked_fill(~mask, max(MASK_VALUE, torch.finfo(scores.dtype).min))
            low = scores.dtype in (torch.float16, torch.bfloat16)  # softmax in float32 for those
            E = torch.softmax(scores, dim=-1, dtype=torch.float32 if low else None).to(v.dtype)
            y = E @ v
            if outputs is not None:
                outputs.E = E
        else:
            y = F.scaled_dot_product_attention(qg, k, v, attn_mask=mask)
        y = self.dense(y.transpose(1, 2).reshape(B, S, -1))

        new_cache = None
        if cache_mode is not None:
            new_cache = LayerCache(k=k, v=v)
            if self.kind == "plga":
                new_cache.density, new_cache.G_LM, new_cache.frozen = new_state
        return y, new_cache, outputs

    def _plga_queries(self, q: Tensor, cache: LayerCache | None, cache_mode: str | None):
        """q G_LM for PLGA, the deductive outputs, and the cache state to carry forward:
        (running density, G_LM of the last position, deductive outputs of the last position)."""
        if cache is not None and cache_mode == "kv+g":
            # The published G cache: G_LM (and A, A_LM, A_P) stay those of the prompt's pass.
            f = cache.frozen
            outputs = DeductiveOutputs(f.A0, f.A, f.A_LM, f.A_P, f.G_LM)
            return q @ cache.G_LM, outputs, (None, cache.G_LM, f)
        previous = cache.density if cache is not None else None
        if self.cfg.density == "prefix":
            # One density per position t: Σ_{s ≤ t} q_sᵀ q_s (a deviation from the reference).
            per_pos = torch.einsum("bhsi,bhsj->bhsij", q, q).cumsum(dim=2)
            if previous is not None:
                per_pos = per_pos + previous[:, :, None]
            outputs = self.metric(per_pos)
            qg = torch.einsum("bhsi,bhsij->bhsj", q, outputs.G_LM)
            last = DeductiveOutputs(
                *(
                    t[:, :, -1]
                    for t in (outputs.A0, outputs.A, outputs.A_LM, outputs.A_P, outputs.G_LM)
                )
            )
            return qg, outputs, (per_pos[:, :, -1], last.G_LM, last)
        # The published block density: one sum over every token of the sequence so far.
        density = q.transpose(-1, -2) @ q
        if previous is not None:
            density = density + previous
        outputs = self.metric(density)
        cached_G = outputs.G_LM
        if self.cfg.cache_first_G:  # the HF port's option: every row later uses row 0's G
            cached_G = cached_G[:1]
        return q @ outputs.G_LM, outputs, (density, cached_G, outputs)


class DecoderLayer(nn.Module):
    """Post-LN block: ``x = LN1(x + attention(x))``, then ``x = LN2(x + SwiGLU_FFN(x))``."""

    def __init__(self, cfg: PLDRConfig, kind: str):
        super().__init__()
        self.mha1 = Attention(cfg, kind)
        self.ffn = GLUVariant(cfg.hidden_size, cfg.intermediate_size, cfg.hidden_size, cfg.glu_bias)
        self.layernorm1 = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.layernorm2 = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)

    def forward(self, x, mask, cache=None, cache_mode=None, need_outputs=False):
        h, cache, outputs = self.mha1(x, mask, cache, cache_mode, need_outputs)
        x = self.layernorm1(x + h)
        x = self.layernorm2(x + self.ffn(x))
        return x, cache, outputs


class Decoder(nn.Module):
    """Embedding × √d, LayerNorm, then the decoder layers (no final norm, as the reference)."""

    def __init__(self, cfg: PLDRConfig, kind: str):
        super().__init__()
        self.embedding = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layernorm1 = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.dec_layers = nn.ModuleList(
            DecoderLayer(cfg, kind) for _ in range(cfg.num_hidden_layers)
        )
        self.scale = math.sqrt(cfg.hidden_size)

    def forward(self, ids, key_padding=None, caches=None, cache_mode=None, need_outputs=False):
        x = self.layernorm1(self.embedding(ids) * self.scale)
        start = caches[0].length if caches else 0
        # one mask for every layer: built per layer, it would be a sizeable part of a step
        mask = attention_mask(ids.shape[1], start + ids.shape[1], key_padding, ids.device)
        new_caches, all_outputs = [], []
        for i, layer in enumerate(self.dec_layers):
            cache = caches[i] if caches is not None else None
            x, cache, outputs = layer(x, mask, cache, cache_mode, need_outputs)
            new_caches.append(cache)
            all_outputs.append(outputs)
        return x, new_caches, all_outputs


@dataclass
class CausalLMOutput:
    """Output of a forward pass: ``logits [B, S, V]``; ``caches`` (one :class:`LayerCache` per
    layer, when a cache mode was given); ``pldr_attentions`` (one :class:`DeductiveOutputs` per
    layer, when asked for)."""

    logits: Tensor
    caches: list[LayerCache | None] | None = None
    pldr_attentions: list[DeductiveOutputs | None] | None = None


class LanguageModel(nn.Module):
    """The decoder and its untied output layer, with no input checks: the whole model's
    mathematics. ``kind`` is the attention of every layer (``"plga"``, ``"constant_g"`` or
    ``"sdpa"``). :class:`kvattn.pldr.PLDRLLM` and :class:`kvattn.pldr.GPT` add the input checks,
    decoding, saving and loading."""

    def __init__(self, config: PLDRConfig, kind: str):
        super().__init__()
        self.kind = kind
        self.config = config
        self.decoder = Decoder(config, kind)
        self.final_layer = nn.Linear(config.hidden_size, config.vocab_size, bias=config.final_bias)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """The reference initialisers: xavier-uniform weights and zero biases for every Linear
        (``weights_init``), PyTorch's N(0, 1) for the embedding, LayerNorm γ = 1 and β = 0, and
        ``plga_init`` (xavier normal in the native code) for W, P, a with zero b_W, b_a. The
        reference's ``wv`` initialisation bug (PyTorch default) is not reproduced: the SOC models
        were trained with the fix."""
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.LayerNorm):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight)

    def forward_unchecked(
        self,
        input_ids: Tensor,
        padding: Tensor,
        caches: list[LayerCache | None] | None = None,
        cache_mode: str | None = None,
        need_outputs: bool = False,
    ) -> CausalLMOutput:
        """The forward pass on inputs already checked (:meth:`kvattn.pldr.DecoderLM.forward`
        checks them): ``input_ids [B, S]``, ``padding`` bool ``[B, S]``, True at new keys to
        block; ``caches`` and ``cache_mode`` as in :meth:`kvattn.pldr.DecoderLM.forward`."""
        if caches:
            padding = torch.cat([caches[0].padding, padding], dim=1)
        h, new_caches, outputs = self.decoder(input_ids, padding, caches, cache_mode, need_outputs)
        if cache_mode is not None:
            for c in new_caches:
                c.padding = padding
        return CausalLMOutput(
            logits=self.final_layer(h),
            caches=new_caches if cache_mode is not None else None,
            pldr_attentions=outputs if need_outputs else None,
        )

    def num_parameters(self) -> int:
        """Number of trainable parameters."""
        return sum(p.numel() for p in self.parameters() if p.requires_grad)
