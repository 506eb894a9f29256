"""A pre-training run's config: :class:`~kvattn.pretrain.PretrainConfig`, checked whole before any
work, read from a JSON file, and the fields a resume may change (:data:`RESUMABLE_CHANGES`).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from .._checks import check_choice, check_int, is_real
from ..config import PLDRConfig, reject_unknown_keys
from ..data import CORPORA, MIN_VOCAB_SIZE
from ..distributed import parse_device
from ..train import MAX_LR, check_optimiser


def _help(text: str) -> dict:
    """Field metadata: the description ``python -m kvattn.pretrain --help`` prints."""
    return {"help": text}


@dataclass
class PretrainConfig:
    """Everything a pre-training run needs; stored as JSON (``python -m kvattn.pretrain --config``).

    ``model`` holds :class:`kvattn.config.PLDRConfig` fields (``vocab_size`` is set from the
    tokenizer); ``architecture`` is ``"pldrllm"`` or ``"gpt"``; ``corpus`` is a source of
    :func:`kvattn.data.load_text`, cut to ``corpus_chars`` characters if given. Optimiser
    defaults are the reference's: AdamW β = (0.9, 0.95), eps 1e-5, weight decay 0.1, gradient
    clipping by value at 1.0, linear warm-up then cosine decay to 10 % of the peak. ``dag`` =
    (c_A, c_Ap, c_G) are the DAG-regulariser coefficients on A_LM, A_P and G_LM (0 = off).
    ``batch_size`` is global: under DDP each of the W processes takes ``batch_size / W``
    sequences of every step's batch. ``probe_every`` records how close the model is to
    inference collapse (:func:`kvattn.diagnostics.collapse.collapse_measures`) as trajectories: the
    probes
    are the first ``probe_blocks`` validation blocks, and the next ``probe_blocks`` score the
    G_LM substitution; it only observes, so the losses are those of the same run without it.
    Each field's description is in its ``metadata["help"]``.

    Raises
    ------
    ValueError
        At construction, before any work: a field of the wrong type or out of range, or an
        unknown or invalid key in ``model`` (naming the field, the value and what is allowed);
        a ``corpus`` path with no file; a ``device`` that cannot train (``"meta"``); a ``dag``
        coefficient above 0 for a GPT (it has no A_LM, A_P or G_LM to regularise); a ``warmup``
        longer than ``steps`` (the rate would never reach its peak).
    """

    model: dict = field(
        default_factory=dict, metadata=_help("PLDRConfig fields (not vocab_size), e.g. hidden_size")
    )
    architecture: str = field(default="pldrllm", metadata=_help("'pldrllm' or 'gpt'"))
    corpus: str = field(default="pydoc", metadata=_help("a source of kvattn.data.load_text"))
    corpus_chars: int | None = field(
        default=None, metadata=_help("cut the corpus to this many characters (null: all)")
    )
    vocab_size: int = field(default=1024, metadata=_help("SentencePiece vocabulary size"))
    block_size: int = field(default=64, metadata=_help("tokens per training block"))
    val_every: int = field(default=10, metadata=_help("hold out every k-th document (k >= 2)"))
    batch_size: int = field(default=16, metadata=_help("global batch (sequences per step)"))
    steps: int = field(default=1000, metadata=_help("optimiser steps"))
    lr: float = field(default=1e-3, metadata=_help(f"peak learning rate, in (0, {MAX_LR:g})"))
    warmup: int = field(default=100, metadata=_help("linear warm-up steps"))
    min_lr_ratio: float = field(
        default=0.1, metadata=_help("final learning rate / peak, in [0, 1]")
    )
    betas: tuple[float, float] = field(
        default=(0.9, 0.95), metadata=_help("AdamW betas, two numbers in [0, 1)")
    )
    eps: float = field(default=1e-5, metadata=_help("AdamW eps (> 0)"))
    weight_decay: float = field(default=0.1, metadata=_help("AdamW weight decay (>= 0)"))
    clip_value: float | None = field(
        default=1.0, metadata=_help("clip every gradient entry to ±clip_value (null: off)")
    )
    clip_norm: float | None = field(
        default=None, metadata=_help("clip the gradients' global norm (null: off)")
    )
    dag: tuple[float, float, float] = field(
        default=(0.0, 0.0, 0.0), metadata=_help("DAG coefficients on A_LM, A_P, G_LM (>= 0)")
    )
    eval_every: int = field(default=100, metadata=_help("validate every this many steps"))
    eval_blocks: int = field(default=64, metadata=_help("validation blocks per evaluation"))
    checkpoint_every: int = field(default=500, metadata=_help("checkpoint every this many steps"))
    log_every: int = field(
        default=1, metadata=_help("record (and check) the loss every this many steps")
    )
    out_dir: str = field(default="runs/pldr", metadata=_help("output folder (holds checkpoint/)"))
    overwrite: bool = field(
        default=False, metadata=_help("replace a run already in out_dir instead of refusing")
    )
    seed: int = field(default=1234, metadata=_help("seed of the initialisation and the batches"))
    device: str = field(
        default="auto", metadata=_help("'auto' (cuda:LOCAL_RANK if available), 'cpu', 'cuda' ...")
    )
    bf16: bool = field(default=True, metadata=_help("bf16 autocast where the GPU supports it"))
    compile: bool = field(
        default=False,
        metadata=_help(
            "torch.compile the training forward (the first steps pay the compile time; "
            "evaluation, checkpoints and the results use the plain model)"
        ),
    )
    fused_adamw: bool = field(
        default=False,
        metadata=_help(
            "PyTorch's fused AdamW kernel instead of foreach (one pass per tensor; equal to "
            "rounding, so not a bit-for-bit repeat of a foreach run)"
        ),
    )
    probe_every: int | None = field(
        default=None,
        metadata=_help(
            "record the collapse measures (kvattn.diagnostics.collapse_measures) on fixed "
            "validation blocks before training, every this many steps and after the last "
            "(null: off; PLDR-LLM only); saved as checkpoint/probes.json"
        ),
    )
    probe_blocks: int = field(
        default=4,
        metadata=_help(
            "validation blocks used as probes and donors (>= 2); as many again score the "
            "G_LM substitution"
        ),
    )

    def __post_init__(self) -> None:
        check_choice("architecture", self.architecture, ("pldrllm", "gpt"))
        for name in ("corpus", "out_dir", "device"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise ValueError(f"{name} must be a non-empty string, got {getattr(self, name)!r}")
        check_int("vocab_size", self.vocab_size, low=MIN_VOCAB_SIZE)
        for name in (
            "block_size",
            "batch_size",
            "steps",
            "eval_every",
            "eval_blocks",
            "checkpoint_every",
            "log_every",
        ):
            check_int(name, getattr(self, name), low=1)
        check_int("val_every", self.val_every, low=2)
        check_int("warmup", self.warmup, low=0)
        check_int("seed", self.seed, low=0)
        if self.corpus_chars is not None:
            check_int("corpus_chars", self.corpus_chars, low=1)
        if self.probe_every is not None:
            check_int("probe_every", self.probe_every, low=1)
            if self.architecture != "pldrllm":
                raise ValueError(
                    f"probe_every needs architecture 'pldrllm': a {self.architecture!r} model has "
                    "no G_LM to measure; set probe_every to null"
                )
        check_int("probe_blocks", self.probe_blocks, low=2)
        for name in ("overwrite", "bf16", "compile", "fused_adamw"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be true or false, got {getattr(self, name)!r}")
        check_optimiser(
            lr=self.lr,
            min_lr_ratio=self.min_lr_ratio,
            betas=self.betas,
            eps=self.eps,
            weight_decay=self.weight_decay,
            clip_value=self.clip_value,
            clip_norm=self.clip_norm,
        )
        if (
            not isinstance(self.dag, list | tuple)
            or len(self.dag) != 3
            or not all(is_real(c) and c >= 0 for c in self.dag)
        ):
            raise ValueError(f"dag must be three non-negative coefficients, got {self.dag!r}")
        if self.warmup > self.steps:
            raise ValueError(
                f"warmup must be at most steps, got warmup={self.warmup}, steps={self.steps}: the "
                f"learning rate would never reach its peak {self.lr:g}; shorten the warm-up"
            )
        if self.architecture == "gpt" and any(c > 0 for c in self.dag):
            raise ValueError(
                f"dag needs architecture 'pldrllm': a 'gpt' model has no A_LM, A_P or G_LM to "
                f"regularise, so dag={list(self.dag)} would be ignored; set dag to [0, 0, 0]"
            )
        # the device type only: what this machine has is asked when the run starts
        parse_device(self.device)
        # a path corpus is read only once the run has started (the shipped names and the hub's
        # datasets are load_text's to check)
        named = self.corpus in CORPORA or self.corpus.startswith("hf:")
        if not named and not Path(self.corpus).is_file():
            raise ValueError(
                f"corpus must be 'pydoc', 'stdlib', 'hf:NAME[:SPLIT[:COLUMN]]' or the path of a "
                f"text file, got {self.corpus!r}: no file at {Path(self.corpus).absolute()}"
            )
        if not isinstance(self.model, dict):
            raise ValueError(f"model must be a dict of PLDRConfig fields, got {self.model!r}")
        if "vocab_size" in self.model:
            raise ValueError(
                "model must not set vocab_size (it comes from the tokenizer); set the top-level "
                f"vocab_size instead, got model.vocab_size={self.model['vocab_size']!r}"
            )
        model_cfg = PLDRConfig.from_dict(self.model_fields(self.vocab_size), strict=True)
        if model_cfg.max_position_embeddings < self.block_size:
            raise ValueError(
                f"model.max_position_embeddings={model_cfg.max_position_embeddings} is smaller "
                f"than block_size={self.block_size}"
            )
        self.betas = tuple(self.betas)
        self.dag = tuple(self.dag)

    def model_fields(self, vocab_size: int) -> dict:
        """The :class:`kvattn.config.PLDRConfig` fields of the run's model for a tokenizer of
        ``vocab_size`` pieces (``max_position_embeddings`` defaults to ``block_size``)."""
        return {"max_position_embeddings": self.block_size, **self.model, "vocab_size": vocab_size}

    @classmethod
    def from_file(cls, path: str | Path) -> PretrainConfig:
        """Read a JSON config; unknown keys are an error (a typo must not be ignored).

        Raises
        ------
        FileNotFoundError
            No file at ``path``.
        ValueError
            ``path`` is a folder or cannot be read, not UTF-8 text, not valid JSON, not an
            object, unknown keys (with the closest field names), or a field that fails
            validation; the message names the file.
        """
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"no config file at {path}")
        if not path.is_file():
            raise ValueError(f"{path} is not a file: expected a JSON file of PretrainConfig fields")
        try:
            raw = json.loads(path.read_bytes().decode("utf-8"))
        except OSError as err:
            raise ValueError(f"cannot read the config {path}: {err}") from None
        except UnicodeDecodeError as err:
            raise ValueError(
                f"{path} is not UTF-8 text: byte {err.object[err.start]:#04x} at offset "
                f"{err.start} ({err.reason})"
            ) from None
        except json.JSONDecodeError as err:
            raise ValueError(f"{path} is not valid JSON: {err}") from None
        if not isinstance(raw, dict):
            raise ValueError(f"{path} must hold a JSON object of PretrainConfig fields")
        reject_unknown_keys(str(path), raw, {f.name for f in fields(cls)})
        return cls(**raw)

    def to_dict(self) -> dict:
        return asdict(self)


#: PretrainConfig fields that may differ between a checkpoint and the run resuming it; any other
#: difference changes the model, the data or the optimisation, so the resume is refused.
#: (``probe_blocks`` may change only while the checkpoint holds no trajectory to continue.)
RESUMABLE_CHANGES = frozenset(
    {
        "steps",
        "out_dir",
        "overwrite",
        "device",
        "bf16",
        "compile",
        "fused_adamw",
        "eval_every",
        "checkpoint_every",
        "log_every",
        "probe_every",
        "probe_blocks",
    }
)
