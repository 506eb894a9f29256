"""The losses and scores of the course's tasks, each as :func:`~kvattn.train.train` takes it:
full-batch regression, the recall table, and a small language model.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from ..data import RecallTask, RegressionTask, TokenData, lm_batch
from ..lm import TinyLM

Tensor = torch.Tensor


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
