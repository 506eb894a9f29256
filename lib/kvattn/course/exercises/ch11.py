"""Exercises of chapter 11, Criticality: cases, references, mistakes."""

from __future__ import annotations

import math
from itertools import combinations

import torch

from ... import stats
from ._checker import Case, Exercise, Mistake, randn, register


def _splits(x, y):
    """|mean difference| of every split of the pooled values into groups of len(x) and len(y),
    the observed split's first (an exact permutation distribution, all C(n, len(x)) splits)."""
    pooled = torch.cat([x, y]).tolist()
    n, k = len(pooled), len(x)
    total = sum(pooled)
    diffs = []
    for chosen in combinations(range(n), k):
        part = sum(pooled[i] for i in chosen)
        diffs.append(part / k - (total - part) / (n - k))
    return diffs  # combinations start with range(k): the observed split


def _permutation_p(x, y):
    diffs = _splits(x, y)
    observed = abs(diffs[0])
    return sum(abs(d) >= observed - 1e-9 for d in diffs) / len(diffs)


def _one_sided_p(x, y):
    diffs = _splits(x, y)
    return sum(d >= diffs[0] - 1e-9 for d in diffs) / len(diffs)


def _strict_p(x, y):
    diffs = _splits(x, y)
    return sum(abs(d) > abs(diffs[0]) + 1e-9 for d in diffs) / len(diffs)


def _permutation_cases(gen):
    return [
        Case("3 high against 3 low", (torch.tensor([10.0, 11.0, 12.0]), torch.arange(3.0))),
        Case("2 high against 4 low", (torch.tensor([10.0, 11.0]), randn(gen, 4))),
        Case("2 low against 4 high", (torch.tensor([-9.0, -8.0]), randn(gen, 4))),
        Case("3 against 3, random", (randn(gen, 3), randn(gen, 3))),
        Case("2 against 5, random", (randn(gen, 2), randn(gen, 5))),
        Case("4 against 4, random", (randn(gen, 4), randn(gen, 4))),
    ]


def _smallest_p(n_x, n_y):
    splits = math.comb(n_x + n_y, n_x)
    return (2 if n_x == n_y else 1) / splits


def _size_cases(_gen):
    return [Case(f"{a} and {b} runs", (a, b)) for a, b in [(2, 4), (3, 3), (1, 5), (4, 4), (2, 2)]]


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
    Exercise(
        "permutation_p",
        11,
        "permutation_p(x, y) -> float",
        "The exact two-sided permutation p-value of the difference of means between two groups "
        "of runs, x and y (1-D tensors): the share of all ways to split the pooled values into "
        "groups of len(x) and len(y) whose |difference of means| is at least the observed one "
        "(the observed split included; allow 1e-9 for rounding).",
        _permutation_p,
        _permutation_cases,
        (
            Mistake(
                "one-sided: you counted splits whose signed difference is at least the observed "
                "one; a difference in either direction counts against 'no effect'.",
                _one_sided_p,
            ),
            Mistake(
                "the observed split must count itself (≥, not >): otherwise p can reach 0, "
                "which no exact permutation test can give.",
                _strict_p,
            ),
        ),
    ),
    Exercise(
        "smallest_p",
        11,
        "smallest_p(n_x, n_y) -> float",
        "The smallest p-value that permutation_p can return for groups of n_x and n_y runs "
        "whose values are in general position (no two splits tie by coincidence).",
        _smallest_p,
        _size_cases,
        (
            Mistake(
                "with equal group sizes the mirror split (the groups swapped) has the same "
                "|difference|, so the extreme split never stands alone: 2/C(n, n_x).",
                lambda a, b: 1 / math.comb(a + b, a),
            ),
            Mistake(
                "count splits into groups (combinations), not orderings of all the runs "
                "(permutations): the order inside a group does not change its mean.",
                lambda a, b: (2 if a == b else 1) / math.factorial(a + b),
            ),
        ),
    ),
)
