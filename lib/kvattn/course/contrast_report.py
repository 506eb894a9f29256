"""Chapter 5's reading of the symmetry contrast: verdicts that state the power of their test,
the results table, the rate-pair table and the dose-response table.

:mod:`kvattn.experiments` runs and stores the contrast; this module reads the stored records.
A verdict comes from one of two families of tests, each Holm-corrected over the σ tested
together [holm1979simple]: the paired t-test of "no difference" and the equivalence test (two
one-sided tests, TOST [schuirmann1987tost]) of "a difference of ``margin`` or more". Each verdict
carries the power of the test it rests on, computed at the spread the run observed:

* for the t-test, the probability of rejecting when the true difference is ``margin``
  (:func:`t_power`);
* for the equivalence test, the probability of passing when the true difference is 0
  (:func:`equivalence_power`);
* for a family of equivalence tests, the probability that Holm's procedure passes all of them
  (:func:`family_equivalence_power`).

Where neither test rejects, the verdict is "not resolved", never "no difference". Every table
is returned as plain rows and formatted by :func:`format_table` to at most 80 characters a line.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scipy import integrate
from scipy import stats as sps

from .._checks import check_fraction, is_real
from ..experiments import Contrast, ContrastResult, DoseResponse, paired_contrast
from ..stats import holm, paired_difference, t_interval

#: The size of difference the experiment was built to resolve, in nats/token.
MARGIN = 0.01
#: The widest line a table may print (the text column of the book at 1280 px).
MAX_WIDTH = 80


def _check_design(sd: object, n: object, alpha: object) -> None:
    if not (is_real(sd) and sd > 0):
        raise ValueError(f"sd must be a positive finite number, got {sd!r}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 2:
        raise ValueError(f"n must be an int >= 2 (pairs), got {n!r}")
    check_fraction("alpha", alpha)


def t_power(sd: float, n: int, delta: float, alpha: float = 0.05) -> float:
    """Probability that a two-sided paired t-test at level ``alpha`` on ``n`` pairs rejects "no
    difference" when the true mean difference is ``delta`` and the paired differences have
    standard deviation ``sd`` (same units as ``delta``; exact, from the noncentral t
    distribution).

    Raises
    ------
    ValueError
        ``sd`` not a positive finite number, ``n`` not an int >= 2, ``alpha`` not in (0, 1) or
        ``delta`` not a finite number.
    """
    _check_design(sd, n, alpha)
    if not is_real(delta):
        raise ValueError(f"delta must be a finite number, got {delta!r}")
    c = sps.t.ppf(1 - alpha / 2, n - 1)
    shift = delta * math.sqrt(n) / sd
    return float(sps.nct.sf(c, n - 1, shift) + sps.nct.cdf(-c, n - 1, shift))


def equivalence_power(
    sd: float, n: int, margin: float = MARGIN, alpha: float = 0.05, delta: float = 0.0
) -> float:
    """Probability that the equivalence test (TOST) at level ``alpha`` on ``n`` pairs passes,
    that is that the 1 − 2·alpha interval of the mean difference lies inside ±``margin``, when
    the true difference is ``delta`` and the paired differences have standard deviation ``sd``
    (units of ``margin``). Exact up to numerical integration over the sample spread.

    Raises
    ------
    ValueError
        Bad ``sd``, ``n`` or ``alpha`` (as :func:`t_power`), ``margin`` not positive and finite,
        or ``delta`` not a finite number.
    """
    _check_design(sd, n, alpha)
    if not (is_real(margin) and margin > 0):
        raise ValueError(f"margin must be a positive finite number, got {margin!r}")
    if not is_real(delta):
        raise ValueError(f"delta must be a finite number, got {delta!r}")
    dof, s0 = n - 1, sd / math.sqrt(n)
    c = sps.t.ppf(1 - alpha, dof)

    def passes(q: float) -> float:  # q: the quantile of the sample spread
        u = sps.chi2.ppf(q, dof)  # the sample variance over the true one, times dof
        half = margin - c * s0 * math.sqrt(u / dof)  # the mean must lie within ±half
        if half <= 0:
            return 0.0
        return float(sps.norm.cdf((half - delta) / s0) - sps.norm.cdf((-half - delta) / s0))

    # integrated over the quantiles of the spread: smooth and bounded, however narrow its density
    top = sps.chi2.cdf(dof * (margin / (c * s0)) ** 2, dof)  # beyond: interval wider than margin
    value, _ = integrate.quad(passes, 0, top, limit=200)
    return float(min(max(value, 0.0), 1.0))


#: The largest family :func:`family_equivalence_power` takes: its exact sum costs about
#: m·3^m steps (0.6 M at 10 tests, a second or so; 200 M at 15).
MAX_FAMILY = 10


def family_equivalence_power(
    sds: Sequence[float], ns: Sequence[int], margin: float = MARGIN, alpha: float = 0.05
) -> float:
    """Probability that Holm's procedure at family-wise level ``alpha`` passes every one of
    several independent equivalence tests (pairs ``ns[i]``, spread ``sds[i]``) when every true
    difference is 0. Exact given each test's :func:`equivalence_power`: each p-value falls
    below α/m, α/(m − 1), …, α with known probabilities, and every test passes when, for each k,
    at least k of the p-values lie below the k-th threshold. The sum runs over the sets of
    tests below each threshold in turn (about m·3^m steps, not the (m + 1)^m assignments), so a
    family of at most :data:`MAX_FAMILY` tests is taken.

    Raises
    ------
    ValueError
        ``sds`` and ``ns`` of different lengths or empty, more than :data:`MAX_FAMILY` tests
        (the exact sum would not finish; the message says so), or a bad value (as
        :func:`equivalence_power`).
    """
    if len(sds) != len(ns) or not sds:
        raise ValueError(f"need one n per sd, got {len(sds)} sds and {len(ns)} ns")
    m = len(sds)
    if m > MAX_FAMILY:
        raise ValueError(
            f"family_equivalence_power takes at most {MAX_FAMILY} tests (its exact sum grows as "
            f"m·3^m and would not finish for {m}); split the family or bound its power by the "
            "product of the single tests' powers at alpha/m (a lower bound)"
        )
    levels = [alpha / (m - k) for k in range(m)]  # increasing: α/m, …, α
    # below[i][k]: P(p_i < levels[k])
    below = [
        [equivalence_power(sd, n, margin, level) for level in levels]
        for sd, n in zip(sds, ns, strict=True)
    ]
    # within[k][mask]: P(every test of mask has its p-value in [levels[k-1], levels[k]))
    within = []
    for k in range(m):
        slot = [below[i][k] - (below[i][k - 1] if k else 0.0) for i in range(m)]
        probs = [1.0] * (1 << m)
        for mask in range(1, 1 << m):
            low = mask & -mask
            probs[mask] = probs[mask ^ low] * slot[low.bit_length() - 1]
        within.append(probs)
    # reach[mask]: P(exactly the tests of mask lie below levels[k], and the rule held so far)
    reach = {0: 1.0}
    for k in range(m):
        grown: dict[int, float] = {}
        for mask, prob in reach.items():
            rest = ~mask & ((1 << m) - 1)
            sub = rest
            while True:  # every subset of the tests not yet below a threshold
                new = mask | sub
                if new.bit_count() >= k + 1:
                    grown[new] = grown.get(new, 0.0) + prob * within[k][sub]
                if sub == 0:
                    break
                sub = (sub - 1) & rest
        reach = grown
    return reach.get((1 << m) - 1, 0.0)


@dataclass(frozen=True)
class Verdict:
    """One σ's reading: the test it rests on (``"t"`` or ``"TOST"``), that test's p-value before
    Holm's correction, its power at the observed spread (see the module's docstring) and the
    verdict in words."""

    act: str
    test: str
    p: float
    power: float
    verdict: str


def verdicts(
    contrasts: Sequence[Contrast], margin: float = MARGIN, alpha: float = 0.05
) -> dict[str, Verdict]:
    """σ → :class:`Verdict` for the σ tested together, each family Holm-corrected over them.

    A difference that survives Holm's t-test is "gated lower" or "symmetric lower" (" by <
    margin" when its equivalence test passes too); otherwise a passing equivalence test reads
    "within ±margin"; otherwise "not resolved".

    Raises
    ------
    ValueError
        No contrasts, two for one σ, or a bad ``margin``/``alpha``.
    """
    acts = [c.act for c in contrasts]
    if not acts or len(set(acts)) != len(acts):
        raise ValueError(f"need one contrast per σ, got {acts}")
    if not (is_real(margin) and margin > 0):
        raise ValueError(f"margin must be a positive finite number, got {margin!r}")
    differ = holm([c.p for c in contrasts], alpha)
    within = holm([c.equivalence_p(margin) for c in contrasts], alpha)
    out = {}
    for c, clear, small in zip(contrasts, differ, within, strict=True):
        if clear:
            words = ("gated" if c.mean > 0 else "symmetric") + " lower"
            words += f" by < {margin:g}" if small else ""
            out[c.act] = Verdict(c.act, "t", c.p, t_power(c.sd, c.n, margin, alpha), words)
        else:
            words = f"within ±{margin:g}" if small else "not resolved"
            power = equivalence_power(c.sd, c.n, margin, alpha)
            out[c.act] = Verdict(c.act, "TOST", c.equivalence_p(margin), power, words)
    return out


def contrast_rows(contrasts: Sequence[Contrast]) -> list[dict]:
    """One row per contrast: σ, pairs, estimate, 95 % interval, p and the minimum detectable
    effect (nats/token), without verdicts (a first look, before any correction)."""
    rows = []
    for c in contrasts:
        lo, hi = c.interval(0.95)
        rows.append(
            dict(
                σ=c.act,
                pairs=c.n,
                estimate=f"{c.mean:+.4f}",
                interval=f"[{lo:+.4f}, {hi:+.4f}]",
                p=f"{c.p:.2g}",
                MDE=f"{c.mde:.4f}",
            )
        )
    return rows


def results_rows(
    by_length: Mapping[int, Sequence[Contrast]], margin: float = MARGIN, alpha: float = 0.05
) -> list[dict]:
    """One row per σ and training length (steps → the contrasts tested together at that
    length): σ, steps, pairs ``n``, estimate, 95 % interval, the test the verdict uses, that
    test's p-value before Holm's correction, its power and the verdict (nats/token)."""
    rows = []
    for steps, contrasts in by_length.items():
        read = verdicts(contrasts, margin, alpha)
        for c in contrasts:
            lo, hi = c.interval(0.95)
            v = read[c.act]
            rows.append(
                {
                    "σ": c.act,
                    "steps": steps,
                    "n": c.n,
                    "mean": f"{c.mean:+.4f}",
                    "95 % interval": f"[{lo:+.4f}, {hi:+.4f}]",
                    "test": v.test,
                    "p": f"{v.p:.2g}",
                    "power": f"{v.power:.2f}",
                    "verdict": v.verdict,
                }
            )
    return rows


def rate_pairs(
    runs: Sequence[ContrastResult], act: str = "silu"
) -> dict[tuple[float, float], Contrast]:
    """(symmetric rate, gated rate) → the paired contrast symmetric − gated, for every pair of
    rates at which runs on the same test seeds trained ``act``'s two kinds.

    Raises
    ------
    ValueError
        Fewer than one run, runs on different test seeds or steps, or a run without ``act``.
    """
    if not runs:
        raise ValueError("need at least one run")
    seeds, steps = runs[0].design["test_seeds"], runs[0].design["steps"]
    sym, gat = f"{act} symmetric", f"{act} gated"
    at: dict[str, dict[float, list[float]]] = {sym: {}, gat: {}}
    for r in runs:
        if r.design["test_seeds"] != seeds or r.design["steps"] != steps:
            raise ValueError("the runs must share their test seeds and their length")
        if sym not in r.final or gat not in r.final:
            raise ValueError(f"a run has no {act} kinds")
        for kind in (sym, gat):
            at[kind].setdefault(r.chosen_lr[kind], r.final[kind])
    return {
        (ls, lg): paired_contrast(act, at[sym][ls], at[gat][lg], 0.05, 0.8)
        for ls in sorted(at[sym])
        for lg in sorted(at[gat])
    }


def rate_rows(by_length: Mapping[int, Sequence[ContrastResult]], act: str = "silu") -> list[dict]:
    """The rate-pair table at each length (steps → runs on one set of seeds): rates, pairs,
    symmetric − gated with its 95 % interval and p."""
    rows = []
    for steps, runs in by_length.items():
        for (ls, lg), c in rate_pairs(runs, act).items():
            lo, hi = c.interval(0.95)
            rows.append(
                dict(
                    steps=f"{steps:,}",
                    symmetric=f"{ls:g}",
                    gated=f"{lg:g}",
                    pairs=c.n,
                    estimate=f"{c.mean:+.4f}",
                    interval=f"[{lo:+.4f}, {hi:+.4f}]",
                    p=f"{c.p:.2g}",
                )
            )
    return rows


def dose_rows(dose: DoseResponse) -> list[dict]:
    """Per Swish β: the Gaussian and the trained exchange violation, the mean final loss, and
    the paired change of final loss to the next β with its p (nats/token)."""
    n = len(dose.seeds)
    rows = []
    for i, beta in enumerate(dose.betas):
        row = dict(
            β=f"{beta:g}",
            gaussian=f"{dose.gaussian[i]:.3f}",
            trained=f"{sum(dose.violation[i]) / n:.3f}",
            loss=f"{sum(dose.final[i]) / n:.4f}",
            next_β="",
            change="",
            p="",
        )
        if i + 1 < len(dose.betas):
            step = paired_contrast("", dose.final[i + 1], dose.final[i], 0.05, 0.8)
            row.update(
                next_β=f"{dose.betas[i + 1]:g}", change=f"{step.mean:+.4f}", p=f"{step.p:.2g}"
            )
        rows.append(row)
    return rows


@dataclass(frozen=True)
class Trajectory:
    """The paired difference symmetric − gated of one σ at every evaluation along one set of
    runs (nats/token; positive: the gated form lower): ``steps`` counts the steps trained at each
    evaluation, ``mean`` and ``se`` the mean difference over the ``n`` pairs and its standard
    error, ``p`` the two-sided paired t-test's p-value, and ``lower``/``upper`` the two-sided
    Student-t interval at ``level``, each evaluation on its own (``level_each`` is the level of
    each interval: ``level`` itself, or Bonferroni's 1 − (1 − level)/m over the m
    evaluations)."""

    act: str
    n: int
    level: float
    level_each: float
    steps: list[int]
    mean: list[float]
    se: list[float]
    p: list[float]
    lower: list[float]
    upper: list[float]

    def below_zero(self) -> list[int]:
        """The steps at which the whole interval lies below 0 (the symmetric form lower)."""
        return [s for s, hi in zip(self.steps, self.upper, strict=True) if hi < 0]

    def above_zero(self) -> list[int]:
        """The steps at which the whole interval lies above 0 (the gated form lower)."""
        return [s for s, lo in zip(self.steps, self.lower, strict=True) if lo > 0]


def paired_trajectory(
    result: ContrastResult, act: str, level: float = 0.95, bonferroni: bool = False
) -> Trajectory:
    """The paired difference symmetric − gated of ``act``'s two kinds at every evaluation of
    ``result``'s validation curves (same test seeds, same order), with its interval at
    ``level``; with ``bonferroni``, each interval is widened to level 1 − (1 − level)/m over
    the m evaluations, so that all of them hold together with probability at least ``level``.

    An evaluation at step index i (0-based) comes after i + 1 training steps: ``steps`` holds
    i + 1. Each run of a budget has its own learning-rate schedule, so a trajectory compares
    the kinds along one budget's runs only.

    Raises
    ------
    ValueError
        ``result`` without both of ``act``'s kinds, fewer than two seeds, curves whose lengths
        differ from the evaluation steps, or ``level`` not in (0, 1).
    """
    check_fraction("level", level)
    sym, gat = f"{act} symmetric", f"{act} gated"
    if sym not in result.curves or gat not in result.curves:
        raise ValueError(f"the runs hold no curves of {sym!r} and {gat!r}: {list(result.curves)}")
    m = len(result.eval_steps)
    for kind in (sym, gat):
        if any(len(c) != m for c in result.curves[kind]):
            raise ValueError(f"every curve of {kind!r} must have one value per evaluation ({m})")
    each = 1 - (1 - level) / m if bonferroni else level
    rows = []
    for i in range(m):
        d = paired_difference(
            [c[i] for c in result.curves[sym]],
            [c[i] for c in result.curves[gat]],
            names=(sym, gat),
        )
        rows.append((d.mean, d.se, d.p, *t_interval(d.mean, d.se, d.n, each)))
    mean, se, p, lower, upper = (list(col) for col in zip(*rows, strict=True))
    n = len(result.curves[sym])
    steps = [s + 1 for s in result.eval_steps]
    return Trajectory(act, n, level, each, steps, mean, se, p, lower, upper)


def pairing_rows(runs: Mapping[str, ContrastResult], min_pairs: int = 8) -> list[dict]:
    """How much pairing helped, per run and σ with at least ``min_pairs`` test seeds: the
    correlation ``r`` of the two kinds' final losses across seeds (Pearson's), and ``ratio``,
    the standard deviation of the paired differences over that of a difference of two
    independent results, √(s_sym² + s_gated²): 1 when pairing cancels nothing, below 1 as far
    as it cancels each seed's luck (√(1 − r) when both kinds spread alike).

    Raises
    ------
    ValueError
        No runs, or a σ whose final losses do not vary.
    """
    if not runs:
        raise ValueError("need at least one run")
    rows = []
    for name, result in runs.items():
        for act in CONTRASTS_ORDER:
            sym, gat = result.final.get(f"{act} symmetric"), result.final.get(f"{act} gated")
            if sym is None or gat is None or len(sym) < min_pairs:
                continue
            s, g = _spread(sym), _spread(gat)
            if s == 0 or g == 0:
                raise ValueError(f"{name}: {act}'s final losses do not vary")
            d = paired_difference(sym, gat)
            ms, mg = sum(sym) / len(sym), sum(gat) / len(gat)
            cov = sum((a - ms) * (b - mg) for a, b in zip(sym, gat, strict=True))
            r = cov / (len(sym) - 1) / (s * g)
            rows.append(
                dict(
                    run=name,
                    σ=act,
                    pairs=d.n,
                    r=f"{r:+.2f}",
                    ratio=f"{d.sd / math.hypot(s, g):.2f}",
                )
            )
    return rows


#: The σ of the contrast, in the order the tables print them.
CONTRASTS_ORDER = ("silu", "gelu", "relu")


def _spread(values: Sequence[float]) -> float:
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def format_table(rows: Sequence[Mapping[str, object]]) -> str:
    """Rows of equal keys as a text table, columns as wide as their widest entry, numbers-like
    entries right-aligned.

    Raises
    ------
    ValueError
        No rows, rows with different keys, or a line wider than :data:`MAX_WIDTH`.
    """
    if not rows:
        raise ValueError("no rows to format")
    keys = list(rows[0])
    if any(list(r) != keys for r in rows):
        raise ValueError("every row must have the same keys, in the same order")
    cells = [[str(k) for k in keys]] + [[str(r[k]) for k in keys] for r in rows]
    widths = [max(len(line[j]) for line in cells) for j in range(len(keys))]

    def right(j: int) -> bool:
        return all(line[j][:1] in "+-[0123456789" or not line[j] for line in cells[1:])

    lines = [
        "  ".join(
            v.rjust(w) if right(j) else v.ljust(w)
            for j, (v, w) in enumerate(zip(line, widths, strict=True))
        ).rstrip()
        for line in cells
    ]
    wide = max(len(line) for line in lines)
    if wide > MAX_WIDTH:
        raise ValueError(f"the table is {wide} characters wide, more than {MAX_WIDTH}")
    return "\n".join(lines)
