"""Sphinx extension: facts about this build and this repository, for the pages.

* ``{{ build_mode }}`` is "fast" or "full" (from the ``KVATTN_FAST`` environment variable that the
  notebooks also read), so that the execution-times page says which mode produced its table.
* The role ``{test}`tests/test_x.py::test_name``` links a theorem to the library test that checks
  it numerically: it renders the test's name as a link to its line in the repository (the URL and
  branch of ``_config.yml``), and the build fails (a warning under ``-W``) when the file or the
  test function does not exist, so a renamed test cannot leave a dead link behind.
* ``html_baseurl`` (the canonical address of every page) is the GitHub Pages address of the
  repository in ``_config.yml`` (:func:`pages_url`), so that a fork that changes the URL there
  publishes under its own address; an explicit ``html.baseurl`` in ``_config.yml`` wins.
* The pybtex style ``author_year_labels`` (selected by ``bibtex_default_style`` in
  ``_config.yml``) labels the bibliography "Breslow 2026", "Pearce et al. 2025", matching the
  author–year citations in the text (pybtex's default labels are alpha-style, "[Bre26]").
* The referencing style ``author_year_suffixed`` (``bibtex_reference_style``) cites in the text
  as sphinxcontrib-bibtex's ``author_year`` does, but takes the year from the bibliography's label,
  so that one author's four works of 2026 read "Gokden, 2026a" … "Gokden, 2026d" in the text as
  in the bibliography (``author_year`` would print "Gokden, 2026" for all four).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from pathlib import Path

from docutils import nodes
from pybtex.plugin import register_plugin
from pybtex.richtext import Text
from pybtex.style.formatting.unsrt import Style as UnsrtStyle
from pybtex.style.labels import BaseLabelStyle
from pybtex.style.template import join, node
from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.util.docutils import SphinxRole
from sphinxcontrib.bibtex import plugin as bibtex_plugin
from sphinxcontrib.bibtex.style.referencing.author_year import AuthorYearReferenceStyle
from sphinxcontrib.bibtex.style.referencing.basic_author_year import (
    BasicAuthorYearParentheticalReferenceStyle,
    BasicAuthorYearTextualReferenceStyle,
)
from sphinxcontrib.bibtex.style.referencing.extra_year import ExtraYearReferenceStyle
from sphinxcontrib.bibtex.style.template import join2, post_text, pre_text, reference


def _add_substitutions(app: Sphinx, config: Config) -> None:
    from kvattn.course.env import fast_mode

    config.myst_substitutions = {
        **config.myst_substitutions,
        "build_mode": "fast" if fast_mode() else "full",
    }


def pages_url(repository_url: str) -> str:
    """The GitHub Pages address of a repository: ``https://github.com/OWNER/NAME`` is published
    at ``https://owner.github.io/NAME/`` (a repository called ``OWNER.github.io`` at
    ``https://owner.github.io/``). Source: GitHub's documentation of Pages site types.

    Raises
    ------
    ValueError
        ``repository_url`` is not ``https://github.com/OWNER/NAME`` (``.git`` and a final slash
        are allowed).
    """
    match = re.fullmatch(
        r"https://github\.com/([A-Za-z0-9-]+)/([A-Za-z0-9._-]+?)(?:\.git)?/?", repository_url
    )
    if not match:
        raise ValueError(
            f"repository url: expected https://github.com/OWNER/NAME, got {repository_url!r}"
        )
    owner, name = match.group(1).lower(), match.group(2)
    host = f"https://{owner}.github.io/"
    return host if name.lower() == f"{owner}.github.io" else f"{host}{name}/"


def _set_pages_baseurl(app: Sphinx, config: Config) -> None:
    url = config.html_theme_options.get("repository_url", "")
    if not config.html_baseurl and url.startswith("https://github.com/"):
        config.html_baseurl = pages_url(url)


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


class AuthorYearLabels(BaseLabelStyle):
    """Labels "Last YEAR", "A and B YEAR" or "A et al. YEAR"; a, b, … tell equal labels apart."""

    @staticmethod
    def label(entry) -> str:
        people = entry.persons.get("author") or entry.persons.get("editor") or []
        names = [" ".join(p.last_names) for p in people]
        others = "others" in names  # BibTeX's "and others"
        names = [n.replace("{", "").replace("}", "") for n in names if n != "others"]
        if not names:
            who = entry.key
        elif len(names) == 1 and not others:
            who = names[0]
        elif len(names) == 2 and not others:
            who = f"{names[0]} and {names[1]}"
        else:
            who = f"{names[0]} et al."
        return f"{who} {entry.fields.get('year', 'n.d.')}"

    def format_labels(self, sorted_entries):
        labels = [self.label(entry) for entry in sorted_entries]
        seen: dict[str, int] = {}
        for label in labels:
            if labels.count(label) == 1:
                yield label
            else:
                seen[label] = seen.get(label, 0) + 1
                yield label + chr(ord("a") + seen[label] - 1)


class AuthorYearStyle(UnsrtStyle):
    default_label_style = "author_year_labels"


@node
def label_year(children, data) -> Text:
    """The year as the bibliography's label writes it, with its a, b, … ("2026a"): the label's
    last word (:class:`AuthorYearLabels` ends every label with it)."""
    assert not children
    return Text(data["formatted_entry"].label.rsplit(" ", 1)[-1])


@dataclass
class _Parenthetical(BasicAuthorYearParentheticalReferenceStyle):
    """``{cite:p}``: "(Gokden, 2026a)"."""

    def inner(self, role_name: str):
        who = self.person.author_or_editor_or_title(full="s" in role_name)
        return join2(sep1=self.pre_text_sep, sep2=self.post_text_sep)[
            pre_text, reference[join(sep=self.author_year_sep)[who, label_year]], post_text
        ]


@dataclass
class _Textual(BasicAuthorYearTextualReferenceStyle):
    """``{cite:t}``: "Gokden (2026a)"."""

    def inner(self, role_name: str):
        who = self.person.author_or_editor_or_title(full="s" in role_name)
        cited = join2(sep1=self.pre_text_sep, sep2=self.post_text_sep)[
            pre_text, reference[label_year], post_text
        ]
        return join(sep=self.text_reference_sep)[
            who, join[self.bracket.left, cited, self.bracket.right]
        ]


@dataclass
class _Year(ExtraYearReferenceStyle):
    """``{cite:year}``: "2026a"."""

    def inner(self, role_name: str):
        return reference[label_year]


@dataclass
class AuthorYearSuffixedReferenceStyle(AuthorYearReferenceStyle):
    """sphinxcontrib-bibtex's ``author_year`` citations, with the label's year ("2026a")."""

    def __post_init__(self):
        super().__post_init__()
        swap = {
            BasicAuthorYearParentheticalReferenceStyle: _Parenthetical,
            BasicAuthorYearTextualReferenceStyle: _Textual,
            ExtraYearReferenceStyle: _Year,
        }
        self.styles = [
            swap[type(s)](**{f.name: getattr(s, f.name) for f in fields(s) if f.init})
            if type(s) in swap
            else s
            for s in self.styles
        ]
        # the role names are the replaced styles' own, so each now points to its replacement
        self.role_style.update((r, s) for s in self.styles for r in s.role_names())


register_plugin("pybtex.style.labels", "author_year_labels", AuthorYearLabels)
register_plugin("pybtex.style.formatting", "author_year_labels", AuthorYearStyle)
bibtex_plugin.register_plugin(
    "sphinxcontrib.bibtex.style.referencing",
    "author_year_suffixed",
    AuthorYearSuffixedReferenceStyle,
)


def setup(app: Sphinx) -> dict:
    app.connect("config-inited", _add_substitutions)
    app.connect("config-inited", _set_pages_baseurl)
    app.add_role("test", TestRole())
    return {"parallel_read_safe": True, "parallel_write_safe": True}
