"""Code that fits (issue 38): every code cell line of the book's notebooks is at most 79
characters, the monospace characters the text column shows at 1280 px, so that no reader scrolls
sideways in a code cell. ``ruff`` formats and checks the notebooks at that width
(``notebooks/ruff.toml``, ``book/ruff.toml``); this test also covers what ruff lets through
(IPython magics, lines ruff cannot break) and reports every long line at once.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAX_CODE_WIDTH = 79

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb")) + sorted((ROOT / "book").glob("*.ipynb"))


def long_lines(nb: dict, width: int = MAX_CODE_WIDTH) -> list[str]:
    """'cell <id>, line <n> (<length> characters): <line>' for every code line over ``width``."""
    found = []
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        for n, line in enumerate(source.splitlines(), start=1):
            if len(line) > width:
                found.append(
                    f"cell {cell.get('id', f'#{i}')}, line {n} ({len(line)} characters): {line}"
                )
    return found


def test_the_check_finds_a_long_line_and_names_its_cell():
    nb = {
        "cells": [
            {"cell_type": "markdown", "id": "prose", "source": ["x" * 200]},
            {"cell_type": "code", "id": "ok", "source": ["y = 1\n", "z" * 79]},
            {"cell_type": "code", "id": "wide", "source": ["a = 1\n", "b" * 80 + "\n"]},
        ]
    }
    assert long_lines(nb) == [f"cell wide, line 2 (80 characters): {'b' * 80}"]


def test_the_book_has_notebooks_to_check():
    names = {p.stem for p in NOTEBOOKS}
    assert {"01_key_value_memories", "11_criticality", "benchmarks"} <= names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_code_line_fits_the_text_column(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    found = long_lines(nb)
    assert not found, (
        f"{path.relative_to(ROOT)}: {len(found)} code lines over {MAX_CODE_WIDTH} characters "
        "(run `ruff format` on it, then shorten the rest by hand):\n" + "\n".join(found)
    )


def included_source(nb_path: Path) -> list[tuple[str, str]]:
    """(file, object) for each ``literalinclude`` of library source with a ``:pyobject:`` in a
    notebook's markdown cells."""
    found = []
    for cell in json.loads(nb_path.read_text())["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        text = "".join(cell["source"])
        for block in re.findall(r"```\{literalinclude\} ([^\n]+)\n(.*?)```", text, re.S):
            obj = re.search(r":pyobject: (\S+)", block[1])
            found.append((block[0].strip(), obj.group(1) if obj else ""))
    return found


def object_lines(path: Path, dotted: str) -> list[str]:
    """The source lines of ``Class``, ``function`` or ``Class.method`` in a Python file."""
    source = path.read_text()
    scope: list = ast.parse(source).body
    node = None
    for name in dotted.split("."):
        node = next(n for n in scope if getattr(n, "name", None) == name)
        scope = node.body
    return source.splitlines()[node.lineno - 1 - len(node.decorator_list) : node.end_lineno]


def test_the_model_source_a_chapter_shows_fits_the_column():
    """Chapter 7 shows the model's code from ``kvattn/plga.py`` itself (a literal include, not a
    copy); each included object is at most 79 characters wide, as code cells are."""
    shown = {p.name: included_source(p) for p in NOTEBOOKS}
    assert ("../lib/kvattn/plga.py", "PowerLawGraph") in shown["07_plga_piece_by_piece.ipynb"]
    wide = []
    for name, includes in shown.items():
        for file, obj in includes:
            assert obj, f"{name}: include {file} names no :pyobject:"
            lines = object_lines((ROOT / "notebooks" / file).resolve(), obj)
            wide += [f"{name}: {obj}: {line}" for line in lines if len(line) > MAX_CODE_WIDTH]
    assert not wide, "\n".join(wide)
