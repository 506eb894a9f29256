"""kvattn.course.contrast_report: the powers agree with simulation, the verdicts follow Holm's
procedure over the right family, and the tables are what chapter 5 prints."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from kvattn import stats
from kvattn.course import contrast_report as R
from kvattn.experiments import Contrast, ContrastResult, DoseResponse, paired_contrast


def _simulated_tost(sd, n, margin, alpha, delta, draws, rng):
    """Each draw: the mean and sd of n normal differences, and whether TOST passes."""
    mean = rng.normal(delta, sd / np.sqrt(n), draws)
    se = sd * np.sqrt(rng.chisquare(n - 1, draws) / (n - 1)) / np.sqrt(n)
    p = np.maximum(sps.t.sf((mean + margin) / se, n - 1), sps.t.cdf((mean - margin) / se, n - 1))
    return p


def test_t_power_is_alpha_at_zero_and_about_the_power_at_the_mde():
    assert R.t_power(0.015, 36, 0.0) == pytest.approx(0.05, abs=1e-12)
    mde = stats.minimum_detectable_effect(0.015, 36)
    assert R.t_power(0.015, 36, mde) == pytest.approx(0.8, abs=0.01)
    assert R.t_power(0.015, 36, mde) == pytest.approx(R.t_power(0.015, 36, -mde))
    assert R.t_power(0.015, 8, 0.01) < R.t_power(0.015, 36, 0.01)


@pytest.mark.slow  # a simulation of 400,000 designs each
@pytest.mark.parametrize(
    ("sd", "n", "delta"), [(0.0127, 15, 0.0), (0.0165, 12, 0.0), (0.01, 20, 0.004)]
)
def test_equivalence_power_agrees_with_simulation(sd, n, delta):
    rng = np.random.default_rng(1)
    p = _simulated_tost(sd, n, 0.01, 0.05, delta, 400_000, rng)
    assert R.equivalence_power(sd, n, 0.01, 0.05, delta) == pytest.approx(
        (p < 0.05).mean(), abs=0.004
    )


def test_equivalence_power_limits():
    assert R.equivalence_power(1.0, 10) == pytest.approx(0.0, abs=1e-9)  # hopeless spread
    assert R.equivalence_power(1e-4, 10) == pytest.approx(1.0, abs=1e-6)  # tiny spread
    assert R.equivalence_power(0.01, 40) > R.equivalence_power(0.01, 10)
    # a true difference at the margin passes at most alpha of the time
    assert R.equivalence_power(0.001, 50, delta=0.01) == pytest.approx(0.05, abs=0.002)


@pytest.mark.slow  # a simulation of 300,000 tests
def test_family_power_agrees_with_holm_on_simulated_p_values():
    sds, ns = [0.0149, 0.0165, 0.0146], [15, 12, 13]
    rng = np.random.default_rng(2)
    p = np.stack(
        [_simulated_tost(s, n, 0.01, 0.05, 0.0, 100_000, rng) for s, n in zip(sds, ns, strict=True)]
    )
    order = np.sort(p, axis=0)
    passed = (order[0] < 0.05 / 3) & (order[1] < 0.05 / 2) & (order[2] < 0.05)
    assert R.family_equivalence_power(sds, ns) == pytest.approx(passed.mean(), abs=0.004)
    # one test: the family is the test
    assert R.family_equivalence_power([0.0127], [15]) == pytest.approx(
        R.equivalence_power(0.0127, 15)
    )
    with pytest.raises(ValueError, match="one n per sd"):
        R.family_equivalence_power([0.01, 0.02], [10])


def test_bad_designs_are_refused_before_any_work():
    with pytest.raises(ValueError, match="sd"):
        R.t_power(0.0, 10, 0.01)
    with pytest.raises(ValueError, match="n must"):
        R.equivalence_power(0.01, 1)
    with pytest.raises(ValueError, match="margin"):
        R.equivalence_power(0.01, 10, margin=-1.0)
    with pytest.raises(ValueError, match="delta"):
        R.t_power(0.01, 10, float("nan"))


def _contrast(act, diffs):
    return paired_contrast(act, [1.0 + d for d in diffs], [1.0] * len(diffs), 0.05, 0.8)


def test_verdicts_read_both_families_and_say_not_resolved_when_neither_rejects():
    rng = np.random.default_rng(3)
    clear = _contrast("relu", list(0.02 + 0.002 * rng.standard_normal(30)))
    small = _contrast("gelu", list(0.001 * rng.standard_normal(30)))
    vague = _contrast("silu", list(0.03 * rng.standard_normal(6)))
    read = R.verdicts([clear, small, vague])
    assert read["relu"].verdict == "gated lower" and read["relu"].test == "t"
    assert read["gelu"].verdict == "within ±0.01" and read["gelu"].test == "TOST"
    assert read["silu"].verdict == "not resolved" and read["silu"].test == "TOST"
    assert read["silu"].power == pytest.approx(R.equivalence_power(vague.sd, vague.n))
    assert read["relu"].power == pytest.approx(R.t_power(clear.sd, clear.n, 0.01))
    with pytest.raises(ValueError, match="one contrast per σ"):
        R.verdicts([clear, clear])


def test_holm_family_decides_a_knife_edge():
    # two equivalence p-values of 0.03: each passes alone, neither after Holm over the two
    def at_p(act, target):
        n, se = 20, 0.004
        # solve for the mean whose TOST p is the target
        mean = 0.01 - se * sps.t.ppf(1 - target, n - 1)
        return Contrast(act, mean, se, mean / se, 0.5, n, 0.0)

    a, b = at_p("silu", 0.03), at_p("gelu", 0.03)
    assert a.equivalence_p(0.01) == pytest.approx(0.03)
    assert R.verdicts([a])["silu"].verdict == "within ±0.01"
    assert {v.verdict for v in R.verdicts([a, b]).values()} == {"not resolved"}


def test_shipped_results_table():
    from kvattn.experiments import load_shipped

    flat = [
        load_shipped(f"symmetry_contrast_{a}_12000").contrast.contrasts[0]
        for a in ("silu", "gelu", "relu")
    ]
    rows = R.results_rows({12000: flat})
    assert [r["verdict"] for r in rows] == ["within ±0.01", "not resolved", "not resolved"]
    assert [r["steps"] for r in rows] == [12000] * 3
    # the p of the test each verdict uses, before Holm: Tool 3's example in chapter 5
    assert [r["test"] for r in rows] == ["TOST"] * 3
    assert [r["p"] for r in rows] == ["0.016", "0.046", "0.025"]
    assert [r["p"] for r in rows] == [f"{c.equivalence_p(R.MARGIN):.2g}" for c in flat]
    text = R.format_table(rows)
    assert max(len(line) for line in text.splitlines()) <= R.MAX_WIDTH


def _run(seeds, lrs, finals, steps=100):
    kinds = ("silu symmetric", "silu gated")
    return ContrastResult(
        design={"test_seeds": seeds, "steps": steps},
        selection={},
        chosen_lr=dict(zip(kinds, lrs, strict=True)),
        eval_steps=[steps - 1],
        final=dict(zip(kinds, finals, strict=True)),
        curves={},
        late_drop={},
        n_parameters={},
    )


def test_rate_pairs_cross_every_rate_of_each_kind():
    a = _run([1, 2, 3], (0.01, 0.01), ([3.0, 3.1, 3.2], [2.9, 3.0, 3.0]))
    b = _run([1, 2, 3], (0.005, 0.007), ([3.1, 3.0, 3.3], [2.8, 3.1, 3.05]))
    pairs = R.rate_pairs([a, b])
    assert set(pairs) == {(0.005, 0.007), (0.005, 0.01), (0.01, 0.007), (0.01, 0.01)}
    assert pairs[(0.005, 0.01)] == paired_contrast(
        "silu", [3.1, 3.0, 3.3], [2.9, 3.0, 3.0], 0.05, 0.8
    )
    rows = R.rate_rows({100: [a, b]})
    assert (rows[0]["symmetric"], rows[0]["gated"]) == ("0.005", "0.007")
    with pytest.raises(ValueError, match="share their test seeds"):
        R.rate_pairs([a, _run([4, 5, 6], (0.01, 0.01), ([3.0] * 3, [3.0] * 3))])
    with pytest.raises(ValueError, match="at least one run"):
        R.rate_pairs([])


def test_dose_rows_pair_each_beta_with_the_next():
    dose = DoseResponse(
        design={},
        betas=[0.5, 1.0],
        seeds=[0, 1, 2],
        final=[[2.0, 2.1, 2.2], [1.9, 2.05, 2.1]],
        violation=[[0.2, 0.3, 0.4], [1.0, 1.1, 1.2]],
        gaussian=[0.27, 0.6],
        slope=0.0,
        slope_se=0.0,
        slope_t=0.0,
        slope_p=1.0,
    )
    rows = R.dose_rows(dose)
    assert rows[0]["change"] == f"{(-0.1 - 0.05 - 0.1) / 3:+.4f}" and rows[1]["change"] == ""
    assert rows[0]["trained"] == "0.300" and rows[1]["loss"] == f"{(1.9 + 2.05 + 2.1) / 3:.4f}"


def test_format_table_aligns_and_refuses_wide_or_ragged_rows():
    text = R.format_table([{"a": "x", "b": "+1.0"}, {"a": "long", "b": "-10.0"}])
    assert text.splitlines() == ["a         b", "x      +1.0", "long  -10.0"]
    with pytest.raises(ValueError, match="wide"):
        R.format_table([{"a": "x" * 100}])
    with pytest.raises(ValueError, match="same keys"):
        R.format_table([{"a": 1}, {"b": 2}])
    with pytest.raises(ValueError, match="no rows"):
        R.format_table([])


def test_contrast_rows_show_each_contrast_unjudged():
    c = _contrast("silu", [0.01, 0.02, 0.015, 0.012])
    (row,) = R.contrast_rows([c])
    lo, hi = c.interval(0.95)
    assert row == dict(
        σ="silu",
        pairs=4,
        estimate=f"{c.mean:+.4f}",
        interval=f"[{lo:+.4f}, {hi:+.4f}]",
        p=f"{c.p:.2g}",
        MDE=f"{c.mde:.4f}",
    )
