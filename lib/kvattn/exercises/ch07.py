"""Exercises of chapter 7, Power Law Graph Attention piece by piece: cases, references, mistakes."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .. import diagnostics, pldr
from ._checker import Case, Exercise, Mistake, randn, register


def _density_cases(gen):
    return [
        Case("6 tokens", (randn(gen, 6, 4),)),
        Case("batch and heads", (randn(gen, 2, 3, 5, 4),)),
        Case("one token", (randn(gen, 1, 3),)),
    ]


def _iswiglu_cases(gen):
    return [
        Case("random", (randn(gen, 3, 4, 4) * 3,)),
        Case("zeros", (torch.zeros(2, 2, dtype=torch.float64),)),
        Case(
            "large |u| (no overflow)",
            (torch.tensor([-80.0, -30.0, 30.0, 80.0], dtype=torch.float64),),
        ),
    ]


def _power_law_cases(gen):
    def positive(*s):
        return randn(gen, *s).abs() + 0.1

    return [
        Case("one head", (positive(4, 4), randn(gen, 4, 4), randn(gen, 4, 4), randn(gen, 4, 4))),
        Case(
            "heads (H, d_k, d_k)",
            (positive(2, 3, 3), randn(gen, 2, 3, 3), randn(gen, 2, 3, 3), randn(gen, 2, 3, 3)),
        ),
        Case(
            "P = 1, a = I, b = 0 (G = A_LM)",
            (
                positive(3, 3),
                torch.ones(3, 3, dtype=torch.float64),
                torch.eye(3, dtype=torch.float64),
                torch.zeros(3, 3, dtype=torch.float64),
            ),
        ),
    ]


def _power_law(A_LM, P, a, b_a):
    return a @ A_LM.pow(P) + b_a


def _perron_cases(gen):
    return [
        Case("random positive 5×5", (randn(gen, 5, 5).abs() + 0.01,)),
        Case(
            "rank 1 (A = u vᵀ)",
            (torch.outer(randn(gen, 4).abs() + 0.1, randn(gen, 4).abs() + 0.1),),
        ),
        Case("all ones", (torch.ones(3, 3, dtype=torch.float64),)),
    ]


def _perron(A):
    lam, v = diagnostics.perron_frobenius(A, iterations=10_000, tol=1e-15)
    return float(lam), v


register(
    Exercise(
        "density",
        7,
        "density(q) -> Tensor",
        "The density (Gram) operator A0 = Σ_s q_sᵀ q_s of the block's queries q (..., S, d_k), "
        "shape (..., d_k, d_k) (a sum over positions, not a mean).",
        lambda q: q.transpose(-1, -2) @ q,
        _density_cases,
        (
            Mistake(
                "q qᵀ is the S × S Gram matrix of positions; the density is qᵀ q (d_k × d_k).",
                lambda q: q @ q.transpose(-1, -2),
            ),
            Mistake(
                "a mean over positions; the published density is a sum.",
                lambda q: q.transpose(-1, -2) @ q / q.shape[-2],
            ),
        ),
    ),
    Exercise(
        "iswiglu",
        7,
        "iswiglu(u) -> Tensor",
        "iSwiGLU(u) = u · silu(u) = u² sigmoid(u), elementwise (≥ 0).",
        pldr.iswiglu,
        _iswiglu_cases,
        (
            Mistake("silu(u) alone: iSwiGLU multiplies it by u once more (u² sigmoid(u)).", F.silu),
            Mistake(
                "u · sigmoid(u)² — the sigmoid appears once.",
                lambda u: u * torch.sigmoid(u) ** 2,
            ),
        ),
    ),
    Exercise(
        "power_law_G",
        7,
        "power_law_G(A_LM, P, a, b_a) -> Tensor",
        "G_LM = a A_P + b_a with the potential A_P = A_LM^{∘P} (elementwise power, exponent "
        "matrix P); all (..., d_k, d_k), a A_P a matrix product.",
        _power_law,
        _power_law_cases,
        (
            Mistake(
                "a ∘ A_P elementwise: a multiplies A_P as a matrix (a @ A_P).",
                lambda A, P, a, b: a * A.pow(P) + b,
            ),
            Mistake(
                "A_P a: the product is a A_P (a on the left).",
                lambda A, P, a, b: A.pow(P) @ a + b,
            ),
            Mistake(
                "torch.matrix_power is a matrix power with an integer exponent; the power "
                "law is elementwise with exponents P.",
                lambda A, P, a, b: a @ A.pow(P.mean()) + b,
            ),
        ),
    ),
    Exercise(
        "perron_pair",
        7,
        "perron_pair(A_LM) -> (float, Tensor)",
        "The Perron–Frobenius eigenpair of an entrywise-positive matrix (d, d): the dominant "
        "eigenvalue and its eigenvector, scaled to be positive with unit sum.",
        _perron,
        _perron_cases,
        (
            Mistake(
                "the eigenvector has unit Euclidean norm; scale it to unit sum.",
                lambda A: (lambda lv: (lv[0], lv[1] / lv[1].norm()))(_perron(A)),
            ),
        ),
    ),
)
