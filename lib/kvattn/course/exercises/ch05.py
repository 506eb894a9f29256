"""Exercises of chapter 5, Does breaking the symmetry help? A designed experiment: cases,
references, mistakes."""

from __future__ import annotations

import math

import torch

from ... import stats
from ._checker import Case, Exercise, Mistake, randn, register


def _paired_t_cases(gen):
    a = [float(v) for v in randn(gen, 6)]
    return [
        Case(
            "six seeds",
            (a, [x + 0.3 + 0.1 * float(e) for x, e in zip(a, randn(gen, 6), strict=True)]),
        ),
        Case("two seeds", ([1.0, 2.0], [0.5, 1.8])),
        Case("b better on every seed", ([3.1, 3.3, 3.2, 3.4], [3.0, 3.25, 3.05, 3.3])),
    ]


def _mde_cases(_gen):
    return [
        Case("8 pairs, sd 0.03", (0.03, 8)),
        Case("4 pairs, sd 0.024", (0.024, 4)),
        Case("30 pairs, sd 1", (1.0, 30)),
        Case("2 pairs", (0.1, 2)),
    ]


def _mde_normal(sd, n):
    from scipy import stats

    return (stats.norm.ppf(0.975) + stats.norm.ppf(0.8)) * sd / math.sqrt(n)


def _mde_t(alpha_tail, power):
    from scipy import stats

    return lambda sd, n: (
        (stats.t.ppf(1 - alpha_tail, n - 1) + stats.t.ppf(power, n - 1)) * sd / math.sqrt(n)
    )


def _holm_count(p_values, alpha=0.05):
    return sum(stats.holm(list(p_values), alpha))


def _bonferroni_count(p_values, alpha=0.05):
    return sum(p < alpha / len(p_values) for p in p_values)


def _no_stop_count(p_values, alpha=0.05):
    return sum(
        p < t for p, t in zip(p_values, stats.holm_thresholds(list(p_values), alpha), strict=True)
    )


def _holm_cases(_gen):
    return [
        Case("three clear", ([0.001, 0.004, 0.03],)),
        Case("stops at the second", ([0.0158, 0.0456, 0.0254],)),
        Case("a later p under its own level", ([0.012, 0.03, 0.04, 0.011],)),
        Case("none", ([0.2, 0.5],)),
        Case("one test", ([0.04],)),
        Case("unsorted, five", ([0.3, 0.009, 0.011, 0.0001, 0.02],)),
    ]


def _tost_cases(_gen):
    return [
        Case("inside the margin", (0.002, 0.003, 20, 0.01)),
        Case("SiLU at 12,000 steps", (-0.0008, 0.0038, 15, 0.01)),
        Case("negative, near the edge", (-0.007, 0.002, 12, 0.01)),
        Case("outside", (0.015, 0.004, 8, 0.01)),
        Case("two pairs", (0.0, 0.01, 2, 0.05)),
    ]


def _tost_min(mean, se, n, margin):
    from scipy import stats as sps

    return min(sps.t.sf((mean + margin) / se, n - 1), sps.t.cdf((mean - margin) / se, n - 1))


def _tost_normal(mean, se, n, margin):
    from scipy import stats as sps

    return max(sps.norm.sf((mean + margin) / se), sps.norm.cdf((mean - margin) / se))


def _tost_two_sided(mean, se, n, margin):
    return min(1.0, 2 * stats.equivalence_p(mean, se, n, margin))


register(
    Exercise(
        "paired_t",
        5,
        "paired_t(a, b) -> float",
        "Student's t for a paired comparison of per-seed results a and b (lists of floats, "
        "same "
        "seeds): the mean of a − b over its standard error (sample sd with n − 1, over √n).",
        lambda a, b: stats.paired_difference(a, b).t,
        _paired_t_cases,
        (
            Mistake(
                "population standard deviation (divide by n); the sample sd divides by n − 1.",
                lambda a, b: (
                    lambda d: (
                        (sum(d) / len(d))
                        / (
                            math.sqrt(sum((x - sum(d) / len(d)) ** 2 for x in d) / len(d))
                            / math.sqrt(len(d))
                        )
                    )
                )([x - y for x, y in zip(a, b, strict=True)]),
            ),
            Mistake(
                "not paired: the seeds pair the runs, so test the differences a_i − b_i, not "
                "two independent samples.",
                lambda a, b: (
                    (sum(a) / len(a) - sum(b) / len(b))
                    / math.sqrt(
                        torch.tensor(a).var().item() / len(a)
                        + torch.tensor(b).var().item() / len(b)
                    )
                ),
            ),
        ),
    ),
    Exercise(
        "minimum_detectable_effect",
        5,
        "minimum_detectable_effect(sd, n) -> float",
        "The smallest true mean difference that a two-sided paired t-test at level 0.05 on n "
        "pairs detects with probability 0.8, when the paired differences have standard "
        "deviation sd (same units as sd). Use Student-t quantiles with n − 1 degrees of freedom "
        "(scipy.stats.t.ppf).",
        lambda sd, n: stats.minimum_detectable_effect(sd, n),
        _mde_cases,
        (
            Mistake(
                "normal quantiles (1.96 + 0.84): with few pairs the t distribution's heavier "
                "tails make the detectable effect larger; use t quantiles with n − 1 degrees of "
                "freedom.",
                _mde_normal,
            ),
            Mistake(
                "one-sided level: a two-sided test at 0.05 puts 0.025 in each tail, so the "
                "critical value is the 0.975 quantile.",
                _mde_t(0.05, 0.8),
            ),
            Mistake(
                "the power quantile was subtracted or left out: the test statistic's centre must "
                "sit t_{0.8} above the critical value, so the two quantiles add.",
                _mde_t(0.025, 0.5),
            ),
            Mistake(
                "the spread of one difference was used, not of the mean: divide sd by √n.",
                lambda sd, n: _mde_t(0.025, 0.8)(sd, n) * math.sqrt(n),
            ),
        ),
    ),
    Exercise(
        "holm_rejections",
        5,
        "holm_rejections(p_values, alpha=0.05) -> int",
        "How many of the hypotheses with these p-values (a list, any order) Holm's step-down "
        "procedure rejects at family-wise level alpha: sort the p-values, hold the k-th smallest "
        "(k = 1, 2, ...) of m to alpha / (m - k + 1), and stop at the first that misses its level.",
        _holm_count,
        _holm_cases,
        (
            Mistake(
                "the procedure did not stop: once one p-value misses its level, every larger one "
                "is kept too, even if it lies below its own level.",
                _no_stop_count,
            ),
            Mistake(
                "this is Bonferroni's correction (every p against alpha / m): Holm's levels grow "
                "to alpha / (m - 1), ..., alpha as the smaller p-values are rejected.",
                _bonferroni_count,
            ),
            Mistake(
                "no correction: with several tests, each at alpha, the chance of at least one "
                "false rejection grows with their number.",
                lambda p_values, alpha=0.05: sum(p < alpha for p in p_values),
            ),
        ),
    ),
    Exercise(
        "tost_p",
        5,
        "tost_p(mean, se, n, margin) -> float",
        "The p-value of the equivalence test (two one-sided t-tests, n - 1 degrees of freedom) "
        "that a mean paired difference with standard error se over n pairs lies inside "
        "(-margin, +margin): the larger of the p-values against 'mean <= -margin' and against "
        "'mean >= +margin'.",
        lambda mean, se, n, margin: stats.equivalence_p(mean, se, n, margin),
        _tost_cases,
        (
            Mistake(
                "the smaller of the two one-sided p-values: equivalence needs BOTH one-sided "
                "tests to reject, so its p-value is the larger one.",
                _tost_min,
            ),
            Mistake(
                "normal tails: with few pairs use Student's t with n - 1 degrees of freedom.",
                _tost_normal,
            ),
            Mistake(
                "doubled: each one-sided test runs at the full level alpha (that is why a 90 % "
                "interval, not a 95 % one, decides it), so nothing is doubled.",
                _tost_two_sided,
            ),
        ),
    ),
)
