"""Exercises of chapter 8, Training small PLDR-LLMs: cases, references, mistakes."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .. import diagnostics, losses
from ._checker import Case, Exercise, Mistake, randn, register


def _ce_cases(gen):
    V = 7
    t1 = torch.randint(1, V, (2, 5), generator=gen)
    t2 = t1.clone()
    t2[0, 3:] = 0
    t2[1, 4] = 0
    return [
        Case("no padding", (randn(gen, 2, 5, V), t1, 0)),
        Case("padded targets", (randn(gen, 2, 5, V), t2, 0)),
        Case(
            "pad id 3",
            (
                randn(gen, 2, 5, V),
                torch.where(t1 == 3, 4, t1).index_fill(1, torch.tensor([4]), 3),
                3,
            ),
        ),
    ]


def _ce(logits, targets, pad_id):
    return float(losses.lm_cross_entropy(logits, targets, pad_id))


def _dag_cases(gen):
    strictly_upper = torch.triu(randn(gen, 4, 4), diagonal=1)
    return [
        Case("random 4×4", (randn(gen, 4, 4) * 0.5,)),
        Case("a DAG (strictly upper triangular)", (strictly_upper,)),
        Case("a stack (H, d, d)", (randn(gen, 3, 3, 3) * 0.5,)),
        Case("a 2-cycle", (torch.tensor([[0.0, 1.0], [1.0, 0.0]], dtype=torch.float64),)),
    ]


register(
    Exercise(
        "masked_cross_entropy",
        8,
        "masked_cross_entropy(logits, targets, pad_id) -> float",
        "Mean next-token cross-entropy (nats) over the targets that are not pad_id; logits "
        "(B, S, V), targets (B, S) integer ids.",
        _ce,
        _ce_cases,
        (
            Mistake(
                "pad targets are counted; skip them (ignore_index=pad_id).",
                lambda lo, t, p: float(F.cross_entropy(lo.flatten(0, 1), t.flatten())),
            ),
            Mistake(
                "summed, not averaged, over the non-pad targets.",
                lambda lo, t, p: float(
                    F.cross_entropy(lo.flatten(0, 1), t.flatten(), ignore_index=p, reduction="sum")
                ),
            ),
        ),
    ),
    Exercise(
        "notears_h",
        8,
        "notears_h(M) -> Tensor",
        "The NOTEARS acyclicity function h(M) = tr(exp(M ∘ M)) − d for every matrix in "
        "M (..., d, d): zero exactly for the weighted adjacency matrix of a DAG.",
        diagnostics.notears_h,
        _dag_cases,
        (
            Mistake(
                "M @ M instead of the elementwise square M ∘ M (= M * M).",
                lambda M: (
                    torch.linalg.matrix_exp(M @ M).diagonal(dim1=-2, dim2=-1).sum(-1) - M.shape[-1]
                ),
            ),
            Mistake(
                "elementwise exp instead of the matrix exponential (torch.linalg.matrix_exp).",
                lambda M: torch.exp(M * M).diagonal(dim1=-2, dim2=-1).sum(-1) - M.shape[-1],
            ),
            Mistake(
                "− d is missing: h is zero for a DAG because tr(exp(0)) = d.",
                lambda M: torch.linalg.matrix_exp(M * M).diagonal(dim1=-2, dim2=-1).sum(-1),
            ),
        ),
    ),
    Exercise(
        "dag_loss",
        8,
        "dag_loss(M) -> Tensor",
        "The reference's DAG regulariser |log(tr(exp(M ∘ M)) / d)| for every matrix in "
        "M (..., d, d). (For real M the trace is at least d, so the log is never negative.)",
        losses.dag_loss,
        _dag_cases,
        (
            Mistake(
                "not divided by d inside the log: the loss must vanish for a DAG.",
                lambda M: torch.log(
                    torch.linalg.matrix_exp(M * M).diagonal(dim1=-2, dim2=-1).sum(-1)
                ).abs(),
            ),
            Mistake(
                "M @ M instead of M ∘ M.",
                lambda M: torch.log(
                    torch.linalg.matrix_exp(M @ M).diagonal(dim1=-2, dim2=-1).sum(-1) / M.shape[-1]
                ).abs(),
            ),
        ),
    ),
)
