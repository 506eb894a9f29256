"""tools/gpu_check.py, the GPU check that CI cannot run: what it reads from pytest and nbval, and
the table it records for the book, checked on a CPU with a real nbval run."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import gpu_check  # noqa: E402


def cell(source: str, outputs: list | None = None, check: bool = False) -> dict:
    return {
        "cell_type": "code",
        "execution_count": 1 if outputs else None,
        "id": f"c{abs(hash(source)) % 10**8}",
        "metadata": {"tags": ["nbval-check-output"]} if check else {},
        "outputs": outputs or [],
        "source": source,
    }


@pytest.fixture(scope="module")
def nbval_xml(tmp_path_factory) -> Path:
    """JUnit XML of nbval on a notebook with a passing cell, a checked cell whose output changed
    and a cell that raises (the three outcomes gpu_check tells apart)."""
    tmp = tmp_path_factory.mktemp("nb")
    stream = {"name": "stdout", "output_type": "stream", "text": "2\n"}
    nb = {
        "cells": [
            cell("print(1)"),
            cell("print(3)", [stream], check=True),
            cell("raise ValueError('boom')"),
        ],
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    (tmp / "ch.ipynb").write_text(json.dumps(nb))
    xml = tmp / "ch.xml"
    subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--nbval-lax",
         "--nbval-current-env", f"--junitxml={xml}", str(tmp / "ch.ipynb")],
        cwd=tmp, capture_output=True, text=True, timeout=600,  # a hang limit
    )  # fmt: skip
    return xml


@pytest.mark.slow
def test_nbval_outcomes_are_told_apart(nbval_xml):
    result = gpu_check.notebook_result(nbval_xml)
    assert len(result["outputs_differ"]) == 1 and "Cell 1" in result["outputs_differ"][0]
    assert len(result["cells_raised"]) == 1 and "Cell 2" in result["cells_raised"][0]


def test_junit_counts(nbval_xml):
    counts = gpu_check.junit_counts(nbval_xml)
    assert counts == {"passed": 1, "failed": 2, "errors": 0, "skipped": 0}


def test_recorded_table():
    results = {
        "device": {"date": "2026-12-01", "gpu": "NVIDIA H200", "memory_gib": 139.8,
                   "capability": "9.0", "autocast": "torch.bfloat16", "torch": "2.13.0+cu130"},
        "tests": {"passed": 850, "failed": 0, "errors": 0, "skipped": 0, "seconds": 61.2},
        "notebooks": {"01_key_value_memories": {"seconds": 12.4, "cells_raised": [],
                                                "outputs_differ": ["Cell 7"]}},
        "benchmark": {"exit_code": 0, "report": "== tiny on cuda\n"},
        "mode": "full",
    }  # fmt: skip
    text = gpu_check.markdown(results)
    assert "on 2026-12-01: NVIDIA H200 (139.8 GiB, compute capability 9.0" in text
    assert "Chapters in full mode, one at a time:" in text
    assert "| 01_key_value_memories | 12 | none | Cell 7 |" in text
    assert "850 passed, 0 failed, 0 errors, 0 skipped in 61 s" in text
    assert text.endswith("```text\n== tiny on cuda\n```\n")

    # a run of some steps (--steps) records those alone
    del results["tests"], results["benchmark"]
    text = gpu_check.markdown(results)
    assert "| 01_key_value_memories |" in text
    assert "Library tests" not in text and "Benchmark" not in text


def test_wheels_are_the_pinned_versions(tmp_path):
    """The packages brought to a bare GPU machine are those requirements.txt pins, so it runs the
    tests and chapters with CI's versions; names match as pip matches them, and a package without
    an exact pin is refused by name."""
    brought = [p.split("==")[0].lower() for p in gpu_check.pins(gpu_check.BROUGHT)]
    assert brought == [name.lower() for name in gpu_check.BROUGHT]  # each one pinned, in order
    requirements = tmp_path / "requirements.txt"
    requirements.write_text(
        "plotly==7.1.0  # a comment\n-e .\nnbval>=0.10\njupyter_book[sphinx]==1.0.4\n\n"
        "pytest-xdist===3.8.0\n"
    )
    assert gpu_check.pins(("Plotly", "jupyter-book", "pytest_xdist"), requirements) == [
        "plotly==7.1.0",
        "jupyter_book==1.0.4",
        "pytest-xdist==3.8.0",
    ]
    with pytest.raises(SystemExit, match=r"pins no version of \['nbval', 'tqdm'\]"):
        gpu_check.pins(("nbval", "tqdm"), requirements)


def test_the_tests_run_on_a_gpu_need_none_of_the_book_packages():
    """The ``tests`` step runs every test module but the tooling ones on a machine that has only
    the library's packages and the brought ones: none of those modules (nor conftest.py) may
    import the book's (a new one that does belongs in BOOK_TESTS), and every module named there
    exists. A deny-list: it catches the book's packages, not every package a GPU machine
    might lack."""
    import ast

    # the book's packages, and book/_ext's module that drives its execution
    book_only = {
        *("jupyter_book", "myst_nb", "sphinx", "pybtex", "nbclient", "playwright"),
        "notebook_execution",
    }
    for name in gpu_check.BOOK_TESTS:
        assert (ROOT / "tests" / name).is_file(), name
    for path in [ROOT / "tests" / "conftest.py", *sorted((ROOT / "tests").glob("test_*.py"))]:
        if path.name in gpu_check.BOOK_TESTS:
            continue
        imported = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                imported.add(node.module.split(".")[0])
        assert not imported & book_only, (path.name, imported & book_only)


def test_refuses_to_run_without_a_gpu(monkeypatch):
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    with pytest.raises(SystemExit, match="no CUDA device"):
        gpu_check.device_facts()


def test_a_check_split_into_runs_records_every_step(tmp_path, monkeypatch):
    """``--steps`` runs some steps; ``--add`` keeps the last run's others, so short runs record
    what one long one would (here with the GPU and the commands faked). A run that leaves no
    report (a hang, a crash) counts as failed, whatever an earlier run left behind; the tests
    never see the chapters' mode."""
    monkeypatch.setattr(gpu_check, "OUT", tmp_path)
    monkeypatch.setattr(gpu_check, "RECORD", tmp_path / "_gpu_runs.md")
    device = {"date": "2026-12-02", "gpu": "NVIDIA H200", "memory_gib": 139.8, "capability": "9.0"}
    device.update(autocast="torch.bfloat16", torch="2.13.0+cu130")
    monkeypatch.setattr(gpu_check, "device_facts", lambda: dict(device))
    chapters = [Path("notebooks/01_key_value_memories.ipynb"), Path("notebooks/02_hang.ipynb")]
    monkeypatch.setattr(gpu_check, "toc_notebooks", lambda: chapters)
    monkeypatch.setenv("KVATTN_FAST", "1")
    calls, hung = [], set()

    def fake_run(cmd, log, env=None, timeout=1800):
        calls.append((cmd, env))
        log.write_text("== tiny on cuda\n")
        xml = next((Path(a.split("=", 1)[1]) for a in cmd if a.startswith("--junitxml=")), None)
        if xml is None:
            return 0, 42.0
        if xml.stem in hung:
            return 124, 42.0  # as run() after its hang limit: no report
        if xml.name == "tests.xml":
            xml.write_text('<testsuite tests="5" failures="1" errors="0" skipped="1"/>')
            return 1, 42.0
        xml.write_text('<testsuite tests="1"><testcase name="Cell 3"/></testsuite>')
        return 0, 42.0

    monkeypatch.setattr(gpu_check, "run", fake_run)
    with pytest.raises(SystemExit, match=r"no earlier run's results\.json"):
        gpu_check.main(["--steps", "tests", "--add"])
    assert gpu_check.main(["--steps", "benchmark"]) == 0
    assert gpu_check.main(["--steps", "tests", "--add"]) == 1  # a test failed
    tests_cmd, tests_env = calls[1]
    assert "--ignore=tests/test_browser.py" in tests_cmd and "KVATTN_FAST" not in tests_env
    (tmp_path / "02_hang.xml").write_text(
        '<testsuite tests="1"><testcase name="Cell 1"/></testsuite>'
    )
    hung.add("02_hang")  # a stale passing report is there, but this run leaves none
    assert gpu_check.main(["--steps", "notebooks", "--mode", "full", "--add", "--record"]) == 1
    nb_envs = [env for cmd, env in calls[2:] if "--nbval-lax" in cmd]
    assert len(nb_envs) == 2 and all(env["KVATTN_FAST"] == "0" for env in nb_envs)

    results = json.loads((tmp_path / "results.json").read_text())
    assert results["benchmark"]["exit_code"] == 0 and results["tests"]["failed"] == 1
    assert results["mode"] == "full"
    assert results["notebooks"]["02_hang"]["cells_raised"] == ["no report, exit code 124"]
    text = (tmp_path / "_gpu_runs.md").read_text()
    assert (
        "Chapters in full mode" in text and "| 01_key_value_memories | 42 | none | none |" in text
    )
    assert "3 passed, 1 failed, 0 errors, 1 skipped in 42 s" in text and "== tiny on cuda" in text

    hung.add("tests")  # the tests hang too: no counts, not the last run's
    assert gpu_check.main(["--steps", "tests", "--add", "--record"]) == 1
    text = (tmp_path / "_gpu_runs.md").read_text()
    assert "Library tests: no report (exit code 124)." in text and "| 02_hang |" in text

    for key, other in (("torch", "2.11.0+cu130"), ("gpu", "NVIDIA A100")):
        changed = {**device, key: other}
        monkeypatch.setattr(gpu_check, "device_facts", lambda changed=changed: dict(changed))
        with pytest.raises(SystemExit, match=re.escape(f"the last run was on {key} {device[key]}")):
            gpu_check.main(["--steps", "benchmark", "--add"])


@pytest.mark.slow
def test_a_command_past_its_hang_limit_is_killed_with_what_it_started(tmp_path):
    """A hung chapter's kernel or a hung test run's workers must not outlive it, holding the GPU
    through the next steps: run() kills the whole process group it started."""
    import time

    pidfile = tmp_path / "grandchild.pid"
    script = (
        "import subprocess, sys, time\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(p.pid))\n"
        "time.sleep(600)\n"
    )
    code, _ = gpu_check.run([sys.executable, "-c", script], tmp_path / "log", timeout=5)
    assert code == 124 and "hang limit of 5 s reached" in (tmp_path / "log").read_text()
    stat = Path(f"/proc/{int(pidfile.read_text())}/stat")
    deadline = time.monotonic() + 30  # a hang limit: the kill is immediate
    while stat.exists() and stat.read_text().split(")")[-1].split()[0] != "Z":
        assert time.monotonic() < deadline, "the command's child outlived its hang limit"
        time.sleep(0.1)
