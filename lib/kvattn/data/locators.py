"""The files the course ships in ``data/`` (checkpoints, recipes, plans, experiments, benchmark
runs, the collapse hunt and its studies, trajectories), each found through one locator in an
install or a clone, read through its schema (:mod:`kvattn.schema`); nothing is downloaded.
"""

from __future__ import annotations

from pathlib import Path

from .._checks import check_bool
from .._files import finish_swap, is_swap_leftover
from ..schema import check_file

#: The files of a shipped checkpoint folder in ``data/``.
SHIPPED_FILES = (
    "config.json",
    "model.safetensors",
    "tokenizer.model",
    "trainer_state.json",
    "provenance.json",
)


# The repository's data/ inside an installed kvattn: pyproject.toml ships it as the package data
# kvattn/_shipped, so that an install from a local folder, a wheel or a git URL works offline.
# (Private, so that the API page does not print this machine's paths.)
_PACKAGE_DATA = Path(__file__).resolve().parents[1] / "_shipped"
# data/ in a clone of the repository (an editable install, the book build, nbval).
_CLONE_DATA = Path(__file__).resolve().parents[3] / "data"


def _shipped_file(what: str, name: str, pattern: str, kind: str | None = None) -> Path:
    """The file ``pattern.format(name)`` in the installed package data, else in the clone, once it
    has passed the schema ``kind`` (:mod:`kvattn.schema`); a folder on its way whose swap a kill
    interrupted is completed first (:func:`kvattn._files.finish_swap`)."""
    if not isinstance(name, str):
        raise TypeError(f"expected a {what} name (str) such as 'pldr_tiny', got {name!r}")
    if not name or "/" in name or "\\" in name or name.startswith("."):
        raise ValueError(f"expected a {what} name such as 'pldr_tiny', got {name!r}")
    roots = [root for root in (_PACKAGE_DATA, _CLONE_DATA) if root.is_dir()]
    for root in roots:
        for folder in reversed(Path(pattern.format(name)).parents[:-1]):
            finish_swap(root / folder)
        if (root / pattern.format(name)).is_file():
            found = root / pattern.format(name)
            return found if kind is None else check_file(found, kind)
    raise FileNotFoundError(
        f"no shipped {what} data/{pattern.format(name)}; the shipped ones: {_available(pattern)}"
    )


def _available(pattern: str) -> list[str]:
    """The names ``name`` for which ``data/`` (installed or in the clone) has
    ``pattern.format(name)``, sorted."""
    roots = [root for root in (_PACKAGE_DATA, _CLONE_DATA) if root.is_dir()]
    before, after = pattern.split("{}")
    for root in roots:  # a folder a kill left moved aside is completed, not listed under its name
        for aside in [*root.glob("*"), *root.glob("*/*")]:
            if is_swap_leftover(aside.name) and aside.is_dir():
                finish_swap(aside.with_name(aside.name.rsplit(".kvattn-", 1)[0]))
    names = {
        p.relative_to(root).as_posix()[len(before) : -len(after)]
        for root in roots
        for p in root.glob(pattern.format("*"))
    }
    return sorted(n for n in names if not is_swap_leftover(n))


def recipe_names() -> list[str]:
    """The names of the shipped recipes (``data/recipes/<name>.json``), sorted."""
    return _available("recipes/{}.json")


def shipped(name: str) -> Path:
    """The folder ``data/<name>/`` of a checkpoint the course ships (files
    :data:`~kvattn.data.locators.SHIPPED_FILES`).

    An installed kvattn (``pip install`` from a local folder, a wheel or the GitHub URL, as in
    Colab's set-up cell) carries ``data/`` as package data; in a clone of the repository this is
    the folder ``data/<name>`` itself. Nothing is downloaded.

    A swap of the folder that a kill interrupted is completed first (as
    :func:`kvattn.checkpoint.load_pretrained` does); every shipped file is read through its
    schema (:mod:`kvattn.schema`) before its path is returned.

    Raises
    ------
    TypeError
        ``name`` is not a string.
    ValueError
        ``name`` is empty, starts with a dot or contains a path separator;
        :class:`kvattn.schema.SchemaError` for a damaged or hand-edited file (naming it, the
        field and what was expected).
    FileNotFoundError
        No such checkpoint (the message lists the shipped ones).
    """
    return _shipped_file("checkpoint", name, "{}/config.json", "config").parent


def recipe(name: str) -> Path:
    """The JSON recipe ``data/recipes/<name>.json`` that made the shipped checkpoint ``name``.

    Read it with ``PretrainConfig.from_file`` (:class:`kvattn.pretrain.PretrainConfig`), train with
    :func:`kvattn.pretrain.pretrain`; found like :func:`shipped`, in an install or a clone.
    Raises as :func:`shipped` (listing the shipped recipes).
    """
    return _shipped_file("recipe", name, "recipes/{}.json", "recipe")


def plan(name: str) -> Path:
    """The JSON plan ``data/plans/<name>.json`` of a family of shipped runs (read by
    :mod:`kvattn.reproduce`); found like :func:`shipped`.
    Raises as :func:`shipped` (listing the shipped plans).
    """
    return _shipped_file("plan", name, "plans/{}.json", plan_kind(name))


def plan_kind(name: str) -> str:
    """The schema (:data:`kvattn.schema.KINDS`) of the plan ``data/plans/<name>.json``."""
    return {"collapse_hunt": "plan_hunt", "experiments": "plan_experiments"}.get(name, "plan_study")


def experiment(name: str) -> Path:
    """The JSON results ``data/experiments/<name>.json`` of a designed experiment the course ships
    (read them with :func:`kvattn.experiments.load_shipped`); found like :func:`shipped`.
    Raises as :func:`shipped` (listing the shipped experiments).
    """
    return _shipped_file("experiment", name, "experiments/{}.json", "experiment")


def benchmark_run(name: str) -> Path:
    """The JSON record ``data/benchmarks/<name>.json`` of a benchmark run the course ships (written
    by ``python -m kvattn.benchmark --json``; read it with
    :func:`kvattn.benchmark.reporting.load_results`); found like :func:`shipped`.
    Raises as :func:`shipped` (listing the shipped runs).
    """
    return _shipped_file("benchmark run", name, "benchmarks/{}.json", "benchmark")


def collapse_hunt(name: str, checkpoint: bool = False) -> Path:
    """The JSON record ``data/collapse_hunt/<name>.json`` of one run of chapter 11's collapse
    hunt (written by ``kvattn-reproduce hunt``): its recipe, why it was run, its wall
    time, the collapse measures every 250 steps (read them with
    :func:`kvattn.diagnostics.probes.load_probes`) and the row-map gains of its first and last
    model; found like :func:`shipped`. With ``checkpoint=True``: the folder
    ``data/collapse_hunt/<name>/`` of the run's final model, shipped for the run nearest to
    collapse (files :data:`~kvattn.data.locators.SHIPPED_FILES`, load it with
    :func:`kvattn.checkpoint.load_pretrained`).

    Raises
    ------
    TypeError, ValueError, FileNotFoundError
        As :func:`shipped` (the message lists the shipped runs, or the shipped checkpoints);
        ``ValueError`` also for a ``checkpoint`` that is not a bool.
    """
    check_bool("checkpoint", checkpoint)
    if checkpoint:
        return _shipped_file(
            "collapse-hunt checkpoint", name, "collapse_hunt/{}/config.json", "config"
        ).parent
    return _shipped_file("collapse-hunt run", name, "collapse_hunt/{}.json", "hunt_record")


#: The plans whose runs are collapse-hunt runs made with changes (``kvattn-reproduce hunt
#: --plan``): issue 31's constant-rate test, the reruns that record the LayerNorm scale, and
#: issue 37's depth experiment.
HUNT_STUDIES = ("constant_rate", "hunt_reruns", "metric_depth")


def hunt_study(study: str, name: str) -> Path:
    """The JSON record ``data/<study>/<name>.json`` of the run ``name`` of the plan
    ``data/plans/<study>.json``, one of :data:`~kvattn.data.locators.HUNT_STUDIES` (written by
    ``kvattn-reproduce hunt NAME --plan STUDY``), in the layout of :func:`collapse_hunt`'s
    records; found like :func:`shipped`.

    Raises
    ------
    TypeError, ValueError, FileNotFoundError
        As :func:`shipped` (the message lists the shipped runs); ``ValueError`` also for a
        ``study`` not in :data:`~kvattn.data.locators.HUNT_STUDIES`.
    """
    if study not in HUNT_STUDIES:
        raise ValueError(f"study must be one of {HUNT_STUDIES}, got {study!r}")
    return _shipped_file(f"{study} run", name, study + "/{}.json", "hunt_record")


def trajectory(name: str) -> Path:
    """The JSON file ``data/trajectories/<name>.json``: the collapse measures recorded while the
    shipped checkpoint ``name`` trained again from its recipe with probes (written by
    ``kvattn-reproduce trajectory``; read it with
    :func:`kvattn.diagnostics.probes.load_probes`, draw it with
    :func:`kvattn.course.plots.reports.collapse_trajectories`);
    found like :func:`shipped`.
    Raises as :func:`shipped` (listing the shipped trajectories).
    """
    return _shipped_file("trajectory", name, "trajectories/{}.json", "trajectory")
