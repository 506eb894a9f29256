"""kvattn.course.depth_report: the depth experiment read by its plan, on made-up records whose
answers are known, and on the shipped records where they exist."""

from __future__ import annotations

import math

import pytest

from kvattn.course import depth_report as dr


def _record(depth: int, seed: int, ratio: float, strict_at: int | None = None) -> dict:
    """A made-up record: 8 probes every 250 steps; σ2/σ1 of A falls from 0.8 to ``ratio`` (both
    layers), the composite gain and each unit's gain follow, and the |mean| order parameter
    meets the strict criterion from ``strict_at`` on."""
    steps = list(range(0, 2000, 250))
    n = len(steps)
    ratios = [0.8 * (ratio / 0.8) ** (i / (n - 1)) for i in range(n)]
    mean = [1e-4 if strict_at is not None and s >= strict_at else 0.1 for s in steps]
    return {
        "name": dr.run_name(depth, seed),
        "recipe": {
            "model": {"num_reslayerA": depth},
            "seed": seed,
            "batch_size": 16,
            "block_size": 128,
        },
        "step": steps,
        "A_sigma_ratio": [[r, r] for r in ratios],
        "G_order_rms": [[0.01, 0.02]] * n,
        "G_order_mean": [[m, m] for m in mean],
        "metric_norm_scale": [[0.5, 0.4]] * n,
        "composite_gain": [[r, r] for r in ratios],
        "unit_gain": [[[r ** (1 / depth)] * depth] * 2 for r in ratios],
        "val_loss": [4.0, 3.0],
    }


def _design(fall_per_unit: float, noise: tuple = (0.0, 0.1, -0.1)) -> dict:
    records = {}
    for depth in dr.DEPTHS:
        for seed, e in zip(dr.SEEDS, noise, strict=True):
            ratio = 10 ** (-0.5 - fall_per_unit * depth + e)
            records[dr.run_name(depth, seed)] = _record(depth, seed, ratio)
    return records


def test_end_readings_are_medians_of_the_last_four_probes_and_the_primary_measure_their_log():
    rows = dr.depth_rows(_design(0.5))
    assert [(r.depth, r.seed) for r in rows] == [(d, s) for d in dr.DEPTHS for s in dr.SEEDS]
    record = _design(0.5)["depth2_seed11"]
    last4 = sorted(v[0] for v in record["A_sigma_ratio"][-4:])
    assert rows[0].ratio[0] == pytest.approx((last4[1] + last4[2]) / 2)
    assert rows[0].log_ratio == pytest.approx(math.log10(rows[0].ratio[0]))
    # the product of the units' gains is the composite at every probe here, by construction
    # (the medians of the window differ a little between a product and its factors)
    assert rows[0].log_unit_sum == pytest.approx(rows[0].log_composite, rel=0.02)


def test_a_geometric_fall_with_depth_is_supported_and_no_fall_refuted():
    supported = dr.depth_reading(dr.depth_rows(_design(0.5)))
    # a fall of 3 decades from 2 to 8 units at the last probe; the end window (four probes
    # before the end of a still-falling run) reads somewhat less
    assert supported.verdict == "supported" and 2.0 < supported.drop < 3.0
    assert dr.depth_reading(dr.depth_rows(_design(0.0))).verdict == "refuted"
    composite = dr.depth_reading(dr.depth_rows(_design(0.5)), "log_composite")
    assert composite.drop == pytest.approx(supported.drop)
    with pytest.raises(ValueError, match="measure"):
        dr.depth_reading(dr.depth_rows(_design(0.5)), "val_loss")


def test_the_depth_to_reach_a_target_is_where_the_line_crosses_it():
    rows = dr.depth_rows(_design(0.25))  # y ≈ -0.5 - 0.25 N (the end window lags a little)
    at, steep, shallow = dr.depth_to_reach(rows, target=-3.0)
    ys = [r.log_ratio for r in rows]
    xs = [r.depth for r in rows]
    reading = dr.depth_reading(rows)
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    assert at == pytest.approx(mx + (-3.0 - my) / reading.slope)
    assert steep < at < shallow
    rising = dr.depth_rows(_design(-0.1))  # σ2/σ1 rising with depth: never reached
    assert dr.depth_to_reach(rising)[0] == math.inf


def test_the_table_fits_the_column_and_names_the_first_strict_probe():
    records = _design(0.5)
    records["depth8_seed11"] = _record(8, 11, 1e-5, strict_at=1000)
    rows = dr.depth_rows(records)
    text = dr.format_depth(rows)
    assert max(len(line) for line in text.splitlines()) <= 80
    record = records["depth8_seed11"]
    first = next(
        s
        for s, a, m in zip(
            record["step"], record["A_sigma_ratio"], record["G_order_mean"], strict=True
        )
        if max(a) < 1e-3 and max(m) < 1e-3
    )
    assert first > 1000 and rows[6].strict_step == first and rows[0].strict_step is None
    assert text.splitlines()[2 + 6].rstrip().endswith(str(first))


def test_panels_are_one_per_depth_with_a_series_per_seed_and_layer():
    panels = dr.depth_panels(_design(0.5), "A_sigma_ratio")
    assert list(panels) == ["2 units", "4 units", "8 units"]
    assert sorted(panels["2 units"]) == sorted(
        f"seed {s}, layer {layer}" for s in dr.SEEDS for layer in (0, 1)
    )
    x, y = panels["8 units"]["seed 12, layer 1"]
    assert x[1] == pytest.approx(250 * 16 * 128 / 1e6) and len(y) == 8
    broken = _design(0.5)
    broken["depth2_seed11"]["composite_gain"][3] = None
    with pytest.raises(ValueError, match="composite_gain"):
        dr.depth_panels(broken, "composite_gain")


def test_the_collapsed_run_is_the_lowest_of_those_ending_below_the_strict_criterion():
    records = _design(0.5)
    with pytest.raises(ValueError, match="no run"):
        dr.collapsed_run(dr.depth_rows(records))
    records["depth8_seed12"] = _record(8, 12, 1e-5, strict_at=0)
    records["depth8_seed13"] = _record(8, 13, 1e-6, strict_at=0)
    assert dr.collapsed_run(dr.depth_rows(records)) == "depth8_seed13"


def test_a_run_that_never_met_the_criterion_ships_no_model(tmp_path, monkeypatch):
    from kvattn import data

    record = tmp_path / "metric_depth" / "depth2_seed11.json"
    record.parent.mkdir()
    record.write_text("{}")
    monkeypatch.setattr(data, "hunt_study", lambda study, name: record)
    with pytest.raises(FileNotFoundError, match="shipped no model"):
        dr.checkpoint("depth2_seed11")
    (record.parent / "depth2_seed11").mkdir()
    (record.parent / "depth2_seed11" / "config.json").write_text("{}")
    assert dr.checkpoint("depth2_seed11") == record.parent / "depth2_seed11"


def test_the_depth_to_reach_reads_any_measure_of_the_rows():
    rows = dr.depth_rows(_design(0.25))
    assert dr.depth_to_reach(rows, -3.0, measure="log_composite") == pytest.approx(
        dr.depth_to_reach(rows, -3.0)
    )
    with pytest.raises(ValueError, match="measure"):
        dr.depth_to_reach(rows, -3.0, measure="val_loss")


@pytest.mark.slow
def test_a_live_run_is_read_like_a_shipped_record(tmp_path):
    """The chapter's opt-in cell (KVATTN_LIVE=1) trains a run of the plan here; a pilot of 24
    steps gives a record with the probes the panels read."""
    record = dr.live_record("depth2_seed11", "cpu", runs=tmp_path, steps=24)
    assert record["recipe"]["model"]["num_reslayerA"] == 2 and record["step"][0] == 0
    assert len(record["unit_gain"][-1][0]) == 2
    panels = dr.depth_panels({"depth2_seed11": record}, "A_sigma_ratio")
    assert list(panels) == ["2 units"]
