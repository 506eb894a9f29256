"""The research record of the shipped runs, read from the plans and the shipped results: for chapter
5's symmetry contrast (``data/experiments/``) and chapter 11's collapse hunt
(``data/collapse_hunt/``), each run's design, its role, the order in which the runs were made,
the command that remakes it, its results and its deviations from its design. The book's
*Experiment records* appendix shows these tables, so they cannot drift from the data.

What the data do not hold, the plans do: ``record`` in each run of ``data/plans/experiments.json``
and ``data/plans/collapse_hunt.json`` (the commit that shipped it and when, its role, what it was
for, what was decided after it, its deviations). Every function returns a :class:`Table`, plain
rows that a notebook shows as an HTML table.
"""

from __future__ import annotations

import html
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from .. import data, experiments
from ..experiments import ShippedExperiment
from ..reproduce.contrast import contrast_design
from ..reproduce.files import EXPERIMENT_PLANS, HUNT_PLAN, PROG, ReproduceError, plan
from ..reproduce.hunt import plan_sha256
from ..schema import read_json

#: The two roles a run can play, confirmatory (designed before its data) or exploratory.
ROLES = ("confirmatory", "exploratory")
#: Options of the old experiment tool that chose where and how fast it ran, not what it ran.
_RUN_ONLY_OPTIONS = {"--workers": 1, "--out": 1}
_PREFIX = "symmetry_contrast"


@dataclass(frozen=True)
class Table:
    """Rows of text under named columns, shown as an HTML table in a notebook (its
    ``_repr_html_``). Cells wrap at spaces; the cells of the ``breakable`` columns (commands,
    paths) may also break inside a word, so that a long name does not widen the table. Where the
    page is narrower than the table still (a phone), the table scrolls in its own box.

    Raises
    ------
    ValueError
        A row whose length is not the number of columns, or a breakable column that is not one of
        the columns.
    """

    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    breakable: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for row in self.rows:
            if len(row) != len(self.columns):
                raise ValueError(f"a row of {len(row)} cells under {len(self.columns)} columns")
        unknown = [c for c in self.breakable if c not in self.columns]
        if unknown:
            raise ValueError(f"breakable columns {unknown} are not among {list(self.columns)}")

    def column(self, name: str) -> list[str]:
        """The cells of column ``name``, top to bottom; ``KeyError`` names the columns."""
        if name not in self.columns:
            raise KeyError(f"no column {name!r}; the columns: {list(self.columns)}")
        i = self.columns.index(name)
        return [row[i] for row in self.rows]

    def _repr_html_(self) -> str:
        style = [
            "text-align:left;vertical-align:top"
            + (";overflow-wrap:anywhere" if c in self.breakable else "")
            for c in self.columns
        ]
        head = "".join(
            f'<th style="{st}">{html.escape(c)}</th>'
            for c, st in zip(self.columns, style, strict=True)
        )
        body = "".join(
            "<tr>"
            + "".join(
                f'<td style="{st}">{html.escape(v)}</td>' for v, st in zip(row, style, strict=True)
            )
            + "</tr>"
            for row in self.rows
        )
        return (
            '<div style="overflow-x:auto"><table style="width:100%">'
            f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"
        )

    def __repr__(self) -> str:
        return f"Table({len(self.rows)} rows: {', '.join(self.columns)})"


def short(name: str) -> str:
    """A chapter 5 run's name without the common prefix ``symmetry_contrast_`` (the first run,
    ``symmetry_contrast`` itself, is ``first``)."""
    return name.removeprefix(_PREFIX).removeprefix("_") or "first"


def _record(family: str, name: str, run: dict) -> dict:
    """The ``record`` of a plan's run, its role checked.

    Raises
    ------
    ValueError
        No record, or a role that is not one of :data:`ROLES`.
    """
    record = run.get("record")
    if not isinstance(record, dict) or record.get("role") not in ROLES:
        raise ValueError(
            f"data/plans/{family}.json: run {name!r} needs a record whose role is one of "
            f"{list(ROLES)}, got {record!r}"
        )
    return record


def _ranked(dates: dict[str, str]) -> dict[str, int]:
    """Rank 1, 2, ... by date; runs of the same date (shipped together) share a rank."""
    distinct = sorted(set(dates.values()))
    return {name: distinct.index(d) + 1 for name, d in dates.items()}


def experiment_order() -> list[tuple[int, str]]:
    """Chapter 5's shipped runs in the order they were made, as (rank, name): the rank of the
    commit that first shipped each run's results (``record.shipped`` in the plan, from the git
    log of ``data/experiments/``); runs shipped in one commit share a rank and are listed by
    name, since git does not tell their order."""
    runs = plan(EXPERIMENT_PLANS)["runs"]
    records = {n: _record(EXPERIMENT_PLANS, n, r) for n, r in runs.items()}
    rank = _ranked({n: r["shipped"]["date"] for n, r in records.items()})
    return sorted(((rank[n], n) for n in runs), key=lambda rn: (rn[0], rn[1]))


def _shipped(name: str) -> ShippedExperiment:
    return experiments.load_shipped(name)


def _rates(run: ShippedExperiment, options: Sequence[str]) -> str:
    """How a run's rates were set: fixed from another run, one shared rate, or chosen from a
    grid on selection seeds (with what each kind chose)."""
    design = run.contrast.design
    chosen = run.contrast.chosen_lr
    if "--rates-from" in options:
        source = options[list(options).index("--rates-from") + 1]
        return f"fixed, as {short(source)} chose: " + _per_kind(chosen)
    if len(design["lrs"]) == 1:
        return f"one shared rate, {design['lrs'][0]:g}"
    n = len(design["select_seeds"])
    grid = ", ".join(f"{lr:g}" for lr in design["lrs"])
    return f"chosen from {grid} on {n} selection seed{'s' * (n > 1)}: " + _per_kind(chosen)


def _per_kind(chosen: dict[str, float]) -> str:
    """The chosen rates, one shared value where every kind chose the same."""
    values = set(chosen.values())
    if len(values) == 1:
        return f"{values.pop():g} for every kind"
    return "; ".join(f"{kind} {lr:g}" for kind, lr in chosen.items())


def _seed_span(seeds: Sequence[int]) -> str:
    """``8-43`` for a run of consecutive seeds, else the list."""
    if list(seeds) == list(range(seeds[0], seeds[0] + len(seeds))):
        return f"{seeds[0]}-{seeds[-1]}" if len(seeds) > 1 else str(seeds[0])
    return ", ".join(map(str, seeds))


def _acts(run: ShippedExperiment) -> list[str]:
    return [c.act for c in run.contrast.contrasts]


def seeds_used_before() -> dict[str, list[str]]:
    """For each of chapter 5's runs, the runs made strictly before it (by
    :func:`experiment_order`) that trained one of its σ on one of its test seeds: where its seeds
    were not fresh for that σ."""
    order = experiment_order()
    runs = {name: _shipped(name) for _, name in order}
    seeds = {name: set(run.contrast.design["test_seeds"]) for name, run in runs.items()}
    acts = {name: set(_acts(run)) for name, run in runs.items()}
    return {
        name: [
            other
            for r, other in order
            if r < rank and seeds[name] & seeds[other] and acts[name] & acts[other]
        ]
        for rank, name in order
    }


def recorded_options(command: str) -> list[str]:
    """The design options of a command as a run recorded it (``python
    tools/run_symmetry_contrast.py ...``, the tool before ``kvattn-reproduce``): what follows the
    script, less the options that only chose where and how fast it ran (``--workers``,
    ``--out``).

    Raises
    ------
    ValueError
        The command does not run ``run_symmetry_contrast.py``.
    """
    words = shlex.split(command)
    script = [i for i, w in enumerate(words) if w.endswith("run_symmetry_contrast.py")]
    if not script:
        raise ValueError(f"not a command of the experiment tool: {command!r}")
    rest = words[script[0] + 1 :]
    options, i = [], 0
    while i < len(rest):
        if rest[i] in _RUN_ONLY_OPTIONS:
            i += 1 + _RUN_ONLY_OPTIONS[rest[i]]
            continue
        options.append(rest[i])
        i += 1
    return options


def command_mismatch(name: str) -> list[str]:
    """The fields of chapter 5's run ``name``'s recorded design that its recorded command, run
    today, would not give (steps, vocabulary, test seeds, rates, selection seeds, σ): non-empty
    where the command relied on defaults that have changed since. The plan's options give the
    recorded design in every case (``tests/test_reproduce.py`` checks it)."""
    run = _shipped(name)
    try:
        design = contrast_design(recorded_options(run.provenance["command"]))
    except ReproduceError as err:
        return [f"the recorded command no longer parses: {err}"]
    recorded = run.contrast.design
    fields = ["steps", "vocab_size", "test_seeds", "lrs"]
    if isinstance(recorded["lrs"], list) and len(recorded["lrs"]) > 1:
        fields.append("select_seeds")
    wrong = [f for f in fields if design[f] != recorded[f]]
    if sorted(design["acts"]) != sorted(_acts(run)):
        wrong.append("acts")
    return wrong


def experiment_deviations(name: str) -> list[str]:
    """The deviations of chapter 5's run ``name`` from its design: those the plan records, what
    its provenance says was added afterwards, and a recorded command that today would give
    another design (:func:`command_mismatch`)."""
    run = _shipped(name)
    found = list(plan(EXPERIMENT_PLANS)["runs"][name]["record"]["deviations"])
    if "extended" in run.provenance:
        found.append("its provenance: " + run.provenance["extended"])
    wrong = command_mismatch(name)
    if wrong:
        found.append(
            "the command as recorded relied on defaults of its day: today it would change "
            + ", ".join(wrong)
            + "; the plan's options spell the design out"
        )
    return found


def experiment_runs() -> Table:
    """Chapter 5's runs in the order made: rank, run (:func:`short` name), role, the date and
    commit that shipped it, what it was for and what was decided after it."""
    runs = plan(EXPERIMENT_PLANS)["runs"]
    rows = []
    for rank, name in experiment_order():
        rec = runs[name]["record"]
        shipped = f"{rec['shipped']['date']}, {rec['shipped']['commit']}"
        after = f" Then: {rec['history']}." if rec["history"] else ""
        rows.append((str(rank), short(name), rec["role"], shipped, rec["purpose"] + "." + after))
    return Table(("#", "run", "role", "shipped (UTC, commit)", "what it was for"), tuple(rows))


def experiment_designs() -> Table:
    """Chapter 5's runs' designs in the order made: training steps, σ (with the two references
    where they ran), paired test seeds, how the rates were set, and the earlier runs that had
    trained one of its σ on one of its test seeds (:func:`seeds_used_before`)."""
    runs = plan(EXPERIMENT_PLANS)["runs"]
    before = seeds_used_before()
    rows = []
    for _, name in experiment_order():
        run = _shipped(name)
        design = run.contrast.design
        acts = ", ".join(_acts(run)) + (" + references" if "bilinear" in run.contrast.final else "")
        seeds = design["test_seeds"]
        rows.append(
            (
                short(name),
                f"{design['steps']:,}",
                acts,
                f"{len(seeds)} ({_seed_span(seeds)})",
                _rates(run, runs[name]["options"]),
                ", ".join(short(b) for b in before[name]) or "none",
            )
        )
    return Table(("run", "steps", "σ", "test seeds", "rates", "seeds trained before"), tuple(rows))


def experiment_results() -> Table:
    """Every contrast of chapter 5's runs in the order made: symmetric − gated (nats/token,
    mean ± standard error over the paired seeds), its 95 % interval, the paired t-test's p, the
    pairs and the minimum detectable effect (:class:`kvattn.experiments.Contrast`); uncorrected
    for multiple tests, which the chapter's verdicts are."""
    rows = []
    for _, name in experiment_order():
        for c in _shipped(name).contrast.contrasts:
            lo, hi = c.interval(0.95)
            rows.append(
                (
                    short(name),
                    c.act,
                    f"{c.mean:+.4f} ± {c.se:.4f}",
                    f"[{lo:+.4f}, {hi:+.4f}]",
                    f"{c.p:.2g}",
                    str(c.n),
                    f"{c.mde:.4f}",
                )
            )
    return Table(
        ("run", "σ", "symmetric − gated", "95 % interval", "p", "pairs", "MDE"), tuple(rows)
    )


def dose_results() -> Table:
    """The Swish-β dose-responses that chapter 5's runs shipped: run, β values, seeds, and the
    slope of the final loss against the measured exchange violation (nats/token per unit, ±
    standard error, two-sided p)."""
    rows = []
    for _, name in experiment_order():
        dose = _shipped(name).dose_response
        if dose is not None:
            rows.append(
                (
                    short(name),
                    ", ".join(f"{b:g}" for b in dose.betas),
                    str(len(dose.seeds)),
                    f"{dose.slope:+.4f} ± {dose.slope_se:.4f}",
                    f"{dose.slope_p:.2g}",
                )
            )
    return Table(("run", "β", "seeds", "slope", "p"), tuple(rows))


def experiment_commands() -> Table:
    """For each of chapter 5's runs in the order made: the command that remakes it and the
    command as the run recorded it (the experiment tool of its day, some writing to a scratch
    path)."""
    rows = []
    for _, name in experiment_order():
        run = _shipped(name)
        rows.append((short(name), run.command, run.provenance["command"]))
    return Table(("run", "remade by", "as recorded"), tuple(rows), ("remade by", "as recorded"))


def experiment_deviation_table() -> Table:
    """One row per deviation of chapter 5's runs from their designs (:func:`experiment_deviations`),
    in the order made."""
    rows = tuple(
        (short(name), d) for _, name in experiment_order() for d in experiment_deviations(name)
    )
    return Table(("run", "deviation"), rows)


# --------------------------------------------------------------------------------------------
# The collapse hunt


def hunt_order() -> list[tuple[int, str]]:
    """The collapse hunt's runs in the order made, as (round, name): the first two runs, then
    the rest (``record.made`` in the plan); within a round, in the plan's order."""
    runs = plan(HUNT_PLAN)["runs"]
    made = {n: _record(HUNT_PLAN, n, r)["made"] for n, r in runs.items()}
    return sorted(((made[n], n) for n in runs), key=lambda rn: rn[0])


def _hunt_record(name: str) -> dict:
    return read_json(data.collapse_hunt(name), "hunt_record")


def _change(value: object) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in value.items())
    return f"{value:g}" if isinstance(value, float) else f"{value:,}"


def hunt_designs() -> Table:
    """The collapse hunt's runs in the order made: round, run, role, what changed from the base
    recipe (the plan's ``changes``), steps × batch, and why it was run."""
    hunt = plan(HUNT_PLAN)
    rows = []
    for made, name in hunt_order():
        run = hunt["runs"][name]
        recipe = _hunt_record(name)["recipe"]
        changes = "; ".join(
            f"{k} {_change(v)}" for k, v in run["changes"].items() if k != "checkpoint_every"
        )
        rows.append(
            (
                str(made),
                name,
                run["record"]["role"],
                changes or "none (the base)",
                f"{recipe['steps']:,} × {recipe['batch_size']}",
                run["why"],
            )
        )
    return Table(("round", "run", "role", "changed", "steps × batch", "why"), tuple(rows))


def hunt_results() -> Table:
    """Each hunt run's final probe (every layer, comma-separated): the RMS order parameter of
    G_LM, σ2/σ1 of A and the smallest head's row-map gain of the final model; its last
    validation loss (nats/token); and the step at which it met the hunt's collapse criterion as
    its record states it (the plan's strict criterion, computed when the run was made), or
    "not met"."""
    rows = []
    for _, name in hunt_order():
        rec = _hunt_record(name)
        rows.append(
            (
                name,
                f"{rec['val_loss'][-1]:.3f}",
                ", ".join(f"{v:.2g}" for v in rec["G_order_rms"][-1]),
                ", ".join(f"{v:.2g}" for v in rec["A_sigma_ratio"][-1]),
                ", ".join(f"{min(layer):.2g}" for layer in rec["row_map_gain"]["final"]),
                "not met" if rec["collapsed_at_step"] is None else f"{rec['collapsed_at_step']:,}",
            )
        )
    return Table(
        (
            "run",
            "val loss",
            "RMS order of G_LM",
            "σ2/σ1 of A",
            "row-map gain",
            "collapsed at step",
        ),
        tuple(rows),
    )


def hunt_commands() -> Table:
    """For each hunt run in the order made: the command that remakes it, the command as
    recorded, and its deviations from the plan (from the plan's record)."""
    hunt = plan(HUNT_PLAN)
    rows = []
    for _, name in hunt_order():
        remade = f"{PROG} hunt {name}"
        if name in hunt["shipped"]:
            remade += f"; its model: {PROG} hunt --ship {name}"
        deviations = hunt["runs"][name]["record"]["deviations"]
        rows.append((name, remade, _hunt_record(name)["command"], "; ".join(deviations) or "none"))
    return Table(
        ("run", "remade by", "as recorded", "deviations"), tuple(rows), ("remade by", "as recorded")
    )


def role_counts() -> str:
    """One line per family of runs: how many were shipped and how many play each role."""
    lines = []
    for family, runs in (
        ("chapter 5's symmetry contrast", plan(EXPERIMENT_PLANS)["runs"]),
        ("the collapse hunt", plan(HUNT_PLAN)["runs"]),
    ):
        roles = [r["record"]["role"] for r in runs.values()]
        counts = ", ".join(f"{roles.count(role)} {role}" for role in ROLES if role in roles)
        lines.append(f"{family}: {len(runs)} runs ({counts})")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Runs planned before their results (issue 31): the constant-rate test and the hunt's reruns


def planned_runs() -> Table:
    """Every shipped run of the plans of :data:`kvattn.data.locators.HUNT_STUDIES` (each
    committed to ``data/plans/`` before its runs): the plan, the hunt run it starts from and
    what it changes, its wall time, whether the plan file is byte for byte the one the run
    recorded (its SHA-256), and the command that remakes it."""
    rows = []
    for study in data.HUNT_STUDIES:
        for name, run in plan(study)["runs"].items():
            try:
                record = read_json(data.hunt_study(study, name), "hunt_record")
            except FileNotFoundError:
                continue  # planned, not (yet) shipped
            changes = "; ".join(f"{k} {_change(v)}" for k, v in run["changes"].items())
            same = record["plan"]["sha256"] == plan_sha256(study)
            rows.append(
                (
                    name,
                    study,
                    run["from"],
                    changes or "none (a rerun)",
                    f"{record['wall_s'] / 60:.0f} min",
                    "yes" if same else "no: changed after the run",
                    f"{PROG} hunt {name} --plan {study}",
                )
            )
    return Table(
        ("run", "plan", "from", "changes", "wall time", "plan as run", "remade by"),
        tuple(rows),
        ("remade by",),
    )
