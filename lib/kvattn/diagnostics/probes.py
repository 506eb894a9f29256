"""The probe record: the collapse-measure trajectories pre-training saves as ``probes.json``.

:func:`new_probes` begins one, :func:`append_probe` adds a probe
(:meth:`~kvattn.diagnostics.collapse.CollapseMeasures.as_record`), and :func:`load_probes` reads
one back, checking every entry's type and shape where the file can be named.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from .._checks import is_int, is_real
from .collapse import (
    COLLAPSE_LAYER_MEASURES,
    COLLAPSE_MODEL_MEASURES,
    COLLAPSE_NORM_MEASURES,
    COLLAPSE_ROW_MAP_MEASURES,
)

#: The file of a checkpoint that holds the collapse-measure trajectories.
PROBES_FILE = "probes.json"


def new_probes(probe_blocks: int) -> dict:
    """An empty trajectory: ``probe_blocks``, ``step`` and one list per recorded measure."""
    names = [*COLLAPSE_LAYER_MEASURES, *(f"{n}_heads" for n in COLLAPSE_LAYER_MEASURES)]
    names += [*COLLAPSE_MODEL_MEASURES, *COLLAPSE_NORM_MEASURES, *COLLAPSE_ROW_MAP_MEASURES]
    return {"probe_blocks": probe_blocks, "step": [], **{n: [] for n in names}}


def append_probe(probes: dict, step: int, record: dict) -> None:
    """Add one probe, ``record`` (:meth:`~kvattn.diagnostics.collapse.CollapseMeasures.as_record`)
    taken after ``step`` optimiser steps, to the trajectory ``probes`` in place. A trajectory begun
    before a measure was recorded (resumed from an older checkpoint) gets that measure's list, with
    ``None`` (not measured) at its earlier steps.

    Raises
    ------
    ValueError
        ``step`` does not come after the trajectory's last step, or ``record`` lacks a measure
        of :func:`new_probes` (checked before anything is added).
    """
    if not is_int(step) or step < 0 or (probes["step"] and step <= probes["step"][-1]):
        raise ValueError(f"step must be an int >= 0 after {probes['step'][-1:]}, got {step!r}")
    missing = sorted(set(new_probes(0)) - {"probe_blocks", "step"} - set(record))
    if missing:
        raise ValueError(f"the record lacks the measures {', '.join(missing)}")
    for name, value in record.items():
        probes.setdefault(name, [None] * len(probes["step"])).append(value)
    probes["step"].append(step)


def load_probes(path: str | Path) -> dict:
    """The collapse-measure trajectories a pre-training run with ``probe_every`` saved.

    ``path``: a ``probes.json`` file, a checkpoint folder holding one, or a run's ``out_dir``
    (its ``checkpoint/``). The result is plain JSON: ``step`` (optimiser steps done when the
    measures were taken, 0 = before training), ``probe_blocks``, and for every measure of
    :class:`kvattn.diagnostics.collapse.CollapseMeasures` one list with an entry per step: per layer
    (``G_order_mean`` …), per layer and head (``G_order_mean_heads`` …) or one number
    (``delta_loss`` …); ``None`` where a value is undefined (nan). It is what
    :func:`kvattn.course.plots.reports.collapse_trajectories` draws. The LayerNorm measures
    (:data:`~kvattn.diagnostics.collapse.COLLAPSE_NORM_MEASURES`, one number per layer) are
    optional, since trajectories recorded before they were added lack them (the records stay as
    the runs made them); where present an entry may be ``None`` as a whole (not measured at that
    step).

    Raises
    ------
    TypeError
        ``path`` is not a str or os.PathLike.
    FileNotFoundError
        No ``probes.json`` there.
    ValueError
        Not a UTF-8 JSON object with ``probe_blocks`` (an int ≥ 2), a ``step`` list of
        increasing ints ≥ 0 and the list of every measure, one entry per step, each of the form
        above with numbers (finite) or None, as many layers and heads at every step.
    """
    if not isinstance(path, str | os.PathLike):
        raise TypeError(
            "path must be a str or os.PathLike (a probes.json file or the folder holding it), "
            f"got {type(path).__name__}"
        )
    path = Path(path)
    for candidate in (path, path / PROBES_FILE, path / "checkpoint" / PROBES_FILE):
        if candidate.is_file():
            break
    else:
        raise FileNotFoundError(f"no {PROBES_FILE} in {path} (was the run made with probe_every?)")
    try:
        probes = json.loads(candidate.read_text(encoding="utf-8"))
    except UnicodeDecodeError as err:
        raise ValueError(f"{candidate} is not a UTF-8 text (JSON) file: {err}") from None
    except json.JSONDecodeError as err:
        raise ValueError(f"{candidate} is not valid JSON: {err}") from None
    if not isinstance(probes, dict) or not isinstance(probes.get("step"), list):
        raise ValueError(f"{candidate} must hold a JSON object with a 'step' list")
    optional = {*COLLAPSE_NORM_MEASURES, *COLLAPSE_ROW_MAP_MEASURES} - set(probes)
    expected = set(new_probes(0)) - optional
    missing = sorted(expected - set(probes))
    if missing:
        raise ValueError(f"{candidate} lacks the measures {', '.join(missing)}")
    for name in expected - {"probe_blocks", "step"}:
        if not isinstance(probes[name], list) or len(probes[name]) != len(probes["step"]):
            raise ValueError(f"{candidate}: {name!r} must be a list with one entry per step")
    _check_probe_entries(probes, candidate)
    return probes


def _check_probe_entries(probes: dict, candidate: Path) -> None:
    """Raise unless the entries of a trajectory have the types and shapes that
    :meth:`~kvattn.diagnostics.collapse.CollapseMeasures.as_record` writes (a NaN as None): what the
    figures and :func:`~kvattn.diagnostics.criteria.collapsed` read, checked here, where the file
    can be named."""
    if not is_int(probes["probe_blocks"]) or probes["probe_blocks"] < 2:
        raise ValueError(
            f"{candidate}: 'probe_blocks' must be an int >= 2, got {probes['probe_blocks']!r}"
        )
    for i, step in enumerate(probes["step"]):
        if not is_int(step) or step < 0 or (i and step <= probes["step"][i - 1]):
            raise ValueError(
                f"{candidate}: 'step' must be a list of increasing ints >= 0, got step[{i}] = "
                f"{step!r}"
            )
    if not probes["step"]:
        return

    def numbers(values: object, n: int) -> bool:
        return (
            isinstance(values, list)
            and len(values) == n
            and all(v is None or is_real(v) for v in values)
        )

    # the numbers of layers and heads most entries have: a malformed entry is then the one named
    rows = [e for n in COLLAPSE_LAYER_MEASURES for e in probes[n] if isinstance(e, list)]
    layers = _most_common([len(e) for e in rows])
    rows = [
        r
        for n in COLLAPSE_LAYER_MEASURES
        for e in probes[f"{n}_heads"]
        if isinstance(e, list)
        for r in e
        if isinstance(r, list)
    ]
    heads = _most_common([len(r) for r in rows])
    for name in COLLAPSE_LAYER_MEASURES:
        for i, entry in enumerate(probes[name]):
            if not numbers(entry, layers):
                raise ValueError(
                    f"{candidate}: {name}[{i}] must be a list of {layers} numbers (or null), one "
                    f"per layer, got {_short(entry)}"
                )
        for i, entry in enumerate(probes[f"{name}_heads"]):
            if not (
                isinstance(entry, list)
                and len(entry) == layers
                and all(numbers(row, heads) for row in entry)
            ):
                raise ValueError(
                    f"{candidate}: {name}_heads[{i}] must be a list of {layers} lists (one per "
                    f"layer) of {heads} numbers (or null), one per head, got {_short(entry)}"
                )
    for name in COLLAPSE_MODEL_MEASURES:
        for i, value in enumerate(probes[name]):
            if not (value is None or is_real(value)):
                raise ValueError(
                    f"{candidate}: {name}[{i}] must be a number (or null), got {_short(value)}"
                )
    per_layer = set(COLLAPSE_NORM_MEASURES) | set(COLLAPSE_ROW_MAP_MEASURES) - {"unit_gain"}
    for name in per_layer & set(probes):
        for i, entry in enumerate(probes[name]):
            if not (entry is None or numbers(entry, layers)):
                raise ValueError(
                    f"{candidate}: {name}[{i}] must be null (not measured) or a list of {layers} "
                    f"numbers (or null), one per layer, got {_short(entry)}"
                )
    units = _most_common([len(r) for e in probes.get("unit_gain", []) if e for r in e])
    for i, entry in enumerate(probes.get("unit_gain", [])):
        if not (
            entry is None
            or (
                isinstance(entry, list)
                and len(entry) == layers
                and all(numbers(row, units) for row in entry)
            )
        ):
            raise ValueError(
                f"{candidate}: unit_gain[{i}] must be null (not measured) or a list of {layers} "
                f"lists (one per layer) of {units} numbers (or null), one per unit, got "
                f"{_short(entry)}"
            )


def _most_common(lengths: list[int]) -> int:
    """The most frequent of ``lengths`` but 0 (1 when there is none): a model has a layer and a
    head at least, and an empty list of layers would read as collapsed in
    :func:`~kvattn.diagnostics.criteria.collapsed`."""
    lengths = [n for n in lengths if n > 0]
    return max(set(lengths), key=lengths.count) if lengths else 1


def _short(value: object, limit: int = 80) -> str:
    """``repr(value)``, cut to ``limit`` characters: entries can be long lists."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
