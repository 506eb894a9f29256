"""The course's shared plotly figures, in three modules over one set of checks:

* :mod:`kvattn.plots.style` — the house colours (:data:`~kvattn.plots.style.COLORS`, one per
  layer kind or activation, the same in every chapter) and layout, rounding for the page,
  logarithmic axes (:func:`~kvattn.plots.style.log_axis`) and the frame slider
  (:func:`~kvattn.plots.style.slider`) that the explorers' static faces use;
* :mod:`kvattn.plots.charts` — the chapters' general plots (lines, loss curves, heat-map grids,
  a line plot with a slider, points with error bars, interval bands, dose-response, runs);
* :mod:`kvattn.plots.reports` — plots of run records: benchmark ratios, collapse
  trajectories and small multiples of runs grouped by what they vary;
* :mod:`kvattn.plots.checks` — the argument checks they and the explorers share: bad input
  raises before anything is drawn.

Figures are built from the outputs of the compute functions in the other modules; nothing here
trains or measures. The explorers, each with a static and a live face, are in
:mod:`kvattn.explorers`. Every public name is re-exported here, so ``kvattn.plots.X`` works for
all of them.
"""

from .charts import (
    dose_response,
    forest,
    heatmap_grid,
    interval_bands,
    line_plot,
    line_slider,
    loss_curves,
    points_with_errors,
    run_curves,
)
from .reports import benchmark_ratios, collapse_trajectories, run_panels
from .style import COLORS, LAYER_COLORS, LAYOUT, color, log_axis, slider

__all__ = [
    "COLORS",
    "LAYER_COLORS",
    "LAYOUT",
    "benchmark_ratios",
    "collapse_trajectories",
    "color",
    "dose_response",
    "forest",
    "heatmap_grid",
    "interval_bands",
    "line_plot",
    "line_slider",
    "log_axis",
    "loss_curves",
    "points_with_errors",
    "run_curves",
    "run_panels",
    "slider",
]
