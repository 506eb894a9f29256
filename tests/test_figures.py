"""Regression tests of the plotly figures' specifications."""

from __future__ import annotations

from kvattn import figures


def test_error_bars_get_one_colour_even_when_markers_get_a_list():
    """Plotly gives error bars the markers' colour by default; a colour *list* is invalid for error
    bars (the browser logged "Invalid color specifier" and drew them black)."""
    fig = figures.points_with_errors(
        ["swiglu", "bilinear"],
        [3.2, 3.1],
        [0.01, 0.02],
        title="t",
        yaxis="y",
        colors=["red", "blue"],
    )
    trace = fig.data[0]
    assert list(trace.marker.color) == ["red", "blue"]
    assert isinstance(trace.error_y.color, str)
    assert list(trace.error_y.array) == [0.01, 0.02]
    assert (
        figures.points_with_errors(["a"], [1.0], title="t", yaxis="y").data[0].error_y.array is None
    )
