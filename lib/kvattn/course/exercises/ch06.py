"""Exercises of chapter 6, Attention as a learned bilinear form: cases, references, mistakes."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ... import diagnostics, plga
from ._checker import Case, Exercise, Mistake, causal_mask, randn, register


def _causal_softmax(scores, dim=-1):
    S = scores.shape[-1]
    return scores.masked_fill(~causal_mask(S), -math.inf).softmax(dim)


def _form_cases(gen):
    return [
        Case("5 tokens, d=6, d_k=4", (randn(gen, 5, 6), randn(gen, 6, 6), 4)),
        Case("heads axis (2, 3, 4 tokens)", (randn(gen, 2, 3, 4, 5), randn(gen, 5, 5), 8)),
        Case("one token", (randn(gen, 1, 3), randn(gen, 3, 3), 2)),
    ]


def _attention_from_form(x, M, d_k, how: str = ""):
    form = M.T if how == "transposed" else M
    scores = x @ form @ x.transpose(-1, -2) / (1.0 if how == "no scale" else math.sqrt(d_k))
    if how == "no mask":
        return scores.softmax(-1)
    return _causal_softmax(scores, -2 if how == "softmax over queries" else -1)


def _attention_cases(gen):
    cases = []
    for label, lead, S, d_k in (
        ("4 tokens", (), 4, 8),
        ("heads axis", (2, 3), 5, 4),
        ("one token", (), 1, 6),
    ):
        q, k, v = (randn(gen, *lead, S, d_k) for _ in range(3))
        cases.append(Case(label, (q, k, v, randn(gen, d_k, d_k))))
    return cases


def _gsdpa(q, k, v, G):
    return F.scaled_dot_product_attention(q @ G, k, v, is_causal=True)


def _head_form_cases(gen):
    def weights(d_k, d, zero_bias=False):
        b = (
            (lambda: torch.zeros(d_k, dtype=torch.float64))
            if zero_bias
            else lambda: randn(gen, d_k)
        )
        return randn(gen, d_k, d), b(), randn(gen, d_k, d), b()

    return [
        Case("d_k=4, d=6", weights(4, 6)),
        Case("d_k = d = 5", weights(5, 5)),
        Case("d_k=1", weights(1, 3)),
        Case("zero biases", weights(3, 4, zero_bias=True)),
    ]


def _with_bias(W, b):
    return torch.cat([W, b[:, None]], 1)  # [x, 1] Ŵᵀ = x Wᵀ + b


def _head_form(W_Q, b_Q, W_K, b_K):
    return _with_bias(W_Q, b_Q).T @ _with_bias(W_K, b_K)


def _head_form_swapped_bias(W_Q, b_Q, W_K, b_K):
    M = _head_form(W_Q, b_Q, W_K, b_K)
    M[:-1, -1], M[-1, :-1] = M[-1, :-1].clone(), M[:-1, -1].clone()
    return M


def _head_form_no_corner(W_Q, b_Q, W_K, b_K):
    M = _head_form(W_Q, b_Q, W_K, b_K)
    M[-1, -1] = 0.0
    return M


def rope_matrix(d_k: int, position: int, theta: float, interleaved: bool = True) -> torch.Tensor:
    """R(p), float64 (d_k, d_k): the matrix with rope(x) = x R(p) for a row x at position p
    (``kvattn.plga.RotaryEmbedding``, interleaved planes unless told otherwise)."""
    return plga.RotaryEmbedding(d_k, position + 1, theta, interleaved).matrix(position)


def _rope_form(W_Q, W_K, G, theta, i, j, how: str = ""):
    d_k = W_Q.shape[0]
    interleaved = how != "half-split"
    Ri, Rj = (rope_matrix(d_k, p, theta, interleaved) for p in (i, j))
    if how == "commuted":
        return W_Q.T @ G @ rope_matrix(d_k, i - j, theta) @ W_K
    if how == "inverse rotation":
        Ri, Rj = Ri.T, Rj.T
    if how == "positions swapped":
        Ri, Rj = Rj, Ri
    return W_Q.T @ Ri @ G @ Rj.T @ W_K


def _rope_form_cases(gen):
    def w(d_k, d):
        return randn(gen, d_k, d), randn(gen, d_k, d)

    G = randn(gen, 4, 4)
    eye = torch.eye(4, dtype=torch.float64)
    return [
        Case("random G, i=5, j=2", (*w(4, 6), G, 10_000.0, 5, 2)),
        Case("G = I, i=5, j=2", (*w(4, 6), eye, 10_000.0, 5, 2)),
        Case("random G, i=9, j=6 (same distance)", (*w(4, 6), G, 10.0, 9, 6)),
        Case(
            "G in the RoPE commutant, d_k=6, i=7, j=1",
            (*w(6, 5), diagnostics.commutant_projection(randn(gen, 6, 6)), 100.0, 7, 1),
        ),
        Case("i = j = 0 (no rotation)", (*w(4, 3), G, 10_000.0, 0, 0)),
        Case("d_k=2 (one plane)", (*w(2, 3), randn(gen, 2, 2), 10_000.0, 3, 1)),
    ]


register(
    Exercise(
        "attention_from_form",
        6,
        "attention_from_form(x, M, d_k) -> Tensor",
        "The causal attention weights E (..., S, S) of a head whose score is the bilinear form "
        "x_i M x_jᵀ/√d_k, for tokens x (..., S, d) and a form M (d, d): row i (the query) "
        "holds token i's weights over the tokens j ≤ i.",
        _attention_from_form,
        _form_cases,
        (
            Mistake(
                "the form is transposed: the query token stands on the left of M, so the score "
                "matrix is x M xᵀ (row i = query i), not x Mᵀ xᵀ.",
                lambda x, M, d_k: _attention_from_form(x, M, d_k, "transposed"),
            ),
            Mistake(
                "no 1/√d_k scaling of the scores.",
                lambda x, M, d_k: _attention_from_form(x, M, d_k, "no scale"),
            ),
            Mistake(
                "no causal mask: query i must not see tokens j > i.",
                lambda x, M, d_k: _attention_from_form(x, M, d_k, "no mask"),
            ),
            Mistake(
                "softmax over the queries (axis −2): each query's weights over the keys (the "
                "last axis) sum to 1.",
                lambda x, M, d_k: _attention_from_form(x, M, d_k, "softmax over queries"),
            ),
        ),
    ),
    Exercise(
        "generalised_sdpa",
        6,
        "generalised_sdpa(q, k, v, G) -> Tensor",
        "Causal attention with a bilinear form G (d_k, d_k), softmax(q G kᵀ/√d_k + mask) v, for "
        "q, k, v (..., S, d_k), computed by the fused kernel "
        "F.scaled_dot_product_attention(..., is_causal=True), which only knows q kᵀ.",
        _gsdpa,
        _attention_cases,
        (
            Mistake(
                "G transposed (q Gᵀ kᵀ, which is also what k G as the keys gives): the kernel "
                "computes (its query)·(its key)ᵀ, so either the queries become q G or the keys "
                "k Gᵀ.",
                lambda q, k, v, G: _gsdpa(q, k, v, G.T),
            ),
            Mistake(
                "G applied to both queries and keys: (q G)(k G)ᵀ = q G Gᵀ kᵀ; G goes in once.",
                lambda q, k, v, G: F.scaled_dot_product_attention(q @ G, k @ G, v, is_causal=True),
            ),
            Mistake(
                "the scores are divided by √d_k twice: the kernel already scales by "
                "1/√(last axis of the queries).",
                lambda q, k, v, G: _gsdpa(q / math.sqrt(q.shape[-1]), k, v, G),
            ),
        ),
    ),
    Exercise(
        "head_form",
        6,
        "head_form(W_Q, b_Q, W_K, b_K) -> Tensor",
        "The (d+1) × (d+1) bilinear form M of a head with biases, no RoPE: q = x W_Qᵀ + b_Q and "
        "k = x W_Kᵀ + b_K (W (d_k, d), b (d_k,)), so that q_i·k_j = [x_i, 1] M [x_j, 1]ᵀ.",
        _head_form,
        _head_form_cases,
        (
            Mistake(
                "the two bias blocks are swapped: the last column multiplies the key's constant "
                "1 (it holds W_Qᵀ b_K), the last row the query's (it holds b_Q W_K).",
                _head_form_swapped_bias,
            ),
            Mistake(
                "the corner is missing: [1] M [1] must give the constant term b_Q·b_K.",
                _head_form_no_corner,
            ),
            Mistake(
                "the transpose: the query's weights come first, M = Ŵ_Qᵀ Ŵ_K.",
                lambda W_Q, b_Q, W_K, b_K: _head_form(W_K, b_K, W_Q, b_Q),
            ),
        ),
    ),
    Exercise(
        "rope_form",
        6,
        "rope_form(W_Q, W_K, G, theta, i, j) -> Tensor",
        "The d × d bilinear form between a query token at position i and a key token at "
        "position j of a head with RoPE (interleaved planes (2t, 2t+1) turned by "
        "p·θ^(−2t/d_k), rows rotated as (x1, x2) → (x1 cos − x2 sin, x1 sin + x2 cos)) and a "
        "constant G (d_k, d_k) between the rotated query and key: score = x_i M x_jᵀ for "
        "q = x W_Qᵀ, k = x W_Kᵀ (W (d_k, d), no biases, before 1/√d_k).",
        _rope_form,
        _rope_form_cases,
        (
            Mistake(
                "G was moved past R(i) to give G R(i − j): that holds only when G commutes with "
                "every rotation; a general G sits between R(i) and R(j)ᵀ.",
                lambda *a: _rope_form(*a, how="commuted"),
            ),
            Mistake(
                "the rotations turn the wrong way: for a row vector, rope(q) = q R(p) with the "
                "rows of R(p) the rotated basis vectors; you used R(p)ᵀ = R(−p).",
                lambda *a: _rope_form(*a, how="inverse rotation"),
            ),
            Mistake(
                "the positions are swapped: the query (position i) is rotated by R(i), the key "
                "by R(j).",
                lambda *a: _rope_form(*a, how="positions swapped"),
            ),
            Mistake(
                "the half-split layout (planes (t, t + d_k/2)); this model rotates interleaved "
                "pairs (2t, 2t+1).",
                lambda *a: _rope_form(*a, how="half-split"),
            ),
        ),
    ),
)
