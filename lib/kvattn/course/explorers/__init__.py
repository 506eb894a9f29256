"""The course's explorers, one module each, every module holding both faces of its explorer:

* ``figure(...)`` — the static face: a plotly figure whose frames are precomputed, so that its
  slider works in the static book with no kernel (sizes are kept small, since each figure's data
  is embedded in its page);
* ``widget(...)`` — the live face: ipywidgets controls that redraw with matplotlib into an
  ``Output`` widget in Jupyter or Colab. In the static book a widget shows the state it was
  executed with, so every chapter also shows the plotly face.

Both faces call the same compute function, in the domain module the explorer's module names.

=========================================  ==========  =====================================
module                                     chapter     faces
=========================================  ==========  =====================================
:mod:`kvattn.course.explorers.slot`               1           ``figure``, ``widget``
:mod:`kvattn.course.explorers.cost`               2           ``widget``
:mod:`kvattn.course.explorers.interaction`        3           ``figure``, ``widget``
:mod:`kvattn.course.explorers.symmetry`           4           ``figure``, ``widget``
:mod:`kvattn.course.explorers.paired`             5           ``widget``
:mod:`kvattn.course.explorers.attention`          6           ``figure``, ``widget``
:mod:`kvattn.course.explorers.deductive`          7, 9        ``figure``, ``widget``
:mod:`kvattn.course.explorers.generation`         8, 11       ``widget``
:mod:`kvattn.course.explorers.twirl`              10          ``figure``, ``widget``
=========================================  ==========  =====================================

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
