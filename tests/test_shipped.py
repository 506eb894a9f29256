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
    # load_shipped looks the file up in its own module
    monkeypatch.setattr(experiments.records, "experiment", lambda name: tmp_path / f"{name}.json")
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


# Chapter 5's prose: every number it writes from a shipped run, recomputed here from
# data/experiments/ and looked up in the chapter's Markdown (so the two cannot drift apart).
CHAPTER5 = ROOT / "notebooks" / "05_beyond_rank_one.ipynb"


def _chapter5_markdown() -> str:
    cells = json.loads(CHAPTER5.read_text(encoding="utf-8"))["cells"]
    text = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    return " ".join(text.split())  # one space between words: prose wraps anywhere


def _markdown_between(start: str, end: str) -> str:
    text = _chapter5_markdown()
    return text[text.index(start) : text.index(end, text.index(start))]


def _ch5():
    from kvattn import experiments

    load = experiments.load_shipped
    runs = {
        "first": load("symmetry_contrast").contrast,
        "first_3x": load("symmetry_contrast_long").contrast,
        "silu_shared": load("symmetry_contrast_silu_powered").contrast,
        "confirmatory": load("symmetry_contrast_powered").contrast,
        "silu_3x": load("symmetry_contrast_silu_long").contrast,
        "gelu_relu_3x": load("symmetry_contrast_gelu_relu_long").contrast,
        "rates_3x": load("symmetry_contrast_silu_rates_3000").contrast,
        "rechosen": load("symmetry_contrast_silu_long_rechosen").contrast,
    }
    runs["horizon_tests"] = [
        load(f"symmetry_contrast_{a}_12000").contrast.contrasts[0] for a in ("silu", "gelu", "relu")
    ]
    runs["three_x"] = runs["silu_3x"].contrasts + runs["gelu_relu_3x"].contrasts
    runs["dose"] = load("symmetry_contrast").dose_response
    return runs


@pytest.mark.slow  # nine numerical integrations for the design's power
def test_chapter5_answer_states_what_the_shipped_runs_support():
    """The answer box (top and end): the 1,000-step leads, the SiLU range over rate pairs, the
    3,000-step equivalence and its power, the 12,000-step verdicts and their design's power."""
    from kvattn.course import contrast_report as R

    r = _ch5()
    answer = _markdown_between(":::{admonition} The answer :class:", " :::")
    assert _chapter5_markdown().count(answer[answer.index("In these") :]) == 2  # top and end
    conf = r["confirmatory"].contrasts
    assert [c.n for c in conf] == [36, 36, 36]
    means = sorted(c.mean for c in conf)
    assert f"+{means[0]:.4f} to +{means[-1]:.4f} nats/token (36 paired seeds" in answer
    assert all(v.verdict == "gated lower" for v in R.verdicts(conf).values())
    pairs = R.rate_pairs([r["silu_shared"], r["confirmatory"]])
    assert f"+{min(c.mean for c in pairs.values()):.4f} to " in answer
    assert f"+{max(c.mean for c in pairs.values()):.4f} across four pairs" in answer
    assert r["confirmatory"].design["steps"] == 1000
    assert "at the end of a 1,000-step budget" in answer and "faster" not in answer
    three = R.verdicts(r["three_x"])
    assert {v.verdict for v in three.values()} == {"within ±0.01"}
    powers = sorted(round(v.power, 2) for v in three.values())
    assert f"power {powers[0]:.2f} to {powers[-1]:.2f}" in answer
    flat = R.verdicts(r["horizon_tests"])
    assert [v.verdict for v in flat.values()] == ["within ±0.01", "not resolved", "not resolved"]
    ns = [c.n for c in r["horizon_tests"]]
    planned = R.family_equivalence_power([c.sd for c in r["three_x"]], ns)
    realised = R.family_equivalence_power([c.sd for c in r["horizon_tests"]], ns)
    assert f"probability about {planned:.2f} even" in answer
    assert f"(about {realised:.2f} at the spread" in answer


def test_chapter5_tools_and_results_prose():
    from kvattn.course import contrast_report as R

    r = _ch5()
    text = _chapter5_markdown()
    mdes = sorted(c.mde for c in r["first"].contrasts)
    assert f"from {mdes[0]:.3f} to {mdes[-1]:.3f} nats/token, are all" in text
    assert max(stats.pairs_needed(c.sd, 0.01) for c in r["first"].contrasts) == 36
    assert "the largest of these numbers, 36 pairs" in text
    # the Holm example is the 12,000-step family's equivalence p-values
    eq = [c.equivalence_p(0.01) for c in r["horizon_tests"]]
    assert [round(p, 4) for p in eq] == [0.0158, 0.0456, 0.0254]
    assert stats.holm(eq) == [True, False, False] and 0.025 < eq[2] < 0.0255 < 0.05 > eq[1]
    assert "the next (0.0254) misses α/2 = 0.025" in text and "so 0.0456 is not" in text
    # at 1,000 steps every estimate is above 0.01; at 3,000 and 12,000 every 90 % interval
    # lies inside ±0.01
    assert all(c.mean > 0.01 for c in r["confirmatory"].contrasts)
    assert all(c.equivalence_p(0.01) < 0.05 for c in r["three_x"] + r["horizon_tests"])
    assert stats.holm([eq[0], eq[1]]) == [True, True]  # SiLU and GELU alone: GELU passes
    assert R.verdicts(r["horizon_tests"])["gelu"].verdict == "not resolved"


def test_chapter5_paired_trajectory_is_the_paired_test_at_every_evaluation():
    """contrast_report.paired_trajectory, which draws chapter 5's figure of the difference along
    the long runs: at each evaluation it is stats.paired_difference of the two kinds' losses at
    that step, with its t interval; Bonferroni widens every interval; steps count from 1."""
    from kvattn import experiments
    from kvattn.course import contrast_report as R

    run = experiments.load_shipped("symmetry_contrast_silu_12000").contrast
    t = R.paired_trajectory(run, "silu")
    wide = R.paired_trajectory(run, "silu", bonferroni=True)
    assert t.steps == [s + 1 for s in run.eval_steps] and t.n == 15
    assert wide.level_each == pytest.approx(1 - 0.05 / len(run.eval_steps))
    for i in (0, 9, len(t.steps) - 1):
        d = stats.paired_difference(
            [c[i] for c in run.curves["silu symmetric"]], [c[i] for c in run.curves["silu gated"]]
        )
        assert (t.mean[i], t.se[i], t.p[i]) == pytest.approx((d.mean, d.se, d.p))
        assert (t.lower[i], t.upper[i]) == pytest.approx(stats.t_interval(d.mean, d.se, d.n))
        assert wide.lower[i] < t.lower[i] < t.upper[i] < wide.upper[i]
    # the final evaluation is the shipped contrast itself
    assert t.mean[-1] == pytest.approx(run.contrasts[0].mean)
    assert set(wide.below_zero()) < set(t.below_zero())
    with pytest.raises(ValueError, match="no curves"):
        R.paired_trajectory(run, "gelu")
    with pytest.raises(ValueError, match="level"):
        R.paired_trajectory(run, "silu", level=1.5)


def test_chapter5_pairing_rows_measure_what_pairing_cancels():
    """contrast_report.pairing_rows: r is Pearson's correlation of the two kinds' final losses
    and ratio the paired spread over the unpaired one, √(1 − r) when both spread alike; runs
    with fewer pairs than asked are left out."""
    import numpy as np

    from kvattn import experiments
    from kvattn.course import contrast_report as R

    run = experiments.load_shipped("symmetry_contrast_powered").contrast
    rows = R.pairing_rows({"powered": run})
    assert [row["σ"] for row in rows] == ["silu", "gelu", "relu"]
    for row in rows:
        s = np.array(run.final[f"{row['σ']} symmetric"])
        g = np.array(run.final[f"{row['σ']} gated"])
        r = np.corrcoef(s, g)[0, 1]
        ratio = np.std(s - g, ddof=1) / np.hypot(np.std(s, ddof=1), np.std(g, ddof=1))
        assert row["r"] == f"{r:+.2f}" and row["ratio"] == f"{ratio:.2f}"
    assert (
        R.pairing_rows({"map": experiments.load_shipped("symmetry_contrast_horizon").contrast})
        == []
    )
    with pytest.raises(ValueError, match="at least one run"):
        R.pairing_rows({})


def test_chapter5_rate_pairs_prose():
    """The rate-pair paragraph and the evolution box: the four SiLU pairs at 1,000 steps, the
    symmetric kind's chosen rate doing worse on the test seeds, the 3,000-step pairs."""
    from kvattn.course import contrast_report as R
    from kvattn.experiments import paired_contrast

    r = _ch5()
    text = _chapter5_markdown()
    shared, conf = r["silu_shared"], r["confirmatory"]
    assert shared.design["test_seeds"] == conf.design["test_seeds"] == list(range(8, 44))
    assert "seeds 8–43" in text
    pairs = R.rate_pairs([shared, conf])
    by_size = sorted(pairs.items(), key=lambda kv: -kv[1].mean)
    (top, _), (second, _), (third, _), (last, _) = ((f"+{c.mean:.4f}", 0) for _, c in by_size)
    assert f"four pairs give {top} (the reported test" in text
    assert f"0.007), {second}, {third} and {last}." in text
    assert "(" + ", ".join(f"+{c.mean:.4f}" for _, c in reversed(by_size)) + ")" in text
    reported = pairs[(conf.chosen_lr["silu symmetric"], conf.chosen_lr["silu gated"])]
    assert by_size[0][1] == reported and (
        conf.chosen_lr["silu symmetric"],
        conf.chosen_lr["silu gated"],
    ) == (0.005, 0.007)
    assert (
        "symmetric at 0.005 and gated at\n0.007" in text
        or "symmetric at 0.005 and gated at 0.007" in text
    )
    assert shared.chosen_lr["silu symmetric"] == 0.01
    worse = paired_contrast(
        "silu", conf.final["silu symmetric"], shared.final["silu symmetric"], 0.05, 0.8
    )
    assert (f"{worse.mean:.4f}", f"{worse.se:.4f}", f"{worse.p:.1g}") == (
        "0.0063",
        "0.0020",
        "0.004",
    )
    assert text.count("by 0.0063 ± 0.0020") == 2  # the rate paragraph and the evolution box
    assert text.count("(p = 0.004)") == 2
    assert all(c.mean > 0 for c in pairs.values())  # the sign holds at every pair
    assert sorted(c.p < 0.05 for c in pairs.values()) == [False, True, True, True]
    assert "holds at all four rate pairs and three of them resolve it" in text
    # the better pair for the symmetric kind (its loss is lower at 0.01) halves the contrast
    assert 0.4 < pairs[(0.01, 0.007)].mean / reported.mean < 0.6
    (first_silu,) = shared.contrasts
    assert (f"{first_silu.mean:+.4f}", f"{first_silu.se:.4f}", f"{first_silu.p:.2f}") == (
        "+0.0039",
        "0.0030",
        "0.21",
    )
    assert "+0.0039 ± 0.0030 (p = 0.21)" in text
    # 3,000 steps: from the rerun at the re-chosen rates to the designed test, all inside ±0.01
    at_3x = R.rate_pairs([r["silu_3x"], r["rechosen"]])
    low, high = min(c.mean for c in at_3x.values()), max(c.mean for c in at_3x.values())
    assert (
        f"from {low:.4f}".replace("-", "−") in text
        and f"to +{high:.4f} (the designed test)" in text
    )
    assert at_3x[(0.007, 0.005)].mean == low and at_3x[(0.005, 0.007)].mean == high
    assert all(-0.01 < c.interval(0.95)[0] and c.interval(0.95)[1] < 0.01 for c in at_3x.values())
    assert r["rates_3x"].chosen_lr == {"silu symmetric": 0.007, "silu gated": 0.005}
    assert "(symmetric 0.007, gated 0.005)" in text
    (re,) = r["rechosen"].contrasts
    assert f"{re.mean:+.4f} ± {re.se:.4f} (p = {re.p:.1g})".replace("-", "−") in text


def test_chapter5_evolution_box():
    """The order of the runs and the figures the box gives for the earlier runs."""
    r = _ch5()
    box = _markdown_between(":::{admonition} How this experiment evolved", " ::: ")
    first = r["first"]
    assert first.design["test_seeds"] == list(range(8)) and "8 pairs (seeds 0–7)" in box
    assert len(set(first.chosen_lr.values())) == 1 and len(first.design["select_seeds"]) == 1
    held = stats.holm([c.p for c in first.contrasts])
    assert held == [False, False, True] and all(c.mde > 0.01 for c in first.contrasts)
    long = r["first_3x"]
    assert long.design["steps"] == 3000 and len(long.design["test_seeds"]) == 8
    assert max(abs(c.mean) for c in long.contrasts) < 0.0015 + 5e-5
    assert all(c.p > 0.05 for c in long.contrasts)
    assert "every estimate within 0.0015 of zero" in box
    assert len(r["confirmatory"].design["select_seeds"]) == 2 and "two selection seeds" in box
    assert not set(r["confirmatory"].design["test_seeds"]) & set(first.design["test_seeds"])
    order = ["First run", "same design at 3,000", "SiLU test on 36", "confirmatory run"]
    order += ["12,000-step map", "3,000-step follow-ups", "SiLU at 12,000", "GELU, then ReLU"]
    assert [box.index(s) for s in order] == sorted(box.index(s) for s in order)


def test_chapter5_fresh_seed_sentence_is_gone_and_dose_prose_holds():
    from kvattn.experiments import paired_contrast

    r = _ch5()
    text = _chapter5_markdown()
    assert "no earlier run used" not in text
    dose = r["dose"]
    assert dose.betas == [0.25, 0.5, 1.0, 2.0, 8.0]
    means = [sum(f) / len(f) for f in dose.final]
    violation = [sum(v) / len(v) for v in dose.violation]
    assert means[0] > means[1] > means[2] > means[3] < means[4]  # falls to β = 2, rises at 8
    assert violation[4] < violation[3]  # the measured violation stopped growing
    assert "falls from β = 0.25 to β = 2, and then rises again at β = 8" in text
    steps = [
        paired_contrast("", dose.final[i + 1], dose.final[i], 0.05, 0.8)
        for i in range(len(dose.betas) - 1)
    ]
    assert [s.p < 0.05 for s in steps] == [True, False, False, True]  # the first and the last
    assert "the first (out of the nearly bilinear end) and the last" in text
