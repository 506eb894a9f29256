"""Chapter 11's depth experiment, read by its plan (``data/plans/metric_depth.json``): does
contraction through the metric learner's depth make A rank 1?

Each run is the collapse hunt's nearest recipe with ``num_reslayerA`` ∈ :data:`DEPTHS` units and
one of :data:`SEEDS`; its record (``data/metric_depth/<name>.json``) carries the training
probes, each unit's gain and the composite gain of the row map
(:mod:`kvattn.diagnostics.rowmap`). A run's **end reading** of a per-layer measure is, layer by
layer, the median of its last four probes (:func:`kvattn.course.hunt_report.window_reading`), as
the plan says.

* :func:`depth_rows` — each run's end readings, one :class:`DepthRow` per run;
* :func:`depth_reading` — the plan's primary test (:func:`kvattn.stats.dose_verdict` on the
  mean over layers of log10 σ2/σ1 of A against the number of units), and the same line for the
  composite gain;
* :func:`depth_to_reach` — where the fitted line reaches a target, with its uncertainty;
* :func:`format_depth` — the runs as a table of at most 80 characters a line;
* :func:`depth_panels` — a measure along training, one panel per depth, for
  :func:`kvattn.course.plots.reports.run_panels`;
* :func:`live_record` — a run of the plan trained here and now, read like a shipped record.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import median

from scipy import stats as scipy_stats

from .. import data
from ..diagnostics import COLLAPSE_CRITERIA, probe_reading
from ..pretrain import pretrain
from ..reproduce.hunt import hunt_config
from ..stats import DepthReading, dose_verdict
from .collapse_report import MAX_WIDTH
from .hunt_report import tokens_seen, window_reading

#: The plan of the depth experiment (``data/plans/<PLAN>.json``) and its records' folder.
PLAN = "metric_depth"
#: The numbers of residual units in the metric learner the plan compares.
DEPTHS = (2, 4, 8)
#: The plan's fresh seeds, the same at every depth.
SEEDS = (11, 12, 13)
#: The plan's margin, the fall in decades of σ2/σ1 of A from 2 to 8 units the route predicts.
MARGIN = 1.0
#: The planning standard deviation of the primary measure between runs of one recipe (decades).
PLANNED_SD = 0.45


def run_name(depth: int, seed: int) -> str:
    """The plan's name of the run with ``depth`` units and ``seed``: ``depth8_seed11``."""
    return f"depth{depth}_seed{seed}"


def depth_records() -> dict[str, dict]:
    """Every shipped record of the plan, by run name, in the plan's order (depth, then seed).

    Raises
    ------
    FileNotFoundError
        A run of the plan has no shipped record (the message names it and the command that
        makes it).
    """
    records = {}
    for depth in DEPTHS:
        for seed in SEEDS:
            name = run_name(depth, seed)
            records[name] = json.loads(data.hunt_study(PLAN, name).read_text(encoding="utf-8"))
    return records


@dataclass(frozen=True)
class DepthRow:
    """One run's end readings, per layer: ``ratio`` (σ2/σ1 of A), ``order`` (the RMS order
    parameter of G_LM), ``order_mean`` (its ``|mean|`` form, the strict criterion's), ``gamma``
    (mean ``|γ|`` of the last LayerNorm), ``composite`` (the composite gain of the row map),
    ``units`` (per layer, each unit's gain); ``strict_step``: the first probe that meets the
    strict criterion in every layer, else ``None``;
    ``val_loss``: the last validation loss (nats/token)."""

    run: str
    depth: int
    seed: int
    ratio: tuple[float, ...]
    order: tuple[float, ...]
    order_mean: tuple[float, ...]
    gamma: tuple[float, ...]
    composite: tuple[float, ...]
    units: tuple[tuple[float, ...], ...]
    strict_step: int | None
    val_loss: float

    @property
    def log_ratio(self) -> float:
        """The plan's primary measure, the mean over layers of log10 σ2/σ1 of A."""
        return sum(math.log10(v) for v in self.ratio) / len(self.ratio)

    @property
    def log_composite(self) -> float:
        """The mean over layers of log10 of the composite gain."""
        return sum(math.log10(v) for v in self.composite) / len(self.composite)

    @property
    def log_unit_sum(self) -> float:
        """The mean over layers of Σ over units of log10 of each unit's gain, log10 of the
        product of the units' gains, which bounds the composite gain from above."""
        return sum(sum(math.log10(g) for g in layer) for layer in self.units) / len(self.units)


def _unit_end(record: dict, end_step: int) -> tuple[tuple[float, ...], ...]:
    """Per layer and unit, the median of the last four probes' unit gains up to ``end_step``."""
    rows = [v for s, v in zip(record["step"], record["unit_gain"], strict=True) if s <= end_step]
    rows = [v for v in rows if v is not None][-4:]
    if len(rows) < 4:
        raise ValueError(f"unit_gain: {len(rows)} readings, the end reading needs 4")
    return tuple(
        tuple(float(median(r[layer][u] for r in rows)) for u in range(len(rows[0][layer])))
        for layer in range(len(rows[0]))
    )


def depth_rows(records: dict[str, dict]) -> list[DepthRow]:
    """The end readings of each record (:func:`depth_records`), in the order given.

    Raises
    ------
    ValueError
        A record without the probes the plan reads (``A_sigma_ratio``, ``G_order_rms``,
        ``metric_norm_scale``, ``composite_gain``, ``unit_gain``), or with fewer than four.
    """
    rows = []
    for name, record in records.items():
        end = record["step"][-1]
        strict = [
            s
            for i, s in enumerate(record["step"])
            if probe_reading(record, i, "strict", COLLAPSE_CRITERIA["strict"].below).verdict
        ]
        rows.append(
            DepthRow(
                run=name,
                depth=record["recipe"]["model"]["num_reslayerA"],
                seed=record["recipe"]["seed"],
                ratio=window_reading(record, "A_sigma_ratio", end),
                order=window_reading(record, "G_order_rms", end),
                order_mean=window_reading(record, "G_order_mean", end),
                gamma=window_reading(record, "metric_norm_scale", end),
                composite=window_reading(record, "composite_gain", end),
                units=_unit_end(record, end),
                strict_step=strict[0] if strict else None,
                val_loss=record["val_loss"][-1],
            )
        )
    return rows


def depth_reading(rows: Sequence[DepthRow], measure: str = "log_ratio") -> DepthReading:
    """The plan's primary test on ``rows``: the least-squares line of ``measure`` (a
    :class:`DepthRow` property: ``"log_ratio"``, the primary measure, or ``"log_composite"``)
    on the number of units, its fall from 2 to 8 units in decades with one-sided 95 % bounds,
    and the verdict by the plan's rule with :data:`MARGIN` (:func:`kvattn.stats.dose_verdict`).

    Raises
    ------
    ValueError
        An unknown ``measure``, or as :func:`~kvattn.stats.dose_verdict`.
    """
    if measure not in ("log_ratio", "log_composite", "log_unit_sum"):
        raise ValueError(f"measure must be log_ratio, log_composite or log_unit_sum: {measure!r}")
    x = [float(r.depth) for r in rows]
    return dose_verdict(x, [getattr(r, measure) for r in rows], MARGIN)


def depth_to_reach(
    rows: Sequence[DepthRow],
    target: float = -3.0,
    level: float = 0.9,
    measure: str = "log_ratio",
) -> tuple[float, float, float]:
    """Where the fitted line of ``measure`` (as :func:`depth_reading`; by default the primary
    measure, log10 σ2/σ1, whose −3 is the strict criterion's 1e-3; for ``"log_composite"``,
    log10 of float32's resolution 2⁻²⁴ is about −7.2) reaches ``target``: the number of units,
    and a two-sided ``level`` interval from the slope's t interval (the line pivoting about the
    runs' mean). ``inf`` where the slope (or its bound) does not fall.

    Raises
    ------
    ValueError
        As :func:`depth_reading`; ``level`` not in (0, 1).
    """
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level!r}")
    reading = depth_reading(rows, measure)
    x = [float(r.depth) for r in rows]
    y = [getattr(r, measure) for r in rows]
    mx, my = sum(x) / len(x), sum(y) / len(y)
    t = float(scipy_stats.t.ppf(0.5 + level / 2, reading.dof))

    def reach(slope: float) -> float:
        return mx + (target - my) / slope if slope < 0 else math.inf

    steep, shallow = reading.slope - t * reading.se, reading.slope + t * reading.se
    return reach(reading.slope), reach(steep), reach(shallow)


def format_depth(rows: Sequence[DepthRow]) -> str:
    """The runs, one line each: units, seed, σ2/σ1 of A, the composite gain and mean ``|γ|``
    (each per layer, at the end), the validation loss and the first step meeting the strict
    criterion. At most :data:`~kvattn.course.collapse_report.MAX_WIDTH` characters a line.

    Raises
    ------
    ValueError
        A line would be wider (more than two layers).
    """

    def pair(values: Sequence[float]) -> str:
        return " ".join(f"{v:7.1e}" for v in values)

    lines = [
        f"{'N':>2s} {'seed':>4s} {'σ2/σ1 of A':>15s} {'composite gain':>15s} "
        f"{'mean |γ|':>13s} {'val':>5s} {'strict':>6s}",
        f"{'':7s} {'layer 0, 1':>15s} {'layer 0, 1':>15s} {'layer 0, 1':>13s}",
    ]
    for r in rows:
        gamma = " ".join(f"{v:6.2g}" for v in r.gamma)
        strict = "-" if r.strict_step is None else str(r.strict_step)
        lines.append(
            f"{r.depth:2d} {r.seed:4d} {pair(r.ratio):>15s} {pair(r.composite):>15s} "
            f"{gamma:>13s} {r.val_loss:5.2f} {strict:>6s}"
        )
    width = max(len(line) for line in lines)
    if width > MAX_WIDTH:
        raise ValueError(f"the table would be {width} characters wide (at most {MAX_WIDTH})")
    return "\n".join(lines)


def depth_panels(
    records: dict[str, dict], measure: str
) -> dict[str, dict[str, tuple[list[float], list[float]]]]:
    """The panels of :func:`kvattn.course.plots.reports.run_panels`: one per depth (``"2 units"``
    …), a series per seed and layer (``"seed 11, layer 0"``) of ``measure`` (a per-layer probe
    measure) against the tokens seen (millions).

    Raises
    ------
    ValueError
        A record without ``measure`` at some probe.
    """
    panels: dict[str, dict[str, tuple[list[float], list[float]]]] = {}
    for record in records.values():
        depth = record["recipe"]["model"]["num_reslayerA"]
        values = record.get(measure)
        if not values or any(v is None for v in values):
            raise ValueError(f"{record['name']}: no {measure} at some probe")
        x = tokens_seen(record)
        for layer in range(len(values[0])):
            label = f"seed {record['recipe']['seed']}, layer {layer}"
            panels.setdefault(f"{depth} units", {})[label] = (x, [v[layer] for v in values])
    return panels


def live_record(
    name: str, device: str, runs: Path = Path("runs"), steps: int | None = None
) -> dict:
    """Train the plan's run ``name`` here from its recipe, with a progress bar, and return what
    its probes measured in the layout of a shipped record (``recipe``, ``step`` and every probe
    measure), for :func:`depth_panels`. The run goes to ``runs/metric_depth/<name>``, replacing
    an earlier one there. About 25 minutes on one CPU thread for a depth-8 run; a GPU is faster.
    ``steps``: a pilot, every length of the recipe shortened in proportion (as
    ``kvattn-reproduce hunt --steps``).

    Raises
    ------
    ~kvattn.reproduce.files.ReproduceError
        ``name`` is not a run of the plan, or the recipe is refused on ``device``.
    """
    cfg = hunt_config(name, steps, Path(runs), device, True, study=PLAN)
    result = pretrain(cfg, progress=True)
    return {"name": name, "recipe": cfg.to_dict(), **result.probes}


def collapsed_run(rows: Sequence[DepthRow]) -> str:
    """The course's collapsed model: of the runs whose end readings meet the strict criterion in
    every layer (σ2/σ1 of A and the ``|mean|`` order parameter below 1e-3; the plan's records ship
    the final model of every run that met it at a probe), the one with the lowest primary
    measure.

    Raises
    ------
    ValueError
        No run ends below the strict criterion in every layer.
    """
    below = COLLAPSE_CRITERIA["strict"].below
    met = [r for r in rows if max(r.ratio) < below and max(r.order_mean) < below]
    if not met:
        raise ValueError("no run of the depth plan ends below the strict criterion")
    return min(met, key=lambda r: r.log_ratio).run


def checkpoint(name: str) -> Path:
    """The shipped final model of the plan's run ``name`` (``data/metric_depth/<name>/``),
    shipped because the run met the strict criterion.

    Raises
    ------
    FileNotFoundError
        The run shipped no model (it never met the strict criterion), naming the runs that did.
    """
    folder = data.hunt_study(PLAN, name).with_suffix("")
    if not (folder / "config.json").is_file():
        shipped = sorted(p.name for p in folder.parent.iterdir() if (p / "config.json").is_file())
        raise FileNotFoundError(
            f"the depth run {name} shipped no model (it never met the strict criterion); "
            f"the runs that did: {shipped or 'none'}"
        )
    return folder
