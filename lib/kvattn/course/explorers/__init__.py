"""The course's explorers, one module each, every module holding both faces of its explorer:

* ``figure(...)`` — the static face: a plotly figure whose frames are precomputed, so that its
  slider works in the static book with no kernel (sizes are kept small, since each figure's data
  is embedded in its page);
* ``widget(...)`` — the live face: ipywidgets controls that redraw with matplotlib into an
  ``Output`` widget in Jupyter or Colab. In the static book a widget shows the state it was
  executed with, so every chapter also shows the plotly face.

Both faces call the same compute function, in the domain module the explorer's module names.

Each module is ``kvattn.course.explorers.<name>``:

===============  =======  ======================
module           chapter  faces
===============  =======  ======================
``slot``         1        ``figure``, ``widget``
``cost``         2        ``widget``
``interaction``  3        ``figure``, ``widget``
``symmetry``     4        ``figure``, ``widget``
``paired``       5        ``widget``
``attention``    6        ``figure``, ``widget``
``deductive``    7, 9     ``figure``, ``widget``
``generation``   8, 11    ``widget``
``twirl``        10       ``figure``, ``widget``
===============  =======  ======================

Arguments are checked before anything is drawn or any widget is built
(:mod:`kvattn.course.plots.checks`): a value outside a slider's range, a choice that is not offered,
an index past the last layer, head or slot, or an empty prompt raises ValueError naming the
argument, the value and what is allowed (plotly would silently drop unmatched points, and
ipywidgets would clamp the value or raise a bare TraitError). A text box that the reader empties
shows a line asking for a prompt instead of a traceback.
"""

from . import (  # noqa: F401
    attention,
    cost,
    deductive,
    generation,
    interaction,
    paired,
    slot,
    symmetry,
    twirl,
)
