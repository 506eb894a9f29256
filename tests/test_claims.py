"""The claims ledger (tests/claimlib.py): every ledgered sentence is in its chapter, holds on
its data, and fails when its data are changed against it; every summary item and answer box of
every chapter carries at least one ledgered claim."""

from __future__ import annotations

import copy
import importlib
from pathlib import Path

import pytest
from claimlib import NOTEBOOKS, Claim, answer_boxes, normalise, prose, summary_items

LEDGERS = sorted(p.stem for p in Path(__file__).parent.glob("claims_*.py"))
CLAIMS: list[Claim] = [c for name in LEDGERS for c in importlib.import_module(name).CLAIMS]
CHAPTERS = sorted(p.stem for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


def test_there_are_ledgers_and_claims_ids_are_unique():
    assert LEDGERS and CLAIMS
    ids = [c.id for c in CLAIMS]
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: c.id)
def test_the_sentence_is_in_its_chapter(claim):
    assert normalise(claim.sentence) in prose(claim.page), (
        f"{claim.page} no longer says: {claim.sentence!r} (reword the claim with the sentence)"
    )


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: c.id)
def test_the_claim_holds_on_its_data(claim):
    claim.check(claim.data())


PERTURBED = [c for c in CLAIMS if c.perturb is not None]


def test_claims_can_fail():
    """At least one claim per ledger shows its check failing on data changed against it."""
    for name in LEDGERS:
        module = importlib.import_module(name)
        assert any(c.perturb for c in module.CLAIMS), f"{name} shows no claim failing"


@pytest.mark.parametrize("claim", PERTURBED, ids=lambda c: c.id)
def test_a_claim_fails_when_its_data_turn_against_it(claim):
    data = claim.perturb(copy.deepcopy(claim.data()))
    with pytest.raises(AssertionError):
        claim.check(data)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_summary_item_and_answer_box_carries_a_claim(chapter):
    sentences = [normalise(c.sentence) for c in CLAIMS if c.page == chapter]
    items = summary_items(chapter)
    assert items, f"{chapter} has no numbered summary"
    bare = [i[:70] for i in items if not any(s in i for s in sentences)]
    bare += [b[:70] for b in answer_boxes(chapter) if not any(s in b for s in sentences)]
    assert not bare, f"{chapter}: summary items or answer boxes without a ledgered claim: {bare}"
