"""Remake the files the course ships in ``data/``: one command, from a clone or a pip install.

    kvattn-reproduce list                          # every shipped file and what remakes it
    kvattn-reproduce checkpoint pldr_tiny          # a shipped checkpoint, from its recipe
    kvattn-reproduce trajectory pldr_tiny          # its collapse measures, recorded as it trains
    kvattn-reproduce experiment symmetry_contrast_long --workers 2   # one of chapter 5's runs
    kvattn-reproduce contrast --steps 200 --test-seeds 3             # a design of your own
    kvattn-reproduce hunt base --workers 2         # runs of chapter 11's collapse hunt
    kvattn-reproduce hunt --ship lr1e-2_wu500_seed2                  # ship a hunt run's model
    kvattn-reproduce corpora                       # the text snapshots, from this interpreter

(``python -m kvattn.reproduce`` is the same command.) The designs are data: a checkpoint's
recipe is ``data/recipes/<name>.json``, chapter 5's runs and the collapse hunt are the plans
``data/plans/experiments.json`` and ``data/plans/collapse_hunt.json``.

Every output goes under ``--out`` (default ``reproduced/`` in the working folder) in the layout of
``data/``, so ``--out data --overwrite`` in a clone remakes the shipped files in place; training
runs (checkpoints and optimiser state, for ``--resume``) go under ``--runs`` (default ``runs/``).
What the command guarantees:

* every argument, name and output path is checked before any work;
* a file or folder that exists is never replaced without ``--overwrite``, and a finished or
  interrupted training run is never restarted without ``--overwrite`` (or continued with
  ``--resume``); nothing is ever written inside an installed kvattn;
* files are written whole, then renamed into place, and a checkpoint folder is staged beside the
  old one and swapped in (:func:`kvattn.checkpoint.replace_directory`), so a kill at any moment
  leaves either the old file or the new one;
* the exit status is 1 when any run failed (the others still run and are kept).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import lzma
import multiprocessing
import os
import platform
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import torch
from safetensors.torch import load_file

from . import data, diagnostics, experiments
from .checkpoint import load_pretrained, replace_directory, staging_directory
from .diagnostics import collapsed
from .pldr import PLDRLLM
from .pretrain import PretrainConfig, pretrain

PROG = "kvattn-reproduce"
#: The plans of chapter 5's experiments and chapter 11's collapse hunt, in ``data/plans/``.
EXPERIMENT_PLANS = "experiments"
HUNT_PLAN = "collapse_hunt"
#: The files of a shipped checkpoint folder that come from the run (provenance.json is written).
RUN_FILES = ("config.json", "model.safetensors", "tokenizer.model", "trainer_state.json")
# A run's checkpoint folder inside its out_dir (kvattn.pretrain.pretrain writes it).
_CHECKPOINT = "checkpoint"
_TMP = ".kvattn-tmp"


class ReproduceError(ValueError):
    """A request the command refuses before any work (the message says what to change)."""


# --------------------------------------------------------------------------------------------
# Plans and paths


def plan(name: str) -> dict:
    """The plan ``data/plans/<name>.json`` (plain JSON), found like the shipped checkpoints.

    Raises
    ------
    FileNotFoundError
        No such plan (the message lists the shipped ones).
    """
    return json.loads(data.plan(name).read_text())


def hunt_recipe(name: str, steps: int | None = None, runs: Path = Path("runs")) -> dict:
    """The full recipe (a :class:`kvattn.pretrain.PretrainConfig` as a dict) of the collapse hunt's
    run ``name``: the plan's base recipe with its shared settings and the run's own changes.
    ``steps`` shortens every run in proportion to the plan's base length (a pilot); the run's
    ``out_dir`` is ``runs/collapse_hunt/<name>``.

    Raises
    ------
    ReproduceError
        ``name`` is not a run of the plan, or ``steps`` is not a positive int.
    """
    hunt = plan(HUNT_PLAN)
    if name not in hunt["runs"]:
        raise ReproduceError(
            f"the collapse hunt has no run {name!r}; its runs: {list(hunt['runs'])}"
        )
    if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int) or steps < 1):
        raise ReproduceError(f"steps must be a positive int, got {steps!r}")
    cfg = {**json.loads(data.recipe(hunt["base_recipe"]).read_text()), **hunt["shared"]}
    for key, value in hunt["runs"][name]["changes"].items():
        cfg[key] = {**cfg[key], **value} if isinstance(value, dict) else value
    if steps is not None:
        cfg["steps"] = max(1, cfg["steps"] * steps // hunt["shared"]["steps"])
    cfg["out_dir"] = (Path(runs) / "collapse_hunt" / name).as_posix()
    return cfg


def _installed_data() -> Path:
    # An installed kvattn carries data/ as the package data kvattn/_shipped (see kvattn.data).
    return Path(data.__file__).resolve().parent / "_shipped"


def _check_outputs(paths: Sequence[Path], overwrite: bool) -> None:
    """Refuse outputs that exist (without ``overwrite``), that lie inside an installed kvattn, or
    whose place is taken by something of the other kind (a folder where a file goes)."""
    installed = _installed_data()
    for path in paths:
        resolved = path.resolve()
        if resolved == installed or installed in resolved.parents:
            raise ReproduceError(
                f"{path} lies inside the installed kvattn; write elsewhere (--out DIR)"
            )
        for parent in resolved.parents:
            if parent.exists() and not parent.is_dir():
                raise ReproduceError(f"{path} cannot be written: {parent} is a file")
    taken = [p for p in paths if p.exists() or p.is_symlink()]
    if taken and not overwrite:
        raise ReproduceError(
            "these exist and would be replaced: "
            + ", ".join(str(p) for p in taken)
            + "; pass --overwrite to replace them, or choose another --out"
        )


def _check_runs(run_dirs: Sequence[Path], overwrite: bool, resume: bool) -> None:
    """Refuse to restart a run that exists, unless told to replace or continue it; refuse to
    continue one that does not exist."""
    if overwrite and resume:
        raise ReproduceError("--resume and --overwrite exclude each other")
    held = [d for d in run_dirs if (d / _CHECKPOINT).exists()]
    if held and not (overwrite or resume):
        raise ReproduceError(
            "these runs exist: "
            + ", ".join(str(d) for d in held)
            + "; pass --resume to continue them, --overwrite to replace them, or choose "
            "another --runs"
        )
    missing = [d for d in run_dirs if not (d / _CHECKPOINT).exists()]
    if resume and missing:
        raise ReproduceError(
            "--resume: no run to continue in " + ", ".join(str(d) for d in missing)
        )


def write_json(path: Path, obj: object) -> Path:
    """Write ``obj`` as JSON to ``path`` whole: into a temporary sibling, then renamed over
    ``path``, so that a kill leaves the old file or the new one, never half of one."""
    text = json.dumps(obj, indent=1, allow_nan=False) + "\n"  # fails before anything is written
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + _TMP)
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path


def ship_run(run_checkpoint: Path, target: Path, provenance: dict) -> Path:
    """Copy a run's final checkpoint (:data:`RUN_FILES`, not the optimiser state) into
    ``target`` in the layout of the shipped checkpoints, with ``provenance.json``: staged in
    full beside ``target`` and swapped in, so an old ``target`` survives any kill."""
    staging = staging_directory(target)
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for file in RUN_FILES:
        shutil.copy2(run_checkpoint / file, staging / file)
    (staging / "provenance.json").write_text(json.dumps(provenance, indent=1) + "\n")
    replace_directory(target)
    return target


def _machine() -> dict:
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "machine": platform.machine(),
    }


# --------------------------------------------------------------------------------------------
# Checkpoints and trajectories


def make_checkpoint(name: str, out: Path, runs: Path, overwrite: bool, resume: bool) -> Path:
    """Train the shipped checkpoint ``name`` from ``data/recipes/<name>.json`` into
    ``runs/<name>`` and ship it to ``out/<name>/``."""
    cfg = PretrainConfig.from_file(data.recipe(name))
    cfg = dataclasses.replace(
        cfg, out_dir=str((runs / name).resolve()), overwrite=cfg.overwrite or overwrite
    )
    pretrain(cfg, resume=resume)
    provenance = {
        "recipe": f"data/recipes/{name}.json",
        "command": f"{PROG} checkpoint {name}",
        **_machine(),
    }
    return ship_run(Path(cfg.out_dir) / _CHECKPOINT, out / name, provenance)


def make_trajectory(
    name: str,
    out: Path,
    runs: Path,
    probe_every: int,
    probe_blocks: int,
    overwrite: bool,
    resume: bool,
) -> Path:
    """Train the shipped PLDR-LLM ``name`` again with probes (``probe_every`` steps apart, on
    ``probe_blocks`` validation blocks) in ``runs/<name>-probes`` and write its collapse-measure
    trajectory to ``out/trajectories/<name>.json``, with whether it ended with the shipped
    weights (``reproduces_shipped``: every tensor equal) and both final validation losses."""
    cfg = dataclasses.replace(
        PretrainConfig.from_file(data.recipe(name)),
        out_dir=str((runs / f"{name}-probes").resolve()),
        probe_every=probe_every,
        probe_blocks=probe_blocks,
        overwrite=overwrite,
    )
    result = pretrain(cfg, resume=resume)
    ran = load_file(Path(cfg.out_dir) / _CHECKPOINT / "model.safetensors")
    shipped_dir = data.shipped(name)
    shipped = load_file(shipped_dir / "model.safetensors")
    same = ran.keys() == shipped.keys() and all(torch.equal(ran[k], shipped[k]) for k in ran)
    state = json.loads((shipped_dir / "trainer_state.json").read_text())
    record = {
        "recipe": f"data/recipes/{name}.json",
        "command": f"{PROG} trajectory {name} --probe-every {probe_every} "
        f"--probe-blocks {probe_blocks}",
        "probe_every": probe_every,
        "reproduces_shipped": same,
        # the final validation losses of this run and of the shipped one: how far apart they ended
        "final_val_loss": {
            "rerun": result.history.evals[-1],
            "shipped": state["history"]["evals"][-1],
        },
        "python": platform.python_version(),
        "torch": torch.__version__,
        **result.probes,
    }
    return write_json(out / "trajectories" / f"{name}.json", record)


# --------------------------------------------------------------------------------------------
# Chapter 5's experiments


def _contrast_parser() -> argparse.ArgumentParser:
    """The options of a symmetric-vs-gated contrast and its Swish-β dose-response (the plans in
    ``data/plans/experiments.json`` are lists of these options)."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--steps", type=_positive_int, default=1000)
    p.add_argument("--vocab-size", type=_positive_int, default=512)
    p.add_argument("--lrs", type=float, nargs="+", default=[3e-3, 1e-2, 3e-2])
    p.add_argument(
        "--rates-from",
        metavar="NAME",
        help="instead of --lrs, train every kind at the rate that the shipped experiment "
        "data/experiments/NAME.json chose for it (a follow-up: no selection runs)",
    )
    p.add_argument(
        "--select-seeds",
        type=_positive_int,
        default=1,
        help="seeds 1000, 1001, ... (ignored with a single rate: nothing to choose)",
    )
    p.add_argument("--test-seeds", type=_positive_int, default=8, help="how many test seeds")
    p.add_argument(
        "--first-test-seed",
        type=_nonnegative_int,
        default=0,
        help="test seeds are first, first + 1, ... (a confirmatory run uses seeds not yet seen)",
    )
    p.add_argument("--acts", nargs="+", default=list(experiments.CONTRASTS))
    p.add_argument(
        "--betas",
        type=float,
        nargs="*",
        default=[0.25, 0.5, 1.0, 2.0, 8.0],
        help="Swish-β values of the dose-response (none: skip it)",
    )
    p.add_argument(
        "--no-references",
        action="store_true",
        help="train only the symmetric and gated kinds (no bilinear and key-value references)",
    )
    return p


#: The design's keys that :func:`kvattn.experiments.symmetry_contrast` takes as they are.
CONTRAST_KEYS = ("acts", "steps", "lrs", "select_seeds", "test_seeds", "references")


def contrast_design(options: Sequence[str]) -> dict:
    """Parse and check a contrast design given as command-line options (as in the plans): a
    dict of :data:`CONTRAST_KEYS`, ``vocab_size`` and the dose-response's ``betas``.

    Raises
    ------
    ReproduceError
        An option that does not parse, or a design that the experiment would refuse (checked
        here, before any training).
    """
    parser = _contrast_parser()
    parser.error = _refuse  # type: ignore[method-assign]  # an error, not an exit, for a plan
    return _design(parser.parse_args(list(options)))


def _refuse(message: str) -> None:
    raise ReproduceError(f"the contrast options do not parse: {message}")


def _design(args: argparse.Namespace) -> dict:
    """The checked design from parsed contrast options."""
    unknown = sorted(set(args.acts) - set(experiments.CONTRASTS))
    if unknown:
        raise ReproduceError(
            f"unknown --acts {unknown}; the contrasts: {list(experiments.CONTRASTS)}"
        )
    references = not args.no_references
    lrs: list[float] | dict[str, list[float]] = args.lrs
    if args.rates_from:
        chosen = experiments.load_shipped(args.rates_from).contrast.chosen_lr
        names = experiments.kinds(args.acts, references)
        missing = sorted(set(names) - set(chosen))
        if missing:
            raise ReproduceError(f"{args.rates_from} chose no rate for {missing}")
        lrs = {name: [chosen[name]] for name in names}
    design = {
        "acts": args.acts,
        "steps": args.steps,
        "lrs": lrs,
        "select_seeds": [1000 + i for i in range(args.select_seeds)],
        "test_seeds": list(range(args.first_test_seed, args.first_test_seed + args.test_seeds)),
        "references": references,
        "vocab_size": args.vocab_size,
        "betas": args.betas,
    }
    try:
        experiments.check_contrast_design(**{k: design[k] for k in CONTRAST_KEYS})
        if design["betas"] and "silu" in design["acts"]:
            experiments.check_dose_design(betas=design["betas"], seeds=design["test_seeds"])
    except (TypeError, ValueError) as err:
        raise ReproduceError(f"the design is refused: {err}") from None
    return design


def run_contrast(design: dict, device: str, workers: int, command: str) -> dict:
    """Train a contrast design (:func:`contrast_design`) and, when it has SiLU kinds and β
    values, the Swish-β dose-response at the rate the contrast chose for SiLU gated; return the
    record the course ships: the results, the dose-response and the provenance."""
    tokens = data.tokenize(data.load_text("pydoc"), vocab_size=design["vocab_size"])
    start = time.perf_counter()
    result = experiments.symmetry_contrast(
        tokens, **{k: design[k] for k in CONTRAST_KEYS}, device=device, workers=workers
    )
    dose = None
    if design["betas"] and "silu gated" in result.chosen_lr:
        dose = experiments.swish_beta_dose_response(
            tokens,
            betas=design["betas"],
            seeds=design["test_seeds"],
            steps=design["steps"],
            lr=result.chosen_lr["silu gated"],
            device=device,
            workers=workers,
        )
    return {
        **result.to_dict(),
        "dose_response": dose.to_dict() if dose else None,
        "provenance": {
            "torch": torch.__version__,
            "device": torch.cuda.get_device_name() if device.startswith("cuda") else "cpu",
            "corpus": "pydoc",
            "seconds": round(time.perf_counter() - start),
            "command": command,
        },
    }


def _summary(record: dict) -> str:
    result = experiments.ContrastResult.from_dict(
        {k: v for k, v in record.items() if k not in ("dose_response", "provenance")}
    )
    lines = [
        f"{c.act}: symmetric − gated {c.mean:+.4f} ± {c.se:.4f} nats/token (p = {c.p:.3f}, "
        f"n = {c.n}); minimum detectable effect {c.mde:.4f}"
        for c in result.contrasts
    ]
    if record["dose_response"]:
        dose = experiments.DoseResponse.from_dict(record["dose_response"])
        lines.append(
            f"Swish-β: slope {dose.slope:+.4f} ± {dose.slope_se:.4f} nats/token per unit "
            f"exchange violation (p = {dose.slope_p:.3f})"
        )
    if result.lr_at_edge:
        lines.append(f"warning: the chosen rate is at the edge of the grid for {result.lr_at_edge}")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Chapter 11's collapse hunt


def hunt_run(
    name: str,
    steps: int | None,
    out: Path,
    runs: Path,
    device: str,
    threads: int,
    overwrite: bool,
    resume: bool,
) -> Path:
    """Train the collapse hunt's run ``name`` with probes and write its record to
    ``out/collapse_hunt/<name>.json`` (with the row-map gains of its final model and of a fresh
    initialisation); a run that meets the collapse criterion also ships its checkpoint."""
    torch.set_num_threads(threads)
    hunt = plan(HUNT_PLAN)
    raw = hunt_recipe(name, steps, runs)
    cfg = dataclasses.replace(PretrainConfig(**raw), device=device, overwrite=overwrite)
    start = time.perf_counter()
    result = pretrain(cfg, resume=resume, progress=False)
    wall = time.perf_counter() - start
    probes = result.probes
    below = hunt["collapse_below"]
    hit = [s for i, s in enumerate(probes["step"]) if collapsed(probes, i, below)]
    record = {
        "name": name,
        "why": hunt["runs"][name]["why"],
        "recipe": cfg.to_dict(),
        "command": f"{PROG} hunt {name}" + ("" if steps is None else f" --steps {steps}"),
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
        "row_map_gain": _row_map_gains(cfg, result.model, probes["probe_blocks"], hunt),
    }
    target = write_json(out / "collapse_hunt" / f"{name}.json", record)
    if hit:
        ship_hunt(name, out, runs)
    return target


def _row_map_gains(cfg: PretrainConfig, model: torch.nn.Module, n_blocks: int, hunt: dict) -> dict:
    """The row-map gains (:func:`kvattn.diagnostics.collapse.row_map_gain`) of the final model and
    of a
    fresh initialisation of its config, on the run's probe blocks."""
    text = data.load_text(cfg.corpus, max_chars=cfg.corpus_chars)
    val = data.blocks(
        data.tokenize(text, vocab_size=cfg.vocab_size, val_every=cfg.val_every).val,
        cfg.block_size,
    )
    probes = [b[None, :-1] for b in val[:n_blocks]]
    final = load_pretrained(Path(cfg.out_dir) / _CHECKPOINT)
    torch.manual_seed(cfg.seed)
    initial = PLDRLLM(final.config)
    return {
        "initial": diagnostics.row_map_gain(initial, probes).tolist(),
        "final": diagnostics.row_map_gain(final, probes).tolist(),
        "collapse_below": hunt["row_map_collapse_below"],
    }


def ship_hunt(name: str, out: Path, runs: Path) -> Path:
    """Ship the final model of the hunt's run ``name`` (from ``runs/collapse_hunt/<name>``) to
    ``out/collapse_hunt/<name>/``, in the layout of the shipped checkpoints."""
    provenance = {
        "record": f"data/collapse_hunt/{name}.json",
        "command": f"{PROG} hunt --ship {name}",
        **_machine(),
    }
    return ship_run(
        runs / "collapse_hunt" / name / _CHECKPOINT, out / "collapse_hunt" / name, provenance
    )


def _hunt_job(job: tuple) -> tuple[str, bool, str]:
    name, *rest = job
    t0 = time.perf_counter()
    try:
        target = hunt_run(name, *rest)
    except Exception as err:  # one failed run (e.g. a diverged rate) must not stop the others
        return name, False, f"{name}: FAILED after {time.perf_counter() - t0:.0f} s: {err!r}"
    return name, True, f"{name}: {time.perf_counter() - t0:.0f} s -> {target}"


# --------------------------------------------------------------------------------------------
# The corpora


def make_corpora(out: Path) -> list[Path]:
    """Snapshot this interpreter's corpora (:func:`kvattn.data.interpreter_text`) into
    ``out/corpora/``: ``<name>.txt.xz`` each, ``corpora.json`` (Python version, characters,
    SHA-256) and the Python licence that covers them (``LICENSE``)."""
    folder = out / "corpora"
    folder.mkdir(parents=True, exist_ok=True)
    record, written = {}, []
    for name in data.CORPORA:
        raw = data.interpreter_text(name).encode("utf-8")
        target = folder / f"{name}.txt.xz"
        tmp = target.with_name(target.name + _TMP)
        tmp.write_bytes(lzma.compress(raw, preset=9 | lzma.PRESET_EXTREME))
        os.replace(tmp, target)
        record[name] = {
            "python": platform.python_version(),
            "chars": len(raw.decode("utf-8")),
            "sha256": hashlib.sha256(raw).hexdigest(),
        }
        written.append(target)
    licence = Path(os.__file__).resolve().parent / "LICENSE.txt"
    if not licence.is_file():
        raise FileNotFoundError(
            f"this Python has no licence file at {licence} to ship beside the text"
        )
    shutil.copyfile(licence, folder / "LICENSE")
    written += [folder / "LICENSE", write_json(folder / data.CORPORA_RECORD, record)]
    return written


# --------------------------------------------------------------------------------------------
# The command line


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def _nonnegative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, got {text}")
    return value


def _device(text: str) -> str:
    if text == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(text)
    except RuntimeError:
        raise argparse.ArgumentTypeError(
            f"not a device: {text!r} (cpu, cuda, cuda:N or auto)"
        ) from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise argparse.ArgumentTypeError(f"{text}: this machine has no CUDA device")
    if device.type not in ("cpu", "cuda"):
        raise argparse.ArgumentTypeError(f"{text}: choose cpu, cuda, cuda:N or auto")
    return text


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
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
    workers = argparse.ArgumentParser(add_help=False)
    workers.add_argument(
        "--workers", type=_positive_int, default=1, help="processes, one thread each"
    )
    workers.add_argument(
        "--device", type=_device, default="cpu", help="cpu (the shipped runs), cuda or auto"
    )
    sub = parser.add_subparsers(dest="what", required=True)
    sub.add_parser("list", help="every shipped file and the command that remakes it")
    c = sub.add_parser("checkpoint", parents=[common, training], help="shipped checkpoints")
    c.add_argument("names", nargs="*", help="recipes in data/recipes (default: every one)")
    t = sub.add_parser("trajectory", parents=[common, training], help="collapse trajectories")
    t.add_argument("names", nargs="*", help="PLDR-LLM recipes (default: every one)")
    t.add_argument("--probe-every", type=_positive_int, default=100)
    t.add_argument("--probe-blocks", type=_positive_int, default=4)
    e = sub.add_parser("experiment", parents=[common, workers], help="chapter 5's shipped runs")
    e.add_argument("names", nargs="+", help="runs of data/plans/experiments.json")
    d = sub.add_parser(
        "contrast", parents=[common, workers, _contrast_parser()], help="a contrast of your own"
    )
    d.add_argument("--name", default="contrast", help="the output is OUT/experiments/NAME.json")
    h = sub.add_parser("hunt", parents=[common, training, workers], help="the collapse hunt")
    h.add_argument("names", nargs="*", help="runs of data/plans/collapse_hunt.json (default: all)")
    h.add_argument("--steps", type=_positive_int, help="a pilot: the base length, scaled")
    h.add_argument("--threads", type=_positive_int, default=1, help="torch threads per run")
    h.add_argument(
        "--ship", action="store_true", help="only ship the named runs' final models (no training)"
    )
    sub.add_parser("corpora", parents=[common], help="the corpus snapshots, from this Python")
    return parser


def listing() -> str:
    """Every shipped file and the command that remakes it."""
    recipes = data.recipe_names()
    lines = [f"data/{n}/: {PROG} checkpoint {n}" for n in recipes]
    lines += [
        f"data/trajectories/{n}.json: {PROG} trajectory {n}"
        for n in recipes
        if json.loads(data.recipe(n).read_text())["architecture"] == "pldrllm"
    ]
    lines += [
        f"data/experiments/{n}.json: {PROG} experiment {n}" for n in plan(EXPERIMENT_PLANS)["runs"]
    ]
    lines += [f"data/collapse_hunt/{n}.json: {PROG} hunt {n}" for n in plan(HUNT_PLAN)["runs"]]
    lines += [
        f"data/collapse_hunt/{n}/: {PROG} hunt --ship {n}" for n in plan(HUNT_PLAN)["shipped"]
    ]
    lines += [
        f"data/corpora/: {PROG} corpora (on Python {data.corpus_snapshot('pydoc').python})",
        "data/benchmarks/cpu_2core.json: python -m kvattn.benchmark --compile --budget 60 "
        "--json data/benchmarks/cpu_2core.json",
    ]
    return "\n".join(lines)


def _names(given: list[str], known: list[str], what: str) -> list[str]:
    unknown = [n for n in given if n not in known]
    if unknown:
        raise ReproduceError(f"unknown {what} {unknown}; the known ones: {known}")
    if len(set(given)) != len(given):
        raise ReproduceError(f"a {what} is named twice: {given}")
    return given or known


def main(argv: list[str] | None = None) -> int:
    """``kvattn-reproduce`` (``python -m kvattn.reproduce``): see the module's docstring."""
    parser = _parser()
    args = parser.parse_args(argv)
    command = " ".join([PROG, *(sys.argv[1:] if argv is None else argv)])
    try:
        return _run(args, command)
    except ReproduceError as err:
        parser.error(str(err))
    return 2  # parser.error exits; this line is never reached


def _run(args: argparse.Namespace, command: str) -> int:
    if args.what == "list":
        print(listing())
        return 0
    out = args.out
    if args.what == "corpora":
        _check_outputs([out / "corpora" / f for f in _corpora_files()], args.overwrite)
        for path in make_corpora(out):
            print(f"written {path}")
        return 0
    if args.what in ("checkpoint", "trajectory"):
        names = _names(args.names, data.recipe_names(), "recipe")
        if args.what == "trajectory":
            given = names
            names = [
                n
                for n in names
                if json.loads(data.recipe(n).read_text())["architecture"] == "pldrllm"
            ]
            if args.names and names != given:
                raise ReproduceError(
                    f"only PLDR-LLMs have trajectories: {sorted(set(given) - set(names))}"
                )
            runs = [args.runs / f"{n}-probes" for n in names]
            targets = [out / "trajectories" / f"{n}.json" for n in names]
        else:
            runs = [args.runs / n for n in names]
            targets = [out / n for n in names]
        _check_outputs(targets, args.overwrite)
        _check_runs(runs, args.overwrite, args.resume)
        for name in names:
            print(f"== {name}", flush=True)
            if args.what == "checkpoint":
                target = make_checkpoint(name, out, args.runs, args.overwrite, args.resume)
            else:
                target = make_trajectory(
                    name,
                    out,
                    args.runs,
                    args.probe_every,
                    args.probe_blocks,
                    args.overwrite,
                    args.resume,
                )
            print(f"   -> {target}", flush=True)
        return 0
    if args.what in ("experiment", "contrast"):
        if args.what == "experiment":
            plans = plan(EXPERIMENT_PLANS)["runs"]
            names = _names(args.names, list(plans), "experiment")
            designs = {n: contrast_design(plans[n]["options"]) for n in names}
            commands = {n: f"{PROG} experiment {n}" for n in names}
        else:
            designs = {args.name: _design(args)}
            commands = {args.name: command}
        targets = {n: out / "experiments" / f"{n}.json" for n in designs}
        _check_outputs(list(targets.values()), args.overwrite)
        for name, design in designs.items():
            print(f"== {name}", flush=True)
            record = run_contrast(design, args.device, args.workers, commands[name])
            print(_summary(record))
            print(f"   -> {write_json(targets[name], record)}", flush=True)
        return 0
    # the collapse hunt
    hunt = plan(HUNT_PLAN)
    names = _names(args.names, list(hunt["runs"]), "hunt run")
    if args.ship:
        if not args.names:
            raise ReproduceError("--ship needs the names of the runs to ship")
        missing = [n for n in names if not (args.runs / "collapse_hunt" / n / _CHECKPOINT).is_dir()]
        if missing:
            raise ReproduceError(
                f"no finished run to ship for {missing} in {args.runs / 'collapse_hunt'}"
            )
        _check_outputs([out / "collapse_hunt" / n for n in names], args.overwrite)
        for name in names:
            print(f"{name}: shipped in {ship_hunt(name, out, args.runs)}")
        return 0
    for name in names:
        hunt_recipe(name, args.steps, args.runs)
    _check_outputs([out / "collapse_hunt" / f"{n}.json" for n in names], args.overwrite)
    _check_runs([args.runs / "collapse_hunt" / n for n in names], args.overwrite, args.resume)
    jobs = [
        (n, args.steps, out, args.runs, args.device, args.threads, args.overwrite, args.resume)
        for n in names
    ]
    if args.workers == 1:
        results = [_hunt_job(job) for job in jobs]
        for _, _, line in results:
            print(line, flush=True)
    else:
        results = []
        with multiprocessing.get_context("spawn").Pool(args.workers) as pool:
            for result in pool.imap_unordered(_hunt_job, jobs):
                print(result[2], flush=True)
                results.append(result)
    failed = [name for name, ok, _ in results if not ok]
    if failed:
        print(f"{len(failed)} of {len(results)} runs failed: {failed}", file=sys.stderr)
        return 1
    return 0


def _corpora_files() -> list[str]:
    return [f"{n}.txt.xz" for n in data.CORPORA] + ["LICENSE", data.CORPORA_RECORD]


if __name__ == "__main__":
    sys.exit(main())
