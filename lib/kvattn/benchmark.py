"""Benchmark PLDR-LLM against a same-size GPT: training step time, generation speed per decoding
mode, peak memory. Everything is measured side by side and reported as ratios with their spread.

    python -m kvattn.benchmark                  # the course's tiny and a mid-size config
    python -m kvattn.benchmark --configs 110M   # the published size (on a GPU)
    python -m kvattn.benchmark --json out.json  # also write the numbers as JSON
    python -m kvattn.benchmark --compile        # also the training step under torch.compile
    python -m kvattn.benchmark --fused-adamw    # every model steps with the fused AdamW

How it measures. The variants being compared run *interleaved*: every round times each variant
once, in an order that rotates from round to round, and each ratio is taken within a round. A
busy machine slows all variants of one round alike, so the per-round ratios cancel most of the
load that absolute times would carry. Rounds go on until every ratio's interquartile range is
within ``target_spread`` of its median or the time budget ends; the report gives the median ratio,
its quartiles and the number of rounds.

Ratios reported, per configuration:

* training step time PLDR-LLM / GPT, and the metric learner's share of the PLDR step
  (1 − constant-G step / PLDR step), each beside the same ratio in FLOPs (PyTorch's FLOP counter:
  matrix products and attention, forward and backward) and in kernel calls (:class:`KernelCalls`:
  the operators an eager step runs, views excluded), and each model's achieved FLOP/s: a time
  ratio far above its FLOP ratio, towards its call ratio, means the extra work runs below the
  hardware's speed (many small kernels, each with a fixed cost), not that there is more of it;
* generation speed-ups of ``new_tokens`` new tokens over no cache (mode ``"none"``): the KV + G
  cache (``"kv+g"``) and the exact KV cache (``"kv"``), and the speed of PLDR-LLM with the KV + G
  cache over GPT with its KV cache, split at the constant-G model with its KV cache (which does
  per generated token exactly the work that the KV + G cache leaves: GPT's plus one ``q G_LM``
  product per layer), whose speed over GPT's is the best that ratio can reach;
* peak memory of each model: the most alive at once during the measured call, of what the
  model holds when it starts (weights, buffers, and for a training step the last step's
  gradients and AdamW's two moments per weight) and of what the call allocates (on CUDA from
  the allocator's statistics, elsewhere by :class:`TensorMemory`, which adds up the storages
  of the tensors alive at once);
* each model's achieved FLOP/s as a fraction of the FLOP/s that one large square matrix product
  reaches on the same device and dtype (:func:`matmul_rate`: the device's practical peak,
  measured, rather than a datasheet number);
* with :func:`bench_density`, the prefix-consistent density (one metric-learner pass per
  position) against the published block density: step time, FLOPs and peak memory.

Each ratio with a target of the course is printed with it and whether it is met (:data:`BARS`).
With ``compile=True`` (``--compile``) the training step is measured on ``torch.compile``-d models,
each one's compile time reported; with ``fused_adamw=True`` (``--fused-adamw``) every model steps
with PyTorch's fused AdamW kernel instead of training's default foreach one.

A ratio that cannot be right, or that did not settle, is *flagged* rather than printed as a
result: a share outside [0, 1] (impossible); a PLDR-LLM training step, or its generation with
the KV + G cache, faster than GPT's (implausible: it does all of GPT's work and more); a cache
slower than no cache (possible for a tiny model and a few tokens, where the per-token
bookkeeping outweighs the recomputation it saves, but suspicious); a ratio whose interquartile
range is wider than :data:`UNSTABLE_SPREAD` of its median.

The book's *Benchmarks* appendix runs :func:`bench_train` and :func:`bench_generate` cell by cell,
each within its time budget; chapter 9 runs :func:`bench_generate` on its trained model.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import statistics
import sys
import time
import weakref
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import FlopCounterMode

from ._checks import check_bool, check_int
from .config import PUBLISHED_110M, PLDRConfig
from .losses import lm_cross_entropy
from .pldr import GPT, PLDRLLM
from .train import adamw, default_autocast

CONFIGS = {
    "tiny": dict(
        vocab_size=1024,
        hidden_size=64,
        num_attention_heads=4,
        num_hidden_layers=2,
        num_reslayerA=2,
        num_denseA=2,
        max_position_embeddings=512,
    ),
    "mid": dict(
        vocab_size=8192,
        hidden_size=256,
        num_attention_heads=4,
        num_hidden_layers=4,
        num_reslayerA=4,
        num_denseA=2,
        max_position_embeddings=512,
    ),
    "110M": PUBLISHED_110M,
}

_clock = time.perf_counter  # the tests replace it with a fake clock

#: The course's targets, which the report checks where it prints each ratio. The PLDR / GPT step
#: time may be at most ``train_over_flops`` times the same ratio in FLOPs, the metric learner's
#: share of the time at most its share of the FLOPs plus ``share_over_flops``; decoding with the
#: KV + G cache must be at least ``kvg_over_none`` times as fast as without a cache, and PLDR with
#: it at least ``pldr_kvg_over_gpt_kv`` times as fast as GPT with its KV cache.
BARS = {
    "train_over_flops": 1.1,
    "share_over_flops": 0.10,
    "kvg_over_none": 5.0,
    "pldr_kvg_over_gpt_kv": 0.95,
}

#: A ratio whose interquartile range exceeds this fraction of its median is flagged unstable.
UNSTABLE_SPREAD = 0.2
#: A ratio measured in fewer rounds is flagged unstable, since its spread cannot be estimated.
MIN_ROUNDS_FOR_SPREAD = 3


@dataclass(frozen=True)
class Ratio:
    """A ratio of two variants' times, from paired rounds.

    ``median``, ``q1`` and ``q3`` are the median and quartiles of the per-round ratios;
    ``rounds`` how many rounds were timed; ``flag`` says why the ratio should not be trusted
    (``None`` when nothing is wrong with it).
    """

    median: float
    q1: float
    q3: float
    rounds: int
    flag: str | None = None

    @property
    def spread(self) -> float:
        """Interquartile range relative to the median (0.1 = the middle half within 10 %)."""
        return (self.q3 - self.q1) / abs(self.median) if self.median else float("inf")


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _quartiles(values: list[float]) -> tuple[float, float, float]:
    if len(values) == 1:
        return values[0], values[0], values[0]
    q1, median, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, median, q3


def _check_seconds(budget_s: float) -> None:
    # an infinite budget would leave a notebook cell unbounded, which the budget exists to prevent
    if (
        isinstance(budget_s, bool)
        or not isinstance(budget_s, int | float)
        or not (math.isfinite(budget_s) and budget_s > 0)
    ):
        raise ValueError(f"budget_s must be a positive number of seconds, got {budget_s!r}")


def _check_device(device: torch.device) -> None:
    if not isinstance(device, torch.device):
        raise TypeError(f"device must be a torch.device, got {type(device).__name__}")
    if device.type == "cuda":
        available = torch.cuda.is_available() and (device.index or 0) < torch.cuda.device_count()
    elif device.type == "mps":
        available = torch.backends.mps.is_available()
    elif device.type == "cpu":
        available = True
    else:
        raise ValueError(f"the benchmark runs on cpu, cuda or mps, got {device}")
    if not available:
        raise ValueError(f"device {device} is not available on this machine")


def _check_run(
    name: str, cfg: PLDRConfig, device: torch.device, budget_s: float, autocast: torch.dtype | None
) -> None:
    """What every measurement takes: a label, a configuration, a device, a budget, a dtype."""
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    if not isinstance(cfg, PLDRConfig):
        raise TypeError(f"cfg must be a PLDRConfig, got {type(cfg).__name__}")
    if cfg.vocab_size <= 4:
        raise ValueError(
            "random token ids are drawn from [4, vocab_size), above the special tokens: need "
            f"vocab_size > 4, got {cfg.vocab_size}"
        )
    _check_device(device)
    _check_seconds(budget_s)
    if autocast not in (None, torch.bfloat16, torch.float16):
        raise TypeError(
            f"autocast must be None (float32), torch.bfloat16 or torch.float16, got {autocast!r}"
        )


def _check_step(cfg: PLDRConfig, batch: int, seq: int) -> None:
    """A training step's shape: ``batch`` rows of ``seq`` inputs (``seq + 1`` ids, so that even
    ``seq = 1`` has a next token to predict) within the positions of ``cfg``."""
    check_int("batch", batch, low=1, typed=True)
    check_int("seq", seq, low=1, typed=True)
    if seq > cfg.max_position_embeddings:
        raise ValueError(
            f"seq = {seq} exceeds max_position_embeddings = {cfg.max_position_embeddings}"
        )


def _check_budget(budget_s: float, min_rounds: int, max_rounds: int, target_spread: float) -> None:
    _check_seconds(budget_s)
    if not (
        isinstance(min_rounds, int)
        and isinstance(max_rounds, int)
        and not isinstance(min_rounds, bool)
        and 1 <= min_rounds
    ):
        raise ValueError(
            f"need integers 1 <= min_rounds <= max_rounds, got {min_rounds}, {max_rounds}"
        )
    if max_rounds < min_rounds:
        raise ValueError(f"need min_rounds <= max_rounds, got {min_rounds} > {max_rounds}")
    if not target_spread > 0:
        raise ValueError(f"target_spread must be > 0, got {target_spread!r}")


def interleaved(
    variants: dict[str, Callable[[], object]],
    ratios: dict[str, tuple[str, str]],
    device: torch.device,
    *,
    budget_s: float,
    min_rounds: int = 5,
    max_rounds: int = 200,
    target_spread: float = 0.05,
) -> tuple[dict[str, list[float]], dict[str, Ratio]]:
    """Time ``variants`` interleaved, round after round, and summarise ``ratios`` of their times.

    Parameters
    ----------
    variants:
        Name → a function to time (called with no arguments; each is run once untimed first).
    ratios:
        Label → ``(a, b)``: the ratio time(a) / time(b), taken within each round.
    device:
        Where the variants run (CUDA is synchronised around every call).
    budget_s:
        Seconds after which no new round starts (the warm-up counts; a round that started goes to
        its end, so the overrun is at most one round).
    min_rounds, max_rounds:
        Rounds timed at least (unless the budget ends first) and at most.
    target_spread:
        Stop early once every ratio's interquartile range is within this fraction of its median.

    Returns
    -------
    (times, summary): each variant's times in seconds, one per round; each ratio as a
    :class:`Ratio` (not yet flagged: the caller knows what values are impossible).

    Raises
    ------
    ValueError
        On an empty ``variants``, a ratio naming an unknown variant, a bad budget, or a device
        that this machine does not have.
    TypeError
        A variant that is not callable, or a ``device`` that is not a ``torch.device``.
    """
    _check_budget(budget_s, min_rounds, max_rounds, target_spread)
    _check_device(device)
    if not variants:
        raise ValueError("variants is empty: nothing to time")
    for name, fn in variants.items():
        if not callable(fn):
            raise TypeError(f"variant {name!r} must be callable, got {type(fn).__name__}")
    for label, pair in ratios.items():
        unknown = [v for v in pair if v not in variants]
        if len(pair) != 2 or unknown:
            raise ValueError(f"ratio {label!r} must name two of {list(variants)}, got {pair!r}")
    start = _clock()
    for fn in variants.values():
        fn()
    names = list(variants)
    times: dict[str, list[float]] = {name: [] for name in names}

    def summarise(a: str, b: str) -> Ratio:
        q1, median, q3 = _quartiles([ta / tb for ta, tb in zip(times[a], times[b], strict=True)])
        return Ratio(median, q1, q3, len(times[a]))

    for r in range(max_rounds):
        if r >= 1 and _clock() - start >= budget_s:
            break
        for name in names[r % len(names) :] + names[: r % len(names)]:
            _sync(device)
            t0 = _clock()
            variants[name]()
            _sync(device)
            times[name].append(_clock() - t0)
        if r + 1 >= min_rounds and all(
            summarise(a, b).spread <= target_spread for a, b in ratios.values()
        ):
            break
    return times, {label: summarise(a, b) for label, (a, b) in ratios.items()}


def flagged(ratio: Ratio, problem: str | None) -> Ratio:
    """``ratio`` with ``problem`` as its flag, or an *unstable* flag when fewer than
    :data:`MIN_ROUNDS_FOR_SPREAD` rounds fit in the budget (no spread can be estimated) or its
    spread exceeds :data:`UNSTABLE_SPREAD`; an impossible value takes precedence."""
    if problem is None and ratio.rounds < MIN_ROUNDS_FOR_SPREAD:
        problem = (
            f"unstable: only {ratio.rounds} round(s) fit in the time budget, too few to tell a "
            "ratio from noise (a busy machine, or a larger budget needed)"
        )
    if problem is None and ratio.spread > UNSTABLE_SPREAD:
        problem = (
            f"unstable: the middle half of {ratio.rounds} rounds spans {ratio.spread:.0%} of the "
            "median (a busy machine?)"
        )
    return Ratio(ratio.median, ratio.q1, ratio.q3, ratio.rounds, problem)


class TensorMemory(TorchDispatchMode):
    """Peak bytes of tensor storage alive at once while the mode is active, on any device.

    Every storage that an operation returns is counted once (views and in-place results share
    it) from its creation until it is freed, and so is every storage of the ``resident`` tensors
    given (those made before, such as weights, gradients and optimiser state) from the start
    until it is freed; ``peak`` is the largest total seen, ``live`` the total now. Storages that
    existed before and are not in ``resident`` are not counted. Allocator caching and
    fragmentation are not seen: on CUDA the allocator's own statistics say more.
    """

    def __init__(self, resident: Iterable[torch.Tensor] = ()) -> None:
        super().__init__()
        self.live = 0
        self.peak = 0
        self._seen: set[tuple[str, int]] = set()
        for t in resident:
            self._track(t)

    def _track(self, t: torch.Tensor) -> None:
        storage = t.untyped_storage()
        key = (str(t.device), storage.data_ptr())
        nbytes = storage.nbytes()
        if nbytes == 0 or key in self._seen:
            return
        self._seen.add(key)
        self.live += nbytes
        self.peak = max(self.peak, self.live)
        weakref.finalize(storage, self._free, key, nbytes)

    def _free(self, key: tuple[str, int], nbytes: int) -> None:
        self._seen.discard(key)
        self.live -= nbytes

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                self._track(t)
        return out


class KernelCalls(TorchDispatchMode):
    """Counts the ATen operators that run while the mode is active, views excluded: a view only
    relabels a storage, every other operator is a kernel call of its own. Each call pays a fixed
    cost (dispatch, and on a GPU a launch) whatever its size, which the FLOP counter does not
    see; a model of many small operations can spend more time on calls than on arithmetic.
    ``calls`` is the count so far.
    """

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not func.is_view:
            self.calls += 1
        return func(*args, **(kwargs or {}))


def _peak_memory(
    model: torch.nn.Module,
    fn: Callable[[], object],
    device: torch.device,
    optimizer: torch.optim.Optimizer | None = None,
) -> float:
    """Peak memory of ``fn()`` in MiB attributable to ``model``: what is resident when the call
    starts (its parameters, buffers and gradients, and ``optimizer``'s state on ``device``, for
    AdamW two moments per parameter), for as long as it stays alive, plus what the call
    allocates (saved activations, new gradients, temporaries). A training step frees the last
    step's gradients only after its forward pass, so both sets can be alive at once, as in
    training. CUDA: the allocator's statistics; elsewhere :class:`TensorMemory`."""
    state = []
    if optimizer is not None:
        state = [
            t
            for s in optimizer.state.values()
            for t in s.values()
            if torch.is_tensor(t) and t.device.type == device.type  # not foreach's CPU steps
        ]
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    resident = [*model.parameters(), *model.buffers(), *grads, *state]
    if device.type == "cuda":
        own = TensorMemory(resident).live  # each storage once, as counted on the CPU
        _sync(device)
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        fn()
        _sync(device)
        return (own + torch.cuda.max_memory_allocated(device) - before) / 2**20
    with TensorMemory(resident) as memory:
        fn()
    return memory.peak / 2**20


def matmul_rate(
    device: torch.device, dtype: torch.dtype = torch.float32, *, n: int | None = None
) -> float:
    """FLOP/s of one large ``n × n`` matrix product on ``device`` in ``dtype``: the practical peak
    that the models' achieved FLOP/s are compared with. The fastest of 10 products after a
    warm-up (a peak: load only ever slows a product down).

    ``n`` defaults to 1024 on the CPU and 8192 on a GPU (large enough to reach the device's
    matrix-unit speed, small enough to take well under a second each).

    Raises
    ------
    TypeError
        ``device`` not a ``torch.device``, ``dtype`` not a floating dtype, ``n`` not an int.
    ValueError
        ``n`` < 1, or a device that this machine does not have.
    """
    _check_device(device)
    if not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
        raise TypeError(f"dtype must be a floating torch.dtype, got {dtype!r}")
    if n is None:
        n = 1024 if device.type == "cpu" else 8192
    check_int("n", n, low=1, typed=True)
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    times = []
    for i in range(11):
        _sync(device)
        t0 = _clock()
        a @ b
        _sync(device)
        elapsed = _clock() - t0
        if i:  # the first is the warm-up
            times.append(elapsed)
    return 2 * n**3 / min(times)


def _step_counts(step: Callable[[], object]) -> tuple[int, int]:
    """FLOPs of one call of ``step`` as PyTorch's FLOP counter sees them (matrix products and
    attention, forward and backward; element-wise work is not counted), and its kernel calls
    (:class:`KernelCalls`). The counted call is the second: the first also creates what the
    optimiser keeps for every parameter, work that a training step does not repeat."""
    step()
    with FlopCounterMode(display=False) as counter, KernelCalls() as calls:
        step()
    return counter.get_total_flops(), calls.calls


def _models(cfg: PLDRConfig, device: torch.device) -> dict[str, torch.nn.Module]:
    torch.manual_seed(0)
    return {
        "pldr": PLDRLLM(cfg).to(device),
        "constant_g": PLDRLLM(
            PLDRConfig.from_dict({**cfg.to_dict(), "custom_G_type": "identity"})
        ).to(device),
        "gpt": GPT(cfg).to(device),
    }


def _autocast(device: torch.device, dtype: torch.dtype | None) -> dict:
    return dict(device_type=device.type, dtype=dtype or torch.float32, enabled=dtype is not None)


def _header(name: str, cfg: PLDRConfig, device: torch.device, models: dict, dtype) -> dict:
    return {
        "config": name,
        "device": str(device),
        "autocast": str(dtype).removeprefix("torch.") if dtype else "none (float32)",
        "parameters": {k: m.num_parameters() for k, m in models.items()},
        "tensors": {k: len(list(m.parameters())) for k, m in models.items()},
        "threads": torch.get_num_threads() if device.type == "cpu" else None,
    }


def _train_step(
    model,
    ids: torch.Tensor,
    device: torch.device,
    autocast,
    compiled: bool,
    fused_adamw: bool = False,
) -> tuple[Callable[[], None], torch.optim.Optimizer]:
    """One training step of ``model`` on ``ids`` as a function of no arguments, and the AdamW
    optimiser it steps."""
    forward = torch.compile(model) if compiled else model
    opt = adamw(list(model.parameters()), lr=1e-4, fused=fused_adamw)  # as training makes it

    def step():
        with torch.autocast(**_autocast(device, autocast)):
            loss = lm_cross_entropy(forward(ids[:, :-1]).logits, ids[:, 1:])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step, opt


def bench_train(
    name: str,
    cfg: PLDRConfig,
    device: torch.device,
    *,
    batch: int = 8,
    seq: int = 128,
    budget_s: float = 60.0,
    autocast: torch.dtype | None = None,
    compile: bool = False,
    fused_adamw: bool = False,
) -> dict:
    """Training step (forward, backward, AdamW) of PLDR-LLM, its constant-G model and GPT.

    ``batch`` × ``seq`` random token ids per step; ``autocast`` a dtype for ``torch.autocast`` or
    ``None`` for float32 (use :func:`kvattn.train.default_autocast`, as training does);
    ``compile`` times ``torch.compile``-d models (FLOPs and memory are those of the plain ones);
    ``fused_adamw`` steps every model with PyTorch's fused AdamW kernel instead of the course's
    default foreach one (:func:`kvattn.train.adamw`; ``PretrainConfig(fused_adamw=True)``).

    Returns a dict: the ``optimizer`` kernel (``"foreach"`` or ``"fused"``),
    ``train_pldr_over_gpt`` and ``metric_learner_share`` as :class:`Ratio`, the
    median step times ``train_step_s``, FLOPs per step ``train_flops`` and their ratios, kernel
    calls per step of the plain models ``train_calls`` (:class:`KernelCalls`) with the same
    ratios (``train_calls_pldr_over_gpt``, ``metric_learner_call_share``),
    achieved FLOP/s ``train_flop_per_s`` (and the metric learner's own, from the PLDR and
    constant-G differences), the same as fractions of :func:`matmul_rate`
    (``train_matmul_fraction``), ``train_peak_mib``, and with ``compile`` the seconds each
    model's first step took beyond a compiled step (``compile_s``).

    Raises
    ------
    TypeError
        An argument of the wrong type (``device`` must be a ``torch.device``, ``autocast``
        ``None``, ``torch.bfloat16`` or ``torch.float16``).
    ValueError
        ``batch`` or ``seq`` < 1, ``seq`` beyond ``max_position_embeddings``, a budget that is
        not a positive finite number of seconds, ``vocab_size`` <= 4, or a device that this
        machine does not have. All is checked before any model is built.
    """
    _check_run(name, cfg, device, budget_s, autocast)
    _check_step(cfg, batch, seq)
    check_bool("compile", compile, typed=True)
    check_bool("fused_adamw", fused_adamw, typed=True)
    models = _models(cfg, device)
    out = _header(name, cfg, device, models, autocast)
    out.update(
        batch=batch, seq=seq, compiled=compile, optimizer="fused" if fused_adamw else "foreach"
    )
    ids = torch.randint(4, cfg.vocab_size, (batch, seq + 1), device=device)
    plain, optimizers = {}, {}
    for k, m in models.items():
        plain[k], optimizers[k] = _train_step(m, ids, device, autocast, False, fused_adamw)
    counts = {k: _step_counts(fn) for k, fn in plain.items()}
    flops = {k: c[0] for k, c in counts.items()}
    steps = plain
    first_s = {}
    if compile:
        steps = {
            k: _train_step(m, ids, device, autocast, True, fused_adamw)[0]
            for k, m in models.items()
        }
        for k, fn in steps.items():
            _sync(device)
            t0 = _clock()
            fn()
            _sync(device)
            first_s[k] = _clock() - t0
    times, ratios = interleaved(
        steps,
        {"pldr/gpt": ("pldr", "gpt"), "constant_g/pldr": ("constant_g", "pldr")},
        device,
        budget_s=budget_s,
    )
    over_gpt = ratios["pldr/gpt"]
    out["train_pldr_over_gpt"] = flagged(
        over_gpt,
        "implausible: PLDR-LLM's step does all of GPT's work and more, yet took less time"
        if over_gpt.median < 1
        else None,
    )
    c = ratios["constant_g/pldr"]  # share = 1 − c: the quartiles swap
    share = Ratio(1 - c.median, 1 - c.q3, 1 - c.q1, c.rounds)
    out["metric_learner_share"] = flagged(
        share,
        f"impossible: a share must lie in [0, 1], measured {share.median:.1%}"
        if not 0 <= share.median <= 1
        else None,
    )
    step_s = {k: statistics.median(v) for k, v in times.items()}
    out["train_step_s"] = step_s
    if compile:
        out["compile_s"] = {k: max(first_s[k] - step_s[k], 0.0) for k in models}
    out["train_flops"] = flops
    out["train_flops_pldr_over_gpt"] = flops["pldr"] / flops["gpt"]
    out["metric_learner_flop_share"] = 1 - flops["constant_g"] / flops["pldr"]
    out["train_calls"] = {k: c[1] for k, c in counts.items()}
    out["train_calls_pldr_over_gpt"] = counts["pldr"][1] / counts["gpt"][1]
    out["metric_learner_call_share"] = 1 - counts["constant_g"][1] / counts["pldr"][1]
    rates = {k: flops[k] / step_s[k] for k in models}
    extra_s = step_s["pldr"] - step_s["constant_g"]
    # the metric learner's own rate: its FLOPs over the time it adds (None if it added none)
    rates["metric learner"] = (
        (flops["pldr"] - flops["constant_g"]) / extra_s if extra_s > 0 else None
    )
    out["train_flop_per_s"] = rates
    out["matmul_flop_per_s"] = matmul_rate(device, autocast or torch.float32)
    out["train_matmul_fraction"] = {
        k: v / out["matmul_flop_per_s"] if v is not None else None for k, v in rates.items()
    }
    out["train_peak_mib"] = {
        k: _peak_memory(models[k], plain[k], device, optimizers[k]) for k in models
    }
    return out


def bench_density(
    name: str,
    cfg: PLDRConfig,
    device: torch.device,
    *,
    batch: int = 8,
    seq: int = 128,
    budget_s: float = 60.0,
    autocast: torch.dtype | None = None,
) -> dict:
    """Training step of PLDR-LLM with the prefix-consistent density (``density="prefix"``: one
    density, hence one metric-learner pass, per position) against the published block density,
    on the same weights.

    Returns a dict: ``prefix_over_block`` (a :class:`Ratio` of step times), the same ratio in
    FLOPs (``prefix_flops_over_block``), median step times ``density_step_s`` and peak memory
    ``density_peak_mib`` of both. The prefix density multiplies the metric learner's work and
    its saved activations by ``seq``: use a small configuration.

    Raises ``TypeError``/``ValueError`` for bad arguments, as :func:`bench_train` does, before
    any model is built.
    """
    _check_run(name, cfg, device, budget_s, autocast)
    _check_step(cfg, batch, seq)
    torch.manual_seed(0)
    block = PLDRLLM(PLDRConfig.from_dict({**cfg.to_dict(), "density": "block"})).to(device)
    prefix = PLDRLLM(PLDRConfig.from_dict({**cfg.to_dict(), "density": "prefix"})).to(device)
    prefix.load_state_dict(block.state_dict())
    models = {"block": block, "prefix": prefix}
    out = _header(name, cfg, device, models, autocast)
    out.update(batch=batch, seq=seq)
    ids = torch.randint(4, cfg.vocab_size, (batch, seq + 1), device=device)
    steps, optimizers = {}, {}
    for k, m in models.items():
        steps[k], optimizers[k] = _train_step(m, ids, device, autocast, False)
    flops = {k: _step_counts(fn)[0] for k, fn in steps.items()}
    times, ratios = interleaved(
        steps, {"prefix/block": ("prefix", "block")}, device, budget_s=budget_s
    )
    r = ratios["prefix/block"]
    out["prefix_over_block"] = flagged(
        r,
        "implausible: the prefix density does the block density's work and more"
        if r.median < 1
        else None,
    )
    out["prefix_flops_over_block"] = flops["prefix"] / flops["block"]
    out["density_step_s"] = {k: statistics.median(v) for k, v in times.items()}
    out["density_peak_mib"] = {
        k: _peak_memory(models[k], steps[k], device, optimizers[k]) for k in models
    }
    return out


def bench_generate(
    name: str,
    cfg: PLDRConfig,
    device: torch.device,
    *,
    prompt_len: int = 64,
    new_tokens: int = 256,
    budget_s: float = 60.0,
    autocast: torch.dtype | None = None,
    model: PLDRLLM | None = None,
) -> dict:
    """Greedy generation of ``new_tokens`` tokens after a ``prompt_len``-token random prompt, by
    PLDR-LLM in modes ``"none"``, ``"kv"``, ``"kv+g"``, by GPT with its KV cache and by the
    constant-G model with its KV cache.

    The constant-G model attends with a fixed G_LM: per token it does GPT's work plus one
    ``q G_LM`` product per layer, which is what the KV + G cache leaves of PLGA's work once the
    prompt's pass (the only one through the metric learner) is done. As speeds multiply,
    ``pldr_kvg_over_gpt_kv`` = ``pldr_kvg_over_constant_g_kv`` × ``constant_g_kv_over_gpt_kv``
    (exactly within each round, nearly for the medians); the first factor is at most 1 in work
    (noise can lift the measured one a little above), near 1 when the cache leaves nothing but
    that product and the prompt's pass, so the second is the *ceiling* of
    ``pldr_kvg_over_gpt_kv``: the best any implementation of the cache can reach without a
    cheaper product. Either factor is flagged implausible when the middle half of its
    rounds lies above 1 (for ratios near 1 by design, a median above 1 is noise half the time).

    ``model`` measures a given (e.g. trained) PLDR-LLM instead of a fresh one of ``cfg``; GPT
    and the constant-G model are always fresh ones of the same configuration. Returns a dict
    with the speed-ups ``kvg_over_none``, ``kv_over_none``, ``pldr_kvg_over_gpt_kv``,
    ``pldr_kvg_over_constant_g_kv`` and ``constant_g_kv_over_gpt_kv`` as :class:`Ratio` (as
    speed ratios: above 1 means faster; the first two from rounds of the three PLDR modes within
    a third of ``budget_s``, the last three from rounds of the three cached decoders alone
    within the rest, since ratios near 1 need the most rounds), ``generate_tokens_per_s`` (new
    tokens over the median time of a whole ``generate`` call, the prompt's pass included) and
    ``generate_peak_mib``.

    Raises
    ------
    TypeError
        An argument of the wrong type, as for :func:`bench_train`, or a ``model`` that is not a
        :class:`~kvattn.pldr.PLDRLLM`.
    ValueError
        ``prompt_len`` or ``new_tokens`` < 1; the prompt and the new tokens do not fit in
        ``max_position_embeddings`` (of ``cfg``, and of ``model``'s configuration); ``model``
        has a smaller vocabulary than ``cfg`` (the prompt's ids come from ``cfg``) or lies on
        another device; a bad budget, vocabulary or device as for :func:`bench_train`. All is
        checked before any model is built.
    """
    _check_run(name, cfg, device, budget_s, autocast)
    check_int("prompt_len", prompt_len, low=1, typed=True)
    check_int("new_tokens", new_tokens, low=1, typed=True)
    if prompt_len + new_tokens > cfg.max_position_embeddings:
        raise ValueError(
            f"prompt_len + new_tokens = {prompt_len + new_tokens} exceeds "
            f"max_position_embeddings = {cfg.max_position_embeddings}"
        )
    if model is not None:
        if not isinstance(model, PLDRLLM):
            raise TypeError(f"model must be a PLDRLLM or None, got {type(model).__name__}")
        own = model.config
        if prompt_len + new_tokens > own.max_position_embeddings:
            raise ValueError(
                f"prompt_len + new_tokens = {prompt_len + new_tokens} exceeds the model's "
                f"max_position_embeddings = {own.max_position_embeddings}"
            )
        if own.vocab_size < cfg.vocab_size:
            raise ValueError(
                f"the model's vocab_size = {own.vocab_size} is smaller than cfg's "
                f"{cfg.vocab_size}: the prompt's ids are drawn from cfg's"
            )
        where = next(model.parameters()).device
        if where.type != device.type or (device.index is not None and where != device):
            raise ValueError(f"the model is on {where}, not on {device}")
    models = _models(cfg, device)
    if model is not None:
        models["pldr"] = model
    out = _header(name, cfg, device, {k: models[k] for k in ("pldr", "gpt")}, autocast)
    out.update(prompt_len=prompt_len, new_tokens=new_tokens)
    prompt = torch.randint(4, cfg.vocab_size, (1, prompt_len), device=device)

    def generate(m, cache):
        def run():
            with torch.autocast(**_autocast(device, autocast)):
                m.generate(prompt, new_tokens, cache=cache)

        return run

    runs = {
        "pldr none": (models["pldr"], generate(models["pldr"], "none")),
        "pldr kv": (models["pldr"], generate(models["pldr"], "kv")),
        "pldr kv+g": (models["pldr"], generate(models["pldr"], "kv+g")),
        "gpt kv": (models["gpt"], generate(models["gpt"], "kv")),
        "constant-G kv": (models["constant_g"], generate(models["constant_g"], "kv")),
    }
    # Speed ratio a over b = time(b) / time(a). The cached decoders are compared in rounds of
    # their own: a round that also ran "none" (several times slower) would give them far fewer
    # rounds, and the ratio that is closest to 1 needs the most.
    times, ratios = interleaved(
        {k: runs[k][1] for k in ("pldr none", "pldr kv", "pldr kv+g")},
        {"kv+g/none": ("pldr none", "pldr kv+g"), "kv/none": ("pldr none", "pldr kv")},
        device,
        budget_s=budget_s / 3,
    )
    cached_times, cached = interleaved(
        {k: runs[k][1] for k in ("pldr kv+g", "gpt kv", "constant-G kv")},
        {
            "pldr kv+g/gpt kv": ("gpt kv", "pldr kv+g"),
            "pldr kv+g/constant-G kv": ("constant-G kv", "pldr kv+g"),
            "constant-G kv/gpt kv": ("gpt kv", "constant-G kv"),
        },
        device,
        budget_s=budget_s * 2 / 3,
    )
    ratios.update(cached)
    times = {**times, "pldr kv+g": times["pldr kv+g"] + cached_times["pldr kv+g"]}
    times["gpt kv"] = cached_times["gpt kv"]
    times["constant-G kv"] = cached_times["constant-G kv"]
    slower = (
        "a cache slower than no cache: suspicious; at this size the per-token bookkeeping can "
        "outweigh the recomputation it saves (more new tokens, or a quieter machine, will tell)"
    )
    out["kvg_over_none"] = flagged(
        ratios["kv+g/none"], slower if ratios["kv+g/none"].median < 1 else None
    )
    out["kv_over_none"] = flagged(
        ratios["kv/none"], slower if ratios["kv/none"].median < 1 else None
    )
    over_gpt = ratios["pldr kv+g/gpt kv"]
    out["pldr_kvg_over_gpt_kv"] = flagged(
        over_gpt,
        "implausible: PLDR-LLM with a cached G does all of GPT's work and more, yet ran faster"
        if over_gpt.median > 1
        else None,
    )
    for key, name, more in (
        ("pldr_kvg_over_constant_g_kv", "pldr kv+g/constant-G kv", "PLDR-LLM with a cached G"),
        ("constant_g_kv_over_gpt_kv", "constant-G kv/gpt kv", "the constant-G model"),
    ):
        factor = ratios[name]
        out[key] = flagged(
            factor,
            f"implausible: {more} does all of the other's work and more, yet ran faster in "
            "most rounds"
            if factor.q1 > 1
            else None,
        )
    out["generate_tokens_per_s"] = {k: new_tokens / statistics.median(v) for k, v in times.items()}
    out["generate_peak_mib"] = {k: _peak_memory(m, fn, device) for k, (m, fn) in runs.items()}
    return out


def _line(label: str, r: Ratio, note: str = "") -> str:
    value = f"{r.median:6.1%}" if "share" in label else f"{r.median:6.2f}x"
    quart = f"[{r.q1:.1%}, {r.q3:.1%}]" if "share" in label else f"[{r.q1:.2f}, {r.q3:.2f}]"
    line = f"{label:38s} {value}  middle half {quart}, {r.rounds} rounds{note}"
    return line + (f"\n{'':38s} ⚠ {r.flag}" if r.flag else "")


def _verdict(met: bool, bar: str) -> str:
    return f"  (bar {bar}: {'met' if met else 'NOT met'})"


def _rates(label: str, rates: dict, fractions: dict) -> str:
    parts = [
        f"{k} {v / 1e9:.1f} ({fractions[k]:.0%})" if v is not None else f"{k} -"
        for k, v in rates.items()
    ]
    line = f"  {label}: " + ", ".join(parts)
    if any(f is not None and f > 1 for f in fractions.values()):
        line += (
            f"\n{'':38s} ⚠ impossible: a model faster than one large matrix product; the "
            "reference product was slowed down (a busy machine?)"
        )
    return line


def report(r: dict) -> str:
    """A plain-text summary of a :func:`bench_train`, :func:`bench_generate` or
    :func:`bench_density` result (or several merged); flagged ratios carry a ⚠ line saying what
    is wrong with them, and ratios with a target in :data:`BARS` say whether it is met."""
    tensors = r.get("tensors", {})  # records made before the count lack it
    threads = f", {r['threads']} threads" if r.get("threads") else ""
    lines = [
        f"== {r['config']} on {r['device']}{threads}, autocast {r['autocast']} (parameters "
        + ", ".join(
            f"{k} {v:,}" + (f" in {tensors[k]} tensors" if k in tensors else "")
            for k, v in r["parameters"].items()
        )
        + ")"
    ]
    if "train_pldr_over_gpt" in r:
        flop_ratio = r["train_flops_pldr_over_gpt"]
        flop_share = r["metric_learner_flop_share"]
        time_bar = BARS["train_over_flops"] * flop_ratio
        share_bar = flop_share + BARS["share_over_flops"]
        calls = "train_calls" in r  # records made before the count lack it
        in_calls = f"{'    the same in kernel calls (eager)':38s} "
        lines += [
            f"train{' (compiled)' if r.get('compiled') else ''} (batch {r['batch']} x "
            f"{r['seq']} tokens, AdamW {r.get('optimizer', 'kernel not recorded')}; "
            f"medians {r['train_step_s']['pldr'] * 1e3:.1f} ms PLDR, "
            f"{r['train_step_s']['gpt'] * 1e3:.1f} ms GPT)",
            _line(
                "  step time PLDR / GPT",
                r["train_pldr_over_gpt"],
                _verdict(r["train_pldr_over_gpt"].median <= time_bar, f"<= {time_bar:.2f}x"),
            ),
            f"{'    the same in FLOPs':38s} {flop_ratio:6.2f}x",
            *([in_calls + f"{r['train_calls_pldr_over_gpt']:6.2f}x"] if calls else []),
            _line(
                "  metric learner's share",
                r["metric_learner_share"],
                _verdict(r["metric_learner_share"].median <= share_bar, f"<= {share_bar:.1%}"),
            ),
            f"{'    the same in FLOPs':38s} {flop_share:6.1%}",
            *([in_calls + f"{r['metric_learner_call_share']:6.1%}"] if calls else []),
            _rates(
                f"achieved GFLOP/s (% of a {r['matmul_flop_per_s'] / 1e9:.0f} GFLOP/s large "
                "matmul)",
                r["train_flop_per_s"],
                r["train_matmul_fraction"],
            ),
        ]
        if r.get("compile_s"):
            lines.append(
                "  compile time (s): "
                + ", ".join(f"{k} {v:.1f}" for k, v in r["compile_s"].items())
            )
    if "kvg_over_none" in r:
        kvg, over_gpt = r["kvg_over_none"], r["pldr_kvg_over_gpt_kv"]
        lines += [
            f"generate ({r['new_tokens']} tokens after a {r['prompt_len']}-token prompt; "
            "new tokens/s, prompt's pass included: "
            + ", ".join(f"{k} {v:.0f}" for k, v in r["generate_tokens_per_s"].items())
            + ")",
            _line(
                "  speed kv+g / no cache",
                kvg,
                _verdict(kvg.median >= BARS["kvg_over_none"], f">= {BARS['kvg_over_none']:g}x"),
            ),
            _line("  speed kv / no cache", r["kv_over_none"]),
            _line(
                "  speed PLDR kv+g / GPT kv",
                over_gpt,
                _verdict(
                    over_gpt.median >= BARS["pldr_kvg_over_gpt_kv"],
                    f">= {BARS['pldr_kvg_over_gpt_kv']:g}x",
                ),
            ),
        ]
        if "constant_g_kv_over_gpt_kv" in r:  # records made before it lack the split
            ceiling = r["constant_g_kv_over_gpt_kv"]
            below = ceiling.median < BARS["pldr_kvg_over_gpt_kv"]
            lines += [
                _line("    = PLDR kv+g / constant-G kv", r["pldr_kvg_over_constant_g_kv"]),
                _line(
                    "    x constant-G kv / GPT kv (ceiling)",
                    ceiling,
                    "  (below the bar on this run: no KV + G cache could meet it)" if below else "",
                ),
            ]
    if "prefix_over_block" in r:
        lines += [
            f"density (batch {r['batch']} x {r['seq']} tokens; medians "
            + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in r["density_step_s"].items())
            + ")",
            _line("  step time prefix / block", r["prefix_over_block"]),
            f"{'    the same in FLOPs':38s} {r['prefix_flops_over_block']:6.2f}x",
            "  peak memory (MiB): "
            + ", ".join(f"{k} {v:.0f}" for k, v in r["density_peak_mib"].items()),
        ]
    for key, what in (("train_peak_mib", "training step"), ("generate_peak_mib", "generation")):
        if r.get(key):
            lines.append(
                f"peak memory of a {what} (MiB): "
                + ", ".join(f"{k} {v:.1f}" for k, v in r[key].items())
            )
    return "\n".join(lines)


def as_json(r: dict) -> dict:
    """``r`` with every :class:`Ratio` as a plain dict (for ``json.dumps``)."""
    return {k: asdict(v) if isinstance(v, Ratio) else v for k, v in r.items()}


def machine(device: torch.device) -> dict:
    """Where a run was measured: the processor, its core count, the GPU's name (CUDA), the
    operating system, torch's version and the date (UTC)."""
    cpu = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        names = [
            line.split(":", 1)[1].strip()
            for line in cpuinfo.read_text().splitlines()
            if line.startswith("model name")
        ]
        cpu = names[0] if names else cpu
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        "os": platform.platform(),
        "torch": torch.__version__,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
    }


def load_results(path: str | Path) -> tuple[dict, list[dict]]:
    """Read a ``--json`` record: ``(machine, results)``, each result with its ratios as
    :class:`Ratio` again, so that :func:`report` prints it as it printed the live run.

    Raises
    ------
    ValueError
        The file is not such a record (no ``results`` list, or a result without ``config``).
    """
    data = json.loads(Path(path).read_text())
    if not isinstance(data, dict) or not isinstance(data.get("results"), list):
        raise ValueError(f"{path}: not a benchmark record (expected a 'results' list)")
    results = []
    for r in data["results"]:
        if not isinstance(r, dict) or "config" not in r:
            raise ValueError(f"{path}: every result needs a 'config', got {r!r:.80}")
        results.append(
            {
                k: Ratio(**v) if isinstance(v, dict) and set(v) == _RATIO_FIELDS else v
                for k, v in r.items()
            }
        )
    return data.get("machine", {"torch": data.get("torch")}), results


_RATIO_FIELDS = {"median", "q1", "q3", "rounds", "flag"}


def _int_at_least(minimum: int, why: str = "") -> Callable[[str], int]:
    """An argparse type: an int >= ``minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}{why}, got {value}")
        return value

    return parse


def _seconds(text: str) -> float:
    """An argparse type: a positive, finite number of seconds."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text!r}")
    return value


def _device(text: str) -> torch.device:
    """An argparse type: a device that this machine has."""
    try:
        device = torch.device(text)
    except RuntimeError:
        raise argparse.ArgumentTypeError(
            f"expected a torch device (cpu, cuda, cuda:1, mps), got {text!r}"
        ) from None
    try:
        _check_device(device)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return device


def main(argv: list[str] | None = None) -> int:
    """Command line: ``python -m kvattn.benchmark [--configs ...] [--json FILE]``.

    Every argument is checked against every configuration it will be used with, and the
    ``--json`` file's folder, before anything is measured: a bad one exits with a usage error
    (exit code 2). ``--json`` never replaces an existing file unless ``--overwrite`` is given.
    """
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--configs", nargs="+", default=["tiny", "mid"], choices=list(CONFIGS))
    parser.add_argument(
        "--device", type=_device, default="cuda" if torch.cuda.is_available() else "cpu"
    )
    parser.add_argument("--batch", type=_int_at_least(1), default=8)
    parser.add_argument(
        "--seq",
        type=_int_at_least(2, " (the generation prompt is --seq // 2 tokens)"),
        default=128,
    )
    parser.add_argument("--new-tokens", type=_int_at_least(1), default=256)
    parser.add_argument(
        "--budget", type=_seconds, default=60.0, help="seconds per measurement (default 60)"
    )
    parser.add_argument("--no-amp", action="store_true", help="float32 even where bf16 is native")
    parser.add_argument(
        "--compile",
        action="store_true",
        help="also time the training step of torch.compile-d models (reports compile times)",
    )
    parser.add_argument(
        "--fused-adamw",
        action="store_true",
        help="step every model with PyTorch's fused AdamW kernel (default: foreach, as training)",
    )
    parser.add_argument(
        "--density-configs",
        nargs="*",
        default=["tiny"],
        choices=list(CONFIGS),
        help="configs whose prefix density is measured against the block density (default tiny; "
        "the prefix density's memory grows with seq: keep it small)",
    )
    parser.add_argument("--json", type=Path, help="write the results as JSON")
    parser.add_argument(
        "--overwrite", action="store_true", help="let --json replace an existing file"
    )
    args = parser.parse_args(argv)
    device = args.device
    dtype = None if args.no_amp else default_autocast(device)
    prompt_len = args.seq // 2
    for name in args.configs:
        cfg = PLDRConfig(**CONFIGS[name])
        try:
            _check_run(name, cfg, device, args.budget, dtype)
            _check_step(cfg, args.batch, args.seq)
        except (TypeError, ValueError) as err:
            parser.error(f"config {name!r}: {err}")
        if prompt_len + args.new_tokens > cfg.max_position_embeddings:
            parser.error(
                f"--seq {args.seq} with --new-tokens {args.new_tokens} does not fit config "
                f"{name!r}: the prompt (--seq // 2 = {prompt_len} tokens) and the new tokens "
                f"exceed max_position_embeddings = {cfg.max_position_embeddings}"
            )
    if args.json is not None:
        folder = args.json.parent
        if args.json.is_dir():
            parser.error(f"--json {args.json} is a folder, expected a file to write")
        if not folder.is_dir():
            parser.error(f"--json {args.json}: the folder {folder} does not exist")
        if args.json.exists() and not args.overwrite:
            parser.error(f"--json {args.json} exists: pass --overwrite to replace it")
        if not os.access(folder, os.W_OK):
            parser.error(f"--json {args.json}: the folder {folder} is not writable")
    results = []
    common = dict(budget_s=args.budget, autocast=dtype)  # every measurement's
    step = dict(batch=args.batch, seq=args.seq, **common)  # the training steps'
    for name in args.configs:
        cfg = PLDRConfig(**CONFIGS[name])
        r = bench_train(name, cfg, device, fused_adamw=args.fused_adamw, **step)
        r.update(
            bench_generate(
                name,
                cfg,
                device,
                prompt_len=args.seq // 2,
                new_tokens=args.new_tokens,
                **common,
            )
        )
        results.append(as_json(r))
        print(report(r), flush=True)
        if args.compile:
            rc = bench_train(name, cfg, device, compile=True, fused_adamw=args.fused_adamw, **step)
            results.append(as_json(rc))
            print(report(rc), flush=True)
        if name in args.density_configs:
            rd = bench_density(name, cfg, device, **step)
            results.append(as_json(rd))
            print(report(rd), flush=True)
    if args.json:
        record = {
            "machine": machine(device),
            "command": "python -m kvattn.benchmark " + " ".join(argv or sys.argv[1:]),
            "results": results,
        }
        args.json.write_text(json.dumps(record, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
