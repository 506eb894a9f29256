"""Train the small checkpoints that Part II ships in ``data/``, from the recipes in
``data/recipes/``.

    python tools/make_checkpoints.py                 # every recipe
    python tools/make_checkpoints.py pldr_tiny       # one recipe
    python tools/make_checkpoints.py --trajectories  # every PLDR recipe, measured as it trains

Each recipe is a :class:`kvattn.train.PretrainConfig` (JSON). The run writes ``runs/<name>/``;
its final checkpoint is copied to ``data/<name>/``: ``config.json`` and ``model.safetensors``
(published format), ``tokenizer.model`` and ``trainer_state.json`` (the loss history and the exact
recipe), plus ``provenance.json`` (command, Python and torch versions). The optimizer state is not
shipped. A corpus taken from the standard library depends on the CPython version, which
``provenance.json`` records.

With ``--trajectories`` each PLDR-LLM recipe runs again with ``probe_every`` (the collapse
measures of :func:`kvattn.diagnostics.collapse_measures` on fixed validation blocks, every
``--probe-every`` steps) in ``runs/<name>-probes/``, and its trajectory goes to
``data/trajectories/<name>.json``. Probing observes the run without changing it, so that run
ends with the shipped weights if the shipped checkpoint is reproducible on this machine; the
file records whether it did (``reproduces_shipped``: every tensor equal) and both final
validation losses. (On the machine that made the first trajectories it was not: the losses first
differed at step 3, by 5e-7, with or without probes, and grew apart with training.)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import shutil
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file

from kvattn.train import PretrainConfig, pretrain

ROOT = Path(__file__).resolve().parent.parent
RECIPES = ROOT / "data" / "recipes"
SHIPPED = ("config.json", "model.safetensors", "tokenizer.model", "trainer_state.json")


def make(name: str) -> Path:
    cfg = PretrainConfig.from_file(RECIPES / f"{name}.json")
    cfg.out_dir = str(ROOT / cfg.out_dir)
    pretrain(cfg)
    target = ROOT / "data" / name
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    for file in SHIPPED:
        shutil.copy2(Path(cfg.out_dir) / "checkpoint" / file, target / file)
    provenance = {
        "recipe": f"data/recipes/{name}.json",
        "command": f"python tools/make_checkpoints.py {name}",
        "python": platform.python_version(),
        "torch": torch.__version__,
        "machine": platform.machine(),
    }
    (target / "provenance.json").write_text(json.dumps(provenance, indent=1) + "\n")
    return target


def trajectory(name: str, probe_every: int, probe_blocks: int) -> Path:
    cfg = PretrainConfig.from_file(RECIPES / f"{name}.json")
    cfg = dataclasses.replace(
        cfg,
        out_dir=str(ROOT / f"{cfg.out_dir}-probes"),
        probe_every=probe_every,
        probe_blocks=probe_blocks,
        overwrite=True,
    )
    result = pretrain(cfg)
    ran = load_file(Path(cfg.out_dir) / "checkpoint" / "model.safetensors")
    shipped = load_file(ROOT / "data" / name / "model.safetensors")
    same = ran.keys() == shipped.keys() and all(torch.equal(ran[k], shipped[k]) for k in ran)
    target = ROOT / "data" / "trajectories" / f"{name}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "recipe": f"data/recipes/{name}.json",
        "command": f"python tools/make_checkpoints.py --trajectories --probe-every {probe_every} "
        f"--probe-blocks {probe_blocks} {name}",
        "probe_every": probe_every,
        "reproduces_shipped": same,
        # the final validation losses of this run and of the shipped one: how far apart they ended
        "final_val_loss": {
            "rerun": result.history.evals[-1],
            "shipped": json.loads((ROOT / "data" / name / "trainer_state.json").read_text())[
                "history"
            ]["evals"][-1],
        },
        "python": platform.python_version(),
        "torch": torch.__version__,
        **result.probes,
    }
    target.write_text(json.dumps(record, indent=1) + "\n")
    return target


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="recipes (default: every one)")
    parser.add_argument("--trajectories", action="store_true")
    parser.add_argument("--probe-every", type=int, default=100)
    parser.add_argument("--probe-blocks", type=int, default=4)
    args = parser.parse_args(argv)
    names = args.names or sorted(p.stem for p in RECIPES.glob("*.json"))
    if args.trajectories:
        pldr = [
            n
            for n in names
            if json.loads((RECIPES / f"{n}.json").read_text())["architecture"] == "pldrllm"
        ]
        for name in pldr:
            print(f"== {name} (trajectory)", flush=True)
            print(f"   -> {trajectory(name, args.probe_every, args.probe_blocks)}", flush=True)
        return 0
    for name in names:
        print(f"== {name}", flush=True)
        print(f"   -> {make(name)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
