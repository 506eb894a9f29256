"""Remake the files the course ships in ``data/``: one command, ``kvattn-reproduce`` (also
``python -m kvattn.reproduce``), from a clone or a pip install.

The designs are data: a checkpoint's recipe is ``data/recipes/<name>.json``, chapter 5's runs and
chapter 11's collapse hunt are the plans ``data/plans/experiments.json`` and
``data/plans/collapse_hunt.json``. ``kvattn-reproduce list`` prints every shipped file with the
command that remakes it; ``kvattn-reproduce --help`` shows the subcommands.

Every output goes under ``--out`` (default ``reproduced/`` in the working folder) in the layout of
``data/``, so ``--out data --overwrite`` in a clone remakes the shipped files in place; training
runs (checkpoints and optimiser state, for ``--resume``) go under ``--runs`` (default ``runs/``).
What the command guarantees:

* every argument, name, recipe, design and output path is checked before any work;
* a file or folder that exists is never replaced without ``--overwrite``, a folder never takes a
  file's place (nor the reverse), an output never overlaps a training run, and a finished or
  interrupted run is never restarted without ``--overwrite`` (or continued with ``--resume``);
  nothing is ever written inside an installed kvattn;
* files are written whole, then renamed into place, and a folder (a checkpoint, the corpora) is
  staged beside the old one and swapped in (:func:`kvattn.checkpoint.replace_directory`), so a
  kill at any moment leaves either the old files or the new ones;
* every run is reported, and the exit status is 1 when any failed (the others still ran), 2 for
  a refused request.

Modules, in import order: :mod:`~kvattn.reproduce.files` (plans, checks, whole-file writes),
:mod:`~kvattn.reproduce.checkpoints`, :mod:`~kvattn.reproduce.contrast`,
:mod:`~kvattn.reproduce.hunt`, :mod:`~kvattn.reproduce.corpora`, :mod:`~kvattn.reproduce.cli`,
and :mod:`~kvattn.course.records`, which reads the plans and shipped results as the tables of
the experiment-records appendix.
"""

from .checkpoints import checkpoint_config, make_checkpoint, make_trajectory, trajectory_config
from .cli import listing, main
from .contrast import CONTRAST_KEYS, contrast_design, run_contrast
from .corpora import make_corpora
from .files import PROG, RUN_FILES, plan, ship_run
from .hunt import hunt_config, hunt_recipe, hunt_run, run_hunts, ship_hunt

__all__ = [
    "CONTRAST_KEYS",
    "PROG",
    "RUN_FILES",
    "checkpoint_config",
    "contrast_design",
    "hunt_config",
    "hunt_recipe",
    "hunt_run",
    "listing",
    "main",
    "make_checkpoint",
    "make_corpora",
    "make_trajectory",
    "plan",
    "run_contrast",
    "run_hunts",
    "ship_hunt",
    "ship_run",
    "trajectory_config",
]
