"""The cost explorer (chapter 2): parameters and FLOPs per token of one feed-forward layer of
each form, for a model width d, a rank r and m = factor·d slots.

Compute function: :func:`kvattn.mlp.mlp_cost`. Live face only (:func:`widget`).
"""

from __future__ import annotations

import ipywidgets as widgets

from ...mlp import mlp_cost
from ..plots.checks import _require_choice, _require_number
from ..plots.style import widget_axes
from ._live import _live

#: The model widths d the cost explorer offers.
COST_WIDTHS = (64, 128, 256, 512, 768, 1024, 2048, 4096, 8192)
#: The largest rank r the cost explorer offers.
COST_MAX_RANK = 64
#: The largest m/d the cost explorer offers.
COST_MAX_WIDTH_FACTOR = 8


def widget(d_model: int = 768, rank: int = 4, width_factor: int = 4) -> widgets.VBox:
    """Pick the model width d, the rank r and the slots per d: parameters and FLOPs per token
    of one feed-forward layer of each form (:func:`kvattn.mlp.mlp_cost`), with m = factor·d.

    ``d_model`` is one of :data:`COST_WIDTHS`, ``rank`` in 1 … :data:`COST_MAX_RANK`,
    ``width_factor`` in 1 … :data:`COST_MAX_WIDTH_FACTOR` (else ValueError).
    """
    _require_choice("d_model", d_model, COST_WIDTHS)
    _require_number("rank", rank, 1, COST_MAX_RANK, integer=True)
    _require_number("width_factor", width_factor, 1, COST_MAX_WIDTH_FACTOR, integer=True)
    d_box = widgets.Dropdown(options=list(COST_WIDTHS), value=d_model, description="d")
    r_box = widgets.IntSlider(
        value=rank, min=1, max=COST_MAX_RANK, description="rank r", continuous_update=False
    )
    f_box = widgets.IntSlider(
        value=width_factor,
        min=1,
        max=COST_MAX_WIDTH_FACTOR,
        description="m / d",
        continuous_update=False,
    )

    def draw() -> None:
        d, r, m = d_box.value, r_box.value, f_box.value * d_box.value
        forms = [
            ("key-value σ(x·k)", "key_value", 1),
            ("gated / rank-1", "gated", 1),
            (f"rank-{r} (factors)", "rank_r", r),
            ("full, d×d matrices", "full_matrix", 1),
        ]
        costs = [(label, *mlp_cost(form, d, m, rank)) for label, form, rank in forms]
        fig, (ax,) = widget_axes(1, cols=1, panel_height=2.9)
        ax.barh([c[0] for c in costs][::-1], [c[2] for c in costs][::-1])
        ax.set_xscale("log")
        ax.set(xlabel="FLOPs per token (matrix products)", title=f"d = {d}, m = {m} slots")
        for i, (_, params, flops) in enumerate(costs[::-1]):
            ax.text(flops, i, f"  {flops:.2e} FLOPs, {params:.2e} params", va="center")
        ax.set_xlim(right=max(c[2] for c in costs) * 1e3)
        fig.tight_layout()

    return _live([d_box, r_box, f_box], draw)
