"""Training: one loop for every experiment, and the task losses it is used with, in four modules:

* :mod:`kvattn.train.optim` — the optimiser a run steps with: :func:`adamw`, the schedule
  :func:`lr_multiplier`, the bound :data:`~kvattn.train.optim.MAX_LR` and the checks of these
  settings (:func:`check_optimiser`), the mixed-precision dtype (:func:`default_autocast`);
* :mod:`kvattn.train.loop` — the loop :func:`train` and its :class:`History`, and the check of a
  model's logits before a checkpoint (:func:`check_logits`);
* :mod:`kvattn.train.tasks` — the losses of the course's tasks (regression, recall, a small LM);
* :mod:`kvattn.train.seeds` — multi-seed LM runs (:func:`train_lm_seeds`, :class:`SeedRuns`).

:func:`train` takes a model and a ``loss_fn(step) -> scalar tensor`` that draws its own batch, so
the same loop fits full-batch regression, the recall table and language modelling. Pre-training
of PLDR-LLMs and GPTs builds on this loop in :mod:`kvattn.pretrain`.

Every public name is re-exported here, so ``kvattn.train.X`` works for all of them.
"""

from .loop import History, check_logits, train
from .optim import (
    AUTOCAST_DTYPES,
    MAX_LR,
    adamw,
    check_optimiser,
    default_autocast,
    lr_multiplier,
)
from .seeds import SeedRuns, train_lm_seeds
from .tasks import (
    lm_eval_loss,
    lm_loss,
    recall_accuracy,
    recall_loss,
    regression_error,
    regression_loss,
)

__all__ = [
    "AUTOCAST_DTYPES",
    "MAX_LR",
    "History",
    "SeedRuns",
    "adamw",
    "check_logits",
    "check_optimiser",
    "default_autocast",
    "lm_eval_loss",
    "lm_loss",
    "lr_multiplier",
    "recall_accuracy",
    "recall_loss",
    "regression_error",
    "regression_loss",
    "train",
    "train_lm_seeds",
]
