"""The course's shared plotly figures, in modules over one set of checks:

* :mod:`kvattn.course.plots.style` — the house colours (:data:`~kvattn.course.plots.style.COLORS`,
  one per layer kind or activation, the same in every chapter) and layout, rounding for the page,
  logarithmic axes (:func:`~kvattn.course.plots.style.log_axis`) and the frame slider
  (:func:`~kvattn.course.plots.style.slider`) that the explorers' static faces use;
* :mod:`kvattn.course.plots.charts` — the chapters' general plots (lines, loss curves, heat-map
  grids, a line plot with a slider, points with error bars, runs);
* :mod:`kvattn.course.plots.estimates` — estimates with their intervals (interval bands,
  dose-response, a forest plot);
* :mod:`kvattn.course.plots.reports` — plots of run records: benchmark ratios, collapse
  trajectories and small multiples of runs grouped by what they vary;
* :mod:`kvattn.course.plots.checks` — the argument checks they and the explorers share: bad input
  raises before anything is drawn;
* :mod:`kvattn.course.plots.legibility` — the figure check
  (:func:`~kvattn.course.plots.legibility.check_figure`): log axes with two labelled ticks or more,
  no overlapping labels, colour bars beside their own panel, framed figures whose axes hold every
  frame, legible widget images; :mod:`kvattn.course.plots.geometry` — where plotly puts a
  figure's text and markers, which the check measures.

Importing this package installs the figure check on every figure shown when the environment
variable ``KVATTN_FIGURE_CHECK`` is ``1`` (raise) or ``warn``
(:func:`~kvattn.course.plots.legibility.install_figure_check`); the book build and nbval set it.

Figures are built from the outputs of the compute functions in the other modules; nothing here
trains or measures. The explorers, each with a static and a live face, are in
:mod:`kvattn.course.explorers`. Every public name is re-exported here, so
``kvattn.course.plots.X`` works for all of them.
"""

from .charts import (
    heatmap_grid,
    line_plot,
    line_slider,
    loss_curves,
    points_with_errors,
    run_curves,
)
from .estimates import dose_response, forest, interval_bands
from .legibility import (
    FigureCheckError,
    FigureCheckWarning,
    check_figure,
    figure_problems,
    install_figure_check,
    place_point_labels,
)
from .reports import benchmark_ratios, collapse_trajectories, run_panels
from .style import (
    COLORS,
    LAYER_COLORS,
    LAYOUT,
    SIGNED_COLORS,
    SIGNED_SCALE,
    color,
    covering_range,
    log_axis,
    log_ticks,
    slider,
    widget_axes,
)

__all__ = [
    "COLORS",
    "LAYER_COLORS",
    "LAYOUT",
    "SIGNED_COLORS",
    "SIGNED_SCALE",
    "FigureCheckError",
    "FigureCheckWarning",
    "benchmark_ratios",
    "check_figure",
    "collapse_trajectories",
    "color",
    "covering_range",
    "dose_response",
    "figure_problems",
    "forest",
    "heatmap_grid",
    "install_figure_check",
    "interval_bands",
    "line_plot",
    "line_slider",
    "log_axis",
    "log_ticks",
    "loss_curves",
    "place_point_labels",
    "points_with_errors",
    "run_curves",
    "run_panels",
    "slider",
    "widget_axes",
]

install_figure_check()  # on when KVATTN_FIGURE_CHECK says so (the book build, nbval)
