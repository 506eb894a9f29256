"""The API pages say where the book teaches each definition (d2l's "Defined in").

:func:`taught_in` reads the chapters' code cells in order, resolves every kvattn name a cell uses
to the object's home (``module.qualname``: ``diagnostics.perron_frobenius`` in a chapter is
``kvattn.diagnostics.measures.perron_frobenius``) and keeps, for each, the first chapter and
section whose code uses it. Names are resolved from the cell's imports (``from kvattn import
diagnostics``, ``from kvattn.pldr import PLDRLLM``, ``import kvattn.plga as plga``) and attribute
chains from them (``explorers.slot.figure``); a method reached through an instance
(``model.activations``) is not resolved, and neither is a constant.

The Sphinx hook appends "Taught in chapter N, section" with a link to the chapter to the
docstring of every documented function and class in the index, so the page needs no upkeep: a
chapter that starts using a definition makes the link.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Lesson:
    """Where a definition is first used: the chapter's number, its document name (for a link,
    ``notebooks/07_plga_piece_by_piece``) and the section's title."""

    chapter: int
    document: str
    section: str


def _code(source: str) -> ast.Module | None:
    # IPython lines (%pip, !ls) are not Python; a cell that still does not parse teaches nothing
    lines = [line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))]
    try:
        return ast.parse("\n".join(lines))
    except SyntaxError:
        return None


def _resolve(path: list[str]) -> object | None:
    """The object at a dotted path whose first part is a kvattn module."""
    try:
        obj = importlib.import_module(path[0])
    except ImportError:
        return None
    for part in path[1:]:
        try:
            obj = getattr(obj, part)
        except AttributeError:
            try:
                obj = importlib.import_module(f"{obj.__name__}.{part}")
            except (ImportError, AttributeError):
                return None
    return obj


def home(obj: object) -> str | None:
    """``module.qualname`` of a kvattn function or class, None for anything else."""
    if not (inspect.isfunction(obj) or inspect.isclass(obj)):
        return None
    module = getattr(obj, "__module__", "") or ""
    return f"{module}.{obj.__qualname__}" if module.split(".")[0] == "kvattn" else None


def _aliases(tree: ast.Module) -> dict[str, list[str]]:
    """Local name → dotted kvattn path, from the imports of a cell."""
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "kvattn":
                    local = a.asname or a.name.split(".")[0]
                    found[local] = a.name.split(".") if a.asname else ["kvattn"]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "kvattn":
            for a in node.names:
                found[a.asname or a.name] = [*node.module.split("."), a.name]
    return found


def _chains(tree: ast.Module) -> list[list[str]]:
    """Every name and attribute chain read in a cell (``a.b.c`` as ``["a", "b", "c"]``)."""
    chains = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute | ast.Name) and isinstance(node.ctx, ast.Load):
            parts, cur = [], node
            while isinstance(cur, ast.Attribute):
                parts.append(cur.attr)
                cur = cur.value
            if isinstance(cur, ast.Name):
                chains.append([cur.id, *reversed(parts)])
    return chains


def taught_in(notebooks: list[Path]) -> dict[str, Lesson]:
    """``module.qualname`` → the first :class:`Lesson` whose code uses it, over ``notebooks``
    (chapters named ``NN_title.ipynb``, read in the order given)."""
    index: dict[str, Lesson] = {}
    for path in notebooks:
        chapter = int(path.name.split("_")[0])
        document = f"{path.parent.name}/{path.stem}"
        section = ""
        aliases: dict[str, list[str]] = {}
        for cell in json.loads(path.read_text())["cells"]:
            source = "".join(cell["source"])
            if cell["cell_type"] == "markdown":
                headings = re.findall(r"^##\s+(.+)$", source, re.M)
                section = headings[-1].strip() if headings else section
                continue
            tree = _code(source)
            if tree is None:
                continue
            aliases.update(_aliases(tree))
            for chain in _chains(tree):
                if chain[0] not in aliases:
                    continue
                path_ = [*aliases[chain[0]], *chain[1:]]
                for end in range(len(path_), 1, -1):
                    key = home(_resolve(path_[:end]))
                    if key:
                        index.setdefault(key, Lesson(chapter, document, section))
                        break
    return index


def _plain(title: str) -> str:
    # a link's text: no TeX, markup or angle brackets
    return re.sub(r"[$\\{}`<>*]", "", title)


def _add_lesson(app, what, name, obj, options, lines) -> None:
    key = home(obj)
    lesson = app.env.kvattn_taught_in.get(key or "")
    if lesson is None or key != name:
        return  # taught elsewhere, or the same object documented under another name
    where = f"chapter {lesson.chapter}" + (f", {_plain(lesson.section)}" if lesson.section else "")
    lines += ["", f"*Taught in* :doc:`{where} </{lesson.document}>`."]


def _build_index(app) -> None:
    app.env.kvattn_taught_in = taught_in(sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")))


def setup(app) -> dict:
    app.connect("builder-inited", _build_index)
    app.connect("autodoc-process-docstring", _add_lesson)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
