"""Pre-training of PLDR-LLMs and GPTs (Part II), in four modules, each importing only from those
listed before it:

* :mod:`kvattn.pretrain.config` — the run's config, :class:`~kvattn.pretrain.PretrainConfig`,
  checked whole before any work, and the fields a resume may change
  (:data:`~kvattn.pretrain.config.RESUMABLE_CHANGES`);
* :mod:`kvattn.pretrain.resume` — what makes a run resumable exactly: the trainer state saved
  beside each checkpoint, read back and checked, and the checks of ``out_dir`` before a run;
* :mod:`kvattn.pretrain.run` — the run, :func:`~kvattn.pretrain.pretrain`: tokenizer, blocks,
  DDP, DAG penalty, checkpoints, exact resume, probes;
* :mod:`kvattn.pretrain.cli` — the command ``python -m kvattn.pretrain --config FILE``
  (``kvattn-train``, :func:`~kvattn.pretrain.main`).

Every public name is re-exported here, so ``kvattn.pretrain.X`` works for all of them.
"""

from .cli import config_help, main
from .config import RESUMABLE_CHANGES, PretrainConfig
from .run import PretrainResult, pretrain

__all__ = [
    "RESUMABLE_CHANGES",
    "PretrainConfig",
    "PretrainResult",
    "config_help",
    "main",
    "pretrain",
]
