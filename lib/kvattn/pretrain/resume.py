"""What makes a run resumable exactly: the trainer state saved beside each checkpoint (no pickle),
read back and checked, and the checks of ``out_dir`` before a run starts or resumes.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, fields
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save_file

from ..checkpoint import recover_directory
from ..diagnostics import PROBES_FILE, load_probes
from ..train import History
from .config import RESUMABLE_CHANGES, PretrainConfig

Tensor = torch.Tensor


def _save_training_state(
    directory: Path,
    step: int,
    opt: torch.optim.Optimizer,
    history: History,
    cfg: PretrainConfig,
    corpus_sha256: str,
) -> None:
    """Optimizer state as safetensors (tensors) + JSON (everything else); no pickle. The
    corpus's SHA-256 lets a resume tell a changed text before it trains a tokenizer on it."""
    state = opt.state_dict()
    tensors, scalars = {}, {}
    for idx, per_param in state["state"].items():
        for name, value in per_param.items():
            if isinstance(value, Tensor):
                tensors[f"state.{idx}.{name}"] = value.detach().cpu().contiguous()
            else:
                scalars[f"{idx}.{name}"] = value
    save_file(tensors, directory / "optimizer.safetensors")
    meta = {
        "step": step,
        "param_groups": state["param_groups"],
        "scalars": scalars,
        "history": asdict(history),
        "config": cfg.to_dict(),
        "corpus_sha256": corpus_sha256,
    }
    (directory / "trainer_state.json").write_text(json.dumps(meta, indent=1))


#: What trainer_state.json holds (besides ``corpus_sha256``, absent from runs made before it).
_STATE_KEYS = {"step": int, "param_groups": list, "scalars": dict, "history": dict, "config": dict}
_HISTORY_FIELDS = tuple(f.name for f in fields(History))


def _read_training_state(directory: Path) -> dict:
    """trainer_state.json of the checkpoint in ``directory``, with the keys and types
    :func:`_save_training_state` writes; a damaged file used to surface as a bare
    ``JSONDecodeError`` or ``KeyError: 'config'`` that named neither the file nor the fix."""
    damaged = f"cannot resume the run in {directory}: its trainer_state.json"
    try:
        state = json.loads((directory / "trainer_state.json").read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{damaged} is damaged: not valid JSON ({err})") from None
    if not isinstance(state, dict):
        raise ValueError(f"{damaged} is damaged: it holds no JSON object")
    problems = [
        f"no {key!r}" if key not in state else f"{key!r} is a {type(state[key]).__name__}"
        for key, kind in _STATE_KEYS.items()
        if not isinstance(state.get(key), kind) or isinstance(state.get(key), bool)
    ]
    if not problems and (state["step"] < 0 or set(state["history"]) - set(_HISTORY_FIELDS)):
        problems = [f"step {state['step']}, history keys {sorted(state['history'])}"]
    if problems:
        raise ValueError(
            f"{damaged} is damaged or was not written by kvattn.pretrain: {'; '.join(problems)}"
        )
    return state


def _check_tensor_file(path: Path) -> None:
    """``path`` is a complete safetensors file (its header read and checked, no tensor loaded)."""
    try:
        with safe_open(path, framework="pt"):
            pass
    except (SafetensorError, OSError) as err:
        raise ValueError(f"{path} is truncated or corrupted: {err}") from None


def _load_training_state(directory: Path) -> tuple[int, dict, History]:
    """The step, optimizer state and history saved by :func:`_save_training_state`.

    Every tensor is loaded on the CPU: ``Optimizer.load_state_dict`` moves the moment estimates
    to their parameters' device but keeps the scalar ``step`` counters where they are, and PyTorch
    expects them on the CPU (on a GPU, every step would wait for one host sync per parameter)."""
    meta = _read_training_state(directory)
    _check_tensor_file(directory / "optimizer.safetensors")
    tensors = load_file(directory / "optimizer.safetensors", device="cpu")
    state: dict = {}
    for key, value in tensors.items():
        _, idx, name = key.split(".", 2)
        state.setdefault(int(idx), {})[name] = value
    for key, value in meta["scalars"].items():
        idx, name = key.split(".", 1)
        state.setdefault(int(idx), {})[name] = value
    return (
        meta["step"],
        {"state": state, "param_groups": meta["param_groups"]},
        History(**meta["history"]),
    )


#: The files a checkpoint to resume must hold, beside trainer_state.json.
_RESUME_FILES = ("config.json", "model.safetensors", "optimizer.safetensors", "tokenizer.model")


def _check_resume(ckpt: Path, cfg: PretrainConfig) -> None:
    """Refuse to resume from a checkpoint that is incomplete or damaged (naming the file), or
    whose run differs from ``cfg`` in anything but :data:`RESUMABLE_CHANGES`, listing every
    differing field; all before the tokenizer is trained."""
    state_file = ckpt / "trainer_state.json"
    if not state_file.exists():
        raise FileNotFoundError(
            f"resume: there is no checkpoint to resume in {ckpt} (no trainer_state.json); "
            "run without resume to start a new run"
        )
    state = _read_training_state(ckpt)
    missing = [name for name in _RESUME_FILES if not (ckpt / name).is_file()]
    if missing:
        raise ValueError(
            f"cannot resume the run in {ckpt}: it lacks {', '.join(missing)}; the checkpoint is "
            "incomplete"
        )
    for name in ("model.safetensors", "optimizer.safetensors"):
        _check_tensor_file(ckpt / name)
    if state["step"] > cfg.steps:
        raise ValueError(
            f"cannot resume the run in {ckpt}: it has done {state['step']} steps, more than "
            f"steps={cfg.steps}"
        )
    saved = state["config"]
    now = json.loads(json.dumps(cfg.to_dict()))  # tuples as lists, as the JSON file holds them
    differing = [
        f"{name}: checkpoint {saved.get(name)!r}, now {now[name]!r}"
        for name in now
        if name not in RESUMABLE_CHANGES and saved.get(name) != now[name]
    ]
    if differing:
        raise ValueError(
            f"cannot resume the run in {ckpt}: the config differs in " + "; ".join(differing)
        )
    if cfg.probe_every is not None and (ckpt / PROBES_FILE).exists():
        saved_blocks = load_probes(ckpt).get("probe_blocks")
        if saved_blocks != cfg.probe_blocks:
            raise ValueError(
                f"cannot resume the run in {ckpt}: its {PROBES_FILE} was measured with "
                f"probe_blocks={saved_blocks!r}, now {cfg.probe_blocks!r}; a trajectory must keep "
                "its probes (resume with the same probe_blocks)"
            )


def _check_writable(out_dir: Path) -> None:
    """``out_dir``, or the folder it will be made in, takes files. Nothing is created: out_dir is
    made only once the data are ready, so a run refused on its data leaves no folder behind."""
    parent = out_dir
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    problem = None
    if parent == out_dir:  # it exists: write a file, the surest test
        try:
            (probe := out_dir / f".kvattn-write-test-{os.getpid()}").write_bytes(b"")
            probe.unlink()
        except OSError as err:
            problem = str(err)
    elif not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        problem = f"{str(parent)!r}, where it would be made, is not a folder that takes files"
    if problem:
        raise ValueError(f"out_dir {str(out_dir)!r} is not a writable folder: {problem}")


def _prepare_out_dir(out_dir: Path, ckpt: Path, cfg: PretrainConfig, resume: bool) -> None:
    """Repair an interrupted checkpoint replace, refuse to clobber or to resume nothing, and check
    that ``out_dir`` is writable, all before the tokenizer is trained (creating nothing)."""
    if resume and cfg.overwrite:
        raise ValueError("resume and overwrite exclude each other: continue the run or replace it")
    _check_writable(out_dir)
    recover_directory(ckpt)
    if resume:
        _check_resume(ckpt, cfg)
    elif ckpt.exists() and not cfg.overwrite:
        raise FileExistsError(
            f"{ckpt} already holds a run; resume it (--resume), replace it (--overwrite, or "
            "overwrite: true in the config) or choose another out_dir"
        )
