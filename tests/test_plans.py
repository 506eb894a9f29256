"""Plans committed before their runs (the course's rule for a new experiment): each names runs the
training code accepts, measures the probes record, and a decision rule, and no result of its runs
is shipped before the plan."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from kvattn.diagnostics import COLLAPSE_LAYER_MEASURES, COLLAPSE_NORM_MEASURES
from kvattn.pretrain import PretrainConfig
from kvattn.reproduce.files import plan
from kvattn.reproduce.hunt import hunt_recipe, plan_sha256

ROOT = Path(__file__).resolve().parent.parent


def test_the_constant_rate_plan_names_runs_the_training_code_accepts():
    """Issue 31's route test: each run is a hunt run held at its peak rate after warm-up for
    twice the hunt's steps, on the seed of its cosine counterpart."""
    constant = plan("constant_rate")
    hunt = plan("collapse_hunt")
    assert set(constant) >= {"question", "runs", "measures", "decision_rule", "power", "window"}
    assert set(constant["decision_rule"]) == {"supported", "refuted", "otherwise", "collapse"}
    for name, run in constant["runs"].items():
        counterpart = hunt_recipe(run["from"])
        recipe = {**counterpart, **run["changes"]}
        config = PretrainConfig(**recipe)  # the training code accepts it
        assert config.min_lr_ratio == 1.0  # no decay after warm-up
        assert config.steps == 2 * hunt["shared"]["steps"]
        assert config.seed == counterpart["seed"] and config.lr == counterpart["lr"] == 0.01
        assert config.warmup == counterpart["warmup"]
        # its results go to data/constant_rate/, never among the hunt's records
        assert not (ROOT / "data" / "collapse_hunt" / f"{name}.json").exists()
    seeds = {hunt_recipe(run["from"])["seed"] for run in constant["runs"].values()}
    assert len(seeds) == 2  # the seed pair
    assert set(constant["measures"]) <= {*COLLAPSE_LAYER_MEASURES, *COLLAPSE_NORM_MEASURES}
    assert "metric_norm_scale" in constant["measures"]


def test_every_plan_is_json_with_an_about():
    for path in sorted((ROOT / "data" / "plans").glob("*.json")):
        assert "about" in json.loads(path.read_text(encoding="utf-8")), path.name


def test_the_rerun_plan_makes_every_hunt_run_again_unchanged():
    """Issue 31: every collapse-hunt trajectory gets the LayerNorm scale by a rerun of its
    recipe, the hunt's records staying as the runs made them."""
    reruns = plan("hunt_reruns")
    hunt = plan("collapse_hunt")
    assert list(reruns["runs"]) == list(hunt["runs"])
    for name, run in reruns["runs"].items():
        assert run == {"from": name, "changes": {}}
        recipe = hunt_recipe(name, study="hunt_reruns")
        assert recipe == {**hunt_recipe(name), "out_dir": f"runs/hunt_reruns/{name}"}
    assert {"metric_norm_scale", "G_order_rms"} <= set(reruns["measures"])
    assert set(reruns["measures"]) <= {*COLLAPSE_LAYER_MEASURES, *COLLAPSE_NORM_MEASURES}


def _first_commit_time(path: Path) -> int | None:
    """When ``path`` first entered the repository's history (Unix seconds); None outside a git
    clone with history (an installed kvattn, a shallow copy)."""
    try:
        out = subprocess.run(
            ["git", "log", "--diff-filter=A", "--format=%ct", "--", str(path)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None
    return int(out[-1]) if out else None


@pytest.mark.parametrize("study", ["constant_rate", "hunt_reruns", "metric_depth"])
def test_a_plans_shipped_results_ran_from_the_plan_as_committed_before_them(study):
    """Every shipped record of a plan ran from the plan file shipped now (its SHA-256), with the
    recipe the plan gives, and, in a clone with history, the plan was committed before any of
    its records."""
    records = sorted((ROOT / "data" / study).glob("*.json"))
    planned = plan(study)["runs"]
    assert {p.stem for p in records} <= set(planned)
    planned_at = _first_commit_time(ROOT / "data" / "plans" / f"{study}.json")
    for path in records:
        record = json.loads(path.read_text(encoding="utf-8"))
        assert record["plan"]["sha256"] == plan_sha256(study), path.name
        recipe = PretrainConfig(**hunt_recipe(path.stem, study=study)).to_dict()
        for key in ("steps", "warmup", "lr", "min_lr_ratio", "seed", "weight_decay"):
            assert record["recipe"][key] == recipe[key], (path.name, key)
        assert record["command"] == f"kvattn-reproduce hunt {path.stem} --plan {study}"
        shipped_at = _first_commit_time(path)
        if planned_at is not None and shipped_at is not None:
            assert planned_at < shipped_at, f"{path.name} was committed before its plan"


def test_the_depth_plan_varies_only_the_units_and_the_seed_of_the_nearest_recipe():
    """Issue 37's depth experiment: 2, 4 and 8 units at the hunt's nearest recipe, three fresh
    seeds at every depth (none used by an earlier run), with the rule and the power it states;
    the power it quotes is what kvattn.stats.dose_power gives for its design."""
    from kvattn.course import depth_report
    from kvattn.stats import dose_power

    depth = plan("metric_depth")
    assert set(depth) >= {"question", "primary_measure", "primary_test", "margin", "power"}
    assert set(depth["decision_rule"]) == {"supported", "refuted", "otherwise"}
    nearest = hunt_recipe("lr1e-2_wu500")
    earlier = {hunt_recipe(n)["seed"] for n in plan("collapse_hunt")["runs"]}
    assert len(depth["runs"]) == len(depth_report.DEPTHS) * len(depth_report.SEEDS)
    for d in depth_report.DEPTHS:
        for s in depth_report.SEEDS:
            name = depth_report.run_name(d, s)
            recipe = hunt_recipe(name, study="metric_depth")
            PretrainConfig(**recipe)  # the training code accepts it
            assert recipe["model"] == {**nearest["model"], "num_reslayerA": d}
            assert recipe["seed"] == s and s not in earlier
            changed = ("model", "seed", "out_dir")
            assert {k: v for k, v in recipe.items() if k not in changed} == {
                k: v for k, v in nearest.items() if k not in changed
            }
    three = dose_power(depth_report.DEPTHS, 3, depth_report.PLANNED_SD, 1.5, depth_report.MARGIN)
    none = dose_power(depth_report.DEPTHS, 3, depth_report.PLANNED_SD, 0.0, depth_report.MARGIN)
    assert "0.91" in depth["power"] and round(three["supported"], 2) == 0.91
    assert "0.80" in depth["power"] and round(none["refuted"], 2) == 0.80
