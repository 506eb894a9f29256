"""Exercises of chapter 6, Attention as a learned bilinear form: cases, references, mistakes."""

from __future__ import annotations

import math

from ._checker import Case, Exercise, Mistake, causal_mask, randn, register, softmax_attention


def _attention_cases(gen, with_G: bool):
    cases = []
    for label, lead, S, d_k in (
        ("4 tokens", (), 4, 8),
        ("heads axis", (2, 3), 5, 4),
        ("one token", (), 1, 6),
    ):
        q, k, v = (randn(gen, *lead, S, d_k) for _ in range(3))
        G = randn(gen, d_k, d_k)
        cases.append(Case(label, (q, k, v, G) if with_G else (q, k, v)))
    return cases


def _sdpa(q, k, v):
    return softmax_attention(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), v)


def _gsdpa(q, k, v, G):
    return softmax_attention(q @ G @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), v)


def _head_form_cases(gen):
    return [
        Case("d_k=4, d=6", (randn(gen, 4, 6), randn(gen, 4, 6))),
        Case("d_k = d", (randn(gen, 5, 5), randn(gen, 5, 5))),
        Case("d_k=1", (randn(gen, 1, 3), randn(gen, 1, 3))),
    ]


register(
    Exercise(
        "causal_sdpa",
        6,
        "causal_sdpa(q, k, v) -> Tensor",
        "Causal scaled dot-product attention softmax(q kᵀ/√d_k + mask) v for q, k, v "
        "(..., S, d_k): position i attends to positions j ≤ i.",
        _sdpa,
        lambda g: _attention_cases(g, with_G=False),
        (
            Mistake(
                "no 1/√d_k scaling of the scores.",
                lambda q, k, v: softmax_attention(q @ k.transpose(-1, -2), v),
            ),
            Mistake(
                "no causal mask: position i must not see j > i.",
                lambda q, k, v: (q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])).softmax(-1) @ v,
            ),
            Mistake(
                "softmax over the query axis: each query's weights over keys must sum to 1 "
                "(softmax over the last axis).",
                lambda q, k, v: (
                    (q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]))
                    .masked_fill(~causal_mask(q.shape[-2]), -math.inf)
                    .softmax(-2)
                    @ v
                ),
            ),
        ),
    ),
    Exercise(
        "generalised_sdpa",
        6,
        "generalised_sdpa(q, k, v, G) -> Tensor",
        "Causal attention with a bilinear form G (d_k, d_k): softmax(q G kᵀ/√d_k + mask) v. "
        "G = I gives SDPA.",
        _gsdpa,
        lambda g: _attention_cases(g, with_G=True),
        (
            Mistake(
                "G transposed (q Gᵀ kᵀ): for a non-symmetric G the order matters.",
                lambda q, k, v, G: _gsdpa(q, k, v, G.T),
            ),
            Mistake(
                "no 1/√d_k scaling.",
                lambda q, k, v, G: softmax_attention(q @ G @ k.transpose(-1, -2), v),
            ),
        ),
    ),
    Exercise(
        "head_form",
        6,
        "head_form(W_Q, W_K) -> Tensor",
        "An attention head's bilinear form M (d, d) with score(x_i, x_j) = x_i M x_jᵀ, for "
        "q = x W_Qᵀ and k = x W_Kᵀ (W_Q, W_K of shape (d_k, d), no RoPE, before 1/√d_k).",
        lambda WQ, WK: WQ.T @ WK,
        _head_form_cases,
        (
            Mistake(
                "W_Kᵀ W_Q is the transpose: the query's weights come first, M = W_Qᵀ W_K.",
                lambda WQ, WK: WK.T @ WQ,
            ),
            Mistake(
                "W_Q W_Kᵀ is d_k × d_k (the form in query space); the form on tokens is W_Qᵀ W_K.",
                lambda WQ, WK: WQ @ WK.T,
            ),
        ),
    ),
)
