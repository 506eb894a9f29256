"""Kept for one release so that existing code keeps working: the live ipywidgets faces of the
explorers now live in :mod:`kvattn.explorers`, one module per explorer beside its static face and
its constants. Each name here is the very object of its new home:

* ``symmetry_explorer``: :func:`kvattn.explorers.symmetry.widget`; ``ACTIVATIONS``,
  ``BETA_LOG10``, ``RHO_RANGE``, ``MEAN_RANGE``: :mod:`kvattn.explorers.symmetry`;
* ``slot_explorer``: :func:`kvattn.explorers.slot.widget`;
* ``cost_explorer``: :func:`kvattn.explorers.cost.widget`; ``COST_WIDTHS``, ``COST_MAX_RANK``,
  ``COST_MAX_WIDTH_FACTOR``: :mod:`kvattn.explorers.cost`;
* ``interaction_explorer``: :func:`kvattn.explorers.interaction.widget`;
* ``paired_comparison``: :func:`kvattn.explorers.paired.widget`;
* ``attention_explorer``: :func:`kvattn.explorers.attention.widget`;
* ``deductive_explorer``: :func:`kvattn.explorers.deductive.widget`;
* ``generation_explorer``: :func:`kvattn.explorers.generation.widget`;
* ``twirl_explorer``: :func:`kvattn.explorers.twirl.widget`.
"""

from .explorers.attention import widget as attention_explorer
from .explorers.cost import COST_MAX_RANK, COST_MAX_WIDTH_FACTOR, COST_WIDTHS
from .explorers.cost import widget as cost_explorer
from .explorers.deductive import widget as deductive_explorer
from .explorers.generation import widget as generation_explorer
from .explorers.interaction import widget as interaction_explorer
from .explorers.paired import widget as paired_comparison
from .explorers.slot import widget as slot_explorer
from .explorers.symmetry import ACTIVATIONS, BETA_LOG10, MEAN_RANGE, RHO_RANGE
from .explorers.symmetry import widget as symmetry_explorer
from .explorers.twirl import widget as twirl_explorer

__all__ = [
    "ACTIVATIONS",
    "BETA_LOG10",
    "COST_MAX_RANK",
    "COST_MAX_WIDTH_FACTOR",
    "COST_WIDTHS",
    "MEAN_RANGE",
    "RHO_RANGE",
    "attention_explorer",
    "cost_explorer",
    "deductive_explorer",
    "generation_explorer",
    "interaction_explorer",
    "paired_comparison",
    "slot_explorer",
    "symmetry_explorer",
    "twirl_explorer",
]
