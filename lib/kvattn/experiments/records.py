"""The records of chapter 5's experiments: paired contrasts, dose-responses and the shipped files.

:class:`~kvattn.experiments.Contrast` is one paired t-test
(:func:`~kvattn.experiments.paired_contrast`), :class:`~kvattn.experiments.ContrastResult` and
:class:`~kvattn.experiments.DoseResponse` what the two designs ran and concluded, and
:func:`~kvattn.experiments.load_shipped` reads them as ``kvattn-reproduce experiment`` writes them
(:class:`~kvattn.experiments.ShippedExperiment`).
Statistics use ``scipy.stats`` through :mod:`kvattn.stats` (Student's t quantiles and tail
probabilities).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from .._checks import check_fields, is_real, matches_hint
from ..data import experiment
from ..stats import (
    check_paired_summary,
    equivalence_p,
    minimum_detectable_effect,
    paired_difference,
    t_interval,
)


@dataclass(frozen=True)
class Contrast:
    """Paired difference symmetric − gated for one σ (nats/token; positive: gated is lower).
    Raises ``ValueError`` for what no paired t-test gives: ``act`` not a str, a non-finite mean,
    se < 0, n < 2 (or not an int), t NaN (±inf only with se = 0), p outside [0, 1], mde < 0."""

    act: str
    mean: float
    se: float
    t: float
    p: float
    n: int
    mde: float  # minimum detectable effect at the design's alpha and power

    def __post_init__(self) -> None:
        # a record read from a file may hold anything; n < 2 or se < 0 would spoil the interval
        if not isinstance(self.act, str):
            raise ValueError(f"act must be a str naming the contrast's σ, got {self.act!r}")
        check_paired_summary(self.mean, self.se, self.n)
        if not matches_hint(self.t, float) or (math.isinf(self.t) and self.se > 0):
            raise ValueError(f"t must be a number, ±inf only when se = 0, got {self.t!r}")
        if not (is_real(self.p) and 0 <= self.p <= 1):
            raise ValueError(f"p must be a number in [0, 1], got {self.p!r}")
        if not (is_real(self.mde) and self.mde >= 0):
            raise ValueError(f"mde must be a finite number >= 0, got {self.mde!r}")

    @property
    def sd(self) -> float:
        """The standard deviation of the paired differences, se · √n (nats/token)."""
        return self.se * math.sqrt(self.n)

    def interval(self, level: float = 0.95) -> tuple[float, float]:
        """The two-sided Student-t confidence interval of the mean difference at ``level``
        (nats/token; :func:`kvattn.stats.t_interval`). Raises ``ValueError`` unless
        0 < level < 1."""
        return t_interval(self.mean, self.se, self.n, level)

    def equivalence_p(self, margin: float) -> float:
        """The p-value of the two one-sided tests that the mean difference lies inside
        (−``margin``, +``margin``) nats/token (:func:`kvattn.stats.equivalence_p`): a small value
        supports "no difference as large as margin". Raises ``ValueError`` unless margin is a
        positive finite number."""
        return equivalence_p(self.mean, self.se, self.n, margin)


@dataclass
class ContrastResult:
    """Everything :func:`symmetry_contrast` ran and concluded (plain data, JSON-ready via
    ``to_dict()``).

    ``selection[kind][lr]`` holds the final validation losses of the selection seeds;
    ``chosen_lr[kind]`` the rate each kind then used; ``final[kind]`` the test seeds' final
    validation losses (in ``test_seeds`` order); ``curves[kind]`` their validation curves at
    ``eval_steps``; ``late_drop[kind]`` the mean drop of validation loss over the last fifth of
    training (nats/token; near 0 when the curves have flattened); ``contrasts`` one
    :class:`Contrast` per σ.
    """

    design: dict
    selection: dict[str, dict[str, list[float]]]
    chosen_lr: dict[str, float]
    eval_steps: list[int]
    final: dict[str, list[float]]
    curves: dict[str, list[list[float]]]
    late_drop: dict[str, float]
    n_parameters: dict[str, int]
    contrasts: list[Contrast] = field(default_factory=list)

    @property
    def lr_at_edge(self) -> list[str]:
        """The kinds whose chosen rate is the smallest or largest of the grid (so their best rate
        may lie outside it, and the grid should be widened before their contrast is trusted)."""
        grid = self.design["lrs"]
        edge = []
        for kind, lr in self.chosen_lr.items():
            lrs = grid[kind] if isinstance(grid, dict) else grid
            if len(lrs) > 1 and lr in (min(lrs), max(lrs)):
                edge.append(kind)
        return edge

    def to_dict(self) -> dict:
        out = asdict(self)
        out["contrasts"] = [asdict(c) for c in self.contrasts]
        return out

    @classmethod
    def from_dict(cls, d: dict) -> ContrastResult:
        """The inverse of ``to_dict``; raises ``ValueError`` naming a missing or unknown key, a
        field whose value does not have its type (``final`` must map kinds to lists of numbers,
        ...), or a contrast (by index) that is not one (:class:`Contrast`)."""
        # the contrasts are records of their own, each checked below
        check_fields(cls, {**d, "contrasts": []} if isinstance(d, dict) and "contrasts" in d else d)
        if not isinstance(d["contrasts"], list):
            raise ValueError(f"ContrastResult: contrasts must be a list, got {d['contrasts']!r}")
        contrasts = []
        for i, c in enumerate(d["contrasts"]):
            try:
                check_fields(Contrast, c)
                contrasts.append(Contrast(**c))
            except ValueError as err:
                raise ValueError(f"contrasts[{i}]: {err}") from None
        return cls(**{**d, "contrasts": contrasts})


def paired_contrast(
    act: str, symmetric: Sequence[float], gated: Sequence[float], alpha: float, power: float
) -> Contrast:
    """The paired t-test of ``symmetric − gated`` (same seeds, same order), as a
    :class:`Contrast`.

    Raises
    ------
    ValueError
        ``act`` not a str; lists of different lengths or shorter than 2, a value that is not a
        finite number (each is named with its index; as :func:`kvattn.stats.paired_difference`),
        or bad ``alpha``/``power`` (as :func:`~kvattn.stats.minimum_detectable_effect`).
    """
    d = paired_difference(symmetric, gated, names=("symmetric", "gated"))
    mde = minimum_detectable_effect(d.sd, d.n, alpha, power)
    return Contrast(act, d.mean, d.se, d.t, d.p, d.n, mde)


@dataclass
class DoseResponse:
    """Swish-β gated layers σ_β(a)·b trained at several β (plain data, JSON-ready via
    ``to_dict()``).

    ``final[i][s]`` is the final validation loss (nats/token) at ``betas[i]`` and seed
    ``seeds[s]``; ``violation[i][s]`` the exchange violation of that trained layer on its own
    inputs (:func:`kvattn.symmetry.trained_exchange_violation`); ``gaussian[i]`` the violation of
    σ_β for independent standard normal a, b (:func:`kvattn.symmetry.exchange_violation`).
    ``slope`` is the paired summary: for each seed, the least-squares slope of final loss against
    trained violation across β; ``slope`` the mean over seeds, with ``slope_se``, ``slope_t``,
    ``slope_p`` (two-sided, n − 1 degrees of freedom).
    """

    design: dict
    betas: list[float]
    seeds: list[int]
    final: list[list[float]]
    violation: list[list[float]]
    gaussian: list[float]
    slope: float
    slope_se: float
    slope_t: float
    slope_p: float

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> DoseResponse:
        """The inverse of ``to_dict``; raises ``ValueError`` naming a missing or unknown key or a
        field whose value does not have its type."""
        check_fields(cls, d)
        return cls(**d)


@dataclass
class ShippedExperiment:
    """Chapter 5's experiments as shipped in ``data/experiments/<name>.json``: the contrast, the
    dose-response (``None`` if the run had no SiLU kinds) and how they were made (``provenance``:
    torch, device, corpus, seconds, and the command as it was run)."""

    name: str
    contrast: ContrastResult
    dose_response: DoseResponse | None
    provenance: dict

    @property
    def command(self) -> str:
        """The command that remakes this file, ``kvattn-reproduce experiment <name>``. It runs
        the design that ``data/plans/experiments.json`` records for it (the arguments it ran
        with) and writes ``reproduced/experiments/<name>.json`` (``--out data --overwrite``
        replaces the shipped file). ``provenance["command"]`` is the command as it was run."""
        return f"kvattn-reproduce experiment {self.name}"


def load_shipped(name: str = "symmetry_contrast") -> ShippedExperiment:
    """Read the results that ``kvattn-reproduce experiment`` writes to
    ``data/experiments/<name>.json`` (plain JSON; nothing is unpickled).

    Raises
    ------
    FileNotFoundError
        No such shipped experiment (the message lists them).
    ValueError
        The file is not the tool's output: a missing or unknown key, a value of the wrong type
        or a contrast no paired t-test gives (:class:`Contrast`) is named with the file.
    """
    raw = json.loads(experiment(name).read_text())
    if not isinstance(raw, dict):
        raise ValueError(f"data/experiments/{name}.json does not hold a JSON object")
    raw = dict(raw)
    dose = raw.pop("dose_response", None)
    provenance = raw.pop("provenance", None)
    if not isinstance(provenance, dict):
        raise ValueError(f"data/experiments/{name}.json has no provenance object")
    try:
        contrast = ContrastResult.from_dict(raw)
        dose = DoseResponse.from_dict(dose) if dose is not None else None
    except ValueError as err:
        raise ValueError(f"data/experiments/{name}.json: {err}") from None
    return ShippedExperiment(name, contrast, dose, provenance)
