"""Power Law Graph Attention (PLGA) and the PLDR-LLM decoder, with a same-size GPT baseline.

The architecture follows the published PLDR-LLM v51 reference code (Gokden 2025, arXiv
2502.13502; its PyTorch implementation is the authority, summarised with shapes in the course's
``pldr-spec``). For one head, with post-RoPE queries q_s and keys k_s of a block of S tokens
(row vectors of size d_k, as everywhere in the course, so q_sᵀ q_s is a d_k × d_k matrix):

    A0   = Σ_s q_sᵀ q_s                         density (Gram) operator, d_k × d_k
    A    = MetricLearner(LayerNorm(A0))          num_reslayerA residual SwiGLU units on the rows
    A_LM = iSwiGLU(W A + b_W) + ε,  iSwiGLU(u) = u·silu(u)          positive metric tensor
    A_P  = A_LM^{∘P}                             elementwise power (potential tensor)
    G_LM = a A_P + b_a                           matrix product: the learned bilinear form
    E    = softmax(q G_LM kᵀ / √d_k + causal mask)

``W, b_W, P, a, b_a`` are per-head ``[H, d_k, d_k]`` tensors; the metric learner's weights are
shared by all heads. Scaled dot-product attention (SDPA) is the special case G_LM = I.

Models
------
* :class:`PLDRLLM` — the published decoder: embedding × √d then LayerNorm, post-LN blocks with
  biases, SwiGLU FFN of width ``intermediate_size``, untied output layer with bias. With
  ``custom_G_type`` set it is the *constant-G* model (the G ablation): no metric learner, one
  fixed G_LM per layer and head, attention through
  ``torch.nn.functional.scaled_dot_product_attention`` on q' = q G_LM.
* :class:`GPT` — the same block with SDPA (G_LM = I) and nothing else, for comparisons.

Module and parameter names reproduce the published ``state_dict`` keys
(``decoder.dec_layers.i.mha1.wq.weight`` ...), except that the five PLGA tensors carry the
papers' symbols (``W, b_W, P, a, b_a`` for ``Wlst, blst, pwlst, alst, balst``);
:mod:`kvattn.checkpoint` maps between the two.

Two deliberate additions, both off by default and marked as deviations:

* ``density="prefix"``: position t's density sums over its own prefix s ≤ t only, so no
  position depends on later tokens. The published ``"block"`` density sums over the whole block,
  so during training a position's logits depend on later tokens. The prefix variant costs
  S times the memory and work of everything between the density and the scores.
* decoding mode ``"kv"``: an exact KV cache that also caches the running density and reruns the
  metric learner every step (the published cache freezes A at the prompt).
"""

from __future__ import annotations

import difflib
import math
import numbers
import warnings
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from ._checks import check_choice, check_positive_int

Tensor = torch.Tensor

#: ε added after iSwiGLU so that A_LM > 0 elementwise (reference ``epsilonAdj``).
EPSILON_A = 1e-9
#: Additive mask value of the reference implementation for blocked positions.
MASK_VALUE = -1e9
#: Decoding modes of :meth:`DecoderLM.generate`.
CACHE_MODES = ("none", "kv", "kv+g")
#: The largest ``max_position_embeddings`` a :class:`PLDRConfig` accepts (2**20 = 1,048,576).
MAX_POSITIONS = 2**20
#: Keys that a published ``config.json`` carries beside :class:`PLDRConfig`'s fields (pldr-spec
#: §5.2, transformers' ``PretrainedConfig``); kept in ``extra`` without a typo warning.
PUBLISHED_EXTRA_KEYS = frozenset(
    {
        "architectures",
        "attention_dropout",
        "auto_map",
        "dtype",
        "initializer_range",
        "output_pldr_attentions",
        "rope_scaling",
        "torch_dtype",
        "transformers_version",
        "use_cache",
    }
)


class ConfigKeyWarning(UserWarning):
    """A config key that is not a field but lies close to one: probably a typo, whose value is
    not used (see :meth:`PLDRConfig.from_dict`)."""


# ---------------------------------------------------------------------------------------------
# Configuration


@dataclass
class PLDRConfig:
    """Configuration with the field names of the published ``config.json`` (HF ``PldrllmConfig``).

    ``head_dim`` defaults to hidden_size / num_attention_heads, ``intermediate_size`` to
    floor(8·hidden_size/3) and ``A_dff`` to floor(8·head_dim/3) (170 for d_k = 64), as the
    reference. The fields after ``custom_G_type`` are this library's additions; a published
    loader ignores them.

    ``custom_G_type``: ``None`` for PLGA; ``"identity"``, ``"random"`` or ``"external"`` for the
    constant-G model (G_LM initialised to I, to U[0, 1), or loaded from a checkpoint).
    ``density``: ``"block"`` (published) or ``"prefix"`` (prefix-consistent; a deviation).
    ``plga_init``: ``"xavier_normal"`` (the native training code) or ``"xavier_uniform"`` (the HF
    port) for W, P and a. ``cache_first_G``: with the ``"kv+g"`` cache, every batch row reuses
    the G_LM of row 0 (as the HF port's option of that name).

    Every field is checked at construction (type and range; ``pad_token_id``, ``bos_token_id``
    and ``eos_token_id`` must lie in [0, vocab_size); ``max_position_embeddings`` at most
    :data:`MAX_POSITIONS` = 2**20, a thousand times the published 1,024: every layer keeps RoPE
    tables of 16·max_position_embeddings·head_dim/2 bytes (512 MiB per layer at 2**20 and
    head_dim 64), so a larger value is a typo long before it is a context length, and is refused
    before anything is allocated). ``extra`` holds the published fields this
    library does not use (``transformers_version``, ``use_cache`` ...); a non-null
    ``rope_scaling`` among them is refused, because the reference RoPE (torchtune's, which
    ``reference_rope=True`` selects) has no scaling and silently ignoring it would compute a
    different model.

    Raises
    ------
    ValueError
        A field of the wrong type or out of range, naming the field, the value and what is
        allowed; unknown keys in :meth:`from_dict` with ``strict=True``.
    """

    vocab_size: int = 32000
    hidden_size: int = 896
    num_attention_heads: int = 14
    num_hidden_layers: int = 5
    head_dim: int | None = None
    intermediate_size: int | None = None
    A_dff: int | None = None
    num_reslayerA: int = 8
    num_denseA: int = 2
    max_position_embeddings: int = 1024
    rope_theta: float = 10000.0
    reference_rope: bool = True
    layer_norm_eps: float = 1e-6
    attention_bias: bool = True
    glu_bias: bool = True
    final_bias: bool = True
    tie_word_embeddings: bool = False
    hidden_act: str = "silu"
    pad_token_id: int = 0
    bos_token_id: int = 2
    eos_token_id: int = 3
    custom_G_type: str | None = None
    cache_first_G: bool = False
    model_type: str = "pldrllm"
    density: str = "block"
    plga_init: str = "xavier_normal"
    extra: dict = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        for name in (
            "vocab_size",
            "hidden_size",
            "num_attention_heads",
            "num_hidden_layers",
            "num_reslayerA",
            "num_denseA",
            "max_position_embeddings",
        ):
            check_positive_int(name, getattr(self, name))
        if self.max_position_embeddings > MAX_POSITIONS:
            raise ValueError(
                f"max_position_embeddings must be at most 2**20 = {MAX_POSITIONS}, got "
                f"{self.max_position_embeddings} (every layer's RoPE tables take 8·head_dim "
                "bytes per position)"
            )
        if self.head_dim is not None:
            check_positive_int("head_dim", self.head_dim)
        else:
            if self.hidden_size % self.num_attention_heads:
                raise ValueError(
                    f"hidden_size={self.hidden_size} is not divisible by "
                    f"num_attention_heads={self.num_attention_heads}; set head_dim"
                )
            self.head_dim = self.hidden_size // self.num_attention_heads
        if self.head_dim * self.num_attention_heads != self.hidden_size:
            raise ValueError(
                f"head_dim·num_attention_heads = {self.head_dim}·{self.num_attention_heads} must "
                f"equal hidden_size = {self.hidden_size}"
            )
        if self.head_dim % 2:
            raise ValueError(f"RoPE needs an even head_dim, got {self.head_dim}")
        if self.intermediate_size is None:
            self.intermediate_size = (8 * self.hidden_size) // 3
        if self.A_dff is None:
            self.A_dff = (8 * self.head_dim) // 3
        for name in ("rope_theta", "layer_norm_eps"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not (math.isfinite(value) and value > 0)
            ):
                raise ValueError(f"{name} must be a positive number, got {value!r}")
        check_positive_int("intermediate_size", self.intermediate_size)
        check_positive_int("A_dff", self.A_dff)
        if self.hidden_act != "silu":
            raise ValueError(f"hidden_act must be 'silu' (SwiGLU), got {self.hidden_act!r}")
        check_choice("custom_G_type", self.custom_G_type, (None, "identity", "random", "external"))
        check_choice("density", self.density, ("block", "prefix"))
        check_choice("plga_init", self.plga_init, ("xavier_normal", "xavier_uniform"))
        for name in (
            "reference_rope",
            "attention_bias",
            "glu_bias",
            "final_bias",
            "tie_word_embeddings",
            "cache_first_G",
        ):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be true or false, got {getattr(self, name)!r}")
        if self.tie_word_embeddings:
            raise ValueError("tie_word_embeddings=True is not supported (PLDR-LLM is untied)")
        for name in ("pad_token_id", "bos_token_id", "eos_token_id"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{name} must be an int token id, got {value!r}")
            if not 0 <= value < self.vocab_size:
                raise ValueError(
                    f"{name} must lie in [0, vocab_size) = [0, {self.vocab_size}), got {value}"
                )
        if self.model_type != "pldrllm":
            raise ValueError(f"model_type must be 'pldrllm', got {self.model_type!r}")
        if not isinstance(self.extra, dict):
            raise ValueError(f"extra must be a dict of published fields, got {self.extra!r}")
        if self.extra.get("rope_scaling") is not None:
            raise ValueError(
                f"rope_scaling={self.extra['rope_scaling']!r} is not supported: the reference "
                "RoPE has no scaling; only rope_scaling null (or absent) can be loaded"
            )

    @property
    def d_k(self) -> int:
        """Head dimension (the papers' d_k)."""
        return self.head_dim

    def to_dict(self) -> dict:
        """The config as ``config.json`` stores it (``extra`` fields merged back in)."""
        out = {k: v for k, v in asdict(self).items() if k != "extra"}
        return {**self.extra, **out}

    @classmethod
    def from_dict(cls, values: dict, *, strict: bool = False) -> PLDRConfig:
        """Build from a ``config.json`` dictionary. Unknown keys are kept in ``extra`` (a published
        ``config.json`` carries fields this library does not use) or, with ``strict=True`` (a
        config written by hand, where an unknown key is a typo), refused with a ValueError that
        names them and the closest field names.

        Without ``strict``, an unknown key within one edit (insertion, deletion, substitution,
        or a change of case) of a field, or one that ``difflib.get_close_matches`` finds
        at cutoff 0.85 (a transposition), draws a :class:`ConfigKeyWarning` naming the key and
        the field, because its value is not used: ``"rope_thet": 500000.0`` would otherwise load
        silently with rope_theta = 10000. Keys in :data:`PUBLISHED_EXTRA_KEYS` never warn."""
        if not isinstance(values, dict):
            raise ValueError(f"a model config must be a dict, got {type(values).__name__}")
        known = {f.name for f in fields(cls)} - {"extra"}
        extra = {k: v for k, v in values.items() if k not in known}
        if strict:
            reject_unknown_keys("model config", extra, known)
        kwargs = {k: v for k, v in values.items() if k in known}
        config = cls(**kwargs, extra=extra)
        for key in extra:
            near = _near_field(key, known)
            if near is not None:
                warnings.warn(
                    f"config key {key!r} is not a field; it looks like a typo of {near!r}, so its "
                    f"value is not used ({near} = {getattr(config, near)!r} is) and it is kept as "
                    f"an extra key; rename it to {near!r} if that is what it means",
                    ConfigKeyWarning,
                    stacklevel=2,
                )
        return config


def _near_field(key: object, known: set[str]) -> str | None:
    """The field that ``key`` is probably a typo of, or None (see :meth:`PLDRConfig.from_dict`)."""
    if not isinstance(key, str) or key in PUBLISHED_EXTRA_KEYS:
        return None
    for name in sorted(known):
        if _within_one_edit(key.lower(), name.lower()):
            return name
    close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.85)
    return close[0] if close else None


def _within_one_edit(a: str, b: str) -> bool:
    """Whether one insertion, deletion or substitution (or none) turns ``a`` into ``b``."""
    if len(a) > len(b):
        a, b = b, a
    if len(b) - len(a) > 1:
        return False
    i = 0
    while i < len(a) and a[i] == b[i]:
        i += 1
    # after the first difference the rest must agree, shifted by one for an insertion
    return a[i + (len(a) == len(b)) :] == b[i + 1 :]


def reject_unknown_keys(where: str, given: object, known: set[str]) -> None:
    """Raise a ValueError naming the keys of ``given`` that are not in ``known`` (with the closest
    known name for each, so that a typo is obvious) and listing the allowed keys."""
    unknown = sorted(set(given) - known)
    if not unknown:
        return
    hints = []
    for key in unknown:
        close = difflib.get_close_matches(str(key), sorted(known), n=1)
        hints.append(f"{key!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    raise ValueError(
        f"unknown keys in {where}: {', '.join(hints)}; allowed keys are {sorted(known)}"
    )


#: The sizes of the published PLDR-LLM-v51-110M models (the other fields are PLDRConfig's defaults).
PUBLISHED_110M = dict(
    vocab_size=32000,
    hidden_size=896,
    num_attention_heads=14,
    num_hidden_layers=5,
    intermediate_size=2389,
    A_dff=170,
    num_reslayerA=8,
    num_denseA=2,
    max_position_embeddings=1024,
)


def published_110m_config(**overrides) -> PLDRConfig:
    """The published PLDR-LLM-v51-110M configuration (5 layers, 14 heads, d = 896, V = 32,000)."""
    return PLDRConfig(**{**PUBLISHED_110M, **overrides})


# ---------------------------------------------------------------------------------------------
# Rotary position embedding


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


# ---------------------------------------------------------------------------------------------
# Building blocks


def iswiglu(u: Tensor) -> Tensor:
    """iSwiGLU(u) = u·silu(u) = u²·sigmoid(u) ≥ 0 ("SwiGLU with W = V = I and no bias")."""
    return u * F.silu(u)


class GLUVariant(nn.Module):
    """SwiGLU block ``y = gluw3(silu(gluw1 x) ⊙ gluw2 x)`` with biases (reference ``GLUVariant``).

    Acts on the last axis: ``(..., d_in)`` → ``(..., d_out)``. Used as the decoder's FFN
    (d → intermediate_size → d) and inside the metric learner (d_k → A_dff → d_k, on each row).
    """

    def __init__(self, d_in: int, d_hidden: int, d_out: int, bias: bool = True):
        super().__init__()
        self.gluw1 = nn.Linear(d_in, d_hidden, bias=bias)
        self.gluw2 = nn.Linear(d_in, d_hidden, bias=bias)
        self.gluw3 = nn.Linear(d_hidden, d_out, bias=bias)

    def forward(self, x: Tensor) -> Tensor:
        return self.gluw3(F.silu(self.gluw1(x)) * self.gluw2(x))


class ResLayerA(nn.Module):
    """One residual unit of the metric learner: ``num_denseA`` GLU blocks in sequence, then
    ``LayerNorm(A + A_in)`` over the last axis (post-LN, no inner norm or dropout)."""

    def __init__(self, cfg: PLDRConfig):
        super().__init__()
        self.denseAs = nn.ModuleList(
            GLUVariant(cfg.d_k, cfg.A_dff, cfg.d_k, cfg.glu_bias) for _ in range(cfg.num_denseA)
        )
        self.layernormA = nn.LayerNorm(cfg.d_k, eps=cfg.layer_norm_eps)

    def forward(self, A: Tensor) -> Tensor:
        out = A
        for dense in self.denseAs:
            out = dense(out)
        return self.layernormA(out + A)


class PowerLawGraph(nn.Module):
    """The per-head tensors of PLGA and the map A → (A_LM, A_P, G_LM).

    ``W, b_W, P, a, b_a`` have shape ``[H, d_k, d_k]`` (reference ``Wlst, blst, pwlst, alst,
    balst``). :meth:`forward` takes A of shape ``[B, H, d_k, d_k]`` (or ``[B, H, S, d_k, d_k]``
    for the prefix density) and returns A_LM, A_P and G_LM of the same shape.
    """

    def __init__(self, cfg: PLDRConfig):
        super().__init__()
        shape = (cfg.num_attention_heads, cfg.d_k, cfg.d_k)
        self.W = nn.Parameter(torch.empty(shape))
        self.b_W = nn.Parameter(torch.zeros(shape))
        self.P = nn.Parameter(torch.empty(shape))
        self.a = nn.Parameter(torch.empty(shape))
        self.b_a = nn.Parameter(torch.zeros(shape))
        init = (
            nn.init.xavier_normal_ if cfg.plga_init == "xavier_normal" else nn.init.xavier_uniform_
        )
        for t in (self.W, self.P, self.a):
            init(t)

    @staticmethod
    def _per_head(t: Tensor, like: Tensor) -> Tensor:
        # [H, d, d] -> [H, 1, ..., d, d] so that it broadcasts against [B, H, (S,) d, d]
        return t.view(t.shape[0], *([1] * (like.ndim - 4)), *t.shape[1:])

    def forward(self, A: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """(A_LM, A_P, G_LM) for a metric-learner output A (shapes as A)."""
        A_LM = iswiglu(self._per_head(self.W, A) @ A + self._per_head(self.b_W, A)) + EPSILON_A
        A_P = A_LM.pow(self._per_head(self.P, A))
        G_LM = self._per_head(self.a, A) @ A_P + self._per_head(self.b_a, A)
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
    (pldr-spec §3, §7.11); this follows the port, whose ``custom_G_type`` field it shares.
    """
    return torch.randn(num_heads, d_k, d_k)


@dataclass
class LayerCache:
    """Decoding state of one attention layer: post-RoPE keys and values ``[B, H, T, d_k]``, the
    key mask ``padding`` (bool ``[B, T]``, True at blocked keys), the running density Σ qᵀ q
    ``[B, H, d_k, d_k]`` (mode ``"kv"``) and the frozen G_LM (mode ``"kv+g"``)."""

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
        """Run the metric learner and the power-law graph on a density A0 ``[..., d_k, d_k]``."""
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
            # One density per position t: Σ_{s ≤ t} q_s q_sᵀ (a deviation from the reference).
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
        # one mask for every layer (built per layer, it is a sizeable part of a decoding step)
        mask = attention_mask(ids.shape[1], start + ids.shape[1], key_padding, ids.device)
        new_caches, all_outputs = [], []
        for i, layer in enumerate(self.dec_layers):
            cache = caches[i] if caches is not None else None
            x, cache, outputs = layer(x, mask, cache, cache_mode, need_outputs)
            new_caches.append(cache)
            all_outputs.append(outputs)
        return x, new_caches, all_outputs


# ---------------------------------------------------------------------------------------------
# Models


@dataclass
class CausalLMOutput:
    """Output of a forward pass: ``logits [B, S, V]``; ``caches`` (one :class:`LayerCache` per
    layer, when a cache mode was given); ``pldr_attentions`` (one :class:`DeductiveOutputs` per
    layer, when asked for)."""

    logits: Tensor
    caches: list[LayerCache | None] | None = None
    pldr_attentions: list[DeductiveOutputs | None] | None = None


class DecoderLM(nn.Module):
    """Shared body of :class:`PLDRLLM` and :class:`GPT`: decoder + untied output layer, the
    forward pass, decoding (:meth:`generate`) and saving."""

    kind: str = "plga"
    architecture: str = "PldrllmForCausalLM"

    def __init__(self, config: PLDRConfig):
        super().__init__()
        if not isinstance(config, PLDRConfig):
            raise TypeError(f"config must be a PLDRConfig, got {type(config).__name__}")
        self.config = config
        self.decoder = Decoder(config, self.kind)
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

    def _check_inputs(
        self, input_ids: Tensor, attention_mask: Tensor | None, offset: int, new_tokens: int = 0
    ) -> None:
        """Types, shapes and the position limit (no host sync), then the values of the ids and
        the mask together (one host sync). ``offset``: tokens already cached; ``new_tokens``:
        tokens :meth:`generate` will add (the last one is never fed to the model)."""
        if not isinstance(input_ids, Tensor) or input_ids.dtype not in (torch.int64, torch.int32):
            got = input_ids.dtype if isinstance(input_ids, Tensor) else type(input_ids).__name__
            raise TypeError(f"input_ids must be an int64 (or int32) tensor of token ids, got {got}")
        if input_ids.device.type == "meta":
            # the value check below reads the ids; meta tensors have shapes but no values
            device = next(self.parameters()).device
            raise ValueError(
                "input_ids are on the meta device, which holds no values; put them on the "
                f"model's device ({device})"
            )
        if input_ids.ndim != 2 or 0 in input_ids.shape:
            raise ValueError(
                "input_ids must have shape (batch >= 1, sequence >= 1), got "
                f"{tuple(input_ids.shape)}"
            )
        limit, S = self.config.max_position_embeddings, input_ids.shape[1]
        if offset + S > limit:
            raise ValueError(
                f"sequence length {offset + S} exceeds max_position_embeddings = {limit}"
            )
        if new_tokens and S + new_tokens - 1 > limit:
            raise ValueError(
                f"a prompt of {S} tokens with max_new_tokens={new_tokens} feeds positions up to "
                f"{S + new_tokens - 2}, beyond max_position_embeddings = {limit}; at most "
                f"{limit - S + 1} new tokens fit"
            )
        bad = ((input_ids < 0) | (input_ids >= self.config.vocab_size)).any()
        if attention_mask is not None:
            if not isinstance(attention_mask, Tensor) or (
                attention_mask.dtype != torch.bool
                and (attention_mask.is_floating_point() or attention_mask.is_complex())
            ):
                got = (
                    attention_mask.dtype
                    if isinstance(attention_mask, Tensor)
                    else type(attention_mask).__name__
                )
                raise TypeError(f"attention_mask must be a bool or integer tensor, got {got}")
            if attention_mask.shape != input_ids.shape:
                raise ValueError(
                    f"attention_mask must have the shape of input_ids {tuple(input_ids.shape)}, "
                    f"got {tuple(attention_mask.shape)}"
                )
            if attention_mask.device != input_ids.device:
                raise ValueError(
                    f"attention_mask is on {attention_mask.device}, input_ids on {input_ids.device}"
                )
            if attention_mask.dtype != torch.bool:
                bad = bad | ((attention_mask != 0) & (attention_mask != 1)).any()
        # Under torch.compile the value check (a host sync) would split the graph in two; compiled
        # training feeds ids from its own tokenizer, so only the checks above run there.
        if not torch.compiler.is_compiling() and bool(bad):
            lo, hi = int(input_ids.min()), int(input_ids.max())
            if lo < 0 or hi >= self.config.vocab_size:
                raise ValueError(
                    f"token ids must lie in [0, {self.config.vocab_size}), got min {lo}, max {hi}"
                )
            values = sorted(set(attention_mask.unique().tolist()) - {0, 1})
            raise ValueError(f"attention_mask must hold only 0 and 1, got also {values[:5]}")

    def _default_padding(self, input_ids: Tensor, attention_mask: Tensor | None) -> Tensor:
        # True = blocked key. Without a mask the reference's rule: pad_token_id is padding.
        if attention_mask is not None:
            return attention_mask == 0
        return input_ids == self.config.pad_token_id

    def forward(
        self,
        input_ids: Tensor,
        *,
        attention_mask: Tensor | None = None,
        caches: list[LayerCache | None] | None = None,
        cache_mode: str | None = None,
        output_pldr_attentions: bool = False,
    ) -> CausalLMOutput:
        """Logits ``[B, S, V]`` for ``input_ids [B, S]`` (int64 or int32, ids in [0, V)).

        Parameters
        ----------
        attention_mask:
            ``[B, S]``, bool or integer, 1 (True) = attend, 0 = padding: a padded token is never
            attended to as a key (a query whose causal keys are all padding keeps them, so no
            row is empty). ``None`` (default): without ``caches``, tokens equal to
            ``pad_token_id`` (0) are padding, as the native reference's ``create_masks``
            (``token == 0``); with ``caches``, every new token is attended to, as the
            reference's cached decoding steps (mask ``None``). The HF port masks only through
            its ``attention_mask`` (pldr-spec §1.6, §9). With ``caches``, the mask covers the
            new tokens; the earlier ones keep the mask they were given.
        caches, cache_mode:
            For incremental decoding (see :meth:`generate`): ``cache_mode`` ``"kv"`` or
            ``"kv+g"`` returns per-layer caches; passing them back processes only new tokens.
        output_pldr_attentions:
            Also return every layer's :class:`DeductiveOutputs`.

        Raises
        ------
        TypeError
            Ids or a mask of the wrong type or dtype; flags that are not bools.
        ValueError
            Ids on the meta device; wrong shapes (a batch of 0 included), ids outside [0, V),
            mask values other than 0 and 1, sequences beyond ``max_position_embeddings``.
            Checking the values costs one host sync; :meth:`generate` checks once per call, not
            per step.
        """
        if cache_mode is not None and not isinstance(cache_mode, str):
            raise TypeError(f"cache_mode must be None or a str, got {type(cache_mode).__name__}")
        if cache_mode is not None and cache_mode not in ("kv", "kv+g"):
            raise ValueError(f"cache_mode must be None, 'kv' or 'kv+g', got {cache_mode!r}")
        if cache_mode == "kv+g" and self.kind == "plga" and self.config.density == "prefix":
            raise ValueError("the 'kv+g' cache freezes one G per layer; it needs density='block'")
        if not isinstance(output_pldr_attentions, bool):
            raise TypeError(
                "output_pldr_attentions must be a bool, got "
                f"{type(output_pldr_attentions).__name__}"
            )
        if caches is not None and (
            not isinstance(caches, list) or len(caches) != self.config.num_hidden_layers
        ):
            raise TypeError(
                f"caches must be None or the list of {self.config.num_hidden_layers} layer "
                "caches a previous forward returned"
            )
        offset = caches[0].length if caches else 0
        self._check_inputs(input_ids, attention_mask, offset)
        if attention_mask is None and caches:
            padding = torch.zeros_like(input_ids, dtype=torch.bool)
        else:
            padding = self._default_padding(input_ids, attention_mask)
        return self._forward(input_ids, padding, caches, cache_mode, output_pldr_attentions)

    def _forward(self, input_ids, padding, caches, cache_mode, need_outputs) -> CausalLMOutput:
        # Unchecked forward: ``padding`` [B, S] is True at new keys to block.
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

    def save_pretrained(self, directory: str | Path) -> Path:
        """Write ``config.json`` + ``model.safetensors`` in the published format
        (:func:`kvattn.checkpoint.save_pretrained`); load with
        :func:`kvattn.checkpoint.load_pretrained`."""
        from .checkpoint import save_pretrained

        return save_pretrained(self, directory)

    @torch.no_grad()
    def generate(
        self,
        input_ids: Tensor,
        max_new_tokens: int,
        *,
        attention_mask: Tensor | None = None,
        use_cache: bool = True,
        cache: str | None = None,
        temperature: float = 0.0,
        top_p: float = 1.0,
        generator: torch.Generator | None = None,
        stop_at_eos: bool = False,
    ) -> Tensor:
        """Continue ``input_ids [B, S]`` by ``max_new_tokens`` tokens; returns ``[B, S + n]``.

        Decoding modes (``cache``; ``use_cache=True`` means ``"kv"``, False means ``"none"``):

        * ``"none"`` — no cache: every step recomputes the whole sequence, the density over
          all tokens included;
        * ``"kv"`` — KV cache: keys, values and the running density Σ_s q_s q_sᵀ are cached;
          every step adds the new token's density and reruns the metric learner. The new
          token's attention is then exactly that of a full pass; positions already decoded keep
          the states they were computed with, so with the published block density and more
          than one layer, logits can differ from ``"none"`` (which recomputes every position
          with the newest density) — exact for one layer and for ``density="prefix"``;
        * ``"kv+g"`` — the published KV + G cache: the prompt's pass fixes A, A_LM, A_P and G_LM
          per layer and later tokens skip the metric learner. It equals ``"none"`` only when G_LM
          does not depend on the input (the inference-collapse condition).

        ``attention_mask [B, S]`` (1 = attend, 0 = padding) masks prompt keys; without it, prompt
        tokens equal to ``pad_token_id`` are padding (the native reference's rule, see
        :meth:`forward`). Generated tokens are never masked, whatever their id: the reference's
        cached steps pass no mask and the HF port extends the mask with ones (pldr-spec §3, §9).

        ``temperature = 0`` is greedy; otherwise sampling with nucleus ``top_p`` from
        softmax(logits / temperature), which needs temperature >= the smallest normal float32
        (about 1.2e-38). The last fed position is S + n − 2 (the last token is only
        predicted), so S + n − 1 <= ``max_position_embeddings``. ``stop_at_eos`` stops once
        every row emits ``eos_token_id`` at the same step (one host sync per step).

        Host syncs: one to check the prompt's ids and mask, one for the finiteness of the
        prompt pass's logits and one at the end, whatever n (plus the ``stop_at_eos`` checks).

        Raises ``TypeError``/``ValueError`` for bad arguments (see :meth:`forward`), and
        ``ValueError`` when the model produces NaN or infinite logits (e.g. NaN weights).
        """
        check_decoding_args(max_new_tokens, cache, temperature, top_p)
        for name, flag in (("use_cache", use_cache), ("stop_at_eos", stop_at_eos)):
            if not isinstance(flag, bool):
                raise TypeError(f"{name} must be a bool, got {type(flag).__name__}")
        if generator is not None and not isinstance(generator, torch.Generator):
            raise TypeError(
                f"generator must be a torch.Generator or None, got {type(generator).__name__}"
            )
        if cache is None:
            cache = "kv" if use_cache else "none"
        self._check_inputs(input_ids, attention_mask, 0, max_new_tokens)
        if cache == "kv+g" and self.kind == "plga" and self.config.density == "prefix":
            raise ValueError("the 'kv+g' cache freezes one G per layer; it needs density='block'")
        padding = self._default_padding(input_ids, attention_mask)
        was_training = self.training
        self.eval()
        try:
            return self._decode(
                input_ids,
                padding,
                max_new_tokens,
                cache,
                temperature,
                top_p,
                generator,
                stop_at_eos,
            )
        finally:
            self.train(was_training)

    def _decode(
        self, ids, padding, max_new_tokens, cache, temperature, top_p, generator, stop_at_eos
    ) -> Tensor:
        caches = None
        attend = torch.zeros_like(padding[:, :1])  # a generated token: never padding
        finite = []  # per step, a 0-d bool tensor: no host sync until the end
        for step in range(max_new_tokens):
            if cache == "none":
                logits = self._forward(ids, padding, None, None, False).logits[:, -1]
                padding = torch.cat([padding, attend], dim=1)
            elif caches is None:
                out = self._forward(ids, padding, None, cache, False)
                logits, caches = out.logits[:, -1], out.caches
            else:
                out = self._forward(ids[:, -1:], attend, caches, cache, False)
                logits, caches = out.logits[:, -1], out.caches
            finite.append(logits.isfinite().all())
            if step == 0:
                # the prompt pass shows broken weights at once, before any more work
                self._check_finite(finite)
            nxt = _choose(logits, temperature, top_p, generator)
            ids = torch.cat([ids, nxt], dim=1)
            if stop_at_eos and bool((nxt == self.config.eos_token_id).all()):
                break
        self._check_finite(finite)
        return ids

    def _check_finite(self, finite: list[Tensor]) -> None:
        if not finite or bool(torch.stack(finite).all()):
            return
        step = int((~torch.stack(finite)).nonzero()[0, 0])
        broken = sum(int((~p.isfinite()).sum()) for p in self.parameters())
        raise ValueError(
            f"the model produced NaN or infinite logits at decoding step {step} "
            f"({broken} of its {self.num_parameters()} parameters are not finite); "
            "check the checkpoint"
        )


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
    over ``ids[:, :t + 1]``: what decoding mode ``"none"`` of :meth:`DecoderLM.generate`
    computes for the token after that prefix, so this is the loss of a decoder teacher-forced one
    token at a time. As in the training loss (:func:`kvattn.train.lm_cross_entropy`), targets
    equal to ``pad_token_id`` are left out and pad ids are masked as keys.

    For a causal model (GPT, a constant-G model, ``density="prefix"``) it equals the full-pass
    loss ``lm_cross_entropy(model(ids[:, :-1]).logits, ids[:, 1:])`` up to float32 rounding
    (both take the cross-entropy in float32, as training does). The published block density
    sums over the whole block (pldr-spec §1.2), so in a full pass every position's G_LM is built
    with later tokens too; the full-pass loss, which the reference's training and validation
    report, then differs from the loss of generation, which this gives.
    The ``"kv"`` cache would be cheaper, but with the block density and more than one layer it is
    not exact (see :meth:`DecoderLM.generate`), so every prefix is recomputed: S passes of
    lengths 1 to S, each batched over B, about S/2 times the work of one full pass. The model
    runs in eval mode and gets its mode back.

    Raises
    ------
    TypeError
        ``model`` is not a :class:`DecoderLM`; ``ids`` is not an int64/int32 tensor.
    ValueError
        ``ids`` not of shape ``[B >= 1, S + 1]`` with 1 <= S <= ``max_position_embeddings``;
        ids outside [0, vocab_size); ``ids`` on another device than the model; no target that
        is not padding.
    """
    from .train import lm_cross_entropy  # lazy: pldr is imported without the training stack

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
            logits.append(model._forward(prefix, padding, None, None, False).logits[:, -1])
        return torch.stack(logits, dim=1), targets
    finally:
        model.train(was_training)


#: The smallest sampling temperature, the smallest normal float32 (the sampler's precision).
MIN_TEMPERATURE = torch.finfo(torch.float32).tiny


def check_decoding_args(
    max_new_tokens: int, cache: str | None, temperature: float, top_p: float
) -> None:
    """Check the decoding arguments of :meth:`DecoderLM.generate` (and of
    :func:`kvattn.generate.generate_text`, before it loads anything).

    ``max_new_tokens``: an int >= 0; ``cache``: None or one of :data:`CACHE_MODES`;
    ``temperature``: a real number, 0 (greedy) or in [:data:`MIN_TEMPERATURE`, ∞);
    ``top_p``: a real number in (0, 1]. Raises ``TypeError`` for a wrong type (strings, and
    bools where numbers are expected, are never converted), ``ValueError`` for a wrong value.
    """
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, numbers.Integral):
        raise TypeError(f"max_new_tokens must be an int, got {max_new_tokens!r}")
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be a non-negative int, got {max_new_tokens}")
    if cache is not None and not isinstance(cache, str):
        raise TypeError(f"cache must be None or a str, got {cache!r}")
    if cache is not None and cache not in CACHE_MODES:
        raise ValueError(f"cache must be one of {CACHE_MODES}, got {cache!r}")
    for name, value in (("temperature", temperature), ("top_p", top_p)):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"{name} must be a real number, got {value!r}")
    if not (math.isfinite(temperature) and temperature >= 0):
        raise ValueError(f"need a finite temperature >= 0, got temperature={temperature}")
    if 0 < temperature < MIN_TEMPERATURE:
        raise ValueError(
            f"temperature={temperature} is below the smallest normal float32, "
            f"{MIN_TEMPERATURE:.3g}, the sampler's precision; "
            "use temperature=0 for greedy decoding"
        )
    if not 0 < top_p <= 1:
        raise ValueError(f"need 0 < top_p <= 1, got top_p={top_p}")


def _choose(logits: Tensor, temperature: float, top_p: float, generator) -> Tensor:
    if temperature == 0:
        return logits.argmax(-1, keepdim=True)
    # Non-finite logits are reported after decoding (no per-step sync); until then they must
    # not crash the sampler. Shifting by the maximum first keeps a tiny temperature finite.
    logits = logits.float().nan_to_num()
    probs = torch.softmax((logits - logits.amax(-1, keepdim=True)) / temperature, dim=-1)
    if top_p < 1:
        sorted_p, order = probs.sort(dim=-1, descending=True)
        keep = sorted_p.cumsum(-1) - sorted_p < top_p
        sorted_p = sorted_p * keep
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_p)
    return torch.multinomial(probs / probs.sum(-1, keepdim=True), 1, generator=generator)


class PLDRLLM(DecoderLM):
    """The PLDR-LLM decoder (PLGA attention), or its constant-G ablation when
    ``config.custom_G_type`` is set. See the module docstring for the architecture."""

    architecture = "PldrllmForCausalLM"

    def __init__(self, config: PLDRConfig):
        if not isinstance(config, PLDRConfig):
            raise TypeError(f"config must be a PLDRConfig, got {type(config).__name__}")
        self.kind = "plga" if config.custom_G_type is None else "constant_g"
        super().__init__(config)

    def G_LM(self) -> list[Tensor]:
        """The constant G_LM of every layer, ``[H, d_k, d_k]`` each (constant-G models only)."""
        if self.kind != "constant_g":
            raise TypeError(
                "G_LM is input-dependent in a PLGA model; use a forward pass with "
                "output_pldr_attentions=True"
            )
        return [layer.mha1.G_LM for layer in self.decoder.dec_layers]


class GPT(DecoderLM):
    """The same decoder with scaled dot-product attention (G_LM = I, no metric learner): the
    baseline of the same size. Takes a :class:`PLDRConfig`; PLGA-only fields are ignored.

    :func:`kvattn.checkpoint.save_pretrained` writes it as the published format's identity-G
    PLDR-LLM (``custom_G_type "identity"``), which the published loader runs as this model;
    ``architecture`` is the value of the key that marks it (and the ``architectures`` entry
    of GPT checkpoints written before)."""

    kind = "sdpa"
    architecture = "KvattnGPTForCausalLM"


def constant_g_from(model: PLDRLLM, G: list[Tensor]) -> PLDRLLM:
    """A constant-G model with ``model``'s weights and the given per-layer G_LM ``[H, d_k, d_k]``.

    This is the G ablation of the papers (v510G/v510Gi): every weight outside the metric learner
    and the PLGA tensors transfers; ``G`` is typically the G_LM a trained model produces.

    Raises ``TypeError`` when ``model`` is not a :class:`PLDRLLM` or ``G`` is not a list of
    floating-point tensors, ``ValueError`` for a wrong number of layers or a wrong shape; both
    before the new model is built.
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
