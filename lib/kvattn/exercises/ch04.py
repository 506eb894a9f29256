"""Exercises of chapter 4, Symmetry breaking: cases, references, mistakes."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ._checker import Case, Exercise, Mistake, randn, register


def _violation_cases(gen, with_alpha: bool):
    cases = []
    for label, sigma in (
        ("SiLU", F.silu),
        ("ReLU", F.relu),
        ("tanh", torch.tanh),
        ("identity", lambda z: z),
    ):
        a, b = randn(gen, 2000), randn(gen, 2000)
        alpha = (2.0, -1.5, 0.5, 3.0)[len(cases)]
        cases.append(
            Case(f"{label}, 2000 samples", (sigma, alpha, a, b) if with_alpha else (sigma, a, b))
        )
    return cases


def _exchange_violation(sigma, a, b):
    return float(((sigma(a) * b - sigma(b) * a) ** 2).mean() / ((sigma(a) * b) ** 2).mean())


def _scale_violation(sigma, alpha, a, b):
    return float(
        ((sigma(alpha * a) * b / alpha - sigma(a) * b) ** 2).mean() / ((sigma(a) * b) ** 2).mean()
    )


def _conserved_cases(gen):
    return [
        Case("random", (randn(gen, 6, 4), randn(gen, 6, 4))),
        Case("rank-r slots (m, r, d)", (randn(gen, 5, 2, 4), randn(gen, 5, 2, 4))),
        Case("balanced: W_q = W_k", ((lambda w: (w, w.clone()))(randn(gen, 3, 4)))),
    ]


register(
    Exercise(
        "exchange_violation_samples",
        4,
        "exchange_violation_samples(sigma, a, b) -> float",
        "The normalised exchange violation mean((σ(a)b − σ(b)a)²) / mean((σ(a)b)²) over paired "
        "samples a, b (n,).",
        _exchange_violation,
        lambda g: _violation_cases(g, with_alpha=False),
        (
            Mistake(
                "not normalised: divide by mean((σ(a)b)²).",
                lambda s, a, b: float(((s(a) * b - s(b) * a) ** 2).mean()),
            ),
            Mistake(
                "the difference is not squared before averaging.",
                lambda s, a, b: float((s(a) * b - s(b) * a).mean() / ((s(a) * b) ** 2).mean()),
            ),
        ),
    ),
    Exercise(
        "scale_violation_samples",
        4,
        "scale_violation_samples(sigma, alpha, a, b) -> float",
        "The normalised inverse-scale violation mean((σ(αa)b/α − σ(a)b)²) / mean((σ(a)b)²): "
        "the "
        "transformed slot (αq, k/α) against the original.",
        _scale_violation,
        lambda g: _violation_cases(g, with_alpha=True),
        (
            Mistake(
                "the key is not divided by α: the transform is (q, k) → (αq, k/α).",
                lambda s, al, a, b: float(
                    ((s(al * a) * b - s(a) * b) ** 2).mean() / ((s(a) * b) ** 2).mean()
                ),
            ),
            Mistake(
                "α applied after σ: scaling the query scales σ's argument, σ(αa).",
                lambda s, al, a, b: float(
                    ((al * s(a) * b / al - s(a) * b) ** 2).mean() / ((s(a) * b) ** 2).mean()
                ),
            ),
        ),
    ),
    Exercise(
        "conserved_qk",
        4,
        "conserved_qk(W_q, W_k) -> Tensor",
        "The per-slot quantity ‖q_j‖² − ‖k_j‖² that gradient flow conserves under the scale "
        "symmetry, shape (m,); rank-r slots (m, r, d) sum over all their components.",
        lambda Wq, Wk: Wq.flatten(1).pow(2).sum(1) - Wk.flatten(1).pow(2).sum(1),
        _conserved_cases,
        (
            Mistake(
                "norms, not squared norms: the conserved quantity is ‖q_j‖² − ‖k_j‖².",
                lambda Wq, Wk: Wq.flatten(1).norm(dim=1) - Wk.flatten(1).norm(dim=1),
            ),
            Mistake(
                "summed over the wrong axis: one value per slot j (rows), not per coordinate.",
                lambda Wq, Wk: Wq.pow(2).sum(0) - Wk.pow(2).sum(0),
            ),
        ),
    ),
)
