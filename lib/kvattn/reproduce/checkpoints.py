"""The shipped checkpoints (``data/<name>/``) and their collapse trajectories
(``data/trajectories/<name>.json``), remade from their recipes (``data/recipes/<name>.json``)."""

from __future__ import annotations

import dataclasses
import platform
from pathlib import Path

import torch
from safetensors.torch import load_file

from .. import data
from .._files import write_json
from ..pretrain import PretrainConfig, pretrain
from ..schema import read_json
from .files import CHECKPOINT, PROG, ReproduceError, machine, ship_run


def checkpoint_config(name: str, runs: Path, overwrite: bool) -> PretrainConfig:
    """The recipe ``name`` as it trains here: in ``runs/<name>``.

    Raises
    ------
    ~kvattn.reproduce.files.ReproduceError
        The recipe is not a valid configuration (the message says why).
    """
    try:
        cfg = PretrainConfig.from_file(data.recipe(name))
        return dataclasses.replace(
            cfg, out_dir=str((runs / name).resolve()), overwrite=cfg.overwrite or overwrite
        )
    except (TypeError, ValueError) as err:
        raise ReproduceError(f"the recipe {name} is refused: {err}") from None


def trajectory_config(
    name: str, runs: Path, probe_every: int, probe_blocks: int, overwrite: bool
) -> PretrainConfig:
    """The PLDR-LLM recipe ``name`` with probes every ``probe_every`` steps on ``probe_blocks``
    validation blocks, in ``runs/<name>-probes``.

    Raises
    ------
    ~kvattn.reproduce.files.ReproduceError
        Not a PLDR-LLM recipe, or the probes are refused by the configuration.
    """
    try:
        cfg = PretrainConfig.from_file(data.recipe(name))
        if cfg.architecture != "pldrllm":
            raise ReproduceError(f"only PLDR-LLMs have trajectories, and {name} is a GPT")
        return dataclasses.replace(
            cfg,
            out_dir=str((runs / f"{name}-probes").resolve()),
            probe_every=probe_every,
            probe_blocks=probe_blocks,
            overwrite=overwrite,
        )
    except ReproduceError:
        raise
    except (TypeError, ValueError) as err:
        raise ReproduceError(f"the trajectory of {name} is refused: {err}") from None


def make_checkpoint(name: str, cfg: PretrainConfig, out: Path, resume: bool) -> Path:
    """Train the recipe ``name`` (``cfg``: :func:`checkpoint_config`) and ship it to
    ``out/<name>/``."""
    pretrain(cfg, resume=resume)
    provenance = {
        "recipe": f"data/recipes/{name}.json",
        "command": f"{PROG} checkpoint {name}",
        **machine(),
    }
    return ship_run(Path(cfg.out_dir) / CHECKPOINT, out / name, provenance)


def make_trajectory(name: str, cfg: PretrainConfig, out: Path, resume: bool) -> Path:
    """Train the shipped PLDR-LLM ``name`` again with probes (``cfg``:
    :func:`trajectory_config`) and write its collapse-measure trajectory to
    ``out/trajectories/<name>.json``, with whether it ended with the shipped weights
    (``reproduces_shipped``: every tensor equal) and both final validation losses."""
    result = pretrain(cfg, resume=resume)
    ran = load_file(Path(cfg.out_dir) / CHECKPOINT / "model.safetensors")
    shipped_dir = data.shipped(name)
    shipped = load_file(shipped_dir / "model.safetensors")
    same = ran.keys() == shipped.keys() and all(torch.equal(ran[k], shipped[k]) for k in ran)
    state = read_json(shipped_dir / "trainer_state.json", "trainer_state")
    record = {
        "recipe": f"data/recipes/{name}.json",
        "command": f"{PROG} trajectory {name} --probe-every {cfg.probe_every} "
        f"--probe-blocks {cfg.probe_blocks}",
        "probe_every": cfg.probe_every,
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
