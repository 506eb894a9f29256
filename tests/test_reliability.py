"""Issue 40, parts 2 to 5: readings that state what they read, clean stops, widgets that say
what they did, and recovery of interrupted swaps. Each test failed on the code before the fix."""

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from kvattn import data
from kvattn.course import collapse_report as cr
from kvattn.course import contrast_report
from kvattn.course import hunt_report as hr
from kvattn.reproduce import files as repro_files

DATA = Path(__file__).resolve().parents[1] / "data"
NAN = float("nan")


# -- readings -----------------------------------------------------------------------------------


def test_window_reading_is_the_same_in_any_order_and_leaves_nan_out():
    """It gave (nan, 0.45) or (0.25, 0.45) for the same readings in another order."""
    one = {"step": [0, 1, 2, 3], "m": [[NAN, 0.4], [0.2, 0.5], [0.3, 0.45], [0.25, 0.6]]}
    flip = {"step": [0, 1, 2, 3], "m": [[0.25, 0.6], [0.3, 0.45], [0.2, 0.5], [NAN, 0.4]]}
    assert hr.window_reading(one, "m", 3) == hr.window_reading(flip, "m", 3) == (0.25, 0.475)


def test_window_reading_refuses_ragged_layers_and_all_missing():
    ragged = {"step": [0, 1, 2, 3], "m": [[0.1, 0.2], [0.1], [0.1, 0.2], [0.1, 0.2]]}
    with pytest.raises(ValueError, match="layers"):
        hr.window_reading(ragged, "m", 3)
    missing = {"step": [0, 1, 2, 3], "m": [[NAN, 0.2]] * 4}
    with pytest.raises(ValueError, match="layer 0 has no reading"):
        hr.window_reading(missing, "m", 3)


def _route(value: float) -> hr.RouteReading:
    layers = (value, value)
    return hr.RouteReading(
        "run", "cos", layers, layers, layers, layers, layers, layers, layers, None, 2.0, 3.0, 3.0
    )


def test_no_verdict_from_missing_readings():
    """All-NaN readings gave the verdict "refuted"."""
    with pytest.raises(ValueError, match="no verdict"):
        hr.route_verdict([_route(NAN)])
    with pytest.raises(ValueError, match="no verdict"):
        hr.route_verdict([_route(0.1), _route(math.inf)])
    assert hr.route_verdict([_route(0.1)]) == "refuted"


def test_format_findings_keeps_80_columns_for_five_layers():
    """The published 110M's five layers printed lines of 87–94 characters."""
    for gamma in ((0.031, 0.045, 0.5, 0.6, 0.07), (1.2e-5, 3.4e-4, 0.5, 0.6, 7.0)):
        row = cr.Finding("110M, measured", 1e-3, -0.01, (-0.02, 0.0), 1e-16, gamma, (4, 4))
        lines = cr.format_findings([row, cr.PUBLISHED_110M]).splitlines()
        assert max(len(line) for line in lines) <= cr.MAX_WIDTH, lines
        assert "(5)" in lines[2] or "–" in lines[2]


def test_format_findings_refuses_readings_it_cannot_show():
    for bad in (
        {"order_rms": NAN},
        {"sigma_ratio": -1.0},
        {"delta_interval": (0.1, -0.1)},
        {"gamma": (0.1, math.inf)},
        {"kvg_same": (5, 4)},
    ):
        fields = {
            "label": "x",
            "order_rms": 0.1,
            "delta_loss": 0.0,
            "delta_interval": (-0.1, 0.1),
            "sigma_ratio": 0.1,
            "gamma": (0.1,),
            "kvg_same": (1, 1),
            **bad,
        }
        with pytest.raises(ValueError, match=f"x: .*{next(iter(bad))}"):
            cr.format_findings([cr.Finding(**fields)])


def test_family_equivalence_power_refuses_a_family_that_would_not_finish():
    """Eight tests never returned: the cost grew as (m + 1)^m."""
    with pytest.raises(ValueError, match="at most 10 tests"):
        contrast_report.family_equivalence_power([0.01] * 11, [8] * 11)


@pytest.mark.slow
def test_family_equivalence_power_of_eight_tests_returns():
    power = contrast_report.family_equivalence_power([0.01] * 8, [8] * 8)
    assert 0 <= power <= 1


# -- recovery -----------------------------------------------------------------------------------


@pytest.fixture
def clone(tmp_path, monkeypatch):
    root = tmp_path / "data"
    for folder in ("pldr_tiny", "corpora"):
        shutil.copytree(DATA / folder, root / folder)
    monkeypatch.setattr(data.locators, "_CLONE_DATA", root)
    monkeypatch.setattr(data.locators, "_PACKAGE_DATA", tmp_path / "no_install")
    data.corpora._snapshot_text.cache_clear()
    yield root
    data.corpora._snapshot_text.cache_clear()


def _kill_between_moves(folder: Path) -> None:
    """What a kill between a ship's two moves leaves: the old folder aside, the new staged."""
    shutil.copytree(folder, folder.with_name(folder.name + ".kvattn-staging"))
    folder.rename(folder.with_name(folder.name + ".kvattn-replaced"))


def test_shipped_completes_an_interrupted_swap_and_never_lists_its_folders(clone):
    """data.shipped() listed the swap folders as checkpoint names."""
    _kill_between_moves(clone / "pldr_tiny")
    assert data.locators._available("{}/config.json") == ["pldr_tiny"]
    assert data.shipped("pldr_tiny") == clone / "pldr_tiny"
    assert (clone / "pldr_tiny" / "config.json").is_file()


def test_load_text_completes_an_interrupted_swap_of_the_corpora(clone):
    """load_text() said no corpora are shipped."""
    _kill_between_moves(clone / "corpora")
    assert data.load_text("pydoc", max_chars=100)


def test_outputs_are_checked_by_creating_them(tmp_path):
    """As root, --out /proc/... passed the writability check, trained, then failed."""
    with pytest.raises(repro_files.ReproduceError, match="cannot hold the outputs"):
        repro_files.check_outputs([Path("/proc/kvattn-test/x.json")], [], overwrite=False)
    repro_files.check_outputs([tmp_path / "a" / "b" / "x.json"], [], overwrite=False)
    assert not (tmp_path / "a").exists()  # a checked request leaves nothing behind


# -- stops and waits ----------------------------------------------------------------------------


@pytest.mark.slow
def test_a_rank_says_what_it_waits_for_before_it_waits(monkeypatch, capfd):
    """WORLD_SIZE=2 RANK=0 without a second process waited 600 s without a word."""
    from kvattn import distributed

    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "29581")
    monkeypatch.setenv("KVATTN_DDP_TIMEOUT_S", "2")
    with pytest.raises((distributed.RendezvousError, ValueError)):
        distributed.setup_distributed("cpu", 2)
    err = capfd.readouterr().err
    assert "waits for the other 1 process(es)" in err and "at most 2 s" in err


def _workers(parent: psutil.Process) -> list[psutil.Process]:
    """The pool's worker processes of ``parent`` (not multiprocessing's resource tracker)."""
    found = []
    for p in parent.children(recursive=True):
        try:
            if "spawn_main" in " ".join(p.cmdline()):
                found.append(p)
        except psutil.NoSuchProcess:
            continue
    return found


@pytest.mark.slow
def test_sigint_to_a_two_worker_hunt_stops_every_worker(tmp_path):
    """kill -INT on the parent left both workers training past 95 s."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "KVATTN_FAST": "1"}
    command = [
        sys.executable,
        "-m",
        "kvattn.reproduce",
        "hunt",
        "base",
        "base_seed2",
        "--steps",
        "3000",
        "--workers",
        "2",
        "--out",
        str(tmp_path / "out"),
        "--runs",
        str(tmp_path / "runs"),
    ]
    # As from a terminal: SIGINT at its default action. A pytest worker may have left SIGINT
    # ignored, which a child inherits and Python then keeps (the full suite failed this way).
    proc = subprocess.Popen(
        command,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    parent = psutil.Process(proc.pid)
    try:
        deadline = time.monotonic() + 300  # a hang limit for a busy machine
        while len(_workers(parent)) < 2 and time.monotonic() < deadline:
            time.sleep(0.5)
        workers = _workers(parent)
        assert len(workers) == 2, "the two workers never started"
        # let them start their runs (import torch, read the corpus) before the signal
        while sum(w.cpu_times().user for w in workers) < 6 and time.monotonic() < deadline:
            time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        _, alive = psutil.wait_procs(workers, timeout=30)
        if alive:  # what the parent printed says where it was
            for p in [*alive, parent]:
                p.kill()
            said = proc.communicate(timeout=60)[0].decode()[-3000:]
            pytest.fail(f"workers still running 30 s after SIGINT: {alive}\nparent:\n{said}")
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            for p in [*_workers(parent), parent]:
                p.kill()
    text = out.decode()
    assert "stopping every run" in text
    assert "base: STOPPED" in text and "base_seed2: STOPPED" in text
    assert proc.returncode == 1


# -- explorers ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shipped_models():
    from kvattn.checkpoint import load_pretrained

    tok = data.load_tokenizer(data.shipped("pldr_tiny"))
    return (
        load_pretrained(data.shipped("pldr_tiny")),
        load_pretrained(data.shipped("gpt_tiny")),
        tok,
    )


@pytest.mark.parametrize("text", ["\u200b", "\ufeff", "\u200b\ufeff \n"])
def test_prompts_of_dropped_characters_are_refused_by_their_tokens(shipped_models, text):
    """The deductive explorer showed TypeError: prompts[0] must be a tensor of int64."""
    from kvattn.course import explorers

    pldr, gpt, tok = shipped_models
    with pytest.raises(ValueError, match="encode to tokens"):
        explorers.deductive.widget(pldr, tok, [text, "\ufeff", "a prompt"])
    with pytest.raises(ValueError, match=r"encodes to no tokens|is empty"):
        explorers.generation.widget({"pldr": pldr}, tok, text)
    with pytest.raises(ValueError, match=r"encodes to no tokens|is empty"):
        explorers.attention.widget(gpt, tok, text)


def test_the_attention_explorer_refuses_a_plga_model_before_drawing(shipped_models, monkeypatch):
    from kvattn.course import explorers

    pldr, _, tok = shipped_models
    monkeypatch.setattr(explorers.attention, "_live", lambda *a: pytest.fail("drawn"))
    with pytest.raises(ValueError, match="scaled dot-product attention"):
        explorers.attention.widget(pldr, tok, "a prompt")


def test_a_long_prompt_is_cut_and_said_to_be(shipped_models, capsys, monkeypatch):
    """A prompt of 127 tokens or more got at most one new token, with no message."""
    from kvattn.course import explorers

    pldr, _, tok = shipped_models
    shown = []
    monkeypatch.setattr(explorers.generation, "display", shown.append)
    explorers.generation.widget({"pldr": pldr}, tok, "def f(x): return x " * 60)
    out = capsys.readouterr().out
    assert "the model sees only its last 80" in out
    html = shown[-1].value
    assert html.count("return x") < 60  # the page shows what the model saw, not the whole prompt
    new = html.split("<b>")[1]
    assert len(new) > 20


def test_a_deductive_box_of_dropped_characters_is_named_not_drawn(shipped_models, capsys):
    from kvattn.course import explorers

    pldr, _, tok = shipped_models
    live = explorers.deductive.widget(pldr, tok, ["one prompt", "another one", "a third"])
    capsys.readouterr()
    live.children[0].children[0].value = "\u200b"
    assert "Prompt boxes [1] encode to no tokens" in capsys.readouterr().out


def test_json_reader_of_records_gives_the_path(tmp_path):
    """Records read by key gave KeyError deep inside; now the reader names file and field."""
    record = json.loads((DATA / "collapse_hunt" / "base.json").read_text())
    del record["val_loss"]
    file = tmp_path / "base.json"
    file.write_text(json.dumps(record))
    from kvattn.schema import SchemaError, read_json

    with pytest.raises(SchemaError, match="'val_loss' is a required property") as err:
        read_json(file, "hunt_record")
    assert str(file) in str(err.value)
