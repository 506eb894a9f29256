"""The pre-training run: :func:`~kvattn.pretrain.pretrain` builds a run on the loop of
:mod:`kvattn.train`.

SentencePiece tokenizer, packed blocks, DDP under ``torchrun`` (:mod:`kvattn.distributed`), bf16
autocast on CUDA, the DAG regulariser (:func:`kvattn.losses.dag_penalty`), checkpoints in the
published format, the collapse-measure trajectories (:mod:`kvattn.diagnostics.collapse`) and
exact resume.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from ..checkpoint import load_pretrained, replace_directory, staging_directory, write_pretrained
from ..config import PLDRConfig
from ..data import blocks, load_text, split_documents, tokenize
from ..diagnostics import PROBES_FILE, append_probe, collapse_measures, load_probes, new_probes
from ..distributed import setup_distributed
from ..losses import dag_penalty, lm_cross_entropy
from ..pldr import GPT, PLDRLLM
from ..train import History, check_logits, default_autocast, train
from .config import PretrainConfig
from .resume import (
    _load_training_state,
    _prepare_out_dir,
    _read_training_state,
    _save_training_state,
)

Tensor = torch.Tensor


@dataclass
class PretrainResult:
    """The trained model (unwrapped), its tokenizer, the loss history, the output folder and, with
    ``probe_every``, the collapse-measure trajectories (as
    :func:`~kvattn.diagnostics.probes.load_probes` returns them)."""

    model: nn.Module
    tokenizer: object
    history: History
    out_dir: Path
    probes: dict | None = None


def pretrain(cfg: PretrainConfig, *, resume: bool = False, progress: bool = True) -> PretrainResult:
    """Pre-train a PLDR-LLM or GPT on ``cfg.corpus``; runs unchanged under ``torchrun``.

    The run writes ``out_dir/checkpoint/``: the model in the published format (``config.json``,
    ``model.safetensors``), ``tokenizer.model`` (SentencePiece) and the trainer state
    (``optimizer.safetensors``, ``trainer_state.json``), and with ``probe_every`` the
    collapse-measure trajectories (``probes.json``, see
    :func:`~kvattn.diagnostics.probes.load_probes`). Every step's batch is a function of (seed,
    step) alone, so ``resume=True`` continues exactly where the checkpoint left off and reproduces
    the uninterrupted loss curve and trajectories.

    Nothing is lost: before any work, an out_dir that already holds a checkpoint is refused unless
    ``resume`` (continue it) or ``cfg.overwrite`` (replace it at the first new checkpoint); a resume
    with no checkpoint, or with a config that differs outside
    :data:`~kvattn.pretrain.config.RESUMABLE_CHANGES` (the differing fields are listed), is refused;
    an unwritable out_dir is refused. A checkpoint is written in full to a staging folder and
    swapped in by :func:`kvattn.checkpoint.replace_directory`, so a kill at any moment leaves the
    last complete checkpoint, and the next start repairs the leftovers
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
