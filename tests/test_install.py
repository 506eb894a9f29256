"""kvattn installed, not cloned: a non-editable pip install carries the shipped checkpoints and
recipes of data/ as package data, so that chapters run from an install (Colab's set-up cell, a
wheel, a local folder) with no repository and no network."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kvattn import data
from kvattn.checkpoint import load_pretrained
from kvattn.data import SHIPPED_FILES, recipe, shipped

ROOT = Path(__file__).resolve().parent.parent

# A pip install of the package into a folder: the integration tier (`make test-fast` leaves it out)
pytestmark = pytest.mark.integration

# Run by the installed copy, from a folder outside the repository.
PROBE = """
import hashlib, json, sys
import kvattn
from kvattn.data import load_text, recipe, shipped
from kvattn.pretrain import PretrainConfig

folder = shipped("pldr_tiny")
model = kvattn.load_pretrained(folder)
json.dump({
    "kvattn": kvattn.__file__,
    "folder": str(folder),
    "files": sorted(p.name for p in folder.iterdir()),
    "sha256": hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest(),
    "parameters": model.num_parameters(),
    "recipe": str(recipe("pldr_tiny")),
    "steps": PretrainConfig.from_file(recipe("pldr_tiny")).steps,
    "pydoc_chars": len(load_text("pydoc")),
}, sys.stdout)
"""


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_non_editable_install_finds_shipped_data_outside_the_repository(tmp_path):
    # the build runs offline, so it uses this environment's setuptools (Python >= 3.12 creates
    # venvs without one; pyproject.toml's build-system names the version it needs)
    pytest.importorskip("setuptools.build_meta", reason="an offline build needs setuptools")
    # a copy of what the build reads, so that the build leaves no build/ folder in the repository
    source = tmp_path / "source"
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    for part in ("lib", "data"):
        shutil.copytree(ROOT / part, source / part, ignore=ignore)
    for part in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / part, source / part)
    target = tmp_path / "installed"
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation"]
    pip += ["--no-cache-dir", "--disable-pip-version-check", "--no-index", "--target"]
    subprocess.run([*pip, str(target), str(source)], check=True, timeout=600)

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(target), "OMP_NUM_THREADS": "1"}
    out = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)

    package = target / "kvattn"
    assert Path(got["kvattn"]) == package / "__init__.py"
    assert Path(got["folder"]) == package / "_shipped" / "pldr_tiny"
    assert got["files"] == sorted(SHIPPED_FILES)
    assert got["sha256"] == _sha256(ROOT / "data" / "pldr_tiny" / "model.safetensors")
    assert got["parameters"] == load_pretrained(ROOT / "data" / "pldr_tiny").num_parameters()
    assert Path(got["recipe"]) == package / "_shipped" / "recipes" / "pldr_tiny.json"
    assert got["steps"] == json.loads(recipe("pldr_tiny").read_text())["steps"] == 4000
    assert got["pydoc_chars"] == 465_126  # the shipped corpus snapshot, not the interpreter's
    # the reproduction command runs from the install and names every shipped file
    listed = subprocess.run(
        [sys.executable, "-m", "kvattn.reproduce", "list"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert listed.returncode == 0, listed.stderr
    assert "data/collapse_hunt/base.json: kvattn-reproduce hunt base" in listed.stdout
    assert "data/corpora/: kvattn-reproduce corpora" in listed.stdout
    entry_points = next(target.glob("kvattn-*.dist-info")) / "entry_points.txt"
    assert "kvattn-reproduce = kvattn.reproduce.cli:main" in entry_points.read_text()
    # every checkpoint and recipe is in the install, byte for byte (README.md is the clone's)
    wanted = {p.relative_to(ROOT / "data") for p in (ROOT / "data").rglob("*") if p.is_file()}
    wanted.discard(Path("README.md"))
    installed = {
        p.relative_to(package / "_shipped")
        for p in (package / "_shipped").rglob("*")
        if p.is_file()
    }
    assert installed == wanted
    for rel in wanted:
        assert (package / "_shipped" / rel).stat().st_size == (ROOT / "data" / rel).stat().st_size
    # pyproject.toml lists the packages: a new subpackage of kvattn must be added there
    source_modules = {p.relative_to(ROOT / "lib") for p in (ROOT / "lib" / "kvattn").rglob("*.py")}
    assert {p.relative_to(target) for p in package.rglob("*.py")} == source_modules


def test_clone_finds_data_and_recipes():
    assert shipped("gpt_tiny") == ROOT / "data" / "gpt_tiny"
    assert recipe("gpt_tiny") == ROOT / "data" / "recipes" / "gpt_tiny.json"
    assert json.loads(recipe("gpt_tiny").read_text())["architecture"] == "gpt"


def test_package_data_is_preferred_to_the_clone(tmp_path, monkeypatch):
    (tmp_path / "pldr_tiny").mkdir(parents=True)
    (tmp_path / "pldr_tiny" / "config.json").write_text("{}")
    (tmp_path / "recipes").mkdir()
    # a recipe is read through its schema: the package data's copy must be a valid one
    recipe_text = (ROOT / "data" / "recipes" / "pldr_tiny.json").read_text()
    (tmp_path / "recipes" / "pldr_tiny.json").write_text(recipe_text)
    monkeypatch.setattr(data.locators, "_PACKAGE_DATA", tmp_path)
    assert shipped("pldr_tiny") == tmp_path / "pldr_tiny"
    assert recipe("pldr_tiny") == tmp_path / "recipes" / "pldr_tiny.json"
    # what the package data lacks still comes from the clone
    assert shipped("gpt_tiny") == ROOT / "data" / "gpt_tiny"


def test_missing_data_names_what_is_shipped(tmp_path, monkeypatch):
    monkeypatch.setattr(data.locators, "_PACKAGE_DATA", tmp_path / "none")
    with pytest.raises(
        FileNotFoundError, match=r"no shipped recipe data/recipes/gpt\.json.*'gpt_tiny'"
    ):
        recipe("gpt")
    with pytest.raises(
        FileNotFoundError, match=r"no shipped checkpoint data/pldr/.*'pldr_tiny_dag'"
    ):
        shipped("pldr")
    # an installed kvattn without package data and away from a clone finds nothing, and says so
    monkeypatch.setattr(data.locators, "_CLONE_DATA", tmp_path / "none")
    with pytest.raises(FileNotFoundError, match=r"the shipped ones: \[\]"):
        shipped("pldr_tiny")


@pytest.mark.parametrize("bad", ["", "../secrets", "a/b", "a\\b", ".hidden"])
def test_bad_names_are_refused(bad):
    with pytest.raises(
        ValueError, match=re.escape(f"recipe name such as 'pldr_tiny', got {bad!r}")
    ):
        recipe(bad)
    with pytest.raises(ValueError, match="expected a checkpoint name"):
        shipped(bad)


def test_non_string_names_are_refused():
    with pytest.raises(TypeError, match=r"checkpoint name \(str\).*got 3"):
        shipped(3)
    with pytest.raises(TypeError, match=r"recipe name \(str\).*got None"):
        recipe(None)
