"""The SentencePiece tokenizer: trained here, read beside a checkpoint, checked against a model.

Its settings follow the published PLDR-LLM tokenizer (byte fallback, split digits, the special
tokens :data:`SPECIAL_TOKENS`), at the small vocabularies of the course's models.
"""

from __future__ import annotations

import io
import numbers
from pathlib import Path

import sentencepiece as spm

#: Special tokens and their ids, as in the published PLDR-LLM tokenizer.
SPECIAL_TOKENS = {"[PAD]": 0, "[UNK]": 1, "[START]": 2, "[END]": 3}


#: The smallest vocabulary :func:`~kvattn.data.train_tokenizer` accepts: the 4 special tokens, the
#: 256 byte tokens of byte fallback, and room for some pieces.
MIN_VOCAB_SIZE = 300


def train_tokenizer(text: str, vocab_size: int = 2048) -> spm.SentencePieceProcessor:
    """Train a SentencePiece unigram tokenizer on ``text``, in memory, deterministically.

    Settings follow the published PLDR-LLM tokenizer: byte fallback, split digits, ids
    ``[PAD]`` = 0, ``[UNK]`` = 1, ``[START]`` = 2, ``[END]`` = 3 (see
    :data:`~kvattn.data.tokenizer.SPECIAL_TOKENS`); the vocabulary is small because the models are.
    Each non-empty line is one training sentence.

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
