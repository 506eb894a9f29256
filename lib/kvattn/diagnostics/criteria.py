"""The collapse criteria, defined once, and the one reading of a model or a probe against them.

:data:`COLLAPSE_CRITERIA` (:func:`collapse_criteria` as a table), read by
:func:`collapse_reading` (every layer and any layer), :func:`probe_reading` on a trajectory
(:func:`~kvattn.diagnostics.probes.load_probes`), and :func:`collapsed`, the collapse hunt's
verdict (``kvattn-reproduce hunt``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass

import torch

from .._checks import is_real

Tensor = torch.Tensor


@dataclass(frozen=True)
class CollapseCriterion:
    """One rule for calling a model collapsed. A layer meets it when each of ``measures`` (the
    names of :func:`~kvattn.diagnostics.probes.load_probes` and of a hunt record) is below ``below``
    there; a layer's value is the mean over its heads (``heads="mean"``, as the trajectories record
    it) or its most collapsed head's (``"min"``). ``layers`` is the rule's own count: ``"every"``
    layer or ``"any"`` layer must meet it; :class:`CriterionReading` reports both. ``source``: a bib
    key of ``book/references.bib`` or ``"ours"``."""

    name: str
    measures: tuple[str, ...]
    below: float
    heads: str
    layers: str
    source: str
    meaning: str


#: The collapse criteria of the course, by name, from loosest to tightest (chapter 11):
#: ``study`` and ``row_map`` are the training-dynamics study's, ``strict`` is ours (the collapse
#: hunt's, ``data/plans/collapse_hunt.json``), ``published`` the published 110M model's state.
COLLAPSE_CRITERIA = {
    c.name: c
    for c in (
        CollapseCriterion(
            "study", ("G_order_rms",), 0.01, "mean", "every", "gokden2026dynamics",
            "G_LM input-invariant (RMS order parameter)",
        ),
        CollapseCriterion(
            "row_map", ("row_map_gain",), 0.1, "min", "any", "gokden2026dynamics",
            "row map flat (gain of the most collapsed head)",
        ),
        CollapseCriterion(
            "strict", ("G_order_mean", "A_sigma_ratio"), 1e-3, "mean", "every", "ours",
            "G_LM invariant (|mean| order) and A near rank 1",
        ),
        CollapseCriterion(
            "published", ("G_order_mean",), 1e-6, "mean", "every", "gokden2026soc",
            "the published model's G_LM (order parameter 0)",
        ),
    )
}  # fmt: skip


def collapse_criteria() -> list[dict]:
    """:data:`COLLAPSE_CRITERIA` as rows for a table
    (``pandas.DataFrame(collapse_criteria())``): the fields of :class:`CollapseCriterion`, the
    measures joined by "and"."""
    return [{**asdict(c), "measures": " and ".join(c.measures)} for c in COLLAPSE_CRITERIA.values()]


@dataclass(frozen=True)
class CriterionReading:
    """A model (or a probe of a trajectory) read against one criterion. ``ratio``: per layer,
    the largest of the criterion's measures over its threshold (``inf`` where a value is
    undefined); ``met``: per layer, whether every measure is below the threshold (compared
    directly, not through the ratio)."""

    criterion: CollapseCriterion
    ratio: tuple[float, ...]
    met: tuple[bool, ...]

    every_layer = property(lambda self: all(self.met), doc="Every layer meets the criterion.")
    any_layer = property(lambda self: any(self.met), doc="Some layer meets the criterion.")
    verdict = property(
        lambda self: self.every_layer if self.criterion.layers == "every" else self.any_layer,
        doc="Whether the criterion's own rule holds (``every_layer`` or ``any_layer``).",
    )
    distance = property(
        lambda self: max(self.ratio),
        doc="How far the least collapsed layer is above the threshold, as a factor (below 1 when "
        "every layer meets it).",
    )
    nearest = property(
        lambda self: min(self.ratio),
        doc="How far the most collapsed layer is above the threshold, as a factor (below 1 when "
        "some layer meets it).",
    )


def collapse_reading(
    values: Mapping, criterion: str = "strict", below: float | None = None
) -> CriterionReading:
    """Read per-layer values against one of :data:`COLLAPSE_CRITERIA`:
    the one function that says whether a model, or a probe of a trajectory, has collapsed.

    Parameters
    ----------
    values:
        For each of the criterion's measures, one value per layer (a list or a tensor ``[L]``),
        or one list of per-head values per layer (a tensor ``[L, H]``), reduced to the layer's
        value by the criterion's ``heads`` rule; ``None`` or ``nan`` is undefined and never
        meets the criterion.
    criterion:
        A name of :data:`COLLAPSE_CRITERIA`.
    below:
        The threshold, when a record names its own (it must then equal the criterion's: a
        record made under another threshold is refused rather than read under this one).

    Returns
    -------
    :class:`CriterionReading`.

    Raises
    ------
    ValueError
        An unknown criterion, a threshold other than the criterion's, a missing measure, no
        layers, measures with different numbers of layers, or a value that is neither None nor
        a real number ≥ 0.
    """
    if criterion not in COLLAPSE_CRITERIA:
        raise ValueError(f"unknown criterion {criterion!r}, not one of {list(COLLAPSE_CRITERIA)}")
    c = COLLAPSE_CRITERIA[criterion]
    if below is not None and below != c.below:
        raise ValueError(f"the {criterion} criterion's threshold is {c.below:g}, not {below!r}")
    if not isinstance(values, Mapping) or any(m not in values for m in c.measures):
        raise ValueError(f"the {criterion} criterion needs per-layer values of {c.measures}")
    rows = [v.tolist() if isinstance(v, Tensor) else list(v) for v in map(values.get, c.measures)]
    layers = [[_layer_value(v, c.heads) for v in row] for row in rows]
    if not layers[0] or any(len(x) != len(layers[0]) for x in layers):
        raise ValueError(f"{c.measures} need the same number (≥ 1) of layers each")
    ratio, met = [], []
    for per_layer in zip(*layers, strict=True):
        met.append(all(v is not None and v < c.below for v in per_layer))
        ratio.append(max(math.inf if v is None else v / c.below for v in per_layer))
    return CriterionReading(c, tuple(ratio), tuple(met))


def _layer_value(entry: object, heads: str) -> float | None:
    """One layer's value: the entry itself, or its heads reduced by ``heads``; None if undefined."""
    if isinstance(entry, list | tuple):
        if any(_layer_value(v, heads) is None for v in entry) or not entry:
            return None
        return min(entry) if heads == "min" else sum(entry) / len(entry)
    if entry is None or (isinstance(entry, float) and math.isnan(entry)):
        return None
    if not is_real(entry) or entry < 0:
        raise ValueError(f"a measure's value must be None or a real number >= 0, got {entry!r}")
    return float(entry)


def probe_reading(
    probes: dict, at: int, criterion: str = "strict", below: float | None = None
) -> CriterionReading:
    """:func:`collapse_reading` of probe ``at`` (an index into ``probes["step"]``) of a
    trajectory as :func:`~kvattn.diagnostics.probes.load_probes` returns it (or a hunt record, which
    holds one).

    Raises
    ------
    ValueError
        As :func:`collapse_reading`, or a criterion whose measures the trajectory does not
        record (the row-map gain is measured on a run's final model only).
    """
    measures = COLLAPSE_CRITERIA[criterion].measures if criterion in COLLAPSE_CRITERIA else ()
    if any(not isinstance(probes.get(m), list) for m in measures):
        raise ValueError(f"the trajectory does not record {measures} ({criterion} criterion)")
    return collapse_reading({m: probes[m][at] for m in measures}, criterion, below)


def collapsed(probes: dict, at: int, below: float) -> bool:
    """Whether probe ``at`` of a trajectory meets the collapse hunt's (``strict``) criterion in
    every layer (:func:`probe_reading`); ``below`` is the record's threshold, which must be the
    criterion's. An undefined value (``None``) does not count as collapsed."""
    return probe_reading(probes, at, "strict", below).every_layer
