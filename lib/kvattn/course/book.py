"""Glue between the notebooks' outputs and the Jupyter Book build (not needed to use kvattn).

Registered with MyST-NB through the ``myst_nb.mime_renderers`` entry point in ``pyproject.toml``.
"""

from __future__ import annotations

from typing import Any, ClassVar

PLOTLY_MIMETYPE = "application/vnd.plotly.v1+json"


class PlotlyJsonTwin:
    """Skip plotly's JSON output in the book, quietly.

    :func:`kvattn.course.env.use_book_renderer` emits every figure twice: as plotly JSON (for live
    Jupyter front ends) and as HTML (for the book). MyST-NB renders every mimetype of a bundle
    before choosing one and warns about the JSON it does not know, which ``-W`` turns into a
    failed build. This plugin renders the JSON twin as nothing; the book shows the HTML.
    ``tests/test_built_html.py`` checks that every plotly output of every executed notebook did
    reach its page, so a figure without an HTML twin cannot disappear unnoticed.
    """

    mime_priority_overrides: ClassVar[list[tuple[str, str, int | None]]] = [
        ("html", PLOTLY_MIMETYPE, None)
    ]

    @staticmethod
    def handle_mime(renderer: Any, data: Any, inline: bool) -> list | None:
        if data.mime_type == PLOTLY_MIMETYPE:
            return []
        return None
