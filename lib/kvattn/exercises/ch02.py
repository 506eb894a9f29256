"""Exercises of chapter 2, Bilinear attention inside an MLP: cases, references, mistakes."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ._checker import Case, Exercise, Mistake, randn, register


def _mlp_cases(gen, rank: int | None = None):
    d, m = 5, 7

    def w(*s):
        return randn(gen, *s) / math.sqrt(d)

    qk = (m, d) if rank is None else (m, rank, d)
    cases = []
    for label, sigma, n, d_out in (
        ("SiLU, 4 tokens", F.silu, 4, d),
        ("ReLU, one token", F.relu, 1, 3),
        ("GELU, d_out ≠ d", F.gelu, 3, 2),
        ("tanh, batch axis", torch.tanh, (2, 3), d),
    ):
        shape = (*n, d) if isinstance(n, tuple) else (n, d)
        cases.append(Case(label, (randn(gen, *shape), w(*qk), w(*qk), w(m, d_out), sigma)))
    return cases


def _bilinear_attention(x, Q, K, V, sigma):
    scores = torch.einsum("...i,jsi,jsk,...k->...j", x, Q, K, x)
    return sigma(scores) @ V


register(
    Exercise(
        "bilinear_attention_mlp",
        2,
        "bilinear_attention_mlp(x, Q, K, V, sigma) -> Tensor",
        "Per-slot bilinear attention y = Σ_j σ(x Q_j K_jᵀ xᵀ) v_j with rank-r slots: Q, K "
        "(m, r, d) (Q[j] holds the columns q_js of Q_j as rows), V (m, d_out), x (..., d); "
        "slot j's score is Σ_s (x·q_js)(x·k_js).",
        _bilinear_attention,
        lambda g: _mlp_cases(g, rank=2),
        (
            Mistake(
                "σ applied to each rank component before the sum: σ acts on slot j's whole "
                "score Σ_s (x·q_js)(x·k_js).",
                lambda x, Q, K, V, s: (
                    s(torch.einsum("...i,jsi,jsk,...k->...js", x, Q, K, x)).sum(-1) @ V
                ),
            ),
            Mistake(
                "σ on the query factor only (that is the gated MLP, not bilinear attention).",
                lambda x, Q, K, V, s: (
                    (
                        s(torch.einsum("...i,jsi->...js", x, Q))
                        * torch.einsum("...i,jsi->...js", x, K)
                    ).sum(-1)
                    @ V
                ),
            ),
        ),
    ),
    Exercise(
        "symmetric_rank1",
        2,
        "symmetric_rank1(x, W_q, W_k, W_v, sigma) -> Tensor",
        "The rank-1 bilinear layer σ((x W_qᵀ) ⊙ (x W_kᵀ)) W_v; W_q, W_k (m, d), W_v (m, d_out).",
        lambda x, Wq, Wk, Wv, s: s((x @ Wq.T) * (x @ Wk.T)) @ Wv,
        _mlp_cases,
        (
            Mistake(
                "σ on the query factor only: that is the gated MLP.",
                lambda x, Wq, Wk, Wv, s: (s(x @ Wq.T) * (x @ Wk.T)) @ Wv,
            ),
            Mistake(
                "σ on both factors: the product is taken first, then σ.",
                lambda x, Wq, Wk, Wv, s: (s(x @ Wq.T) * s(x @ Wk.T)) @ Wv,
            ),
        ),
    ),
    Exercise(
        "gated_mlp",
        2,
        "gated_mlp(x, W_q, W_k, W_v, sigma) -> Tensor",
        "The gated MLP (GLU family) (σ(x W_qᵀ) ⊙ (x W_kᵀ)) W_v; σ on the query factor.",
        lambda x, Wq, Wk, Wv, s: (s(x @ Wq.T) * (x @ Wk.T)) @ Wv,
        _mlp_cases,
        (
            Mistake(
                "σ on the key factor: by the course's convention the gate is σ(x·q_j) "
                "(W_q = the gate projection).",
                lambda x, Wq, Wk, Wv, s: ((x @ Wq.T) * s(x @ Wk.T)) @ Wv,
            ),
            Mistake(
                "σ on the product: that is the symmetric rank-1 form.",
                lambda x, Wq, Wk, Wv, s: s((x @ Wq.T) * (x @ Wk.T)) @ Wv,
            ),
            Mistake(
                "σ applied to the output instead of a factor.",
                lambda x, Wq, Wk, Wv, s: s(((x @ Wq.T) * (x @ Wk.T)) @ Wv),
            ),
        ),
    ),
)
