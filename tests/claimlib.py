"""The claims ledger's machinery (CONTRIBUTING.md, "Claims"): a sentence of a chapter that
compares, quantifies or generalises, the output it rests on, and a check that evaluates the
claim itself on that output's data.

A ledger module (``tests/claims_*.py``) defines ``CLAIMS``, a list of :class:`Claim`.
``tests/test_claims.py`` checks every claim of every ledger module:

* its ``sentence`` is in the chapter's prose (Markdown cells, whitespace and Markdown emphasis
  ignored), so a reworded sentence must bring its claim along;
* ``check(data())`` passes: the claim holds on its data, over every row it covers;
* ``check(perturb(data()))`` fails, where a ``perturb`` is given: the check can fail, and fails
  the day the data stop supporting the sentence;
* every summary item and every answer box of every chapter holds the sentence of at least one
  claim.

A check raises ``AssertionError`` (a plain ``assert``) when the claim does not hold; it returns
nothing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
BOOK = ROOT / "book"


@dataclass(frozen=True)
class Claim:
    """One ledgered sentence.

    ``page``: a notebook stem (``"04_symmetry_breaking"``) or a book page (``"book/intro"``);
    ``sentence``: a verbatim part of the prose (whitespace and ``*``/`` ` `` ignored);
    ``rests_on``: the printed table, figure or output the sentence rests on, as the reader finds
    it; ``data``: loads what that output shows (shipped files, or the library call the chapter
    makes); ``check``: asserts the claim on it; ``perturb``: optional, returns the data changed
    against the claim (the check must then fail)."""

    page: str
    sentence: str
    rests_on: str
    data: Callable[[], object]
    check: Callable[[object], None]
    perturb: Callable[[object], object] | None = None

    @property
    def id(self) -> str:
        words = re.sub(r"[^\w]+", " ", self.sentence).split()
        return f"{self.page.split('/')[-1][:2]}:{'-'.join(words[:6])}"


def normalise(text: str) -> str:
    """Prose without Markdown emphasis and with single spaces: what a sentence is matched on."""
    text = re.sub(r"[*`]", "", text)
    return re.sub(r"\s+", " ", text).strip()


@cache
def markdown_cells(page: str) -> tuple[tuple[str, str], ...]:
    """The Markdown cells of a chapter ``page`` as (cell id, source), or a book page as one
    cell ``("page", text)``."""
    if page.startswith("book/"):
        return (("page", (ROOT / f"{page}.md").read_text(encoding="utf-8")),)
    nb = json.loads((NOTEBOOKS / f"{page}.ipynb").read_text(encoding="utf-8"))
    return tuple(
        (c.get("id", ""), "".join(c["source"])) for c in nb["cells"] if c["cell_type"] == "markdown"
    )


def prose(page: str) -> str:
    """All the Markdown of ``page``, normalised."""
    return normalise("\n".join(src for _, src in markdown_cells(page)))


def summary_items(page: str) -> list[str]:
    """The numbered items of the chapter's ``## Summary`` cell, each normalised."""
    for _, src in markdown_cells(page):
        if src.lstrip().startswith("## Summary"):
            items = re.split(r"\n(?=\d+\. )", src)
            return [normalise(i) for i in items[1:]]
    return []


ANSWER_TITLES = ("What the measurement shows", "The answer", "Answer")


def answer_boxes(page: str) -> list[str]:
    """The bodies of the chapter's answer boxes (admonitions titled as in
    :data:`ANSWER_TITLES`), each normalised."""
    boxes = []
    for _, src in markdown_cells(page):
        for match in re.finditer(r":::\{admonition\} ([^\n]*)\n(.*?)\n:::", src, flags=re.DOTALL):
            if match.group(1).strip().startswith(ANSWER_TITLES):
                boxes.append(normalise(match.group(2)))
    return boxes


def load_json(relative: str) -> dict:
    """A shipped JSON file, by its path under the repository root."""
    return json.loads((ROOT / relative).read_text(encoding="utf-8"))
