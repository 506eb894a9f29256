"""The text corpora: the shipped snapshots of CPython 3.11.7's text, any local text file, or a
Hugging Face dataset; and the running interpreter's own text, which the snapshots were made from.

The two built-in corpora are the Python language reference (``pydoc_data.topics``, about 465 kB
of English) and the standard-library source, read from snapshots the course ships in
``data/corpora/`` so that every Python trains on the same text.
"""

from __future__ import annotations

import functools
import hashlib
import lzma
import os
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from ..schema import read_json
from .locators import _shipped_file

#: The corpora that :func:`~kvattn.data.load_text` reads from shipped snapshots, not from the
#: interpreter.
CORPORA = ("pydoc", "stdlib")

#: The record of the shipped corpora's provenance, beside them in ``data/corpora/``.
CORPORA_RECORD = "corpora.json"


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
        ``source`` is not one of :data:`~kvattn.data.corpora.CORPORA`.
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
    """Where the shipped corpus ``name`` (one of :data:`~kvattn.data.corpora.CORPORA`) lies, and
    what it must hold.

    Raises
    ------
    ValueError
        ``name`` is not one of :data:`~kvattn.data.corpora.CORPORA`, or ``corpora.json`` does
        not describe it.
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
