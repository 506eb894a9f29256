"""The API pages' back-links (d2l's "Defined in"): ``book/_ext/taught_in.py`` finds, for every
kvattn function and class the chapters' code uses, the first chapter and section that uses it,
resolved to the object's home, and the Sphinx hook writes the link into its docstring."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "book" / "_ext"))

import taught_in  # noqa: E402

CHAPTERS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
INDEX = taught_in.taught_in(CHAPTERS)


def test_the_chapters_definitions_point_at_the_chapter_and_section_that_use_them_first():
    pf = INDEX["kvattn.diagnostics.measures.perron_frobenius"]
    assert (pf.chapter, pf.document) == (7, "notebooks/07_plga_piece_by_piece")
    assert pf.section == "Positivity and the Perron–Frobenius eigenpair"
    # through a package's re-export, an explorer's module and a `from ... import`
    assert INDEX["kvattn.course.explorers.slot.figure"].chapter == 1
    assert INDEX["kvattn.pldr.PLDRLLM"].chapter == 6
    assert INDEX["kvattn.plga.iswiglu"].chapter == 7
    assert INDEX["kvattn.course.depth_report.depth_reading"].chapter == 11
    assert len(INDEX) > 150
    assert all(key.startswith("kvattn.") for key in INDEX)


def _notebook(tmp_path: Path, name: str, cells: list[tuple[str, str]]) -> Path:
    path = tmp_path / name
    nb = {"cells": [{"cell_type": k, "metadata": {}, "source": s} for k, s in cells]}
    path.write_text(json.dumps(nb))
    return path


def test_imports_aliases_sections_and_the_first_use_win(tmp_path):
    first = _notebook(
        tmp_path,
        "02_first.ipynb",
        [
            ("markdown", "# Title\n\n## Setting up"),
            ("code", "%pip install x\nfrom kvattn import diagnostics as dg\nimport kvattn"),
            ("markdown", "## The eigenvector"),
            ("code", "dg.perron_frobenius(A)\nkvattn.stats.holm([0.1])\nmodel.activations(ids)"),
        ],
    )
    later = _notebook(
        tmp_path,
        "03_later.ipynb",
        [
            ("markdown", "## Again"),
            ("code", "from kvattn.diagnostics import perron_frobenius, rank_audit\nrank_audit(A)"),
        ],
    )
    index = taught_in.taught_in([first, later])
    assert index["kvattn.diagnostics.measures.perron_frobenius"] == taught_in.Lesson(
        2, f"{tmp_path.name}/02_first", "The eigenvector"
    )
    assert index["kvattn.stats.holm"].section == "The eigenvector"
    assert index["kvattn.diagnostics.measures.rank_audit"].chapter == 3
    assert set(index) == {
        "kvattn.diagnostics.measures.perron_frobenius",
        "kvattn.stats.holm",
        "kvattn.diagnostics.measures.rank_audit",
    }


def test_the_hook_adds_the_link_once_and_only_under_the_home_name():
    from kvattn.diagnostics import perron_frobenius

    app = types.SimpleNamespace(env=types.SimpleNamespace(kvattn_taught_in=INDEX))
    lines = ["The eigenpair."]
    home = "kvattn.diagnostics.measures.perron_frobenius"
    taught_in._add_lesson(app, "function", home, perron_frobenius, {}, lines)
    assert lines[-1] == (
        "*Taught in* :doc:`chapter 7, Positivity and the Perron–Frobenius eigenpair "
        "</notebooks/07_plga_piece_by_piece>`."
    )
    again = ["The eigenpair."]
    taught_in._add_lesson(
        app, "function", "kvattn.diagnostics.perron_frobenius", perron_frobenius, {}, again
    )
    assert again == ["The eigenpair."]
