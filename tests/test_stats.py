"""kvattn.stats against scipy's own tests and textbook values."""

import math

import numpy as np
import pytest
import scipy.stats
import torch

from kvattn import stats


def test_paired_difference_matches_scipy_and_the_textbook():
    """The paired t-test agrees with scipy.stats.ttest_rel, and its p-value is 0.05 at the
    textbook critical value."""
    a, b = [1.0, 2.0, 3.0, 4.0], [0.5, 1.0, 2.5, 3.0]  # differences .5 1 .5 1
    d = stats.paired_difference(a, b)
    ref = scipy.stats.ttest_rel(a, b)
    assert d.mean == pytest.approx(0.75)
    assert d.sd == pytest.approx(0.28867513)
    assert d.se == pytest.approx(0.28867513 / 2)
    assert d.t == pytest.approx(ref.statistic, rel=1e-12)
    assert d.p == pytest.approx(ref.pvalue, rel=1e-10)
    assert d.n == 4 and 0 < d.p < 0.05
    edge = stats.paired_difference([1.0, 2.0, 3.0, 4.0], [0.0, 0.0, 0.0, 0.0])
    assert edge.p == pytest.approx(scipy.stats.ttest_1samp([1, 2, 3, 4], 0).pvalue, rel=1e-10)


def test_paired_difference_with_equal_differences():
    """se = 0: t is ±inf with p = 0 for a non-zero mean, and 0 with p = 1 for none."""
    same = stats.paired_difference([2.0, 3.0], [1.0, 2.0])
    assert same.t == math.inf and same.p == 0.0
    none = stats.paired_difference([2.0, 3.0], [2.0, 3.0])
    assert none.t == 0.0 and none.p == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("a", "b", "message"),
    [
        ([1.0], [2.0], "same length >= 2, got 1 and 1"),
        ([1.0, 2.0], [1.0], "same length >= 2, got 2 and 1"),
        ([1.0, float("nan")], [1.0, 2.0], r"a\[1\] = nan"),
        ([1.0, 2.0], [True, 2.0], r"b\[0\] = True"),
    ],
)
def test_paired_difference_refuses_bad_input(a, b, message):
    with pytest.raises(ValueError, match=message):
        stats.paired_difference(a, b)


def test_t_interval_and_equivalence_match_scipy():
    d = np.array([0.01, -0.02, 0.015, 0.005, -0.01])
    mean, se, n = d.mean(), d.std(ddof=1) / math.sqrt(5), 5
    low, high = stats.t_interval(mean, se, n, 0.9)
    ref = scipy.stats.t.interval(0.9, n - 1, loc=mean, scale=se)
    assert (low, high) == pytest.approx(ref, rel=1e-12)
    above = scipy.stats.ttest_1samp(d, -0.05, alternative="greater").pvalue
    below = scipy.stats.ttest_1samp(d, 0.05, alternative="less").pvalue
    assert stats.equivalence_p(mean, se, n, 0.05) == pytest.approx(max(above, below), rel=1e-9)
    assert stats.equivalence_p(0.01, 0.0, 5, 0.05) == 0.0
    assert stats.equivalence_p(0.06, 0.0, 5, 0.05) == 1.0
    with pytest.raises(ValueError, match="level must lie in"):
        stats.t_interval(0.0, 1.0, 5, 1.0)
    with pytest.raises(ValueError, match="margin must be a positive finite"):
        stats.equivalence_p(0.0, 1.0, 5, -0.1)


def test_spearman_gives_ties_their_mid_rank():
    x = torch.tensor([0.3, -1.2, 2.0, 0.7], dtype=torch.float64)
    assert stats.spearman(x, x.exp()) == pytest.approx(1.0)
    assert stats.spearman(x, -(x**3)) == pytest.approx(-1.0)
    # ranks with ties: a = (1, 2.5, 2.5, 4), b = (1, 2, 3, 4): Pearson r of the ranks
    ra, rb = np.array([1, 2.5, 2.5, 4]), np.array([1, 2, 3, 4])
    expected = np.corrcoef(ra, rb)[0, 1]
    assert stats.spearman([1.0, 2.0, 2.0, 3.0], [1.0, 2.0, 3.0, 4.0]) == pytest.approx(expected)
    # the ordinal ranks that ignore ties would give 1 here
    assert expected < 0.95
    with pytest.raises(ValueError, match="same length >= 2"):
        stats.spearman([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="a must be a 1-D sequence of finite numbers"):
        stats.spearman([1.0, float("inf")], [1.0, 2.0])


@pytest.mark.parametrize("fn", [stats.holm, stats.holm_thresholds])
@pytest.mark.parametrize(
    "unordered", [{0.04, 0.01, 0.03}, frozenset({0.04, 0.01}), {0.1: 1}.keys()]
)
def test_holm_refuses_a_set_whose_order_the_caller_does_not_know(fn, unordered):
    """The verdicts come back in the order given; a set gives none the caller knows."""
    with pytest.raises(ValueError, match=r"p_values must be a sequence of numbers in a known"):
        fn(unordered)


@pytest.mark.parametrize(
    ("a", "b", "message"),
    [
        (None, [1.0, 2.0], r"^a must be a sequence of paired values .*got None"),
        ([1.0, 2.0], 3.0, r"^b must be a sequence of paired values .*got 3.0"),
        ({1.0, 2.0}, [1.0, 2.0], r"^a must be a sequence of paired values .* got a set"),
        ("12", [1.0, 2.0], r"^a must be a sequence of paired values"),
    ],
)
def test_paired_difference_names_what_is_not_a_list(a, b, message):
    with pytest.raises(ValueError, match=message):
        stats.paired_difference(a, b)


def test_paired_difference_names_differences_that_overflow_float64():
    """Finite inputs whose spread overflows are named as such, not as an sd of inf the caller
    never passed."""
    with pytest.raises(ValueError, match=r"the differences x − y overflow float64 .* 1e\+308"):
        stats.paired_difference([1e308, -1e308], [0.0, 0.0], names=("x", "y"))
    with pytest.raises(ValueError, match=r"overflow float64 \(their mean is inf"):
        stats.paired_difference([1e308, 1e308], [-1e308, -1e308])


@pytest.mark.parametrize(
    ("mean", "se", "n", "message"),
    [
        (0.1, -1.0, 5, r"se must be a finite number >= 0, got -1.0"),
        (0.1, math.inf, 5, r"se must be a finite number >= 0, got inf"),
        (float("nan"), 0.1, 5, r"mean must be a finite number, got nan"),
        ("0.1", 0.1, 5, r"mean must be a finite number, got '0.1'"),
        (0.1, 0.1, 1, r"n must be an int >= 2 \(pairs\), got 1"),
        (0.1, 0.1, 5.0, r"n must be an int >= 2 \(pairs\), got 5.0"),
    ],
)
def test_interval_and_equivalence_refuse_a_summary_no_t_test_gives(mean, se, n, message):
    """se < 0 used to give a reversed interval (low > high) without complaint."""
    for call in (
        lambda: stats.t_interval(mean, se, n),
        lambda: stats.equivalence_p(mean, se, n, 0.05),
        lambda: stats.check_paired_summary(mean, se, n),
    ):
        with pytest.raises(ValueError, match=message):
            call()
    assert stats.check_paired_summary(0.1, 0.0, 2) is None


def test_dose_verdict_is_the_least_squares_line_read_by_the_plans_rule():
    """The slope and its standard error are scipy's linregress; the fall from the lowest dose to
    the highest is −slope × span with one-sided t bounds; the verdict follows the rule."""
    from scipy.stats import linregress, t

    from kvattn.stats import dose_verdict

    x = [2, 2, 2, 4, 4, 4, 8, 8, 8]
    y = [-1.0, -1.3, -0.8, -1.6, -2.0, -1.5, -3.1, -2.6, -3.4]
    reading = dose_verdict(x, y, margin=1.0)
    fit = linregress(x, y)
    assert reading.slope == pytest.approx(fit.slope) and reading.se == pytest.approx(fit.stderr)
    assert reading.drop == pytest.approx(-6 * fit.slope)
    half = t.ppf(0.95, 7) * fit.stderr * 6
    assert reading.drop_lower == pytest.approx(reading.drop - half)
    assert reading.verdict == "supported"
    flat = [-1.0, -1.3, -0.8, -1.1, -0.9, -1.2, -1.0, -1.1, -0.9]
    assert dose_verdict(x, flat, margin=1.0).verdict == "refuted"
    noisy = [-1.0, 0.5, -2.5, -1.6, 0.3, -2.9, -2.1, -0.4, -3.4]
    assert dose_verdict(x, noisy, margin=1.0).verdict == "not resolved"
    # rising, by a lot: not supported, and refuted (the fall is surely below the margin)
    assert dose_verdict(x, [-v for v in y], margin=1.0).verdict == "refuted"


def test_dose_verdict_refuses_what_it_cannot_read():
    from kvattn.stats import dose_verdict

    with pytest.raises(ValueError, match="same length"):
        dose_verdict([2, 4], [1.0, 2.0], 1.0)
    with pytest.raises(ValueError, match="finite"):
        dose_verdict([2, 4, 8], [1.0, float("nan"), 2.0], 1.0)
    with pytest.raises(ValueError, match="distinct"):
        dose_verdict([2, 2, 2], [1.0, 2.0, 3.0], 1.0)
    with pytest.raises(ValueError, match="margin"):
        dose_verdict([2, 4, 8], [1.0, 2.0, 3.0], 0)


def test_dose_power_grows_with_seeds_and_matches_the_normal_theory_at_large_n():
    """More seeds per dose raise the power to support a true fall and to refute none; with a
    fall far beyond the margin support is near certain; the design of the depth plan (3 seeds,
    sd 0.45) gives the plan's 0.91 and 0.80."""
    from kvattn.stats import MAX_SIMULATIONS, dose_power

    two = dose_power([2, 4, 8], 2, 0.45, 1.5, 1.0)
    three = dose_power([2, 4, 8], 3, 0.45, 1.5, 1.0)
    assert three["supported"] > two["supported"]
    assert sum(three.values()) == pytest.approx(1.0)
    assert three["supported"] == pytest.approx(0.91, abs=0.01)
    assert dose_power([2, 4, 8], 3, 0.45, 0.0, 1.0)["refuted"] == pytest.approx(0.80, abs=0.01)
    assert dose_power([2, 4, 8], 3, 0.1, 5.0, 1.0)["supported"] > 0.999
    with pytest.raises(ValueError, match="simulations"):
        dose_power([2, 4, 8], 3, 0.45, 1.5, 1.0, simulations=MAX_SIMULATIONS + 1)
    with pytest.raises(ValueError, match="sd"):
        dose_power([2, 4, 8], 3, 0.0, 1.5, 1.0)
