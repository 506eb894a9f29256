"""How the benchmark times: variants run interleaved, ratios are taken within a round, and a
ratio that cannot be trusted is flagged.

Every round of :func:`interleaved` times each variant once, in an order that rotates from round to
round, and each ratio is taken within a round: a busy machine slows all variants of one round
alike, so the per-round ratios cancel most of the load that absolute times would carry. A
:class:`Ratio` is the median of the per-round ratios with their quartiles; :func:`flagged` marks
one that is impossible, implausible or unstable. All timing reads one clock (``_clock``, which
the tests replace with a fake one) through ``_timed``, which synchronises the device around the
call. The argument checks that every measurement shares (a time budget, a device this machine
has) live here too.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from .._checks import check_device, is_int, is_real

_clock = time.perf_counter  # the tests replace it with a fake clock

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
    # CUDA runs asynchronously: without this the clock would stop before the work does
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _timed(fn: Callable[[], object], device: torch.device) -> float:
    """Seconds that one call of ``fn`` takes on ``device``, by ``_clock``."""
    _sync(device)
    t0 = _clock()
    fn()
    _sync(device)
    return _clock() - t0


def _quartiles(values: list[float]) -> tuple[float, float, float]:
    """(q1, median, q3) of ``values``, the quartiles inclusive of the extremes (one value is its
    own quartiles)."""
    if len(values) == 1:
        return values[0], values[0], values[0]
    q1, median, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, median, q3


def _check_seconds(budget_s: float) -> None:
    """``budget_s`` is a positive, finite number of seconds (``ValueError`` otherwise)."""
    # an infinite budget would leave a notebook cell unbounded, which the budget exists to prevent
    if not (is_real(budget_s) and budget_s > 0):
        raise ValueError(f"budget_s must be a positive number of seconds, got {budget_s!r}")


def _check_device(device: torch.device) -> None:
    """``device`` is a ``torch.device`` (``TypeError`` otherwise) of type cpu, cuda or mps that
    this machine has (``ValueError`` otherwise)."""
    if not isinstance(device, torch.device):
        raise TypeError(f"device must be a torch.device, got {type(device).__name__}")
    if device.type not in ("cpu", "cuda", "mps"):
        raise ValueError(f"the benchmark runs on cpu, cuda or mps, got {device}")
    check_device("device", str(device))


def _check_budget(budget_s: float, min_rounds: int, max_rounds: int, target_spread: float) -> None:
    """The budget of :func:`interleaved` (``ValueError`` on a bad one)."""
    _check_seconds(budget_s)
    if not (is_int(min_rounds) and is_int(max_rounds) and 1 <= min_rounds):
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
            times[name].append(_timed(variants[name], device))
        if r + 1 >= min_rounds and all(
            summarise(a, b).spread <= target_spread for a, b in ratios.values()
        ):
            break
    return times, {label: summarise(a, b) for label, (a, b) in ratios.items()}


def flagged(ratio: Ratio, problem: str | None) -> Ratio:
    """``ratio`` with ``problem`` as its flag, or an *unstable* flag when fewer than
    :data:`~kvattn.benchmark.timing.MIN_ROUNDS_FOR_SPREAD` rounds fit in the budget (no spread
    can be estimated) or its spread exceeds :data:`~kvattn.benchmark.timing.UNSTABLE_SPREAD`; an
    impossible value takes precedence."""
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
