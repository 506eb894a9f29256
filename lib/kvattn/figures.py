"""Kept for one release so that existing code keeps working: the plotly figures now live in
:mod:`kvattn.plots` (the shared plots) and :mod:`kvattn.explorers` (each explorer's static face
beside its live one). Each name here is the very object of its new home:

* ``COLORS``, ``LAYER_COLORS``, ``LAYOUT``, ``color``, ``log_axis``, ``slider``:
  :mod:`kvattn.plots.style`;
* ``line_plot``, ``loss_curves``, ``heatmap_grid``, ``line_slider``, ``points_with_errors``,
  ``interval_bands``, ``dose_response``, ``run_curves``: :mod:`kvattn.plots.charts`;
* ``benchmark_ratios``, ``collapse_trajectories``: :mod:`kvattn.plots.reports`;
* ``symmetry_explorer``: :func:`kvattn.explorers.symmetry.figure`;
* ``slot_explorer``: :func:`kvattn.explorers.slot.figure`;
* ``interaction_explorer``: :func:`kvattn.explorers.interaction.figure`;
* ``attention_explorer``: :func:`kvattn.explorers.attention.figure`;
* ``deductive_explorer``: :func:`kvattn.explorers.deductive.figure`;
* ``twirl_explorer``: :func:`kvattn.explorers.twirl.figure`.

The names of :mod:`kvattn.plots` are also ``kvattn.plots.X``.
"""

from .explorers.attention import figure as attention_explorer
from .explorers.deductive import figure as deductive_explorer
from .explorers.interaction import figure as interaction_explorer
from .explorers.slot import figure as slot_explorer
from .explorers.symmetry import figure as symmetry_explorer
from .explorers.twirl import figure as twirl_explorer
from .plots import (
    COLORS,
    LAYER_COLORS,
    LAYOUT,
    benchmark_ratios,
    collapse_trajectories,
    color,
    dose_response,
    heatmap_grid,
    interval_bands,
    line_plot,
    line_slider,
    log_axis,
    loss_curves,
    points_with_errors,
    run_curves,
    run_panels,
    slider,
)

__all__ = [
    "COLORS",
    "LAYER_COLORS",
    "LAYOUT",
    "attention_explorer",
    "benchmark_ratios",
    "collapse_trajectories",
    "color",
    "deductive_explorer",
    "dose_response",
    "heatmap_grid",
    "interaction_explorer",
    "interval_bands",
    "line_plot",
    "line_slider",
    "log_axis",
    "loss_curves",
    "points_with_errors",
    "run_curves",
    "run_panels",
    "slider",
    "slot_explorer",
    "symmetry_explorer",
    "twirl_explorer",
]
