"""Training: one loop for every experiment, the losses it is used with, and pre-training of
PLDR-LLMs and GPTs from the command line.

:func:`train` takes a model and a ``loss_fn(step) -> scalar tensor`` that draws its own batch, so
the same loop fits full-batch regression, the recall table and language modelling. It shows a
tqdm progress bar, records the loss curve, and stops with a clear error on a non-finite loss.
:func:`pretrain` builds a PLDR-LLM (or GPT) run on top of it: tokenizer, packed blocks, DDP under
``torchrun``, bf16 autocast on CUDA, DAG regulariser, checkpoints and exact resume;
``python -m kvattn.train --config FILE`` runs it.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch import nn
from tqdm.auto import tqdm

from ._checks import check_choice, check_int, is_real
from .checkpoint import recover_directory
from .config import PLDRConfig, reject_unknown_keys
from .data import (
    MIN_VOCAB_SIZE,
    RecallTask,
    RegressionTask,
    TokenData,
    blocks,
    lm_batch,
    load_text,
    tokenize,
)
from .diagnostics import COLLAPSE_LAYER_MEASURES, COLLAPSE_MODEL_MEASURES, collapse_measures
from .lm import TinyLM, TinyLMConfig
from .losses import dag_penalty, lm_cross_entropy
from .pldr import GPT, PLDRLLM

Tensor = torch.Tensor

#: Learning rates must lie below this bound (train and PretrainConfig). It guards against typos
#: (1e39, 1e4, a rate given in percent), not against rates that are merely too high: AdamW moves
#: every weight by about the rate at each step whatever the gradient's size, so a rate of 10
#: throws weights initialised at O(0.1) a hundred times past their scale in one step (a tiny
#: PLDR-LLM's logits already overflow after one step at 9). Every rate the course uses lies far
#: below it: at most 3e-2 with AdamW (the collapse hunt) and 5e-2 with SGD (0.5 in a test).
MAX_LR = 10.0


@dataclass
class History:
    """Loss curve of a run: ``loss[i]`` at ``steps[i]``; evaluations at ``eval_steps``."""

    steps: list[int] = field(default_factory=list)
    loss: list[float] = field(default_factory=list)
    eval_steps: list[int] = field(default_factory=list)
    evals: list[float] = field(default_factory=list)

    @property
    def final_loss(self) -> float:
        return self.loss[-1]


def default_autocast(device: torch.device | str) -> torch.dtype | None:
    """The mixed-precision dtype training uses on ``device``: ``torch.bfloat16`` on a CUDA device
    that supports it (Ampere and later, e.g. Colab's A100/L4), else ``None`` (float32; a T4 has no
    bf16 tensor cores, and float16 would need loss scaling)."""
    device = torch.device(device)
    if device.type != "cuda":
        return None
    return torch.bfloat16 if torch.cuda.is_bf16_supported(including_emulation=False) else None


def adamw(
    params: list[nn.Parameter],
    lr: float,
    betas: tuple[float, float] = (0.9, 0.999),
    eps: float = 1e-8,
    weight_decay: float = 0.01,
    fused: bool = False,
) -> torch.optim.AdamW:
    """The course's AdamW (``torch.optim.AdamW`` with its defaults unless given).

    By default the multi-tensor (``foreach``) implementation, on every device. On CPU,
    PyTorch's default is a Python loop over the parameter tensors, whose cost grows with their
    number: PLDR-LLM's metric learner has many small ones (111 tensors in the benchmark's tiny
    config, against 41 for the same-size GPT). The foreach kernels do the same arithmetic in
    the same order, so a run gives bit for bit the losses and weights of the loop (a test checks
    it); on CUDA foreach is already PyTorch's default. Every shipped run used it.

    ``fused=True`` takes PyTorch's fused kernel instead: one pass over each tensor, on CPU and
    CUDA, where foreach makes several (``python -m kvattn.benchmark --fused-adamw`` times the
    training step with it). It computes the same update in another order, so weights agree
    with foreach's only to rounding, which AdamW's division by each gradient's running size
    amplifies (a test bounds the difference), and a run does not reproduce a foreach run bit
    for bit.

    Raises
    ------
    ValueError
        ``fused`` is not a bool.
    """
    if not isinstance(fused, bool):
        raise ValueError(f"fused must be True or False, got {fused!r}")
    kind = {"fused": True} if fused else {"foreach": True}
    return torch.optim.AdamW(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, **kind)


def lr_multiplier(step: int, steps: int, warmup: int, schedule: str, min_ratio: float) -> float:
    """Learning-rate factor at ``step`` (0-based): linear warm-up over the first ``warmup`` steps,
    then constant or a cosine decay that reaches ``min_ratio`` of the peak at the last step,
    ``steps − 1``."""
    if warmup > 0 and step < warmup:
        return (step + 1) / warmup
    if schedule == "constant":
        return 1.0
    progress = min(1.0, (step - warmup) / max(1, steps - 1 - warmup))
    return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


def train(
    model: nn.Module,
    loss_fn: Callable[[int], Tensor],
    *,
    steps: int,
    lr: float,
    optimizer: str = "adamw",
    weight_decay: float = 0.0,
    betas: tuple[float, float] = (0.9, 0.95),
    eps: float = 1e-8,
    warmup: int = 0,
    schedule: str = "constant",
    min_lr_ratio: float = 0.1,
    grad_clip: float | None = None,
    clip_value: float | None = None,
    autocast_dtype: torch.dtype | None = None,
    eval_fn: Callable[[], float] | None = None,
    eval_every: int | None = None,
    callback: Callable[[int, nn.Module], None] | None = None,
    checkpoint_every: int | None = None,
    on_checkpoint: Callable[[int, torch.optim.Optimizer, History], None] | None = None,
    start_step: int = 0,
    optimizer_state: dict | None = None,
    history: History | None = None,
    log_every: int = 1,
    progress: bool = True,
    desc: str | None = None,
) -> History:
    """Optimise ``model`` for steps ``start_step … steps − 1`` of ``loss_fn``.

    Parameters
    ----------
    loss_fn:
        Called with the step index; returns the loss to minimise as a scalar (0-dim) tensor that
        requires grad (it draws its batch, so a loss_fn that derives the batch from the step makes
        runs resumable).
    lr:
        Peak learning rate, in (0, :data:`MAX_LR`).
    optimizer:
        ``"adamw"`` (with ``betas``, ``eps``; :func:`adamw`), ``"adamw_fused"`` (the same with
        PyTorch's fused kernel: faster, equal to float rounding only, see :func:`adamw`) or
        ``"sgd"`` (plain gradient descent: no momentum, so the conservation laws of gradient flow
        hold up to O(lr²)).
    schedule, warmup, min_lr_ratio:
        See :func:`lr_multiplier`; the learning rate is set before every step.
    grad_clip, clip_value:
        Clip the gradient's global norm, or every gradient entry to ±``clip_value`` (the
        PLDR-LLM reference clips by value at 1.0).
    autocast_dtype:
        Run ``loss_fn`` under ``torch.autocast`` with this dtype (e.g. ``torch.bfloat16`` on
        CUDA).
    eval_fn, eval_every:
        If given, ``eval_fn()`` runs under ``torch.no_grad`` and in eval mode every ``eval_every``
        steps and after the last one.
    callback:
        ``callback(step, model)`` after each optimiser step (e.g. to record weights).
    checkpoint_every, on_checkpoint:
        ``on_checkpoint(step, optimizer, history)`` after every ``checkpoint_every``-th step and
        after the last (``step`` is the number of steps done).
    start_step, optimizer_state, history:
        Resume a run: skip to ``start_step`` with a saved optimizer state and loss history.

    log_every:
        Record the loss every ``log_every`` steps and after the last; the loss is checked for
        NaN/inf only then (reading it waits for the GPU) and before every checkpoint.

    Raises
    ------
    ValueError
        Bad arguments (steps, lr, schedule, optimizer, warmup, ``log_every``, ``start_step``,
        ``eval_every`` or ``checkpoint_every`` not None or an int >= 1, a negative or non-numeric
        clip, ``min_lr_ratio`` outside [0, 1], ``betas``, ``eps``, ``weight_decay``), before any
        step; or ``loss_fn`` returned a tensor that is not 0-dim or does not require grad.
    TypeError
        ``loss_fn`` returned something other than a tensor (e.g. a Python float). Its result is
        checked at every step, before the step's update, so this fails at the first step.
    FloatingPointError
        The loss became NaN or infinite (the message names the step and the learning rate), or a
        parameter did before a checkpoint (the message names it and the step). Nothing is
        checkpointed at or after that step.
    """
    bad_steps = isinstance(steps, bool) or not isinstance(steps, int) or steps < 1
    if bad_steps or not is_real(lr) or lr <= 0:
        raise ValueError(f"need steps >= 1 and lr > 0, got steps={steps!r}, lr={lr!r}")
    check_int("log_every", log_every, low=1)
    check_int("warmup", warmup, low=0)
    for name, value in (("eval_every", eval_every), ("checkpoint_every", checkpoint_every)):
        if value is not None:
            check_int(name, value, low=1)
    _check_optimiser(
        lr=lr,
        min_lr_ratio=min_lr_ratio,
        betas=betas,
        eps=eps,
        weight_decay=weight_decay,
        clip_value=clip_value,
        clip_norm=grad_clip,
        clip_norm_name="grad_clip",
    )
    check_choice("schedule", schedule, ("constant", "cosine"))
    check_int("start_step", start_step, low=0)
    if start_step > steps:
        raise ValueError(f"start_step must lie in [0, {steps}], got {start_step}")
    params = [p for p in model.parameters() if p.requires_grad]
    if optimizer in ("adamw", "adamw_fused"):
        fused = optimizer == "adamw_fused"
        opt: torch.optim.Optimizer = adamw(
            params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, fused=fused
        )
    elif optimizer == "sgd":
        opt = torch.optim.SGD(params, lr=lr, weight_decay=weight_decay)
    else:
        raise ValueError(f"optimizer must be 'adamw', 'adamw_fused' or 'sgd', got {optimizer!r}")
    if optimizer_state is not None:
        opt.load_state_dict(optimizer_state)
        if optimizer != "sgd":  # a loaded state carries the kernel choice it was saved with
            for group in opt.param_groups:
                group["foreach"], group["fused"] = not fused, fused
                for param in group["params"]:
                    state = opt.state.get(param, {})
                    if "step" in state:  # fused reads its step count beside the parameter,
                        # foreach on the CPU (elsewhere it would sync once per tensor and step)
                        where = param.device if fused else torch.device("cpu")
                        state["step"] = state["step"].to(where, torch.float32)
    history = history if history is not None else History()
    device_type = params[0].device.type if params else "cpu"

    def evaluate(step: int) -> None:
        model.eval()
        with torch.no_grad():
            history.eval_steps.append(step)
            history.evals.append(float(eval_fn()))
        model.train()

    model.train()
    bar = tqdm(
        range(start_step, steps),
        desc=desc,
        disable=not progress,
        mininterval=0.5,
        initial=start_step,
        total=steps,
    )
    for step in bar:
        step_lr = lr * lr_multiplier(step, steps, warmup, schedule, min_lr_ratio)
        for group in opt.param_groups:
            group["lr"] = step_lr
        with torch.autocast(device_type, dtype=autocast_dtype, enabled=autocast_dtype is not None):
            loss = loss_fn(step)
        _check_loss(loss, step)
        log_now = step % log_every == 0 or step == steps - 1
        checkpoint_now = (
            on_checkpoint is not None
            and bool(checkpoint_every)
            and ((step + 1) % checkpoint_every == 0 or step == steps - 1)
        )
        # Reading the loss synchronises with the GPU, so it is checked only when it is logged or
        # a checkpoint follows; a NaN in between poisons the parameters, which the check before
        # every checkpoint catches.
        if (log_now or checkpoint_now) and not torch.isfinite(loss):
            raise FloatingPointError(
                f"non-finite loss {loss.item()} at step {step} (lr {step_lr:.3g})"
                + (f"; the loss is checked every {log_every} steps" if log_every > 1 else "")
                + "; lower the learning rate or clip the gradients"
            )
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if grad_clip is not None:
            nn.utils.clip_grad_norm_(params, grad_clip)
        if clip_value is not None:
            nn.utils.clip_grad_value_(params, clip_value)
        opt.step()
        if callback is not None:
            callback(step, model)
        if log_now:
            history.steps.append(step)
            history.loss.append(loss.item())
            bar.set_postfix(loss=f"{history.loss[-1]:.4f}", refresh=False)
        if eval_fn is not None and eval_every and (step + 1) % eval_every == 0 and step < steps - 1:
            evaluate(step)
        if on_checkpoint is not None and checkpoint_every and (step + 1) % checkpoint_every == 0:
            if step < steps - 1:
                _check_parameters(model, step + 1)
                on_checkpoint(step + 1, opt, history)
    if eval_fn is not None and start_step < steps:
        evaluate(steps - 1)
    if on_checkpoint is not None:
        _check_parameters(model, steps)
        on_checkpoint(steps, opt, history)
    model.eval()
    return history


def _check_loss(loss: object, step: int) -> None:
    """Refuse a loss the loop cannot minimise, before its update: a float, a tensor of per-sample
    losses or a loss cut from the graph would otherwise fail in ``isfinite``, in a tensor's truth
    value or in ``backward``, with a message that names neither loss_fn nor what it must return.
    Only the tensor's metadata is read, so the check costs no GPU sync."""
    expected = "loss_fn must return a scalar (0-dim) tensor that requires grad (the mean loss)"
    if not isinstance(loss, Tensor):
        raise TypeError(f"{expected}, got a {type(loss).__name__} ({loss!r}) at step {step}")
    if loss.ndim != 0:
        raise ValueError(
            f"{expected}, got a tensor of shape {tuple(loss.shape)} at step {step}; reduce it "
            "(e.g. .mean())"
        )
    if not loss.requires_grad:
        raise ValueError(
            f"{expected}, got a tensor that does not require grad at step {step} (computed "
            "under torch.no_grad, detached, or from no trainable parameter)"
        )


def _plain_name(name: str) -> str:
    """A parameter's name in the plain model: without the prefixes that torch.compile
    (``_orig_mod.``) and DDP (``module.``) add; pretrain compiles the DDP wrapper, so the
    compile prefix comes first."""
    for prefix in ("_orig_mod.", "module."):
        name = name.removeprefix(prefix)
    return name


def _check_parameters(model: nn.Module, steps_done: int) -> None:
    """Refuse to checkpoint non-finite weights: a NaN gradient with a finite loss leaves NaN
    parameters that would otherwise overwrite the last good checkpoint."""
    for name, tensor in [*model.named_parameters(), *model.named_buffers()]:
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise FloatingPointError(
                f"non-finite parameter {_plain_name(name)} after {steps_done} steps "
                f"(step {steps_done - 1}); not checkpointed, the last checkpoint stays"
            )


def _check_logits(model: nn.Module, ids: Tensor, steps_done: int, lr: float) -> None:
    """Refuse to checkpoint a model whose logits on ``ids`` are not finite: finite weights can
    still overflow the forward pass (a rate far too high leaves weights whose products overflow),
    and the loss that would show it is only computed at the next step, after the checkpoint.
    Eval mode, no gradient; the model's mode comes back."""
    training = model.training
    with torch.no_grad():
        logits = model.eval()(ids).logits
    model.train(training)
    if not bool(torch.isfinite(logits).all()):
        raise FloatingPointError(
            f"non-finite logits after {steps_done} steps (step {steps_done - 1}, lr {lr:.3g}) "
            "although the parameters are finite; not checkpointed, the last checkpoint stays; "
            "lower the learning rate"
        )


def regression_loss(model: nn.Module, task: RegressionTask) -> Callable[[int], Tensor]:
    """Full-batch mean-squared error on the task's training set (same batch every step)."""
    return lambda step: F.mse_loss(model(task.x_train), task.y_train)


@torch.no_grad()
def regression_error(model: nn.Module, x: Tensor, y: Tensor) -> float:
    """Mean-squared error of ``model`` on ``(x, y)``."""
    return float(F.mse_loss(model(x), y))


def recall_loss(model: nn.Module, task: RecallTask) -> Callable[[int], Tensor]:
    """Full-batch cross-entropy of the logits ``model(keys)`` against the stored values."""
    return lambda step: F.cross_entropy(model(task.keys), task.values)


@torch.no_grad()
def recall_accuracy(model: nn.Module, task: RecallTask) -> float:
    """Fraction of keys whose arg-max logit is the stored value."""
    return float((model(task.keys).argmax(-1) == task.values).float().mean())


def lm_loss(
    model: TinyLM,
    data: TokenData,
    batch_size: int,
    generator: torch.Generator,
    device: torch.device | str | None = None,
) -> Callable[[int], Tensor]:
    """Next-token cross-entropy on random training windows of the model's block size."""

    def loss(step: int) -> Tensor:
        x, y = lm_batch(data.train, batch_size, model.cfg.block_size, generator, device)
        return model.loss(x, y)

    return loss


@torch.no_grad()
def lm_eval_loss(model: TinyLM, ids: Tensor, batch_size: int = 32, max_windows: int = 256) -> float:
    """Mean next-token loss (nats per token) over consecutive non-overlapping windows of ``ids``:
    deterministic, the same windows every call."""
    T = model.cfg.block_size
    n = min(max_windows, (len(ids) - 1) // T)
    if n < 1:
        raise ValueError(f"need more than {T + 1} ids to evaluate, got {len(ids)}")
    device = next(model.parameters()).device
    windows = ids[: n * T + 1]
    x = windows[:-1].view(n, T)
    y = windows[1:].view(n, T)
    losses = [
        (
            float(model.loss(x[i : i + batch_size].to(device), y[i : i + batch_size].to(device))),
            min(batch_size, n - i),
        )
        for i in range(0, n, batch_size)
    ]
    return sum(loss * w for loss, w in losses) / n


@dataclass
class SeedRuns:
    """Validation-loss curves of one model configuration over several seeds.

    ``evals[s][i]`` is the validation loss of seed ``seeds[s]`` at step ``eval_steps[i]``;
    ``measured[s]`` what ``measure`` returned for that seed's trained model (empty without one).
    """

    seeds: list[int]
    eval_steps: list[int]
    evals: list[list[float]]
    n_params: int
    measured: list[float] = field(default_factory=list)

    @property
    def final(self) -> list[float]:
        """Final validation loss of each seed."""
        return [e[-1] for e in self.evals]


def train_lm_seeds(
    cfg: TinyLMConfig,
    data: TokenData,
    seeds: list[int],
    *,
    steps: int,
    lr: float = 3e-3,
    batch_size: int = 32,
    eval_every: int = 50,
    device: torch.device | str = "cpu",
    progress: bool = True,
    desc: str | None = None,
    measure: Callable[[TinyLM], float] | None = None,
) -> SeedRuns:
    """Train a fresh :class:`kvattn.lm.TinyLM` per seed, same recipe, recording validation loss.

    For seed s both the initialisation and the batch order are seeded with s, so two
    configurations run with the same seeds see the same batches: their per-seed differences are
    paired. Recipe: AdamW (wd 0.1), 10 % linear warm-up then cosine decay, grad-norm clip 1.
    ``progress`` shows a bar over the seeds. ``measure``, if given, is called on each trained
    model (in eval mode) and its results are kept in ``SeedRuns.measured``.

    Raises
    ------
    ValueError
        No seeds, a seed that is not an int >= 0, ``batch_size`` or ``eval_every`` not an int >= 1,
        or a bad ``steps``/``lr`` (see :func:`train`), before any training.
    """
    if not seeds:
        raise ValueError("seeds must name at least one seed")
    for seed in seeds:
        check_int("every seed", seed, low=0)
    check_int("batch_size", batch_size, low=1)
    check_int("eval_every", eval_every, low=1)
    runs: list[list[float]] = []
    eval_steps: list[int] = []
    measured: list[float] = []
    model = None
    for seed in tqdm(seeds, desc=desc, disable=not progress):
        torch.manual_seed(seed)
        model = TinyLM(cfg).to(device)
        gen = torch.Generator().manual_seed(seed)
        h = train(
            model,
            lm_loss(model, data, batch_size, gen, device),
            steps=steps,
            lr=lr,
            warmup=max(1, steps // 10),
            schedule="cosine",
            weight_decay=0.1,
            grad_clip=1.0,
            eval_fn=lambda m=model: lm_eval_loss(m, data.val),
            eval_every=eval_every,
            autocast_dtype=default_autocast(device),
            progress=False,
        )
        runs.append(h.evals)
        eval_steps = h.eval_steps
        if measure is not None:
            measured.append(float(measure(model.eval())))
    n_params = sum(p.numel() for p in model.parameters())
    return SeedRuns(list(seeds), eval_steps, runs, n_params, measured)


# ---------------------------------------------------------------------------------------------
# Pre-training PLDR-LLMs and GPTs (Part II): config file, data, DDP, checkpoints, resume


def _help(text: str) -> dict:
    """Field metadata: the description ``python -m kvattn.train --help`` prints."""
    return {"help": text}


@dataclass
class PretrainConfig:
    """Everything a pre-training run needs; stored as JSON (``python -m kvattn.train --config``).

    ``model`` holds :class:`kvattn.config.PLDRConfig` fields (``vocab_size`` is set from the
    tokenizer); ``architecture`` is ``"pldrllm"`` or ``"gpt"``; ``corpus`` is a source of
    :func:`kvattn.data.load_text`, cut to ``corpus_chars`` characters if given. Optimiser
    defaults are the reference's: AdamW β = (0.9, 0.95), eps 1e-5, weight decay 0.1, gradient
    clipping by value at 1.0, linear warm-up then cosine decay to 10 % of the peak. ``dag`` =
    (c_A, c_Ap, c_G) are the DAG-regulariser coefficients on A_LM, A_P and G_LM (0 = off).
    ``batch_size`` is global: under DDP each of the W processes takes ``batch_size / W``
    sequences of every step's batch. ``probe_every`` records how close the model is to
    inference collapse (:func:`kvattn.diagnostics.collapse_measures`) as trajectories: the probes
    are the first ``probe_blocks`` validation blocks, and the next ``probe_blocks`` score the
    G_LM substitution; it only observes, so the losses are those of the same run without it.
    Each field's description is in its ``metadata["help"]``.

    Raises
    ------
    ValueError
        At construction, before any work: a field of the wrong type or out of range, or an
        unknown or invalid key in ``model`` (naming the field, the value and what is allowed).
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
        _check_optimiser(
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
        if self.device != "auto":
            try:
                torch.device(self.device)
            except RuntimeError:
                raise ValueError(
                    f"device must be 'auto' or a torch device such as 'cpu' or 'cuda', got "
                    f"{self.device!r}"
                ) from None
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
        ValueError
            Not valid JSON, not an object, unknown keys (with the closest field names), or a
            field that fails validation.
        """

        try:
            raw = json.loads(Path(path).read_text())
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


def _check_optimiser(
    *,
    lr: object,
    min_lr_ratio: object,
    betas: object,
    eps: object,
    weight_decay: object,
    clip_value: object,
    clip_norm: object,
    clip_norm_name: str = "clip_norm",
) -> None:
    """The optimiser settings :func:`train` and :class:`PretrainConfig` share, checked before any
    work: a negative clip or ratio would not fail, it would blow the loss up, and a rate of
    :data:`MAX_LR` or more would overflow inside AdamW."""
    if not is_real(lr) or not 0 < lr < MAX_LR:
        raise ValueError(f"lr must be a positive finite number below {MAX_LR:g}, got {lr!r}")
    if not is_real(min_lr_ratio) or not 0 <= min_lr_ratio <= 1:
        raise ValueError(f"min_lr_ratio must be a number in [0, 1], got {min_lr_ratio!r}")
    if (
        not isinstance(betas, list | tuple)
        or len(betas) != 2
        or not all(is_real(b) and 0 <= b < 1 for b in betas)
    ):
        raise ValueError(f"betas must be two numbers in [0, 1), got {betas!r}")
    if not is_real(eps) or eps <= 0:
        raise ValueError(f"eps must be a positive finite number, got {eps!r}")
    if not is_real(weight_decay) or weight_decay < 0:
        raise ValueError(f"weight_decay must be a finite number >= 0, got {weight_decay!r}")
    for name, value in (("clip_value", clip_value), (clip_norm_name, clip_norm)):
        if value is not None and (not is_real(value) or value <= 0):
            raise ValueError(f"{name} must be null (off) or a positive number, got {value!r}")


@dataclass
class PretrainResult:
    """The trained model (unwrapped), its tokenizer, the loss history, the output folder and, with
    ``probe_every``, the collapse-measure trajectories (as :func:`load_probes` returns them)."""

    model: nn.Module
    tokenizer: object
    history: History
    out_dir: Path
    probes: dict | None = None


def select_device(
    requested: str, local_rank: int, world: int, cuda_available: bool
) -> torch.device:
    """The device of the process with ``local_rank`` (of ``world`` processes) for the config's
    ``device``: ``"auto"`` is ``cuda:<local_rank>`` when CUDA is available, else the CPU;
    ``"cuda"`` is ``cuda:<local_rank>`` (one GPU per process, as DDP's
    ``device_ids=[local_rank]`` expects); anything else is taken as given.

    Raises
    ------
    ValueError
        CUDA requested but not available, or a fixed CUDA index such as ``"cuda:1"`` with more
        than one process (every process would share one GPU).
    """
    if requested == "auto":
        return torch.device(f"cuda:{local_rank}" if cuda_available else "cpu")
    device = torch.device(requested)
    if device.type == "cuda":
        if not cuda_available:
            raise ValueError(f"device {requested!r} was requested but CUDA is not available")
        if device.index is None:
            return torch.device(f"cuda:{local_rank}")
        if world > 1:
            raise ValueError(
                f"device {requested!r} names one GPU for all {world} processes; use 'cuda' or "
                "'auto' (each process takes cuda:LOCAL_RANK)"
            )
    return device


#: The environment variables that turn DDP on (``WORLD_SIZE`` > 1) and place this process in it;
#: ``torchrun`` sets them all. Every error of the DDP set-up lists them with their values.
DDP_VARIABLES = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")

#: Seconds the DDP processes wait for each other, at the rendezvous and in every collective,
#: before they fail instead of hanging: a hang limit, generous for a busy machine (NCCL's own
#: default; gloo's is 30 minutes). The environment variable ``KVATTN_DDP_TIMEOUT_S`` overrides it.
DDP_TIMEOUT_S = 600.0


def _ddp_error(problem: str) -> str:
    """``problem``, then the variables that turned DDP on, as the environment has them: DDP starts
    from the environment alone, so a stray ``WORLD_SIZE`` is otherwise hard to spot."""
    values = ", ".join(
        f"{name}={os.environ[name]!r}" if name in os.environ else f"{name} unset"
        for name in DDP_VARIABLES
    )
    return (
        f"{problem}. DDP is on because the environment sets WORLD_SIZE ({values}); launch with "
        "torchrun, which sets them all, or unset WORLD_SIZE to train in one process"
    )


def _env_number(name: str, default: str, kind: type, low: float, ddp: bool = True) -> float:
    """The environment variable ``name`` (``default`` when unset) as an int >= ``low``, or a
    finite float > ``low``; the error names DDP's variables if ``ddp``."""
    text = os.environ.get(name, default)
    try:
        value = kind(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and (value >= low if kind is int else value > low)):
        what = f"an int >= {low}" if kind is int else f"a finite number > {low:g}"
        problem = f"the environment variable {name} must be {what}, got {text!r}"
        raise ValueError(_ddp_error(problem) if ddp else problem)
    return value


def _distributed(requested_device: str, batch_size: int) -> tuple[int, int, torch.device, bool]:
    """(rank, world size, this process's device, whether this call started the process group).

    With ``WORLD_SIZE`` > 1, the environment, the device and ``batch_size`` (divisible by the
    number of processes) are checked before the process group starts, and every error names the
    variables that turned DDP on (:data:`DDP_VARIABLES`). The rendezvous and the collectives
    wait at most :data:`DDP_TIMEOUT_S` seconds (``KVATTN_DDP_TIMEOUT_S``) for the other
    processes. Under ``torchrun`` the CUDA device is made current before the process group
    starts, and the backend follows the chosen device (NCCL for CUDA, else gloo)."""
    import datetime

    import torch.distributed as dist

    world = _env_number("WORLD_SIZE", "1", int, low=1)
    local_rank = _env_number("LOCAL_RANK", "0", int, low=0, ddp=world > 1)
    cuda = torch.cuda.is_available()
    if world == 1:
        return 0, 1, select_device(requested_device, local_rank, 1, cuda), False
    try:
        device = select_device(requested_device, local_rank, world, cuda)
    except ValueError as err:
        raise ValueError(_ddp_error(str(err))) from None
    if batch_size % world:
        raise ValueError(
            _ddp_error(f"batch_size {batch_size} is not divisible by {world} processes")
        )
    if device.type == "cuda":
        torch.cuda.set_device(device)
    started = not dist.is_initialized()
    if started:
        missing = [
            name for name in ("RANK", "MASTER_ADDR", "MASTER_PORT") if name not in os.environ
        ]
        if missing:
            raise ValueError(_ddp_error(f"DDP also needs {', '.join(missing)}"))
        if _env_number("RANK", "0", int, low=0) >= world:
            raise ValueError(_ddp_error("RANK must be below WORLD_SIZE"))
        timeout_s = _env_number("KVATTN_DDP_TIMEOUT_S", str(DDP_TIMEOUT_S), float, low=0)
        try:
            dist.init_process_group(
                "nccl" if device.type == "cuda" else "gloo",
                timeout=datetime.timedelta(seconds=timeout_s),
            )
        except (ValueError, dist.DistError) as err:
            # torch's first line says what failed; the rest can be a C++ stack
            reason = (str(err).strip() or repr(err)).splitlines()[0]
            problem = (
                f"the DDP rendezvous failed: {reason} (the processes wait for each other at "
                f"most {timeout_s:g} s; the environment variable KVATTN_DDP_TIMEOUT_S sets it)"
            )
            kind = ValueError if isinstance(err, ValueError) else RuntimeError
            raise kind(_ddp_error(problem)) from err
    return dist.get_rank(), world, device, started


def _save_training_state(
    directory: Path, step: int, opt: torch.optim.Optimizer, history: History, cfg: PretrainConfig
) -> None:
    """Optimizer state as safetensors (tensors) + JSON (everything else); no pickle."""
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
    }
    (directory / "trainer_state.json").write_text(json.dumps(meta, indent=1))


def _load_training_state(directory: Path) -> tuple[int, dict, History]:
    """The step, optimizer state and history saved by :func:`_save_training_state`.

    Every tensor is loaded on the CPU: ``Optimizer.load_state_dict`` moves the moment estimates
    to their parameters' device but keeps the scalar ``step`` counters where they are, and PyTorch
    expects them on the CPU (on a GPU, every step would wait for one host sync per parameter)."""
    meta = json.loads((directory / "trainer_state.json").read_text())
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


#: The file of a checkpoint that holds the collapse-measure trajectories.
PROBES_FILE = "probes.json"


def _new_probes(probe_blocks: int) -> dict:
    """An empty trajectory: ``probe_blocks``, ``step`` and one list per recorded measure."""
    names = [*COLLAPSE_LAYER_MEASURES, *(f"{n}_heads" for n in COLLAPSE_LAYER_MEASURES)]
    names += COLLAPSE_MODEL_MEASURES
    return {"probe_blocks": probe_blocks, "step": [], **{n: [] for n in names}}


def load_probes(path: str | Path) -> dict:
    """The collapse-measure trajectories a pre-training run with ``probe_every`` saved.

    ``path``: a ``probes.json`` file, a checkpoint folder holding one, or a run's ``out_dir``
    (its ``checkpoint/``). The result is plain JSON: ``step`` (optimiser steps done when the
    measures were taken, 0 = before training), ``probe_blocks``, and for every measure of
    :class:`kvattn.diagnostics.CollapseMeasures` one list with an entry per step: per layer
    (``G_order_mean`` …), per layer and head (``G_order_mean_heads`` …) or one number
    (``delta_loss`` …); ``None`` where a value is undefined (nan). It is what
    :func:`kvattn.figures.collapse_trajectories` draws.

    Raises
    ------
    FileNotFoundError
        No ``probes.json`` there.
    ValueError
        Not a JSON object with a ``step`` list and the lists of every measure, one entry per step.
    """
    path = Path(path)
    for candidate in (path, path / PROBES_FILE, path / "checkpoint" / PROBES_FILE):
        if candidate.is_file():
            break
    else:
        raise FileNotFoundError(f"no {PROBES_FILE} in {path} (was the run made with probe_every?)")
    try:
        probes = json.loads(candidate.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{candidate} is not valid JSON: {err}") from None
    if not isinstance(probes, dict) or not isinstance(probes.get("step"), list):
        raise ValueError(f"{candidate} must hold a JSON object with a 'step' list")
    expected = set(_new_probes(0))
    missing = sorted(expected - set(probes))
    if missing:
        raise ValueError(f"{candidate} lacks the measures {', '.join(missing)}")
    for name in expected - {"probe_blocks", "step"}:
        if not isinstance(probes[name], list) or len(probes[name]) != len(probes["step"]):
            raise ValueError(f"{candidate}: {name!r} must be a list with one entry per step")
    return probes


def _check_resume(ckpt: Path, cfg: PretrainConfig) -> None:
    """Refuse to resume from a checkpoint whose run differs from ``cfg`` in anything but
    :data:`RESUMABLE_CHANGES`, listing every differing field."""
    state_file = ckpt / "trainer_state.json"
    if not state_file.exists():
        raise FileNotFoundError(
            f"resume: there is no checkpoint to resume in {ckpt} (no trainer_state.json); "
            "run without resume to start a new run"
        )
    state = json.loads(state_file.read_text())
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


def _prepare_out_dir(out_dir: Path, ckpt: Path, cfg: PretrainConfig, resume: bool) -> None:
    """Repair an interrupted checkpoint replace, refuse to clobber or to resume nothing, and check
    that ``out_dir`` is writable, all before the tokenizer is trained."""
    if resume and cfg.overwrite:
        raise ValueError("resume and overwrite exclude each other: continue the run or replace it")
    probe = out_dir / f".kvattn-write-test-{os.getpid()}"
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as err:
        raise ValueError(f"out_dir {str(out_dir)!r} is not a writable folder: {err}") from None
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

    The run writes ``out_dir/checkpoint/``: the model in the published format
    (``config.json``, ``model.safetensors``), ``tokenizer.model`` (SentencePiece) and the
    trainer state (``optimizer.safetensors``, ``trainer_state.json``), and with ``probe_every``
    the collapse-measure trajectories (``probes.json``, see :func:`load_probes`). Every step's
    batch is a function of (seed, step) alone, so ``resume=True`` continues exactly where the
    checkpoint left off and reproduces the uninterrupted loss curve and trajectories.

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
    (see :func:`select_device`); the processes wait for each other, at the rendezvous and in every
    collective, at most :data:`DDP_TIMEOUT_S` seconds, or as many as the environment variable
    ``KVATTN_DDP_TIMEOUT_S`` says, and the process group this call starts is destroyed when it
    returns.

    Raises
    ------
    FileExistsError, FileNotFoundError, ValueError
        As above (an existing run, no checkpoint to resume, a mismatched resume, an unwritable
        out_dir), before the tokenizer is trained.
    ValueError
        DDP is on but the environment is incomplete or invalid, the device does not suit it, or
        ``batch_size`` is not divisible by the number of processes; before the process group
        starts. The message lists the variables that turned DDP on.
    RuntimeError
        The DDP rendezvous failed, e.g. the other processes did not join within the hang limit;
        the message lists the same variables.
    FloatingPointError
        Non-finite loss, parameters or logits (the message names the step).
    """
    import torch.distributed as dist

    rank, world, device, started = _distributed(cfg.device, cfg.batch_size)
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


def _pretrain(
    cfg: PretrainConfig, resume: bool, progress: bool, rank: int, world: int, device: torch.device
) -> PretrainResult:
    from torch.nn.parallel import DistributedDataParallel

    from .checkpoint import (
        load_pretrained,
        replace_directory,
        staging_directory,
        write_pretrained,
    )

    out_dir = Path(cfg.out_dir)
    ckpt = out_dir / "checkpoint"
    text = load_text(cfg.corpus, max_chars=cfg.corpus_chars)
    data = tokenize(text, vocab_size=cfg.vocab_size, val_every=cfg.val_every)
    tokenizer_bytes = data.tokenizer.serialized_model_proto()
    if resume and (ckpt / "tokenizer.model").read_bytes() != tokenizer_bytes:
        raise ValueError(
            f"cannot resume the run in {ckpt}: the tokenizer trained now from the same config "
            "differs from the checkpoint's tokenizer.model (another sentencepiece version?)"
        )
    train_blocks = blocks(data.train, cfg.block_size)
    all_val_blocks = blocks(data.val, cfg.block_size)
    val_blocks = all_val_blocks[: cfg.eval_blocks]
    if cfg.probe_every is not None and len(all_val_blocks) < 2 * cfg.probe_blocks:
        raise ValueError(
            f"probe_blocks={cfg.probe_blocks} needs {2 * cfg.probe_blocks} validation blocks "
            f"(probes, then as many to score the substitution); the corpus gives "
            f"{len(all_val_blocks)}: lower probe_blocks or block_size, or use more text"
        )
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
        loss = lm_cross_entropy(out.logits, batch[:, 1:], model_cfg.pad_token_id)
        if dag_on:
            loss = loss + dag_penalty(out.pldr_attentions, cfg.dag)
        if world > 1:
            # Report the mean over all processes (what a single process would see) while each
            # process back-propagates its own part; DDP averages the gradients.
            import torch.distributed as dist

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
        probes = probes if probes is not None else _new_probes(cfg.probe_blocks)

    def probe(steps_done: int) -> None:
        # eval mode, no gradient, the global random stream untouched; the model's mode comes back

        record = collapse_measures(model, probe_ids, probe_eval).as_record()
        probes["step"].append(steps_done)
        for name, value in record.items():
            probes[name].append(value)

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
        _check_logits(model, check_ids, step, opt.param_groups[0]["lr"])
        if rank == 0:
            staging = staging_directory(ckpt)
            shutil.rmtree(staging, ignore_errors=True)
            write_pretrained(model, staging)
            (staging / "tokenizer.model").write_bytes(tokenizer_bytes)
            _save_training_state(staging, step, opt, hist, cfg)
            if probes is not None:
                (staging / PROBES_FILE).write_text(json.dumps(probes, allow_nan=False))
            replace_directory(ckpt)
        if world > 1:
            import torch.distributed as dist

            dist.barrier()

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
    from the dataclass, for ``python -m kvattn.train --help``."""
    lines = ["PretrainConfig fields (keys of the --config JSON file):"]
    for f in fields(PretrainConfig):
        default = f.default_factory() if callable(f.default_factory) else f.default
        lines.append(
            f"  {f.name} ({f.type}, default {json.dumps(default)}): {f.metadata.get('help', '')}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """``python -m kvattn.train --config FILE [--resume | --overwrite] [--steps N] [--out-dir
    DIR]``; ``--help`` lists the config fields."""
    import argparse
    import dataclasses

    parser = argparse.ArgumentParser(
        prog="python -m kvattn.train",
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
        cfg = dataclasses.replace(cfg, **{k: v for k, v in overrides.items() if v is not None})
    except (ValueError, TypeError, FileNotFoundError) as err:  # a bad config: say why, no traceback
        parser.exit(1, f"{parser.prog}: error: {err}\n")
    result = pretrain(cfg, resume=args.resume)
    if int(os.environ.get("RANK", "0")) == 0:
        final = result.history.evals[-1] if result.history.evals else float("nan")
        print(
            f"done: {cfg.steps} steps, final validation loss {final:.4f}; checkpoint in "
            f"{result.out_dir / 'checkpoint'}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
