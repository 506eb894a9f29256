"""Multi-seed language-model runs: one configuration trained on several paired seeds
(:func:`~kvattn.train.train_lm_seeds`, :class:`~kvattn.train.SeedRuns`).
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from tqdm.auto import tqdm

from .._checks import check_bool, check_device, check_int
from ..data import TokenData
from ..lm import TinyLM, TinyLMConfig
from .loop import train
from .optim import _check_lr, default_autocast
from .tasks import lm_eval_loss, lm_loss

Tensor = torch.Tensor


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
