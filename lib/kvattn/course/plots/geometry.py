"""Where a plotly figure's text and markers land on the page, for the figure check.

Plotly lays figures out in the browser, so the check estimates it here: a text's box from its
length and font size (:func:`text_box`), the plotting area of each axis pair
(:class:`PlotlyGeometry`), the values each axis shows in any frame (:func:`axis_values`), and
where a data point falls in pixels (:func:`data_to_px`). The estimates err on the side of room:
a label that fits here fits in the browser.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from numbers import Real

import numpy as np
import plotly.graph_objects as go

_NARROW, _WIDE = set("il.,:;'|!j()[]ft ·"), set("mwMW@%")


def overlap(a: tuple, b: tuple, slack: float = 1.0) -> bool:
    """Whether boxes ``(x0, y0, x1, y1)`` overlap by more than ``slack`` px both ways."""
    return min(a[2], b[2]) - max(a[0], b[0]) > slack and min(a[3], b[3]) - max(a[1], b[1]) > slack


def overlaps(boxes: Sequence[tuple[str, tuple]], limit: int = 4) -> list[str]:
    """The first ``limit`` overlapping pairs of named boxes, as problems."""
    found = []
    for i, (name_a, a) in enumerate(boxes):
        for name_b, b in boxes[i + 1 :]:
            if overlap(a, b):
                found.append(f"labels overlap: {name_a} and {name_b}")
                if len(found) == limit:
                    return found
    return found


def text_width(text: str, size: float) -> float:
    """The rendered width (px) of one line of plotly text, markup stripped, at ``size`` px."""
    lines = re.sub(r"<[^>]+>", "", re.sub(r"<br\s*/?>", "\n", text)).split("\n")

    def width(line: str) -> float:
        return sum(
            0.3 if c in _NARROW else 0.85 if c in _WIDE else 0.66 if c.isupper() else 0.56
            for c in line
        )

    return max(width(line) for line in lines) * size


def text_box(text: str, size: float, x: float, y: float, xanchor: str, yanchor: str) -> tuple:
    """The box ``(x0, y0, x1, y1)`` in px (y grows downwards) of ``text`` at ``size`` px,
    anchored at ``(x, y)`` as plotly anchors it (``xanchor`` left/center/right, ``yanchor``
    top/middle/bottom)."""
    lines = text.count("<br") + 1
    w, h = text_width(text, size), 1.25 * size * lines
    x0 = {"left": x, "right": x - w}.get(xanchor, x - w / 2)
    y0 = {"top": y, "bottom": y - h}.get(yanchor, y - h / 2)  # y grows downwards
    return (x0, y0, x0 + w, y0 + h)


class PlotlyGeometry:
    """Where plotly puts a figure's axes at a given width, in px (y grows downwards)."""

    def __init__(self, fig: go.Figure, width: float) -> None:
        layout = fig.layout
        margin = layout.margin
        self.width = float(layout.width or width)
        self.height = float(layout.height or 450)
        self.left = 80.0 if margin.l is None else float(margin.l)
        right = 80.0 if margin.r is None else float(margin.r)
        self.top = 100.0 if margin.t is None else float(margin.t)
        bottom = 80.0 if margin.b is None else float(margin.b)
        self.plot_w = max(self.width - self.left - right, 1.0)
        self.plot_h = max(self.height - self.top - bottom, 1.0)
        self.font = float(layout.font.size or 12)
        self.layout = layout

    def px(self, xf: float, yf: float) -> tuple[float, float]:
        """Paper fractions → px."""
        return self.left + xf * self.plot_w, self.top + (1 - yf) * self.plot_h

    def axis(self, name: str) -> object:
        """The layout axis ``name`` ("x", "x2", "yaxis3", …)."""
        name = name if "axis" in name else f"{name[0]}axis{name[1:]}"
        return self.layout[name]

    def domain_box(self, xname: str, yname: str) -> tuple:
        """The plotting area of axes ``xname`` and ``yname`` as a box in px."""
        xd, yd = self.axis(xname).domain or (0, 1), self.axis(yname).domain or (0, 1)
        (x0, y1), (x1, y0) = self.px(xd[0], yd[0]), self.px(xd[1], yd[1])
        return (x0, y0, x1, y1)


def numbers(values: object) -> np.ndarray:
    """The finite numbers among a trace's coordinates (categories and None dropped)."""
    if values is None:
        return np.zeros(0)
    flat = np.ravel(np.asarray(values, dtype=object))
    out = [float(v) for v in flat if isinstance(v, Real) and not isinstance(v, bool)]
    array = np.asarray(out, dtype=float)
    return array[np.isfinite(array)]


def trace_axes(trace: object) -> tuple[str, str]:
    """The names of a trace\'s x and y axes ("x", "y2", …)."""
    return getattr(trace, "xaxis", None) or "x", getattr(trace, "yaxis", None) or "y"


def drawn_values(trace: object, letter: str) -> np.ndarray:
    """The values a trace draws along axis ``letter`` (bars: their ends, heat maps: cells)."""
    if trace.type in ("table", "pie", "sankey", "parcoords") or not hasattr(trace, letter):
        return np.zeros(0)
    return numbers(getattr(trace, letter))


def frame_traces(fig: go.Figure) -> list[list[tuple[int, object]]]:
    """For each frame, (index of the figure's trace it updates, its trace)."""
    out = []
    for frame in fig.frames:
        indices = list(frame.traces) if frame.traces is not None else range(len(frame.data))
        out.append(list(zip(indices, frame.data, strict=False)))
    return out


def matched(fig: go.Figure, axis: str) -> set[str]:
    """``axis`` and the axes that share its range with it (plotly's ``matches``)."""
    root = fig.layout[f"{axis[0]}axis{axis[1:]}"].matches or axis
    return {
        name
        for name in layout_axes(fig)
        if name == root or fig.layout[f"{name[0]}axis{name[1:]}"].matches == root
    } | {axis}


def axis_values(fig: go.Figure, axis: str, *, frames: bool = True) -> list[np.ndarray]:
    """The values drawn on layout axis ``axis`` ("x", "y2") and the axes that share its range:
    the figure's, then each frame's."""
    letter = axis[0]
    group = matched(fig, axis)

    def on_axis(base: object, trace: object) -> bool:
        own = getattr(trace, f"{letter}axis", None) or trace_axes(base)["xy".index(letter)]
        return own in group

    sets = [np.concatenate([drawn_values(t, letter) for t in fig.data if on_axis(t, t)] or [[]])]
    for updates in frame_traces(fig) if frames else []:
        sets.append(
            np.concatenate(
                [
                    drawn_values(t, letter)
                    for i, t in updates
                    if i < len(fig.data) and on_axis(fig.data[i], t)
                ]
                or [[]]
            )
        )
    return sets


def layout_axes(fig: go.Figure) -> list[str]:
    """The short names ("x", "y2", …) of the figure's cartesian axes."""
    names = []
    for key in fig.layout:
        for letter in "xy":
            if key.startswith(f"{letter}axis"):
                names.append(letter + key[5:])
    return names or ["x", "y"]


def axis_scale(geo: PlotlyGeometry, fig: go.Figure, name: str) -> tuple[float, float, bool]:
    """(value at the domain's start, value at its end, log) of layout axis ``name`` ("x", "y2"),
    with plotly's autorange approximated."""
    ax = geo.axis(name)
    log = ax.type == "log"
    if ax.range is not None and ax.autorange is not True:
        low, high = (float(v) for v in ax.range)
    else:
        values = axis_values(fig, name, frames=False)[0]
        values = np.log10(values[values > 0]) if log else values
        low, high = (float(values.min()), float(values.max())) if values.size else (0.0, 1.0)
        pad = 0.05 * (high - low) or 0.5
        low, high = low - pad, high + pad
    if ax.autorange == "reversed":
        low, high = high, low
    return low, high, log


def coordinate(geo: PlotlyGeometry, fig: go.Figure, ref: str | None, letter: str) -> Callable:
    """A function from a position along ``letter`` ("x" or "y") in plotly's reference ``ref`` to
    px (None where a log axis cannot place it): "paper" (a fraction of the plot area), "x2 domain"
    (a fraction of that axis's domain: ``add_hline`` and ``add_vline`` place their labels so), or
    an axis's data ("x2"; None reads as ``letter``, plotly's default)."""
    along = "xy".index(letter)
    name, _, domain = (ref or letter).partition(" ")

    def paper(f: float) -> float:
        return geo.px(f, f)[along]

    if name == "paper":
        return paper
    d0, d1 = geo.axis(name).domain or (0, 1)
    if domain:
        return lambda v: paper(d0 + v * (d1 - d0))
    low, high, log = axis_scale(geo, fig, name)
    start, stop = paper(d0), paper(d1)

    def to_px(v: float) -> float | None:
        if log and v <= 0:
            return None
        return start + ((np.log10(v) if log else v) - low) / ((high - low) or 1) * (stop - start)

    return to_px


def data_to_px(geo: PlotlyGeometry, fig: go.Figure, xref: str | None, yref: str | None) -> Callable:
    """A function (x, y) → px (None where a log axis cannot place it) for positions given in
    plotly's references ``xref`` and ``yref`` (see :func:`coordinate`)."""
    to_x, to_y = coordinate(geo, fig, xref, "x"), coordinate(geo, fig, yref, "y")

    def to_px(x: float, y: float) -> tuple[float, float] | None:
        px, py = to_x(x), to_y(y)
        return None if px is None or py is None else (px, py)

    return to_px


def point_label_boxes(geo: PlotlyGeometry, fig: go.Figure) -> tuple[list, list]:
    """The boxes of the text labels of scatter points and of every drawn marker."""
    labels, markers = [], []
    for t_index, trace in enumerate(fig.data):
        if trace.type not in ("scatter", "scattergl"):
            continue
        xs, ys = np.ravel(trace.x or []), np.ravel(trace.y or [])
        if not len(xs) or not len(ys):
            continue
        to_px = data_to_px(geo, fig, *trace_axes(trace))
        mode = trace.mode or "markers"
        size = trace.marker.size if isinstance(trace.marker.size, Real) else 6
        texts = trace.text if isinstance(trace.text, list | tuple) else [trace.text] * len(xs)
        font = float(trace.textfont.size or geo.font)
        positions = trace.textposition
        if not isinstance(positions, list | tuple):
            positions = [positions or "middle center"] * len(xs)
        for i, (x, y) in enumerate(zip(xs, ys, strict=False)):
            where = str(positions[i] if i < len(positions) else "middle center")
            if not (isinstance(x, Real) and isinstance(y, Real)):
                continue
            at = to_px(float(x), float(y))
            if at is None:
                continue
            px, py = at
            if "markers" in mode:
                r = size / 2
                markers.append((t_index, i, (px - r, py - r, px + r, py + r)))
            if "text" in mode and i < len(texts) and texts[i]:
                vertical, _, horizontal = where.partition(" ")
                gap = size / 2 + 2 if "markers" in mode else 0
                y_at = {"top": py - gap, "bottom": py + gap}.get(vertical, py)
                x_at = {"left": px - gap, "right": px + gap}.get(horizontal, px)
                box = text_box(
                    str(texts[i]), font, x_at, y_at,
                    {"left": "right", "right": "left"}.get(horizontal, "center"),
                    {"top": "bottom", "bottom": "top"}.get(vertical, "middle"),
                )  # fmt: skip
                labels.append((t_index, i, str(texts[i]), box))
    return labels, markers
