"""kvattn.course.plots.estimates.forest: rows in order, asymmetric intervals, the equivalence
band, and bad input refused before anything is drawn."""

from __future__ import annotations

import pytest

from kvattn.course.plots.estimates import forest


def test_forest_draws_each_interval_and_the_band():
    fig = forest(
        ["silu 1,000", "gelu 1,000"],
        [0.01, -0.002],
        [0.005, -0.01],
        [0.02, 0.004],
        band=0.01,
        title="t",
        xaxis="x",
    )
    (points,) = fig.data
    assert list(points.y) == ["silu 1,000", "gelu 1,000"]
    assert list(points.error_x.array) == pytest.approx([0.01, 0.006])
    assert list(points.error_x.arrayminus) == pytest.approx([0.005, 0.008])
    band = [s for s in fig.layout.shapes if s.type == "rect"]
    assert len(band) == 1 and (band[0].x0, band[0].x1) == (-0.01, 0.01)
    assert fig.layout.yaxis.autorange == "reversed"  # the first row on top
    assert points.marker.color[0] != points.marker.color[1]  # the house colours of silu, gelu


def test_forest_without_band_draws_only_the_zero_line():
    fig = forest(["a", "b"], [0.0, 1.0], [-1.0, 0.5], [1.0, 2.0], band=None, title="t", xaxis="x")
    assert [s.type for s in fig.layout.shapes] == ["line"]


@pytest.mark.parametrize(
    ("args", "band", "message"),
    [
        ((["a"], [2.0], [0.0], [1.0]), 0.01, "outside"),
        ((["a", "a"], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0]), 0.01, "overlap"),
        ((["a"], [0.0, 1.0], [0.0], [0.0]), 0.01, "means"),
        ((["a"], [0.0], [0.0], [0.0]), 0.0, "band"),
        ((["a"], [float("nan")], [0.0], [0.0]), 0.01, "means"),
    ],
)
def test_forest_refuses_bad_input(args, band, message):
    with pytest.raises(ValueError, match=message):
        forest(*args, band=band, title="t", xaxis="x")
