"""Sphinx extension: expose facts about this build to the pages as MyST substitutions.

``{{ build_mode }}`` is "fast" or "full" (from the ``KVATTN_FAST`` environment variable that the
notebooks also read), so that the execution-times page says which mode produced its table.
"""

from __future__ import annotations

from sphinx.application import Sphinx
from sphinx.config import Config


def _add_substitutions(app: Sphinx, config: Config) -> None:
    from kvattn.env import fast_mode

    config.myst_substitutions = {
        **config.myst_substitutions,
        "build_mode": "fast" if fast_mode() else "full",
    }


def setup(app: Sphinx) -> dict:
    app.connect("config-inited", _add_substitutions)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
