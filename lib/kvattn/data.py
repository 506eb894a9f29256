"""Data for the course's experiments, all made or found on the machine (no downloads).

* Real text: the Python language reference that ships with every CPython
  (``pydoc_data.topics``, about 465 kB of English) and the standard-library source, both read
  from snapshots of CPython 3.11.7 that the course ships, or any local text file; a
  SentencePiece unigram tokenizer trained on it; random next-token batches.
* A teacher-student regression task (a random tanh network to imitate).
* A synthetic key-value recall task (memorise a random key → value table).
* The trained checkpoints and their recipes that the course ships in ``data/``.
"""

from __future__ import annotations

import functools
import hashlib
import io
import lzma
import numbers
import os
import sysconfig
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import sentencepiece as spm
import torch

from ._checks import check_bool, check_device, check_int, is_int
from ._files import finish_swap, is_swap_leftover
from .schema import check_file, read_json

Tensor = torch.Tensor

#: Special tokens and their ids, as in the published PLDR-LLM tokenizer.
SPECIAL_TOKENS = {"[PAD]": 0, "[UNK]": 1, "[START]": 2, "[END]": 3}


#: The corpora that :func:`load_text` reads from shipped snapshots, not from the interpreter.
CORPORA = ("pydoc", "stdlib")


def load_text(source: str | Path = "pydoc", max_chars: int | None = None) -> str:
    """Return a text corpus.

    The two built-in corpora are read from snapshots the course ships (``data/corpora/``, the
    text of CPython 3.11.7, under the PSF licence; see :func:`corpus_snapshot`), not from the
    running interpreter, whose text differs between Python versions: every Python, Colab's
    included, trains and evaluates on the text the book was made with.

    Parameters
    ----------
    source:
        ``"pydoc"`` — the Python language reference topics (``pydoc_data.topics``), joined in
        sorted-key order (465,126 characters); ``"stdlib"`` — the ``.py`` files of the standard
        library (sorted paths, test suites excluded), joined by blank lines;
        ``"hf:NAME[:SPLIT[:COLUMN]]"`` — a Hugging Face dataset (needs the ``datasets`` package
        and a network; default split ``train``, column ``text``; documents joined by blank
        lines); or a path to a UTF-8 text file.
    max_chars:
        Truncate to this many characters (``None``: the whole corpus).

    Raises
    ------
    FileNotFoundError
        A path that does not exist.
    TypeError
        ``source`` is neither a str nor a path (``os.PathLike``); ``max_chars`` is not an int
        (or ``None``).
    ValueError
        An empty corpus, a file that is not UTF-8 (naming the path), or a non-positive
        ``max_chars``.
    """
    if not isinstance(source, str | os.PathLike):
        raise TypeError(
            "source must be 'pydoc', 'stdlib', 'hf:NAME' or a path (a str or os.PathLike), got "
            f"{source!r} ({type(source).__name__})"
        )
    if max_chars is not None and (isinstance(max_chars, bool) or not isinstance(max_chars, int)):
        raise TypeError(f"max_chars must be an int or None, got {max_chars!r}")
    if max_chars is not None and max_chars <= 0:
        raise ValueError(f"max_chars must be positive, got {max_chars}")
    if source in CORPORA:
        text = _snapshot_text(source)
    elif isinstance(source, str) and source.startswith("hf:"):
        text = _load_hf_dataset(source, max_chars)
    else:
        path = Path(source)
        if not path.is_file():
            raise FileNotFoundError(
                f"no text file at {path}; source must be 'pydoc', 'stdlib' or a path"
            )
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as err:
            raise ValueError(
                f"{path} is not UTF-8 text: byte {err.object[err.start]:#04x} at offset "
                f"{err.start} ({err.reason})"
            ) from None
    if not text.strip():
        raise ValueError(f"the corpus {source!r} is empty")
    return text if max_chars is None else text[:max_chars]


def interpreter_text(source: str) -> str:
    """The corpus ``source`` (``"pydoc"`` or ``"stdlib"``) as the *running* interpreter has it:
    what the shipped snapshots were made from (``python -m kvattn.reproduce corpora``), and
    what :func:`load_text` read before them. It differs between Python versions.

    Raises
    ------
    ValueError
        ``source`` is not one of :data:`CORPORA`.
    """
    if source == "pydoc":
        from pydoc_data.topics import topics

        return "\n\n".join(topics[key] for key in sorted(topics))
    if source == "stdlib":
        root = Path(sysconfig.get_paths()["stdlib"])
        parts = []
        for path in sorted(root.rglob("*.py")):
            rel = path.relative_to(root).parts
            if any(p in ("test", "tests", "idle_test", "site-packages") for p in rel):
                continue
            parts.append(path.read_text(encoding="utf-8", errors="replace"))
        return "\n\n".join(parts)
    raise ValueError(f"source must be one of {CORPORA}, got {source!r}")


@dataclass(frozen=True)
class CorpusSnapshot:
    """A shipped corpus: ``path`` (``data/corpora/<name>.txt.xz``, xz-compressed UTF-8), and
    from ``data/corpora/corpora.json`` the Python it was read from, its length in characters and
    the SHA-256 of its UTF-8 bytes."""

    name: str
    path: Path
    python: str
    chars: int
    sha256: str


def corpus_snapshot(name: str) -> CorpusSnapshot:
    """Where the shipped corpus ``name`` (one of :data:`CORPORA`) lies, and what it must hold.

    Raises
    ------
    ValueError
        ``name`` is not one of :data:`CORPORA`, or ``corpora.json`` does not describe it.
    FileNotFoundError
        The snapshot is missing (a broken install or clone).
    """
    if name not in CORPORA:
        raise ValueError(f"expected a corpus name in {CORPORA}, got {name!r}")
    path = _shipped_file("corpus", name, "corpora/{}.txt.xz")
    record = read_json(path.parent / CORPORA_RECORD, "corpora").get(name)
    if record is None:
        raise ValueError(f"{path.parent / CORPORA_RECORD} has no entry for {name!r}")
    return CorpusSnapshot(name, path, record["python"], record["chars"], record["sha256"])


@functools.lru_cache(maxsize=len(CORPORA))
def _snapshot_text(name: str) -> str:
    snap = corpus_snapshot(name)
    try:
        raw = lzma.decompress(snap.path.read_bytes())
    except (lzma.LZMAError, EOFError) as err:
        raise ValueError(f"{snap.path} is corrupt (xz: {err}); {_RESTORE_CORPUS}") from None
    if hashlib.sha256(raw).hexdigest() != snap.sha256:
        raise ValueError(
            f"{snap.path} is corrupt: its SHA-256 differs from the one in {CORPORA_RECORD}; "
            + _RESTORE_CORPUS
        )
    return raw.decode("utf-8")


_RESTORE_CORPUS = (
    "restore it (in a clone: git checkout -- data/corpora; in an install: reinstall kvattn), or "
    "remake the snapshots on Python 3.11.7 with kvattn-reproduce corpora"
)


def _load_hf_dataset(source: str, max_chars: int | None) -> str:
    parts = source[3:].split(":")
    name = parts[0]
    split = parts[1] if len(parts) > 1 else "train"
    column = parts[2] if len(parts) > 2 else "text"
    try:
        from datasets import load_dataset
    except ImportError:
        raise ValueError(
            f"{source!r} needs the Hugging Face 'datasets' package (pip install datasets) and a "
            "network connection"
        ) from None
    parts, total = [], 0
    for row in load_dataset(name, split=split, streaming=True):
        if column not in row:
            raise ValueError(f"dataset {name!r} has no column {column!r}; columns: {list(row)}")
        parts.append(str(row[column]))
        total += len(parts[-1])
        if max_chars is not None and total >= max_chars:
            break
    return "\n\n".join(parts)


#: The smallest vocabulary :func:`train_tokenizer` accepts: the 4 special tokens, the 256 byte
#: tokens of byte fallback, and room for some pieces.
MIN_VOCAB_SIZE = 300


def train_tokenizer(text: str, vocab_size: int = 2048) -> spm.SentencePieceProcessor:
    """Train a SentencePiece unigram tokenizer on ``text``, in memory, deterministically.

    Settings follow the published PLDR-LLM tokenizer: byte fallback, split digits, ids
    ``[PAD]`` = 0, ``[UNK]`` = 1, ``[START]`` = 2, ``[END]`` = 3 (see :data:`SPECIAL_TOKENS`); the
    vocabulary is small because the models are. Each non-empty line is one training sentence.

    Raises
    ------
    TypeError
        ``text`` is not a str.
    ValueError
        ``vocab_size`` not an int, too small to hold the 4 special and 256 byte tokens, or too
        large for the text (SentencePiece needs enough distinct pieces).
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, numbers.Integral):
        # SentencePiece would parse 400.5 itself ("cannot parse as int"), or '<' fail on '400'
        raise ValueError(
            f"vocab_size must be an int >= {MIN_VOCAB_SIZE} (4 special + 256 byte tokens), "
            f"got {vocab_size!r}"
        )
    if vocab_size < MIN_VOCAB_SIZE:
        raise ValueError(
            f"vocab_size must be >= {MIN_VOCAB_SIZE} (4 special + 256 byte tokens), "
            f"got {vocab_size}"
        )
    lines = [line for line in text.splitlines() if line.strip()]
    model = io.BytesIO()
    try:
        _train_sentencepiece(lines, model, vocab_size)
    except RuntimeError as err:  # e.g. "Vocabulary size too high" for a short text
        raise ValueError(
            f"cannot train a {vocab_size}-piece tokenizer on this text: {err}"
        ) from None
    return spm.SentencePieceProcessor(model_proto=model.getvalue())


def _train_sentencepiece(lines: list[str], model: io.BytesIO, vocab_size: int) -> None:
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=model,
        vocab_size=vocab_size,
        model_type="unigram",
        byte_fallback=True,
        split_digits=True,
        character_coverage=1.0,
        pad_id=0,
        unk_id=1,
        bos_id=2,
        eos_id=3,
        pad_piece="[PAD]",
        unk_piece="[UNK]",
        bos_piece="[START]",
        eos_piece="[END]",
        num_threads=1,  # one thread makes the result reproducible
        minloglevel=2,  # keep the C++ trainer's log out of notebook stderr
    )


def load_tokenizer(directory: str | Path) -> spm.SentencePieceProcessor:
    """The SentencePiece tokenizer saved beside a checkpoint (``tokenizer.model``).

    Raises ``FileNotFoundError`` when there is none, ``ValueError`` (naming the file) when it is
    not a SentencePiece model.
    """
    path = Path(directory) / "tokenizer.model"
    if not path.exists():
        raise FileNotFoundError(f"{directory} has no tokenizer.model")
    try:
        return spm.SentencePieceProcessor(model_proto=path.read_bytes())
    except RuntimeError as err:
        raise ValueError(f"{path} is not a SentencePiece model: {err}") from None


def check_tokenizer(tokenizer: spm.SentencePieceProcessor, vocab_size: int, where: Path) -> None:
    """Refuse a tokenizer whose vocabulary differs from the model's ``vocab_size``.

    A tokenizer from another run encodes to ids the model does not have, or cannot decode the
    ids the model emits (SentencePiece's "piece id is out of range"). ``where`` is the checkpoint
    folder, named in the ``ValueError``.
    """
    pieces = tokenizer.get_piece_size()
    if pieces != vocab_size:
        raise ValueError(
            f"{Path(where) / 'tokenizer.model'} has {pieces} pieces but the model's vocab_size "
            f"in {Path(where) / 'config.json'} is {vocab_size}: the tokenizer comes from "
            "another run"
        )


@dataclass(frozen=True)
class TokenData:
    """A tokenised corpus split into a training and a validation stream of token ids (int64)."""

    tokenizer: spm.SentencePieceProcessor
    train: Tensor
    val: Tensor

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_piece_size()

    def decode(self, ids: Tensor | list[int]) -> str:
        """Token ids back to text.

        Raises ``ValueError`` for an id that is not an int in [0, ``vocab_size``).
        """
        return self.tokenizer.decode(self._checked(ids))

    def pieces(self, ids: Tensor | list[int]) -> list[str]:
        """Token ids to their SentencePiece pieces (``▁`` marks a leading space).

        Raises ``ValueError`` for an id that is not an int in [0, ``vocab_size``).
        """
        return [self.tokenizer.id_to_piece(i) for i in self._checked(ids)]

    def _checked(self, ids: Tensor | list[int]) -> list[int]:
        """``ids`` as a list, once every id is one of the vocabulary's: SentencePiece's own
        "piece id is out of range" names neither the id nor the vocabulary."""
        if isinstance(ids, Tensor):
            if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
                raise ValueError(f"token ids must be an integer tensor, got {ids.dtype}")
            ids = ids.tolist()
        flat = _flatten(ids)
        bad = [i for i in flat if not _is_index(i) or not 0 <= i < self.vocab_size]
        if bad:
            raise ValueError(
                f"token ids must be ints in [0, {self.vocab_size}) (this tokenizer's "
                f"vocabulary), got {', '.join(map(repr, bad[:5]))}"
                + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
            )
        return ids


def _flatten(ids: object) -> list:
    """The entries of a (nested) list of ids, or ``[ids]`` for anything else."""
    return [i for x in ids for i in _flatten(x)] if isinstance(ids, list | tuple) else [ids]


def _is_index(i: object) -> bool:
    return isinstance(i, numbers.Integral) and not isinstance(i, bool)


def split_documents(text: str, val_every: int = 10) -> tuple[list[str], list[str]]:
    """The documents of ``text`` (its non-blank paragraphs, separated by blank lines), split into
    training and validation: every ``val_every``-th document is held out, so the validation text
    comes from the same topics as the training text and the validation loss measures
    generalisation rather than a shift of subject.

    Raises
    ------
    TypeError
        ``text`` is not a str.
    ValueError
        ``val_every`` is not an int >= 2, or the text has fewer than ``val_every`` documents.
    """
    if not isinstance(text, str):  # bytes would fail in split() with a message about 'str'
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    if not isinstance(val_every, int) or val_every < 2:
        raise ValueError(f"val_every must be an int >= 2, got {val_every!r}")
    docs = [doc for doc in text.split("\n\n") if doc.strip()]
    if len(docs) < val_every:
        raise ValueError(f"need at least {val_every} documents (paragraphs), got {len(docs)}")
    train_docs = [d for i, d in enumerate(docs) if i % val_every != val_every - 1]
    val_docs = [d for i, d in enumerate(docs) if i % val_every == val_every - 1]
    return train_docs, val_docs


def encode_documents(tokenizer: spm.SentencePieceProcessor, docs: list[str]) -> Tensor:
    """One int64 id stream of ``docs``, each document encoded and followed by ``[END]`` (how the
    reference packs documents before cutting them into :func:`blocks`)."""
    end = SPECIAL_TOKENS["[END]"]
    ids: list[int] = []
    for doc in docs:
        ids.extend(tokenizer.encode(doc))
        ids.append(end)
    return torch.tensor(ids, dtype=torch.long)


def tokenize(text: str, vocab_size: int = 2048, val_every: int = 10) -> TokenData:
    """Train a tokenizer on ``text``'s training documents and encode both parts
    (:func:`split_documents`, then :func:`encode_documents`).

    Raises
    ------
    TypeError, ValueError
        As :func:`split_documents` and :func:`train_tokenizer`.
    """
    train_docs, val_docs = split_documents(text, val_every)
    tok = train_tokenizer("\n".join(train_docs), vocab_size)
    return TokenData(tok, encode_documents(tok, train_docs), encode_documents(tok, val_docs))


def lm_batch(
    ids: Tensor,
    batch_size: int,
    block_size: int,
    generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
) -> tuple[Tensor, Tensor]:
    """A random batch of next-token pairs from a 1-D id stream.

    Returns ``(x, y)``, both int64 of shape ``(batch_size, block_size)``, with
    ``y[:, t] = ids[start + t + 1]``.

    Raises
    ------
    TypeError
        ``ids`` is not an integer tensor.
    ValueError
        ``ids`` not 1-D or shorter than ``block_size + 1``; ``batch_size`` or ``block_size`` not
        an int >= 1; a ``device`` torch does not know or this machine lacks.
    """
    _check_stream(ids)
    check_int("batch_size", batch_size, low=1)
    check_int("block_size", block_size, low=1)
    if device is not None:
        check_device("device", device)
    if len(ids) < block_size + 1:
        raise ValueError(
            f"ids must be 1-D with at least block_size + 1 = {block_size + 1} entries, "
            f"got shape {tuple(ids.shape)}"
        )
    # A window of block_size + 1 ids may start anywhere up to len(ids) - block_size - 1.
    starts = torch.randint(0, len(ids) - block_size, (batch_size,), generator=generator)
    offsets = torch.arange(block_size + 1)
    window = ids[starts[:, None] + offsets]
    return window[:, :-1].to(device), window[:, 1:].to(device)


def blocks(ids: Tensor, block_size: int) -> Tensor:
    """Cut a 1-D id stream into consecutive non-overlapping windows of ``block_size + 1`` ids,
    shape ``[n, block_size + 1]``: inputs ``w[:, :-1]``, targets ``w[:, 1:]`` (the reference
    packs documents, [END] between them, into fixed-length blocks the same way). The remainder
    is dropped.

    Raises
    ------
    TypeError
        ``ids`` is not an integer tensor.
    ValueError
        ``ids`` not 1-D or shorter than one window; ``block_size`` not an int >= 1.
    """
    _check_stream(ids)
    check_int("block_size", block_size, low=1)
    n = len(ids) // (block_size + 1)
    if n < 1:
        raise ValueError(f"need at least {block_size + 1} ids for one block, got {len(ids)}")
    return ids[: n * (block_size + 1)].view(n, block_size + 1)


def validation_blocks(recipe: Mapping, tokenizer: spm.SentencePieceProcessor) -> Tensor:
    """The validation blocks ``[n, block_size + 1]`` of a pre-training run, cut as its training
    loop cuts them: the recipe's corpus (``corpus``, ``corpus_chars``), its held-out documents
    (every ``val_every``-th, :func:`split_documents`), each encoded with the run's ``tokenizer``
    and followed by [END] (:func:`encode_documents`), packed into :func:`blocks` of
    ``block_size``. ``recipe`` is a run's config as a dict (a recipe file, or the ``config`` of
    its ``trainer_state.json``).

    Raises
    ------
    KeyError
        ``recipe`` lacks one of the four keys (named).
    ValueError, TypeError, FileNotFoundError
        As :func:`load_text`, :func:`split_documents` and :func:`blocks`.
    """
    missing = [k for k in ("corpus", "corpus_chars", "val_every", "block_size") if k not in recipe]
    if missing:
        raise KeyError(f"the recipe lacks {missing}")
    text = load_text(recipe["corpus"], max_chars=recipe["corpus_chars"])
    _, val_docs = split_documents(text, recipe["val_every"])
    return blocks(encode_documents(tokenizer, val_docs), recipe["block_size"])


def _check_stream(ids: object) -> None:
    """``ids`` is a 1-D tensor of token ids: float ids would make float "token" batches."""
    if not isinstance(ids, Tensor):
        raise TypeError(f"ids must be a 1-D integer tensor of token ids, got {type(ids).__name__}")
    if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
        raise TypeError(f"ids must be a 1-D integer tensor of token ids, got {ids.dtype}")
    if ids.ndim != 1:
        raise ValueError(f"ids must be 1-D, got shape {tuple(ids.shape)}")


def _check_seed(seed: object) -> None:
    """``seed`` is what ``torch.Generator.manual_seed`` takes whole, an int in [0, 2**64)."""
    if not is_int(seed) or not 0 <= seed < 2**64:
        raise ValueError(f"seed must be an int in [0, 2**64), got {seed!r}")


@dataclass(frozen=True)
class RegressionTask:
    """Inputs and targets of a regression task: ``x_*`` ``(n, d_in)``, ``y_*`` ``(n, d_out)``."""

    x_train: Tensor
    y_train: Tensor
    x_test: Tensor
    y_test: Tensor


def teacher_student(
    d_in: int = 10,
    d_out: int = 5,
    n_train: int = 512,
    n_test: int = 2048,
    width: int = 32,
    seed: int = 0,
) -> RegressionTask:
    """A random teacher network y = tanh(x W₁ᵀ + b₁) W₂ to imitate, on inputs with a constant 1.

    The first ``d_in − 1`` input features are N(0, 1); the last is the constant 1, which stands in
    for the biases that the course's layers leave out (without it every form σ((q·x)(k·x)) would be
    an even function of x). The teacher is a tanh network, so no student layer (bilinear, ReGLU,
    SwiGLU, ...) has its form. W₁ ~ N(0, 1/d_in), b₁ ~ N(0, 1), W₂ ~ N(0, 1/width); float32;
    seeded.

    Raises
    ------
    ValueError
        A size that is not an int (``True`` included), ``d_in`` < 2 or another size < 1 (the one
        is named); ``seed`` not an int in [0, 2**64).
    """
    sizes = dict(d_in=(d_in, 2), d_out=(d_out, 1), n_train=(n_train, 1), n_test=(n_test, 1))
    for name, (value, low) in {**sizes, "width": (width, 1)}.items():
        if not is_int(value) or value < low:
            raise ValueError(
                f"need d_in >= 2 and positive d_out, n_train, n_test, width (ints), got {name} = "
                f"{value!r}"
            )
    _check_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    W1 = torch.randn(width, d_in, generator=gen) / d_in**0.5
    b1 = torch.randn(width, generator=gen)
    W2 = torch.randn(width, d_out, generator=gen) / width**0.5
    x = torch.randn(n_train + n_test, d_in, generator=gen)
    x[:, -1] = 1.0
    y = torch.tanh(x @ W1.T + b1) @ W2
    return RegressionTask(x[:n_train], y[:n_train], x[n_train:], y[n_train:])


def quadratic_task(
    A: Tensor,
    n_train: int = 1024,
    n_test: int = 1024,
    seed: int = 0,
    constant_feature: bool = True,
) -> RegressionTask:
    """Targets that are known quadratic forms, y_o = x A_o xᵀ, for reading interaction tensors.

    ``A`` has shape ``(d_out, d, d)``. Inputs are N(0, I) in every feature except, with
    ``constant_feature``, the last one, fixed at 1 so that A can also hold linear terms
    (entries pairing a feature with the constant) and offsets. Only the symmetric part of each
    A_o affects y. float32; seeded.
    """
    if A.ndim != 3 or A.shape[1] != A.shape[2]:
        raise ValueError(f"A must have shape (d_out, d, d), got {tuple(A.shape)}")
    gen = torch.Generator().manual_seed(seed)
    d = A.shape[-1]
    x = torch.randn(n_train + n_test, d, generator=gen)
    if constant_feature:
        x[:, -1] = 1.0
    y = torch.einsum("ni,oij,nj->no", x, A.float(), x)
    return RegressionTask(x[:n_train], y[:n_train], x[n_train:], y[n_train:])


@dataclass(frozen=True)
class RecallTask:
    """A key → value table to memorise.

    ``keys`` has shape ``(n_pairs, d)``; ``values`` is int64 of shape ``(n_pairs,)``.
    """

    keys: Tensor
    values: Tensor
    n_values: int


def key_value_recall(
    n_pairs: int = 512, d: int = 32, n_values: int = 64, seed: int = 0
) -> RecallTask:
    """A synthetic key-value memory task: random keys on the sphere of radius √d, each assigned a
    uniformly random value class. A layer of d inputs and ``n_values`` logits must store the table;
    accuracy on the keys measures how much it can hold.

    Raises
    ------
    ValueError
        A size that is not an int (``True`` included) or below its bound (the one is named);
        ``seed`` not an int in [0, 2**64).
    """
    for name, (value, low) in dict(n_pairs=(n_pairs, 1), d=(d, 1), n_values=(n_values, 2)).items():
        if not is_int(value) or value < low:
            raise ValueError(
                f"need n_pairs >= 1, d >= 1 and n_values >= 2 (ints), got {name} = {value!r}"
            )
    _check_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    keys = torch.randn(n_pairs, d, generator=gen)
    keys = keys / keys.norm(dim=1, keepdim=True) * d**0.5
    values = torch.randint(0, n_values, (n_pairs,), generator=gen)
    return RecallTask(keys, values, n_values)


#: The record of the shipped corpora's provenance, beside them in ``data/corpora/``.
CORPORA_RECORD = "corpora.json"

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
_PACKAGE_DATA = Path(__file__).resolve().parent / "_shipped"
# data/ in a clone of the repository (an editable install, the book build, nbval).
_CLONE_DATA = Path(__file__).resolve().parents[2] / "data"


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
    """The folder ``data/<name>/`` of a checkpoint the course ships (files :data:`SHIPPED_FILES`).

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
    :func:`kvattn.diagnostics.collapse.load_probes`) and the row-map gains of its first and last
    model; found
    like :func:`shipped`. With ``checkpoint=True``: the folder ``data/collapse_hunt/<name>/`` of
    the run's final model, shipped for the run nearest to collapse (files
    :data:`SHIPPED_FILES`, load it with :func:`kvattn.checkpoint.load_pretrained`).

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
    ``data/plans/<study>.json``, one of :data:`HUNT_STUDIES` (written by
    ``kvattn-reproduce hunt NAME --plan STUDY``), in the layout of :func:`collapse_hunt`'s
    records; found like :func:`shipped`.

    Raises
    ------
    TypeError, ValueError, FileNotFoundError
        As :func:`shipped` (the message lists the shipped runs); ``ValueError`` also for a
        ``study`` not in :data:`HUNT_STUDIES`.
    """
    if study not in HUNT_STUDIES:
        raise ValueError(f"study must be one of {HUNT_STUDIES}, got {study!r}")
    return _shipped_file(f"{study} run", name, study + "/{}.json", "hunt_record")


def trajectory(name: str) -> Path:
    """The JSON file ``data/trajectories/<name>.json``: the collapse measures recorded while the
    shipped checkpoint ``name`` trained again from its recipe with probes (written by
    ``kvattn-reproduce trajectory``; read it with
    :func:`kvattn.diagnostics.collapse.load_probes`, draw it with
    :func:`kvattn.plots.reports.collapse_trajectories`);
    found like :func:`shipped`.
    Raises as :func:`shipped` (listing the shipped trajectories).
    """
    return _shipped_file("trajectory", name, "trajectories/{}.json", "trajectory")
