"""Pre-training of PLDR-LLMs and GPTs (Part II): the run's config, its data, DDP, checkpoints and
exact resume, and the command ``python -m kvattn.pretrain --config FILE`` (``kvattn-train``).

:func:`pretrain` builds a run on the loop of :mod:`kvattn.train`: SentencePiece tokenizer,
packed blocks, DDP under ``torchrun`` (:mod:`kvattn.distributed`), bf16 autocast on CUDA, the
DAG regulariser (:func:`kvattn.losses.dag_penalty`), checkpoints in the published format, the
collapse-measure trajectories (:mod:`kvattn.diagnostics.collapse`) and exact resume. A
:class:`PretrainConfig` is checked whole before any work.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import unicodedata
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

import torch
import torch.distributed as dist
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save_file
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from ._checks import check_choice, check_int, is_real
from .checkpoint import (
    load_pretrained,
    recover_directory,
    replace_directory,
    staging_directory,
    write_pretrained,
)
from .config import PLDRConfig, reject_unknown_keys
from .data import CORPORA, MIN_VOCAB_SIZE, blocks, load_text, split_documents, tokenize
from .diagnostics import PROBES_FILE, append_probe, collapse_measures, load_probes, new_probes
from .distributed import RendezvousError, parse_device, setup_distributed
from .losses import dag_penalty, lm_cross_entropy
from .pldr import GPT, PLDRLLM
from .train import (
    MAX_LR,
    History,
    check_logits,
    check_optimiser,
    default_autocast,
    train,
)

Tensor = torch.Tensor


def _help(text: str) -> dict:
    """Field metadata: the description ``python -m kvattn.pretrain --help`` prints."""
    return {"help": text}


@dataclass
class PretrainConfig:
    """Everything a pre-training run needs; stored as JSON (``python -m kvattn.pretrain --config``).

    ``model`` holds :class:`kvattn.config.PLDRConfig` fields (``vocab_size`` is set from the
    tokenizer); ``architecture`` is ``"pldrllm"`` or ``"gpt"``; ``corpus`` is a source of
    :func:`kvattn.data.load_text`, cut to ``corpus_chars`` characters if given. Optimiser
    defaults are the reference's: AdamW β = (0.9, 0.95), eps 1e-5, weight decay 0.1, gradient
    clipping by value at 1.0, linear warm-up then cosine decay to 10 % of the peak. ``dag`` =
    (c_A, c_Ap, c_G) are the DAG-regulariser coefficients on A_LM, A_P and G_LM (0 = off).
    ``batch_size`` is global: under DDP each of the W processes takes ``batch_size / W``
    sequences of every step's batch. ``probe_every`` records how close the model is to
    inference collapse (:func:`kvattn.diagnostics.collapse.collapse_measures`) as trajectories: the
    probes
    are the first ``probe_blocks`` validation blocks, and the next ``probe_blocks`` score the
    G_LM substitution; it only observes, so the losses are those of the same run without it.
    Each field's description is in its ``metadata["help"]``.

    Raises
    ------
    ValueError
        At construction, before any work: a field of the wrong type or out of range, or an
        unknown or invalid key in ``model`` (naming the field, the value and what is allowed);
        a ``corpus`` path with no file; a ``device`` that cannot train (``"meta"``); a ``dag``
        coefficient above 0 for a GPT (it has no A_LM, A_P or G_LM to regularise); a ``warmup``
        longer than ``steps`` (the rate would never reach its peak).
    """

    model: dict = field(
        default_factory=dict, metadata=_help("PLDRConfig fields (not vocab_size), e.g. hidden_size")
    )
    architecture: str = field(default="pldrllm", metadata=_help("'pldrllm' or 'gpt'"))
    corpus: str = field(default="pydoc", metadata=_help("a source of kvattn.data.load_text"))
    corpus_chars: int | None = field(
        default=None, metadata=_help("cut the corpus to this many characters (null: all)")
    )
    vocab_size: int = field(default=1024, metadata=_help("SentencePiece vocabulary size"))
    block_size: int = field(default=64, metadata=_help("tokens per training block"))
    val_every: int = field(default=10, metadata=_help("hold out every k-th document (k >= 2)"))
    batch_size: int = field(default=16, metadata=_help("global batch (sequences per step)"))
    steps: int = field(default=1000, metadata=_help("optimiser steps"))
    lr: float = field(default=1e-3, metadata=_help(f"peak learning rate, in (0, {MAX_LR:g})"))
    warmup: int = field(default=100, metadata=_help("linear warm-up steps"))
    min_lr_ratio: float = field(
        default=0.1, metadata=_help("final learning rate / peak, in [0, 1]")
    )
    betas: tuple[float, float] = field(
        default=(0.9, 0.95), metadata=_help("AdamW betas, two numbers in [0, 1)")
    )
    eps: float = field(default=1e-5, metadata=_help("AdamW eps (> 0)"))
    weight_decay: float = field(default=0.1, metadata=_help("AdamW weight decay (>= 0)"))
    clip_value: float | None = field(
        default=1.0, metadata=_help("clip every gradient entry to ±clip_value (null: off)")
    )
    clip_norm: float | None = field(
        default=None, metadata=_help("clip the gradients' global norm (null: off)")
    )
    dag: tuple[float, float, float] = field(
        default=(0.0, 0.0, 0.0), metadata=_help("DAG coefficients on A_LM, A_P, G_LM (>= 0)")
    )
    eval_every: int = field(default=100, metadata=_help("validate every this many steps"))
    eval_blocks: int = field(default=64, metadata=_help("validation blocks per evaluation"))
    checkpoint_every: int = field(default=500, metadata=_help("checkpoint every this many steps"))
    log_every: int = field(
        default=1, metadata=_help("record (and check) the loss every this many steps")
    )
    out_dir: str = field(default="runs/pldr", metadata=_help("output folder (holds checkpoint/)"))
    overwrite: bool = field(
        default=False, metadata=_help("replace a run already in out_dir instead of refusing")
    )
    seed: int = field(default=1234, metadata=_help("seed of the initialisation and the batches"))
    device: str = field(
        default="auto", metadata=_help("'auto' (cuda:LOCAL_RANK if available), 'cpu', 'cuda' ...")
    )
    bf16: bool = field(default=True, metadata=_help("bf16 autocast where the GPU supports it"))
    compile: bool = field(
        default=False,
        metadata=_help(
            "torch.compile the training forward (the first steps pay the compile time; "
            "evaluation, checkpoints and the results use the plain model)"
        ),
    )
    fused_adamw: bool = field(
        default=False,
        metadata=_help(
            "PyTorch's fused AdamW kernel instead of foreach (one pass per tensor; equal to "
            "rounding, so not a bit-for-bit repeat of a foreach run)"
        ),
    )
    probe_every: int | None = field(
        default=None,
        metadata=_help(
            "record the collapse measures (kvattn.diagnostics.collapse_measures) on fixed "
            "validation blocks before training, every this many steps and after the last "
            "(null: off; PLDR-LLM only); saved as checkpoint/probes.json"
        ),
    )
    probe_blocks: int = field(
        default=4,
        metadata=_help(
            "validation blocks used as probes and donors (>= 2); as many again score the "
            "G_LM substitution"
        ),
    )

    def __post_init__(self) -> None:
        check_choice("architecture", self.architecture, ("pldrllm", "gpt"))
        for name in ("corpus", "out_dir", "device"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise ValueError(f"{name} must be a non-empty string, got {getattr(self, name)!r}")
        check_int("vocab_size", self.vocab_size, low=MIN_VOCAB_SIZE)
        for name in (
            "block_size",
            "batch_size",
            "steps",
            "eval_every",
            "eval_blocks",
            "checkpoint_every",
            "log_every",
        ):
            check_int(name, getattr(self, name), low=1)
        check_int("val_every", self.val_every, low=2)
        check_int("warmup", self.warmup, low=0)
        check_int("seed", self.seed, low=0)
        if self.corpus_chars is not None:
            check_int("corpus_chars", self.corpus_chars, low=1)
        if self.probe_every is not None:
            check_int("probe_every", self.probe_every, low=1)
            if self.architecture != "pldrllm":
                raise ValueError(
                    f"probe_every needs architecture 'pldrllm': a {self.architecture!r} model has "
                    "no G_LM to measure; set probe_every to null"
                )
        check_int("probe_blocks", self.probe_blocks, low=2)
        for name in ("overwrite", "bf16", "compile", "fused_adamw"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be true or false, got {getattr(self, name)!r}")
        check_optimiser(
            lr=self.lr,
            min_lr_ratio=self.min_lr_ratio,
            betas=self.betas,
            eps=self.eps,
            weight_decay=self.weight_decay,
            clip_value=self.clip_value,
            clip_norm=self.clip_norm,
        )
        if (
            not isinstance(self.dag, list | tuple)
            or len(self.dag) != 3
            or not all(is_real(c) and c >= 0 for c in self.dag)
        ):
            raise ValueError(f"dag must be three non-negative coefficients, got {self.dag!r}")
        if self.warmup > self.steps:
            raise ValueError(
                f"warmup must be at most steps, got warmup={self.warmup}, steps={self.steps}: the "
                f"learning rate would never reach its peak {self.lr:g}; shorten the warm-up"
            )
        if self.architecture == "gpt" and any(c > 0 for c in self.dag):
            raise ValueError(
                f"dag needs architecture 'pldrllm': a 'gpt' model has no A_LM, A_P or G_LM to "
                f"regularise, so dag={list(self.dag)} would be ignored; set dag to [0, 0, 0]"
            )
        # the device type only: what this machine has is asked when the run starts
        parse_device(self.device)
        # a path corpus is read only once the run has started (the shipped names and the hub's
        # datasets are load_text's to check)
        named = self.corpus in CORPORA or self.corpus.startswith("hf:")
        if not named and not Path(self.corpus).is_file():
            raise ValueError(
                f"corpus must be 'pydoc', 'stdlib', 'hf:NAME[:SPLIT[:COLUMN]]' or the path of a "
                f"text file, got {self.corpus!r}: no file at {Path(self.corpus).absolute()}"
            )
        if not isinstance(self.model, dict):
            raise ValueError(f"model must be a dict of PLDRConfig fields, got {self.model!r}")
        if "vocab_size" in self.model:
            raise ValueError(
                "model must not set vocab_size (it comes from the tokenizer); set the top-level "
                f"vocab_size instead, got model.vocab_size={self.model['vocab_size']!r}"
            )
        model_cfg = PLDRConfig.from_dict(self.model_fields(self.vocab_size), strict=True)
        if model_cfg.max_position_embeddings < self.block_size:
            raise ValueError(
                f"model.max_position_embeddings={model_cfg.max_position_embeddings} is smaller "
                f"than block_size={self.block_size}"
            )
        self.betas = tuple(self.betas)
        self.dag = tuple(self.dag)

    def model_fields(self, vocab_size: int) -> dict:
        """The :class:`kvattn.config.PLDRConfig` fields of the run's model for a tokenizer of
        ``vocab_size`` pieces (``max_position_embeddings`` defaults to ``block_size``)."""
        return {"max_position_embeddings": self.block_size, **self.model, "vocab_size": vocab_size}

    @classmethod
    def from_file(cls, path: str | Path) -> PretrainConfig:
        """Read a JSON config; unknown keys are an error (a typo must not be ignored).

        Raises
        ------
        FileNotFoundError
            No file at ``path``.
        ValueError
            ``path`` is a folder or cannot be read, not UTF-8 text, not valid JSON, not an
            object, unknown keys (with the closest field names), or a field that fails
            validation; the message names the file.
        """
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"no config file at {path}")
        if not path.is_file():
            raise ValueError(f"{path} is not a file: expected a JSON file of PretrainConfig fields")
        try:
            raw = json.loads(path.read_bytes().decode("utf-8"))
        except OSError as err:
            raise ValueError(f"cannot read the config {path}: {err}") from None
        except UnicodeDecodeError as err:
            raise ValueError(
                f"{path} is not UTF-8 text: byte {err.object[err.start]:#04x} at offset "
                f"{err.start} ({err.reason})"
            ) from None
        except json.JSONDecodeError as err:
            raise ValueError(f"{path} is not valid JSON: {err}") from None
        if not isinstance(raw, dict):
            raise ValueError(f"{path} must hold a JSON object of PretrainConfig fields")
        reject_unknown_keys(str(path), raw, {f.name for f in fields(cls)})
        return cls(**raw)

    def to_dict(self) -> dict:
        return asdict(self)


#: PretrainConfig fields that may differ between a checkpoint and the run resuming it; any other
#: difference changes the model, the data or the optimisation, so the resume is refused.
#: (``probe_blocks`` may change only while the checkpoint holds no trajectory to continue.)
RESUMABLE_CHANGES = frozenset(
    {
        "steps",
        "out_dir",
        "overwrite",
        "device",
        "bf16",
        "compile",
        "fused_adamw",
        "eval_every",
        "checkpoint_every",
        "log_every",
        "probe_every",
        "probe_blocks",
    }
)


@dataclass
class PretrainResult:
    """The trained model (unwrapped), its tokenizer, the loss history, the output folder and, with
    ``probe_every``, the collapse-measure trajectories (as
    :func:`~kvattn.diagnostics.collapse.load_probes` returns them)."""

    model: nn.Module
    tokenizer: object
    history: History
    out_dir: Path
    probes: dict | None = None


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


def pretrain(cfg: PretrainConfig, *, resume: bool = False, progress: bool = True) -> PretrainResult:
    """Pre-train a PLDR-LLM or GPT on ``cfg.corpus``; runs unchanged under ``torchrun``.

    The run writes ``out_dir/checkpoint/``: the model in the published format (``config.json``,
    ``model.safetensors``), ``tokenizer.model`` (SentencePiece) and the trainer state
    (``optimizer.safetensors``, ``trainer_state.json``), and with ``probe_every`` the
    collapse-measure trajectories (``probes.json``, see
    :func:`~kvattn.diagnostics.collapse.load_probes`). Every step's batch is a function of (seed,
    step) alone, so ``resume=True`` continues exactly where the checkpoint left off and reproduces
    the uninterrupted loss curve and trajectories.

    Nothing is lost: before any work, an out_dir that already holds a checkpoint is refused
    unless ``resume`` (continue it) or ``cfg.overwrite`` (replace it at the first new checkpoint);
    a resume with no checkpoint, or with a config that differs outside
    :data:`RESUMABLE_CHANGES` (the differing fields are listed), is refused; an unwritable
    out_dir is refused. A checkpoint is written in full to a staging folder and swapped in by
    :func:`kvattn.checkpoint.replace_directory`, so a kill at any moment leaves the last complete
    checkpoint, and the next start repairs the leftovers
    (:func:`kvattn.checkpoint.recover_directory`). A non-finite loss, non-finite parameters, or
    finite parameters whose logits on the first validation block are not finite (a rate far too
    high; checked before every checkpoint) stop the run with :class:`FloatingPointError` before
    anything is written; the last checkpoint stays.

    DDP is on when the environment sets ``WORLD_SIZE`` > 1 (``torchrun`` does, with ``RANK``,
    ``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT``). Each process takes ``cuda:LOCAL_RANK``
    (see :func:`~kvattn.distributed.select_device`); the processes wait for each other, at the
    rendezvous and in every collective, at most :data:`~kvattn.distributed.DDP_TIMEOUT_S` seconds,
    or as many as the environment variable ``KVATTN_DDP_TIMEOUT_S`` says, and the process group this
    call starts is destroyed when it returns.

    Raises
    ------
    FileExistsError, FileNotFoundError, ValueError
        As above (an existing run, no checkpoint to resume, a mismatched resume, a damaged or
        incomplete checkpoint, an unwritable out_dir, a file at the checkpoint swap's reserved
        names, an interrupted swap's old folder holding files the checkpoint lacks, kept; see
        :func:`kvattn.checkpoint.recover_directory`), before the tokenizer is trained; a corpus
        other than the checkpoint's (its SHA-256), before too; probes the validation text cannot
        hold, before the tokenizer when a bound decides it, else after. out_dir is made only then.
    ValueError
        DDP is on but the environment is incomplete or invalid, the device does not suit it, or
        ``batch_size`` is not divisible by the number of processes; or ``RANK``/``LOCAL_RANK``
        is not 0 without DDP; before the process group starts. The message lists the variables.
    ~kvattn.distributed.RendezvousError
        The DDP rendezvous failed, e.g. the other processes did not join within the hang limit;
        the message lists the same variables.
    FloatingPointError
        Non-finite loss, evaluation, parameters or logits (the message names the step).
    """
    rank, world, device, started = setup_distributed(cfg.device, cfg.batch_size)
    try:
        out_dir = Path(cfg.out_dir)
        if rank == 0:
            _prepare_out_dir(out_dir, out_dir / "checkpoint", cfg, resume)
        if world > 1:
            dist.barrier()
        return _pretrain(cfg, resume, progress, rank, world, device)
    finally:
        if started and dist.is_initialized():
            dist.destroy_process_group()


def _probe_shortage(cfg: PretrainConfig, gives: str) -> str:
    return (
        f"probe_blocks={cfg.probe_blocks} needs {2 * cfg.probe_blocks} validation blocks (probes, "
        f"then as many to score the substitution); the corpus {gives}: lower probe_blocks or "
        "block_size, or use more text"
    )


def _check_probe_room(text: str, cfg: PretrainConfig) -> None:
    """Refuse, before the tokenizer is trained, probes the validation text cannot hold whatever
    the tokenizer: a piece covers at least one byte of the NFKC-normalised text (whitespace
    becomes the 3-byte "▁"), and each document gains a "▁" and an [END]. What this bound cannot
    decide is refused after tokenizing, by the exact count."""
    _, val_docs = split_documents(text, cfg.val_every)
    most_ids = 0
    for doc in val_docs:
        normal = unicodedata.normalize("NFKC", doc)
        wide = sum(1 for c in normal if c.isspace() or not c.isascii() or not c.isprintable())
        most_ids += (len(normal) - wide) + 4 * wide + 4 + 1
    most_blocks = most_ids // (cfg.block_size + 1)
    if most_blocks < 2 * cfg.probe_blocks:
        raise ValueError(_probe_shortage(cfg, f"gives at most {most_blocks}"))


def _pretrain(
    cfg: PretrainConfig, resume: bool, progress: bool, rank: int, world: int, device: torch.device
) -> PretrainResult:
    out_dir = Path(cfg.out_dir)
    ckpt = out_dir / "checkpoint"
    text = load_text(cfg.corpus, max_chars=cfg.corpus_chars)
    corpus_sha256 = hashlib.sha256(text.encode("utf-8")).hexdigest()
    saved_sha256 = _read_training_state(ckpt).get("corpus_sha256") if resume else None
    if saved_sha256 is not None and saved_sha256 != corpus_sha256:
        raise ValueError(
            f"cannot resume the run in {ckpt}: the corpus {cfg.corpus!r} is not the text the run "
            "was trained on (its SHA-256 differs from the one in trainer_state.json); resume "
            "with the same text, or start a new run"
        )
    if cfg.probe_every is not None:
        _check_probe_room(text, cfg)
    data = tokenize(text, vocab_size=cfg.vocab_size, val_every=cfg.val_every)
    tokenizer_bytes = data.tokenizer.serialized_model_proto()
    if resume and (ckpt / "tokenizer.model").read_bytes() != tokenizer_bytes:
        raise ValueError(
            f"cannot resume the run in {ckpt}: the tokenizer trained now from the same config "
            "differs from the checkpoint's tokenizer.model: the corpus text changed since the "
            "run started, or this sentencepiece version trains another tokenizer"
        )
    train_blocks = blocks(data.train, cfg.block_size)
    all_val_blocks = blocks(data.val, cfg.block_size)
    val_blocks = all_val_blocks[: cfg.eval_blocks]
    if cfg.probe_every is not None and len(all_val_blocks) < 2 * cfg.probe_blocks:
        raise ValueError(_probe_shortage(cfg, f"gives {len(all_val_blocks)}"))
    model_cfg = PLDRConfig.from_dict(cfg.model_fields(data.vocab_size), strict=True)
    cls = PLDRLLM if cfg.architecture == "pldrllm" else GPT
    start_step, opt_state, history, probes = 0, None, None, None
    if resume:
        model = load_pretrained(ckpt, device=device).train()
        start_step, opt_state, history = _load_training_state(ckpt)
        if (ckpt / PROBES_FILE).exists():
            probes = load_probes(ckpt)
    else:
        torch.manual_seed(cfg.seed)
        model = cls(model_cfg).to(device)
    net = (
        DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
        if world > 1
        else model
    )
    if cfg.compile:
        # Same parameters, same numbers up to float rounding; only the training steps use it.
        net = torch.compile(net)
    dag_on = cfg.architecture == "pldrllm" and any(c > 0 for c in cfg.dag)
    per_rank = cfg.batch_size // world

    def loss_fn(step: int) -> Tensor:
        gen = torch.Generator().manual_seed(cfg.seed * 1_000_003 + step)
        idx = torch.randint(len(train_blocks), (cfg.batch_size,), generator=gen)
        batch = train_blocks[idx[rank * per_rank : (rank + 1) * per_rank]].to(device)
        out = net(batch[:, :-1], output_pldr_attentions=dag_on)
        # blocks of a packed stream always have targets: no host sync per step to check it
        targets = batch[:, 1:]
        loss = lm_cross_entropy(out.logits, targets, model_cfg.pad_token_id, check_targets=False)
        if dag_on:
            loss = loss + dag_penalty(out.pldr_attentions, cfg.dag)
        if world > 1:
            # Report the mean over all processes (what a single process would see) while each
            # process back-propagates its own part; DDP averages the gradients.
            total = loss.detach().clone()
            dist.all_reduce(total)
            loss = loss + (total / world - loss.detach())
        return loss

    @torch.no_grad()
    def eval_fn() -> float:
        losses = [
            lm_cross_entropy(
                model(b[None, :-1].to(device)).logits,
                b[None, 1:].to(device),
                model_cfg.pad_token_id,
            )
            for b in val_blocks
        ]
        return float(torch.stack(losses).mean())

    probe_ids, probe_eval = None, None
    if cfg.probe_every is not None:
        probe_ids = [b[None, :-1].to(device) for b in all_val_blocks[: cfg.probe_blocks]]
        probe_eval = all_val_blocks[cfg.probe_blocks : 2 * cfg.probe_blocks].to(device)
        probes = probes if probes is not None else new_probes(cfg.probe_blocks)

    def probe(steps_done: int) -> None:
        # eval mode, no gradient, the global random stream untouched; the model's mode comes back
        append_probe(
            probes, steps_done, collapse_measures(model, probe_ids, probe_eval).as_record()
        )

    def callback(step: int, _net: nn.Module) -> None:
        if (step + 1) % cfg.probe_every == 0 or step + 1 == cfg.steps:
            probe(step + 1)

    # A run starts its trajectory before its first step; a resumed one continues the saved one
    # (a checkpoint without one starts it where the resume starts).
    if cfg.probe_every is not None and start_step < cfg.steps:
        if start_step == 0 or not probes["step"]:
            probe(start_step)

    check_ids = val_blocks[:1, :-1].to(device)

    def on_checkpoint(step: int, opt: torch.optim.Optimizer, hist: History) -> None:
        # Every process checks its copy (DDP keeps them equal), so that all stop together.
        check_logits(model, check_ids, step, opt.param_groups[0]["lr"])
        if rank == 0:
            staging = staging_directory(ckpt)
            shutil.rmtree(staging, ignore_errors=True)
            write_pretrained(model, staging)
            (staging / "tokenizer.model").write_bytes(tokenizer_bytes)
            _save_training_state(staging, step, opt, hist, cfg, corpus_sha256)
            if probes is not None:
                (staging / PROBES_FILE).write_text(json.dumps(probes, allow_nan=False))
            replace_directory(ckpt)
        if world > 1:
            dist.barrier()

    if rank == 0:  # made only now that the data are ready (its parent was checked writable)
        out_dir.mkdir(parents=True, exist_ok=True)
    autocast = default_autocast(device) if cfg.bf16 else None
    history = train(
        net,
        loss_fn,
        steps=cfg.steps,
        lr=cfg.lr,
        optimizer="adamw_fused" if cfg.fused_adamw else "adamw",
        betas=cfg.betas,
        eps=cfg.eps,
        weight_decay=cfg.weight_decay,
        warmup=cfg.warmup,
        schedule="cosine",
        min_lr_ratio=cfg.min_lr_ratio,
        grad_clip=cfg.clip_norm,
        clip_value=cfg.clip_value,
        autocast_dtype=autocast,
        eval_fn=eval_fn,
        eval_every=cfg.eval_every,
        callback=callback if cfg.probe_every is not None else None,
        checkpoint_every=cfg.checkpoint_every,
        on_checkpoint=on_checkpoint,
        start_step=start_step,
        optimizer_state=opt_state,
        history=history,
        log_every=cfg.log_every,
        progress=progress and rank == 0,
        desc=f"pre-training {cfg.architecture}",
    )
    return PretrainResult(model, data.tokenizer, history, out_dir, probes)


def config_help() -> str:
    """One line per :class:`PretrainConfig` field (name, type, default, description), generated
    from the dataclass, for ``python -m kvattn.pretrain --help``."""
    lines = ["PretrainConfig fields (keys of the --config JSON file):"]
    for f in fields(PretrainConfig):
        default = f.default_factory() if callable(f.default_factory) else f.default
        lines.append(
            f"  {f.name} ({f.type}, default {json.dumps(default)}): {f.metadata.get('help', '')}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """``python -m kvattn.pretrain --config FILE [--resume | --overwrite] [--steps N] [--out-dir
    DIR]``; ``--help`` lists the config fields. A bad config and every refusal of :func:`pretrain`
    exit 1 with one line that says why, not a traceback; a usage error exits 2."""
    parser = argparse.ArgumentParser(
        prog="python -m kvattn.pretrain",
        description=(pretrain.__doc__ or "").split("\n\n")[0],
        epilog=config_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--config", required=True, help="JSON file with PretrainConfig fields")
    runs = parser.add_mutually_exclusive_group()
    runs.add_argument("--resume", action="store_true", help="continue from out_dir/checkpoint")
    runs.add_argument(
        "--overwrite", action="store_true", help="replace a run already in out_dir (sets overwrite)"
    )
    parser.add_argument("--steps", type=int, help="override the number of steps")
    parser.add_argument("--out-dir", help="override out_dir")
    args = parser.parse_args(argv)
    overrides = {
        "steps": args.steps,
        "out_dir": args.out_dir,
        "overwrite": True if args.overwrite else None,
    }
    try:
        cfg = PretrainConfig.from_file(args.config)
        # replace() re-runs the validation on the overridden values
        cfg = replace(cfg, **{k: v for k, v in overrides.items() if v is not None})
    except (ValueError, TypeError, FileNotFoundError) as err:  # a bad config: say why, no traceback
        parser.exit(1, f"{parser.prog}: error: {err}\n")
    try:
        result = pretrain(cfg, resume=args.resume)
    except (FileExistsError, FileNotFoundError, ValueError, RendezvousError) as err:
        # pretrain's refusals carry their reason; a traceback would only bury it
        parser.exit(1, f"{parser.prog}: error: {err}\n")
    if int(os.environ.get("RANK", "0")) == 0:
        final = result.history.evals[-1] if result.history.evals else float("nan")
        print(
            f"done: {cfg.steps} steps, final validation loss {final:.4f}; checkpoint in "
            f"{result.out_dir / 'checkpoint'}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
