"""kvattn.benchmark: interleaved timing, ratios with their spread, and flags for ratios that
cannot be right. Timing logic is checked against a fake clock, so no test depends on how fast
this machine is; the real benchmarks run once on a tiny model to check what they report."""

from __future__ import annotations

import json

import pytest
import torch

from kvattn import benchmark, figures
from kvattn.benchmark import Ratio, flagged, interleaved
from kvattn.pldr import PLDRConfig

CPU = torch.device("cpu")


class FakeClock:
    """The clock of :mod:`kvattn.benchmark`: a variant advances it by its own cost."""

    def __init__(self) -> None:
        self.now = 0.0
        self.calls: list[str] = []

    def __call__(self) -> float:
        return self.now

    def variant(self, name: str, costs: list[float] | float):
        costs_iter = iter(costs) if isinstance(costs, list) else None

        def run() -> None:
            self.calls.append(name)
            self.now += next(costs_iter) if costs_iter else costs

        return run


@pytest.fixture
def clock(monkeypatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(benchmark, "_clock", fake)
    return fake


def test_steady_ratio_stops_after_min_rounds_and_rotates_the_order(clock):
    variants = {"a": clock.variant("a", 2.0), "b": clock.variant("b", 1.0)}
    times, ratios = interleaved(variants, {"a/b": ("a", "b")}, CPU, budget_s=1e9, min_rounds=4)
    assert ratios["a/b"] == Ratio(2.0, 2.0, 2.0, 4)
    assert times == {"a": [2.0] * 4, "b": [1.0] * 4}
    # one untimed warm-up each, then rounds in rotating order: ab, ba, ab, ba
    assert clock.calls == ["a", "b", "a", "b", "b", "a", "a", "b", "b", "a"]


def test_a_load_burst_that_hits_both_variants_of_a_round_cancels_in_the_ratio(clock):
    burst = [1.0, 1.0, 5.0, 1.0, 1.0, 1.0]  # warm-up, then round 2 runs 5x slower
    variants = {"a": clock.variant("a", [3 * c for c in burst]), "b": clock.variant("b", burst)}
    _, ratios = interleaved(variants, {"a/b": ("a", "b")}, CPU, budget_s=1e9, min_rounds=5)
    assert ratios["a/b"].median == pytest.approx(3.0)
    assert ratios["a/b"].spread == pytest.approx(0.0)


def test_noisy_ratio_runs_until_the_budget_ends(clock):
    costs = [1.0, 1.0, 3.0] * 100  # the ratio a/b alternates between 1 and 3: it never settles
    variants = {"a": clock.variant("a", costs), "b": clock.variant("b", 1.0)}
    _, ratios = interleaved(variants, {"a/b": ("a", "b")}, CPU, budget_s=20.0, max_rounds=100)
    r = ratios["a/b"]
    # every round takes 2 to 4 fake seconds; no round starts after 20 s
    assert 5 <= r.rounds < 12
    assert r.spread > benchmark.UNSTABLE_SPREAD
    assert flagged(r, None).flag.startswith("unstable")


def test_flags_take_precedence_and_stable_ratios_are_not_flagged():
    stable = Ratio(2.0, 1.95, 2.05, 10)
    assert flagged(stable, None).flag is None
    # regression (full build under load): one round of the mid config, spread 0, went unflagged
    assert flagged(Ratio(13.6, 13.6, 13.6, 1), None).flag.startswith("unstable: only 1 round")
    assert flagged(stable, "impossible: x").flag == "impossible: x"
    assert Ratio(0.0, -1.0, 1.0, 3).spread == float("inf")


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(budget_s=0), "budget_s must be a positive"),
        (dict(budget_s=10, min_rounds=0), "min_rounds"),
        (dict(budget_s=10, min_rounds=5, max_rounds=2), "min_rounds <= max_rounds"),
        (dict(budget_s=10, target_spread=0), "target_spread"),
    ],
)
def test_bad_budgets_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        interleaved({"a": lambda: None}, {}, CPU, **kwargs)


def test_ratios_must_name_known_variants():
    with pytest.raises(ValueError, match=r"ratio 'x' must name two of \['a'\]"):
        interleaved({"a": lambda: None}, {"x": ("a", "b")}, CPU, budget_s=1)
    with pytest.raises(ValueError, match="variants is empty"):
        interleaved({}, {}, CPU, budget_s=1)


def test_training_benchmark_flags_an_impossible_share(monkeypatch):
    """A constant-G step measured slower than the PLDR step (as under load) gives a negative
    metric-learner share: it must be flagged, and the report must say so."""
    cfg = PLDRConfig(**{**benchmark.CONFIGS["tiny"], "num_hidden_layers": 1})

    def fake_interleaved(variants, ratios, device, **kw):
        for fn in variants.values():
            fn()  # the real steps run once, so the models and optimisers are exercised
        times = {"pldr": [2.0], "constant_g": [8.3], "gpt": [3.0]}
        return times, {
            "pldr/gpt": Ratio(0.69, 0.6, 0.7, 1),
            "constant_g/pldr": Ratio(4.146, 4.1, 4.2, 1),
        }

    monkeypatch.setattr(benchmark, "interleaved", fake_interleaved)
    r = benchmark.bench_train("tiny", cfg, CPU, batch=2, seq=8, budget_s=1)
    assert r["metric_learner_share"].median == pytest.approx(-3.146)
    assert r["metric_learner_share"].flag.startswith("impossible: a share must lie in [0, 1]")
    # quartiles of 1 − c: the order flips
    assert (r["metric_learner_share"].q1, r["metric_learner_share"].q3) == pytest.approx(
        (-3.2, -3.1)
    )
    assert r["train_pldr_over_gpt"].flag.startswith("implausible")
    text = benchmark.report(r)
    assert text.count("⚠") == 2 and "-314.6%" in text
    # FLOPs are counted, not timed: PLDR-LLM does GPT's products and more, the constant-G model
    # fewer than PLDR-LLM (no metric learner)
    f = r["train_flops"]
    assert f["gpt"] < f["pldr"] and f["constant_g"] < f["pldr"]
    assert r["train_flops_pldr_over_gpt"] == pytest.approx(f["pldr"] / f["gpt"])
    assert 0 < r["metric_learner_flop_share"] < 1
    # a step's products: at least 3 × 2 × (tokens × the LM head's weights) for forward + backward
    assert f["gpt"] >= 6 * 2 * 8 * cfg.vocab_size * cfg.hidden_size
    assert r["train_flop_per_s"]["gpt"] == pytest.approx(f["gpt"] / r["train_step_s"]["gpt"])
    assert text.count("the same in FLOPs") == 2


def test_generation_benchmark_on_a_tiny_model_reports_every_mode():
    cfg = PLDRConfig(**{**benchmark.CONFIGS["tiny"], "num_hidden_layers": 1})
    r = benchmark.bench_generate("tiny", cfg, CPU, prompt_len=8, new_tokens=4, budget_s=0.5)
    assert set(r["generate_tokens_per_s"]) == {"pldr none", "pldr kv", "pldr kv+g", "gpt kv"}
    assert all(v > 0 for v in r["generate_tokens_per_s"].values())
    for key in ("kvg_over_none", "kv_over_none", "pldr_kvg_over_gpt_kv"):
        ratio = r[key]
        assert ratio.rounds >= 1 and ratio.q1 <= ratio.median <= ratio.q3
        if key != "pldr_kvg_over_gpt_kv" and ratio.median < 1:
            assert ratio.flag is not None  # a cache slower than no cache never goes unflagged
    assert r["generate_peak_mib"] == dict.fromkeys(r["generate_tokens_per_s"])  # None off CUDA
    json.dumps(benchmark.as_json(r))  # plain data, ready for --json
    fig = figures.benchmark_ratios([r])
    assert len(fig.data[0].x) == 3


def test_generation_must_fit_the_positions():
    cfg = PLDRConfig(**benchmark.CONFIGS["tiny"])
    with pytest.raises(ValueError, match="exceeds max_position_embeddings = 512"):
        benchmark.bench_generate("tiny", cfg, CPU, prompt_len=500, new_tokens=13, budget_s=1)


def test_figure_refuses_results_without_ratios():
    with pytest.raises(ValueError, match="no benchmark ratios"):
        figures.benchmark_ratios([{"config": "tiny"}])
