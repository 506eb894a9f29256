"""Exercises of chapter 2, Bilinear attention inside an MLP: cases, references, mistakes."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ...mlp import matched_slots as _matched_slots
from ...mlp import mlp_cost, score_cut
from ._checker import Case, Exercise, Mistake, randn, register


def _mlp_cases(gen, rank: int):
    d, m = 5, 7

    def w(*s):
        return randn(gen, *s) / math.sqrt(d)

    qk = (m, rank, d)
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


def _llama_cases(gen):
    d, m = 5, 7
    cases = []
    for label, sigma, n, d_out in (
        ("SiLU (SwiGLU), 4 tokens", F.silu, (4,), d),
        ("ReLU (ReGLU), one token", F.relu, (1,), 3),
        ("GELU (GEGLU), d_out ≠ d", F.gelu, (3,), 2),
        ("tanh, batch axis", torch.tanh, (2, 3), d),
    ):
        w1, w3 = (randn(gen, m, d) / math.sqrt(d) for _ in range(2))
        w2 = randn(gen, d_out, m) / math.sqrt(m)
        cases.append(Case(label, (randn(gen, *n, d), w1, w2, w3, sigma)))
    return cases


def _sym(M):
    return (M + M.mT) / 2


def _best_slot_form(M, r):
    Q, K = score_cut(M, r)
    return _sym(Q.mT @ K)  # sym(Σ_s q_s k_sᵀ)


def _svd_cut(M, r):
    U, S, Vh = torch.linalg.svd(M)
    return (U[..., :r] * S[..., None, :r]) @ Vh[..., :r, :]


def _eig_cut(M, r, keep):
    lam, V = torch.linalg.eigh(_sym(M))
    key = lam.abs() if keep == "magnitude" else lam
    order = key.argsort(-1, descending=True)[..., :r]
    kept = torch.zeros_like(lam).scatter(-1, order, lam.gather(-1, order))
    return (V * kept[..., None, :]) @ V.mT


def _best_slot_cases(gen):
    A = randn(gen, 5, 5)
    spd = A @ A.T + torch.eye(5, dtype=torch.float64)
    return [
        Case("three random slots, d = 5, r = 1", (randn(gen, 3, 5, 5), 1)),
        Case("one slot, d = 6, r = 2", (randn(gen, 6, 6), 2)),
        Case("antisymmetric slot: no score at all", (A - A.T, 1)),
        Case("positive definite slot, r = 2", (spd, 2)),
        Case("2r ≥ d: the whole score is kept", (randn(gen, 2, 3, 3), 2)),
    ]


def _rank1_factors(M):
    """q_j = s_j u_j and k_j = v_j from the top singular triple of each slot, shape (m, d) each:
    exact when every M_j = q_j k_jᵀ has rank 1 (at most)."""
    U, S, Vh = torch.linalg.svd(M)
    return U[..., 0] * S[..., :1], Vh[..., 0, :]


def _rank1_from(factors, gate=None):
    """A rank-1 layer builder: ``factors(M) -> (W_q, W_k)``; ``gate`` set puts σ on x·q_j only."""

    def build(M, V, sigma):
        W_q, W_k = factors(M)

        def layer(x):
            xq, xk = x @ W_q.T, x @ W_k.T
            return (sigma(xq) * xk if gate else sigma(xq * xk)) @ V

        return layer

    return build


def _top_eigen_factors(M):
    lam, U = torch.linalg.eigh(_sym(M))
    q = U[..., -1] * lam[..., -1:].clamp(min=0).sqrt()
    return q, q


def _rank1_cases(gen):
    d, m = 5, 7

    def slots(m, d, symmetric=False):
        q = randn(gen, m, d) / math.sqrt(d)
        k = q if symmetric else randn(gen, m, d) / math.sqrt(d)
        return q[:, :, None] * k[:, None, :]  # M_j = q_j k_jᵀ, (m, d, d)

    dead = slots(m, d)
    dead[2] = 0.0
    return [
        Case("SiLU, 4 tokens", (slots(m, d), randn(gen, m, d), F.silu), (randn(gen, 4, d),)),
        Case("GELU, d_out ≠ d", (slots(m, d), randn(gen, m, 2), F.gelu), (randn(gen, 3, d),)),
        Case(
            "tanh, batch axis", (slots(m, d), randn(gen, m, d), torch.tanh), (randn(gen, 2, 3, d),)
        ),
        Case(
            "symmetric slots q_j = k_j",
            (slots(m, d, True), randn(gen, m, 3), F.silu),
            (randn(gen, 4, d),),
        ),
        Case("a dead slot M_j = 0", (dead, randn(gen, m, 3), F.silu), (randn(gen, 4, d),)),
    ]


def _truncate_cases(gen):
    return [
        Case("random, r=2", (randn(gen, 3, 5, 5), 2)),
        Case("r=1", (randn(gen, 2, 4, 4), 1)),
        Case("full rank kept", (randn(gen, 2, 3, 3), 3)),
    ]


def _slot_cut(M, r):
    Q, K = score_cut(M, r)
    return Q.transpose(-1, -2) @ K  # Σ_s q_s k_sᵀ


def _matched(d, d_out, m1, r):
    budget = mlp_cost("key_value", d, m1, d_out=d_out)[0]  # m1·(d + d_out)
    return _matched_slots("rank_r", d, budget, rank=r, d_out=d_out)


def _matched_cases(_gen):
    return [
        Case("d=64, d_out=64, m1=256, r=1", (64, 64, 256, 1)),
        Case("d=64, d_out=64, m1=256, r=2", (64, 64, 256, 2)),
        Case("d=64, d_out=16, m1=256, r=2", (64, 16, 256, 2)),
        Case("d=10, d_out=3, m1=7, r=3", (10, 3, 7, 3)),
        Case("d=128, d_out=512, m1=512, r=4", (128, 512, 512, 4)),
    ]


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
        "rank1_layer",
        2,
        "rank1_layer(M, V, sigma) -> Callable[[Tensor], Tensor]",
        "A full bilinear-attention layer Σ_j σ(x M_j xᵀ) v_j stores each slot as a d×d matrix; "
        "here every M_j has rank 1 (at most). M (m, d, d), V (m, d_out), sigma elementwise. Factor "
        "each slot as M_j = q_j k_jᵀ and return the same layer at the rank-1 price: a function of "
        "x (..., d) computing Σ_j σ((x·q_j)(x·k_j)) v_j, shape (..., d_out).",
        _rank1_from(_rank1_factors),
        _rank1_cases,
        (
            Mistake(
                "the singular value left out (q_j = u_j, k_j = v_j): M_j = s_j u_j v_jᵀ, so one "
                "factor must carry s_j (or each √s_j).",
                _rank1_from(
                    lambda M: (torch.linalg.svd(M)[0][..., 0], torch.linalg.svd(M)[2][..., 0, :])
                ),
            ),
            Mistake(
                "k_j read from a column of Vh: torch.linalg.svd returns Vh = Vᵀ, so the right "
                "singular vector v_j is the first row of Vh[j], not its first column.",
                _rank1_from(lambda M: (_rank1_factors(M)[0], torch.linalg.svd(M)[2][..., :, 0])),
            ),
            Mistake(
                "σ on the query factor only, σ(x·q_j)(x·k_j): that is the gated MLP; the "
                "bilinear layer applies σ to the whole score (x·q_j)(x·k_j) = x M_j xᵀ.",
                _rank1_from(_rank1_factors, gate=True),
            ),
            Mistake(
                "q_j = k_j from the top eigenpair of sym(M_j): the symmetric part of q kᵀ has "
                "one positive and one negative eigenvalue (theorem, part ii), and keeping only "
                "the positive one changes the score unless q_j ∥ k_j.",
                _rank1_from(_top_eigen_factors),
            ),
        ),
    ),
    Exercise(
        "gated_mlp",
        2,
        "gated_mlp(x, w1, w2, w3, sigma) -> Tensor",
        "A LLaMA-style feed-forward layer read as memory slots. w1 (m, d), w3 (m, d) and "
        "w2 (d_out, m) are the weights of LLaMA's three nn.Linear layers (gate, up and down "
        "projections, as torch stores them); sigma is the activation. Return the layer's output "
        "(..., d_out) for x (..., d).",
        lambda x, w1, w2, w3, s: (s(x @ w1.T) * (x @ w3.T)) @ w2.T,
        _llama_cases,
        (
            Mistake(
                "σ on the up projection w3: the gate is w1, the course's W_q (σ(x·q_j)), and w3 "
                "holds the keys k_j, which enter linearly.",
                lambda x, w1, w2, w3, s: ((x @ w1.T) * s(x @ w3.T)) @ w2.T,
            ),
            Mistake(
                "σ on the product of the two projections: that is the symmetric rank-1 form, "
                "before σ was moved onto the query factor.",
                lambda x, w1, w2, w3, s: s((x @ w1.T) * (x @ w3.T)) @ w2.T,
            ),
            Mistake(
                "σ on both projections: only the gate projection w1 passes through σ.",
                lambda x, w1, w2, w3, s: (s(x @ w1.T) * s(x @ w3.T)) @ w2.T,
            ),
        ),
    ),
    Exercise(
        "eckart_young",
        2,
        "eckart_young(M, r) -> Tensor",
        "The best rank-r approximation in Frobenius norm of every matrix in M (..., d, d), "
        "by the Eckart–Young theorem. (It is the best rank-r *matrix*; chapter 2 shows that the "
        "best rank-r *slot* for the score x M xᵀ is a different cut.)",
        _svd_cut,
        _truncate_cases,
        (
            Mistake(
                "the r smallest singular values were kept; torch.linalg.svd sorts them in "
                "descending order, so keep the first r.",
                lambda M, r: (lambda U, S, Vh: (U[..., -r:] * S[..., None, -r:]) @ Vh[..., -r:, :])(
                    *torch.linalg.svd(M)
                ),
            ),
            Mistake(
                "the singular values were dropped: M_r = U_r diag(S_r) V_rᵀ.",
                lambda M, r: (lambda U, S, Vh: U[..., :r] @ Vh[..., :r, :])(*torch.linalg.svd(M)),
            ),
            Mistake(
                "this is the cut chapter 2 makes for the slot score (eigenpairs of the symmetric "
                "part), not the best rank-r approximation of the matrix itself.",
                lambda M, r: _slot_cut(M, r),
            ),
        ),
    ),
    Exercise(
        "best_slot_form",
        2,
        "best_slot_form(M, r) -> Tensor",
        "M (..., d, d): slot matrices M_j = Q_j K_jᵀ. Return the symmetric matrix whose quadratic "
        "form is the score of the best rank-r slot (the slot Σ_s q_s k_sᵀ whose score x S xᵀ is "
        "closest to x M_j xᵀ, S closest to sym(M_j) in Frobenius norm), shape (..., d, d).",
        _best_slot_form,
        _best_slot_cases,
        (
            Mistake(
                "the symmetric part of the Eckart–Young cut (the SVD of M): that is the best "
                "rank-r matrix, and it spends rank on the antisymmetric part of M, which no score "
                "sees. Cut sym(M) instead.",
                lambda M, r: _sym(_svd_cut(M, r)),
            ),
            Mistake(
                "the r eigenpairs of sym(M) largest in magnitude: one rank-1 term q kᵀ carries "
                "one positive and one negative eigenpair, so a rank-r slot keeps the r largest "
                "positive and the r most negative eigenvalues (up to 2r in all).",
                lambda M, r: _eig_cut(M, r, "magnitude"),
            ),
            Mistake(
                "only the r largest eigenvalues of sym(M): the negative ones matter as much, a "
                "rank-r slot can hold r of each sign.",
                lambda M, r: _eig_cut(M, r, "largest"),
            ),
            Mistake(
                "sym(M) returned uncut.",
                lambda M, r: _sym(M),
            ),
        ),
    ),
    Exercise(
        "matched_slots",
        2,
        "matched_slots(d, d_out, m1, r) -> int",
        "The most rank-r slots (each: r query and r key vectors of size d, one value vector of "
        "size d_out) that fit in the parameter budget m1·(d + d_out) of a key-value MLP with m1 "
        "slots from width d to width d_out.",
        _matched,
        _matched_cases,
        (
            Mistake(
                "rounded up: the layer must fit in the budget, so round down (floor).",
                lambda d, d_out, m1, r: math.ceil(m1 * (d + d_out) / (2 * r * d + d_out)),
            ),
            Mistake(
                "the value vector is not counted: a rank-r slot has 2r·d + d_out parameters.",
                lambda d, d_out, m1, r: m1 * (d + d_out) // (2 * r * d),
            ),
            Mistake(
                "one value vector per rank component: a rank-r slot has r query-key pairs but one "
                "value v_j, so it costs 2r·d + d_out, not r·(2d + d_out).",
                lambda d, d_out, m1, r: m1 * (d + d_out) // (r * (2 * d + d_out)),
            ),
            Mistake(
                "d_out taken equal to d (the rule 2·m1/(2r + 1) of the chapter holds only then): "
                "the budget is m1·(d + d_out) and a slot costs 2r·d + d_out.",
                lambda d, d_out, m1, r: 2 * m1 * d // ((2 * r + 1) * d),
            ),
        ),
    ),
)
