"""Chapter 11's collapse hunt and its constant-rate test, read by their plans.

The hunt (``data/plans/collapse_hunt.json``) turns one knob of a base recipe per run; this module
names its **nearest** run (:data:`HUNT_NEAREST`, the lowest :func:`end_value`), draws its runs by
knob (:func:`knob_panels`, :func:`gamma_panels`) and prints its reruns (:func:`format_reruns`).
The constant-rate test (``data/plans/constant_rate.json``) compares each constant-rate run with
its cosine counterpart in windows of probes (:func:`window_reading`, :func:`route_reading`) and
decides by the plan's rule (:func:`route_verdict`, :func:`format_route`, :func:`route_panels`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from statistics import median

from .. import diagnostics
from ..readings import check_layer_readings
from ..readings import layer_medians as _layer_medians
from ..stats import spearman

#: The collapse hunt's **nearest** run: the lowest :func:`end_value` of the hunt (chapter 11).
HUNT_NEAREST = "lr1e-2_wu500_seed2"
#: The sweep's lowest-order run, the lowest :func:`end_value` of the sweep's trajectories.
SWEEP_BEST = "sweep_lr3e-3_wu500"
#: The collapse hunt's runs grouped by the knob each turns in the base recipe (the panels of
#: chapter 11's small multiples, :func:`knob_panels`); a seed pair shares its knob's panel.
HUNT_KNOBS = {
    "base (rate 3e-3, warm-up 50)": ("base", "base_seed2"),
    "rate 1e-2, warm-up 500": ("lr1e-2_wu500", "lr1e-2_wu500_seed2"),
    "rate 1e-2, warm-up 50": ("lr1e-2_wu50",),
    "rate 3e-2, warm-up 2000": ("lr3e-2_wu2000",),
    "weight decay 1": ("wd1",),
    "batch 64 (1,500 steps)": ("batch64",),
    "corpus of 1.5M chars": ("corpus1.5M",),
    "metric learner depth 8": ("metric_depth8",),
}
#: The series names of a knob's runs in :func:`knob_panels`, in :data:`HUNT_KNOBS`' order.
SEEDS = ("first seed", "second seed")


def end_value(probes: dict) -> float:
    """A trajectory's **end value**: the median, over the last quarter of its probes, of the
    RMS order parameter of G_LM in the least collapsed layer (``probes["G_order_rms"]``, one
    list of per-layer values per probe, as :func:`~kvattn.diagnostics.probes.load_probes`
    returns it). A median of several readings, since one reading can swing several-fold from the
    next (:func:`largest_swing`).

    Raises
    ------
    ValueError
        No ``G_order_rms`` readings, or a reading with no value in any layer.
    """
    values = probes.get("G_order_rms") if isinstance(probes, dict) else None
    if not values:
        raise ValueError("probes hold no G_order_rms readings")
    worst = []
    for layers in values:
        known = [v for v in layers if v is not None]
        if not known:
            raise ValueError("a G_order_rms reading has no value in any layer")
        worst.append(max(known))
    return float(median(worst[-max(1, len(worst) // 4) :]))


def lowest_end(records: dict[str, dict]) -> str:
    """The name of the run with the lowest :func:`end_value` among ``records`` (name → probes):
    on the collapse hunt's records the run the course calls **nearest** (:data:`HUNT_NEAREST`),
    on the sweep's trajectories its best run (:data:`SWEEP_BEST`).

    Raises
    ------
    ValueError
        ``records`` empty, or as :func:`end_value`.
    """
    if not records:
        raise ValueError("records is empty")
    ends = {name: end_value(probes) for name, probes in records.items()}
    return min(ends, key=ends.__getitem__)


def largest_swing(values: Sequence[float]) -> float:
    """The largest factor between two consecutive readings of a positive measure,
    max over i of max(v[i+1]/v[i], v[i]/v[i+1]): how far one reading can sit from the next,
    the scale against which a single lowest reading is read.

    Raises
    ------
    ValueError
        Fewer than two values, or a value not a positive finite number.
    """
    values = list(values)
    if len(values) < 2:
        raise ValueError("need at least two readings")
    if not all(isinstance(v, (int, float)) and math.isfinite(v) and v > 0 for v in values):
        raise ValueError("readings must be positive finite numbers")
    return max(max(a / b, b / a) for a, b in pairwise(values))


def tokens_seen(record: dict) -> list[float]:
    """Millions of training tokens a run had seen at each of its probes (``record["step"]`` and
    its recipe's ``batch_size`` × ``block_size``): the common axis of runs with other batches."""
    per_step = record["recipe"]["batch_size"] * record["recipe"]["block_size"]
    return [s * per_step / 1e6 for s in record["step"]]


def knob_panels(
    records: dict[str, dict], values: Callable[[dict], Sequence[float]]
) -> dict[str, dict[str, tuple[list[float], list[float]]]]:
    """The panels of :func:`kvattn.course.plots.reports.run_panels` for the collapse hunt: per knob
    of :data:`HUNT_KNOBS`, each of its runs (named by :data:`SEEDS`) as (:func:`tokens_seen`,
    ``values(record)``). ``records``: run name → hunt record (with its probes at the top level,
    as shipped); a knob none of whose runs is in ``records`` is left out.

    Raises
    ------
    ValueError
        ``values`` returns a sequence of another length than the record's probes.
    """
    panels = {}
    for knob, names in HUNT_KNOBS.items():
        series = {}
        for seed, name in zip(SEEDS, names, strict=False):
            if name in records:
                x, y = tokens_seen(records[name]), list(values(records[name]))
                if len(y) != len(x):
                    raise ValueError(f"{name}: {len(y)} values for {len(x)} probes")
                series[seed] = (x, y)
        if series:
            panels[knob] = series
    return panels


#: The series of :func:`gamma_panels`, per seed: the order parameter (solid) and mean ``|γ|``.
GAMMA_SERIES = tuple(f"{what}, {seed}" for seed in SEEDS for what in ("order (RMS)", "|γ|"))


def gamma_panels(records: dict[str, dict]) -> dict[str, dict[str, tuple[list, list]]]:
    """:func:`knob_panels` of two measures at once, for runs that recorded γ (the hunt's reruns):
    per knob and seed, the RMS order parameter of G_LM and mean ``|γ|`` of the metric learner's
    last LayerNorm, each in its least collapsed layer (the largest value over the layers), named
    as :data:`GAMMA_SERIES`.

    Raises
    ------
    ValueError
        A record without ``G_order_rms`` or ``metric_norm_scale`` readings at every probe.
    """

    def largest(measure: str) -> Callable[[dict], list[float]]:
        def values(record: dict) -> list[float]:
            rows = record.get(measure)
            if not rows or any(row is None for row in rows):
                raise ValueError(f"{record.get('name', 'a record')}: {measure} not at every probe")
            return [max(v for v in row if v is not None) for row in rows]

        return values

    order = knob_panels(records, largest("G_order_rms"))
    gamma = knob_panels(records, largest("metric_norm_scale"))
    return {
        knob: {
            f"{what}, {seed}": panel[seed]
            for seed in series
            for what, panel in (("order (RMS)", series), ("|γ|", gamma[knob]))
        }
        for knob, series in order.items()
    }


#: Probes per window reading of the constant-rate test (``data/plans/constant_rate.json``).
WINDOW_PROBES = 4


def window_reading(probes: dict, measure: str, end_step: int) -> tuple[float, ...]:
    """A per-layer measure read as the constant-rate plan reads it: for each layer, the median of
    the last :data:`WINDOW_PROBES` probes taken at or before ``end_step`` (one reading can swing
    up to tenfold from the next, chapter 11). ``probes``: a trajectory (``step`` and ``measure``,
    one list of per-layer values per probe, as :func:`~kvattn.diagnostics.probes.load_probes`
    returns it); a missing reading (``None`` for a probe or a layer, or NaN) is left out before
    the median, so the result does not depend on the order of the probes.

    Raises
    ------
    ValueError
        No ``measure`` in ``probes``, ``step`` and ``measure`` of different lengths, fewer than
        :data:`WINDOW_PROBES` probes up to ``end_step``, readings with different layer counts or
        a value that is not a number, or a layer with no value among them.
    """
    if not isinstance(probes, dict) or measure not in probes or "step" not in probes:
        raise ValueError(f"the probes hold no {measure!r} trajectory")
    if len(probes["step"]) != len(probes[measure]):
        raise ValueError(
            f"{measure}: {len(probes[measure])} readings for {len(probes['step'])} probe steps"
        )
    rows = [v for s, v in zip(probes["step"], probes[measure], strict=True) if s <= end_step]
    rows = [v for v in rows if v is not None][-WINDOW_PROBES:]
    if len(rows) < WINDOW_PROBES:
        raise ValueError(
            f"{measure}: {len(rows)} readings up to step {end_step}, "
            f"the window needs {WINDOW_PROBES}"
        )
    return _layer_medians(rows, measure, f"up to step {end_step}")


@dataclass(frozen=True)
class RouteReading:
    """One run of the constant-rate test, read by the plan's windows (per layer):
    ``gamma_early``/``gamma_late``, mean ``|γ|`` of the metric learner's last LayerNorm at the
    early window (ending where the cosine counterpart ended) and at the run's end;
    ``ratio_early``/``ratio_late``, σ2/σ1 of A there; ``ratio_cosine``, σ2/σ1 of A of the
    cosine counterpart at its end; ``order_early``/``order_late``, the RMS order parameter of
    G_LM; ``strict_step``: the first probe meeting the strict criterion, else ``None``;
    ``strict_closest``: how far above that criterion the run came at its closest probe, as a
    factor (:attr:`kvattn.diagnostics.criteria.CriterionReading.distance`);
    ``val_loss`` and ``val_loss_cosine``: the last validation loss of the run and of its cosine
    counterpart (nats/token)."""

    run: str
    counterpart: str
    gamma_early: tuple[float, ...]
    gamma_late: tuple[float, ...]
    ratio_early: tuple[float, ...]
    ratio_late: tuple[float, ...]
    ratio_cosine: tuple[float, ...]
    order_early: tuple[float, ...]
    order_late: tuple[float, ...]
    strict_step: int | None
    strict_closest: float
    val_loss: float
    val_loss_cosine: float

    @property
    def gamma_shrinks(self) -> bool:
        """The late γ below the early one in every layer."""
        return all(
            late < early for early, late in zip(self.gamma_early, self.gamma_late, strict=True)
        )

    @property
    def ratio_third(self) -> bool:
        """The late σ2/σ1 of A at most a third of the cosine counterpart's, in every layer."""
        return all(
            late <= cos / 3 for cos, late in zip(self.ratio_cosine, self.ratio_late, strict=True)
        )

    @property
    def ratio_below_cosine(self) -> bool:
        """Some layer's late σ2/σ1 of A below the cosine counterpart's."""
        return any(late < cos for cos, late in zip(self.ratio_cosine, self.ratio_late, strict=True))


def route_reading(run: str, record: dict, counterpart: str, cosine: dict) -> RouteReading:
    """Read a constant-rate run ``record`` and its cosine ``counterpart``'s record ``cosine``
    (collapse-hunt records, or any dicts with their probes) by the plan's windows: early at the
    counterpart's last step, late at the run's last step.

    Raises
    ------
    ValueError
        As :func:`window_reading`, or a run whose last step is not beyond its counterpart's.
    """
    early, late = cosine["step"][-1], record["step"][-1]
    if late <= early:
        raise ValueError(f"{run} ends at step {late}, not beyond its counterpart's {early}")
    strict = diagnostics.COLLAPSE_CRITERIA["strict"].below
    readings = [
        diagnostics.probe_reading(record, i, "strict", strict) for i in range(len(record["step"]))
    ]
    hit = [s for s, r in zip(record["step"], readings, strict=True) if r.verdict]

    def read(probes: dict, measure: str, step: int) -> tuple[float, ...]:
        return window_reading(probes, measure, step)

    return RouteReading(
        run=run,
        counterpart=counterpart,
        gamma_early=read(record, "metric_norm_scale", early),
        gamma_late=read(record, "metric_norm_scale", late),
        ratio_early=read(record, "A_sigma_ratio", early),
        ratio_late=read(record, "A_sigma_ratio", late),
        ratio_cosine=read(cosine, "A_sigma_ratio", early),
        order_early=read(record, "G_order_rms", early),
        order_late=read(record, "G_order_rms", late),
        strict_step=hit[0] if hit else None,
        strict_closest=min(r.distance for r in readings),
        val_loss=float(record["val_loss"][-1]),
        val_loss_cosine=float(cosine["val_loss"][-1]),
    )


def route_verdict(readings: Sequence[RouteReading]) -> str:
    """The constant-rate plan's decision rule over its runs: ``"supported"`` when in every run
    γ shrinks from the early to the late window in every layer and σ2/σ1 of A ends at most a
    third of the cosine counterpart's in every layer; ``"refuted"`` when in every run γ does not
    shrink in some layer and no layer's σ2/σ1 of A ends below the counterpart's; else
    ``"not resolved"``.

    No verdict is drawn from a reading that is missing: every value the rule compares must be a
    finite number, with one per layer in each field.

    Raises
    ------
    ValueError
        No readings, or a reading with a NaN, infinite or missing value or with fields of
        different layer counts (naming the run and the field).
    """
    if not readings:
        raise ValueError("no readings")
    for r in readings:
        check_layer_readings(
            r.run,
            {n: getattr(r, n) for n in ("gamma_early", "gamma_late", "ratio_late", "ratio_cosine")},
        )
    if all(r.gamma_shrinks and r.ratio_third for r in readings):
        return "supported"
    if all(not r.gamma_shrinks and not r.ratio_below_cosine for r in readings):
        return "refuted"
    return "not resolved"


def format_route(readings: Sequence[RouteReading]) -> str:
    """The readings as a table of at most :data:`~kvattn.course.collapse_report.MAX_WIDTH`
    characters a line: per run and layer, mean ``|γ|`` early → late, σ2/σ1 of A of the cosine
    counterpart at its end and of the run early → late; under the table, each run's last validation
    loss beside its cosine counterpart's, how close it came to the strict criterion (or when it met
    it), and the plan's verdict
    (:func:`route_verdict`)."""
    lines = [
        f"{'':28s} {'':5s} {'mean |γ|':>15s} {'σ2/σ1 of A':>25s}",
        f"{'run':28s} {'layer':>5s} {'early→late':>15s} {'cosine':>9s} {'early→late':>15s}",
    ]

    def pair(a: float, b: float) -> str:
        return f"{a:.2g}→{b:.2g}"

    for r in readings:
        for layer in range(len(r.gamma_early)):
            name = r.run if layer == 0 else ""
            lines.append(
                f"{name:28s} {layer:>5d} {pair(r.gamma_early[layer], r.gamma_late[layer]):>15s} "
                f"{r.ratio_cosine[layer]:>9.2g} "
                f"{pair(r.ratio_early[layer], r.ratio_late[layer]):>15s}"
            )
    for r in readings:
        strict = (
            f"strict: closest ×{r.strict_closest:.0f}"
            if r.strict_step is None
            else f"strict: met at {r.strict_step:,}"
        )
        lines.append(
            f"{r.run}: val loss {r.val_loss:.2f} (cosine {r.val_loss_cosine:.2f}), {strict}"
        )
    lines.append(f"the plan's verdict: {route_verdict(readings)}")
    return "\n".join(lines)


#: The series of :func:`route_panels`: σ2/σ1 of A (solid) and mean ``|γ|`` (dashed), each for the
#: constant-rate run and for its cosine counterpart (γ from the counterpart's rerun: another draw
#: of its recipe, since the hunt's record lacks γ).
ROUTE_SERIES = (
    "σ2/σ1 of A, constant",
    "σ2/σ1 of A, cosine",
    "|γ|, constant",
    "|γ|, cosine (rerun)",
)


def route_panels(
    runs: dict[str, tuple[dict, dict, dict | None]],
) -> dict[str, dict[str, tuple[list[float], list[float]]]]:
    """The panels of :func:`kvattn.course.plots.reports.run_panels` for the constant-rate test: one
    per run and layer, each with :data:`ROUTE_SERIES` against :func:`tokens_seen`. ``runs``: a
    label (such as "first seed") → (the constant-rate record, its cosine counterpart's hunt
    record, a rerun of the counterpart that recorded γ or ``None``); the counterpart's γ comes
    from its rerun, since the hunt's records lack it.

    Raises
    ------
    ValueError
        A record without the measures, or records with different numbers of layers.
    """
    panels = {}
    for label, (constant, cosine, rerun) in runs.items():
        layers = len(constant["A_sigma_ratio"][0])
        if len(cosine["A_sigma_ratio"][0]) != layers:
            raise ValueError(f"{label}: the run and its counterpart differ in layers")
        for layer in range(layers):
            series = {
                ROUTE_SERIES[0]: _layer_series(constant, "A_sigma_ratio", layer, label),
                ROUTE_SERIES[1]: _layer_series(cosine, "A_sigma_ratio", layer, label),
                ROUTE_SERIES[2]: _layer_series(constant, "metric_norm_scale", layer, label),
            }
            if rerun is not None:
                series[ROUTE_SERIES[3]] = _layer_series(rerun, "metric_norm_scale", layer, label)
            panels[f"{label}, layer {layer}"] = series
    return panels


def _layer_series(record: dict, measure: str, layer: int, label: str) -> tuple[list, list]:
    """(tokens seen, value) of one layer of a per-layer measure, probes without it left out."""
    if measure not in record:
        raise ValueError(f"{label}: a record lacks {measure}")
    pairs = [
        (x, v[layer])
        for x, v in zip(tokens_seen(record), record[measure], strict=True)
        if v is not None and v[layer] is not None
    ]
    return [x for x, _ in pairs], [y for _, y in pairs]


def end_layers(probes: dict, measure: str) -> tuple[float, ...]:
    """A per-layer measure at the end of a trajectory, per layer: the median over the last
    quarter of its probes, as :func:`end_value` reads the order parameter.

    Raises
    ------
    ValueError
        No ``measure`` readings, or a layer with none in the last quarter.
    """
    rows = [v for v in probes.get(measure) or [] if v is not None]
    if not rows:
        raise ValueError(f"probes hold no {measure} readings")
    return _layer_medians(rows[-max(1, len(rows) // 4) :], measure, "in the last quarter")


def gamma_order_rank(record: dict) -> float:
    """How closely γ and the order parameter of G_LM move together along a run: Spearman's rank
    correlation (:func:`kvattn.stats.spearman`) over the probes between mean ``|γ|`` and the RMS
    order parameter, each in its least collapsed layer (the largest over the layers). 1: the two
    rise and fall in step.

    Raises
    ------
    ValueError
        A record without ``metric_norm_scale`` or ``G_order_rms`` at every probe, or as
        :func:`kvattn.stats.spearman`.
    """
    rows = {m: record.get(m) for m in ("metric_norm_scale", "G_order_rms")}
    if any(not v or any(r is None for r in v) for v in rows.values()):
        raise ValueError("the record needs metric_norm_scale and G_order_rms at every probe")
    gamma, order = ([max(x for x in r if x is not None) for r in v] for v in rows.values())
    return spearman(gamma, order)


def format_reruns(records: dict[str, dict], reruns: dict[str, dict]) -> str:
    """The reruns of the collapse hunt beside its records, one run a line (at most
    :data:`~kvattn.course.collapse_report.MAX_WIDTH` characters): the :func:`end_value` of the RMS
    order parameter in the record and in the rerun, the rerun's mean ``|γ|`` at the end per layer
    (:func:`end_layers`), and the rank correlation of γ with the order parameter along the rerun
    (:func:`gamma_order_rank`), and the rerun's last validation loss minus the record's
    (nats/token). ``records`` and ``reruns``: run name → record (probes at the top level); the runs
    of ``reruns``, in its order.

    Raises
    ------
    ValueError
        A rerun without a record, or as :func:`end_value` and :func:`end_layers`.
    """
    missing = [n for n in reruns if n not in records]
    if missing:
        raise ValueError(f"reruns without a record: {missing}")
    lines = [
        f"{'run':19s} {'end value, order (RMS)':>24s}   {'end mean |γ|':>14s} {'γ~order':>8s} "
        f"{'Δ val':>6s}",
        f"{'':19s} {'record':>11s} {'rerun':>12s}   {'layer 0, 1…':>14s} {'(rank r)':>8s} "
        f"{'loss':>6s}",
    ]
    for name, rerun in reruns.items():
        gamma = ", ".join(f"{g:.2g}" for g in end_layers(rerun, "metric_norm_scale"))
        lines.append(
            f"{name:19s} {end_value(records[name]):11.1e} {end_value(rerun):12.1e}   {gamma:>14s} "
            f"{gamma_order_rank(rerun):8.2f} "
            f"{rerun['val_loss'][-1] - records[name]['val_loss'][-1]:+6.3f}"
        )
    return "\n".join(lines)
