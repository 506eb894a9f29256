"""Training: one loop for every experiment, and the task losses it is used with.

:func:`train` takes a model and a ``loss_fn(step) -> scalar tensor`` that draws its own batch, so
the same loop fits full-batch regression, the recall table and language modelling. It shows a
tqdm progress bar, records the loss curve, and stops with a clear error on a non-finite loss.
Beside it: the optimiser (:func:`adamw`) and its schedule (:func:`lr_multiplier`), the losses of
the course's tasks (regression, recall, a small LM), and multi-seed LM runs
(:func:`train_lm_seeds`, :class:`SeedRuns`). Pre-training of PLDR-LLMs and GPTs builds on this
loop in :mod:`kvattn.pretrain`.
"""

from __future__ import annotations

import math
import numbers
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

from ._checks import check_bool, check_choice, check_device, check_int, is_real
from .data import (
    RecallTask,
    RegressionTask,
    TokenData,
    lm_batch,
)
from .lm import TinyLM, TinyLMConfig

Tensor = torch.Tensor

#: Learning rates must lie below this bound (train and PretrainConfig). It guards against typos
#: (1e39, 1e4, a rate given in percent), not against rates that are merely too high: AdamW moves
#: every weight by about the rate at each step whatever the gradient's size, so a rate of 10
#: throws weights initialised at O(0.1) a hundred times past their scale in one step (a tiny
#: PLDR-LLM's logits already overflow after one step at 9). Every rate the course uses lies far
#: below it: at most 3e-2 with AdamW (the collapse hunt) and 5e-2 with SGD (0.5 in a test).
MAX_LR = 10.0

#: The dtypes :func:`train` can autocast to (None: no autocast). torch itself only warns about
#: another one (int8, float32) and trains in float32, so it is refused.
AUTOCAST_DTYPES = (torch.bfloat16, torch.float16)


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
        Run ``loss_fn`` under ``torch.autocast`` with this dtype: ``None`` (off),
        ``torch.bfloat16`` or ``torch.float16`` (:data:`AUTOCAST_DTYPES`).
    eval_fn, eval_every:
        If given, ``eval_fn()`` runs under ``torch.no_grad`` and in eval mode every ``eval_every``
        steps and after the last one; it returns a number (a float, or a one-element tensor).
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
        clip, ``min_lr_ratio`` outside [0, 1], ``betas``, ``eps``, ``weight_decay``,
        ``autocast_dtype`` not in :data:`AUTOCAST_DTYPES`, ``progress`` not a bool,
        ``optimizer_state`` without ``state`` and ``param_groups`` or not this optimizer's), before
        any step; or ``loss_fn`` returned a tensor that is not 0-dim or does not require grad.
    TypeError
        Before any step: ``model`` is not an ``nn.Module``, ``loss_fn`` is not callable,
        ``eval_fn``, ``callback`` or ``on_checkpoint`` is neither None nor callable, ``history`` is
        neither None nor a :class:`History`, ``desc`` neither None nor a str. During the run:
        ``loss_fn`` returned something other than a tensor (e.g. a Python float; its result is
        checked at every step, before the step's update, so this fails at the first step), or
        ``eval_fn`` returned something other than a number.
    FloatingPointError
        The loss became NaN or infinite (the message names the step and the learning rate), a
        parameter did before a checkpoint (the message names it and the step), or ``eval_fn``
        returned NaN or an infinity. Nothing is checkpointed at or after that step.
    """
    bad_steps = isinstance(steps, bool) or not isinstance(steps, int) or steps < 1
    if bad_steps or not is_real(lr) or lr <= 0:
        raise ValueError(f"need steps >= 1 and lr > 0, got steps={steps!r}, lr={lr!r}")
    check_int("log_every", log_every, low=1)
    check_int("warmup", warmup, low=0)
    for name, value in (("eval_every", eval_every), ("checkpoint_every", checkpoint_every)):
        if value is not None:
            check_int(name, value, low=1)
    check_optimiser(
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
    _check_run_arguments(
        model, loss_fn, eval_fn, callback, on_checkpoint, history, autocast_dtype, progress, desc
    )
    _check_optimizer_state(optimizer_state)
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
        try:
            opt.load_state_dict(optimizer_state)
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(
                f"optimizer_state does not fit this model's {optimizer} optimizer: {err}"
            ) from err
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
            value = _evaluation(eval_fn(), step, model)
        history.eval_steps.append(step)
        history.evals.append(value)
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


def _check_run_arguments(
    model: object,
    loss_fn: object,
    eval_fn: object,
    callback: object,
    on_checkpoint: object,
    history: object,
    autocast_dtype: object,
    progress: object,
    desc: object,
) -> None:
    """Refuse what :func:`train` would otherwise only trip over after steps had changed the
    weights (a callback that is not callable fails after the first update, an ``eval_fn`` at the
    first evaluation), or would silently get wrong: torch only warns about an autocast dtype it
    cannot use and trains in float32, and any string is a true ``progress``."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not callable(loss_fn):
        raise TypeError(
            f"loss_fn must be callable (step -> scalar loss tensor), got {type(loss_fn).__name__}"
        )
    hooks = {"eval_fn": eval_fn, "callback": callback, "on_checkpoint": on_checkpoint}
    for name, fn in hooks.items():
        if fn is not None and not callable(fn):
            raise TypeError(f"{name} must be None or callable, got {type(fn).__name__}")
    if history is not None and not isinstance(history, History):
        raise TypeError(f"history must be None or a History, got {type(history).__name__}")
    if autocast_dtype is not None and not any(autocast_dtype is d for d in AUTOCAST_DTYPES):
        raise ValueError(
            f"autocast_dtype must be None, torch.bfloat16 or torch.float16, got {autocast_dtype!r}"
        )
    check_bool("progress", progress)
    if desc is not None and not isinstance(desc, str):
        raise TypeError(f"desc must be None or a str, got {type(desc).__name__}")


def _check_optimizer_state(state: object) -> None:
    """A resumed optimizer state is a dict as ``Optimizer.state_dict()`` returns it; without its
    two keys torch fails with a bare ``KeyError: 'param_groups'``."""
    if state is None:
        return
    if not isinstance(state, dict):
        raise ValueError(
            f"optimizer_state must be None or a dict from Optimizer.state_dict(), got "
            f"{type(state).__name__}"
        )
    missing = [key for key in ("state", "param_groups") if key not in state]
    if missing:
        raise ValueError(
            f"optimizer_state must be a dict from Optimizer.state_dict(), with 'state' and "
            f"'param_groups'; it lacks {', '.join(repr(k) for k in missing)}"
        )


def _evaluation(value: object, step: int, model: nn.Module) -> float:
    """``eval_fn``'s result as a float: a number or a one-element tensor; float() would also
    take the string '1.5', and a NaN evaluation would be recorded as if it were a loss. A
    non-finite one names the first non-finite parameter if there is one (the likelier cause)."""
    if isinstance(value, Tensor) and value.numel() == 1:
        value = value.item()
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise TypeError(
            f"eval_fn must return a number (or a one-element tensor), got "
            f"{type(value).__name__} ({value!r}) at step {step}"
        )
    if not math.isfinite(value):
        _check_parameters(model, step + 1)
        raise FloatingPointError(
            f"eval_fn returned a non-finite evaluation ({value}) at step {step}; lower the "
            "learning rate or clip the gradients"
        )
    return float(value)


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


def check_logits(model: nn.Module, ids: Tensor, steps_done: int, lr: float) -> None:
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
        raise ValueError(
            f"need more than {T} ids to evaluate (one window of block_size + 1 = {T + 1}), got "
            f"{len(ids)}"
        )
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
        Before any training: no seeds, a seed that is not an int >= 0, a seed named twice (it
        would train the same run again), ``batch_size`` or ``eval_every`` not an int >= 1, a bad
        ``steps`` or ``lr`` (see :func:`train`), a device this machine lacks (or ``"meta"``),
        ``progress`` not a bool, or ``data.train``/``data.val`` shorter than one window of
        ``cfg.block_size + 1`` ids.
    TypeError
        Before any training: ``cfg`` is not a :class:`~kvattn.lm.TinyLMConfig`, ``data`` not a
        :class:`~kvattn.data.TokenData`, ``measure`` neither None nor callable, ``desc``
        neither None nor a str. After a seed's training: ``measure`` returned something other
        than a number.
    """
    if not isinstance(cfg, TinyLMConfig):
        raise TypeError(f"cfg must be a TinyLMConfig, got {type(cfg).__name__}")
    if not isinstance(data, TokenData):
        raise TypeError(f"data must be a TokenData, got {type(data).__name__}")
    if not seeds:
        raise ValueError("seeds must name at least one seed")
    for seed in seeds:
        check_int("every seed", seed, low=0)
    repeated = sorted({seed for seed in seeds if list(seeds).count(seed) > 1})
    if repeated:
        raise ValueError(f"seeds has duplicates {repeated}, got {list(seeds)}")
    check_int("steps", steps, low=1)
    _check_lr(lr)
    check_int("batch_size", batch_size, low=1)
    check_int("eval_every", eval_every, low=1)
    check_device("device", device)
    check_bool("progress", progress)
    if desc is not None and not isinstance(desc, str):
        raise TypeError(f"desc must be None or a str, got {type(desc).__name__}")
    if measure is not None and not callable(measure):
        raise TypeError(f"measure must be None or callable, got {type(measure).__name__}")
    # train() draws windows of block_size + 1 ids from data.train and evaluates on them in
    # data.val: a shorter stream would fail after the first seed's training steps.
    window = cfg.block_size + 1
    for name, ids in (("data.train", data.train), ("data.val", data.val)):
        if not isinstance(ids, Tensor) or ids.ndim != 1 or len(ids) < window:
            got = f"shape {tuple(ids.shape)}" if isinstance(ids, Tensor) else type(ids).__name__
            raise ValueError(
                f"{name} must be a 1-D id tensor of at least block_size + 1 = {window} ids "
                f"(one window), got {got}"
            )
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
            measured.append(_measured(measure(model.eval()), seed))
    n_params = sum(p.numel() for p in model.parameters())
    return SeedRuns(list(seeds), eval_steps, runs, n_params, measured)


def _measured(value: object, seed: int) -> float:
    """``measure``'s result as a float: a number or a one-element tensor (not a string that
    float() would parse). NaN is kept: what a measure means by it is the caller's to judge."""
    if isinstance(value, Tensor) and value.numel() == 1:
        value = value.item()
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise TypeError(
            f"measure must return a number (or a one-element tensor), got "
            f"{type(value).__name__} ({value!r}) for seed {seed}"
        )
    return float(value)


def _check_lr(lr: object) -> None:
    """A peak learning rate in (0, :data:`MAX_LR`): a typo (1e39, a rate in percent) would
    otherwise overflow inside AdamW."""
    if not is_real(lr) or not 0 < lr < MAX_LR:
        raise ValueError(f"lr must be a positive finite number below {MAX_LR:g}, got {lr!r}")


def check_optimiser(
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
    """The optimiser settings :func:`train` and :class:`~kvattn.pretrain.PretrainConfig` share,
    checked before any work: a negative clip or ratio would not fail, it would blow the loss up, and
    a rate of :data:`MAX_LR` or more would overflow inside AdamW."""
    _check_lr(lr)
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


if __name__ == "__main__":
    # This module was the pre-training command until pre-training moved to kvattn.pretrain; an
    # old `python -m kvattn.train --config FILE` must not exit 0 having trained nothing. (It
    # cannot hand over: train sits below pretrain and never imports it.)
    print(
        "python -m kvattn.train: error: kvattn.train is a library module, not a command; "
        "pre-training moved to: python -m kvattn.pretrain --config FILE (or kvattn-train "
        "--config FILE)",
        file=sys.stderr,
    )
    raise SystemExit(2)
