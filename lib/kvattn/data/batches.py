"""Token streams and batches for language modelling: a corpus split into documents, tokenized,
packed into blocks or sampled as random next-token batches, and a run's validation blocks.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from dataclasses import dataclass

import sentencepiece as spm
import torch

from .._checks import check_device, check_int
from .corpora import load_text
from .tokenizer import SPECIAL_TOKENS, train_tokenizer

Tensor = torch.Tensor


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
