"""Writing files whole: the content goes to a temporary sibling, is flushed to disk, and is renamed
over the file, so that a kill at any moment leaves the old file or the new one, never half of one.
A symbolic link keeps pointing at its target, whose content is replaced. And completing a folder
swap that a kill interrupted (:func:`finish_swap`), for the readers of shipped folders."""

from __future__ import annotations

import json
import os
from pathlib import Path

_TMP = ".kvattn-tmp"


def write_bytes(path: Path, content: bytes) -> Path:
    """Write ``content`` to ``path`` whole (the module docstring); returns ``path``. The folder is
    created if missing."""
    path = Path(path)
    target = path.resolve() if path.is_symlink() else path
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + _TMP)
    with open(tmp, "wb") as f:
        f.write(content)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, target)
    return path


def write_json(path: Path, obj: object) -> Path:
    """Write ``obj`` as indented JSON to ``path`` whole (``write_bytes``); NaN or infinity is
    refused before anything is written (strict JSON: ``ValueError``)."""
    return write_bytes(path, (json.dumps(obj, indent=1, allow_nan=False) + "\n").encode())


#: The sibling names of a folder swap (:func:`kvattn.checkpoint.replace_directory`): the new
#: contents are staged at ``<folder>.kvattn-staging``; the old folder waits at
#: ``<folder>.kvattn-replaced`` between the swap's two moves.
STAGING, ASIDE = ".kvattn-staging", ".kvattn-replaced"


def is_swap_leftover(name: str) -> bool:
    """Whether ``name`` (a file or folder name) is one a folder swap uses for a while, never a
    shipped name."""
    return name.endswith((STAGING, ASIDE))


def finish_swap(folder: Path) -> bool:
    """Complete a folder swap killed between its two moves, as the readers of shipped folders
    find it: ``folder`` is missing and ``<folder>.kvattn-replaced`` holds the old contents. The
    staging folder, complete by then, is moved in (the old one is restored where it is gone);
    nothing is deleted (the next swap there tidies up). Returns whether a folder was moved in.

    Raises
    ------
    FileNotFoundError
        The swap cannot be completed here (a read-only install): the message names the folders
        and what to rename.
    """
    folder = Path(folder)
    staging, aside = folder.with_name(folder.name + STAGING), folder.with_name(folder.name + ASIDE)
    if folder.exists() or folder.is_symlink() or not aside.is_dir():
        return False
    source = staging if staging.is_dir() else aside
    try:
        source.rename(folder)
    except OSError as err:
        raise FileNotFoundError(
            f"{folder} is missing: a swap that replaced it was interrupted between its two moves "
            f"and cannot be completed here ({err}); rename {source} to {folder.name}"
        ) from None
    return True
