"""The text snapshots (``data/corpora/``) that :func:`kvattn.data.load_text` reads, made from the
running interpreter: the same text on every Python, whatever its own version ships."""

from __future__ import annotations

import hashlib
import lzma
import os
import platform
import shutil
from pathlib import Path

from .. import data
from .._files import write_json
from ..checkpoint import replace_directory
from .files import ReproduceError, stage_folder

#: The files of ``data/corpora/``.
CORPORA_FILES = (*(f"{name}.txt.xz" for name in data.CORPORA), "LICENSE", data.CORPORA_RECORD)


def python_licence() -> Path:
    """The licence file of the running Python (``LICENSE.txt`` beside its standard library),
    which covers the text the snapshots hold.

    Raises
    ------
    ~kvattn.reproduce.files.ReproduceError
        This Python has none (a trimmed install): nothing can be shipped without it.
    """
    licence = Path(os.__file__).resolve().parent / "LICENSE.txt"
    if not licence.is_file():
        raise ReproduceError(
            f"this Python has no licence file at {licence} to ship beside the text"
        )
    return licence


def check_corpora_folder(folder: Path) -> None:
    """Refuse to replace a corpora folder that holds files the command did not make.

    Raises
    ------
    ~kvattn.reproduce.files.ReproduceError
        Naming the files.
    """
    foreign = sorted(p.name for p in folder.iterdir() if p.name not in CORPORA_FILES)
    if foreign:
        raise ReproduceError(
            f"{folder} holds files this command did not make, which replacing it would "
            f"delete: {foreign}"
        )


def make_corpora(out: Path) -> Path:
    """Snapshot this interpreter's corpora (:func:`kvattn.data.interpreter_text`) into
    ``out/corpora/``: ``<name>.txt.xz`` each, ``corpora.json`` (Python version, characters,
    SHA-256) and the Python licence that covers them (``LICENSE``). The folder is written in
    full beside the old one and swapped in, so the snapshots and their record always agree."""
    licence = python_licence()
    folder = out / "corpora"
    staging = stage_folder(folder)
    record = {}
    for name in data.CORPORA:
        raw = data.interpreter_text(name).encode("utf-8")
        (staging / f"{name}.txt.xz").write_bytes(lzma.compress(raw, preset=9 | lzma.PRESET_EXTREME))
        record[name] = {
            "python": platform.python_version(),
            "chars": len(raw.decode("utf-8")),
            "sha256": hashlib.sha256(raw).hexdigest(),
        }
    shutil.copyfile(licence, staging / "LICENSE")
    write_json(staging / data.CORPORA_RECORD, record)
    replace_directory(folder)
    return folder
