"""The one training loop for every experiment: :func:`~kvattn.train.train` and its
:class:`~kvattn.train.History`.

:func:`~kvattn.train.train` takes a model and a ``loss_fn(step) -> scalar tensor`` that draws its
own batch, so the same loop fits full-batch regression, the recall table and language modelling.
It shows a tqdm progress bar, records the loss curve, and stops with a clear error on a non-finite
loss; it refuses to checkpoint non-finite weights (:func:`~kvattn.train.check_logits` does the
same for logits, for pre-training).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn
from tqdm.auto import tqdm

from .._checks import check_bool, check_choice, check_int, is_real
from .optim import AUTOCAST_DTYPES, adamw, check_optimiser, lr_multiplier

Tensor = torch.Tensor


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
        Peak learning rate, in (0, :data:`~kvattn.train.optim.MAX_LR`).
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
        ``torch.bfloat16`` or ``torch.float16`` (:data:`~kvattn.train.optim.AUTOCAST_DTYPES`).
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
        ``autocast_dtype`` not in :data:`~kvattn.train.optim.AUTOCAST_DTYPES`, ``progress`` not
        a bool, ``optimizer_state`` without ``state`` and ``param_groups`` or not this
        optimizer's), before any step; or ``loss_fn`` returned a tensor that is not 0-dim or does
        not require grad.
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
