"""The collapse hunt of chapter 11: train PLDR-LLMs along each knob that might push G_LM towards
an input-independent constant, record the collapse measures as they train, and save each run's
trajectory as a small JSON file that the chapter reads.

    python tools/collapse_hunt.py --workers 2          # the shipped plan, on two CPU cores
    python tools/collapse_hunt.py --steps 200 --out /tmp/hunt --runs /tmp/hunt/runs base   # a pilot

The plan (``PLAN``) starts from the sweep's fastest-moving recipe (``sweep_lr3e-3_wu50``: the one
whose RMS order parameter fell furthest in 2,000 steps) trained three times longer, and changes one
knob at a time: a second seed (the spread between seeds), the peak learning rate and warm-up (the
axis the papers tie to collapse), weight decay (AdamW pulls every weight, the metric learner's
included, towards zero, and an all-zero metric learner makes G_LM a constant), the batch size
and the corpus size at the same number of tokens (fewer or more passes over the same text), and
the metric learner's depth. Every run probes the collapse measures of
:func:`kvattn.diagnostics.collapse_measures` on the same four validation blocks.

Each record also holds the row-map gain (:func:`kvattn.diagnostics.row_map_gain`) of the final
model and of a fresh initialisation, the training-dynamics study's criterion of row-map collapse
(below 0.1).

A run counts as collapsed when, in every layer, the papers' order parameter of G_LM (std over
inputs / |mean|, the largest over the layer's entries and heads) is below 1e-3 and σ2/σ1 of A is
below 1e-3 (A of numerical rank 1), as in the published near-critical models. A collapsed run's
checkpoint is copied next to its trajectory, in the layout of the shipped checkpoints;
``--ship`` does the same for a run chosen by hand (the one nearest to collapse).

Each output file records the full recipe, the command, the machine, torch's version, the threads
and the wall time, so a reader can tell how it was made.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import os
import platform
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASE_RECIPE = ROOT / "data" / "recipes" / "sweep_lr3e-3_wu50.json"
DEFAULT_OUT = ROOT / "data" / "collapse_hunt"
DEFAULT_RUNS = ROOT / "runs" / "collapse_hunt"
COLLAPSE_BELOW = 1e-3
#: The training-dynamics study's criterion of row-map collapse: median gain of the metric
#: learner's row map below 0.1 (kvattn.diagnostics.row_map_gain).
ROW_MAP_COLLAPSE_BELOW = 0.1

#: name -> (changes to the base recipe, why this run). Steps are the base's 6,000 unless changed;
#: the batch and corpus runs keep the tokens seen equal to the base's.
PLAN: dict[str, tuple[dict, str]] = {
    "base": ({}, "the sweep's fastest-moving recipe, trained 3x longer"),
    "base_seed2": ({"seed": 2}, "a second seed: the spread the other runs are judged against"),
    "lr1e-2_wu500": ({"lr": 1e-2, "warmup": 500}, "higher peak rate, 10x longer warm-up"),
    "lr3e-2_wu2000": (
        {"lr": 3e-2, "warmup": 2000},
        "peak rate 10x higher with a long warm-up (largest peak rate x warm-up)",
    ),
    "lr1e-2_wu500_seed2": (
        {"lr": 1e-2, "warmup": 500, "seed": 2},
        "lr1e-2_wu500 again with a second seed (the nearest to collapse when this run was added)",
    ),
    "lr1e-2_wu50": ({"lr": 1e-2}, "the same peak rate with the base's short warm-up"),
    "wd1": ({"weight_decay": 1.0}, "AdamW weight decay 10x higher (0.1 -> 1.0)"),
    "batch64": (
        {"batch_size": 64, "steps": 1500},
        "4x larger batch, same tokens (a quarter of the steps)",
    ),
    "corpus1.5M": (
        {"corpus_chars": 1_500_000},
        "a quarter of the text: 4x more passes over the same tokens",
    ),
    "metric_depth8": (
        {"model": {"num_reslayerA": 8}},
        "8 residual units in the metric learner, as in the author's collapse studies (base: 2)",
    ),
}
BASE_STEPS = 6000


def recipe(name: str, steps: int | None, runs: Path) -> dict:
    """The base recipe with ``PLAN[name]``'s changes (``steps`` scales every run's length)."""
    base = json.loads(BASE_RECIPE.read_text())
    changes, _ = PLAN[name]
    cfg = {**base, "steps": BASE_STEPS, "checkpoint_every": 500, "eval_every": 500}
    for key, value in changes.items():
        cfg[key] = {**cfg[key], **value} if isinstance(value, dict) else value
    if steps is not None:  # a pilot: every run shortened in proportion
        cfg["steps"] = max(1, cfg["steps"] * steps // BASE_STEPS)
    cfg["out_dir"] = str(runs / name)
    return cfg


def collapsed(probes: dict, at: int) -> bool:
    """Every layer's |mean| order parameter of G_LM and σ2/σ1 of A below COLLAPSE_BELOW."""
    order = probes["G_order_mean"][at]
    ratio = probes["A_sigma_ratio"][at]
    return all(o is not None and o < COLLAPSE_BELOW for o in order) and all(
        r is not None and r < COLLAPSE_BELOW for r in ratio
    )


def run(name: str, steps: int | None, out: Path, runs: Path, probe_every: int, device: str) -> Path:
    torch_threads = int(os.environ.get("KVATTN_HUNT_THREADS", "1"))
    import torch

    torch.set_num_threads(torch_threads)
    from kvattn.train import PretrainConfig, pretrain

    raw = recipe(name, steps, runs)
    cfg = dataclasses.replace(
        PretrainConfig(**raw),
        probe_every=probe_every,
        probe_blocks=4,
        overwrite=True,
        device=device,
    )
    start = time.perf_counter()
    result = pretrain(cfg, progress=False)
    wall = time.perf_counter() - start
    probes = result.probes
    hit = [s for i, s in enumerate(probes["step"]) if collapsed(probes, i)]
    record = {
        "name": name,
        "why": PLAN[name][1],
        "recipe": cfg.to_dict(),
        "command": "python tools/collapse_hunt.py "
        + name
        + ("" if steps is None else f" --steps {steps}"),
        "collapse_below": COLLAPSE_BELOW,
        "collapsed_at_step": hit[0] if hit else None,
        "val_loss": result.history.evals,
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "threads": torch_threads,
            "python": platform.python_version(),
            "torch": torch.__version__,
        },
        "wall_s": round(wall, 1),
        **probes,
    }
    out.mkdir(parents=True, exist_ok=True)
    target = out / f"{name}.json"
    target.write_text(json.dumps(record, indent=1) + "\n")
    finish(target, runs)
    if hit:
        ship(name, out, runs)
    return target


def ship(name: str, out: Path, runs: Path) -> Path:
    """Copy the run's final checkpoint into ``out/<name>/`` in the layout of the course's shipped
    checkpoints (the optimizer state stays behind), with its provenance."""
    import torch

    target = out / name
    target.mkdir(parents=True, exist_ok=True)
    for file in ("config.json", "model.safetensors", "tokenizer.model", "trainer_state.json"):
        shutil.copy2(runs / name / "checkpoint" / file, target / file)
    provenance = {
        "record": f"data/collapse_hunt/{name}.json",
        "command": f"python tools/collapse_hunt.py {name}",
        "python": platform.python_version(),
        "torch": torch.__version__,
        "machine": platform.machine(),
    }
    (target / "provenance.json").write_text(json.dumps(provenance, indent=1) + "\n")
    return target


def finish(target: Path, runs: Path) -> None:
    """Add the row-map gains (:func:`kvattn.diagnostics.row_map_gain`) of the run's final model
    and of a fresh initialisation of its config, on the run's probe blocks, to its record."""
    import torch

    from kvattn import diagnostics, load_pretrained
    from kvattn.data import blocks, load_text, tokenize
    from kvattn.pldr import PLDRLLM

    record = json.loads(target.read_text())
    cfg = record["recipe"]
    text = load_text(cfg["corpus"], max_chars=cfg["corpus_chars"])
    val = blocks(
        tokenize(text, vocab_size=cfg["vocab_size"], val_every=cfg["val_every"]).val,
        cfg["block_size"],
    )
    probes = [b[None, :-1] for b in val[: record["probe_blocks"]]]
    model = load_pretrained(runs / record["name"] / "checkpoint")
    torch.manual_seed(cfg["seed"])
    initial = PLDRLLM(model.config)
    record["row_map_gain"] = {
        "initial": diagnostics.row_map_gain(initial, probes).tolist(),
        "final": diagnostics.row_map_gain(model, probes).tolist(),
        "collapse_below": ROW_MAP_COLLAPSE_BELOW,
    }
    target.write_text(json.dumps(record, indent=1) + "\n")


def _job(args: tuple) -> str:
    name, steps, out, runs, probe_every, device = args
    t0 = time.perf_counter()
    try:
        target = run(name, steps, out, runs, probe_every, device)
    except Exception as err:  # one failed run (e.g. a diverged rate) must not stop the others
        return f"{name}: FAILED after {time.perf_counter() - t0:.0f} s: {err!r}"
    return f"{name}: {time.perf_counter() - t0:.0f} s -> {target}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("names", nargs="*", help=f"runs of the plan (default: all): {list(PLAN)}")
    parser.add_argument("--steps", type=int, help=f"the base length (default {BASE_STEPS})")
    parser.add_argument("--probe-every", type=int, default=250)
    parser.add_argument("--workers", type=int, default=1, help="processes, one thread each")
    parser.add_argument(
        "--device", default="cpu", help="cpu (the shipped runs), cuda or auto (a GPU if any)"
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where the records go")
    parser.add_argument(
        "--runs", type=Path, default=DEFAULT_RUNS, help="where the runs' checkpoints go"
    )
    parser.add_argument(
        "--finish",
        action="store_true",
        help="only add the row-map gains to the records already in --out (runs/ kept)",
    )
    parser.add_argument(
        "--ship",
        action="store_true",
        help="only copy the named runs' final checkpoints into --out/<name>/ (the run nearest "
        "to collapse ships this way, as a collapsed one does automatically)",
    )
    args = parser.parse_args(argv)
    names = args.names or list(PLAN)
    if args.ship:
        for name in names:
            print(f"{name}: shipped in {ship(name, args.out.resolve(), args.runs.resolve())}")
        return 0
    if args.finish:
        for name in names:
            if (args.out / f"{name}.json").exists():
                finish(args.out / f"{name}.json", args.runs.resolve())
                print(f"{name}: row-map gains added", flush=True)
        return 0
    unknown = [n for n in names if n not in PLAN]
    if unknown:
        parser.error(f"unknown runs {unknown}; the plan has {list(PLAN)}")
    jobs = [
        (n, args.steps, args.out.resolve(), args.runs.resolve(), args.probe_every, args.device)
        for n in names
    ]
    if args.workers == 1:
        for job in jobs:
            print(_job(job), flush=True)
        return 0
    with multiprocessing.get_context("spawn").Pool(args.workers) as pool:
        for line in pool.imap_unordered(_job, jobs):
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
