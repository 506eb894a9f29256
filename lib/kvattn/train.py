"""One training loop for every experiment of Part I, plus the losses it is used with.

:func:`train` takes a model and a ``loss_fn(step) -> scalar tensor`` that draws its own batch, so
the same loop fits full-batch regression, the recall table and language modelling. It shows a
tqdm progress bar, records the loss curve, and stops with a clear error on a non-finite loss.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

from .data import RecallTask, RegressionTask, TokenData, lm_batch
from .lm import TinyLM, TinyLMConfig

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
    warmup: int = 0,
    schedule: str = "constant",
    min_lr_ratio: float = 0.1,
    grad_clip: float | None = None,
    eval_fn: Callable[[], float] | None = None,
    eval_every: int | None = None,
    callback: Callable[[int, nn.Module], None] | None = None,
    log_every: int = 1,
    progress: bool = True,
    desc: str | None = None,
) -> History:
    """Optimise ``model`` for ``steps`` steps of ``loss_fn``.

    Parameters
    ----------
    loss_fn:
        Called with the step index; returns the scalar loss to minimise (it samples its batch).
    optimizer:
        ``"adamw"`` (with ``betas``) or ``"sgd"`` (plain gradient descent: no momentum, so the
        conservation laws of gradient flow hold up to O(lr²)).
    schedule, warmup, min_lr_ratio:
        See :func:`lr_multiplier`.
    eval_fn, eval_every:
        If given, ``eval_fn()`` runs under ``torch.no_grad`` and in eval mode every ``eval_every``
        steps and after the last one.
    callback:
        ``callback(step, model)`` after each optimiser step (e.g. to record weights).

    Raises
    ------
    FloatingPointError
        The loss became NaN or infinite; the message names the step and the learning rate.
    """
    if steps < 1 or lr <= 0:
        raise ValueError(f"need steps >= 1 and lr > 0, got steps={steps}, lr={lr}")
    if not isinstance(log_every, int) or log_every < 1:
        raise ValueError(f"log_every must be a positive int, got {log_every!r}")
    if schedule not in ("constant", "cosine"):
        raise ValueError(f"schedule must be 'constant' or 'cosine', got {schedule!r}")
    params = [p for p in model.parameters() if p.requires_grad]
    if optimizer == "adamw":
        opt: torch.optim.Optimizer = torch.optim.AdamW(
            params, lr=lr, betas=betas, weight_decay=weight_decay
        )
    elif optimizer == "sgd":
        opt = torch.optim.SGD(params, lr=lr, weight_decay=weight_decay)
    else:
        raise ValueError(f"optimizer must be 'adamw' or 'sgd', got {optimizer!r}")
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: lr_multiplier(s, steps, warmup, schedule, min_lr_ratio)
    )
    history = History()

    def evaluate(step: int) -> None:
        model.eval()
        with torch.no_grad():
            history.eval_steps.append(step)
            history.evals.append(float(eval_fn()))
        model.train()

    model.train()
    bar = tqdm(range(steps), desc=desc, disable=not progress, mininterval=0.5)
    for step in bar:
        loss = loss_fn(step)
        if not torch.isfinite(loss):
            raise FloatingPointError(
                f"non-finite loss {loss.item()} at step {step} (lr {sched.get_last_lr()[0]:.3g}); "
                "lower the learning rate or add grad_clip"
            )
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if grad_clip is not None:
            nn.utils.clip_grad_norm_(params, grad_clip)
        opt.step()
        sched.step()
        if callback is not None:
            callback(step, model)
        if step % log_every == 0 or step == steps - 1:
            history.steps.append(step)
            history.loss.append(loss.item())
            bar.set_postfix(loss=f"{history.loss[-1]:.4f}", refresh=False)
        if eval_fn is not None and eval_every and (step + 1) % eval_every == 0 and step < steps - 1:
            evaluate(step)
    if eval_fn is not None:
        evaluate(steps - 1)
    model.eval()
    return history


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

    ``evals[s][i]`` is the validation loss of seed ``seeds[s]`` at step ``eval_steps[i]``.
    """

    seeds: list[int]
    eval_steps: list[int]
    evals: list[list[float]]
    n_params: int

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
) -> SeedRuns:
    """Train a fresh :class:`kvattn.lm.TinyLM` per seed, same recipe, recording validation loss.

    For seed s both the initialisation and the batch order are seeded with s, so two
    configurations run with the same seeds see the same batches: their per-seed differences are
    paired. Recipe: AdamW (wd 0.1), 10 % linear warm-up then cosine decay, grad-norm clip 1.
    ``progress`` shows a bar over the seeds.
    """
    if not seeds:
        raise ValueError("seeds must name at least one seed")
    runs: list[list[float]] = []
    eval_steps: list[int] = []
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
            progress=False,
        )
        runs.append(h.evals)
        eval_steps = h.eval_steps
    n_params = sum(p.numel() for p in model.parameters())
    return SeedRuns(list(seeds), eval_steps, runs, n_params)
