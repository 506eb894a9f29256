"""How the report functions read per-layer readings: what counts as missing, and what they refuse.

A reading is missing when it is ``None`` (JSON's stand-in for NaN) or NaN; missing readings are
left out before a median is taken, so that the result never depends on the order of the
readings (a NaN inside a sort does), and no verdict is drawn from readings that are all
missing. Every row must have as many layers, and a reading that is a size (an order parameter,
σ2/σ1, ``|γ|``) must not be negative. Used by :mod:`kvattn.course.collapse_report`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from statistics import median

from ._checks import is_int


def real(value: object) -> bool:
    """Whether ``value`` is a finite real number (an int or float, not a bool)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def missing(value: object) -> bool:
    """Whether ``value`` is a missing reading: ``None`` or NaN."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def layer_medians(rows: Sequence, measure: str, where: str) -> tuple[float, ...]:
    """Per layer, the median of ``rows`` (per-layer readings, one list per probe) over the
    readings that are not missing (:func:`missing`): order-independent.

    Raises
    ------
    ValueError
        A row that is not a list, rows with different layer counts, a reading that is not a
        number (infinity is a number), or a layer with no reading that is not missing (naming
        ``measure``, the layer and ``where``).
    """
    if not rows or not all(isinstance(row, list | tuple) for row in rows):
        raise ValueError(f"{measure}: every reading {where} must be a list of per-layer values")
    layers = {len(row) for row in rows}
    if len(layers) != 1:
        raise ValueError(f"{measure}: readings {where} have {sorted(layers)} layers, not one count")
    medians = []
    for layer in range(layers.pop()):
        values = [row[layer] for row in rows]
        numbers = [v for v in values if not missing(v)]
        if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in numbers):
            raise ValueError(f"{measure}: layer {layer} has a reading that is not a number {where}")
        if not numbers:
            raise ValueError(f"{measure}: layer {layer} has no reading {where}")
        medians.append(float(median(float(v) for v in numbers)))
    return tuple(medians)


def check_layer_readings(run: str, fields: Mapping[str, Sequence[float]]) -> None:
    """Refuse a verdict's inputs unless every field of ``fields`` holds one finite number per
    layer, with the same count of layers in each.

    Raises
    ------
    ValueError
        Naming ``run`` and the field: a missing (None, NaN) or infinite reading, no layers, or
        fields with different layer counts.
    """
    counts = {len(values) for values in fields.values()}
    if len(counts) != 1 or 0 in counts:
        raise ValueError(f"{run}: the readings {list(fields)} have {sorted(counts)} layers")
    for name, values in fields.items():
        if not all(real(v) for v in values):
            raise ValueError(
                f"{run}: {name} holds a missing or non-finite reading {tuple(values)}: no verdict "
                "is drawn from it"
            )


def check_finding(r: object) -> None:
    """Refuse a row of :func:`kvattn.course.collapse_report.format_findings` (a
    :class:`kvattn.course.collapse_report.Finding`) unless each reading is missing (``None``) or
    what it measures can be: finite, and not negative where it is a size.

    Raises
    ------
    ValueError
        Naming the row's label and every field at fault.
    """
    sizes = ("order_rms", "sigma_ratio")
    problems = [
        n
        for n in sizes
        if getattr(r, n) is not None and not (real(getattr(r, n)) and getattr(r, n) >= 0)
    ]
    if r.delta_loss is not None and not real(r.delta_loss):
        problems.append("delta_loss")
    interval = r.delta_interval
    if interval is not None and not (
        len(interval) == 2 and all(map(real, interval)) and interval[0] <= interval[1]
    ):
        problems.append("delta_interval (low ≤ high, finite)")
    if r.gamma is not None and not (r.gamma and all(real(g) and g >= 0 for g in r.gamma)):
        problems.append("gamma (one finite |γ| ≥ 0 per layer)")
    kvg = r.kvg_same
    if kvg is not None and not (
        len(kvg) == 2 and all(is_int(k) for k in kvg) and 0 <= kvg[0] <= kvg[1] and kvg[1] > 0
    ):
        problems.append("kvg_same (same ≤ tried, tried ≥ 1)")
    if problems:
        raise ValueError(f"{r.label}: not a reading the table can show: {', '.join(problems)}")
