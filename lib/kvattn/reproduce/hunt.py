"""Chapter 11's collapse hunt (``data/collapse_hunt/``): PLDR-LLMs trained along each knob that
might push G_LM towards a constant, with the collapse measures recorded as they train. The plan,
``data/plans/collapse_hunt.json``, holds the base recipe, the settings every run shares, and each
run's one change and why it was made. The plans of :data:`kvattn.data.locators.HUNT_STUDIES` run
hunt runs with changes on top (``constant_rate``: issue 31's test of the route the training-dynamics
study proposes; ``hunt_reruns``: the hunt's runs made again so that every trajectory carries the
LayerNorm scale); their records go to ``data/<plan>/``."""

from __future__ import annotations

import dataclasses
import hashlib
import multiprocessing
import platform
import signal
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import torch

from .. import data
from .._files import write_json
from ..checkpoint import load_pretrained
from ..diagnostics import probe_reading, row_map_gain
from ..pldr import PLDRLLM
from ..pretrain import PretrainConfig, pretrain
from ..schema import read_json
from .files import (
    CHECKPOINT,
    HUNT_PLAN,
    HUNT_STUDIES,
    PROG,
    ReproduceError,
    machine,
    plan,
    ship_run,
)

#: The recipe fields a pilot (``--steps``) shortens in proportion to the run's length.
SCALED_BY_STEPS = ("steps", "warmup", "checkpoint_every", "eval_every", "probe_every")


def hunt_recipe(
    name: str, steps: int | None = None, runs: Path = Path("runs"), study: str = HUNT_PLAN
) -> dict:
    """The full recipe (a :class:`kvattn.pretrain.PretrainConfig` as a dict) of the run ``name`` of
    the plan ``study`` (:data:`~kvattn.reproduce.files.HUNT_STUDIES`). A collapse-hunt run is the
    plan's base recipe with its shared settings and the run's own changes; a constant-rate run is
    the hunt run it names ``from``, with its own changes on top. With ``steps`` (a pilot), every
    run's length, warm-up and intervals shrink in proportion to the hunt's base length, so a pilot
    still reaches its peak rate and is probed along the way. The run's ``out_dir`` is
    ``runs/<study>/<name>``.

    Raises
    ------
    ~kvattn.reproduce.files.ReproduceError
        ``study`` is not a hunt plan, ``name`` is not a run of it, or ``steps`` is not a positive
        int.
    """
    if study not in HUNT_STUDIES:
        raise ReproduceError(f"no hunt plan {study!r}; the plans: {list(HUNT_STUDIES)}")
    runs_of = plan(study)["runs"]
    if name not in runs_of:
        raise ReproduceError(f"the plan {study} has no run {name!r}; its runs: {list(runs_of)}")
    if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int) or steps < 1):
        raise ReproduceError(f"steps must be a positive int, got {steps!r}")
    hunt = plan(HUNT_PLAN)
    if study == HUNT_PLAN:
        cfg = {**read_json(data.recipe(hunt["base_recipe"]), "recipe"), **hunt["shared"]}
    else:
        if runs_of[name]["from"] not in hunt["runs"]:
            raise ReproduceError(
                f"data/plans/{study}.json: $.runs.{name}.from names {runs_of[name]['from']!r}, "
                f"which is no run of data/plans/{HUNT_PLAN}.json: {list(hunt['runs'])}"
            )
        cfg = hunt_recipe(runs_of[name]["from"], runs=runs)
    for key, value in runs_of[name]["changes"].items():
        cfg[key] = {**cfg[key], **value} if isinstance(value, dict) else value
    if steps is not None:
        base = hunt["shared"]["steps"]
        for key in SCALED_BY_STEPS:
            cfg[key] = max(0 if key == "warmup" else 1, cfg[key] * steps // base)
    cfg["out_dir"] = (Path(runs) / study / name).as_posix()
    return cfg


def hunt_config(
    name: str,
    steps: int | None,
    runs: Path,
    device: str,
    overwrite: bool,
    study: str = HUNT_PLAN,
) -> PretrainConfig:
    """The run ``name`` of the plan ``study`` as it trains here (on ``device``), checked.

    Raises
    ------
    ~kvattn.reproduce.files.ReproduceError
        As :func:`hunt_recipe`, or a recipe the training code refuses.
    """
    try:
        return dataclasses.replace(
            PretrainConfig(**hunt_recipe(name, steps, runs, study)),
            device=device,
            overwrite=overwrite,
        )
    except ReproduceError:
        raise
    except (TypeError, ValueError) as err:
        raise ReproduceError(f"the {study} run {name} is refused: {err}") from None


def hunt_run(
    name: str,
    cfg: PretrainConfig,
    out: Path,
    runs: Path,
    threads: int,
    resume: bool,
    command: str,
    study: str = HUNT_PLAN,
) -> Path:
    """Train the run ``name`` of the plan ``study`` (``cfg``: :func:`hunt_config`) and write its
    record to ``out/<study>/<name>.json``, with the row-map gains of its final model and of a
    fresh initialisation and the SHA-256 of the plan it ran from; a run that meets the collapse
    criterion also ships its checkpoint."""
    torch.set_num_threads(threads)
    hunt = plan(HUNT_PLAN)
    entry = plan(study)["runs"][name]
    start = time.perf_counter()
    result = pretrain(cfg, resume=resume, progress=False)
    wall = time.perf_counter() - start
    probes = result.probes
    below = hunt["collapse_below"]
    hit = [
        s for i, s in enumerate(probes["step"]) if probe_reading(probes, i, "strict", below).verdict
    ]
    record = {
        "name": name,
        "why": entry.get("why") or plan(study)["question"],
        "recipe": cfg.to_dict(),
        "command": command,
        "plan": {"file": f"data/plans/{study}.json", "sha256": plan_sha256(study)},
        "collapse_below": below,
        "collapsed_at_step": hit[0] if hit else None,
        "val_loss": result.history.evals,
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "threads": threads,
            "python": platform.python_version(),
            "torch": torch.__version__,
        },
        "wall_s": round(wall, 1),
        **probes,
        "row_map_gain": _row_map_gains(cfg, probes["probe_blocks"], hunt),
    }
    target = write_json(out / study / f"{name}.json", record)
    if hit:
        ship_hunt(name, out, runs, study)
    return target


def plan_sha256(study: str) -> str:
    """The SHA-256 of the plan file ``data/plans/<study>.json`` as it is now: a record carries
    it, so a test can tell that a plan was not changed after its runs."""
    return hashlib.sha256(data.plan(study).read_bytes()).hexdigest()


def _row_map_gains(cfg: PretrainConfig, n_blocks: int, hunt: dict) -> dict:
    """The row-map gains (:func:`kvattn.diagnostics.rowmap.row_map_gain`) of the final model
    and of a fresh initialisation of its config, on the run's probe blocks."""
    text = data.load_text(cfg.corpus, max_chars=cfg.corpus_chars)
    val = data.blocks(
        data.tokenize(text, vocab_size=cfg.vocab_size, val_every=cfg.val_every).val,
        cfg.block_size,
    )
    probes = [b[None, :-1] for b in val[:n_blocks]]
    final = load_pretrained(Path(cfg.out_dir) / CHECKPOINT)
    torch.manual_seed(cfg.seed)
    initial = PLDRLLM(final.config)
    return {
        "initial": row_map_gain(initial, probes).tolist(),
        "final": row_map_gain(final, probes).tolist(),
        "collapse_below": hunt["row_map_collapse_below"],
    }


def ship_hunt(name: str, out: Path, runs: Path, study: str = HUNT_PLAN) -> Path:
    """Ship the final model of the run ``name`` of the plan ``study`` (from
    ``runs/<study>/<name>``) to ``out/<study>/<name>/``, in the layout of the shipped
    checkpoints."""
    option = "" if study == HUNT_PLAN else f" --plan {study}"
    provenance = {
        "record": f"data/{study}/{name}.json",
        "command": f"{PROG} hunt --ship {name}{option}",
        **machine(),
    }
    return ship_run(runs / study / name / CHECKPOINT, out / study / name, provenance)


def _job(job: tuple) -> tuple[str, bool, str]:
    """One run, reported as (name, finished, a line for the log)."""
    name, *rest = job
    t0 = time.perf_counter()
    try:
        target = hunt_run(name, *rest)
    except Exception as err:  # one failed run (e.g. a diverged rate) must not stop the others
        return name, False, f"{name}: FAILED after {time.perf_counter() - t0:.0f} s: {err!r}"
    return name, True, f"{name}: {time.perf_counter() - t0:.0f} s -> {target}"


class Stopped(BaseException):
    """SIGINT or SIGTERM reached the process running the hunt (raised in its main thread, so
    that every worker is stopped and every run reported; the message names the signal)."""


def _raise_stopped(signum: int, _frame: object) -> None:
    raise Stopped(signal.Signals(signum).name)


def _worker_start() -> None:
    # A worker leaves SIGINT (Ctrl-C reaches the whole process group) to the parent, which
    # stops every worker and reports each run; its default SIGTERM ends it at once.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _where(job: tuple) -> str:
    """Where a stopped run ``job`` (the arguments of :func:`hunt_run`) can go on from."""
    name, cfg = job[0], job[1]
    state = Path(cfg.out_dir) / CHECKPOINT / "trainer_state.json"
    try:
        step = read_json(state, "trainer_state")["step"]
    except (OSError, ValueError):
        return f"{name}: STOPPED before its first checkpoint (nothing to resume)"
    return (
        f"{name}: STOPPED; its last checkpoint is at step {step} of {cfg.steps} in {cfg.out_dir} "
        "(continue it with --resume)"
    )


def run_hunts(jobs: list[tuple], workers: int) -> list[tuple[str, bool, str]]:
    """Run the jobs (the arguments of :func:`hunt_run`), ``workers`` processes at a time, printing
    a line as each ends; every run is reported, a run whose process died (killed, out of memory)
    as failed rather than waited for.

    SIGINT or SIGTERM to this process stops every worker (each is sent SIGTERM, and SIGKILL if
    it has not ended within :data:`STOP_GRACE_S` seconds) and reports each run that did not
    finish as stopped, with the step of its last checkpoint (``--resume`` continues it there);
    the stopped runs count as failed."""
    previous = (
        signal.signal(signal.SIGTERM, _raise_stopped)
        if threading.current_thread() is threading.main_thread()
        else None
    )
    try:
        return _run_hunts(jobs, workers)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


#: Seconds a stopped worker has to end after SIGTERM before it is killed.
STOP_GRACE_S = 10.0


def _run_hunts(jobs: list[tuple], workers: int) -> list[tuple[str, bool, str]]:
    results: list[tuple[str, bool, str]] = []

    def stopped(why: str) -> list[tuple[str, bool, str]]:
        done = {r[0] for r in results}
        print(f"{PROG}: {why}: stopping every run", file=sys.stderr, flush=True)
        for job in jobs:
            if job[0] not in done:
                results.append((job[0], False, _where(job)))
                print(results[-1][2], flush=True)
        return results

    if workers == 1:
        try:
            for job in jobs:
                results.append(_job(job))
                print(results[-1][2], flush=True)
        except (KeyboardInterrupt, Stopped) as stop:
            return stopped(str(stop) or "SIGINT")
        return results
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(workers, mp_context=context, initializer=_worker_start)
    try:
        futures = {pool.submit(_job, job): job[0] for job in jobs}
        for future in as_completed(futures):
            try:
                result = future.result()
            except BrokenProcessPool:
                name = futures[future]
                result = (
                    name,
                    False,
                    f"{name}: FAILED: a worker process died (killed, or out of memory) and "
                    "the pool stopped before this run finished",
                )
            print(result[2], flush=True)
            results.append(result)
    except (KeyboardInterrupt, Stopped) as stop:
        processes = list((pool._processes or {}).values())  # the executor has no public handle
        for process in processes:
            process.terminate()
        pool.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            process.join(STOP_GRACE_S)
            if process.is_alive():
                process.kill()
                process.join()
        return stopped(str(stop) or "SIGINT")
    pool.shutdown()
    return results
