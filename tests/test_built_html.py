"""Checks on the built book (run by `make test` after the fast build; marker `built`).

The HTML directory comes from the environment variable BUILT_HTML (default: the fast build of
`make test`). The executed notebooks that produced each page sit beside it in
``../jupyter_execute``; every plotly figure and widget they produced must reach the page.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import yaml
from test_notebooks import _build_info

ROOT = Path(__file__).resolve().parent.parent
HTML = Path(os.environ.get("BUILT_HTML", ROOT / "_build" / "test" / "_build" / "html"))
EXECUTED = HTML.parent / "jupyter_execute"
# A page's weight bar (issues 30 and 31): a reader on a slow connection gets every page in full.
MAX_PAGE_BYTES = 800 * 1024
PLOTLY_JSON = "application/vnd.plotly.v1+json"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"

pytestmark = pytest.mark.built

TOC = yaml.safe_load((ROOT / "_toc.yml").read_text())
CHAPTERS = [
    c["file"]
    for part in TOC["parts"]
    for c in part["chapters"]
    if c["file"].startswith("notebooks/")
]
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())


@pytest.fixture(scope="module", autouse=True)
def built() -> None:
    if not (HTML / "index.html").exists():
        pytest.fail(f"no built book at {HTML}; run `make book-fast` (or set BUILT_HTML)")


def page(chapter: str) -> str:
    return (HTML / f"{chapter}.html").read_text(encoding="utf-8")


def executed(chapter: str) -> dict:
    return json.loads((EXECUTED / f"{chapter}.ipynb").read_text(encoding="utf-8"))


def outputs(nb: dict) -> list[dict]:
    return [o for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])]


def scripts(html: str) -> list[str]:
    return re.findall(r'<script[^>]*\ssrc="([^"]+)"', html)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_chapter_page_exists_with_its_title(chapter):
    html = page(chapter)
    nb = json.loads((ROOT / f"{chapter}.ipynb").read_text(encoding="utf-8"))
    title = "".join(nb["cells"][0]["source"]).splitlines()[0].lstrip("# ").strip()
    assert f"<h1>{title}" in html


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_plotly_figure_reached_its_page(chapter):
    """Each plotly output of the executed notebook appears on the page as a drawn div (the HTML
    twin of kvattn's renderer); a figure with only its JSON mimetype would be a blank gap."""
    html = page(chapter)
    figures = [o for o in outputs(executed(chapter)) if PLOTLY_JSON in o.get("data", {})]
    assert figures, "chapter has no plotly figure"
    for fig in figures:
        twin = "".join(fig["data"].get("text/html", ""))
        assert twin, "a plotly figure without its HTML twin (env.setup() not called?)"
        div_id = re.search(r'<div id="([^"]+)" class="plotly-graph-div', twin).group(1)
        assert f'id="{div_id}"' in html
        assert re.search(r'Plotly\.newPlot\(\s*"' + re.escape(div_id), html)
    assert html.count('class="plotly-graph-div') == len(figures)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_widget_state_is_embedded(chapter):
    """The notebook's widget state is on the page, and every widget view the notebook displayed
    refers to a model in that state, so the html-manager can draw it without a kernel."""
    html = page(chapter)
    nb = executed(chapter)
    state = nb["metadata"]["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    match = re.search(
        r'<script type="application/vnd.jupyter.widget-state\+json">(.*?)</script>', html, re.S
    )
    assert match, "no widget state on the page"
    page_state = json.loads(match.group(1))["state"]
    views = [
        o["data"][WIDGET_VIEW]["model_id"] for o in outputs(nb) if WIDGET_VIEW in o.get("data", {})
    ]
    assert views
    for model_id in views:
        assert model_id in state and model_id in page_state


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_scripts_are_local_and_plotly_loads_once(chapter):
    """No script comes from the internet; plotly.js, MathJax, require.js and the widget manager
    are served from the book's static vendor folder, plotly.js exactly once."""
    html = page(chapter)
    srcs = scripts(html)
    assert not [s for s in srcs if s.startswith(("http:", "https:", "//"))], srcs
    plotly = [s for s in srcs if "plotly" in s]
    assert len(plotly) == 1 and plotly[0].startswith("../_static/vendor/plotly.min.js")
    for name in ("mathjax-tex-svg.js", "require.js", "embed-amd.js"):
        assert any(s.startswith(f"../_static/vendor/{name}") for s in srcs), name
    assert "cdn.plot.ly" not in html and "cdnjs.cloudflare.com" not in html
    assert "cdn.jsdelivr.net" not in html


def test_vendored_files_were_copied():
    for name in ("plotly.min.js", "mathjax-tex-svg.js", "require.js", "embed-amd.js"):
        path = HTML / "_static" / "vendor" / name
        assert path.exists() and path.stat().st_size > 50_000, name


def test_no_page_exceeds_800_kib():
    sizes = {p.relative_to(HTML): p.stat().st_size for p in HTML.rglob("*.html")}
    assert sizes
    too_big = {p: s for p, s in sizes.items() if s > MAX_PAGE_BYTES}
    assert not too_big, too_big


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_launch_buttons_point_at_main(chapter):
    """The Colab button opens this notebook on branch main of the configured repository, and
    the repository button links the same repository."""
    url = CONFIG["repository"]["url"].rstrip("/")
    org_repo = url.removeprefix("https://github.com/")
    html = page(chapter)
    colab = f"https://colab.research.google.com/github/{org_repo}/blob/main/{chapter}.ipynb"
    assert colab in html
    assert f'href="{url}"' in html


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_no_stderr_or_errors_on_the_page(chapter):
    """Warnings and tracebacks would be compared by nbval and shown to readers: keep them out."""
    nb = executed(chapter)
    for o in outputs(nb):
        assert o["output_type"] != "error"
        assert not (o["output_type"] == "stream" and o["name"] == "stderr"), o.get("text")


def test_execution_times_page_lists_every_chapter():
    html = (HTML / "book" / "execution_times.html").read_text(encoding="utf-8")
    for chapter in CHAPTERS:
        assert Path(chapter).name in html


def test_math_is_left_for_local_mathjax():
    """Display math reaches the page as TeX for the vendored MathJax to typeset."""
    html = page("notebooks/04_symmetry_breaking")
    assert "\\sigma" in html and 'class="math' in html


def test_every_launch_and_source_link_maps_to_a_repository_file():
    """Every Colab launch link and every link into the repository's files (source buttons, the
    theorems' test links) on every page names branch main of the configured repository and a file
    that exists in this checkout; a line anchor into a test file lands on that test's def."""
    org_repo = CONFIG["repository"]["url"].rstrip("/").removeprefix("https://github.com/")
    colab = re.compile(
        r"https://colab\.research\.google\.com/github/([^/\"]+/[^/\"]+)/blob/([^/\"]+)/([^\"#?]+)"
    )
    blob = re.compile(
        rf"https://github\.com/{re.escape(org_repo)}/blob/([^/\"]+)/([^\"#?]+)(#L\d+)?"
    )
    launches, sources = 0, 0
    for path in HTML.rglob("*.html"):
        html = path.read_text(encoding="utf-8")
        for repo, branch, file in colab.findall(html):
            launches += 1
            assert (repo, branch) == (org_repo, "main"), (path, repo, branch)
            assert (ROOT / file).is_file(), (path, file)
        for branch, file, anchor in blob.findall(html):
            sources += 1
            assert branch == "main", (path, branch)
            assert (ROOT / file).is_file(), (path, file)
            if anchor:
                line = (ROOT / file).read_text(encoding="utf-8").splitlines()[int(anchor[2:]) - 1]
                assert line.startswith("def test_"), (path, file, anchor, line)
    assert launches >= len(CHAPTERS)
    assert sources >= 20  # the theorems link at least twenty tests


def test_glossary_defines_the_course_terms_with_chapter_links():
    html = (HTML / "book" / "glossary.html").read_text(encoding="utf-8")
    terms = re.findall(r'<dt id="term-([^"]+)"', html)
    assert len(terms) >= 35
    for term in ("Inference-collapse", "Order-parameter", "Exchange-symmetry", "Density-operator"):
        assert term in terms, term
    for chapter in CHAPTERS:
        assert f'href="../{chapter}.html"' in html, chapter


def test_bibliography_labels_match_the_author_year_citations():
    html = (HTML / "book" / "bibliography.html").read_text(encoding="utf-8")
    labels = re.findall(r'<span class="label"><span class="fn-bracket">\[</span>([^<]+)<', html)
    assert "Breslow 2026" in labels and "Pearce et al. 2025" in labels, labels[:5]
    assert {"Gokden 2026a", "Gokden 2026b"} <= set(labels)
    assert all(re.fullmatch(r"\S.* (\d{4}[a-z]?|n\.d\.)", label) for label in labels), labels
    # the text cites each of the four 2026 works by its label's year, never a bare "2026"
    pages = {p.name: p.read_text(encoding="utf-8") for p in HTML.rglob("*.html")}
    bare = [name for name, page in pages.items() if re.search(r"Gokden, 2026(?![a-z])", page)]
    assert not bare, bare
    assert any("Gokden, 2026a" in page for page in pages.values())


def test_github_pages_keeps_the_underscore_folders():
    """Without .nojekyll, GitHub Pages runs Jekyll on the upload, which drops every folder whose
    name starts with an underscore: _static/ (every page's CSS and JavaScript) and _sources/ (the
    download buttons' files)."""
    assert (HTML / ".nojekyll").is_file()
    assert (HTML / "_static" / "course.css").is_file()
    assert (HTML / "_sources" / f"{CHAPTERS[0]}.ipynb").is_file()


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_canonical_address_is_the_pages_address_of_the_repository(chapter):
    pages = _build_info().pages_url(CONFIG["repository"]["url"])
    assert f'<link rel="canonical" href="{pages}{chapter}.html" />' in page(chapter)


def test_api_pages_link_definitions_to_the_chapter_that_teaches_them():
    """d2l's "Defined in": a definition the chapters use says, on its API page, which chapter
    and section teach it, with a link (book/_ext/taught_in.py); one it is not used by has none."""
    html = (HTML / "book" / "api" / "diagnostics.html").read_text(encoding="utf-8")
    start = html.index('id="kvattn.diagnostics.measures.perron_frobenius"')
    entry = html[start : html.index('<dt class="sig sig-object py"', start + 1)]  # to the next
    assert "Taught in" in entry
    assert 'href="../../notebooks/07_plga_piece_by_piece.html"' in entry
    assert "Positivity and the Perron–Frobenius eigenpair" in entry
    models = (HTML / "book" / "api" / "models.html").read_text(encoding="utf-8")
    assert models.count("Taught in") >= 3
