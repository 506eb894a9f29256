"""Sphinx extension: keep the built pages free of JavaScript errors (tests/test_browser.py).

* Sphinx 7.4 writes every inline script that an extension registers after the builder started
  twice (``Sphinx.add_js_file(None, body=...)`` hands ``None`` to the builder, which later adds
  the same script again from the registry as ``''``; fixed upstream by sphinx-doc/sphinx#13402
  in Sphinx 8, and Jupyter Book 1 needs Sphinx 7). sphinx-thebe's ``const THEBE_JS_URL = ...`` then
  throws "Identifier 'THEBE_JS_URL' has already been declared" on every page. The duplicates are
  dropped from each page's script list.
* The ipywidgets HTML manager finds its Font Awesome fonts beside the AMD module it is defined
  as, which require.js places at ``<page folder>/@jupyter-widgets/html-manager/dist/``: six 404s
  on every widget page and no icons. On those pages require.js is told that the module lives in
  ``_static/vendor/``, where tools/fetch_static.py puts the fonts.
"""

from __future__ import annotations

import json
from typing import Any

from sphinx.application import Sphinx

WIDGET_MODULE_DIR = "@jupyter-widgets/html-manager/dist"


def _script_key(script: Any) -> tuple:
    attributes = getattr(script, "attributes", {})
    return (getattr(script, "filename", script) or "", tuple(sorted(attributes.items())))


def _fix_page_scripts(
    app: Sphinx, pagename: str, templatename: str, context: dict, doctree: Any
) -> None:
    scripts = context.get("script_files")
    if not isinstance(scripts, list):
        return
    seen: set[tuple] = set()
    unique = []
    for script in scripts:
        key = _script_key(script)
        if key not in seen:
            seen.add(key)
            unique.append(script)
    scripts[:] = unique
    names = [str(getattr(s, "filename", s) or "") for s in scripts]
    if any(name.endswith("vendor/require.js") for name in names):
        # A global `require` object defined before require.js loads is its configuration;
        # priority 499 puts it before myst-nb's widget scripts (500).
        vendor = context["pathto"]("_static/vendor", 1)
        config = {"paths": {WIDGET_MODULE_DIR: vendor}}
        app.add_js_file(None, body=f"var require = {json.dumps(config)};", priority=499)


def setup(app: Sphinx) -> dict:
    # after myst-nb has added a notebook page's widget scripts (default priority 500)
    app.connect("html-page-context", _fix_page_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
