"""Writing files whole: the content goes to a temporary sibling, is flushed to disk, and is renamed
over the file, so that a kill at any moment leaves the old file or the new one, never half of one.
A symbolic link keeps pointing at its target, whose content is replaced."""

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
