"""Issue 40, part 1: every kind of file the course reads goes through its schema
(:mod:`kvattn.schema`). Each kind is corrupted three ways (cut short, a field of the wrong type,
a field missing) in a copy of data/, and the error must name the file and the field."""

import json
import lzma
import shutil
from pathlib import Path

import pytest

from kvattn import data, reproduce, schema
from kvattn.reproduce import hunt as repro_hunt

DATA = Path(__file__).resolve().parents[1] / "data"

# (locator, its file under data/, a field to give the wrong type, that type, a required field)
KINDS = [
    (lambda: data.plan("collapse_hunt"), "plans/collapse_hunt.json", "collapse_below", "x", "runs"),
    (lambda: data.plan("metric_depth"), "plans/metric_depth.json", "runs", [], "question"),
    (lambda: data.plan("experiments"), "plans/experiments.json", "runs", "all", "about"),
    (lambda: data.recipe("pldr_tiny"), "recipes/pldr_tiny.json", "steps", "many", "model"),
    (lambda: data.collapse_hunt("base"), "collapse_hunt/base.json", "wall_s", "slow", "step"),
    (
        lambda: data.hunt_study("hunt_reruns", "base"),
        "hunt_reruns/base.json",
        "collapsed_at_step",
        "never",
        "recipe",
    ),
    (
        lambda: data.trajectory("pldr_tiny"),
        "trajectories/pldr_tiny.json",
        "probe_every",
        0,
        "command",
    ),
    (
        lambda: data.experiment("symmetry_contrast_pilot"),
        "experiments/symmetry_contrast_pilot.json",
        "contrasts",
        {},
        "final",
    ),
    (
        lambda: data.benchmark_run("cpu_2core"),
        "benchmarks/cpu_2core.json",
        "results",
        "-",
        "machine",
    ),
    (lambda: data.corpus_snapshot("pydoc"), "corpora/corpora.json", "pydoc", 5, None),
    (lambda: data.shipped("pldr_tiny"), "pldr_tiny/config.json", "hidden_size", "big", None),
]


@pytest.fixture
def clone(tmp_path, monkeypatch):
    """A copy of data/ (the files the tests corrupt) that the locators read instead."""
    root = tmp_path / "data"
    for rel in {k[1] for k in KINDS} | {"corpora/pydoc.txt.xz"}:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(DATA / rel, root / rel)
    monkeypatch.setattr(data.locators, "_CLONE_DATA", root)
    monkeypatch.setattr(data.locators, "_PACKAGE_DATA", tmp_path / "no_install")
    data.corpora._snapshot_text.cache_clear()
    yield root
    data.corpora._snapshot_text.cache_clear()


def test_every_shipped_file_passes_its_schema():
    """Including the plans and records of every study, and the optional probe fields."""
    kinds = {"collapse_hunt": "plan_hunt", "experiments": "plan_experiments"}
    for file in (DATA / "plans").glob("*.json"):
        schema.read_json(file, kinds.get(file.stem, "plan_study"))
    folders = {
        "recipes": "recipe",
        "collapse_hunt": "hunt_record",
        "trajectories": "trajectory",
        "experiments": "experiment",
        "benchmarks": "benchmark",
        **dict.fromkeys(data.HUNT_STUDIES, "hunt_record"),
    }
    for folder, kind in folders.items():
        for file in (DATA / folder).glob("*.json"):
            schema.read_json(file, kind)
    schema.read_json(DATA / "corpora" / "corpora.json", "corpora")
    for file in DATA.rglob("config.json"):
        schema.read_json(file, "config")


def test_a_record_with_the_new_probe_fields_passes():
    record = json.loads((DATA / "collapse_hunt" / "base.json").read_text())
    n = len(record["step"])
    record["unit_gain"] = [[[0.5, 0.25], [0.5, None]]] * n  # per step, per layer, per unit
    record["composite_gain"] = [[0.1, 0.2]] * n
    record["A_row_energy"] = [None] * n
    schema.validate(record, "hunt_record", "x.json")


@pytest.mark.parametrize("kind", KINDS, ids=[k[1] for k in KINDS])
def test_a_damaged_file_is_refused_naming_the_file_and_the_field(clone, kind):
    locate, rel, field, wrong, required = kind
    file = clone / rel
    text = file.read_text()
    locate()  # the intact copy reads
    obj = json.loads(text)
    cases = [(text[: len(text) // 2], "line ")]
    cases.append((json.dumps({**obj, field: wrong}), f"$.{field}"))
    if required is not None:
        cases.append((json.dumps({k: v for k, v in obj.items() if k != required}), f"'{required}'"))
    for broken, where in cases:
        file.write_text(broken)
        with pytest.raises(schema.SchemaError) as err:
            locate()
        assert str(file) in str(err.value) and where in str(err.value)
        assert err.value.path == str(file)


def test_a_nan_in_a_record_is_refused(tmp_path):
    file = tmp_path / "r.json"
    file.write_text(json.dumps({"pydoc": {"python": "3.11.7", "chars": float("nan")}}))
    with pytest.raises(schema.SchemaError, match="NaN"):
        schema.read_json(file, "corpora")


def test_a_byte_flipped_corpus_names_the_file_and_how_to_restore_it(clone):
    file = clone / "corpora" / "pydoc.txt.xz"
    raw = bytearray(file.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    file.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match="restore it") as err:
        data.load_text("pydoc")
    assert str(file) in str(err.value)
    assert not isinstance(err.value, lzma.LZMAError)


def _refused(argv, capsys) -> str:
    with pytest.raises(SystemExit) as exit_:
        reproduce.main(argv)
    assert exit_.value.code == 2
    return capsys.readouterr().err


def test_a_cut_plan_is_named_by_list_and_hunt(clone, capsys, tmp_path, monkeypatch):
    """They ended in a bare JSONDecodeError that named neither the file nor the place."""
    for rel in ("plans/experiments.json", "plans/constant_rate.json", "plans/hunt_reruns.json"):
        shutil.copy2(DATA / rel, clone / rel)
    for rel in data.recipe_names():
        shutil.copy2(DATA / "recipes" / f"{rel}.json", clone / "recipes" / f"{rel}.json")
    plan = clone / "plans" / "collapse_hunt.json"
    plan.write_text(plan.read_text()[:300])
    assert str(plan) in _refused(["list"], capsys)
    out = tmp_path / "out"
    assert str(plan) in _refused(["hunt", "base", "--out", str(out), "--runs", str(out)], capsys)
    assert not out.exists()


def test_a_plan_with_a_text_threshold_is_refused_before_training(
    clone, capsys, tmp_path, monkeypatch
):
    """A collapse_below of "x" trained the whole run and only then failed."""
    monkeypatch.setattr(repro_hunt, "pretrain", lambda *a, **k: pytest.fail("training started"))
    plan = clone / "plans" / "collapse_hunt.json"
    plan.write_text(json.dumps({**json.loads(plan.read_text()), "collapse_below": "x"}))
    err = _refused(["hunt", "base", "--out", str(tmp_path / "o"), "--runs", str(tmp_path)], capsys)
    assert "$.collapse_below" in err and str(plan) in err and "number" in err
