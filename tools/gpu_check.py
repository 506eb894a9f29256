"""Check the course on a CUDA GPU in a few minutes, and record what happened.

CI has no GPU, so the CUDA paths (bf16 autocast, fused attention, device placement in the
chapters' analysis) are checked here, by hand, whenever a GPU is at hand:

    .venv/bin/python tools/gpu_check.py           # on a CUDA machine, after `make venv`
    .venv/bin/python tools/gpu_check.py --record  # also write book/_gpu_runs.md

Three steps, each timed; the script goes on after a failure and exits non-zero if any step failed:

1. the library tests (those marked "needs CUDA" run only here; the rest run again on CUDA-capable
   torch), with pytest-xdist;
2. every notebook of the table of contents, executed under nbval in fast mode on the GPU (the
   chapters pick CUDA by themselves), one notebook at a time so that each chapter's time is its own;
   a chapter *fails* when a cell raises, and its checked outputs (recorded on a CPU) are reported
   separately, since float rounding on a GPU may change their last digits;
3. ``python -m kvattn.benchmark`` for the tiny, mid and published 110M configurations.

Everything goes to ``_build/gpu_check/`` (logs, JUnit XML, ``results.json``). ``--record`` also
renders the results as a Markdown table into ``book/_gpu_runs.md``, which the book's
*Execution times* page includes: commit that file to publish the run.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "_build" / "gpu_check"
RECORD = ROOT / "book" / "_gpu_runs.md"


def run(
    cmd: list[str], log: Path, env: dict | None = None, timeout: int = 1800
) -> tuple[int, float]:
    """Run ``cmd`` from the repository root with its output in ``log``; (exit code, seconds)."""
    start = time.perf_counter()
    with log.open("w") as f:
        try:
            code = subprocess.run(
                cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT, env=env, timeout=timeout
            ).returncode
        except subprocess.TimeoutExpired:
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
    """The recorded run as the Markdown the execution-times page includes."""
    d = results["device"]
    lines = [
        f"Recorded with `tools/gpu_check.py` on {d['date']}: {d['gpu']} ({d['memory_gib']} GiB, "
        f"compute capability {d['capability']}, autocast {d['autocast']}), torch {d['torch']}, "
        "fast mode.",
        "",
        "| chapter | seconds | cells that raised | checked outputs that differ |",
        "|---|---:|---|---|",
    ]
    for name, r in results["notebooks"].items():
        lines.append(
            f"| {name} | {r['seconds']:.0f} | {', '.join(r['cells_raised']) or 'none'} "
            f"| {', '.join(r['outputs_differ']) or 'none'} |"
        )
    t = results["tests"]
    lines += [
        "",
        f"Library tests: {t['passed']} passed, {t['failed']} failed, {t['errors']} errors, "
        f"{t['skipped']} skipped in {t['seconds']:.0f} s. Benchmark (`python -m kvattn.benchmark"
        f" --configs tiny mid 110M`): exit code {results['benchmark']['exit_code']}; its report:",
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
    parser.add_argument("--record", action="store_true", help=f"write {RECORD.relative_to(ROOT)}")
    parser.add_argument("--workers", type=int, default=min(8, os.cpu_count() or 1))
    parser.add_argument("--budget", type=float, default=20.0, help="seconds per benchmark cell")
    args = parser.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    results = {"device": device_facts()}
    py = sys.executable
    env = {**os.environ, "KVATTN_FAST": "1", "OMP_NUM_THREADS": "1"}

    code, seconds = run(
        [py, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-m", "not built and not browser",
         "-n", str(args.workers), f"--junitxml={OUT / 'tests.xml'}", "tests"],
        OUT / "tests.log", env,
    )  # fmt: skip
    results["tests"] = {**junit_counts(OUT / "tests.xml"), "seconds": seconds, "exit_code": code}
    print(f"library tests: {results['tests']}", flush=True)

    nb_dir = OUT / "nbval"
    subprocess.run([py, "tools/notebooks.py", "--with-expected", str(nb_dir)], cwd=ROOT, check=True)
    results["notebooks"] = {}
    for path in toc_notebooks():
        name, copy, xml = path.stem, nb_dir / path.name, OUT / f"{path.stem}.xml"
        code, seconds = run(
            [py, "-m", "pytest", "-p", "no:cacheprovider", "--nbval-lax", "--nbval-current-env",
             "--nbval-cell-timeout=900", "--nbval-sanitize-with", "tests/nbval_sanitize.cfg",
             f"--junitxml={xml}", str(copy)],
            OUT / f"{name}.log", env,
        )  # fmt: skip
        results["notebooks"][name] = {**notebook_result(xml), "seconds": seconds}
        print(f"{name}: {results['notebooks'][name]}", flush=True)

    bench_json = OUT / "benchmark.json"
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

    (OUT / "results.json").write_text(json.dumps(results, indent=1))
    if args.record:
        RECORD.write_text(markdown(results))
        print(f"recorded in {RECORD.relative_to(ROOT)}")
    failed = (
        results["tests"]["exit_code"] != 0
        or any(r["cells_raised"] for r in results["notebooks"].values())
        or code != 0
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
