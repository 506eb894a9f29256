"""The checkpoints shipped in data/: each was made by its recipe with the current training
code's configuration, loads, and stays small."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

import pytest

from kvattn.checkpoint import load_pretrained, read_config
from kvattn.data import SHIPPED_FILES, shipped
from kvattn.generate import load_tokenizer
from kvattn.train import PretrainConfig

ROOT = Path(__file__).resolve().parent.parent
RECIPES = sorted((ROOT / "data" / "recipes").glob("*.json"))


def test_there_are_recipes():
    assert {p.stem for p in RECIPES} >= {"pldr_tiny", "gpt_tiny", "pldr_tiny_dag"}


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: p.stem)
def test_shipped_checkpoint_matches_its_recipe(recipe):
    folder = shipped(recipe.stem)
    assert sorted(p.name for p in folder.iterdir()) == sorted(SHIPPED_FILES)
    wanted = json.loads(recipe.read_text())
    state = json.loads((folder / "trainer_state.json").read_text())
    recorded = state["config"]
    # the recipe is valid for today's PretrainConfig and is exactly what was run
    # (out_dir was made absolute by tools/make_checkpoints.py, so it is compared by its end)
    # log_every and overwrite were added after the shipped runs (their defaults, 1 and false,
    # are what those runs did), so a recipe made before or after them is accepted
    later = {"log_every", "overwrite"}
    assert set(recorded) - later == {f.name for f in fields(PretrainConfig)} - later
    assert recorded["out_dir"].endswith(wanted["out_dir"])
    for key, value in wanted.items():
        if key != "out_dir":
            assert recorded[key] == value, key
    assert state["step"] == wanted["steps"]
    PretrainConfig(**{**recorded, "betas": tuple(recorded["betas"])})
    # the architecture in config.json follows from the recipe
    _, config = read_config(folder)
    for key, value in wanted["model"].items():
        assert getattr(config, key) == value, key
    assert config.max_position_embeddings == wanted["block_size"]
    tokenizer = load_tokenizer(folder)
    assert config.vocab_size == tokenizer.get_piece_size() == wanted["vocab_size"]
    model = load_pretrained(folder)
    assert type(model).__name__ == ("GPT" if wanted["architecture"] == "gpt" else "PLDRLLM")
    assert (folder / "model.safetensors").stat().st_size < 8 * 2**20
    provenance = json.loads((folder / "provenance.json").read_text())
    assert provenance["command"] == f"python tools/make_checkpoints.py {recipe.stem}"


def test_shipped_rejects_bad_names():
    with pytest.raises(ValueError, match="checkpoint name"):
        shipped("../secrets")
    with pytest.raises(FileNotFoundError, match="no shipped checkpoint data/nonexistent"):
        shipped("nonexistent")
