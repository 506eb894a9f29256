"""The shipped corpora and `kvattn-reproduce`: the text every chapter reads does not depend on the
interpreter; every shipped file has a command that remakes it, and the command checks everything
before any work and never replaces what it did not make without --overwrite."""

from __future__ import annotations

import hashlib
import json
import math
import platform
import shutil
import sys
from pathlib import Path

import pytest
import torch

from kvattn import _files, data, experiments, reproduce
from kvattn.checkpoint import load_pretrained
from kvattn.data import CORPORA, corpus_snapshot, interpreter_text, load_text
from kvattn.reproduce import checkpoints as repro_checkpoints
from kvattn.reproduce import files as repro_files
from kvattn.reproduce import hunt as repro_hunt
from kvattn.reproduce.files import ReproduceError

DATA = Path(__file__).resolve().parents[1] / "data"

TINY_RECIPE = {
    "model": {
        "hidden_size": 32,
        "num_attention_heads": 2,
        "num_hidden_layers": 1,
        "num_reslayerA": 1,
        "num_denseA": 1,
    },
    "corpus": "pydoc",
    "corpus_chars": 60_000,
    "vocab_size": 400,
    "block_size": 16,
    "batch_size": 4,
    "steps": 4,
    "lr": 1e-3,
    "warmup": 2,
    "eval_every": 2,
    "eval_blocks": 2,
    "checkpoint_every": 2,
    "seed": 3,
    "out_dir": "runs/tiny",
}


# --------------------------------------------------------------------------------------------
# The corpora


def test_corpora_are_read_from_the_snapshot_not_the_interpreter(monkeypatch):
    """The book's numbers were made from CPython 3.11.7's text; another Python (Colab's 3.12
    has 492,311 characters of pydoc topics) must still read that text."""
    before = {name: load_text(name, max_chars=5_000) for name in CORPORA}
    import pydoc_data.topics
    import sysconfig

    monkeypatch.setattr(pydoc_data.topics, "topics", {"x": "another interpreter's text"})
    monkeypatch.setattr(sysconfig, "get_paths", lambda: {"stdlib": "/nonexistent"})
    for name in CORPORA:
        assert load_text(name, max_chars=5_000) == before[name]
    assert len(load_text("pydoc")) == 465_126
    assert len(load_text("stdlib")) == 12_118_699
    assert load_text("stdlib").startswith('"""Record of phased-in incompatible language changes.')


def test_corpus_snapshots_match_their_record():
    for name in CORPORA:
        snap = corpus_snapshot(name)
        assert snap.python == "3.11.7"
        text = load_text(name)
        assert len(text) == snap.chars
        assert hashlib.sha256(text.encode("utf-8")).hexdigest() == snap.sha256
    assert (DATA / "corpora" / "LICENSE").read_text().startswith("A. HISTORY OF THE SOFTWARE")


@pytest.mark.skipif(
    platform.python_version() != "3.11.7", reason="the snapshots hold CPython 3.11.7's text"
)
def test_snapshots_are_this_interpreters_text():
    for name in CORPORA:
        assert load_text(name) == interpreter_text(name)


def test_a_corrupt_snapshot_is_refused(monkeypatch, tmp_path):
    snap = corpus_snapshot("pydoc")
    bad = tmp_path / "pydoc.txt.xz"
    shutil.copyfile(snap.path, bad)
    monkeypatch.setattr(
        data.corpora,
        "corpus_snapshot",
        lambda name: data.CorpusSnapshot(name, bad, "3.11.7", 1, "0" * 64),
    )
    data.corpora._snapshot_text.cache_clear()
    try:
        with pytest.raises(ValueError, match="corrupt"):
            load_text("pydoc")
    finally:
        data.corpora._snapshot_text.cache_clear()


def test_corpus_names_and_max_chars_are_checked():
    with pytest.raises(ValueError, match="expected a corpus name"):
        corpus_snapshot("pydocs")
    with pytest.raises(ValueError, match="source must be one of"):
        interpreter_text("stdlb")
    with pytest.raises(TypeError, match="max_chars must be an int"):
        load_text("pydoc", max_chars=10.5)
    with pytest.raises(TypeError, match="max_chars must be an int"):
        load_text("pydoc", max_chars=True)


# --------------------------------------------------------------------------------------------
# Every shipped file has its command, and the plans are the designs that were run


def test_list_names_every_shipped_file(capsys):
    assert reproduce.main(["list"]) == 0
    listed = capsys.readouterr().out
    shipped = [p.relative_to(DATA).as_posix() for p in DATA.glob("*/config.json")]
    for config in shipped:
        folder = config.removesuffix("/config.json")
        if not folder.startswith("collapse_hunt"):
            assert f"data/{folder}/: " in listed
    for kind in ("trajectories", "experiments", "collapse_hunt", "benchmarks"):
        for path in (DATA / kind).glob("*.json"):
            assert f"data/{kind}/{path.name}: " in listed, path
    for folder in (DATA / "collapse_hunt").glob("*/"):
        assert f"data/collapse_hunt/{folder.name}/: kvattn-reproduce hunt --ship" in listed
    assert "data/corpora/: kvattn-reproduce corpora" in listed


def test_experiment_plans_are_the_shipped_designs():
    """Each shipped experiment's recorded design is what its plan's options give."""
    plans = reproduce.plan("experiments")["runs"]
    assert sorted(plans) == sorted(p.stem for p in (DATA / "experiments").glob("*.json"))
    for name, entry in plans.items():
        design = reproduce.contrast_design(entry["options"])
        shipped = experiments.load_shipped(name)
        recorded = json.loads(data.experiment(name).read_text())["design"]
        assert design["steps"] == recorded["steps"], name
        assert design["vocab_size"] == recorded["vocab_size"], name
        assert design["test_seeds"] == recorded["test_seeds"], name
        assert design["lrs"] == recorded["lrs"], name
        ran = sorted({c.act for c in shipped.contrast.contrasts})
        assert sorted(design["acts"]) == ran, name
        with_selection = isinstance(recorded["lrs"], list) and len(recorded["lrs"]) > 1
        if with_selection:
            assert design["select_seeds"] == recorded["select_seeds"], name
        assert (shipped.dose_response is not None) == (bool(design["betas"]) and "silu" in ran), (
            name
        )


def test_a_hunt_pilot_scales_every_run():
    assert reproduce.hunt_recipe("base")["steps"] == 6000
    assert reproduce.hunt_recipe("base", steps=600)["steps"] == 600
    assert reproduce.hunt_recipe("batch64", steps=600)["steps"] == 150
    assert reproduce.hunt_recipe("base", runs=Path("/r"))["out_dir"] == "/r/collapse_hunt/base"
    assert [p.name for p in (DATA / "collapse_hunt").glob("*/")] == (
        reproduce.plan("collapse_hunt")["shipped"]
    )


def test_a_constant_rate_run_is_its_hunt_run_held_at_its_peak_rate():
    """Issue 31's route test (data/plans/constant_rate.json): the hunt run it names, with no
    decay after warm-up and twice the steps; a pilot scales it like the hunt's runs."""
    run = reproduce.hunt_recipe("lr1e-2_wu500_constant", study="constant_rate")
    counterpart = reproduce.hunt_recipe("lr1e-2_wu500")
    changed = {k for k in run if run[k] != counterpart[k]}
    assert changed == {"steps", "min_lr_ratio", "out_dir"}
    assert (run["steps"], run["min_lr_ratio"], run["warmup"]) == (12000, 1.0, 500)
    assert run["out_dir"] == "runs/constant_rate/lr1e-2_wu500_constant"
    pilot = reproduce.hunt_recipe("lr1e-2_wu500_constant", steps=600, study="constant_rate")
    assert (pilot["steps"], pilot["warmup"], pilot["probe_every"]) == (1200, 50, 25)
    seed2 = reproduce.hunt_recipe("lr1e-2_wu500_seed2_constant", study="constant_rate")
    assert seed2["seed"] == reproduce.hunt_recipe("lr1e-2_wu500_seed2")["seed"] != run["seed"]
    with pytest.raises(ReproduceError, match="the plan constant_rate has no run 'base'"):
        reproduce.hunt_recipe("base", study="constant_rate")
    with pytest.raises(ReproduceError, match="no hunt plan 'experiments'"):
        reproduce.hunt_recipe("base", study="experiments")


def test_a_constant_rate_run_records_its_plan_and_its_command(tmp_path, monkeypatch):
    jobs = []
    monkeypatch.setattr(repro_hunt, "hunt_run", lambda *job: jobs.append(job) or tmp_path)
    argv = ["hunt", "--plan", "constant_rate", "--out", str(tmp_path / "o")]
    assert reproduce.main([*argv, "--runs", str(tmp_path / "r"), "--steps", "60"]) == 0
    assert [job[0] for job in jobs] == list(reproduce.plan("constant_rate")["runs"])
    name, cfg, *_, command, study = jobs[0]
    assert study == "constant_rate" and cfg.steps == 120 and cfg.min_lr_ratio == 1.0
    assert command == f"kvattn-reproduce hunt {name} --steps 60 --plan constant_rate"
    assert (
        repro_hunt.plan_sha256("constant_rate")
        == hashlib.sha256((DATA / "plans" / "constant_rate.json").read_bytes()).hexdigest()
    )


# --------------------------------------------------------------------------------------------
# Checks before any work


@pytest.fixture
def no_training(monkeypatch):
    """Any training fails the test: the command must refuse before it."""

    def refuse(*args, **kwargs):
        raise AssertionError("training started")

    for module, name in (
        (repro_checkpoints, "pretrain"),
        (repro_hunt, "pretrain"),
        (data, "tokenize"),
        (experiments, "symmetry_contrast"),
        (experiments, "swish_beta_dose_response"),
    ):
        monkeypatch.setattr(module, name, refuse)


def _refused(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exit_:
        reproduce.main(argv)
    assert exit_.value.code == 2
    return capsys.readouterr().err


@pytest.mark.usefixtures("no_training")
def test_bad_requests_are_refused_before_any_work(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = ["--out", str(tmp_path / "out")]
    assert "unknown hunt run ['nope']" in _refused(["hunt", "nope", *out], capsys)
    assert "must be an integer >= 1, got -100" in _refused(
        ["hunt", "base", "--steps", "-100", *out], capsys
    )
    assert "--ship needs the names" in _refused(["hunt", "--ship", *out], capsys)
    assert "unknown hunt run ['nope']" in _refused(["hunt", "--ship", "nope", *out], capsys)
    assert "no finished run to ship for ['base']" in _refused(
        ["hunt", "--ship", "base", *out], capsys
    )
    assert "unknown experiment" in _refused(["experiment", "symmetry_contrast_x", *out], capsys)
    assert "unknown recipe ['pldr']" in _refused(["checkpoint", "pldr", *out], capsys)
    assert "only PLDR-LLMs have trajectories: ['gpt_tiny']" in _refused(
        ["trajectory", "gpt_tiny", *out], capsys
    )
    assert "named twice" in _refused(["hunt", "base", "base", *out], capsys)
    assert "not a device" in _refused(["hunt", "base", "--device", "gpu0", *out], capsys)
    assert "unknown --acts ['swish']" in _refused(["contrast", "--acts", "swish", *out], capsys)
    assert "the design is refused" in _refused(["contrast", "--betas", "0.5", *out], capsys)
    assert "--resume and --overwrite" in _refused(
        ["hunt", "base", "--resume", "--overwrite", *out], capsys
    )
    assert "--resume: no run to continue" in _refused(["hunt", "base", "--resume", *out], capsys)
    assert not (tmp_path / "out").exists() and not (tmp_path / "runs").exists()


@pytest.mark.usefixtures("no_training")
def test_existing_outputs_and_runs_are_never_replaced_unasked(tmp_path, capsys):
    out = tmp_path / "out"
    record = out / "experiments" / "symmetry_contrast.json"
    record.parent.mkdir(parents=True)
    record.write_text("mine")
    err = _refused(["experiment", "symmetry_contrast", "--out", str(out)], capsys)
    assert "exist and would be replaced" in err and "--overwrite" in err
    assert record.read_text() == "mine"
    # a folder where the record goes (the audit's `--out <a directory>`)
    (out / "experiments" / "contrast.json").mkdir()
    assert "is a folder where a file goes" in _refused(["contrast", "--out", str(out)], capsys)
    # a finished run is neither restarted nor replaced without a flag
    runs = tmp_path / "runs"
    (runs / "collapse_hunt" / "base" / "checkpoint").mkdir(parents=True)
    err = _refused(["hunt", "base", "--out", str(out), "--runs", str(runs)], capsys)
    assert "these runs exist" in err and "--resume" in err and "--overwrite" in err
    # a file where a folder must go
    (tmp_path / "file").write_text("x")
    assert "is a file" in _refused(["corpora", "--out", str(tmp_path / "file" / "o")], capsys)


def test_nothing_is_written_into_an_installed_kvattn(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(repro_files, "installed_data", lambda: tmp_path / "kvattn" / "_shipped")
    err = _refused(["corpora", "--out", str(tmp_path / "kvattn" / "_shipped")], capsys)
    assert "inside the installed kvattn" in err


def test_a_failed_hunt_run_fails_the_command(tmp_path, monkeypatch, capsys):
    def fake_run(name, *args):
        if name == "wd1":
            raise FloatingPointError("non-finite loss at step 3")
        return tmp_path / f"{name}.json"

    monkeypatch.setattr(repro_hunt, "hunt_run", fake_run)
    argv = ["hunt", "base", "wd1", "--out", str(tmp_path / "o"), "--runs", str(tmp_path / "r")]
    assert reproduce.main(argv) == 1
    captured = capsys.readouterr()
    assert "wd1: FAILED" in captured.out and "base: " in captured.out
    assert "1 of 2 runs failed: ['wd1']" in captured.err


# --------------------------------------------------------------------------------------------
# Writing whole files, staging folders


def test_write_json_keeps_the_old_file_when_it_cannot_write(tmp_path):
    path = tmp_path / "r.json"
    _files.write_json(path, {"a": 1})
    with pytest.raises(ValueError, match="Out of range float"):
        _files.write_json(path, {"a": math.nan})
    assert json.loads(path.read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_shipping_a_run_keeps_the_old_folder_until_the_new_one_is_complete(tmp_path, monkeypatch):
    run = tmp_path / "run"
    run.mkdir()
    for file in reproduce.RUN_FILES:
        (run / file).write_text(f"new {file}")
    target = tmp_path / "data" / "pldr_tiny"
    target.mkdir(parents=True)
    (target / "config.json").write_text("old")
    copies = []

    def failing_copy(src, dst):
        copies.append(src)
        if len(copies) == 3:
            raise OSError(28, "No space left on device")
        shutil.copyfile(src, dst)

    monkeypatch.setattr(repro_files.shutil, "copy2", failing_copy)
    with pytest.raises(OSError, match="No space"):
        reproduce.ship_run(run, target, {"command": "test"})
    assert [p.name for p in target.iterdir()] == ["config.json"]
    assert sorted(p.name for p in target.parent.iterdir()) == ["pldr_tiny"]  # no staging left
    assert (target / "config.json").read_text() == "old"
    monkeypatch.undo()
    reproduce.ship_run(run, target, {"command": "test"})
    assert sorted(p.name for p in target.iterdir()) == sorted(
        [*reproduce.RUN_FILES, "provenance.json"]
    )
    assert (target / "config.json").read_text() == "new config.json"
    assert sorted(p.name for p in target.parent.iterdir()) == ["pldr_tiny"]


def test_a_checkpoint_is_remade_then_refused_then_replaced(tmp_path, monkeypatch, capsys):
    """End to end on a tiny recipe: the command trains, ships in data/'s layout, refuses to run
    again over its own run and output, and replaces both with --overwrite."""
    recipe = tmp_path / "recipes" / "tiny.json"
    recipe.parent.mkdir()
    recipe.write_text(json.dumps(TINY_RECIPE))
    monkeypatch.setattr(data, "recipe", lambda name: recipe)
    monkeypatch.setattr(data, "recipe_names", lambda: ["tiny"])
    out, runs = tmp_path / "out", tmp_path / "runs"
    argv = ["checkpoint", "tiny", "--out", str(out), "--runs", str(runs)]
    assert reproduce.main(argv) == 0
    shipped = sorted(p.name for p in (out / "tiny").iterdir())
    assert shipped == sorted(data.SHIPPED_FILES)
    provenance = json.loads((out / "tiny" / "provenance.json").read_text())
    assert provenance["command"] == "kvattn-reproduce checkpoint tiny"
    first = load_pretrained(out / "tiny")
    err = _refused(argv, capsys)
    assert "exist and would be replaced" in err
    assert reproduce.main([*argv, "--overwrite"]) == 0
    again = load_pretrained(out / "tiny")
    for (k, a), b in zip(first.state_dict().items(), again.state_dict().values(), strict=True):
        assert torch.equal(a, b), k  # the same recipe, the same weights
    assert sorted(p.name for p in out.iterdir()) == ["tiny"]  # no staging folders left


def test_every_console_script_names_a_main_that_exists():
    import importlib

    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11

    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    scripts = tomllib.loads(pyproject.read_text())["project"]["scripts"]
    assert set(scripts) == {
        "kvattn-reproduce",
        "kvattn-train",
        "kvattn-generate",
        "kvattn-benchmark",
    }
    for target in scripts.values():
        module, _, name = target.partition(":")
        assert callable(getattr(importlib.import_module(module), name)), target
    assert scripts["kvattn-reproduce"] == "kvattn.reproduce.cli:main"
    assert reproduce.main is sys.modules["kvattn.reproduce.cli"].main


# --------------------------------------------------------------------------------------------
# The audit's cases: each was silent, lost data or hung before


@pytest.mark.usefixtures("no_training")
def test_requests_the_audit_found_silent_are_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = ["--out", str(tmp_path / "out")]
    # --name must name one file inside --out (it wrote .json, a/b.json and ../../escaped.json)
    for name in ("", "a/b", "../../escaped", ".hidden"):
        assert "--name must be a plain name" in _refused(["contrast", "--name", name, *out], capsys)
    # --lrs beside --rates-from was ignored without a word
    assert "not allowed with argument" in _refused(
        ["contrast", "--rates-from", "symmetry_contrast", "--lrs", "0.5", *out], capsys
    )
    # --betas without SiLU skipped the dose-response without a word
    assert "needs silu in --acts" in _refused(
        ["contrast", "--acts", "gelu", "--betas", "0.5", *out], capsys
    )
    # usage errors rather than tracebacks after loading or tokenising
    assert "--rates-from nope: no shipped experiment" in _refused(
        ["contrast", "--rates-from", "nope", *out], capsys
    )
    assert "must be an integer >= 300, got 50" in _refused(
        ["contrast", "--vocab-size", "50", *out], capsys
    )
    assert "must be an integer >= 2, got 1" in _refused(
        ["trajectory", "pldr_tiny", "--probe-blocks", "1", *out], capsys
    )
    assert not (tmp_path / "out").exists() and not (tmp_path / "runs").exists()


@pytest.mark.usefixtures("no_training")
def test_outputs_never_overlap_the_runs_nor_take_the_other_kinds_place(tmp_path, capsys):
    """--out X --runs X shipped the model over its own run (losing what --resume needs); a folder
    where a record goes was found only after all the training, --overwrite or not."""
    same = str(tmp_path / "x")
    err = _refused(["checkpoint", "pldr_tiny", "--out", same, "--runs", same], capsys)
    assert "overlap" in err
    out = tmp_path / "out"
    (out / "experiments" / "mine.json").mkdir(parents=True)
    err = _refused(["contrast", "--name", "mine", "--out", str(out), "--overwrite"], capsys)
    assert "is a folder where a file goes" in err
    (out / "corpora").parent.mkdir(exist_ok=True)
    (out / "corpora").write_text("a file")
    err = _refused(["corpora", "--out", str(out), "--overwrite"], capsys)
    assert "is a file where a folder goes" in err


def test_the_corpora_are_remade_whole_or_not_at_all(tmp_path, capsys, monkeypatch):
    """The licence was looked for after both snapshots were written; a folder holding someone
    else's files is not replaced."""
    import os

    monkeypatch.setattr(os, "__file__", str(tmp_path / "no_python" / "os.py"))
    assert "no licence file" in _refused(["corpora", "--out", str(tmp_path / "out")], capsys)
    assert not (tmp_path / "out").exists()
    monkeypatch.undo()
    folder = tmp_path / "out" / "corpora"
    folder.mkdir(parents=True)
    (folder / "notes.txt").write_text("mine")
    err = _refused(["corpora", "--out", str(tmp_path / "out"), "--overwrite"], capsys)
    assert "did not make" in err and "notes.txt" in err
    assert (folder / "notes.txt").read_text() == "mine"


def test_a_vocabulary_the_text_cannot_hold_is_refused_before_any_training(
    tmp_path, capsys, monkeypatch
):
    def refuse(*args, **kwargs):
        raise AssertionError("training started")

    monkeypatch.setattr(experiments, "symmetry_contrast", refuse)
    err = _refused(["contrast", "--vocab-size", "100000", "--out", str(tmp_path)], capsys)
    assert "--vocab-size 100000: cannot train a 100000-piece tokenizer" in err


def test_a_hunt_pilot_keeps_the_shape_of_its_schedule():
    """--steps 600 kept a warm-up of 2,000 steps, so the pilot never reached its peak rate."""
    full = reproduce.hunt_recipe("lr3e-2_wu2000")
    pilot = reproduce.hunt_recipe("lr3e-2_wu2000", steps=600)
    assert (full["steps"], full["warmup"]) == (6000, 2000)
    assert (pilot["steps"], pilot["warmup"], pilot["probe_every"]) == (600, 200, 25)
    assert pilot["eval_every"] == pilot["checkpoint_every"] == 50


def die(job):
    """A hunt job whose worker process is killed (as the out-of-memory killer would)."""
    import os

    if job[0] == "killed":
        os._exit(9)
    return job[0], True, f"{job[0]}: done"


@pytest.mark.slow
def test_a_killed_hunt_worker_is_reported_not_waited_for(monkeypatch, capsys):
    """With --workers 2, a worker killed by a signal left the parent waiting forever."""
    monkeypatch.setattr(repro_hunt, "_job", die)
    results = repro_hunt.run_hunts([("killed",), ("other",)], workers=2)
    assert {name for name, ok, _ in results if not ok} >= {"killed"}
    assert "killed: FAILED: a worker process died" in capsys.readouterr().out


@pytest.mark.usefixtures("no_training")
def test_only_a_finished_verified_run_is_shipped(tmp_path, capsys):
    """--ship shipped an empty run folder's FileNotFoundError after the checks, and a folder of
    junk as a model."""
    runs = tmp_path / "runs"
    ckpt = runs / "collapse_hunt" / "base" / "checkpoint"
    ckpt.mkdir(parents=True)
    argv = ["hunt", "--ship", "base", "--out", str(tmp_path / "out"), "--runs", str(runs)]
    assert "is not a finished run: it lacks ['config.json'" in _refused(argv, capsys)
    for file in reproduce.RUN_FILES:
        (ckpt / file).write_text("junk")
    assert "does not hold a valid checkpoint" in _refused(argv, capsys)
    assert not (tmp_path / "out").exists()


def test_a_run_that_has_not_finished_is_not_shipped(tmp_path, monkeypatch):
    recipe = tmp_path / "tiny.json"
    recipe.write_text(json.dumps(TINY_RECIPE))
    monkeypatch.setattr(data, "recipe", lambda name: recipe)
    monkeypatch.setattr(data, "recipe_names", lambda: ["tiny"])
    cfg = reproduce.checkpoint_config("tiny", tmp_path / "runs", overwrite=False)
    repro_checkpoints.pretrain(cfg, progress=False)
    ckpt = Path(cfg.out_dir) / "checkpoint"
    repro_files.check_finished_run(ckpt, TINY_RECIPE["steps"])
    with pytest.raises(repro_files.ReproduceError, match="has done 4 of its 6 steps"):
        repro_files.check_finished_run(ckpt, 6)


def test_a_file_at_the_staging_name_is_refused_by_name(tmp_path):
    """A file where the staging folder goes gave a bare FileExistsError from mkdir."""
    target = tmp_path / "out" / "pldr_tiny"
    target.parent.mkdir()
    (tmp_path / "out" / "pldr_tiny.kvattn-staging").write_text("mine")
    with pytest.raises(ValueError, match="kvattn-staging"):
        repro_files.stage_folder(target)
    assert (tmp_path / "out" / "pldr_tiny.kvattn-staging").read_text() == "mine"
