"""The statistics of the course's designed experiments, on ``scipy.stats``.

* the paired comparison of two configurations over the same seeds (:func:`paired_difference`):
  mean difference, standard error, Student's t and its two-sided p-value;
* its confidence interval (:func:`t_interval`) and the equivalence test (:func:`equivalence_p`,
  two one-sided tests [schuirmann1987tost]);
* the design's power: :func:`minimum_detectable_effect` and :func:`pairs_needed`;
* a dose-response experiment (the depth experiment of chapter 11): :func:`dose_verdict` reads
  the fall of a measure from the lowest dose to the highest by its plan's rule, and
  :func:`dose_power` gives each verdict's probability for a design;
* the checks a stored summary must pass (:func:`check_paired_summary`);
* Holm's step-down correction for several tests (:func:`holm`, :func:`holm_thresholds`
  [holm1979simple]);
* Spearman's rank correlation with ties given mid-ranks (:func:`spearman`).

Bracketed keys cite ``book/references.bib``. Every function refuses a NaN, an infinity or a
bool where a number is wanted, before computing anything.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

import torch
from scipy import stats

from ._checks import check_fraction, is_list_like, is_real


@dataclass(frozen=True)
class PairedDifference:
    """Paired comparison of two configurations over the same seeds: mean of a − b, its standard
    error, Student's t, the two-sided p-value with n − 1 degrees of freedom, the number of pairs
    and the standard deviation of the differences (with n − 1; units of a and b)."""

    mean: float
    se: float
    t: float
    p: float
    n: int
    sd: float


def paired_difference(
    a: Sequence[float], b: Sequence[float], names: tuple[str, str] = ("a", "b")
) -> PairedDifference:
    """Compare per-seed results ``a`` and ``b`` (same seeds, same order) with a paired t-test.

    The differences are taken in float64; t = mean / se with se = sd / √n (sd with n − 1), and
    p = P(``|T| ≥ |t|``) for Student's T with n − 1 degrees of freedom (``scipy.stats.t``). When all
    differences are equal, se = 0: t is ±inf (p = 0) for a non-zero mean and 0 (p = 1) for none.
    ``names`` name the two lists in error messages.

    Raises
    ------
    ValueError
        ``a`` or ``b`` not a list or an array (a set has no order to pair by), lists of different
        lengths or shorter than 2, a value that is not a finite number (each is named with its
        index), or finite values whose differences or their spread overflow float64.
    """
    for name, values in zip(names, (a, b), strict=True):
        _check_ordered(name, values, "paired values (same seeds, same order)")
    if len(a) != len(b) or len(a) < 2:
        raise ValueError(f"need paired lists of the same length >= 2, got {len(a)} and {len(b)}")
    bad = [
        f"{name}[{i}] = {x!r}"
        for name, values in zip(names, (a, b), strict=True)
        for i, x in enumerate(values)
        if not is_real(x)
    ]
    if bad:
        raise ValueError(f"paired values must be finite numbers, got {', '.join(bad)}")
    d = torch.tensor(a, dtype=torch.float64) - torch.tensor(b, dtype=torch.float64)
    n = len(d)
    sd = float(d.std(unbiased=True))
    mean = float(d.mean())
    if not (math.isfinite(sd) and math.isfinite(mean)):
        # finite inputs near the float64 limit: the error would otherwise blame an sd of inf
        raise ValueError(
            f"the differences {names[0]} − {names[1]} overflow float64 (their mean is {mean}, "
            f"their standard deviation {sd}); the largest |{names[0]} − {names[1]}| is "
            f"{float(d.abs().max()):g}"
        )
    se = sd / math.sqrt(n)
    t = mean / se if se > 0 else (math.copysign(math.inf, mean) if mean else 0.0)
    p = float(2 * stats.t.sf(abs(t), n - 1)) if math.isfinite(t) else 0.0
    return PairedDifference(mean, se, t, p, n, sd)


def t_interval(mean: float, se: float, n: int, level: float = 0.95) -> tuple[float, float]:
    """The two-sided Student-t confidence interval at ``level`` of a mean difference over ``n``
    pairs with standard error ``se`` (same units as ``mean``).

    Raises
    ------
    ValueError
        ``mean`` not a finite number, ``se`` not a finite number >= 0 (a negative one would
        reverse the interval), ``n`` not an int >= 2, or ``level`` not a number in (0, 1).
    """
    check_paired_summary(mean, se, n)
    if not (is_real(level) and 0 < level < 1):
        raise ValueError(f"level must lie in (0, 1), got {level!r}")
    half = float(stats.t.ppf(0.5 + level / 2, n - 1)) * se
    return mean - half, mean + half


def equivalence_p(mean: float, se: float, n: int, margin: float) -> float:
    """The p-value of the two one-sided tests (TOST [schuirmann1987tost]) that a mean difference
    over ``n`` pairs with standard error ``se`` lies inside (−``margin``, +``margin``): the larger
    of the one-sided paired t-test p-values against −margin and against +margin. Below alpha
    exactly when the 1 − 2·alpha interval lies inside ±margin; a small value supports "no
    difference as large as margin". With se = 0 it is 0 inside the margin and 1 outside.

    Raises
    ------
    ValueError
        ``margin`` not a positive finite number, or ``mean``, ``se``, ``n`` as in
        :func:`t_interval`.
    """
    check_paired_summary(mean, se, n)
    if not (is_real(margin) and margin > 0):
        raise ValueError(f"margin must be a positive finite number, got {margin!r}")
    if se == 0:
        return 0.0 if abs(mean) < margin else 1.0
    above = stats.t.sf((mean + margin) / se, n - 1)  # H0: mean <= -margin
    below = stats.t.cdf((mean - margin) / se, n - 1)  # H0: mean >= +margin
    return float(max(above, below))


def check_paired_summary(mean: object, se: object, n: object) -> None:
    """Refuse a paired summary that no interval or test can use: ``mean`` must be a finite
    number, ``se`` a finite number >= 0 (a negative one reverses intervals) and ``n`` an int >= 2
    (n − 1 degrees of freedom).

    Raises
    ------
    ValueError
        Naming the first of ``mean``, ``se``, ``n`` that is not so.
    """
    if not is_real(mean):
        raise ValueError(f"mean must be a finite number, got {mean!r}")
    if not (is_real(se) and se >= 0):
        raise ValueError(f"se must be a finite number >= 0, got {se!r}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 2:
        raise ValueError(f"n must be an int >= 2 (pairs), got {n!r}")


def minimum_detectable_effect(sd: float, n: int, alpha: float = 0.05, power: float = 0.8) -> float:
    """Smallest true mean difference that a two-sided paired t-test on ``n`` pairs detects with
    probability ``power`` at level ``alpha``, for paired differences of standard deviation ``sd``:
    (t_{1−α/2, n−1} + t_{power, n−1}) · sd / √n (the usual normal-approximation form with t
    quantiles). Same units as ``sd``.

    Raises
    ------
    ValueError
        ``n`` not an int >= 2, ``sd`` not a finite number >= 0, or alpha/power not numbers in
        (0, 1).
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 2:
        raise ValueError(f"n must be an int >= 2 (pairs), got {n!r}")
    if not (is_real(sd) and sd >= 0):
        raise ValueError(f"sd must be finite and >= 0, got {sd!r}")
    if not (is_real(alpha) and is_real(power) and 0 < alpha < 1 and 0 < power < 1):
        raise ValueError(f"alpha and power must lie in (0, 1), got {alpha}, {power}")
    dof = n - 1
    return float((stats.t.ppf(1 - alpha / 2, dof) + stats.t.ppf(power, dof)) * sd / math.sqrt(n))


def pairs_needed(sd: float, target: float, alpha: float = 0.05, power: float = 0.8) -> int:
    """The fewest pairs whose :func:`minimum_detectable_effect` falls below ``target`` for paired
    differences of standard deviation ``sd`` (how a follow-up is sized from an earlier run's
    spread).

    Raises
    ------
    ValueError
        ``target`` not a positive finite number, bad ``sd``/``alpha``/``power`` (as
        :func:`minimum_detectable_effect`), or no design of up to 100,000 pairs reaches it.
    """
    if not (is_real(target) and target > 0):
        raise ValueError(f"target must be a positive finite effect, got {target!r}")

    def enough(n: int) -> bool:
        return minimum_detectable_effect(sd, n, alpha, power) < target

    low, high = 1, 100_000  # the MDE falls with n, so bisect: enough(high), not enough(low)
    if not enough(high):
        raise ValueError(f"even 100,000 pairs leave the MDE above {target} at sd {sd}")
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if enough(mid) else (mid, high)
    return high


@dataclass(frozen=True)
class DepthReading:
    """A dose-response reading of a planned experiment: the least-squares line of ``y`` on the
    dose ``x``, read as the fall ``drop = −slope × (high − low)`` from the lowest dose to the
    highest, with one-sided ``1 − alpha`` bounds (Student's t, n − 2 degrees of freedom), and the
    verdict of :func:`dose_verdict`."""

    slope: float
    se: float
    dof: int
    drop: float
    drop_lower: float
    drop_upper: float
    verdict: str


def dose_verdict(
    x: Sequence[float], y: Sequence[float], margin: float, alpha: float = 0.05
) -> DepthReading:
    """Read a dose-response experiment by its plan's rule: fit ``y = a + slope·x`` by least
    squares, take the fall from the lowest to the highest dose ``drop = −slope·(max x − min x)``
    and its one-sided ``1 − alpha`` bounds, and decide

    * ``"supported"``: ``drop ≥ margin`` and the lower bound above 0 (y falls with x, by at
      least the margin);
    * ``"refuted"``: the upper bound below ``margin`` (y falls by less than the margin, if at
      all, with confidence);
    * ``"not resolved"`` otherwise.

    Units: ``drop`` and ``margin`` are in the units of ``y`` (decades, for a log10 measure).

    Raises
    ------
    ValueError
        ``x`` and ``y`` not sequences of the same length ≥ 3 of finite numbers, fewer than two
        distinct doses, a non-positive ``margin`` or ``alpha`` outside (0, 1).
    """
    if not (is_list_like(x) and is_list_like(y)) or len(x) != len(y) or len(x) < 3:
        raise ValueError("x and y must be sequences of the same length >= 3 (one per run)")
    if not all(is_real(v) for v in (*x, *y)):
        raise ValueError("x and y must hold finite numbers (a missing reading is no reading)")
    if len(set(x)) < 2:
        raise ValueError("x must hold at least two distinct doses")
    if not (is_real(margin) and margin > 0):
        raise ValueError(f"margin must be a positive finite number, got {margin!r}")
    if not (is_real(alpha) and 0 < alpha < 1):
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
    n = len(x)
    mx, my = sum(x) / n, sum(y) / n
    sxx = sum((a - mx) ** 2 for a in x)
    slope = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True)) / sxx
    resid = [b - my - slope * (a - mx) for a, b in zip(x, y, strict=True)]
    dof = n - 2
    se = math.sqrt(sum(r * r for r in resid) / dof / sxx) if dof else math.inf
    span = max(x) - min(x)
    drop = -slope * span
    t = float(stats.t.ppf(1 - alpha, dof)) if dof else math.inf
    lower, upper = drop - t * se * span, drop + t * se * span
    if drop >= margin and lower > 0:
        verdict = "supported"
    elif upper < margin:
        verdict = "refuted"
    else:
        verdict = "not resolved"
    return DepthReading(slope, se, dof, drop, lower, upper, verdict)


#: The most simulated experiments :func:`dose_power` runs (a larger request is refused: it
#: would not finish in a chapter's time).
MAX_SIMULATIONS = 200_000


def dose_power(
    doses: Sequence[float],
    n: int,
    sd: float,
    drop: float,
    margin: float,
    alpha: float = 0.05,
    simulations: int = 20_000,
    seed: int = 0,
) -> dict[str, float]:
    """The probability of each verdict of :func:`dose_verdict` for a design of ``n`` runs at
    each dose, when the true fall from the lowest dose to the highest is ``drop`` (linear in the
    dose) and runs scatter normally with standard deviation ``sd`` about the line: a Monte Carlo
    estimate over ``simulations`` experiments drawn with ``seed`` (standard error at most
    0.5/√simulations). Units of ``sd``, ``drop`` and ``margin``: those of the measure.

    Returns ``{"supported": p, "refuted": p, "not resolved": p}``, summing to 1.

    Raises
    ------
    ValueError
        Fewer than two distinct ``doses``, ``n`` not an int ≥ 1 (with ≥ 3 runs in all), ``sd``
        not positive, ``drop`` not finite, bad ``margin``/``alpha`` (as :func:`dose_verdict`),
        or ``simulations`` not an int in [100, :data:`MAX_SIMULATIONS`].
    """
    if not is_list_like(doses) or len(set(doses)) < 2 or not all(is_real(d) for d in doses):
        raise ValueError("doses must be a sequence of at least two distinct finite numbers")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1 or n * len(doses) < 3:
        raise ValueError(f"n must be an int >= 1 giving at least 3 runs in all, got {n!r}")
    if not (is_real(sd) and sd > 0) or not is_real(drop):
        raise ValueError(f"sd must be positive and drop finite, got {sd!r}, {drop!r}")
    if not (is_real(margin) and margin > 0 and is_real(alpha) and 0 < alpha < 1):
        raise ValueError(f"margin must be positive and alpha in (0, 1), got {margin}, {alpha}")
    if (
        isinstance(simulations, bool)
        or not isinstance(simulations, int)
        or not 100 <= simulations <= MAX_SIMULATIONS
    ):
        raise ValueError(
            f"simulations must be an int in [100, {MAX_SIMULATIONS}], got {simulations!r}"
        )
    x = torch.tensor([float(d) for d in doses for _ in range(n)], dtype=torch.float64)
    slope = -drop / (max(doses) - min(doses))
    gen = torch.Generator().manual_seed(seed)
    noise = torch.randn(simulations, len(x), generator=gen, dtype=torch.float64) * sd
    y = slope * x + noise
    xc = x - x.mean()
    sxx = float((xc**2).sum())
    b = (y - y.mean(1, keepdim=True)) @ xc / sxx
    resid = y - y.mean(1, keepdim=True) - b[:, None] * xc
    dof = len(x) - 2
    se = (resid.pow(2).sum(1) / dof / sxx).sqrt()
    span = max(doses) - min(doses)
    t = float(stats.t.ppf(1 - alpha, dof))
    d_hat = -b * span
    supported = (d_hat >= margin) & (d_hat - t * se * span > 0)
    refuted = ~supported & (d_hat + t * se * span < margin)
    p_sup, p_ref = float(supported.double().mean()), float(refuted.double().mean())
    return {"supported": p_sup, "refuted": p_ref, "not resolved": 1 - p_sup - p_ref}


def _check_p_values(p_values: Sequence[float], alpha: float) -> list[float]:
    """The p-values as floats, once each lies in [0, 1] and alpha in (0, 1): a NaN would make the
    sort, and so the verdicts, depend on the order given."""
    check_fraction("alpha", alpha)
    _check_ordered("p_values", p_values, "numbers")
    bad = [f"p_values[{i}] = {p!r}" for i, p in enumerate(p_values) if not _is_probability(p)]
    if bad:
        raise ValueError(f"p-values must be numbers in [0, 1], got {', '.join(bad)}")
    return [float(p) for p in p_values]


def _check_ordered(name: str, values: object, what: str) -> None:
    """``values`` is a sequence or an array: not a string, a mapping or an iterator, and not a
    set, whose order the caller does not know (Holm's verdicts and the pairing follow it)."""
    if isinstance(values, AbstractSet):
        raise ValueError(
            f"{name} must be a sequence of {what} in a known order (a list, a tuple or an "
            f"array), got a {type(values).__name__}, whose order is arbitrary: {values!r}"
        )
    if not is_list_like(values):
        raise ValueError(f"{name} must be a sequence of {what}, got {values!r}")


def _is_probability(p: object) -> bool:
    return is_real(p) and 0 <= p <= 1


def holm_thresholds(p_values: Sequence[float], alpha: float = 0.05) -> list[float]:
    """The level Holm's step-down procedure holds each p-value to (in the order given): the k-th
    smallest of m must lie below alpha / (m − k + 1) [holm1979simple].

    Raises
    ------
    ValueError
        ``p_values`` not a sequence or an array (a set has no order to give the verdicts in), a
        p-value that is not a number in [0, 1] (NaN included; each is named with its index), or
        ``alpha`` not a number in (0, 1).
    """
    p_values = _check_p_values(p_values, alpha)
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    limits = [0.0] * len(p_values)
    for rank, i in enumerate(order):
        limits[i] = alpha / (len(p_values) - rank)
    return limits


def holm(p_values: Sequence[float], alpha: float = 0.05) -> list[bool]:
    """Holm's step-down correction: which of the tests reject at family-wise level ``alpha``
    (in the order given). Each p must lie below its :func:`holm_thresholds` level, and testing
    stops at the first, in increasing order of p, that does not [holm1979simple].

    Raises
    ------
    ValueError
        As :func:`holm_thresholds`.
    """
    p_values = _check_p_values(p_values, alpha)
    limits = holm_thresholds(p_values, alpha)
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    reject, holds = [False] * len(p_values), True
    for i in order:
        holds = holds and p_values[i] < limits[i]
        reject[i] = holds
    return reject


def spearman(a: Sequence[float] | torch.Tensor, b: Sequence[float] | torch.Tensor) -> float:
    """Spearman's rank correlation ρ of two samples of equal length: Pearson's r of their ranks,
    tied values sharing their mid-rank (``scipy.stats.spearmanr``). In [−1, 1]; NaN when one
    sample is constant (its ranks have no spread).

    Raises
    ------
    ValueError
        Samples of different lengths or shorter than 2, not 1-D, or holding a value that is not a
        finite number.
    """
    x, y = (v.detach().cpu().tolist() if isinstance(v, torch.Tensor) else v for v in (a, b))
    for name, values in (("a", x), ("b", y)):
        if not is_list_like(values) or not all(is_real(v) for v in values):
            raise ValueError(f"{name} must be a 1-D sequence of finite numbers, got {values!r}")
    if len(x) != len(y) or len(x) < 2:
        raise ValueError(f"need two samples of the same length >= 2, got {len(x)} and {len(y)}")
    return float(stats.spearmanr(x, y).statistic)
