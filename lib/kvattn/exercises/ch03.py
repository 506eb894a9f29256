"""Exercises of chapter 3, Interaction tensors: cases, references, mistakes."""

from __future__ import annotations

import torch

from .. import interaction
from ._checker import Case, Exercise, Mistake, randn, register


def _interaction_cases(gen):
    d, m = 4, 6
    return [
        Case("random", (randn(gen, m, d), randn(gen, m, d), randn(gen, m, 3))),
        Case("one slot", (randn(gen, 1, d), randn(gen, 1, d), randn(gen, 1, 2))),
        Case("d_out = d", (randn(gen, m, d), randn(gen, m, d), randn(gen, m, d))),
    ]


def _symmetrise_cases(gen):
    return [
        Case("one matrix", (randn(gen, 4, 4),)),
        Case("a stack (d_out, d, d)", (randn(gen, 3, 5, 5),)),
        Case("already symmetric", (torch.eye(3, dtype=torch.float64) * 2,)),
        Case("antisymmetric", ((lambda a: a - a.T)(randn(gen, 4, 4)),)),
    ]


def _gated_interaction_cases(gen):
    d, m = 4, 6

    def sigmoid(z):
        return torch.sigmoid(z)

    def relu_gate(z):
        return (z > 0).to(z.dtype)

    return [
        Case(
            "SiLU gate (sigmoid)",
            (randn(gen, d), randn(gen, m, d), randn(gen, m, d), randn(gen, m, 3), sigmoid),
        ),
        Case(
            "ReLU gate (step)",
            (randn(gen, d), randn(gen, m, d), randn(gen, m, d), randn(gen, m, 2), relu_gate),
        ),
        Case(
            "x = 0",
            (
                torch.zeros(d, dtype=torch.float64),
                randn(gen, m, d),
                randn(gen, m, d),
                randn(gen, m, 2),
                sigmoid,
            ),
        ),
    ]


def _gated_interaction(x, W_q, W_k, W_v, gate):
    return torch.einsum("mo,m,mi,mj->oij", W_v, gate(W_q @ x), W_q, W_k)


register(
    Exercise(
        "interaction_tensor",
        3,
        "interaction_tensor(W_q, W_k, W_v) -> Tensor",
        "B with B[o] = Σ_j W_v[j, o] q_j k_jᵀ, shape (d_out, d, d), so that a bilinear layer's "
        "output o is x B[o] xᵀ. W_q, W_k (m, d); W_v (m, d_out).",
        lambda Wq, Wk, Wv: interaction.interaction_tensor(Wq, Wk, Wv),
        _interaction_cases,
        (
            Mistake(
                "k_j q_jᵀ instead of q_j k_jᵀ: the quadratic form is the same, but B is the "
                "transpose (the q↔k exchange).",
                lambda Wq, Wk, Wv: torch.einsum("mo,mi,mj->oij", Wv, Wk, Wq),
            ),
            Mistake(
                "the value weights are missing: each slot's q_j k_jᵀ is weighted by W_v[j, o].",
                lambda Wq, Wk, Wv: torch.einsum("mi,mj->ij", Wq, Wk).expand(Wv.shape[1], -1, -1),
            ),
        ),
    ),
    Exercise(
        "symmetrise",
        3,
        "symmetrise(B) -> Tensor",
        "The symmetric part ½(B + Bᵀ) of every matrix in B (..., d, d), transposing the last "
        "two "
        "axes only.",
        interaction.symmetrise,
        _symmetrise_cases,
        (
            Mistake(
                "B + Bᵀ without the ½: the quadratic form doubles.",
                lambda B: B + B.transpose(-1, -2),
            ),
            Mistake(
                "½(B − Bᵀ) is the antisymmetric part; the symmetric part adds the transpose.",
                lambda B: 0.5 * (B - B.transpose(-1, -2)),
            ),
        ),
    ),
    Exercise(
        "gated_interaction",
        3,
        "gated_interaction(x, W_q, W_k, W_v, gate) -> Tensor",
        "The input-dependent interaction tensor of a gated layer at one input x (d,): "
        "B(x)[o] = Σ_j W_v[j, o] g(q_j·x) q_j k_jᵀ, shape (d_out, d, d); gate is g(z) = "
        "σ(z)/z.",
        _gated_interaction,
        _gated_interaction_cases,
        (
            Mistake(
                "the gate reads the key, g(k_j·x); in the gated MLP it reads the query.",
                lambda x, Wq, Wk, Wv, g: torch.einsum("mo,m,mi,mj->oij", Wv, g(Wk @ x), Wq, Wk),
            ),
            Mistake(
                "the gate is missing (this is the bilinear layer's constant B).",
                lambda x, Wq, Wk, Wv, g: torch.einsum("mo,mi,mj->oij", Wv, Wq, Wk),
            ),
        ),
    ),
)
