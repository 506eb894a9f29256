"""Check the course on a CUDA GPU in one run, and record what happened.

CI has no GPU, so the CUDA paths (bf16 autocast, fused attention, device placement in the
chapters' analysis) are checked here, by hand, whenever a GPU is at hand:

    .venv/bin/python tools/gpu_check.py           # on a CUDA machine, after `make venv`
    .venv/bin/python tools/gpu_check.py --record  # also write book/_gpu_runs.md

Three steps (``--steps`` picks some), each timed; the script goes on after a failure and exits
non-zero if a step of this run failed:

1. ``tests``: the library tests (those marked "needs CUDA" run only here; the rest run again on
   CUDA-capable torch), with pytest-xdist; the book's tooling tests (:data:`BOOK_TESTS`) are left
   to CI;
2. ``notebooks``: every notebook of the table of contents, executed under nbval on the GPU (the
   chapters pick CUDA by themselves), one notebook at a time so that each chapter's time is its
   own, in fast mode or (``--mode full``, what a reader runs in Colab) full mode; a chapter
   *fails* when a cell raises or its run leaves no report (a hang, a crash). Its checked outputs
   were recorded on a CPU in fast mode and are reported apart: on a GPU float rounding may change
   their last digits, and in full mode, after longer training, many can differ;
3. ``benchmark``: ``python -m kvattn.benchmark`` for the tiny, mid and published 110M
   configurations.

Everything goes to ``_build/gpu_check/`` (logs, JUnit XML, ``results.json``). ``--record`` also
renders the results as a Markdown table into ``book/_gpu_runs.md``, which the book's
*Execution times* page includes: commit that file to publish the run. To split the check into
shorter runs, give each run some ``--steps`` and every run after the first ``--add``, which keeps
the earlier runs' other steps from ``results.json`` (same GPU and torch); ``--record`` the last.

A GPU machine without network access (and so without ``make venv``) but with a CUDA torch in its
Python 3.12 needs the test and notebook packages brought along. On an x86-64 Linux machine with
network, ``.venv/bin/python tools/gpu_check.py --wheels`` downloads them (:data:`BROUGHT`, at
requirements.txt's pins, with what they need) as wheels into ``.whl/`` and prints their size
(pip judges the dependencies' environment markers by the Python that runs it: a set made with the
course's Python 3.11 ran nbval and pytest-xdist in a bare Python 3.12).
Copy the repository with that folder in its root (it is git-ignored, so a clone leaves it out) to
the GPU machine and, in the repository's root there, run::

    python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
    PYTHONPATH=/tmp/site:$PWD/lib python3 tools/gpu_check.py --record

then bring back ``book/_gpu_runs.md`` (and ``_build/gpu_check/``, to ``--add`` to it later).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "_build" / "gpu_check"
RECORD = ROOT / "book" / "_gpu_runs.md"
WHEELS = ROOT / ".whl"
STEPS = ("tests", "notebooks", "benchmark")
#: What a bare GPU machine with PyTorch may lack to run the steps; their dependencies come along.
#: Versions are requirements.txt's, so these are CI's (torch, numpy and the rest are the machine's).
BROUGHT = ("pytest", "pytest-xdist", "nbval", "hypothesis", "ipykernel", "plotly", "ipywidgets")
#: Tests of the book's own tooling (Jupyter Book, Sphinx, a browser, pip builds), which CI runs and
#: a GPU machine need not have: the ``tests`` step leaves them out.
BOOK_TESTS = (
    "test_browser.py",
    "test_build.py",
    "test_built_html.py",
    "test_docs.py",
    "test_install.py",
    "test_notebooks.py",
    "test_publish.py",
)


def run(
    cmd: list[str], log: Path, env: dict | None = None, timeout: int = 1800
) -> tuple[int, float]:
    """Run ``cmd`` from the repository root with its output in ``log``; (exit code, seconds).

    Past ``timeout`` seconds the command and everything it started (xdist workers, a notebook's
    kernel) are killed, so that nothing left over holds the GPU for the next step."""
    start = time.perf_counter()
    with log.open("w") as f:
        proc = subprocess.Popen(
            cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            f.write(f"\n[gpu_check] hang limit of {timeout} s reached\n")
            code = 124
    return code, time.perf_counter() - start


def junit_counts(path: Path) -> dict:
    """passed / failed / errors / skipped of a pytest JUnit XML file."""
    suite = ET.parse(path).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    total, failed = int(suite.get("tests")), int(suite.get("failures"))
    errors, skipped = int(suite.get("errors")), int(suite.get("skipped"))
    return {
        "passed": total - failed - errors - skipped,
        "failed": failed,
        "errors": errors,
        "skipped": skipped,
    }


def notebook_result(path: Path) -> dict:
    """A chapter's nbval result: cells that raised, and checked outputs that differ."""
    raised, differ = [], []
    for case in ET.parse(path).getroot().iter("testcase"):
        for problem in [*case.findall("failure"), *case.findall("error")]:
            text = (problem.get("message") or "") + (problem.text or "")
            # nbval's words for a checked output that changed; anything else is a cell that raised
            (differ if "Cell outputs differ" in text else raised).append(case.get("name"))
    return {"cells_raised": raised, "outputs_differ": differ}


def pins(names: tuple[str, ...], requirements: Path = ROOT / "requirements.txt") -> list[str]:
    """``name==version`` for each of ``names``, as ``requirements`` pins it (names compared as pip
    does: case, ``-`` and ``_`` alike).

    Raises ``SystemExit`` naming the packages it pins no exact version of."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    pinned = {}
    for line in requirements.read_text().splitlines():
        spec = line.split("#")[0].strip()
        if not spec or spec.startswith("-"):  # options such as "-e ." pin nothing
            continue
        req = Requirement(spec)
        exact = [c.version for c in req.specifier if c.operator in ("==", "===")]
        if exact:
            pinned[canonicalize_name(req.name)] = f"{req.name}=={exact[0]}"
    missing = [n for n in names if canonicalize_name(n) not in pinned]
    if missing:
        raise SystemExit(f"gpu_check: {requirements.name} pins no version of {missing}")
    return [pinned[canonicalize_name(n)] for n in names]


def download_wheels(dest: Path = WHEELS, python: str = "3.12") -> list[Path]:
    """Download :data:`BROUGHT` and everything they need, as binary wheels for CPython ``python``
    on x86-64 Linux, into ``dest``, replacing the wheels there only once the download succeeded
    (two versions of a package would stop the install). Returns the wheels.

    pip resolves the dependencies' environment markers for the machine it runs on, so run this
    on x86-64 Linux."""
    platforms = [f"manylinux_2_{n}_x86_64" for n in (35, 34, 31, 28, 27, 26, 24, 17, 12, 5)] + [
        "manylinux2014_x86_64",
        "manylinux2010_x86_64",
        "manylinux1_x86_64",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:",
             "--python-version", python, "--implementation", "cp",
             *(f"--platform={p}" for p in platforms), "--dest", tmp, *pins(BROUGHT)],
            check=True,
        )  # fmt: skip
        dest.mkdir(exist_ok=True)
        for old in dest.glob("*.whl"):
            old.unlink()
        for wheel in Path(tmp).glob("*.whl"):
            shutil.move(wheel, dest / wheel.name)
    return sorted(dest.glob("*.whl"))


def toc_notebooks() -> list[Path]:
    """The notebooks of ``_toc.yml``, in reading order (tools/notebooks.py decides which)."""
    sys.path.insert(0, str(ROOT / "tools"))
    from notebooks import notebooks

    return notebooks()


def device_facts() -> dict:
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("gpu_check: torch sees no CUDA device; run this on a machine with a GPU")
    props = torch.cuda.get_device_properties(0)
    from kvattn.train import default_autocast

    return {
        "date": datetime.date.today().isoformat(),
        "gpu": props.name,
        "memory_gib": round(props.total_memory / 2**30, 1),
        "capability": f"{props.major}.{props.minor}",
        "autocast": str(default_autocast("cuda")),
        "torch": torch.__version__,
        "python": platform.python_version(),
    }


def markdown(results: dict) -> str:
    """The recorded run as the Markdown the execution-times page includes (the steps it ran)."""
    d = results["device"]
    lines = [
        f"Recorded with `tools/gpu_check.py` on {d['date']}: {d['gpu']} ({d['memory_gib']} GiB, "
        f"compute capability {d['capability']}, autocast {d['autocast']}), torch {d['torch']}."
    ]
    if "notebooks" in results:
        lines += [
            "",
            f"Chapters in {results['mode']} mode, one at a time:",
            "",
            "| chapter | seconds | cells that raised | checked outputs that differ |",
            "|---|---:|---|---|",
        ]
        for name, r in results["notebooks"].items():
            lines.append(
                f"| {name} | {r['seconds']:.0f} | {', '.join(r['cells_raised']) or 'none'} "
                f"| {', '.join(r['outputs_differ']) or 'none'} |"
            )
    if "tests" in results:
        t = results["tests"]
        lines.append("")
        if "passed" in t:
            lines.append(
                f"Library tests: {t['passed']} passed, {t['failed']} failed, {t['errors']} "
                f"errors, {t['skipped']} skipped in {t['seconds']:.0f} s."
            )
        else:
            lines.append(f"Library tests: no report (exit code {t['exit_code']}).")
    if "benchmark" in results:
        lines += [
            "",
            "Benchmark (`python -m kvattn.benchmark --configs tiny mid 110M`): exit code "
            f"{results['benchmark']['exit_code']}; its report:",
            "",
            "```text",
            results["benchmark"]["report"].rstrip(),
            "```",
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--record", action="store_true", help="write book/_gpu_runs.md")
    parser.add_argument("--steps", nargs="+", choices=STEPS, default=list(STEPS))
    parser.add_argument(
        "--mode", choices=("fast", "full"), default="fast", help="the chapters' mode (KVATTN_FAST)"
    )
    parser.add_argument("--workers", type=int, default=min(8, os.cpu_count() or 1))
    parser.add_argument("--budget", type=float, default=20.0, help="seconds per benchmark cell")
    parser.add_argument(
        "--add",
        action="store_true",
        help="keep the steps of the last run's results.json (same GPU and torch) that this run "
        "does not redo, e.g. to split the check into shorter runs",
    )
    parser.add_argument(
        "--wheels",
        action="store_true",
        help=f"only download the packages a bare GPU machine lacks into {WHEELS.name}/ (no GPU "
        "needed), then stop",
    )
    args = parser.parse_args(argv)
    if args.wheels:
        wheels = download_wheels()
        size = sum(w.stat().st_size for w in wheels) / 2**20
        print(f"{len(wheels)} wheels, {size:.1f} MiB, in {WHEELS}")
        return 0
    OUT.mkdir(parents=True, exist_ok=True)
    results = {"device": device_facts()}
    if args.add:
        if not (OUT / "results.json").is_file():
            raise SystemExit(f"gpu_check --add: no earlier run's results.json in {OUT}")
        last = json.loads((OUT / "results.json").read_text())
        for key in ("gpu", "torch"):
            if last["device"][key] != results["device"][key]:
                raise SystemExit(
                    f"gpu_check --add: the last run was on {key} {last['device'][key]}"
                )
        results = {**last, **results}
    py = sys.executable
    env = {k: v for k, v in os.environ.items() if k != "KVATTN_FAST"}  # the tests set their own
    env["OMP_NUM_THREADS"] = "1"
    failed = False

    if "tests" in args.steps:
        xml = OUT / "tests.xml"
        xml.unlink(missing_ok=True)  # a run that hangs or crashes writes none
        code, seconds = run(
            [py, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-m", "not built and not browser",
             "-n", str(args.workers), f"--junitxml={xml}",
             *(f"--ignore=tests/{name}" for name in BOOK_TESTS), "tests"],
            OUT / "tests.log", env,
        )  # fmt: skip
        counts = junit_counts(xml) if xml.is_file() else {}
        results["tests"] = {**counts, "seconds": seconds, "exit_code": code}
        print(f"library tests: {results['tests']}", flush=True)
        failed |= code != 0

    if "notebooks" in args.steps:
        nb_env = {**env, "KVATTN_FAST": "1" if args.mode == "fast" else "0"}
        nb_dir = OUT / "nbval"
        code, _ = run(
            [py, "tools/notebooks.py", "--with-expected", str(nb_dir)], OUT / "nbval_copies.log"
        )
        if code:  # no chapter can run; an earlier run's chapters (--add) stay as they were
            print(f"notebooks: copies not written (see {OUT / 'nbval_copies.log'})", flush=True)
            failed = True
        else:
            results["notebooks"], results["mode"] = {}, args.mode
            for path in toc_notebooks():
                name, copy, xml = path.stem, nb_dir / path.name, OUT / f"{path.stem}.xml"
                xml.unlink(missing_ok=True)
                code, seconds = run(
                    [py, "-m", "pytest", "-p", "no:cacheprovider", "--nbval-lax",
                     "--nbval-current-env", "--nbval-cell-timeout=900", "--nbval-sanitize-with",
                     "tests/nbval_sanitize.cfg", f"--junitxml={xml}", str(copy)],
                    OUT / f"{name}.log", nb_env, timeout=1800 if args.mode == "fast" else 3600,
                )  # fmt: skip
                if xml.is_file():
                    result = notebook_result(xml)
                else:
                    result = {
                        "cells_raised": [f"no report, exit code {code}"],
                        "outputs_differ": [],
                    }
                results["notebooks"][name] = {**result, "seconds": seconds}
                print(f"{name}: {results['notebooks'][name]}", flush=True)
                failed |= bool(result["cells_raised"])

    if "benchmark" in args.steps:
        bench_json = OUT / "benchmark.json"
        bench_json.unlink(missing_ok=True)
        code, seconds = run(
            [py, "-m", "kvattn.benchmark", "--configs", "tiny", "mid", "110M", "--budget",
             str(args.budget), "--json", str(bench_json)],
            OUT / "benchmark.log", {**os.environ},
        )  # fmt: skip
        results["benchmark"] = {
            "exit_code": code,
            "seconds": seconds,
            "report": (OUT / "benchmark.log").read_text(),
            "results": json.loads(bench_json.read_text()) if bench_json.exists() else None,
        }
        print(results["benchmark"]["report"], flush=True)
        failed |= code != 0

    (OUT / "results.json").write_text(json.dumps(results, indent=1))
    if args.record:
        RECORD.write_text(markdown(results))
        print(f"recorded in {RECORD}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
