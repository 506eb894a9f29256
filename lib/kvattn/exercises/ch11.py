"""Exercises of chapter 11, Criticality: cases, references, mistakes."""

from __future__ import annotations

import torch

from .. import diagnostics, stats, train
from ._checker import Case, Exercise, Mistake, randn, register


def _lr_cases(_gen):
    return [
        Case(f"step {s} of 1000, warm-up 100", (s, 1000, 100, 0.1))
        for s in (0, 49, 99, 100, 550, 999)
    ] + [
        Case("no warm-up, step 0", (0, 200, 0, 0.1)),
        Case("min_ratio 0, last step", (299, 300, 20, 0.0)),
    ]


def _spread_cases(gen):
    X = randn(gen, 5, 2, 3, 3) + 1.5
    return [
        Case("5 prompts", (X,)),
        Case("2 prompts", (X[:2],)),
        Case("identical prompts", (X[:1].expand(3, -1, -1, -1).clone(),)),
    ]


def _spread(X):
    return torch.tensor(
        [diagnostics.order_parameter(X[0], X[i]) for i in range(1, len(X))], dtype=torch.float64
    )


def _spearman_cases(gen):
    x = randn(gen, 8)
    return [
        Case("random", (x, randn(gen, 8))),
        Case("monotone but not linear", (x, x.exp())),
        Case("reversed", (x, -(x**3))),
    ]


def _pearson(x, y):
    x, y = x - x.mean(), y - y.mean()
    return float((x * y).sum() / (x.norm() * y.norm()))


register(
    Exercise(
        "lr_factor",
        11,
        "lr_factor(step, steps, warmup, min_ratio) -> float",
        "The learning-rate factor at 0-based step: linear warm-up (step + 1)/warmup for the "
        "first warmup steps, then cosine decay from 1 to min_ratio at the last step, steps − "
        "1.",
        lambda s, n, w, r: train.lr_multiplier(s, n, w, "cosine", r),
        _lr_cases,
        (
            Mistake(
                "warm-up from zero (step/warmup): step 0 would not learn at all; use "
                "(step + 1)/warmup.",
                lambda s, n, w, r: s / w if s < w else train.lr_multiplier(s, n, w, "cosine", r),
            ),
            Mistake(
                "the cosine decays to 0, not to min_ratio.",
                lambda s, n, w, r: train.lr_multiplier(s, n, w, "cosine", 0.0),
            ),
        ),
    ),
    Exercise(
        "prompt_spread",
        11,
        "prompt_spread(X) -> Tensor",
        "Given one deductive tensor for n prompts, X (n, ...), the order parameter of each "
        "prompt "
        "i ≥ 1 against prompt 0 (the SOC paper's 'mean' normalisation), shape (n − 1,).",
        _spread,
        _spread_cases,
        (
            Mistake(
                "normalised by the other prompt's mean; the reference run is prompt 0, x1 = X[0].",
                lambda X: torch.tensor(
                    [diagnostics.order_parameter(X[i], X[0]) for i in range(1, len(X))],
                    dtype=torch.float64,
                ),
            ),
        ),
    ),
    Exercise(
        "spearman",
        11,
        "spearman(x, y) -> float",
        "Spearman's rank correlation of two 1-D tensors without ties: the Pearson correlation "
        "of "
        "their ranks (e.g. order parameter against loss across a sweep).",
        stats.spearman,
        _spearman_cases,
        (Mistake("the Pearson correlation of the values; rank them first.", _pearson),),
    ),
)
