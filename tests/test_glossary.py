"""The glossary (book/glossary.md) keeps the terms the course relies on, each defined with a link to
the chapter that uses it, and every {term} reference in the book names one of its terms.

The book's build (-W -n) also fails on a {term} that is not in the glossary, but only after
executing every notebook; these checks read the files and take well under a second."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
GLOSSARY = ROOT / "book" / "glossary.md"

#: Terms the chapters use and the issues asked for (issue 30, item 9: the statistics of the
#: experiments; issue 31, item 6: Part II's words). Matched as Sphinx matches {term}: ignoring case.
REQUIRED = (
    # statistics and experimental design (chapters 5 and 11)
    "Seed",
    "Selection seeds",
    "Test seeds",
    "Paired design",
    "Standard deviation",
    "Standard error",
    "Null hypothesis",
    "p-value",
    "Significance level",
    "Paired t-test",
    "Degrees of freedom",
    "One-sided test",
    "Two-sided test",
    "Confidence interval",
    "Equivalence margin",
    "Equivalence test",
    "TOST",
    "Resolved",
    "Not resolved",
    "Multiple comparisons",
    "Family-wise error rate",
    "Bonferroni correction",
    "Holm's correction",
    "Power",
    "Minimum detectable effect",
    "MDE",
    "Confirmatory",
    "Exploratory",
    "Experiment plan",
    "Late drop",
    "Dose-response",
    "Correlation",
    "Spearman's rank correlation",
    "Permutation test",
    "Median",
    "Middle half",
    "Nats per token",
    # Part II
    "Row-map gain",
    "Generation mode",
    "Full pass",
    "Functional measure",
    "Order parameter",
    "RMS order parameter",
    "|mean| order parameter",
    "SOC",
    "Self-organised criticality",
    "v51",
    "Commutant",
    "Rank-1 audit",
    "Collapse criteria",
    "LayerNorm scale γ",
)

#: What a rule or formula entry must state, beyond a name: a fragment of its decision rule.
RULES = {
    "TOST": "1 - 2\\alpha",  # shown when the 1 − 2α interval lies inside ±Δ
    "Holm's correction": "\\alpha/(m - k + 1)",
    "Bonferroni correction": "\\alpha/m",
    "Minimum detectable effect": "t_{1-\\alpha/2,\\,n-1} + t_{\\text{power},\\,n-1}",
    "Paired t-test": "t = \\bar d / (s_d/\\sqrt n)",
    "Confidence interval": "\\bar d \\pm c\\,\\mathrm{SE}",
    "RMS order parameter": "\\operatorname{rms}(x_1) + \\operatorname{rms}(x_2)",
    "|mean| order parameter": "\\lvert\\operatorname{mean}(x_1)\\rvert",
}

TERM_ROLE = re.compile(r"\{term\}`([^`]+)`")
DOC_ROLE = re.compile(r"\{doc\}`(?:[^`<]*<)?([^`<>]+)>?`")


def glossary_entries(text: str) -> list[tuple[list[str], str]]:
    """The entries of every ``{glossary}`` block of ``text``: (terms, definition). A term is a
    line at the margin; consecutive term lines share the definition that follows, indented.

    Raises
    ------
    ValueError
        A definition line before any term, a term with no definition, or an unclosed block.
    """
    entries: list[tuple[list[str], str]] = []
    blocks = re.findall(r"^```\{glossary\}\n(.*?)^```$", text, flags=re.S | re.M)
    if text.count("```{glossary}") != len(blocks):
        raise ValueError("a {glossary} block is not closed")
    for block in blocks:
        terms: list[str] = []
        definition: list[str] = []
        for n, line in enumerate(block.splitlines()):
            if not line.strip():
                continue
            if line.startswith(" "):
                if not terms:
                    raise ValueError(f"definition line {n} before any term: {line!r}")
                definition.append(line.strip())
                continue
            if definition:
                entries.append((terms, " ".join(definition)))
                terms, definition = [], []
            terms.append(line.strip())
        if terms and not definition:
            raise ValueError(f"terms without a definition: {terms}")
        if terms:
            entries.append((terms, " ".join(definition)))
    return entries


@pytest.fixture(scope="module")
def entries() -> list[tuple[list[str], str]]:
    return glossary_entries(GLOSSARY.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def definitions(entries) -> dict[str, str]:
    return {term.lower(): definition for terms, definition in entries for term in terms}


def test_the_parser_reads_terms_and_refuses_a_term_without_definition():
    text = "```{glossary}\nA\nB\n  both.\n\nC\n  one\n  two.\n```\n"
    assert glossary_entries(text) == [(["A", "B"], "both."), (["C"], "one two.")]
    with pytest.raises(ValueError, match="without a definition"):
        glossary_entries("```{glossary}\nA\n  a.\nB\n```\n")
    with pytest.raises(ValueError, match="before any term"):
        glossary_entries("```{glossary}\n  a.\n```\n")


def test_the_glossary_defines_every_required_term(definitions):
    missing = [term for term in REQUIRED if term.lower() not in definitions]
    assert not missing, f"book/glossary.md lacks {missing}"


@pytest.mark.parametrize("term", sorted(RULES))
def test_a_test_entry_states_its_rule(definitions, term):
    assert RULES[term] in definitions[term.lower()], (term, definitions[term.lower()])


def test_no_term_is_defined_twice(entries):
    # Sphinx warns on a duplicate term, which fails the book's build (-W)
    seen: dict[str, int] = {}
    for terms, _ in entries:
        for term in terms:
            seen[term.lower()] = seen.get(term.lower(), 0) + 1
    assert [t for t, n in seen.items() if n > 1] == []


def test_every_entry_says_where_the_course_uses_it(entries):
    for terms, definition in entries:
        targets = DOC_ROLE.findall(definition)
        assert targets, f"{terms}: no {{doc}} link to a chapter"
        for target in targets:
            path = ROOT / target.lstrip("/")
            assert path.with_suffix(".ipynb").is_file() or path.with_suffix(".md").is_file(), (
                terms,
                target,
            )


def _book_markdown() -> dict[str, str]:
    """Every Markdown text of the book: the prose pages and the notebooks' Markdown cells."""
    texts = {
        str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in ROOT.glob("book/*.md")
    }
    for path in [*ROOT.glob("notebooks/*.ipynb"), *ROOT.glob("book/*.ipynb")]:
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        texts[str(path.relative_to(ROOT))] = "\n".join(
            "".join(c["source"]) for c in cells if c["cell_type"] == "markdown"
        )
    return texts


def term_target(reference: str) -> str:
    """The term a ``{term}`` role names: ``text <target>`` links ``target``, plain text itself."""
    explicit = re.fullmatch(r"(?s).*<([^<>]+)>\s*", reference)
    return (explicit.group(1) if explicit else reference).strip()


def test_term_target_reads_both_forms():
    assert term_target("Holm's correction") == "Holm's correction"
    assert term_target("the MDE <MDE>") == "MDE"


def test_every_term_reference_in_the_book_is_a_glossary_term(definitions):
    broken = [
        (page, ref)
        for page, text in _book_markdown().items()
        for ref in TERM_ROLE.findall(text)
        if term_target(ref).lower() not in definitions
    ]
    assert not broken, f"{{term}} references with no glossary entry: {broken}"


@pytest.mark.integration
def test_the_glossary_builds_cleanly_and_every_required_term_links(tmp_path, entries):
    """A Sphinx build (-W -n) of the glossary page alone, with the book's MyST extensions, and a
    page that links every required term with {term}: a syntax slip in an entry, a broken {cite}
    or {doc}, or a term Sphinx reads differently from this file's parser (quotes, |, γ) fails
    here in seconds instead of at the end of the book's build."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "glossary.md").write_text(GLOSSARY.read_text(encoding="utf-8"))
    (tmp_path / "book" / "references.bib").write_text(
        (ROOT / "book" / "references.bib").read_text(encoding="utf-8")
    )
    pages = {"book/notation", "book/bibliography"}
    pages |= {target.lstrip("/") for _, d in entries for target in DOC_ROLE.findall(d)}
    for page in sorted(pages):
        (tmp_path / page).parent.mkdir(exist_ok=True)
        body = "```{bibliography}\n```\n" if page == "book/bibliography" else ""
        (tmp_path / f"{page}.md").write_text(f"# {page}\n\n{body}")
    links = ", ".join(f"{{term}}`{term}`" for term in REQUIRED)
    toctree = "\n".join(["book/glossary", *sorted(pages)])
    (tmp_path / "index.md").write_text(f"# Terms\n\n{links}\n\n```{{toctree}}\n{toctree}\n```\n")
    extensions = config["parse"]["myst_enable_extensions"]
    (tmp_path / "conf.py").write_text(
        'extensions = ["myst_parser", "sphinxcontrib.bibtex"]\n'
        f"myst_enable_extensions = {extensions!r}\n"
        'bibtex_bibfiles = ["book/references.bib"]\n'
        'bibtex_reference_style = "author_year"\n'
    )
    dirs = [str(tmp_path), str(tmp_path / "_out")]
    out = subprocess.run(
        [sys.executable, "-m", "sphinx", "-q", "-W", "--keep-going", "-n", "-b", "html", *dirs],
        capture_output=True,
        text=True,
        timeout=600,  # a hang limit, not a speed check
    )
    assert out.returncode == 0, out.stderr[-3000:]
    html = (tmp_path / "_out" / "index.html").read_text(encoding="utf-8")
    assert html.count('class="xref std std-term"') == len(REQUIRED)
