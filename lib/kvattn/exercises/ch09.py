"""Exercises of chapter 9, Inference collapse: cases, references, mistakes."""

from __future__ import annotations

import torch

from .. import diagnostics
from ._checker import Case, Exercise, Mistake, randn, register


def _order_cases(gen):
    x = randn(gen, 3, 4, 4) + 2.0
    return [
        Case("random", (x, x + 0.1 * randn(gen, 3, 4, 4))),
        Case("identical runs", (x, x.clone())),
        Case("negative mean", (-x, -x + 0.05 * randn(gen, 3, 4, 4))),
    ]


def _audit_cases(gen):
    u, a = randn(gen, 4), randn(gen, 4)
    return [
        Case("random (H, d, d)", (randn(gen, 3, 4, 4),)),
        Case("identical rows (A = 1 αᵀ)", (torch.ones(4, 1, dtype=torch.float64) * a,)),
        Case("rank 1 (A = u αᵀ), non-symmetric", (torch.outer(u, a),)),
    ]


def _sigma_ratio(A):
    return diagnostics.rank_audit(A, head_dim=None).sigma_ratio


def _row_spread(A):
    return diagnostics.rank_audit(A, head_dim=None).row_spread


register(
    Exercise(
        "order_parameter",
        9,
        "order_parameter(x1, x2) -> float",
        "The SOC paper's order parameter between two runs' tensors of the same shape: "
        "RMSE(x1 − x2) / |mean(x1)|, pooled over every value.",
        diagnostics.order_parameter,
        _order_cases,
        (
            Mistake(
                "normalised by mean(|x1|) instead of |mean(x1)|.",
                lambda a, b: float((a - b).pow(2).mean().sqrt() / a.abs().mean()),
            ),
            Mistake(
                "normalised by the RMS of the runs (that is the 'rms' variant, bounded by 2).",
                lambda a, b: diagnostics.order_parameter(a, b, "rms"),
            ),
            Mistake(
                "mean squared error, not its root.",
                lambda a, b: float((a - b).pow(2).mean() / a.mean().abs()),
            ),
        ),
    ),
    Exercise(
        "sigma_ratio",
        9,
        "sigma_ratio(A) -> Tensor",
        "σ2/σ1, the second-largest over the largest singular value, of every matrix in "
        "A (..., d, d): 0 for a rank-1 matrix.",
        _sigma_ratio,
        _audit_cases,
        (
            Mistake(
                "σ_min/σ_max: torch.linalg.svdvals sorts in descending order, so σ1 is the first.",
                lambda A: (lambda s: s[..., -1] / s[..., 0])(torch.linalg.svdvals(A)),
            ),
            Mistake("σ1/σ2 (inverted).", lambda A: 1 / _sigma_ratio(A)),
        ),
    ),
    Exercise(
        "row_spread",
        9,
        "row_spread(A) -> Tensor",
        "How different the rows of each matrix in A (..., d, d) are: the variance across rows "
        "(population, per column, averaged over columns) over the mean square of A; 0 when "
        "A = 𝟙αᵀ.",
        _row_spread,
        _audit_cases,
        (
            Mistake(
                "the variance across columns (dim=-1); rows vary along dim=-2.",
                lambda A: A.var(dim=-1, unbiased=False).mean(-1) / A.pow(2).mean((-2, -1)),
            ),
            Mistake(
                "the unbiased variance (n − 1); use unbiased=False.",
                lambda A: A.var(dim=-2).mean(-1) / A.pow(2).mean((-2, -1)),
            ),
        ),
    ),
)
