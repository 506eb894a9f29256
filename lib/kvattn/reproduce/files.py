"""What every reproduction command shares: the plans, the checks of outputs and runs made before
any work, and writing files whole (a kill leaves the old file or the new one, never half)."""

from __future__ import annotations

import contextlib
import json
import platform
import re
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

import torch

from .. import data
from ..checkpoint import (
    load_pretrained,
    recover_directory,
    replace_directory,
    staging_directory,
)
from ..schema import read_json

PROG = "kvattn-reproduce"
#: The plans of chapter 5's experiments and chapter 11's collapse hunt, in ``data/plans/``.
EXPERIMENT_PLANS = "experiments"
HUNT_PLAN = "collapse_hunt"
#: The plans ``kvattn-reproduce hunt --plan`` runs; a plan's records go to ``data/<plan>/``.
HUNT_STUDIES = (HUNT_PLAN, *data.HUNT_STUDIES)
#: The files of a shipped checkpoint folder that come from the run (provenance.json is written).
RUN_FILES = ("config.json", "model.safetensors", "tokenizer.model", "trainer_state.json")
#: A run's checkpoint folder inside its out_dir (kvattn.pretrain.pretrain writes it).
CHECKPOINT = "checkpoint"
# A name that becomes one file or folder: no separators, no leading dot, not empty.
_STEM = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")


class ReproduceError(ValueError):
    """A request the command refuses before any work (the message says what to change)."""


def plan(name: str) -> dict:
    """The plan ``data/plans/<name>.json`` (plain JSON), found like the shipped checkpoints and
    read through its schema (:func:`kvattn.data.plan_kind`), so that a damaged or hand-edited
    plan is refused before any run starts.

    Raises
    ------
    FileNotFoundError
        No such plan (the message lists the shipped ones).
    kvattn.schema.SchemaError
        (a ``ValueError``) A plan its schema refuses: the message names the file, the field and
        what was expected.
    """
    return read_json(data.plan(name), data.plan_kind(name))


def check_stem(what: str, name: object) -> str:
    """``name`` if it can name one file or folder (letters, digits, ``_.+-``; no separator, no
    leading dot), else :class:`~kvattn.reproduce.files.ReproduceError`."""
    if not isinstance(name, str) or not _STEM.fullmatch(name):
        raise ReproduceError(
            f"{what} must be a plain name (letters, digits, _ . + -, not starting with a dot or "
            f"holding a /), got {name!r}"
        )
    return name


def installed_data() -> Path:
    """Where an installed kvattn keeps ``data/`` (the package data ``kvattn/_shipped``), which no
    command writes into."""
    return Path(data.__file__).resolve().parents[1] / "_shipped"  # kvattn/data/__init__.py


def check_outputs(files: Sequence[Path], folders: Sequence[Path], overwrite: bool) -> None:
    """Refuse, before any work, outputs that exist (without ``overwrite``), that lie inside an
    installed kvattn, whose place is taken by something of the other kind (a folder where a
    file goes or the reverse, which no flag replaces), or whose folder cannot be created or
    written (checked by creating it and a file in it).

    Raises
    ------
    ~kvattn.reproduce.files.ReproduceError
        As above, naming every path concerned.
    """
    installed = installed_data()
    for path, is_dir in [*((p, False) for p in files), *((p, True) for p in folders)]:
        resolved = path.resolve()
        if resolved == installed or installed in resolved.parents:
            raise ReproduceError(
                f"{path} lies inside the installed kvattn; write elsewhere (--out DIR)"
            )
        for parent in resolved.parents:
            if parent.exists() and not parent.is_dir():
                raise ReproduceError(f"{path} cannot be written: {parent} is a file")
        if path.exists() and path.is_dir() != is_dir:
            kind, wanted = ("a folder", "a file") if path.is_dir() else ("a file", "a folder")
            raise ReproduceError(f"{path} is {kind} where {wanted} goes: move it away first")
    taken = [p for p in [*files, *folders] if p.exists() or p.is_symlink()]
    if taken and not overwrite:
        raise ReproduceError(
            "these exist and would be replaced: "
            + ", ".join(str(p) for p in taken)
            + "; pass --overwrite to replace them, or choose another --out"
        )
    for folder in dict.fromkeys(p.parent for p in [*files, *folders]):
        _check_writable(folder)


def _check_writable(folder: Path) -> None:
    """Create ``folder`` (with its parents) and a file in it, then remove what was created: the
    one test of writability that holds for root and on special file systems (``os.access`` says
    yes to root for ``/proc``), and a refused request leaves nothing behind."""
    missing = [p for p in (folder, *folder.parents) if not p.exists()]
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".kvattn-probe-"):
            pass
    except OSError as err:
        raise ReproduceError(
            f"{folder} cannot hold the outputs: creating it or a file in it failed "
            f"({err.strerror or err}); choose another --out"
        ) from None
    finally:
        for created in missing:  # deepest first
            with contextlib.suppress(OSError):
                created.rmdir()


def check_apart(outputs: Sequence[Path], run_dirs: Sequence[Path]) -> None:
    """Refuse outputs that are, hold or lie inside a training run's folder: shipping a result
    there would replace the run (its checkpoint and optimiser state, what ``--resume`` needs).

    Raises
    ------
    ~kvattn.reproduce.files.ReproduceError
        Naming the output and the run.
    """
    for out in outputs:
        o = out.resolve()
        for run in run_dirs:
            r = run.resolve()
            if o == r or o in r.parents or r in o.parents:
                raise ReproduceError(
                    f"{out} and the run folder {run} overlap: choose an --out apart from --runs"
                )


def check_runs(run_dirs: Sequence[Path], overwrite: bool, resume: bool) -> None:
    """Refuse to restart a run that exists, unless told to replace or continue it; refuse to
    continue one that does not exist.

    Raises
    ------
    ~kvattn.reproduce.files.ReproduceError
        As above, or both ``overwrite`` and ``resume``.
    """
    if overwrite and resume:
        raise ReproduceError("--resume and --overwrite exclude each other")
    held = [d for d in run_dirs if (d / CHECKPOINT).exists()]
    if held and not (overwrite or resume):
        raise ReproduceError(
            "these runs exist: "
            + ", ".join(str(d) for d in held)
            + "; pass --resume to continue them, --overwrite to replace them, or choose "
            "another --runs"
        )
    missing = [d for d in run_dirs if not (d / CHECKPOINT).exists()]
    if resume and missing:
        raise ReproduceError(
            "--resume: no run to continue in " + ", ".join(str(d) for d in missing)
        )


def stage_folder(target: Path) -> Path:
    """A fresh, empty staging folder beside ``target``, to fill in full before
    :func:`kvattn.checkpoint.replace_directory` swaps it in (an old ``target`` survives any kill
    until then). An interrupted earlier swap is repaired first, and a file or link that sits at
    one of the swap's reserved names is refused by name
    (:func:`kvattn.checkpoint.recover_directory`)."""
    recover_directory(target)
    staging = staging_directory(target)
    staging.mkdir(parents=True)
    return staging


def ship_run(run_checkpoint: Path, target: Path, provenance: dict) -> Path:
    """Copy a run's final checkpoint (:data:`~kvattn.reproduce.files.RUN_FILES`, not the optimiser
    state) into ``target`` in the layout of the shipped checkpoints, with ``provenance.json``:
    staged in full beside ``target`` and swapped in, so an old ``target`` survives any kill."""
    staging = stage_folder(target)
    try:
        for file in RUN_FILES:
            shutil.copy2(run_checkpoint / file, staging / file)
        (staging / "provenance.json").write_text(json.dumps(provenance, indent=1) + "\n")
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)  # a failed copy leaves nothing in --out
        raise
    replace_directory(target)
    return target


def check_finished_run(run_checkpoint: Path, steps: int) -> None:
    """Refuse to ship a run's checkpoint that is not a finished run of ``steps`` steps whose
    model verifies: every file of :data:`~kvattn.reproduce.files.RUN_FILES` present, the trainer
    state at ``steps``, and the weights matching their recorded checksum.

    Raises
    ------
    ~kvattn.reproduce.files.ReproduceError
        Naming what is missing or wrong.
    """
    missing = [f for f in RUN_FILES if not (run_checkpoint / f).is_file()]
    if missing:
        raise ReproduceError(f"{run_checkpoint} is not a finished run: it lacks {missing}")
    try:
        done = read_json(run_checkpoint / "trainer_state.json", "trainer_state")["step"]
        load_pretrained(run_checkpoint)  # verifies the weights against their checksum
    except (KeyError, TypeError, ValueError, OSError) as err:
        raise ReproduceError(f"{run_checkpoint} does not hold a valid checkpoint: {err}") from None
    if done != steps:
        raise ReproduceError(
            f"{run_checkpoint} has done {done} of its {steps} steps: finish it (--resume) first"
        )


def machine() -> dict:
    """The Python, torch and machine a file was made with (its provenance)."""
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "machine": platform.machine(),
    }
