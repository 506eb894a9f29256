"""The API reference builds without warnings: every public docstring is valid reStructuredText
and its cross-references resolve (the same check the nitpicky book build makes, in seconds)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

# A Sphinx build of the API reference: the integration tier (`make test-fast` leaves it out)
pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parent.parent


def test_api_reference_builds_cleanly(tmp_path):
    config = yaml.safe_load((ROOT / "_config.yml").read_text())["sphinx"]
    options = {
        k: v
        for k, v in config["config"].items()
        if k.startswith(("autodoc_", "napoleon_", "nitpick"))
    }
    extensions = [e for e in config["extra_extensions"] if e.startswith("sphinx.ext.")]
    pages = [ROOT / "book" / "api.md", *sorted((ROOT / "book" / "api").glob("*.md"))]
    # the pages' reST blocks as written: a package documented without :members: (its names live
    # on its modules' entries) must not lend its names to references, as it does not in the book
    blocks = [
        block
        for page in pages
        for block in re.findall(r"```\{eval-rst\}\n(.*?)\n```", page.read_text(), re.S)
    ]
    assert sum(".. automodule::" in block for block in blocks) >= 10
    conf = [f"extensions = {extensions!r}", "nitpicky = True"]
    conf += [
        f"{k} = {[tuple(x) for x in v]!r}" if k == "nitpick_ignore_regex" else f"{k} = {v!r}"
        for k, v in options.items()
    ]
    (tmp_path / "conf.py").write_text("\n".join(conf) + "\n")
    (tmp_path / "index.rst").write_text("API\n===\n\n" + "\n\n".join(blocks) + "\n")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "sphinx",
            "-q",
            "-W",
            "--keep-going",
            "-n",
            "-b",
            "html",
            str(tmp_path),
            str(tmp_path / "_out"),
        ],
        capture_output=True,
        text=True,
        timeout=900,  # a hang limit, not a speed check
    )
    assert out.returncode == 0, out.stderr[-3000:]
