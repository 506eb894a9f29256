"""The optimiser a run steps with: AdamW, the learning-rate schedule and its bound, the checks
of these settings, and the mixed-precision dtype.

:func:`~kvattn.train.train` and :class:`~kvattn.pretrain.PretrainConfig` share them: the bound
:data:`MAX_LR` and the checks (:func:`~kvattn.train.check_optimiser`), the optimiser
(:func:`~kvattn.train.adamw`), the schedule (:func:`~kvattn.train.lr_multiplier`) and the autocast
dtype a device gets (:func:`~kvattn.train.default_autocast`, one of :data:`AUTOCAST_DTYPES`).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .._checks import is_real

#: Learning rates must lie below this bound (train and PretrainConfig). It guards against typos
#: (1e39, 1e4, a rate given in percent), not against rates that are merely too high: AdamW moves
#: every weight by about the rate at each step whatever the gradient's size, so a rate of 10
#: throws weights initialised at O(0.1) a hundred times past their scale in one step (a tiny
#: PLDR-LLM's logits already overflow after one step at 9). Every rate the course uses lies far
#: below it: at most 3e-2 with AdamW (the collapse hunt) and 5e-2 with SGD (0.5 in a test).
MAX_LR = 10.0

#: The dtypes :func:`~kvattn.train.train` can autocast to (None: no autocast). torch itself only
#: warns about another one (int8, float32) and trains in float32, so it is refused.
AUTOCAST_DTYPES = (torch.bfloat16, torch.float16)


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
    a rate of :data:`~kvattn.train.optim.MAX_LR` or more would overflow inside AdamW."""
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
