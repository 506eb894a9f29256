"""Whole-file writes (kvattn._files): a kill or a failure while writing leaves the old file, and a
symbolic link keeps pointing at its target, whose content is replaced."""

from __future__ import annotations

import math
import os

import pytest

from kvattn import _files


def test_a_write_that_fails_leaves_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "record.json"
    _files.write_json(path, {"a": 1})

    def fail(fd):  # as a full disk or a kill would, after part of the content was written
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", fail)
    with pytest.raises(OSError, match="No space"):
        _files.write_json(path, {"a": 2})
    assert path.read_text() == '{\n "a": 1\n}\n'
    monkeypatch.undo()
    with pytest.raises(ValueError, match="Out of range float"):
        _files.write_json(path, {"a": math.nan})  # refused before anything is written
    assert path.read_text() == '{\n "a": 1\n}\n'


def test_a_symbolic_link_is_written_through(tmp_path):
    """Writing onto a link replaced the link by a plain file and left its target stale."""
    target = tmp_path / "disk" / "record.json"
    target.parent.mkdir()
    target.write_text("old")
    link = tmp_path / "record.json"
    link.symlink_to(target)
    _files.write_bytes(link, b"new")
    assert link.is_symlink() and target.read_text() == "new"
    assert sorted(p.name for p in target.parent.iterdir()) == ["record.json"]
