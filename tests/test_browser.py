"""The built book in a real browser (run by `make browser` after the fast build; marker `browser`).

Headless Chromium (Debian's ``chromium``, or the executable named by CHROMIUM) driven by
Playwright's Python API opens every page of the table of contents from a local HTTP server, with
every request that leaves 127.0.0.1 refused, as on a reader's machine with no internet. Each page
must load without a JavaScript error or a failed request; every plotly figure of the executed
notebook draws all its traces; MathJax typesets every formula and leaves no raw TeX in the visible
text; every widget view renders; no code output is wider than the text column at 1280 px; and a
real mouse click on each figure's slider changes the plotted data. A full-page screenshot of each
page goes to SCREENSHOTS (default ``_build/screenshots``), which CI keeps.

How fast a page loads is a measurement, not a pass/fail margin: CI machines are shared, and a
page that loads in 3 s on a quiet machine can take 6 s beside another job. Every wait below is a
hang limit (a page that never finishes is a failure), and each page's load time goes to
``load_times.json`` in SCREENSHOTS; the slowest page is printed at the end of the run.

The HTML comes from BUILT_HTML (default: the fast build of `make test`), the executed notebooks
that say what each page must show from ``../jupyter_execute`` beside it (see test_built_html.py).
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from conftest import LOAD_TIMES_KEY
from playwright.sync_api import Browser, Page, sync_playwright
from playwright.sync_api import TimeoutError as PlaywrightTimeout

ROOT = Path(__file__).resolve().parent.parent
HTML = Path(os.environ.get("BUILT_HTML", ROOT / "_build" / "test" / "_build" / "html"))
EXECUTED = HTML.parent / "jupyter_execute"
SCREENSHOTS = Path(os.environ.get("SCREENSHOTS", ROOT / "_build" / "screenshots"))
CHROMIUM = (
    os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
)
PLOTLY_JSON = "application/vnd.plotly.v1+json"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
# Hang limits, not performance margins: generous enough for a busy 2-core machine. A wait ends as
# soon as its condition holds, so a large limit costs nothing when the page works.
HANG_MS = 60_000  # the load event, and figures, widgets and MathJax after it
SLIDER_HANG_MS = 30_000  # a slider's traces to change after a click
VIEWPORT = {"width": 1280, "height": 900}

pytestmark = pytest.mark.browser


def toc_files(entry: object) -> list[str]:
    """Every ``file`` of the table of contents, at any depth, in reading order."""
    if isinstance(entry, list):
        return [f for item in entry for f in toc_files(item)]
    if isinstance(entry, dict):
        own = [entry["file"]] if "file" in entry else []
        return own + [f for key, value in entry.items() if key != "file" for f in toc_files(value)]
    return []


TOC = yaml.safe_load((ROOT / "_toc.yml").read_text())
PAGES = [TOC["root"], *toc_files(TOC["parts"])]

# TeX that MathJax should have replaced: \( \) \[ \] $$ \begin{, $\command, and any \command of
# two or more letters in prose (a display equation that failed to parse leaves "\lVert", ...).
RAW_TEX = re.compile(r"\\[()\[\]]|\$\$|\\begin\{|\$\\[A-Za-z]|\\[A-Za-z]{2,}")

# The text a reader sees outside code, formulas and scripts (checkVisibility skips hidden parts).
VISIBLE_TEXT_JS = """() => {
  const skip = "pre, code, script, style, textarea, mjx-container, .highlight";
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const parts = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const el = node.parentElement;
    if (el && !el.closest(skip) && el.checkVisibility() && node.data.trim()) parts.push(node.data);
  }
  return parts.join(" ");
}"""

FIGURES_DRAWN_JS = """(expected) => {
  const plots = Array.from(document.querySelectorAll(".js-plotly-plot"));
  return plots.length === expected
    && plots.every(gd => gd._fullLayout && gd.querySelector("svg.main-svg"));
}"""

# Per figure: the traces plotly should draw and the trace groups it did draw (scatter and bar
# traces draw a g.trace, heatmaps a g.hm with an image, tables a g.table).
FIGURES_JS = """() => Array.from(document.querySelectorAll(".js-plotly-plot")).map(gd => ({
  id: gd.id,
  visible: gd._fullData.filter(t => t.visible === true).length,
  drawn: gd.querySelectorAll(
    "svg.main-svg g.trace, svg.main-svg g.hm, svg.main-svg g.table").length,
  heatmaps_without_image: Array.from(gd.querySelectorAll("g.hm"))
    .filter(g => !(g.querySelector("image") && g.querySelector("image").getAttribute("href")))
    .length,
  sliders: (gd.layout.sliders || []).map(s => s.steps.length),
}))"""

# What the traces look like on screen and in the figure's data, to tell whether a slider moved them.
TRACES_JS = """(id) => {
  const gd = document.getElementById(id);
  const drawn = Array.from(gd.querySelectorAll(
    "g.trace path, g.trace text, g.hm image, g.table text"
  )).map(e => [e.getAttribute("d"), e.getAttribute("transform"), e.getAttribute("href"),
                e.textContent].join("|"));
  const data = gd.data.map(t => JSON.stringify([t.x, t.y, t.z, t.cells && t.cells.values]));
  return {drawn: drawn.join(";"), data: data.join(";")};
}"""

WIDGETS_RENDERED_JS = """(expected) => document.querySelectorAll(
  ".widget-subarea > .jupyter-widgets").length >= expected"""

WIDGETS_JS = """() => Array.from(document.querySelectorAll(".widget-subarea")).map(area => {
  const view = area.querySelector(":scope > .jupyter-widgets");
  const box = view ? view.getBoundingClientRect() : {width: 0, height: 0};
  return {rendered: !!view, visible: !!view && view.checkVisibility(), width: box.width,
          height: box.height, controls: area.querySelectorAll(".widget-inline-hbox, .widget-html,"
            + " .widget-label, .widget-output, .widget-button, .widget-slider").length};
})"""

# A TeX error draws an merror node; an undefined macro (the noundefined package) a red mtext.
MATHJAX_JS = """async (limit) => {
  const MATH_ERRORS = 'mjx-merror, [data-mml-node="merror"], [data-mml-node="mtext"][fill="red"]';
  if (!window.MathJax || !MathJax.startup) return null;
  const late = new Promise((_, reject) => setTimeout(
    () => reject(new Error(`MathJax still typesetting after ${limit} ms`)), limit));
  await Promise.race([MathJax.startup.promise, late]);
  return {
    math: document.querySelectorAll(".math").length,
    untypeset: document.querySelectorAll(".math:not(:has(mjx-container))").length,
    containers: document.querySelectorAll("mjx-container").length,
    errors: document.querySelectorAll(MATH_ERRORS).length,
  };
}"""

# Code outputs wider than the text column at 1280 px: each text output is measured unwrapped
# (course.css wraps them, which would hide a line that is too wide), and any other output block
# (an HTML table, a widget) by how far its content overflows its box. Folded parts (details) are
# opened first, so a solution's output counts too. Plotly figures are resized to their boxes
# first, as course.js does on load: on a busy machine a figure measured before its resize had
# settled overflowed by a few pixels that no reader sees.
WIDE_OUTPUTS_JS = """async () => {
  document.querySelectorAll("details").forEach(d => { d.open = true; });
  if (window.Plotly) {
    await Promise.all(Array.from(document.querySelectorAll(".js-plotly-plot"))
      .map(gd => window.Plotly.Plots.resize(gd)));
  }
  const wide = [];
  for (const el of document.querySelectorAll(".cell_output pre, .cell_output .output")) {
    if (!el.checkVisibility()) continue;
    const saved = el.style.whiteSpace;
    if (el.tagName === "PRE") el.style.whiteSpace = "pre";
    const over = el.scrollWidth - el.clientWidth;
    el.style.whiteSpace = saved;
    if (over > 1) {
      const lines = (el.textContent || "").split("\\n");
      const longest = lines.reduce((a, b) => (b.length > a.length ? b : a), "");
      wide.push(`${over} px too wide: ${longest.trim().slice(0, 70)}`);
    }
  }
  return wide;
}"""

# Code cells wider than the text column at 1280 px (issue 38): a code cell scrolls sideways
# inside its box, so a line longer than the column hides its end. Folded cells (the set-up
# cell, solutions) are opened first.
WIDE_CODE_JS = """() => {
  document.querySelectorAll("details").forEach(d => { d.open = true; });
  const wide = [];
  for (const el of document.querySelectorAll(".cell_input pre")) {
    if (!el.checkVisibility()) continue;
    const over = el.scrollWidth - el.clientWidth;
    if (over > 1) {
      const lines = (el.textContent || "").split("\\n");
      const longest = lines.reduce((a, b) => (b.length > a.length ? b : a), "");
      wide.push(`${over} px too wide: ${longest.trim().slice(0, 70)}`);
    }
  }
  return wide;
}"""

LOAD_MS_JS = """async () => {
  const nav = performance.getEntriesByType("navigation")[0];
  while (!nav.loadEventEnd) await new Promise(done => setTimeout(done, 20));
  return nav.loadEventEnd - nav.startTime;
}"""


def executed_outputs(name: str) -> list[dict]:
    """The outputs of the executed notebook behind a page ([] for a page from Markdown)."""
    path = EXECUTED / f"{name}.ipynb"
    if not path.exists():
        return []
    nb = json.loads(path.read_text(encoding="utf-8"))
    return [o for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])]


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    """The built HTML served on 127.0.0.1 (a free port); yields the base URL."""
    if not (HTML / "index.html").exists():
        pytest.fail(f"no built book at {HTML}; run `make book-fast` (or set BUILT_HTML)")
    handler = functools.partial(QuietHandler, directory=str(HTML))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One headless Chromium for the module: the system's, never a Playwright download."""
    if not CHROMIUM:
        pytest.fail("no chromium found; `make browser` installs Debian's (or set CHROMIUM)")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM)
        yield chromium
        chromium.close()


def move_slider(page: Page, figure: str, slider: int, steps: int) -> str | None:
    """Click the far end of a slider's rail with the mouse, as a reader would, and wait for the
    traces to change; returns what went wrong, or None."""
    rail = page.locator(f'[id="{figure}"] .slider-rail-touch-rect').nth(slider)
    rail.evaluate("rail => rail.scrollIntoView({block: 'center'})")  # clear of the sticky header
    active = page.evaluate(
        "([id, i]) => document.getElementById(id)._fullLayout.sliders[i].active", [figure, slider]
    )
    target = 0 if active == steps - 1 else steps - 1
    before = page.evaluate(TRACES_JS, figure)
    box = rail.bounding_box()
    if box is None:
        return f"figure {figure}: slider {slider} has no rail on screen"
    x = box["x"] + (2 if target == 0 else box["width"] - 2)
    y = box["y"] + box["height"] / 2
    on_top = page.evaluate(
        "([x, y]) => { const e = document.elementFromPoint(x, y);"
        " return e ? e.closest('.slider-container') !== null : false; }",
        [x, y],
    )
    if not on_top:
        return f"figure {figure}: something covers the rail of slider {slider}"
    page.mouse.click(x, y)
    try:
        page.wait_for_function(
            f"""([id, i, target, before]) => {{
              const gd = document.getElementById(id);
              const now = ({TRACES_JS})(id);
              return gd._fullLayout.sliders[i].active === target
                && now.drawn !== before.drawn && now.data !== before.data;
            }}""",
            arg=[figure, slider, target, before],
            timeout=SLIDER_HANG_MS,
        )
    except PlaywrightTimeout:
        after = page.evaluate(TRACES_JS, figure)
        moved = page.evaluate(
            "([id, i]) => document.getElementById(id)._fullLayout.sliders[i].active",
            [figure, slider],
        )
        return (
            f"figure {figure}: clicking slider {slider} at step {target} left it at step {moved};"
            f" data changed: {after['data'] != before['data']},"
            f" drawing changed: {after['drawn'] != before['drawn']}"
        )
    return None


@pytest.fixture(scope="module")
def load_times(request: pytest.FixtureRequest) -> Iterator[dict[str, float]]:
    """Each page's load time in ms, written to SCREENSHOTS/load_times.json after the last page
    and handed to the terminal summary (tests/conftest.py) for the slowest page."""
    times: dict[str, float] = {}
    yield times
    if times:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        report = {"unit": "ms", "slowest": max(times, key=times.get), "pages": times}
        (SCREENSHOTS / "load_times.json").write_text(json.dumps(report, indent=1))
        request.config.stash[LOAD_TIMES_KEY] = times


@pytest.mark.parametrize("name", PAGES)
def test_page_in_a_browser(
    name: str, site: str, browser: Browser, load_times: dict[str, float]
) -> None:
    outputs = executed_outputs(name)
    n_figures = sum(PLOTLY_JSON in o.get("data", {}) for o in outputs)
    n_views = sum(WIDGET_VIEW in o.get("data", {}) for o in outputs)
    problems: list[str] = []
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    page.set_default_timeout(HANG_MS)
    errors: list[str] = []
    blocked: list[str] = []
    page.on("pageerror", lambda e: errors.append(f"uncaught: {e}"))
    page.on(
        "console",
        lambda m: (
            errors.append(f"console.error: {m.text} ({m.location.get('url')})")
            if m.type == "error"
            else None
        ),
    )
    page.on(
        "response",
        lambda r: errors.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None,
    )
    page.on(
        "requestfailed",
        lambda r: None if r.url in blocked else errors.append(f"failed: {r.url} {r.failure}"),
    )

    def refuse(route):
        blocked.append(route.request.url)
        route.abort("internetdisconnected")

    # everything that is not the local server (data: and blob: URLs never reach the network)
    page.route(re.compile(r"^(?!" + re.escape(site) + r"|data:|blob:)"), refuse)
    try:
        # a page whose load event never comes fails here (PlaywrightTimeout after HANG_MS)
        page.goto(site + f"{name}.html", wait_until="load")
        load_times[name] = round(page.evaluate(LOAD_MS_JS), 1)

        try:
            page.wait_for_function(FIGURES_DRAWN_JS, arg=n_figures)
        except PlaywrightTimeout:
            problems.append(f"plotly: {n_figures} figures expected, not all drawn")
        figures = page.evaluate(FIGURES_JS)
        if len(figures) != n_figures:
            problems.append(f"plotly: {len(figures)} figures on the page, {n_figures} expected")
        for fig in figures:
            if not fig["visible"] or fig["drawn"] != fig["visible"]:
                problems.append(
                    f"plotly figure {fig['id']}: {fig['drawn']} of {fig['visible']} traces drawn"
                )
            if fig["heatmaps_without_image"]:
                problems.append(f"plotly figure {fig['id']}: a heatmap without its image")

        if n_views:
            try:
                page.wait_for_function(WIDGETS_RENDERED_JS, arg=n_views)
            except PlaywrightTimeout:
                pass  # reported below, view by view
        views = page.evaluate(WIDGETS_JS)
        if len(views) != n_views:
            problems.append(f"widgets: {len(views)} views on the page, {n_views} expected")
        for i, view in enumerate(views):
            shown = view["rendered"] and view["visible"] and view["width"] and view["height"]
            if not (shown and view["controls"]):
                problems.append(f"widget view {i} not rendered: {view}")

        # after the widgets, whose labels the course.js shim hands to MathJax as well
        mathjax = page.evaluate(MATHJAX_JS, HANG_MS)
        has_math = page.locator(".math").count() > 0
        if mathjax is None and has_math:
            problems.append("the page has math but no MathJax")
        if mathjax is not None:
            if mathjax["untypeset"] or mathjax["containers"] < mathjax["math"]:
                problems.append(f"MathJax left formulas untypeset: {mathjax}")
            if mathjax["errors"]:
                problems.append(f"MathJax: {mathjax['errors']} formulas with TeX errors")
        raw = sorted({m.group() for m in RAW_TEX.finditer(page.evaluate(VISIBLE_TEXT_JS))})
        if raw:
            problems.append(f"raw TeX in the visible text: {raw}")

        shot = SCREENSHOTS / f"{name}.png"
        shot.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=shot, full_page=True)
        # after the screenshot, which shows the page as it opens (this opens folded parts)
        problems += [f"output wider than the column: {w}" for w in page.evaluate(WIDE_OUTPUTS_JS)]
        problems += [f"code wider than the column: {w}" for w in page.evaluate(WIDE_CODE_JS)]

        for fig in figures:
            for slider, steps in enumerate(fig["sliders"]):
                problem = move_slider(page, fig["id"], slider, steps)
                if problem:
                    problems.append(problem)
    finally:
        context.close()

    problems += errors
    problems += [f"request to the internet refused: {url}" for url in blocked]
    assert not problems, f"{name}:\n  " + "\n  ".join(problems)
    assert shot.stat().st_size > 10_000


# A phone: the narrowest common screen (375 CSS pixels wide).
PHONE_VIEWPORT = {"width": 375, "height": 740}
# What sticks out past the right edge of the window, widest first (to name the culprit).
OVERFLOW_JS = """() => {
  const width = window.innerWidth;
  const wide = Array.from(document.querySelectorAll("body *"))
    .map(e => ({e, right: e.getBoundingClientRect().right}))
    .filter(({e, right}) => right > width + 1 && e.checkVisibility())
    .sort((a, b) => b.right - a.right)
    .slice(0, 5)
    .map(({e, right}) => `${e.tagName.toLowerCase()}.${[...e.classList].join(".")}`
      + ` right edge ${Math.round(right)} px: ${(e.textContent || "").trim().slice(0, 60)}`);
  return {scroll: document.documentElement.scrollWidth, width, wide};
}"""
# The rendered size (CSS px) of every label of the page's diagrams (inline SVG): the font size in
# the diagram's units times the scale at which the diagram is drawn.
DIAGRAM_LABELS_JS = """() => Array.from(document.querySelectorAll("svg[role=img] text"))
  .flatMap(t => [t, ...t.querySelectorAll("tspan")])
  .filter(t => t.firstChild && t.firstChild.nodeType === 3 && t.firstChild.data.trim())
  .map(t => ({
    text: t.firstChild.data.trim(),
    px: parseFloat(getComputedStyle(t).fontSize) * t.ownerSVGElement.getScreenCTM().a,
  }))"""
# Tables, formulas (display and inline), theorem and other boxes whose content is cut off on a
# phone: a box that is narrower than its content and does not scroll (overflow-x hidden or clip),
# or one that sticks out of an ancestor that clips it before any ancestor scrolls. The page may
# stay as wide as the window while a formula loses its end (the theme clips div.math and every
# admonition), which OVERFLOW_JS cannot see. Folded parts are opened first.
CLIPPED_JS = """() => {
  document.querySelectorAll("details").forEach(d => { d.open = true; });
  const clips = v => v === "hidden" || v === "clip";
  const scrolls = v => v === "auto" || v === "scroll";
  const name = e => `${e.tagName.toLowerCase()}.${[...e.classList].join(".")}`
    + ` "${(e.textContent || "").trim().replace(/\\s+/g, " ").slice(0, 50)}"`;
  const found = [];
  const targets = document.querySelectorAll([
    ".bd-article table", ".bd-article div.math", ".bd-article span.math",
    ".bd-article mjx-container", ".bd-article .admonition", ".bd-article div.proof",
  ].join(", "));
  for (const el of targets) {
    if (!el.checkVisibility()) continue;
    const own = getComputedStyle(el).overflowX;
    if (el.scrollWidth > el.clientWidth + 1 && !scrolls(own) && clips(own)) {
      found.push(`${name(el)}: ${el.scrollWidth - el.clientWidth} px cut off (overflow-x ${own})`);
      continue;
    }
    const box = el.getBoundingClientRect();
    for (let a = el.parentElement; a && a !== document.body; a = a.parentElement) {
      const style = getComputedStyle(a).overflowX;
      if (scrolls(style)) break;
      if (!clips(style)) continue;
      const outer = a.getBoundingClientRect();
      const over = Math.max(box.right - outer.right, outer.left - box.left);
      if (over > 1) found.push(`${name(el)}: ${Math.round(over)} px cut off by ${name(a)}`);
      break;
    }
  }
  return found.slice(0, 8);
}"""
# The smallest label a diagram may show on a phone (a subscript), in CSS px.
SMALLEST_LABEL_PX = 10.5
DOWNLOAD_LINKS_JS = """() => Array.from(document.querySelectorAll(
  "a.btn-download-source-button, a.btn-download-notebook-button"
)).map(a => ({href: a.getAttribute("href"), download: a.hasAttribute("download")}))"""


@pytest.mark.parametrize("name", PAGES)
def test_page_on_a_phone(name: str, site: str, browser: Browser) -> None:
    """At 375×740 no page scrolls sideways (the page is no wider than the window), no table,
    formula or theorem box is cut off (each scrolls inside its own box instead), and the
    buttons that download the page's source (a chapter's .ipynb) carry the download attribute,
    so that a server sending the notebook as JSON does not open it as text in a new tab. A
    diagram's labels stay legible: the column scaled chapter 3's subscripts down to 9 px."""
    n_figures = sum(PLOTLY_JSON in o.get("data", {}) for o in executed_outputs(name))
    context = browser.new_context(viewport=PHONE_VIEWPORT)
    page = context.new_page()
    page.set_default_timeout(HANG_MS)
    page.route(re.compile(r"^(?!" + re.escape(site) + r"|data:|blob:)"), lambda r: r.abort())
    try:
        page.goto(site + f"{name}.html", wait_until="load")
        page.wait_for_function(FIGURES_DRAWN_JS, arg=n_figures)  # figures take their width
        overflow = page.evaluate(OVERFLOW_JS)
        links = page.evaluate(DOWNLOAD_LINKS_JS)
        labels = page.evaluate(DIAGRAM_LABELS_JS)
        clipped = page.evaluate(CLIPPED_JS)  # last: it opens the folded parts
    finally:
        context.close()
    assert not clipped, f"{name}: content cut off on a phone:\n  " + "\n  ".join(clipped)
    small = [f"{x['text']!r} at {x['px']:.1f} px" for x in labels if x["px"] < SMALLEST_LABEL_PX]
    assert not small, f"{name}: diagram labels under {SMALLEST_LABEL_PX} px on a phone: {small[:5]}"
    assert overflow["scroll"] <= overflow["width"] + 1, (
        f"{name} scrolls sideways on a phone: {overflow['scroll']} px wide in a "
        f"{overflow['width']} px window; sticking out:\n  " + "\n  ".join(overflow["wide"])
    )
    assert links, f"{name}: no download button"
    assert all(link["download"] for link in links), f"{name}: {links}"
    if name.startswith("notebooks/"):
        assert any(link["href"].endswith(f"{name}.ipynb") for link in links), links
