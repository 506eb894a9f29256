"""The command line of ``kvattn-reproduce`` (see :mod:`kvattn.reproduce`): it parses, checks every
name, option and output before any work, then runs each request and reports each run."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

from .. import data
from .._checks import int_argument
from .._files import write_json
from ..schema import SchemaError, read_json
from .checkpoints import checkpoint_config, make_checkpoint, make_trajectory, trajectory_config
from .contrast import (
    contrast_design,
    contrast_parser,
    design_from,
    run_contrast,
    summary,
    tokens_for,
)
from .corpora import check_corpora_folder, make_corpora, python_licence
from .files import (
    CHECKPOINT,
    EXPERIMENT_PLANS,
    HUNT_PLAN,
    HUNT_STUDIES,
    PROG,
    ReproduceError,
    check_apart,
    check_finished_run,
    check_outputs,
    check_runs,
    check_stem,
    plan,
)
from .hunt import hunt_config, run_hunts, ship_hunt

DESCRIPTION = """Remake the files the course ships in data/, from a clone or a pip install.

  kvattn-reproduce list                        every shipped file and what remakes it
  kvattn-reproduce checkpoint pldr_tiny        a shipped checkpoint, from its recipe
  kvattn-reproduce trajectory pldr_tiny        its collapse measures, recorded as it trains
  kvattn-reproduce experiment NAME --workers 2 one of chapter 5's runs, from its plan
  kvattn-reproduce contrast --steps 200 --test-seeds 3 --name pilot   a design of your own
  kvattn-reproduce hunt base --workers 2       runs of chapter 11's collapse hunt
  kvattn-reproduce hunt --ship NAME            ship a finished hunt run's model
  kvattn-reproduce hunt --plan constant_rate   the hunt's runs held at their peak rate
  kvattn-reproduce hunt --plan hunt_reruns     the hunt's runs again, with the LayerNorm scale
  kvattn-reproduce corpora                     the text snapshots, from this Python

Files go under --out (default reproduced/) in data/'s layout; training runs under --runs
(default runs/). Nothing that exists is replaced without --overwrite; --resume continues
interrupted runs; --reship writes the outputs of finished runs again (no training). SIGINT or
SIGTERM stops every run and says where each can resume. The exit status is 1 when a run failed
or was stopped (the others still ran)."""


def _device(text: str) -> str:
    """An argparse type: cpu, cuda, cuda:N (on a machine that has it) or auto."""
    if text == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(text)
    except RuntimeError:
        raise argparse.ArgumentTypeError(
            f"not a device: {text!r} (cpu, cuda, cuda:N or auto)"
        ) from None
    if device.type not in ("cpu", "cuda"):
        raise argparse.ArgumentTypeError(f"{text}: choose cpu, cuda, cuda:N or auto")
    if device.type == "cuda" and (
        not torch.cuda.is_available() or (device.index or 0) >= torch.cuda.device_count()
    ):
        raise argparse.ArgumentTypeError(f"{text}: this machine has no such CUDA device")
    return text


def parser() -> argparse.ArgumentParser:
    """The parser of every subcommand."""
    top = argparse.ArgumentParser(
        prog=PROG, description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--out", type=Path, default=Path("reproduced"), help="where the files go, in data/'s layout"
    )
    common.add_argument(
        "--overwrite", action="store_true", help="replace files and runs that exist"
    )
    training = argparse.ArgumentParser(add_help=False)
    training.add_argument(
        "--runs", type=Path, default=Path("runs"), help="where the training runs go"
    )
    training.add_argument("--resume", action="store_true", help="continue interrupted runs")
    training.add_argument(
        "--reship",
        action="store_true",
        help="write the outputs of finished runs in --runs again, replacing them (no training)",
    )
    workers = argparse.ArgumentParser(add_help=False)
    workers.add_argument(
        "--workers", type=int_argument(1), default=1, help="processes, one thread each"
    )
    workers.add_argument(
        "--device", type=_device, default="cpu", help="cpu (the shipped runs), cuda or auto"
    )
    sub = top.add_subparsers(dest="what", required=True)
    sub.add_parser("list", help="every shipped file and the command that remakes it")
    c = sub.add_parser("checkpoint", parents=[common, training], help="shipped checkpoints")
    c.add_argument("names", nargs="*", help="recipes in data/recipes (default: every one)")
    t = sub.add_parser("trajectory", parents=[common, training], help="collapse trajectories")
    t.add_argument("names", nargs="*", help="PLDR-LLM recipes (default: every one)")
    t.add_argument("--probe-every", type=int_argument(1), default=100)
    t.add_argument("--probe-blocks", type=int_argument(2), default=4)
    e = sub.add_parser("experiment", parents=[common, workers], help="chapter 5's shipped runs")
    e.add_argument("names", nargs="+", help="runs of data/plans/experiments.json")
    d = sub.add_parser(
        "contrast", parents=[common, workers, contrast_parser()], help="a contrast of your own"
    )
    d.add_argument("--name", default="contrast", help="the output is OUT/experiments/NAME.json")
    h = sub.add_parser("hunt", parents=[common, training, workers], help="the collapse hunt")
    h.add_argument("names", nargs="*", help="runs of the plan (default: all)")
    h.add_argument(
        "--plan",
        choices=HUNT_STUDIES,
        default=HUNT_PLAN,
        help="data/plans/PLAN.json; its records go to OUT/PLAN/ (default: collapse_hunt)",
    )
    h.add_argument("--steps", type=int_argument(1), help="a pilot: the base length, scaled")
    h.add_argument("--threads", type=int_argument(1), default=1, help="torch threads per run")
    h.add_argument(
        "--ship", action="store_true", help="only ship the named runs' final models (no training)"
    )
    sub.add_parser("corpora", parents=[common], help="the corpus snapshots, from this Python")
    return top


def listing() -> str:
    """Every shipped file and the command that remakes it."""
    recipes = data.recipe_names()
    lines = [f"data/{n}/: {PROG} checkpoint {n}" for n in recipes]
    lines += [
        f"data/trajectories/{n}.json: {PROG} trajectory {n}"
        for n in recipes
        if read_json(data.recipe(n), "recipe")["architecture"] == "pldrllm"
    ]
    lines += [
        f"data/experiments/{n}.json: {PROG} experiment {n}" for n in plan(EXPERIMENT_PLANS)["runs"]
    ]
    lines += [f"data/collapse_hunt/{n}.json: {PROG} hunt {n}" for n in plan(HUNT_PLAN)["runs"]]
    lines += [
        f"data/collapse_hunt/{n}/: {PROG} hunt --ship {n}" for n in plan(HUNT_PLAN)["shipped"]
    ]
    lines += [
        f"data/{study}/{n}.json: {PROG} hunt {n} --plan {study}"
        for study in HUNT_STUDIES
        if study != HUNT_PLAN
        for n in plan(study)["runs"]
        if _shipped(study, n)
    ]
    lines += [
        f"data/corpora/: {PROG} corpora (on Python {data.corpus_snapshot('pydoc').python})",
        "data/benchmarks/cpu_2core.json: python -m kvattn.benchmark --compile --budget 60 "
        "--json data/benchmarks/cpu_2core.json",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """``kvattn-reproduce`` (``python -m kvattn.reproduce``); returns the exit status: 0, 1 when a
    run failed, 2 (with a usage message, before any work) for a refused request."""
    top = parser()
    args = top.parse_args(argv)
    if args.what == "list":
        try:
            print(listing())
        except SchemaError as err:  # a damaged plan or recipe, named with its field
            top.error(str(err))
        return 0
    command = " ".join([PROG, *(sys.argv[1:] if argv is None else argv)])
    try:
        if getattr(args, "reship", False) and (args.resume or args.overwrite):
            raise ReproduceError(
                "--reship replaces the outputs of finished runs: drop --resume and --overwrite"
            )
        if args.what == "hunt" and not args.ship:
            jobs = _plan_hunt(args, command)
        else:
            work = _plan(args, command)
    except (ReproduceError, SchemaError) as err:
        top.error(str(err))
    if args.what == "hunt" and not args.ship:
        results = run_hunts(jobs, args.workers)
        return _status([name for name, ok, _ in results if not ok], len(results))
    failed = []
    for name, run in work:
        print(f"== {name}", flush=True)
        t0 = time.perf_counter()
        try:
            print(f"   -> {run()}", flush=True)
        except Exception as err:  # one failed run must not stop the others
            print(f"{name}: FAILED after {time.perf_counter() - t0:.0f} s: {err!r}", flush=True)
            failed.append(name)
    return _status(failed, len(work))


def _shipped(study: str, name: str) -> bool:
    """Whether the run ``name`` of the plan ``study`` has a shipped record."""
    try:
        data.hunt_study(study, name)
    except FileNotFoundError:
        return False
    return True


def _status(failed: list[str], total: int) -> int:
    if failed:
        print(f"{len(failed)} of {total} runs failed: {failed}", file=sys.stderr)
        return 1
    return 0


def _names(given: list[str], known: list[str], what: str) -> list[str]:
    unknown = [n for n in given if n not in known]
    if unknown:
        raise ReproduceError(f"unknown {what} {unknown}; the known ones: {known}")
    if len(set(given)) != len(given):
        raise ReproduceError(f"a {what} is named twice: {given}")
    return given or known


def _plan(args: argparse.Namespace, command: str) -> list[tuple[str, Callable[[], object]]]:
    """Check the request whole and return its runs, each a (name, call) pair; nothing is written
    or trained here."""
    out = args.out
    if args.what == "corpora":
        python_licence()
        check_outputs([], [out / "corpora"], args.overwrite)
        if (out / "corpora").is_dir():
            check_corpora_folder(out / "corpora")
        return [("corpora", lambda: make_corpora(out))]
    if args.what in ("checkpoint", "trajectory"):
        return _plan_checkpoints(args)
    if args.what in ("experiment", "contrast"):
        return _plan_contrasts(args, command)
    return _plan_ship(args)


def _plan_checkpoints(args: argparse.Namespace) -> list[tuple[str, Callable[[], object]]]:
    out, names = args.out, _names(args.names, data.recipe_names(), "recipe")
    if args.what == "trajectory":
        pldr = [
            n for n in names if read_json(data.recipe(n), "recipe")["architecture"] == "pldrllm"
        ]
        if args.names and pldr != names:
            raise ReproduceError(
                f"only PLDR-LLMs have trajectories: {sorted(set(names) - set(pldr))}"
            )
        configs = {
            n: trajectory_config(n, args.runs, args.probe_every, args.probe_blocks, args.overwrite)
            for n in pldr
        }
        check_outputs(
            [out / "trajectories" / f"{n}.json" for n in configs], [], args.overwrite or args.reship
        )
        make = make_trajectory
    else:
        configs = {n: checkpoint_config(n, args.runs, args.overwrite) for n in names}
        check_outputs([], [out / n for n in configs], args.overwrite or args.reship)
        make = make_checkpoint
    run_dirs = [Path(cfg.out_dir) for cfg in configs.values()]
    check_apart([out], run_dirs)
    _check_runs(args, configs)
    resume = args.resume or args.reship
    return [(n, lambda n=n, cfg=cfg: make(n, cfg, out, resume)) for n, cfg in configs.items()]


def _check_runs(args: argparse.Namespace, configs: dict) -> None:
    """The runs' folders as the request needs them; with ``--reship``, finished runs (which a
    resume continues at their last step, so nothing is trained again)."""
    run_dirs = [Path(cfg.out_dir) for cfg in configs.values()]
    check_runs(run_dirs, args.overwrite, args.resume or args.reship)
    if args.reship:
        for cfg in configs.values():
            check_finished_run(Path(cfg.out_dir) / CHECKPOINT, cfg.steps)


def _plan_contrasts(
    args: argparse.Namespace, command: str
) -> list[tuple[str, Callable[[], object]]]:
    if args.what == "experiment":
        plans = plan(EXPERIMENT_PLANS)["runs"]
        names = _names(args.names, list(plans), "experiment")
        designs = {n: contrast_design(plans[n]["options"]) for n in names}
        commands = {n: f"{PROG} experiment {n}" for n in names}
    else:
        name = check_stem("--name", args.name)
        designs, commands = {name: design_from(args)}, {name: command}
    targets = {n: args.out / "experiments" / f"{n}.json" for n in designs}
    check_outputs(list(targets.values()), [], args.overwrite)
    tokens = tokens_for(list(designs.values()))

    def run(name: str) -> Path:
        design = designs[name]
        record = run_contrast(
            design, tokens[design["vocab_size"]], args.device, args.workers, commands[name]
        )
        print(summary(record))
        return write_json(targets[name], record)

    return [(n, lambda n=n: run(n)) for n in designs]


def _plan_ship(args: argparse.Namespace) -> list[tuple[str, Callable[[], object]]]:
    """``hunt --ship NAME...``: copy finished hunt runs' final models into the shipped layout."""
    out, runs, study = args.out, args.runs, args.plan
    names = _names(args.names, list(plan(study)["runs"]), _what(study))
    if not args.names:
        raise ReproduceError("--ship needs the names of the runs to ship")
    missing = [n for n in names if not (runs / study / n / CHECKPOINT).is_dir()]
    if missing:
        raise ReproduceError(f"no finished run to ship for {missing} in {runs / study}")
    for n in names:
        steps = hunt_config(n, None, runs, "cpu", overwrite=False, study=study).steps
        check_finished_run(runs / study / n / CHECKPOINT, steps)
    targets = [out / study / n for n in names]
    check_outputs([], targets, args.overwrite)
    check_apart(targets, [runs / study / n for n in names])
    return [(n, lambda n=n: ship_hunt(n, out, runs, study)) for n in names]


def _what(study: str) -> str:
    """What a run of the plan ``study`` is called in a message."""
    return "hunt run" if study == HUNT_PLAN else f"{study} run"


def _plan_hunt(args: argparse.Namespace, command: str) -> list[tuple]:
    """``hunt [NAME...]``: the checked jobs of :func:`kvattn.reproduce.hunt.run_hunts`."""
    out, runs, study = args.out, args.runs, args.plan
    names = _names(args.names, list(plan(study)["runs"]), _what(study))
    configs = {
        n: hunt_config(n, args.steps, runs, args.device, args.overwrite, study) for n in names
    }
    check_outputs([out / study / f"{n}.json" for n in names], [], args.overwrite or args.reship)
    run_dirs = [Path(cfg.out_dir) for cfg in configs.values()]
    check_apart([out / study / n for n in names], run_dirs)
    _check_runs(args, configs)
    options = "" if args.steps is None else f" --steps {args.steps}"
    options += "" if study == HUNT_PLAN else f" --plan {study}"
    resume = args.resume or args.reship
    return [
        (n, cfg, out, runs, args.threads, resume, f"{PROG} hunt {n}{options}", study)
        for n, cfg in configs.items()
    ]
