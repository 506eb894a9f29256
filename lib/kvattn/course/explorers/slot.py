"""The key-value memory explorer (chapter 1): one slot of a trained layer, its top trigger
examples (the key) and the next tokens its value raises most.

Compute function: :func:`kvattn.memories.slot_report`. :func:`figure` is the static face (a
slider over precomputed slots); :func:`widget` the live face (any slot number of the layer).
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import ipywidgets as widgets
import plotly.graph_objects as go
from IPython.display import display
from plotly.subplots import make_subplots
from torch import Tensor

from ...data import TokenData
from ...memories import SlotReport, Triggers, lift_labels, slot_report
from ..plots.checks import _require_array, _require_index, _require_items, _require_number
from ..plots.style import COLORS, LAYOUT, _frame_names, slider, widget_axes
from ._live import _live


def figure(reports: Sequence[SlotReport], title: str) -> go.Figure:
    """The static face of the key-value memory explorer: a slider over precomputed slots.

    Left, the slot's top trigger examples (context, **last token**, the token that followed);
    right, the top next tokens of its value. Tokens are SentencePiece pieces (▁ = space).

    Frames are named by slot, or "index: slot" where two reports share a slot number (of two
    layers, say), so that each stays reachable from the slider.

    Raises ValueError when ``reports`` is empty, TypeError when an item is no
    :class:`~kvattn.memories.SlotReport`.
    """
    _require_items("reports", reports, SlotReport)
    fig = make_subplots(
        rows=1,
        cols=2,
        column_widths=[0.62, 0.38],
        horizontal_spacing=0.1,
        specs=[[{"type": "table"}, {"type": "xy"}]],
        subplot_titles=("key: top trigger examples", "value: most raised next tokens"),
    )

    def cells(r: SlotReport) -> list[list[str]]:
        return [
            ["…" + c[-32:] for c, _, _, _ in r.triggers],
            [last for _, last, _, _ in r.triggers],
            [nxt for _, _, nxt, _ in r.triggers],
            [f"{coef:.2f}" for *_, coef in r.triggers],
        ]

    def bars(r: SlotReport) -> tuple[list[float], list[str], list[str]]:
        lifts = [p for _, p in r.value_tokens]
        return (
            [round(p, 5) for p in lifts][::-1],
            [f"{t} " for t, _ in r.value_tokens][::-1],
            lift_labels(lifts)[::-1],
        )

    first = reports[0]
    fig.add_trace(
        go.Table(
            header=dict(values=["context", "last token", "next token", "σ(x·k)"], align="left"),
            cells=dict(values=cells(first), align="left", height=24),
            columnwidth=[3.2, 1.2, 1.2, 0.8],
        ),
        1,
        1,
    )
    px, py, pt = bars(first)
    fig.add_trace(
        go.Bar(
            x=px,
            y=py,
            text=pt,
            textposition="inside",
            orientation="h",
            marker_color=COLORS["bilinear"],
        ),
        1,
        2,
    )

    def label(r: SlotReport) -> str:
        return f"{title}: layer {r.layer}, slot {r.slot}"

    keys = _frame_names([str(r.slot) for r in reports])
    fig.frames = [
        go.Frame(
            name=key,
            data=[
                go.Table(cells=dict(values=cells(r))),
                go.Bar(x=bars(r)[0], y=bars(r)[1], text=bars(r)[2]),
            ],
            traces=[0, 1],
            layout=dict(title_text=label(r)),
        )
        for key, r in zip(keys, reports, strict=True)
    ]
    fig.update_layout(
        title=label(first),
        height=430,
        showlegend=False,
        sliders=[slider(keys, [str(r.slot) for r in reports], "slot ")],
        **LAYOUT,
    )
    # lifts of a small model differ in their second or third decimal: the axis starts at the
    # uniform level (×1), not at 0, so that the differences show
    lifts = [p for r in reports for _, p in r.value_tokens]
    low = min(1.0, 0.98 * min(lifts))
    fig.update_xaxes(
        title_text="probability ÷ uniform", range=[low, 1.02 * max(lifts)], row=1, col=2
    )
    return fig


def widget(
    data: TokenData, triggers: Triggers, values: Tensor, layer: int, slot: int = 0
) -> widgets.VBox:
    """Type or step through slot numbers of one layer: its trigger examples and value tokens.

    ``values`` is the layer's ``(m, vocab)`` value distributions; ``slot`` must be in 0 … m − 1
    and ``layer`` ≥ 0 (else ValueError).
    """
    _require_array("values", values, 2)
    _require_number("layer", layer, 0, integer=True)
    _require_index("slot", slot, values.shape[0], "slots")
    slot_box = widgets.BoundedIntText(
        value=slot, min=0, max=values.shape[0] - 1, description="slot"
    )
    table = widgets.HTML()

    def draw() -> None:
        r = slot_report(data, triggers, values, layer, slot_box.value)
        rows = "".join(
            f"<tr><td style='text-align:right'>{html.escape(c[-40:])}</td>"
            f"<td><b>{html.escape(last)}</b></td><td>→ {html.escape(nxt)}</td>"
            f"<td>{coef:.2f}</td></tr>"
            for c, last, nxt, coef in r.triggers
        )
        table.value = (
            f"<b>Layer {layer}, slot {r.slot}: top trigger examples</b><table>{rows}</table>"
        )
        display(table)
        fig, (ax,) = widget_axes(1, cols=1, panel_height=3.2)
        tokens = [t for t, _ in r.value_tokens][::-1]
        lifts = [p for _, p in r.value_tokens][::-1]
        bars = ax.barh(range(len(tokens)), lifts)
        ax.bar_label(bars, lift_labels(lifts), padding=2, fontsize=9)
        # from the uniform level (×1), where a small model's nearly equal lifts differ
        ax.set_xlim(min(1.0, 0.98 * min(lifts)), 1.08 * max(lifts))
        ax.set_yticks(range(len(tokens)), tokens)
        ax.set(xlabel="probability ÷ uniform", title="value: most raised next tokens")
        fig.tight_layout()

    return _live([slot_box], draw)
