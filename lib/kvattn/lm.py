"""A small decoder-only language model whose feed-forward layers are any :mod:`kvattn.mlp` layer.

Part I uses it to look inside trained feed-forward memories (Geva et al. 2021): pre-LayerNorm
blocks, learned absolute positions, causal softmax attention through
``torch.nn.functional.scaled_dot_product_attention`` (fused kernels on GPU), an untied output
head. Part II's PLDR-LLM is a separate model with the published architecture.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .activations import resolve
from .mlp import GATED_VARIANTS, MLP_KINDS, SlotMLP, make_mlp
from .sampling import check_decoding_args, sample_next

Tensor = torch.Tensor


@dataclass(frozen=True)
class TinyLMConfig:
    """Sizes of a :class:`TinyLM`. ``ffn`` is a kind of :func:`kvattn.mlp.make_mlp`; ``beta`` is
    Swish-β's β for a layer whose σ is SiLU/Swish (``None``: plain SiLU, β = 1)."""

    vocab_size: int
    d_model: int = 128
    n_layers: int = 2
    n_heads: int = 4
    block_size: int = 64
    ffn: str = "key_value"
    n_slots: int = 512
    act: str | None = None
    rank: int = 1
    beta: float | None = None

    def __post_init__(self) -> None:
        for name in (
            "vocab_size",
            "d_model",
            "n_layers",
            "n_heads",
            "block_size",
            "n_slots",
            "rank",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        if self.ffn not in MLP_KINDS:
            raise ValueError(f"unknown ffn {self.ffn!r}; expected one of {MLP_KINDS}")
        if self.ffn in GATED_VARIANTS and self.act is not None:
            raise ValueError(f"the gated ffn {self.ffn!r} fixes its activation; leave act=None")
        if self.rank != 1 and self.ffn not in ("full_bilinear", "gated_rank_r"):
            raise ValueError(f"rank applies to full_bilinear and gated_rank_r, not {self.ffn!r}")
        if self.beta is not None:  # the σ that make_mlp will build must take a β
            default = "relu" if self.ffn == "key_value" else "silu"
            resolve(GATED_VARIANTS.get(self.ffn) or self.act or default, self.beta)

    def to_dict(self) -> dict:
        return asdict(self)


class CausalSelfAttention(nn.Module):
    """Multi-head causal softmax attention, E = softmax(q kᵀ/√d_k + mask), with biases-free q, k,
    v and output projections. Input and output ``(B, T, d_model)``."""

    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.out = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        B, T, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        q, k, v = (t.view(B, T, self.n_heads, d // self.n_heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(B, T, d))


class Block(nn.Module):
    """Pre-LN transformer block: x + attn(LN(x)), then x + ffn(LN(x))."""

    def __init__(self, cfg: TinyLMConfig):
        super().__init__()
        self.ln_attn = nn.LayerNorm(cfg.d_model)
        self.attn = CausalSelfAttention(cfg.d_model, cfg.n_heads)
        self.ln_ffn = nn.LayerNorm(cfg.d_model)
        self.ffn: SlotMLP = make_mlp(
            cfg.ffn, cfg.d_model, cfg.n_slots, act=cfg.act, rank=cfg.rank, beta=cfg.beta
        )

    def forward(self, x: Tensor, ffn_inputs: list[Tensor] | None = None) -> Tensor:
        x = x + self.attn(self.ln_attn(x))
        h = self.ln_ffn(x)
        if ffn_inputs is not None:
            ffn_inputs.append(h)
        return x + self.ffn(h)


class TinyLM(nn.Module):
    """Decoder-only LM: token + position embeddings, ``n_layers`` blocks, final LN, linear head.

    ``forward(idx)`` maps token ids ``(B, T)`` (int64, T ≤ block_size) to logits
    ``(B, T, vocab_size)``. Raises ``TypeError`` when ``cfg`` is not a :class:`TinyLMConfig`
    (a dict of its fields is ``TinyLMConfig(**d)``).
    """

    def __init__(self, cfg: TinyLMConfig):
        super().__init__()
        if not isinstance(cfg, TinyLMConfig):  # a dict failed on its first missing attribute
            raise TypeError(f"cfg must be a TinyLMConfig, got {type(cfg).__name__}")
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos_emb = nn.Embedding(cfg.block_size, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        nn.init.normal_(self.tok_emb.weight, std=0.02)
        nn.init.normal_(self.pos_emb.weight, std=0.02)

    def _check_ids(self, idx: Tensor) -> None:
        if not isinstance(idx, Tensor) or idx.dtype != torch.long or idx.ndim != 2:
            raise ValueError("expected token ids as an int64 tensor of shape (batch, time)")
        if idx.shape[1] > self.cfg.block_size:
            raise ValueError(
                f"sequence length {idx.shape[1]} exceeds block_size {self.cfg.block_size}"
            )
        if idx.numel() and (idx.min() < 0 or idx.max() >= self.cfg.vocab_size):
            raise ValueError(f"token ids must lie in [0, {self.cfg.vocab_size})")

    def forward(self, idx: Tensor, ffn_inputs: list[Tensor] | None = None) -> Tensor:
        """Logits ``(B, T, vocab)``. If ``ffn_inputs`` is a list, each block appends the
        normalised input of its feed-forward layer, shape ``(B, T, d_model)``."""
        self._check_ids(idx)
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.tok_emb(idx) + self.pos_emb(pos)
        for block in self.blocks:
            x = block(x, ffn_inputs)
        return self.head(self.ln_f(x))

    def loss(self, idx: Tensor, targets: Tensor) -> Tensor:
        """Mean next-token cross-entropy (nats per token)."""
        logits = self(idx)
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())

    @torch.no_grad()
    def memory_coefficients(self, idx: Tensor, layer: int) -> Tensor:
        """The feed-forward hidden activations of ``layer`` on ``idx``: shape ``(B, T, n_slots)``.

        For a key-value layer these are Geva et al.'s memory coefficients σ(x·k_j) at every prefix.
        """
        inputs: list[Tensor] = []
        self(idx, ffn_inputs=inputs)
        return self.blocks[layer].ffn.hidden(inputs[layer])

    @torch.no_grad()
    def value_logits(self, layer: int) -> Tensor:
        """Each value vector of ``layer`` read out through the output head: ``(n_slots, vocab)``.

        As Geva et al. (2021, §4) we project v_j straight through the output embedding and skip the
        final LayerNorm; softmax over the last axis gives the value's next-token distribution.
        """
        return self.blocks[layer].ffn.W_v @ self.head.weight.T

    @torch.no_grad()
    def generate(
        self,
        idx: Tensor,
        max_new_tokens: int,
        temperature: float = 1.0,
        generator: torch.Generator | None = None,
    ) -> Tensor:
        """Append ``max_new_tokens`` sampled tokens to ``idx`` ``(B, T)``; temperature 0 is greedy.

        Each step feeds the last ``block_size`` tokens and draws from
        softmax(logits / temperature) with :func:`kvattn.sampling.sample_next`, the sampler of the
        PLDR-LLM decoders. ``generator``, if given, must live on the model's device.

        Raises
        ------
        TypeError, ValueError
            As :func:`kvattn.sampling.check_decoding_args`, before any step.
        """
        check_decoding_args(max_new_tokens, None, temperature, 1.0)
        for _ in range(max_new_tokens):
            logits = self(idx[:, -self.cfg.block_size :])[:, -1]
            idx = torch.cat([idx, sample_next(logits, temperature, 1.0, generator)], dim=1)
        return idx
