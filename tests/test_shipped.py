"""The checkpoints shipped in data/: each was made by its recipe with the current training
code's configuration, loads, and stays small."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

import pytest

from kvattn import stats
from kvattn.checkpoint import load_pretrained, read_config
from kvattn.data import SHIPPED_FILES, load_tokenizer, shipped
from kvattn.pretrain import PretrainConfig

ROOT = Path(__file__).resolve().parent.parent
RECIPES = sorted((ROOT / "data" / "recipes").glob("*.json"))


def test_there_are_recipes():
    assert {p.stem for p in RECIPES} >= {"pldr_tiny", "gpt_tiny", "pldr_tiny_dag"}


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: p.stem)
def test_shipped_checkpoint_matches_its_recipe(recipe):
    folder = shipped(recipe.stem)
    assert sorted(p.name for p in folder.iterdir()) == sorted(SHIPPED_FILES)
    wanted = json.loads(recipe.read_text())
    state = json.loads((folder / "trainer_state.json").read_text())
    recorded = state["config"]
    # the recipe is valid for today's PretrainConfig and is exactly what was run
    # (out_dir was made absolute by tools/make_checkpoints.py, so it is compared by its end)
    # log_every, overwrite, compile, the probes and fused_adamw were added after the shipped
    # runs (their defaults, 1, false, false, no probes and false, are what those runs did), so a
    # recipe made before or after them is accepted
    later = {"log_every", "overwrite", "compile", "probe_every", "probe_blocks", "fused_adamw"}
    assert set(recorded) - later == {f.name for f in fields(PretrainConfig)} - later
    assert recorded["out_dir"].endswith(wanted["out_dir"])
    for key, value in wanted.items():
        if key != "out_dir":
            assert recorded[key] == value, key
    assert state["step"] == wanted["steps"]
    PretrainConfig(**{**recorded, "betas": tuple(recorded["betas"])})
    # the architecture in config.json follows from the recipe
    _, config = read_config(folder)
    for key, value in wanted["model"].items():
        assert getattr(config, key) == value, key
    assert config.max_position_embeddings == wanted["block_size"]
    tokenizer = load_tokenizer(folder)
    assert config.vocab_size == tokenizer.get_piece_size() == wanted["vocab_size"]
    model = load_pretrained(folder)
    assert type(model).__name__ == ("GPT" if wanted["architecture"] == "gpt" else "PLDRLLM")
    assert (folder / "model.safetensors").stat().st_size < 8 * 2**20
    provenance = json.loads((folder / "provenance.json").read_text())
    assert provenance["command"] == f"python tools/make_checkpoints.py {recipe.stem}"


def test_shipped_rejects_bad_names():
    with pytest.raises(ValueError, match="checkpoint name"):
        shipped("../secrets")
    with pytest.raises(FileNotFoundError, match="no shipped checkpoint data/nonexistent"):
        shipped("nonexistent")


def _assert_each_kind_chose_the_grids_best(r) -> None:
    """Every kind ran every rate of the shared grid, in order, on every selection seed, and kept
    the rate with the lowest mean final loss."""
    for kind, by_rate in r.selection.items():
        assert list(by_rate) == [f"{lr:g}" for lr in r.design["lrs"]]
        assert all(len(v) == len(r.design["select_seeds"]) for v in by_rate.values())
        means = {lr: sum(v) / len(v) for lr, v in by_rate.items()}
        assert f"{r.chosen_lr[kind]:g}" == min(means, key=means.get), kind


@pytest.mark.parametrize(
    "name",
    [
        "symmetry_contrast",
        "symmetry_contrast_long",
        "symmetry_contrast_silu_powered",
        "symmetry_contrast_powered",
        "symmetry_contrast_silu_long",
        "symmetry_contrast_gelu_relu_long",
        "symmetry_contrast_silu_12000",
        "symmetry_contrast_gelu_12000",
        "symmetry_contrast_relu_12000",
    ],
)
def test_shipped_symmetry_experiment_meets_its_design_and_its_statistics_recompute(name):
    """Chapter 5's verdicts read data/experiments/symmetry_contrast.json (and the 3× longer
    runs): ≥ 8 paired seeds per kind, every σ's contrast present, made by the tool, and every
    statistic recomputes from the shipped per-seed losses."""
    import numpy as np

    from kvattn import experiments

    shipped_run = experiments.load_shipped(name)
    r, dose, provenance = shipped_run.contrast, shipped_run.dose_response, shipped_run.provenance
    assert provenance["command"].startswith("python tools/run_symmetry_contrast.py")
    assert shipped_run.command == f"kvattn-reproduce experiment {name}"
    assert len(r.design["test_seeds"]) >= 8 and not set(r.design["test_seeds"]) & set(
        r.design["select_seeds"]
    )
    acts = [c.act for c in r.contrasts]
    assert set(acts) <= set(experiments.CONTRASTS) and acts
    contrasts = {f"{a} {f}" for a in acts for f in ("symmetric", "gated")}
    references = set() if "--no-references" in provenance["command"] else {"bilinear", "key_value"}
    assert set(r.final) == contrasts | references
    for kind, final in r.final.items():
        assert len(final) == len(r.design["test_seeds"]) == len(r.curves[kind])
        assert [c[-1] for c in r.curves[kind]] == final
        grid = r.design["lrs"]
        assert r.chosen_lr[kind] in (grid[kind] if isinstance(grid, dict) else grid)
    for c in r.contrasts:
        again = experiments.paired_contrast(
            c.act, r.final[f"{c.act} symmetric"], r.final[f"{c.act} gated"], 0.05, 0.8
        )
        assert again == c
    if name == "symmetry_contrast_silu_powered":  # sized from the main run's spread: MDE 0.01
        main = experiments.load_shipped("symmetry_contrast").contrast
        (silu,) = [c for c in main.contrasts if c.act == "silu"]
        needed = stats.pairs_needed(silu.sd, 0.01)
        assert acts == ["silu"] and len(r.design["test_seeds"]) == needed and dose is None
        assert not set(r.design["test_seeds"]) & set(main.design["test_seeds"])  # fresh seeds
        assert r.chosen_lr["silu gated"] == main.chosen_lr["silu gated"]
        return
    if name == "symmetry_contrast_powered":  # every σ, sized by the largest need, own rates
        main = experiments.load_shipped("symmetry_contrast").contrast
        needed = [stats.pairs_needed(c.sd, 0.01) for c in main.contrasts]
        assert acts == list(experiments.CONTRASTS) and dose is None
        assert len(r.design["test_seeds"]) == max(needed)
        assert not set(r.design["test_seeds"]) & set(main.design["test_seeds"])  # fresh seeds
        assert len(r.design["select_seeds"]) >= 2 and len(r.design["lrs"]) >= 5
        assert main.chosen_lr["silu gated"] in r.design["lrs"]  # the grid is centred on it
        _assert_each_kind_chose_the_grids_best(r)
        assert r.lr_at_edge == []  # the grid brackets every kind's choice
        return
    if name in (
        "symmetry_contrast_silu_long",
        "symmetry_contrast_gelu_relu_long",
        "symmetry_contrast_silu_12000",
        "symmetry_contrast_gelu_12000",
        "symmetry_contrast_relu_12000",
    ):  # follow-ups: each kind at its confirmatory rate, sized from the previous length's spread
        powered = experiments.load_shipped("symmetry_contrast_powered").contrast
        if name.endswith("_12000"):  # the horizon length, one σ, after its 3× run
            assert len(acts) == 1
            three_x = "silu_long" if acts == ["silu"] else "gelu_relu_long"
            sized_by = experiments.load_shipped(f"symmetry_contrast_{three_x}").contrast
            steps = experiments.load_shipped("symmetry_contrast_horizon").contrast.design["steps"]
        else:  # 3× the steps, after the first 3× run
            sized_by = experiments.load_shipped("symmetry_contrast_long").contrast
            steps = sized_by.design["steps"]
            assert steps == 3 * powered.design["steps"]
        spread = [c.sd for c in sized_by.contrasts if c.act in acts]
        needed = max(stats.pairs_needed(sd, 0.01) for sd in spread)
        seeds = r.design["test_seeds"]
        assert dose is None and "--rates-from" in provenance["command"]
        assert r.design["steps"] == steps
        assert r.design["lrs"] == {kind: [powered.chosen_lr[kind]] for kind in r.final}
        assert r.design["select_seeds"] == [] and all(sel == {} for sel in r.selection.values())
        assert len(seeds) == needed and seeds == powered.design["test_seeds"][:needed]
        return
    if name == "symmetry_contrast_long":
        assert (
            dose is None
            and r.design["steps"]
            == 3 * experiments.load_shipped("symmetry_contrast").contrast.design["steps"]
        )
        return
    assert dose is not None and len(dose.betas) >= 5 and dose.seeds == r.design["test_seeds"]
    assert dose.design["lr"] == r.chosen_lr["silu gated"]
    slopes = [np.polyfit(np.array(dose.violation)[:, s], np.array(dose.final)[:, s], 1)[0]
              for s in range(len(dose.seeds))]  # fmt: skip
    assert dose.slope == pytest.approx(np.mean(slopes), rel=1e-9)


def test_shipped_horizon_run_extends_the_main_runs_seeds_without_selection():
    """Chapter 5's flattening check: the contrast kinds trained far longer, on the main run's
    first seeds at its rate, with nothing to select (one rate); its statistics recompute."""
    from kvattn import experiments

    run = experiments.load_shipped("symmetry_contrast_horizon")
    r, main = run.contrast, experiments.load_shipped("symmetry_contrast").contrast
    assert run.provenance["command"].startswith("python tools/run_symmetry_contrast.py")
    assert run.dose_response is None and [c.act for c in r.contrasts] == list(experiments.CONTRASTS)
    seeds = r.design["test_seeds"]
    assert len(seeds) >= 2 and seeds == main.design["test_seeds"][: len(seeds)]
    assert r.design["steps"] >= 4 * 3 * main.design["steps"]  # well past the 3× longer run
    assert r.design["lrs"] == [main.chosen_lr["silu gated"]] and r.design["select_seeds"] == []
    assert all(sel == {} for sel in r.selection.values())
    for kind, final in r.final.items():
        assert [c[-1] for c in r.curves[kind]] == final and len(final) == len(seeds)
    for c in r.contrasts:
        assert c == experiments.paired_contrast(
            c.act, r.final[f"{c.act} symmetric"], r.final[f"{c.act} gated"], 0.05, 0.8
        )


def test_shipped_rate_check_rechooses_silu_rates_at_three_times_the_length():
    """Chapter 5's check of the kept rates: SiLU's kinds choose again at the 3× length on the
    confirmatory run's selection seeds, from a grid that holds the rates they kept; the choice is
    the grid's best, and a kind whose choice is unchanged reproduces the shipped 3× runs exactly."""
    from kvattn import experiments

    run = experiments.load_shipped("symmetry_contrast_silu_rates_3000")
    r = run.contrast
    powered = experiments.load_shipped("symmetry_contrast_powered").contrast
    silu_3x = experiments.load_shipped("symmetry_contrast_silu_long").contrast
    assert run.provenance["command"].startswith("python tools/run_symmetry_contrast.py")
    assert run.dose_response is None and [c.act for c in r.contrasts] == ["silu"]
    assert r.design["steps"] == silu_3x.design["steps"]
    assert r.design["select_seeds"] == powered.design["select_seeds"]
    assert r.design["test_seeds"] == silu_3x.design["test_seeds"][:2]
    assert r.lr_at_edge == []
    kept = {kind: powered.chosen_lr[kind] for kind in r.final}
    assert all(lr in r.design["lrs"] for lr in kept.values())
    _assert_each_kind_chose_the_grids_best(r)
    for kind in r.final:
        if r.chosen_lr[kind] == kept[kind]:  # seeded, one thread: bit for bit the shipped runs
            assert r.final[kind] == silu_3x.final[kind][:2]


def test_shipped_rerun_at_the_rechosen_rates_repeats_the_3x_silu_test():
    """The 3× SiLU test again, each kind at the rate the rate check chose at that length, no new
    selection, on the 3× run's seeds (so every seed pairs with its run at the kept rates); its
    first two seeds are the rate check's held-out seeds and reproduce them bit for bit."""
    from kvattn import experiments

    run = experiments.load_shipped("symmetry_contrast_silu_long_rechosen")
    r = run.contrast
    check = experiments.load_shipped("symmetry_contrast_silu_rates_3000").contrast
    silu_3x = experiments.load_shipped("symmetry_contrast_silu_long").contrast
    assert run.dose_response is None and [c.act for c in r.contrasts] == ["silu"]
    assert "--rates-from symmetry_contrast_silu_rates_3000" in run.provenance["command"]
    assert r.design["lrs"] == {kind: [check.chosen_lr[kind]] for kind in r.final}
    assert r.chosen_lr == check.chosen_lr != silu_3x.chosen_lr
    assert r.design["select_seeds"] == [] and all(sel == {} for sel in r.selection.values())
    assert r.design["steps"] == silu_3x.design["steps"]
    assert r.design["test_seeds"] == silu_3x.design["test_seeds"]
    for kind in r.final:
        assert r.final[kind][:2] == check.final[kind]  # seeded, one thread per run
        assert [c[-1] for c in r.curves[kind]] == r.final[kind]
    (c,) = r.contrasts
    assert c == experiments.paired_contrast(
        "silu", r.final["silu symmetric"], r.final["silu gated"], 0.05, 0.8
    )


def test_load_shipped_names_a_missing_key(tmp_path, monkeypatch):
    from kvattn import data, experiments

    good = json.loads(data.experiment("symmetry_contrast").read_text())
    del good["chosen_lr"]
    (tmp_path / "broken.json").write_text(json.dumps(good))
    monkeypatch.setattr(experiments, "experiment", lambda name: tmp_path / f"{name}.json")
    with pytest.raises(ValueError, match=r"missing keys \['chosen_lr'\]"):
        experiments.load_shipped("broken")


HUNT = sorted((ROOT / "data" / "collapse_hunt").glob("*.json"))


def test_the_collapse_hunt_ships_every_run_of_its_plan():
    from kvattn.data import collapse_hunt
    from kvattn.reproduce import plan

    assert sorted(p.stem for p in HUNT) == sorted(plan("collapse_hunt")["runs"])
    with pytest.raises(FileNotFoundError, match=r"no shipped collapse-hunt run .*'base'"):
        collapse_hunt("nonexistent")


@pytest.mark.parametrize("path", HUNT, ids=lambda p: p.stem)
def test_collapse_hunt_record_matches_its_plan_and_its_verdict(path):
    """Each shipped run was trained from its plan's recipe (every field, at the values of the
    day for fields added to the training code since), its trajectory covers the whole run, and
    its recorded verdict is the one its own numbers give."""
    from kvattn.data import collapse_hunt
    from kvattn.diagnostics import collapsed, load_probes
    from kvattn.pretrain import PretrainConfig
    from kvattn.reproduce import hunt_recipe, plan

    hunt = plan("collapse_hunt")
    assert collapse_hunt(path.stem) == path
    record = json.loads(path.read_text())
    recorded = dict(record["recipe"])
    assert recorded.pop("overwrite") is True  # the tool of the day forced it; the plan does not
    planned = json.loads(json.dumps(PretrainConfig(**hunt_recipe(path.stem)).to_dict()))
    planned.pop("overwrite")
    added = {k: planned.pop(k) for k in set(planned) - set(recorded)}
    assert added == {"fused_adamw": False}
    assert planned == recorded
    assert record["why"] == hunt["runs"][path.stem]["why"]
    assert record["collapse_below"] == hunt["collapse_below"]
    probes = load_probes(path)
    assert probes["step"][0] == 0 and probes["step"][-1] == record["recipe"]["steps"]
    hit = [s for i, s in enumerate(probes["step"]) if collapsed(probes, i, hunt["collapse_below"])]
    assert record["collapsed_at_step"] == (hit[0] if hit else None)
    layers, heads = (
        record["recipe"]["model"]["num_hidden_layers"],
        record["recipe"]["model"]["num_attention_heads"],
    )
    for when in ("initial", "final"):
        gain = record["row_map_gain"][when]
        assert len(gain) == layers and all(len(row) == heads and min(row) > 0 for row in gain)
    assert record["row_map_gain"]["collapse_below"] == hunt["row_map_collapse_below"]
    assert len(record["val_loss"]) >= 2 and record["wall_s"] > 0


def test_shipped_command_is_the_package_command_that_remakes_it():
    """The printed command remakes the file from its plan; the provenance keeps the command as
    it was run (here one that wrote to a scratch path)."""
    from kvattn import experiments

    moved = experiments.load_shipped("symmetry_contrast_silu_12000")
    assert "--out /tmp/dev/symmetry_contrast_silu_12000.json" in moved.provenance["command"]
    assert moved.command == "kvattn-reproduce experiment symmetry_contrast_silu_12000"
