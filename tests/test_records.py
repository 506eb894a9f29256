"""The experiment-records appendix (kvattn.course.records): every shipped run appears once, in
the order the repository's history gives, with the design, role, results and commands its files
hold, and the facts the plans' records state are the data's."""

from __future__ import annotations

import json
import shutil
import subprocess
from itertools import pairwise
from pathlib import Path

import pytest
from scipy import stats

from kvattn import reproduce
from kvattn.course import records
from kvattn.data import HUNT_STUDIES

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "data"
EXPERIMENTS = sorted(p.stem for p in (DATA / "experiments").glob("*.json"))
HUNT = sorted(p.stem for p in (DATA / "collapse_hunt").glob("*.json"))

#: Chapter 5's runs in the order their results were first shipped (git log of
#: data/experiments/): runs of one commit share a rank.
MADE = [
    (1, "symmetry_contrast_pilot"),  # d3cf807
    (2, "symmetry_contrast"),  # b868124 (760803e had shipped a 20-step smoke run in its place)
    (3, "symmetry_contrast_long"),  # c97238a
    (4, "symmetry_contrast_silu_powered"),  # 2c159f9
    (5, "symmetry_contrast_horizon"),  # 1d11372
    (5, "symmetry_contrast_powered"),  # 1d11372
    (6, "symmetry_contrast_gelu_relu_long"),  # 29773fa
    (6, "symmetry_contrast_silu_long"),  # 29773fa
    (7, "symmetry_contrast_silu_12000"),  # 2a61bf6
    (7, "symmetry_contrast_silu_rates_3000"),  # 2a61bf6
    (8, "symmetry_contrast_silu_long_rechosen"),  # d0da7f3
    (9, "symmetry_contrast_gelu_12000"),  # c1e699c
    (10, "symmetry_contrast_relu_12000"),  # 1f1f239
]
EXPLORATORY = {"pilot", "silu_powered", "horizon", "silu_rates_3000", "silu_long_rechosen"}


def raw(name: str) -> dict:
    return json.loads((DATA / "experiments" / f"{name}.json").read_text())


def hunt_raw(name: str) -> dict:
    return json.loads((DATA / "collapse_hunt" / f"{name}.json").read_text())


def plan_record(name: str) -> dict:
    return reproduce.plan("experiments")["runs"][name]["record"]


# --------------------------------------------------------------------------------------------
# Every shipped run, once, in the committed order


def test_every_shipped_experiment_appears_exactly_once_in_each_table():
    shorts = sorted(records.short(n) for n in EXPERIMENTS)
    assert len(EXPERIMENTS) == 13
    for table in (
        records.experiment_runs(),
        records.experiment_designs(),
        records.experiment_commands(),
    ):
        assert sorted(table.column("run")) == shorts
    # the results: one row per contrast the run's file holds
    results = records.experiment_results().column("run")
    for name in EXPERIMENTS:
        assert results.count(records.short(name)) == len(raw(name)["contrasts"]), name


def test_every_hunt_run_appears_exactly_once_in_each_table():
    assert len(HUNT) == 10
    for table in (records.hunt_designs(), records.hunt_results(), records.hunt_commands()):
        assert sorted(table.column("run")) == HUNT


def test_the_order_is_the_committed_one():
    assert records.experiment_order() == MADE
    assert records.experiment_runs().column("#") == [str(rank) for rank, _ in MADE]
    assert [records.short(n) for _, n in MADE] == records.experiment_designs().column("run")


def test_the_hunts_first_round_is_the_one_its_checkpoint_interval_shows():
    """The first two runs checkpointed every 1,000 steps, the later ones every 500."""
    order = records.hunt_order()
    first = [n for made, n in order if made == 1]
    assert first == ["base", "lr1e-2_wu500"]
    assert [made for made, _ in order] == [1, 1] + [2] * 8
    for _, name in order:
        every = hunt_raw(name)["recipe"]["checkpoint_every"]
        assert every == (1000 if name in first else 500), name


def _git(*args: str) -> str | None:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        return None
    done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)
    return done.stdout if done.returncode == 0 else None


def test_each_runs_commit_shipped_its_file_when_the_history_is_here():
    """The plan's record names the commit that first shipped each run's final results: one that
    changed its file, at the date it records (skipped in a clone without that history)."""
    runs = reproduce.plan("experiments")["runs"]
    checked = 0
    for name, run in runs.items():
        commit, date = run["record"]["shipped"]["commit"], run["record"]["shipped"]["date"]
        if _git("cat-file", "-e", f"{commit}^{{commit}}") is None:
            continue
        log = _git(
            "log",
            "--format=%h %ad",
            "--date=format:%Y-%m-%d %H:%M",
            "--",
            f"data/experiments/{name}.json",
        )
        assert log is not None
        touched = [line.split(" ", 1) for line in log.splitlines()]
        hashes = [h for h, _ in touched]
        assert any(h.startswith(commit) or commit.startswith(h) for h in hashes), name
        when = dict(touched)
        assert when[next(h for h in hashes if h.startswith(commit) or commit.startswith(h))] == date
        checked += 1
    if not checked:
        pytest.skip("the repository's history is not here (a shallow clone or an install)")


# --------------------------------------------------------------------------------------------
# A known run: design, role, results and command as its file holds them


def test_the_confirmatory_runs_row_matches_its_file():
    name = "symmetry_contrast_powered"
    shipped = raw(name)
    design = records.experiment_designs()
    row = dict(zip(design.columns, design.rows[design.column("run").index("powered")], strict=True))
    assert row["steps"] == "1,000" == f"{shipped['design']['steps']:,}"
    assert shipped["design"]["test_seeds"] == list(range(8, 44))
    assert row["test seeds"] == "36 (8-43)"
    assert row["σ"] == "silu, gelu, relu"
    assert row["rates"].startswith("chosen from 0.0035, 0.005, 0.007, 0.01, 0.014, 0.02 on 2")
    assert "silu symmetric 0.005; silu gated 0.007" in row["rates"]
    assert shipped["chosen_lr"]["silu symmetric"] == 0.005
    assert row["seeds trained before"] == "silu_powered"  # fresh for GELU and ReLU, not SiLU

    runs = records.experiment_runs()
    assert runs.rows[runs.column("run").index("powered")][2] == "confirmatory"

    results = records.experiment_results()
    rows = [r for r in results.rows if r[0] == "powered"]
    assert [r[1] for r in rows] == [c["act"] for c in shipped["contrasts"]]
    for r, c in zip(rows, shipped["contrasts"], strict=True):
        half = stats.t.ppf(0.975, c["n"] - 1) * c["se"]  # the 95 % interval, computed here
        assert r[2] == f"{c['mean']:+.4f} ± {c['se']:.4f}"
        assert r[3] == f"[{c['mean'] - half:+.4f}, {c['mean'] + half:+.4f}]"
        assert r[5] == "36" and r[6] == f"{c['mde']:.4f}"
    assert rows[0][2] == "+0.0131 ± 0.0026" and rows[0][3] == "[+0.0079, +0.0184]"

    commands = records.experiment_commands()
    row = commands.rows[commands.column("run").index("powered")]
    assert row[1] == "kvattn-reproduce experiment symmetry_contrast_powered"
    assert row[2] == shipped["provenance"]["command"]


def test_every_command_is_the_one_kvattn_reproduce_lists():
    listed = reproduce.listing()
    for remade in records.experiment_commands().column("remade by"):
        assert f": {remade}\n" in listed + "\n", remade
    for remade in records.hunt_commands().column("remade by"):
        for command in remade.split("; its model: "):
            assert f": {command}\n" in listed + "\n", command


def test_the_dose_response_row_is_the_first_runs():
    dose = raw("symmetry_contrast")["dose_response"]
    table = records.dose_results()
    assert table.rows == (
        (
            "first",
            "0.25, 0.5, 1, 2, 8",
            "8",
            f"{dose['slope']:+.4f} ± {dose['slope_se']:.4f}",
            f"{dose['slope_p']:.2g}",
        ),
    )
    assert sum(raw(n).get("dose_response") is not None for n in EXPERIMENTS) == 1


def test_the_nearest_hunt_runs_rows_match_its_file():
    name = "lr1e-2_wu500_seed2"
    rec = hunt_raw(name)
    results = records.hunt_results()
    row = results.rows[results.column("run").index(name)]
    assert row[1] == f"{rec['val_loss'][-1]:.3f}" == "3.013"
    assert row[2] == ", ".join(f"{v:.2g}" for v in rec["G_order_rms"][-1])
    assert row[3] == ", ".join(f"{v:.2g}" for v in rec["A_sigma_ratio"][-1])
    assert row[4] == ", ".join(f"{min(g):.2g}" for g in rec["row_map_gain"]["final"])
    assert rec["collapsed_at_step"] is None and row[5] == "not met"
    designs = records.hunt_designs()
    row = designs.rows[designs.column("run").index(name)]
    assert row[2:5] == ("exploratory", "lr 0.01; warmup 500; seed 2", "6,000 × 16")
    assert (rec["recipe"]["lr"], rec["recipe"]["warmup"], rec["recipe"]["seed"]) == (0.01, 500, 2)
    commands = records.hunt_commands()
    row = commands.rows[commands.column("run").index(name)]
    assert "kvattn-reproduce hunt --ship lr1e-2_wu500_seed2" in row[1]
    assert row[2] == rec["command"]
    batch = designs.rows[designs.column("run").index("batch64")]
    assert batch[4] == "1,500 × 64"


# --------------------------------------------------------------------------------------------
# Roles and the facts the plans' records state


def test_roles_are_those_of_chapter_5s_ledger_and_the_hunt_is_exploratory():
    assert records.role_counts() == (
        "chapter 5's symmetry contrast: 13 runs (8 confirmatory, 5 exploratory)\n"
        "the collapse hunt: 10 runs (10 exploratory)"
    )
    runs = records.experiment_runs()
    roles = dict(zip(runs.column("run"), runs.column("role"), strict=True))
    assert {run for run, role in roles.items() if role == "exploratory"} == EXPLORATORY


def test_the_seeds_trained_before_are_the_overlaps_of_the_files():
    before = records.seeds_used_before()
    assert before["symmetry_contrast_silu_powered"] == []  # seeds 8-43 were fresh then
    assert before["symmetry_contrast_powered"] == ["symmetry_contrast_silu_powered"]
    assert raw("symmetry_contrast_silu_powered")["design"]["test_seeds"] == list(range(8, 44))
    # the longer tests reuse the confirmatory run's seeds, by design
    assert before["symmetry_contrast_gelu_relu_long"] == ["symmetry_contrast_powered"]
    # runs of one commit are not "before" each other
    assert "symmetry_contrast_silu_rates_3000" not in before["symmetry_contrast_silu_12000"]


def test_the_facts_the_records_state_are_the_datas():
    pilot = raw("symmetry_contrast_pilot")
    assert set(pilot["chosen_lr"].values()) == {max(pilot["design"]["lrs"])}  # the grid's top
    first = raw("symmetry_contrast")
    assert len(set(first["chosen_lr"].values())) == 1  # every kind chose the same rate
    assert all(c["mde"] > 0.01 for c in first["contrasts"])  # too few pairs for 0.01
    assert all(c["mde"] > 0.01 for c in raw("symmetry_contrast_long")["contrasts"])
    kept = raw("symmetry_contrast_powered")["chosen_lr"]["silu symmetric"]
    rechosen = raw("symmetry_contrast_silu_rates_3000")["chosen_lr"]["silu symmetric"]
    assert rechosen != kept  # SiLU symmetric chose another rate at 3x
    assert (
        raw("symmetry_contrast_silu_long_rechosen")["chosen_lr"]
        == raw("symmetry_contrast_silu_rates_3000")["chosen_lr"]
    )
    for name in ("silu_12000", "gelu_12000", "relu_12000"):
        assert plan_record(f"symmetry_contrast_{name}")["role"] == "confirmatory"
        assert len(plan_record(f"symmetry_contrast_{name}")["deviations"]) == 2


def test_deviations_flag_the_command_that_relied_on_old_defaults():
    assert records.command_mismatch("symmetry_contrast_pilot") == ["vocab_size", "lrs"]
    for name in EXPERIMENTS:
        if name != "symmetry_contrast_pilot":
            assert records.command_mismatch(name) == [], name
    table = records.experiment_deviation_table()
    by_run = {}
    for run, deviation in table.rows:
        by_run.setdefault(run, []).append(deviation)
    assert set(by_run) == {
        "pilot",
        "silu_powered",
        "powered",
        "silu_12000",
        "gelu_12000",
        "relu_12000",
    }
    assert any(
        raw("symmetry_contrast_powered")["provenance"]["extended"] in d for d in by_run["powered"]
    )
    assert "vocab_size, lrs" in by_run["pilot"][0]


# --------------------------------------------------------------------------------------------
# The pieces


def test_recorded_options_drop_where_and_how_fast_a_run_ran():
    command = "python tools/run_symmetry_contrast.py --workers 2 --steps 300 --out /tmp/x.json"
    assert records.recorded_options(command) == ["--steps", "300"]
    with pytest.raises(ValueError, match="not a command of the experiment tool"):
        records.recorded_options("python tools/collapse_hunt.py base")


def test_short_names():
    assert records.short("symmetry_contrast") == "first"
    assert records.short("symmetry_contrast_silu_long") == "silu_long"


def test_a_table_escapes_its_cells_and_refuses_ragged_rows():
    table = records.Table(("a", "b"), (("<b>", "x & y"),), breakable=("b",))
    html = table._repr_html_()
    assert "&lt;b&gt;" in html and "x &amp; y" in html and "<b>" not in html
    assert html.count("overflow-wrap:anywhere") == 2  # the header and the cell of column b
    assert table.column("b") == ["x & y"]
    with pytest.raises(KeyError, match="no column 'c'"):
        table.column("c")
    with pytest.raises(ValueError, match="a row of 1 cells under 2 columns"):
        records.Table(("a", "b"), (("only",),))
    with pytest.raises(ValueError, match=r"breakable columns \['c'\] are not among"):
        records.Table(("a", "b"), (), breakable=("c",))


def test_a_plan_run_without_a_valid_role_is_refused(monkeypatch):
    real = records.plan

    def broken(name):
        p = real(name)
        p["runs"]["symmetry_contrast"]["record"]["role"] = "confirmed"
        return p

    monkeypatch.setattr(records, "plan", broken)
    with pytest.raises(ValueError, match="needs a record whose role is one of"):
        records.experiment_order()


def test_the_facts_the_pages_prose_states_are_the_datas():
    """book/experiment_records.ipynb says: one-layer models; ten hunt runs, probed every 250
    steps, the base trained three times longer than the sweep's run of its recipe."""
    assert all(raw(n)["design"]["n_layers"] == 1 for n in EXPERIMENTS)
    assert len(HUNT) == 10
    for name in HUNT:
        steps = hunt_raw(name)["step"]
        assert {b - a for a, b in pairwise(steps)} == {250}, name
    hunt = reproduce.plan("collapse_hunt")
    sweep = json.loads((DATA / "recipes" / f"{hunt['base_recipe']}.json").read_text())
    assert hunt_raw("base")["recipe"]["steps"] == 3 * sweep["steps"]


def test_every_planned_run_shipped_appears_once_with_its_plan_as_run():
    table = records.planned_runs()
    shipped = sorted(
        (path.stem, study) for study in HUNT_STUDIES for path in (DATA / study).glob("*.json")
    )
    assert sorted(zip(table.column("run"), table.column("plan"), strict=True)) == shipped
    assert set(table.column("plan as run")) == {"yes"}
    for run, study, remade in zip(
        table.column("run"), table.column("plan"), table.column("remade by"), strict=True
    ):
        assert remade == f"kvattn-reproduce hunt {run} --plan {study}"
