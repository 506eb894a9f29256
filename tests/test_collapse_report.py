"""What Part II found (kvattn.course.collapse_report): the table's measures, its format, and the
runs it names on the shipped records."""

from __future__ import annotations

import json
import math

import pytest
import torch

from kvattn import diagnostics
from kvattn.checkpoint import load_pretrained
from kvattn.course import collapse_report as cr
from kvattn.course import hunt_report as hr
from kvattn.data import blocks, collapse_hunt, load_text, load_tokenizer, shipped, trajectory
from kvattn.diagnostics import load_probes
from kvattn.pldr import PLDRLLM
from kvattn.reproduce.files import HUNT_PLAN, plan
from kvattn.stats import t_interval

HUNT = list(plan(HUNT_PLAN)["runs"])  # every run of the collapse hunt, as planned
SWEEP = [f"sweep_lr{lr}_wu{wu}" for lr in ("3e-4", "1e-3", "3e-3") for wu in (50, 500)]


@pytest.fixture(scope="module")
def held_out() -> str:
    return load_text("stdlib", max_chars=6_100_000)[6_000_000:]


@pytest.fixture(scope="module")
def tiny():
    return load_pretrained(shipped("pldr_tiny")), load_tokenizer(shipped("pldr_tiny"))


def _flattened(model: PLDRLLM) -> PLDRLLM:
    flat = PLDRLLM(model.config)
    flat.load_state_dict(model.state_dict())
    with torch.no_grad():
        for block in flat.decoder.dec_layers:
            block.mha1.reslayerAs[-1].layernormA.weight.zero_()
    return flat


def test_a_model_flattened_by_hand_reads_collapsed_on_every_measure(tiny, held_out):
    model, tok = tiny
    row = cr.measure_finding(
        "flat", _flattened(model), tok, held_out, snippets=3, eval_blocks=2, new_tokens=6
    )
    assert row.order_rms == 0  # every snippet's G_LM is the same, bit for bit
    # freezing it changes nothing but rounding: the frozen-G pass multiplies in another order,
    # which AVX-512 kernels round differently in the last bit (-4.8e-7 on an AMD EPYC)
    assert abs(row.delta_loss) < 1e-5 and all(abs(e) < 1e-5 for e in row.delta_interval)
    assert row.sigma_ratio < 1e-5  # every row of A is β: rank 1 up to rounding
    assert row.gamma == (0.0, 0.0) and row.kvg_same == (3, 3)


def test_the_trained_model_reads_as_independent_code_computes_it(tiny, held_out):
    model, tok = tiny
    row = cr.measure_finding("tiny", model, tok, held_out, snippets=3, eval_blocks=2, new_tokens=6)
    # independently: the same snippets, the order parameter layer by layer, the Δ-loss interval
    gen = torch.Generator().manual_seed(0)
    starts = torch.randint(0, len(held_out) - cr.SNIPPET_CHARS, (3,), generator=gen).tolist()
    ids = [torch.tensor([tok.encode(held_out[s : s + cr.SNIPPET_CHARS])[:128]]) for s in starts]
    with torch.no_grad():
        G = [[o.G_LM for o in model(i, output_pldr_attentions=True).pldr_attentions] for i in ids]
    per_layer = [
        (
            diagnostics.order_parameter(G[0][li], G[1][li], "rms")
            + diagnostics.order_parameter(G[0][li], G[2][li], "rms")
        )
        / 2
        for li in range(2)
    ]
    assert row.order_rms == pytest.approx(max(per_layer), rel=1e-12)
    assert 0.01 < row.order_rms < 1  # not collapsed, as chapter 9 finds
    lo, hi = row.delta_interval
    assert lo < row.delta_loss < hi and (lo + hi) / 2 == pytest.approx(row.delta_loss)
    assert row.gamma == pytest.approx((0.81, 0.75), abs=0.01)  # the measurement
    assert 0.3 < row.sigma_ratio < 1 and row.kvg_same[1] == 3


def test_the_interval_is_the_t_interval_over_donors(tiny, held_out):
    model, tok = tiny
    row = cr.measure_finding("tiny", model, tok, held_out, snippets=4, eval_blocks=1, new_tokens=1)
    gen = torch.Generator().manual_seed(0)
    starts = torch.randint(0, len(held_out) - cr.SNIPPET_CHARS, (4,), generator=gen).tolist()
    ids = [torch.tensor([tok.encode(held_out[s : s + cr.SNIPPET_CHARS])[:128]]) for s in starts]
    held = blocks(torch.tensor(tok.encode(held_out)), 128)[:1]
    d = diagnostics.g_substitution(model, held, ids[1:]).delta_loss
    expected = t_interval(float(d.mean()), float(d.std()) / math.sqrt(3), 3)
    assert row.delta_interval == pytest.approx(expected, rel=1e-9)


def test_bad_input_is_refused_before_any_work(tiny, held_out):
    model, tok = tiny
    with pytest.raises(ValueError, match="snippets"):
        cr.measure_finding("x", model, tok, held_out, snippets=2)
    with pytest.raises(ValueError, match="characters"):
        cr.measure_finding("x", model, tok, "short text")
    with pytest.raises(TypeError, match="text"):
        cr.measure_finding("x", model, tok, b"bytes")
    with pytest.raises(TypeError, match="PLGA PLDRLLM"):
        cr.measure_finding("x", torch.nn.Linear(2, 2), tok, held_out)


def test_the_table_fits_the_text_column_and_marks_published_figures():
    measured = cr.Finding("pldr_tiny", 0.15, -1e-3, (-0.012, 0.010), 0.63, (0.81, 0.75), (1, 4))
    table = cr.format_findings([measured, cr.PUBLISHED_110M])
    lines = table.splitlines()
    assert max(len(line) for line in lines) <= cr.MAX_WIDTH
    assert lines[2].split()[:4] == ["pldr_tiny", "1.5e-01", "not", "-1.0e-03"]
    assert "± 1.1e-02" in lines[2] and lines[2].endswith("1/4")
    assert lines[3].startswith("published 110M*") and lines[3].count("not reported") == 2
    assert lines[3].split()[2:4] == ["0", "met"] and lines[3].endswith("4/4")
    near = cr.Finding("nearest (hunt)", 2e-4, 1e-5, (-1e-5, 3e-5), 0.05, (0.016, 0.002), (6, 6))
    assert cr.format_findings([near]).splitlines()[2].split()[2:4] == ["2.0e-04", "met"]
    assert lines[-1] == "* the figures reported by the authors' audit (PLDR-LLM Math Foundations)"


def test_the_table_refuses_what_it_cannot_print():
    with pytest.raises(ValueError, match="at least one"):
        cr.format_findings([])
    with pytest.raises(ValueError, match="16 characters"):
        cr.format_findings([cr.Finding("a label far too long", 0, 0, (0, 0), 0, (0,), (1, 1))])
    with pytest.raises(TypeError, match="Finding"):
        cr.format_findings([{"label": "x"}])


def test_end_value_is_the_median_of_the_last_quarter_of_the_worst_layer():
    probes = {
        "G_order_rms": [
            [0.5, 0.1],
            [0.2, 0.4],
            [0.3, None],
            [0.01, 0.02],
            [0.05, 0.04],
            [0.9, 0.8],
            [0.03, 0.06],
            [0.07, 0.01],
        ]
    }
    # the worst layer: 0.5, 0.4, 0.3, 0.02, 0.05, 0.9, 0.06, 0.07; the last quarter: 0.06, 0.07
    assert hr.end_value(probes) == pytest.approx(0.065)
    assert hr.lowest_end({"a": probes, "b": {"G_order_rms": [[1.0, 2.0]]}}) == "a"
    with pytest.raises(ValueError, match="no G_order_rms"):
        hr.end_value({"G_order_rms": []})
    with pytest.raises(ValueError, match="any layer"):
        hr.end_value({"G_order_rms": [[None, None]]})


def test_largest_swing():
    assert hr.largest_swing([1.0, 4.0, 2.0, 2.5]) == 4.0
    assert hr.largest_swing([3e-4, 1e-4]) == pytest.approx(3.0)
    with pytest.raises(ValueError, match="two"):
        hr.largest_swing([1.0])
    with pytest.raises(ValueError, match="positive"):
        hr.largest_swing([1.0, 0.0])


def test_the_named_runs_are_the_lowest_end_values_of_the_shipped_records():
    hunt = {n: load_probes(collapse_hunt(n)) for n in HUNT}
    assert hr.lowest_end(hunt) == hr.HUNT_NEAREST
    sweep = {n: load_probes(trajectory(n)) for n in SWEEP}
    assert hr.lowest_end(sweep) == hr.SWEEP_BEST
    # the nearest run's end value is orders of magnitude below the sweep's lowest-order run's
    assert hr.end_value(hunt[hr.HUNT_NEAREST]) < 1e-2 * hr.end_value(sweep[hr.SWEEP_BEST])


def test_frozen_g_by_position_resolves_the_g_substitution(tiny, held_out):
    model, tok = tiny
    ids = blocks(torch.tensor(tok.encode(held_out)), 128)[:3]
    donors = [b[None, :-1] for b in blocks(torch.tensor(tok.encode(held_out[-20_000:])), 128)[:2]]
    state = torch.random.get_rng_state()
    split = cr.frozen_g_by_position(model, ids, donors, early=16)
    assert torch.equal(torch.random.get_rng_state(), state)  # no random draw leaks out
    whole = diagnostics.g_substitution(model, ids, donors).delta_loss.mean().item()
    assert split.per_block.shape == (3,) and split.per_block.dtype == torch.float64
    assert split.per_block.mean().item() == pytest.approx(whole, abs=1e-5)
    # the first 16 of 128 positions and the other 112 make up the whole
    assert (16 * split.early + 112 * split.rest) / 128 == pytest.approx(whole, abs=1e-5)
    with pytest.raises(ValueError, match="early"):
        cr.frozen_g_by_position(model, ids[:, :10], donors)
    with pytest.raises(TypeError, match="int64"):
        cr.frozen_g_by_position(model, ids.float(), donors)
    with pytest.raises(ValueError, match="donors"):
        cr.frozen_g_by_position(model, ids, [])


def _trajectory(steps, gamma, ratio, order):
    """A two-layer trajectory whose measures are the given per-step lists (the same value in
    both layers unless a pair is given)."""
    pair = lambda v: list(v) if isinstance(v, tuple) else [v, v]  # noqa: E731
    return {
        "step": list(steps),
        "metric_norm_scale": [pair(g) for g in gamma],
        "A_sigma_ratio": [pair(r) for r in ratio],
        "G_order_rms": [pair(o) for o in order],
        "G_order_mean": [pair(o) for o in order],
        "val_loss": [3.5, 3.25],
    }


def test_a_window_reading_is_the_median_of_the_last_four_probes_up_to_its_step():
    t = _trajectory(range(0, 1000, 100), [9, 8, 7, 6, 5, 4, 3, 2, 1, 0.5], [1] * 10, [1] * 10)
    assert hr.window_reading(t, "metric_norm_scale", 500) == (5.5, 5.5)  # 7, 6, 5, 4
    assert hr.window_reading(t, "metric_norm_scale", 900) == (1.5, 1.5)  # 3, 2, 1, 0.5
    t["metric_norm_scale"][9] = None  # a probe that did not measure it is left out
    assert hr.window_reading(t, "metric_norm_scale", 900) == (2.5, 2.5)  # 4, 3, 2, 1
    with pytest.raises(ValueError, match="3 readings up to step 200, the window needs 4"):
        hr.window_reading(t, "metric_norm_scale", 200)
    with pytest.raises(ValueError, match="no 'delta_loss' trajectory"):
        hr.window_reading(t, "delta_loss", 900)


def test_the_route_verdict_follows_the_plans_decision_rule():
    steps = range(0, 1250, 125)  # the counterpart ends at 500, the run at 1125
    cosine = _trajectory(range(0, 625, 125), [1] * 5, [0.3] * 5, [0.1] * 5)
    falling = _trajectory(
        steps, [1, 1, 1, 1, 0.5, 0.4, 0.3, 0.2, 0.1, 0.1], [0.3] * 5 + [0.05] * 5, [0.1] * 10
    )
    rising = _trajectory(steps, [1] * 5 + [2] * 5, [0.3] * 10, [0.1] * 10)
    half = _trajectory(
        steps, [1, 1, 1, 1, 0.5, 0.4, 0.3, 0.2, 0.1, 0.1], [0.3] * 5 + [0.2] * 5, [0.1] * 10
    )
    read = lambda t: hr.route_reading("run", t, "cosine", cosine)  # noqa: E731
    r = read(falling)
    assert r.gamma_early == (1.0, 1.0) and r.gamma_late == pytest.approx((0.15, 0.15))
    assert r.ratio_cosine == (0.3, 0.3) and r.ratio_late == (0.05, 0.05) and r.strict_step is None
    assert hr.route_verdict([r, r]) == "supported"
    assert hr.route_verdict([read(rising), read(rising)]) == "refuted"
    assert hr.route_verdict([r, read(rising)]) == "not resolved"  # the seeds disagree
    assert hr.route_verdict([read(half), read(half)]) == "not resolved"  # A: less than a third
    table = hr.format_route([r]).splitlines()
    assert max(len(line) for line in table) <= cr.MAX_WIDTH
    assert table[-2:] == [
        "run: val loss 3.25 (cosine 3.25), strict: closest ×100",
        "the plan's verdict: supported",
    ]
    with pytest.raises(ValueError, match="not beyond its counterpart's"):
        hr.route_reading("run", cosine, "cosine", cosine)
    with pytest.raises(ValueError, match="no readings"):
        hr.route_verdict([])


def test_knob_panels_put_a_seed_pair_in_one_panel_on_a_token_axis():
    hunt = {n: json.loads(collapse_hunt(n).read_text()) for n in ("base", "base_seed2", "batch64")}
    panels = hr.knob_panels(hunt, lambda r: [max(v) for v in r["G_order_rms"]])
    assert list(panels) == ["base (rate 3e-3, warm-up 50)", "batch 64 (1,500 steps)"]
    base = panels["base (rate 3e-3, warm-up 50)"]
    assert list(base) == ["first seed", "second seed"]
    x, y = base["second seed"]
    assert x[1] == 250 * 16 * 128 / 1e6 and len(x) == len(y) == 25  # every 250 steps to 6,000
    assert y[0] == max(hunt["base_seed2"]["G_order_rms"][0])
    batch = panels["batch 64 (1,500 steps)"]["first seed"][0]
    assert batch[-1] == base["first seed"][0][-1]  # as many tokens with a 4x batch
    every_run = [n for names in hr.HUNT_KNOBS.values() for n in names]
    assert sorted(every_run) == sorted(plan("collapse_hunt")["runs"])
    with pytest.raises(ValueError, match="base: 2 values for 25 probes"):
        hr.knob_panels(hunt, lambda r: [1, 2])


def _record(trajectory, batch=16, block=128):
    return {**trajectory, "recipe": {"batch_size": batch, "block_size": block}}


def test_route_panels_put_each_run_and_layer_in_a_panel_of_a_and_gamma():
    steps = range(0, 1250, 125)
    constant = _record(_trajectory(steps, [(1, 0.5)] * 10, [(0.3, 0.2)] * 10, [0.1] * 10))
    cosine = _record(_trajectory(range(0, 625, 125), [1] * 5, [(0.4, 0.1)] * 5, [0.1] * 5))
    cosine.pop("metric_norm_scale")  # the hunt's records lack gamma
    rerun = _record(_trajectory(range(0, 625, 125), [(0.9, 0.8)] * 5, [0.3] * 5, [0.1] * 5))
    panels = hr.route_panels(
        {"first seed": (constant, cosine, rerun), "x": (constant, cosine, None)}
    )
    assert list(panels) == [
        "first seed, layer 0",
        "first seed, layer 1",
        "x, layer 0",
        "x, layer 1",
    ]
    layer1 = panels["first seed, layer 1"]
    assert list(layer1) == list(hr.ROUTE_SERIES)
    assert layer1["σ2/σ1 of A, cosine"][1] == [0.1] * 5
    assert (
        layer1["|γ|, constant"][1] == [0.5] * 10 and layer1["|γ|, cosine (rerun)"][1] == [0.8] * 5
    )
    assert layer1["|γ|, constant"][0][1] == 125 * 16 * 128 / 1e6
    assert "|γ|, cosine (rerun)" not in panels["x, layer 0"]
    with pytest.raises(ValueError, match="x: a record lacks metric_norm_scale"):
        hr.route_panels({"x": (cosine, cosine, None)})


def test_reruns_are_tabled_beside_their_records_with_gamma_at_the_end():
    record = _trajectory(range(8), [1] * 8, [0.3] * 8, [0.1] * 6 + [0.2, 0.4])
    rerun = _trajectory(
        range(8),
        [(1, 1)] * 6 + [(0.02, 0.004), (0.04, 0.002)],
        [0.3] * 8,
        [0.5, 0.4, 0.3, 0.2, 0.1, 0.05, 0.01, 0.01],
    )
    assert hr.end_layers(rerun, "metric_norm_scale") == pytest.approx((0.03, 0.003))
    lines = hr.format_reruns({"base": record}, {"base": rerun}).splitlines()
    assert lines[2].split()[:5] == ["base", "3.0e-01", "1.0e-02", "0.03,", "0.003"]
    assert lines[2].split()[5] == f"{hr.gamma_order_rank(rerun):.2f}"
    assert max(len(line) for line in lines) <= cr.MAX_WIDTH
    with pytest.raises(ValueError, match=r"reruns without a record: \['wd1'\]"):
        hr.format_reruns({"base": record}, {"wd1": rerun})
    with pytest.raises(ValueError, match="no metric_norm_scale readings"):
        hr.end_layers({"metric_norm_scale": [None]}, "metric_norm_scale")


def test_the_criteria_print_one_a_line_within_the_column():
    lines = cr.format_criteria().splitlines()
    assert lines[0].split()[:2] == ["criterion", "measures,"]
    assert [line.split()[0] for line in lines[1:]] == list(diagnostics.COLLAPSE_CRITERIA)
    strict = lines[1 + list(diagnostics.COLLAPSE_CRITERIA).index("strict")].split()
    assert strict[1:6] == ["G_order_mean", "and", "A_sigma_ratio", "0.001", "every"]
    assert max(len(line) for line in lines) <= cr.MAX_WIDTH


def test_gamma_and_the_order_parameter_move_together_by_rank():
    t = _trajectory(range(5), [1, 0.5, 0.1, 0.2, 0.05], [0.3] * 5, [0.3, 0.1, 0.01, 0.02, 0.001])
    assert hr.gamma_order_rank(t) == pytest.approx(1.0)
    t["G_order_rms"] = [[v, v] for v in (0.001, 0.01, 0.02, 0.1, 0.3)]
    assert hr.gamma_order_rank(t) == pytest.approx(-0.9)
    t["metric_norm_scale"][2] = None
    with pytest.raises(ValueError, match="at every probe"):
        hr.gamma_order_rank(t)
