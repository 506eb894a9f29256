"""Chapter 11's collapse hunt (``data/collapse_hunt/``): PLDR-LLMs trained along each knob that
might push G_LM towards a constant, with the collapse measures recorded as they train. The plan,
``data/plans/collapse_hunt.json``, holds the base recipe, the settings every run shares, and each
run's one change and why it was made. The plans of :data:`kvattn.data.HUNT_STUDIES` run hunt
runs with changes on top (``constant_rate``: issue 31's test of the route the training-dynamics
study proposes; ``hunt_reruns``: the hunt's runs made again so that every trajectory carries
the LayerNorm scale); their records go to ``data/<plan>/``."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import multiprocessing
import platform
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
        cfg = {**json.loads(data.recipe(hunt["base_recipe"]).read_text()), **hunt["shared"]}
    else:
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
    """The row-map gains (:func:`kvattn.diagnostics.collapse.row_map_gain`) of the final model
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


def run_hunts(jobs: list[tuple], workers: int) -> list[tuple[str, bool, str]]:
    """Run the jobs (the arguments of :func:`hunt_run`), ``workers`` processes at a time, printing
    a line as each ends; every run is reported, a run whose process died (killed, out of memory)
    as failed rather than waited for."""
    if workers == 1:
        results = []
        for job in jobs:
            results.append(_job(job))
            print(results[-1][2], flush=True)
        return results
    results = []
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(workers, mp_context=context) as pool:
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
    return results
