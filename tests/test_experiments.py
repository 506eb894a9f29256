"""kvattn.experiments: the symmetric-vs-gated design and its statistics."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import numpy as np
import pytest
import scipy.stats

from kvattn import experiments, stats
from kvattn.experiments import paired_contrast
from kvattn.stats import minimum_detectable_effect


@pytest.mark.slow
def test_minimum_detectable_effect_has_the_stated_power():
    """Simulate the design: with true effect = MDE and the given sd, a paired t-test at level
    0.05 rejects in about 80 % of experiments (power), and in about 5 % with no effect."""
    rng = np.random.default_rng(0)
    n, sd = 8, 0.02
    mde = minimum_detectable_effect(sd, n)
    for effect, expected in ((mde, 0.8), (0.0, 0.05)):
        rejections = 0
        trials = 4000
        for _ in range(trials):
            d = rng.normal(effect, sd, n)
            c = paired_contrast("silu", list(d), [0.0] * n, 0.05, 0.8)
            rejections += c.p < 0.05
        # binomial standard error of the rejection rate, 4 of them
        assert (
            abs(rejections / trials - expected)
            < 4 * math.sqrt(expected * (1 - expected) / trials) + 0.02
        )


def test_paired_contrast_matches_scipy_ttest():

    a = [3.10, 3.05, 3.12, 3.08, 3.11]
    b = [3.07, 3.06, 3.09, 3.02, 3.10]
    c = paired_contrast("gelu", a, b, 0.05, 0.8)
    ref = scipy.stats.ttest_rel(a, b)
    assert c.t == pytest.approx(ref.statistic) and c.p == pytest.approx(ref.pvalue)
    assert c.mean == pytest.approx(np.mean(np.subtract(a, b)))
    assert c.n == 5 and c.mde > abs(c.mean) > 0


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(sd=0.1, n=1), "n must be an int >= 2"),
        (dict(sd=-1.0, n=4), "sd must be finite"),
        (dict(sd=0.1, n=4, alpha=1.5), "alpha and power"),
    ],
)
def test_mde_refuses_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        minimum_detectable_effect(**kwargs)


def test_design_refuses_shared_seeds_and_unknown_sigma(small_text):
    from kvattn.data import tokenize

    tokens = tokenize(small_text, vocab_size=512)
    with pytest.raises(ValueError, match="selection and test seeds must differ"):
        experiments.symmetry_contrast(tokens, steps=2, select_seeds=[0], test_seeds=[0, 1])
    with pytest.raises(ValueError, match="act must be one of"):
        experiments.symmetry_contrast(tokens, acts=["tanh"], steps=2)
    with pytest.raises(ValueError, match="at least 2 test seeds"):
        experiments.symmetry_contrast(tokens, steps=2, test_seeds=[0])
    with pytest.raises(ValueError, match="needs at least one selection seed"):
        experiments.symmetry_contrast(tokens, steps=2, lrs=[1e-3, 1e-2], select_seeds=[])


def test_a_micro_experiment_runs_the_whole_design(small_text):
    from kvattn.data import tokenize

    tokens = tokenize(small_text, vocab_size=512)
    r = experiments.symmetry_contrast(
        tokens, acts=["silu"], d_model=16, n_heads=2, block_size=16, steps=6, lrs=[1e-3, 1e-2],
        select_seeds=[100], test_seeds=[0, 1], batch_size=4, eval_every=2, progress=False,
    )  # fmt: skip
    names = ["silu symmetric", "silu gated", "bilinear", "key_value"]
    assert list(r.final) == names and all(len(v) == 2 for v in r.final.values())
    assert r.eval_steps == [1, 3, 5]  # 0-based steps after which the loss was measured
    for name in names:
        assert set(r.selection[name]) == {"0.001", "0.01"}
        lr = r.chosen_lr[name]
        assert sum(r.selection[name][f"{lr:g}"]) == min(sum(v) for v in r.selection[name].values())
    # matched budgets: the four layers' parameter counts differ only by rounding of the width
    counts = list(r.n_parameters.values())
    assert max(counts) - min(counts) < 0.02 * max(counts)
    assert set(r.lr_at_edge) == set(names)  # a two-rate grid: every choice is at an edge
    (c,) = r.contrasts
    assert c.act == "silu" and c.n == 2
    assert c.mean == pytest.approx(
        np.mean(np.subtract(r.final["silu symmetric"], r.final["silu gated"]))
    )
    json.dumps(r.to_dict())


def test_pairs_needed_is_the_first_design_below_the_target():
    n = stats.pairs_needed(0.0155, 0.01)
    assert minimum_detectable_effect(0.0155, n) < 0.01 <= minimum_detectable_effect(0.0155, n - 1)
    assert stats.pairs_needed(0.0, 0.01) == 2
    with pytest.raises(ValueError, match="target must be a positive finite effect"):
        stats.pairs_needed(0.01, 0.0)
    with pytest.raises(ValueError, match="100,000 pairs"):
        stats.pairs_needed(10.0, 1e-4)


def test_holm_steps_down_and_stops_at_the_first_failure():
    # sorted: 0.001 < 0.05/3, 0.02 < 0.05/2, 0.04 < 0.05: all reject, in the given order
    assert stats.holm([0.04, 0.001, 0.02]) == [True, True, True]
    # 0.03 > 0.05/2 stops the procedure: 0.04 is not rejected although it is below 0.05
    assert stats.holm([0.001, 0.03, 0.04]) == [True, False, False]
    assert stats.holm([0.2]) == [False] and stats.holm([]) == []


def test_contrast_sd_is_the_spread_of_the_differences():
    c = paired_contrast("silu", [1.0, 2.0, 4.0], [0.0, 0.5, 1.0], 0.05, 0.8)
    assert c.sd == pytest.approx(float(np.std([1.0, 1.5, 3.0], ddof=1)))


def test_each_kind_can_have_a_grid_of_its_own(small_text):
    """A follow-up gives every kind the rate an earlier run chose for it: a mapping ``lrs``.
    One rate per kind means no selection; the runs equal those of a shared grid at that rate."""
    from kvattn.data import tokenize

    tokens = tokenize(small_text, vocab_size=512)
    kwargs = dict(
        acts=["silu"], references=False, d_model=16, n_heads=2, block_size=16, steps=4,
        select_seeds=[100], test_seeds=[0, 1], batch_size=4, progress=False,
    )  # fmt: skip
    own = {"silu symmetric": [5e-3], "silu gated": [7e-3]}
    r = experiments.symmetry_contrast(tokens, lrs=own, **kwargs)
    assert r.chosen_lr == {"silu symmetric": 5e-3, "silu gated": 7e-3}
    assert r.design["lrs"] == own and r.design["select_seeds"] == [] and r.lr_at_edge == []
    assert all(sel == {} for sel in r.selection.values())
    shared = experiments.symmetry_contrast(tokens, lrs=[7e-3], **kwargs)
    assert shared.final["silu gated"] == r.final["silu gated"]
    assert shared.final["silu symmetric"] != r.final["silu symmetric"]  # another rate
    assert experiments.ContrastResult.from_dict(json.loads(json.dumps(r.to_dict()))) == r
    # a kind with a grid chooses from it; the edge is judged on each kind's own grid
    mixed = experiments.symmetry_contrast(
        tokens, lrs={"silu symmetric": [1e-3, 1e-2], "silu gated": [7e-3]}, **kwargs
    )
    assert set(mixed.selection["silu symmetric"]) == {"0.001", "0.01"}
    assert mixed.selection["silu gated"] == {}  # one rate: nothing to choose for it
    assert mixed.lr_at_edge == ["silu symmetric"]
    with pytest.raises(ValueError, match="lrs names the kinds"):
        experiments.symmetry_contrast(tokens, lrs={"silu gated": [1e-2]}, **kwargs)
    with pytest.raises(ValueError, match="every kind needs at least one rate"):
        experiments.symmetry_contrast(
            tokens, lrs={"silu symmetric": [], "silu gated": [1e-2]}, **kwargs
        )


@pytest.mark.slow
def test_workers_give_the_same_results_as_one_process(small_text):
    """Every run is seeded, so training kinds in two processes changes nothing."""
    from kvattn.data import tokenize

    tokens = tokenize(small_text, vocab_size=512)
    kwargs = dict(
        acts=["silu"], references=False, d_model=16, n_heads=2, block_size=16, steps=4,
        lrs=[1e-2], select_seeds=[100], test_seeds=[0, 1], batch_size=4, progress=False,
    )  # fmt: skip
    one = experiments.symmetry_contrast(tokens, **kwargs)
    two = experiments.symmetry_contrast(tokens, workers=2, **kwargs)
    assert one.final == two.final and one.curves == two.curves
    # one rate: nothing to choose, so no selection runs and no selection seeds recorded
    assert one.selection == {"silu symmetric": {}, "silu gated": {}}
    assert one.design["select_seeds"] == [] and one.chosen_lr["silu gated"] == 1e-2
    with pytest.raises(ValueError, match="workers must be an int >= 1"):
        experiments.symmetry_contrast(tokens, workers=0, **kwargs)


def test_dose_response_measures_each_trained_layer_and_summarises_paired_slopes(small_text):
    from kvattn import symmetry
    from kvattn.data import tokenize

    tokens = tokenize(small_text, vocab_size=512)
    r = experiments.swish_beta_dose_response(
        tokens, betas=[0.05, 1.0, 20.0], seeds=[0, 1, 2], steps=6, lr=1e-2, d_model=16,
        n_heads=2, block_size=16, batch_size=4, progress=False,
    )  # fmt: skip
    assert np.shape(r.final) == np.shape(r.violation) == (3, 3)
    # The Gaussian violation rises with β from near 0 (σ_β(z) → z/2) towards ReLU's 1.
    assert r.gaussian == sorted(r.gaussian) and r.gaussian[0] < 0.01 and r.gaussian[-1] > 0.9
    assert r.gaussian[1] == pytest.approx(symmetry.exchange_violation("silu"))
    # A nearly linear σ is nearly exchange-symmetric on any inputs, trained or not.
    assert all(v < 0.01 for v in r.violation[0]) and all(v > 0.1 for v in r.violation[-1])
    # The summary is the mean of per-seed least-squares slopes of loss on violation.
    slopes = [
        np.polyfit(np.array(r.violation)[:, s], np.array(r.final)[:, s], 1)[0] for s in range(3)
    ]
    assert r.slope == pytest.approx(np.mean(slopes))
    assert r.slope_se == pytest.approx(np.std(slopes, ddof=1) / np.sqrt(3))
    json.dumps(r.to_dict())
    with pytest.raises(ValueError, match="every β must be a positive number"):
        experiments.swish_beta_dose_response(tokens, betas=[0.0, 1.0], steps=2, lr=1e-2)
    with pytest.raises(ValueError, match="at least 2 distinct β"):
        experiments.swish_beta_dose_response(tokens, betas=[1.0], steps=2, lr=1e-2)


def test_contrast_interval_is_the_t_interval_and_matches_the_p_value():
    c = paired_contrast("silu", [3.0, 3.1, 3.3, 3.2], [2.9, 3.05, 3.1, 3.2], 0.05, 0.8)
    lo, hi = c.interval(0.95)
    assert (lo + hi) / 2 == pytest.approx(c.mean)
    assert (hi - lo) / 2 == pytest.approx(3.182446305284263 * c.se)  # t_{0.975, 3}
    # the 1 − p interval has 0 on its edge: the duality of the test and the interval
    assert min(abs(x) for x in c.interval(1 - c.p)) == pytest.approx(0, abs=1e-12)
    with pytest.raises(ValueError, match="level must lie in"):
        c.interval(1.0)


def test_equivalence_p_is_the_larger_one_sided_t_test_and_matches_the_interval():
    sym, gated = [3.0, 3.1, 3.3, 3.2, 3.05], [2.9, 3.05, 3.1, 3.2, 3.0]
    c = paired_contrast("silu", sym, gated, 0.05, 0.8)
    d = np.array(sym) - np.array(gated)
    for margin in (0.05, 0.12, 0.2):
        above = scipy.stats.ttest_1samp(d, -margin, alternative="greater").pvalue
        below = scipy.stats.ttest_1samp(d, margin, alternative="less").pvalue
        assert c.equivalence_p(margin) == pytest.approx(max(above, below), rel=1e-9)
    # duality: p < alpha exactly when the 1 − 2·alpha interval lies inside ±margin; here the
    # mean 0.08 lies inside ±0.12 and ±0.2 but the interval only inside ±0.2
    lo, hi = c.interval(0.90)
    assert c.equivalence_p(0.12) > 0.05 and not (-0.12 < lo and hi < 0.12)
    assert c.equivalence_p(0.2) < 0.05 and -0.2 < lo and hi < 0.2
    assert c.equivalence_p(0.05) > 0.5  # the mean lies outside the margin
    with pytest.raises(ValueError, match="margin must be a positive finite number"):
        c.equivalence_p(0.0)


def test_holm_thresholds_step_down_from_alpha_over_m():
    # the smallest of three p-values is held to 0.05/3, the next to 0.05/2, the largest to 0.05
    assert stats.holm_thresholds([0.04, 0.001, 0.02]) == pytest.approx([0.05, 0.05 / 3, 0.025])
    assert stats.holm_thresholds([]) == []


@pytest.fixture(scope="module")
def tokens(small_text):
    from kvattn.data import tokenize

    return tokenize(small_text, vocab_size=512)


@pytest.fixture
def no_training(monkeypatch):
    """Fails the test on any training: a check that comes after it throws the work away."""

    def train_lm_seeds(*args, **kwargs):
        pytest.fail("trained before refusing the input")

    # each design looks train_lm_seeds up in its own module
    monkeypatch.setattr(experiments.contrast, "train_lm_seeds", train_lm_seeds)
    monkeypatch.setattr(experiments.dose, "train_lm_seeds", train_lm_seeds)


SMALL_CONTRAST = dict(
    acts=["silu"], references=False, d_model=16, n_heads=2, block_size=16, steps=4,
    lrs=[1e-3, 1e-2], select_seeds=[100], test_seeds=[0, 1], batch_size=4, progress=False,
)  # fmt: skip


@pytest.mark.parametrize(
    "change, match",
    [
        (dict(test_seeds=(0, 0)), r"test_seeds has duplicates \[0\]"),
        (dict(select_seeds=(100, 7, 100)), r"select_seeds has duplicates \[100\]"),
        (dict(test_seeds=[0]), "at least 2 test seeds"),
        (dict(test_seeds=[0, -1]), r"test_seeds must be ints >= 0, got \[0, -1\]"),
        (dict(test_seeds=[0, 1.0]), "test_seeds must be ints >= 0"),
        (dict(test_seeds="01"), "test_seeds must be a sequence of ints"),
        (dict(alpha=2.0), r"alpha must be a number in \(0, 1\), got 2.0"),
        (dict(alpha=0), "alpha must be a number in"),
        (dict(power=1.0), "power must be a number in"),
        (dict(power=True), "power must be a number in"),
        (dict(steps=0), "steps must be an int >= 1, got 0"),
        (dict(steps=2.5), "steps must be an int >= 1"),
        (
            dict(lrs=[0.0, 1e-2]),
            r"every rate of lrs must be a positive finite number below 10, got 0.0",
        ),
        # train refuses a rate of 10 or more, but only after the rates before it have trained
        (dict(lrs=[1e-3, 50.0]), r"positive finite number below 10, got 50.0 for silu symmetric"),
        (
            dict(lrs=[10.0]),
            r"every rate of lrs must be a positive finite number below 10, got 10.0",
        ),
        (dict(lrs=[float("nan")]), "every rate of lrs must be a positive finite number"),
        (dict(lrs="0.01"), "lrs must be a sequence of rates"),
        (dict(lrs=[1e-2, 3e-3, 1e-2]), r"silu symmetric.* has duplicates \['0.01'\]"),
        (
            dict(lrs={"silu symmetric": [1e-3], "silu gated": [-1.0]}),
            "every rate of lrs must be a positive finite number below 10, got -1.0",
        ),
        (
            dict(lrs={"silu symmetric": [1e-3], "silu gated": [1e-3, 12.0]}),
            "below 10, got 12.0 for silu gated",
        ),
        (dict(acts="silu"), "acts must be a sequence of σ names"),
        (dict(acts=["silu", "silu"]), r"acts has duplicates \['silu'\]"),
        (dict(acts=[]), "acts must name at least one σ"),
        (dict(references="yes"), "references must be True or False"),
        (dict(d_model=0), "d_model must be an int >= 1, got 0"),
        (dict(n_layers=1.0), "n_layers must be an int >= 1"),
        (dict(batch_size=0), "batch_size must be an int >= 1"),
        (dict(eval_every=0), "eval_every must be None or an int >= 1, got 0"),
        (dict(device="nonsense"), "device must name a torch device"),
        (dict(device="cuda:99"), "device 'cuda:99' is not available"),
        (dict(progress="no"), "progress must be True or False"),
        (dict(workers=0), "workers must be an int >= 1"),
        (dict(block_size=4000), r"block_size 4000 needs more than 4000 ids in tokens.val"),
    ],
)
def test_contrast_refuses_bad_input_before_any_training(tokens, no_training, change, match):
    with pytest.raises(ValueError, match=match):
        experiments.symmetry_contrast(tokens, **{**SMALL_CONTRAST, **change})


SMALL_DOSE = dict(
    betas=[0.5, 1.0], seeds=[0, 1], steps=4, lr=1e-2, d_model=16, n_heads=2, block_size=16,
    batch_size=4, progress=False,
)  # fmt: skip


def test_contrast_and_dose_response_refuse_what_is_not_token_data(no_training):
    with pytest.raises(TypeError, match=r"tokens must be a kvattn\.data\.TokenData, got str"):
        experiments.symmetry_contrast("some text", **SMALL_CONTRAST)
    with pytest.raises(TypeError, match=r"tokens must be a kvattn\.data\.TokenData, got str"):
        experiments.swish_beta_dose_response("some text", **SMALL_DOSE)


@pytest.mark.parametrize(
    "change, match",
    [
        (dict(seeds=(0, 1, 0)), r"seeds has duplicates \[0\]"),
        (dict(seeds=[0]), "at least 2 seeds"),
        (dict(seeds=[0, -1]), "seeds must be ints >= 0"),
        (dict(betas=(0.5, 0.5)), r"betas has duplicates \[0.5\]"),
        (dict(betas=(1, 1.0, 2.0)), r"betas has duplicates \[1.0\]"),
        (dict(betas=[0.5]), "at least 2 distinct β"),
        (dict(betas=[True, 2.0]), "every β must be a positive number"),
        (dict(betas=[0.0, 1.0]), "every β must be a positive number"),
        (dict(betas="12"), "betas must be a sequence of numbers"),
        # the same layer to float32 at every β: everything trained, then a slope of 0/0
        (
            dict(betas=[1e-30, 2e-30]),
            r"every β must lie in \[0.0001, 1000\] .*got \[1e-30, 2e-30\]",
        ),
        # σ_β(z) = z·sigmoid(βz) is NaN at z = 0 once βz overflows float32
        (dict(betas=[0.5, 1e308]), r"every β must lie in \[0.0001, 1000\] .*got \[0.5, 1e\+308\]"),
        (dict(betas=[0.5, 1000.5]), r"every β must lie in \[0.0001, 1000\]"),
        (dict(lr=50.0), "lr must be a positive finite number below 10, got 50.0"),
        (dict(steps=0), "steps must be an int >= 1"),
        (dict(lr=0.0), "lr must be a positive finite number below 10, got 0.0"),
        (dict(lr=float("inf")), "lr must be a positive finite number"),
        (dict(lr=True), "lr must be a positive finite number"),
        (dict(d_model=0), "d_model must be an int >= 1"),
        (dict(n_heads=3), "not divisible by n_heads=3"),
        (dict(batch_size=0), "batch_size must be an int >= 1"),
        (dict(device="nonsense"), "device must name a torch device"),
        (dict(progress="no"), "progress must be True or False"),
        (dict(workers=0), "workers must be an int >= 1"),
        (dict(block_size=4000), "block_size 4000 needs more than 4000 ids in tokens.val"),
    ],
)
def test_dose_response_refuses_bad_input_before_any_training(tokens, no_training, change, match):
    with pytest.raises(ValueError, match=match):
        experiments.swish_beta_dose_response(tokens, **{**SMALL_DOSE, **change})


def test_check_dose_design_is_the_dose_responses_own_check():
    """A caller that runs the contrast first checks the dose-response's design before it."""
    assert experiments.check_dose_design([0.25, 0.5, 1.0], [0, 1]) is None
    with pytest.raises(ValueError, match=r"at least 2 distinct β for a slope, got \[0.5\]"):
        experiments.check_dose_design([0.5], [0, 1])
    with pytest.raises(ValueError, match=r"betas has duplicates \[0.5\]"):
        experiments.check_dose_design([0.5, 0.5], [0, 1])
    with pytest.raises(ValueError, match=r"seeds has duplicates \[3\]"):
        experiments.check_dose_design([0.5, 1.0], [3, 3])
    low, high = experiments.BETA_RANGE
    assert experiments.check_dose_design([low, high], [0, 1]) is None
    with pytest.raises(ValueError, match=r"every β must lie in \[0.0001, 1000\]"):
        experiments.check_dose_design([low / 2, 1.0], [0, 1])


def test_check_contrast_design_is_the_contrasts_own_check():
    """A caller that settles a design before loading the corpus checks it as the contrast will."""
    design = dict(
        acts=["silu"], references=False, steps=4, lrs=[1e-3, 1e-2], select_seeds=[100],
        test_seeds=[0, 1],
    )  # fmt: skip
    assert experiments.check_contrast_design(**design) is None
    for change, match in (
        (dict(test_seeds=[0, 0]), r"test_seeds has duplicates \[0\]"),
        (dict(alpha=2.0), r"alpha must be a number in \(0, 1\), got 2.0"),
        (dict(steps=0), "steps must be an int >= 1, got 0"),
        (dict(lrs=[1e-2, 1e-2]), r"the grid of silu symmetric has duplicates \['0.01'\]"),
        (dict(select_seeds=[0]), r"selection and test seeds must differ, both have \[0\]"),
        (dict(lrs=[1e-3, 1e2]), r"positive finite number below 10, got 100.0 for silu symmetric"),
    ):
        with pytest.raises(ValueError, match=match):
            experiments.check_contrast_design(**{**design, **change})


@pytest.mark.parametrize("n", [1, 0, True, 2.0])
def test_a_contrast_of_fewer_than_two_pairs_is_refused(n):
    with pytest.raises(ValueError, match=r"n must be an int >= 2 \(pairs\)"):
        experiments.Contrast("silu", 0.1, 0.0, math.inf, 0.0, n, 0.0)


def test_paired_contrast_refuses_non_finite_losses():
    with pytest.raises(ValueError, match=r"finite.*symmetric\[1\] = nan"):
        paired_contrast("silu", [3.0, float("nan"), 3.1], [3.0, 3.0, 3.0], 0.05, 0.8)
    with pytest.raises(ValueError, match=r"finite.*gated\[0\] = inf"):
        paired_contrast("silu", [3.0, 3.1], [float("inf"), 3.0], 0.05, 0.8)


@pytest.mark.parametrize("fn", [stats.holm, stats.holm_thresholds])
@pytest.mark.parametrize(
    "p_values, alpha, match",
    [
        ([0.01, float("nan")], 0.05, r"p_values\[1\] = nan"),
        ([float("nan"), 0.01], 0.05, r"p_values\[0\] = nan"),
        ([1.5, 0.01, -0.1], 0.05, r"p_values\[0\] = 1.5, p_values\[2\] = -0.1"),
        (["0.01"], 0.05, r"p_values\[0\] = '0.01'"),
        ([0.01], 0.0, r"alpha must be a number in \(0, 1\), got 0.0"),
        ([0.01], 1.0, "alpha must be a number in"),
        ([0.01], float("nan"), "alpha must be a number in"),
    ],
)
def test_holm_refuses_nan_and_out_of_range_p_values_and_alpha(fn, p_values, alpha, match):
    with pytest.raises(ValueError, match=match):
        fn(p_values, alpha)


def test_holm_accepts_the_edges_of_the_unit_interval():
    assert stats.holm([0.0, 1.0]) == [True, False]
    assert stats.holm(np.array([0.001, 0.06])) == [True, False]


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: minimum_detectable_effect("0.1", 4), "sd must be finite"),
        (lambda: minimum_detectable_effect(0.1, 4, alpha="0.05"), "alpha and power"),
        (lambda: minimum_detectable_effect(0.1, 4, power=float("nan")), "alpha and power"),
        (lambda: stats.pairs_needed(0.01, math.inf), "target must be a positive finite"),
        (lambda: stats.pairs_needed(0.01, "0.01"), "target must be a positive finite"),
        (lambda: stats.pairs_needed(0.01, 0.01, alpha=2.0), "alpha and power"),
    ],
)
def test_mde_and_pairs_needed_refuse_what_is_not_a_number_in_range(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_interval_and_equivalence_refuse_what_is_not_a_number():
    c = paired_contrast("silu", [3.0, 3.1, 3.3], [2.9, 3.05, 3.1], 0.05, 0.8)
    with pytest.raises(ValueError, match="level must lie in"):
        c.interval("0.9")
    with pytest.raises(ValueError, match="margin must be a positive finite number"):
        c.equivalence_p(True)


def test_dose_response_names_a_seed_whose_violations_do_not_differ(tokens, monkeypatch):
    """Violations equal at every β make the seed's slope 0/0; the message says so, instead of
    blaming a NaN 'symmetric' value."""
    runs = [SimpleNamespace(final=[3.0, 3.1], measured=[0.25, 0.5 + i]) for i in range(2)]
    monkeypatch.setattr(experiments.dose, "_map", lambda fn, jobs, workers: runs)
    with pytest.raises(
        ValueError,
        match=r"seed 0: the trained layers have the same exchange violation 0.25 at every β of "
        r"\[0.5, 1.0\], so its slope of loss against violation is 0/0",
    ):
        experiments.swish_beta_dose_response(tokens, **SMALL_DOSE)


@pytest.mark.parametrize(
    "args, message",
    [
        (("silu", math.nan, 0.1, 1.0, 0.5, 5, 0.0), r"mean must be a finite number, got nan"),
        (("silu", math.inf, 0.0, math.inf, 0.0, 5, 0.0), r"mean must be a finite number, got inf"),
        (("silu", 0.1, -1.0, 0.0, 0.5, 5, 0.0), r"se must be a finite number >= 0, got -1.0"),
        (("silu", 0.1, 0.1, 1.0, 2.0, 5, 0.0), r"p must be a number in \[0, 1\], got 2.0"),
        (("silu", 0.1, 0.1, 1.0, "0.5", 5, 0.0), r"p must be a number in \[0, 1\], got '0.5'"),
        (("silu", 0.1, 0.1, 1.0, math.nan, 5, 0.0), r"p must be a number in \[0, 1\], got nan"),
        (("silu", 0.1, 0.1, math.nan, 0.5, 5, 0.0), r"t must be a number, ±inf only when se = 0"),
        (("silu", 0.1, 0.1, math.inf, 0.5, 5, 0.0), r"±inf only when se = 0, got inf"),
        (("silu", 0.1, 0.1, 1.0, 0.5, 5, -0.1), r"mde must be a finite number >= 0, got -0.1"),
        (("silu", 0.1, 0.1, 1.0, 0.5, 5, math.inf), r"mde must be a finite number >= 0, got inf"),
        ((123, 0.1, 0.1, 1.0, 0.5, 5, 0.0), r"act must be a str naming the contrast's σ, got 123"),
    ],
)
def test_a_contrast_refuses_what_no_paired_t_test_gives(args, message):
    """A negative se gave a reversed interval (low > high), p = 2 and a NaN mean were kept."""
    with pytest.raises(ValueError, match=message):
        experiments.Contrast(*args)


def test_a_contrast_keeps_what_a_paired_t_test_gives():
    """Equal differences give se = 0 and t = ±inf (p = 0), or t = 0 (p = 1) for none."""
    same = paired_contrast("silu", [2.0, 3.0], [1.0, 2.0], 0.05, 0.8)
    assert (same.mean, same.se, same.t, same.p) == (1.0, 0.0, math.inf, 0.0)
    assert experiments.Contrast("silu", -1.0, 0.0, -math.inf, 0.0, 2, 0.0).interval() == (-1, -1)


def test_paired_contrast_refuses_an_act_that_is_not_a_str():
    with pytest.raises(ValueError, match=r"act must be a str naming the contrast's σ, got 123"):
        paired_contrast(123, [1.0, 2.0], [0.0, 1.0], 0.05, 0.8)


def test_kinds_refuses_what_is_not_a_bool_for_references():
    """'no' is truthy: it used to add the reference kinds."""
    with pytest.raises(ValueError, match=r"references must be True or False, got 'no'"):
        experiments.kinds(["silu"], "no")
    assert list(experiments.kinds(["silu"], False)) == ["silu symmetric", "silu gated"]


def _edit(record: dict, path: str, value: object) -> None:
    """Set the entry at a dotted ``path`` to ``value``, or remove it when ``value`` is DELETE."""
    *parents, last = path.split(".")
    for key in parents:
        record = record[int(key)] if isinstance(record, list) else record[key]
    if value is DELETE:
        del record[last]
    else:
        record[last] = value


DELETE = object()


@pytest.mark.parametrize(
    "path, value, message",
    [
        ("contrasts.0.mde", DELETE, r"contrasts\[0\]: Contrast: missing keys \['mde'\]"),
        ("contrasts.0.p", "abc", r"contrasts\[0\]: Contrast: p must be float, got 'abc'"),
        ("contrasts.1.se", -0.5, r"contrasts\[1\]: se must be a finite number >= 0, got -0.5"),
        ("contrasts.0.n", 8.0, r"contrasts\[0\]: Contrast: n must be int, got 8.0"),
        ("contrasts", {"silu": 1}, r"ContrastResult: contrasts must be a list, got \{'silu': 1\}"),
        ("final", "oops", r"ContrastResult: final must be dict\[str, list\[float\]\], got 'oops'"),
        (
            "final.silu gated",
            [3.1, "x"],
            r"ContrastResult: final must be dict\[str, list\[float\]\]",
        ),
        (
            "selection.silu gated",
            [1.0],
            r"ContrastResult: selection must be dict\[str, dict\[str, list\[float",
        ),
        (
            "curves.bilinear",
            [[3.0, True]],
            r"ContrastResult: curves must be dict\[str, list\[list\[float\]\]\]",
        ),
        (
            "chosen_lr.silu gated",
            "0.01",
            r"ContrastResult: chosen_lr must be dict\[str, float\], got",
        ),
        (
            "eval_steps",
            [10, 20.5],
            r"ContrastResult: eval_steps must be list\[int\], got \[10, 20.5\]",
        ),
        ("n_parameters.bilinear", 1.5, r"ContrastResult: n_parameters must be dict\[str, int\]"),
        ("design", [1], r"ContrastResult: design must be dict, got \[1\]"),
        ("dose_response.slope_p", None, r"DoseResponse: slope_p must be float, got None"),
        ("dose_response.final", [[3.0], "x"], r"DoseResponse: final must be list\[list\[float"),
    ],
)
def test_load_shipped_names_a_malformed_field_with_its_file(
    tmp_path, monkeypatch, path, value, message
):
    """A shipped file with a field of the wrong type loaded before, to fail (or not) where the
    value was used; a contrast missing a key gave Contrast.__init__'s TypeError."""
    record = json.loads(experiments.records.experiment("symmetry_contrast").read_text())
    _edit(record, path, value)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(record))
    monkeypatch.setattr(experiments.records, "experiment", lambda name: bad)
    with pytest.raises(ValueError, match=r"^data/experiments/bad\.json: " + message):
        experiments.load_shipped("bad")


def test_a_set_of_seeds_is_refused_because_its_order_is_arbitrary():
    """Seeds pair the runs of two kinds: a set would give them in an order the caller does not
    know (the shared list check accepted sets before)."""
    from kvattn._checks import is_list_like

    assert not is_list_like({0, 1}) and not is_list_like(frozenset({0, 1}))
    assert is_list_like([0, 1]) and is_list_like((0, 1)) and is_list_like(np.arange(2))
    with pytest.raises(ValueError, match="betas"):
        experiments.check_dose_design(betas={0.5, 1.0}, seeds=[0, 1])
