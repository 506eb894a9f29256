"""Sphinx extension: facts about this build and this repository, for the pages.

* ``{{ build_mode }}`` is "fast" or "full" (from the ``KVATTN_FAST`` environment variable that the
  notebooks also read), so that the execution-times page says which mode produced its table.
* The role ``{test}`tests/test_x.py::test_name``` links a theorem to the library test that checks
  it numerically: it renders the test's name as a link to its line in the repository (the URL and
  branch of ``_config.yml``), and the build fails (a warning under ``-W``) when the file or the
  test function does not exist, so a renamed test cannot leave a dead link behind.
"""

from __future__ import annotations

import re
from pathlib import Path

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.util.docutils import SphinxRole


def _add_substitutions(app: Sphinx, config: Config) -> None:
    from kvattn.env import fast_mode

    config.myst_substitutions = {
        **config.myst_substitutions,
        "build_mode": "fast" if fast_mode() else "full",
    }


def test_line(root: Path, target: str) -> int:
    """Line number of ``def test_name`` in ``path::test_name`` under ``root``.

    Raises
    ------
    ValueError
        Malformed target, missing file or missing test function.
    """
    path, sep, name = target.partition("::")
    if not sep or not path.startswith("tests/") or not name.startswith("test_"):
        raise ValueError(f"expected 'tests/<file>.py::test_<name>', got {target!r}")
    file = root / path
    if not file.is_file():
        raise ValueError(f"{path} does not exist")
    for number, line in enumerate(file.read_text(encoding="utf-8").splitlines(), start=1):
        if re.match(rf"def {re.escape(name)}\(", line):
            return number
    raise ValueError(f"{path} has no top-level function {name}")


class TestRole(SphinxRole):
    def run(self) -> tuple[list[nodes.Node], list[nodes.system_message]]:
        target = self.text.strip()
        try:
            line = test_line(Path(self.env.srcdir), target)
        except ValueError as error:
            message = self.inliner.reporter.error(f"{{test}} role: {error}", line=self.lineno)
            problem = self.inliner.problematic(self.rawtext, self.rawtext, message)
            return [problem], [message]
        options = self.config.html_theme_options
        url = options.get("repository_url", "").rstrip("/")
        branch = options.get("repository_branch", "main")
        path = target.partition("::")[0]
        link = nodes.reference(
            self.rawtext,
            "",
            nodes.literal(target, target),
            refuri=f"{url}/blob/{branch}/{path}#L{line}",
        )
        return [link], []


def setup(app: Sphinx) -> dict:
    app.connect("config-inited", _add_substitutions)
    app.add_role("test", TestRole())
    return {"parallel_read_safe": True, "parallel_write_safe": True}
