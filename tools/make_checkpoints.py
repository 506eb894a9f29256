"""Train the small checkpoints that Part II ships in ``data/``, from the recipes in
``data/recipes/``.

    python tools/make_checkpoints.py                 # every recipe
    python tools/make_checkpoints.py pldr_tiny       # one recipe

Each recipe is a :class:`kvattn.train.PretrainConfig` (JSON). The run writes ``runs/<name>/``;
its final checkpoint is copied to ``data/<name>/``: ``config.json`` and ``model.safetensors``
(published format), ``tokenizer.model`` and ``trainer_state.json`` (the loss history and the exact
recipe), plus ``provenance.json`` (command, Python and torch versions). The optimizer state is not
shipped. A corpus taken from the standard library depends on the CPython version, which
``provenance.json`` records.
"""

from __future__ import annotations

import json
import platform
import shutil
import sys
from pathlib import Path

import torch

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


def main(argv: list[str]) -> int:
    names = argv or sorted(p.stem for p in RECIPES.glob("*.json"))
    for name in names:
        print(f"== {name}", flush=True)
        print(f"   -> {make(name)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
