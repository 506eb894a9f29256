"""Data for the course's experiments, all made or found on the machine (no downloads), in five
modules, each importing only from those listed before it:

* :mod:`kvattn.data.locators` — the files the course ships in ``data/`` (checkpoints, recipes,
  plans, experiments, benchmark runs, the collapse hunt, trajectories), each found through one
  locator in an install or a clone and read through its schema;
* :mod:`kvattn.data.tokenizer` — the SentencePiece tokenizer: trained here, read beside a
  checkpoint, checked against a model's vocabulary;
* :mod:`kvattn.data.tasks` — Part I's synthetic tasks: a teacher-student regression (a random
  tanh network to imitate), known quadratic forms, a key-value table to memorise;
* :mod:`kvattn.data.corpora` — real text: the Python language reference that ships with every
  CPython (``pydoc_data.topics``, about 465 kB of English) and the standard-library source, both
  read from the snapshots of CPython 3.11.7 that the course ships, or any local text file;
* :mod:`kvattn.data.batches` — a corpus split into documents, tokenized, packed into blocks or
  sampled as random next-token batches, and a run's validation blocks.

Every public name is re-exported here, so ``kvattn.data.X`` works for all of them.
"""

from .batches import (
    TokenData,
    blocks,
    encode_documents,
    lm_batch,
    split_documents,
    tokenize,
    validation_blocks,
)
from .corpora import (
    CORPORA,
    CORPORA_RECORD,
    CorpusSnapshot,
    corpus_snapshot,
    interpreter_text,
    load_text,
)
from .locators import (
    HUNT_STUDIES,
    SHIPPED_FILES,
    benchmark_run,
    collapse_hunt,
    experiment,
    hunt_study,
    plan,
    plan_kind,
    recipe,
    recipe_names,
    shipped,
    trajectory,
)
from .tasks import RecallTask, RegressionTask, key_value_recall, quadratic_task, teacher_student
from .tokenizer import (
    MIN_VOCAB_SIZE,
    SPECIAL_TOKENS,
    check_tokenizer,
    load_tokenizer,
    train_tokenizer,
)

__all__ = [
    "CORPORA",
    "CORPORA_RECORD",
    "HUNT_STUDIES",
    "MIN_VOCAB_SIZE",
    "SHIPPED_FILES",
    "SPECIAL_TOKENS",
    "CorpusSnapshot",
    "RecallTask",
    "RegressionTask",
    "TokenData",
    "benchmark_run",
    "blocks",
    "check_tokenizer",
    "collapse_hunt",
    "corpus_snapshot",
    "encode_documents",
    "experiment",
    "hunt_study",
    "interpreter_text",
    "key_value_recall",
    "lm_batch",
    "load_text",
    "load_tokenizer",
    "plan",
    "plan_kind",
    "quadratic_task",
    "recipe",
    "recipe_names",
    "shipped",
    "split_documents",
    "teacher_student",
    "tokenize",
    "train_tokenizer",
    "trajectory",
    "validation_blocks",
]
