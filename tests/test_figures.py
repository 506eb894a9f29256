"""Regression tests of the plotly figures' specifications, and of the clear errors that the figures
and the widgets give for bad arguments."""

from __future__ import annotations

import json
import math

import numpy as np
import plotly.graph_objects as go
import pytest
import torch

from kvattn.config import PLDRConfig
from kvattn.course import explorers, plots
from kvattn.diagnostics import HeadProfile
from kvattn.pldr import GPT, PLDRLLM
from kvattn.symmetry import SymmetryProfile
from kvattn.train import History, SeedRuns


def test_error_bars_get_one_colour_even_when_markers_get_a_list():
    """Plotly gives error bars the markers' colour by default; a colour *list* is invalid for error
    bars (the browser logged "Invalid color specifier" and drew them black)."""
    fig = plots.points_with_errors(
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
        plots.points_with_errors(["a"], [1.0], title="t", yaxis="y").data[0].error_y.array is None
    )


# -- bad inputs: each kind raises a clear error before anything is drawn --------------------------

LINE = dict(title="t", xaxis="x", yaxis="y")
CONFIG = PLDRConfig(
    vocab_size=16, hidden_size=16, num_attention_heads=2, num_hidden_layers=3, A_dff=8
)


def _profile(label: str = "ReLU") -> SymmetryProfile:
    grid = torch.linspace(-1, 1, 3)
    return SymmetryProfile(
        label, grid, torch.zeros(3, 3), grid, 0.0, torch.tensor([2.0, -1.0]), torch.zeros(2)
    )


def test_mismatched_lengths_raise_instead_of_dropping_points():
    """Plotly drew only the first len(x) or len(y) points and said nothing."""
    with pytest.raises(ValueError, match=r"series 'a' has 2 values, expected 3 \(one value per x"):
        plots.line_plot([1, 2, 3], {"a": [1.0, 2.0]}, **LINE)
    with pytest.raises(ValueError, match=r"frame 'β=1' series 's' has 2 values, expected 3"):
        plots.line_slider([1, 2, 3], {}, {"β=1": {"s": [1, 2]}}, prefix="β", **LINE)
    with pytest.raises(ValueError, match=r"frame 'b' has series \['r'\], expected \['s'\]"):
        plots.line_slider([1, 2], {}, {"a": {"s": [1, 2]}, "b": {"r": [1, 2]}}, prefix="", **LINE)
    with pytest.raises(ValueError, match=r"loss of 'run' has 2 values, expected 3 \(one per step"):
        plots.loss_curves({"run": History(steps=[1, 2, 3], loss=[1.0, 0.5])}, title="t")
    with pytest.raises(ValueError, match=r"means has 2 values, expected 3 \(one per name\)"):
        plots.points_with_errors(["a", "b", "c"], [1.0, 2.0], title="t", yaxis="y")
    with pytest.raises(ValueError, match=r"errors has 1 values, expected 2"):
        plots.points_with_errors(["a", "b"], [1.0, 2.0], [0.1], title="t", yaxis="y")
    with pytest.raises(ValueError, match=r"colors has length 1, expected 2 \(one per name\)"):
        plots.points_with_errors(["a", "b"], [1.0, 2.0], colors=["red"], title="t", yaxis="y")
    with pytest.raises(ValueError, match=r"labels has length 1, expected 2 \(one per frame\)"):
        plots.slider(["a", "b"], ["a"], "p")
    grid = torch.arange(3.0)
    with pytest.raises(ValueError, match=r"panel 'p' has shape \(3, 4\), expected \(3, 3\)"):
        plots.heatmap_grid({"p": torch.zeros(3, 4)}, x=grid, y=grid, **LINE)
    B = torch.randn(2, 3, 3)
    with pytest.raises(ValueError, match=r"feature_names has length 2, expected 3"):
        explorers.interaction.figure(B, ["a", "b"], ["o", "p"])
    with pytest.raises(ValueError, match=r"output_names has length 1, expected 2 \(one per B_o\)"):
        explorers.interaction.figure(B, ["a", "b", "c"], ["o"])
    with pytest.raises(ValueError, match=r"target has shape \(2, 4, 4\), expected \(2, 3, 3\)"):
        explorers.interaction.figure(B, ["a", "b", "c"], ["o", "p"], torch.zeros(2, 4, 4))
    head = HeadProfile(0, 1, torch.eye(3), torch.zeros(3))
    with pytest.raises(ValueError, match=r"tokens has length 1, expected 3 \(one per row of E"):
        explorers.attention.figure([head], ["a"])


def test_empty_inputs_raise_a_clear_error():
    """They gave IndexError, AttributeError or plotly's complaint about make_subplots rows."""
    grid = torch.arange(3.0)
    for call, name in [
        (lambda: explorers.symmetry.figure([], _profile()), "profiles"),
        (lambda: explorers.slot.figure([], "t"), "reports"),
        (lambda: explorers.attention.figure([], []), "profiles"),
        (lambda: explorers.deductive.figure([]), "profiles"),
        (lambda: explorers.twirl.figure({}), "densities"),
        (lambda: plots.line_slider([1], {}, {}, prefix="", **LINE), "frames"),
        (lambda: plots.loss_curves({}, title="t"), "histories"),
        (lambda: plots.heatmap_grid({}, x=grid, y=grid, **LINE), "panels"),
        (lambda: plots.slider([], [], ""), "frame_names"),
        (lambda: plots.points_with_errors([], [], title="t", yaxis="y"), "names"),
    ]:
        with pytest.raises(ValueError, match=rf"^{name} is empty: nothing to show$"):
            call()
    # no series at all is an empty styled figure that a chapter adds its own traces to
    assert len(plots.line_plot([], {}, log_y=True, **LINE).data) == 0


def test_non_finite_and_out_of_domain_values_raise():
    with pytest.raises(ValueError, match=r"series 'a' must be finite, got nan at index 1"):
        plots.line_plot([1, 2], {"a": [1.0, math.nan]}, **LINE)
    with pytest.raises(ValueError, match=r"panel 'p' must be finite, got inf at index \(0, 1\)"):
        panel = torch.tensor([[0.0, math.inf], [0.0, 0.0]])
        plots.heatmap_grid({"p": panel}, x=[0, 1], y=[0, 1], **LINE)
    with pytest.raises(ValueError, match=r"x must be positive on a logarithmic axis, got 0.0 at"):
        plots.line_plot([0, 1, 2], {"a": [1, 2, 3]}, log_x=True, **LINE)
    with pytest.raises(ValueError, match=r"values must be positive on a logarithmic axis, got -1"):
        plots.log_axis(go.Figure(), "x", [-1.0, 1.0])
    with pytest.raises(ValueError, match=r"errors must be ≥ 0, got -0.1 at index 0"):
        plots.points_with_errors(["a"], [1.0], [-0.1], title="t", yaxis="y")
    with pytest.raises(TypeError, match=r"series 'a' must hold numbers, got a string 'abc'"):
        plots.line_plot([1, 2, 3], {"a": "abc"}, **LINE)
    with pytest.raises(
        ValueError, match=r"densities\[4\] has shape \(4, 2\), expected square matrices"
    ):
        explorers.twirl.figure({4: torch.zeros(4, 2)})
    with pytest.raises(ValueError, match=r"^output_names is empty: nothing to show$"):
        explorers.interaction.figure(torch.zeros(0, 3, 3), ["a", "b", "c"], [])
    with pytest.raises(ValueError, match=r"^B has shape \(2, 3, 4\), expected square matrices"):
        explorers.interaction.figure(torch.zeros(2, 3, 4), ["a", "b", "c"], ["o", "p"])
    with pytest.raises(ValueError, match=r"^B is a meta tensor: it has a shape but no values"):
        explorers.interaction.figure(torch.zeros(1, 3, 3, device="meta"), ["a", "b", "c"], ["o"])


def test_out_of_range_numbers_and_choices_raise():
    """ipywidgets clamped out-of-range slider values silently (β = 100 showed β = 20)."""
    grid = torch.arange(2.0)
    with pytest.raises(ValueError, match=r"^cols must be ≥ 1, got 0$"):
        plots.heatmap_grid({"p": torch.zeros(2, 2)}, x=grid, y=grid, cols=0, **LINE)
    with pytest.raises(ValueError, match=r"^height must be ≥ 1, got -5$"):
        plots.line_plot([1], {"a": [1]}, height=-5, **LINE)
    with pytest.raises(TypeError, match=r"^height must be an int, got str '400'$"):
        plots.line_plot([1], {"a": [1]}, height="400", **LINE)
    with pytest.raises(ValueError, match=r"^axis must be one of 'x', 'y'; got 'z'$"):
        plots.log_axis(go.Figure(), "z")
    with pytest.raises(ValueError, match=r"^beta must be in \[0.0501187, 19.9526\], got 100.0$"):
        explorers.symmetry.widget("swish", 100.0)
    with pytest.raises(ValueError, match=r"^beta must be in \[.*\], got nan$"):
        explorers.symmetry.widget("swish", math.nan)
    with pytest.raises(ValueError, match=r"^act must be one of 'identity', 'relu', .*; got 'tanh'"):
        explorers.symmetry.widget("tanh")
    with pytest.raises(ValueError, match=r"^rho must be in \[-0.9, 0.9\], got 0.95$"):
        explorers.symmetry.widget("swish", rho=0.95)
    with pytest.raises(ValueError, match=r"transforms\['swiglu'\] lacks \['swap'\]"):
        explorers.symmetry.widget(transforms={"swiglu": {"alphas": [1.0], "scaled": [0.1]}})
    with pytest.raises(ValueError, match="cloud's b"):
        explorers.symmetry.widget(cloud=(torch.zeros(3), torch.zeros(4), "unit"))
    with pytest.raises(ValueError, match=r"^rank must be in \[1, 64\], got 100$"):
        explorers.cost.widget(768, rank=100)
    with pytest.raises(ValueError, match=r"^width_factor must be in \[1, 8\], got 0$"):
        explorers.cost.widget(768, width_factor=0)
    with pytest.raises(ValueError, match=r"^d_model must be one of 64, 128, .*; got 100$"):
        explorers.cost.widget(100)
    with pytest.raises(ValueError, match=r"^first must be one of 'a', 'b'; got 'c'$"):
        explorers.paired.widget({"a": _runs([0, 1]), "b": _runs([0, 1])}, "c", "a")


def _runs(seeds: list[int]) -> SeedRuns:
    return SeedRuns(seeds, [10], [[3.0] for _ in seeds], 100)


class _Chars:
    """A stand-in for a SentencePiece processor: one token per visible character."""

    def encode(self, text: str) -> list[int]:
        return [ord(c) % 16 for c in text if c.isprintable() and not c.isspace()]


def test_bad_layer_head_and_slot_indices_name_the_valid_range():
    """They gave a bare TraitError ('Invalid selection: value not found') or were clamped. The
    explorers refuse what is not a kvattn model before they look at the indices, so the models
    are real (and tiny)."""
    torch.manual_seed(0)
    gpt, pldr = GPT(CONFIG).eval(), PLDRLLM(CONFIG).eval()
    with pytest.raises(ValueError, match=r"^layer must be in 0 … 2 \(number of layers: 3\), got 3"):
        explorers.attention.widget(gpt, _Chars(), "text", layer=3)
    with pytest.raises(ValueError, match=r"^head must be in 0 … 1 \(number of heads: 2\), got -1"):
        explorers.deductive.widget(pldr, _Chars(), ["a", "b"], head=-1)
    with pytest.raises(TypeError, match=r"^layer must be an int, got float 1.0$"):
        explorers.attention.widget(gpt, _Chars(), "text", layer=1.0)
    with pytest.raises(ValueError, match=r"^slot must be in 0 … 3 \(number of slots: 4\), got 4$"):
        explorers.slot.widget(None, None, torch.rand(4, 10), layer=0, slot=4)


def test_wrong_kinds_of_items_raise_a_type_error():
    with pytest.raises(TypeError, match=r"^profiles\[1\] must be a SymmetryProfile, got str$"):
        explorers.symmetry.figure([_profile(), "ReLU"], _profile())
    with pytest.raises(TypeError, match=r"^reference must be a SymmetryProfile, got NoneType$"):
        explorers.symmetry.figure([_profile()], None)
    with pytest.raises(TypeError, match=r"^frame_names must be a sequence, got int$"):
        plots.slider(3, [], "")
    with pytest.raises(TypeError, match=r"^series must be a mapping, got list$"):
        plots.line_plot([1, 2], [[1, 2]], **LINE)
    with pytest.raises(TypeError, match=r"^panels must be a mapping, got list$"):
        plots.heatmap_grid([torch.zeros(2, 2)], x=[0, 1], y=[0, 1], **LINE)


def test_explorers_refuse_what_would_mislead():
    """Unpaired seeds cannot be compared pairwise; one prompt copied twice showed a spread of 0."""
    with pytest.raises(ValueError, match=r"runs 'a' and 'b' used different seeds \(\[0, 1\] and"):
        explorers.paired.widget({"a": _runs([0, 1]), "b": _runs([2, 3])}, "a", "b")
    model = PLDRLLM(CONFIG).eval()
    with pytest.raises(ValueError, match=r"prompts must hold at least two prompts that encode to"):
        explorers.deductive.widget(model, _Chars(), ["only one", "  "])


def test_valid_inputs_still_draw_every_point():
    fig = plots.line_plot(torch.tensor([1.0, 10.0, 100.0]), {"a": [3, 2, 1]}, log_x=True, **LINE)
    assert list(fig.data[0].x) == [1.0, 10.0, 100.0] and list(fig.data[0].y) == [3.0, 2.0, 1.0]
    fig = explorers.symmetry.figure([_profile("a"), _profile("b")], _profile())
    assert [f.name for f in fig.frames] == ["0: a", "1: b"]


def test_symmetry_explorer_draws_the_input_contours_and_a_cloud():
    from kvattn.symmetry import symmetry_profile

    profiles = [symmetry_profile("silu", n=11, rho=r, mean=m) for r, m in [(0.0, 0.0), (0.6, 1.0)]]
    fig = explorers.symmetry.figure(
        profiles, profiles[0], labels=["independent", "ρ 0.6"], prefix="",
        cloud=([0.1, -0.2], [0.3, 0.4], "trained unit"),
    )  # fmt: skip
    contour = fig.frames[1].data[4]
    a = np.array([v for v in contour.y if v is not None])
    b = np.array([v for v in contour.x if v is not None])
    # the first 73 points are the 1σ contour: (a − μ, b − μ) has Mahalanobis radius 1 for ρ = 0.6
    da, db = a[:73] - 1.0, b[:73] - 1.0
    radius2 = (da**2 - 2 * 0.6 * da * db + db**2) / (1 - 0.36)
    assert radius2 == pytest.approx(np.ones(73), abs=2e-2)
    assert fig.data[-1].name == "trained unit" and list(fig.data[-1].y) == [0.1, -0.2]
    assert "ρ = 0.6, mean 1" in fig.frames[1].layout.title.text
    assert profiles[1].exchange < profiles[0].exchange  # correlated inputs are exchanged gently
    with pytest.raises(ValueError, match="labels"):
        explorers.symmetry.figure(profiles, profiles[0], labels=["one"])


def test_dose_response_draws_every_run_and_the_means_with_standard_errors():
    v = [[0.0, 0.2], [0.4, 0.6]]
    y = [[3.0, 3.2], [2.9, 3.3]]
    fig = plots.dose_response([0.5, 4.0], v, y, title="t")
    *seeds, means = fig.data
    assert len(seeds) == 2 and list(seeds[1].x) == [0.2, 0.6] and list(seeds[1].y) == [3.2, 3.3]
    assert list(means.x) == pytest.approx([0.1, 0.5]) and list(means.y) == pytest.approx([3.1, 3.1])
    assert list(means.error_x.array) == pytest.approx([0.1, 0.1])  # sd/√2 of two values 0.2 apart
    assert list(means.text) == ["β = 0.5", "β = 4"]
    with pytest.raises(ValueError, match="one per β"):
        plots.dose_response([1.0], v, y, title="t")
    with pytest.raises(ValueError, match="at least 2 seeds"):
        plots.dose_response([0.5, 4.0], [[0.1], [0.2]], [[3.0], [3.1]], title="t")
    with pytest.raises(ValueError, match="final has shape"):
        plots.dose_response([0.5, 4.0], v, [[3.0], [3.1]], title="t")


def test_deductive_explorer_has_a_colour_bar_per_panel_and_marks_what_a_model_lacks():
    from kvattn.diagnostics import DEDUCTIVE, DeductiveProfile

    gen = torch.Generator().manual_seed(0)
    full = {n: torch.randn(4, 4, generator=gen, dtype=torch.float64) for n in DEDUCTIVE}
    spread = {n: 0.1 * v.abs() for n, v in full.items()}
    trained = DeductiveProfile(
        0, 1, full, spread, dict.fromkeys(DEDUCTIVE, 2.0), dict.fromkeys(DEDUCTIVE, 0.3), "trained"
    )
    fixed = DeductiveProfile(
        0, 1, {"G_LM": full["G_LM"]}, {"G_LM": torch.zeros(4, 4, dtype=torch.float64)},
        {"G_LM": 0.0}, {"G_LM": 0.0}, "constant-G",
    )  # fmt: skip
    fig = explorers.deductive.figure([trained, fixed])
    assert [f.name for f in fig.frames] == ["0: trained L0 H1", "1: constant-G L0 H1"]
    first = fig.frames[0].data
    assert all(t.colorbar.thickness == 8 for t in first)  # every panel has its colour bar
    # the spread row has its own scale: its top is the largest spread, not the tensor's
    assert first[4].zmax == pytest.approx(float(spread["A"].max()))
    assert "trained: layer 0, head 1" in fig.frames[0].layout.title.text
    assert "A not computed" in fig.frames[1].layout.title.text
    assert fig.frames[1].data[0].showscale is False  # A of the constant-G model: blank
    assert "G_LM 0 | 0 | 0" in fig.frames[1].layout.title.text


def test_deductive_explorer_draws_a_positive_tensor_on_its_own_range():
    """Issue 31: A_LM and A_P (positive) were drawn on scales centred at 0, whose lower half no
    entry reaches; a tensor of both signs keeps the scale symmetric about 0."""
    from kvattn.diagnostics import DEDUCTIVE, DeductiveProfile

    gen = torch.Generator().manual_seed(0)
    first = {n: torch.randn(4, 4, generator=gen, dtype=torch.float64) for n in DEDUCTIVE}
    first["A_LM"] = 1.5 + torch.rand(4, 4, generator=gen, dtype=torch.float64)
    spread = {n: 0.1 * v.abs() for n, v in first.items()}
    orders = dict.fromkeys(DEDUCTIVE, 1.0)
    fig = explorers.deductive.figure([DeductiveProfile(0, 0, first, spread, orders, orders)])
    panels = dict(zip(DEDUCTIVE, fig.frames[0].data[:4], strict=True))
    a_lm = panels["A_LM"]
    assert a_lm.colorscale[0][1] == "#440154"  # viridis, sequential
    assert (a_lm.zmin, a_lm.zmax) == pytest.approx(
        (float(first["A_LM"].min()), float(first["A_LM"].max()))
    )
    a = panels["A"]
    assert a.zmin == pytest.approx(-a.zmax) and a.zmax == pytest.approx(first["A"].abs().max())
    assert explorers.deductive._colour_scale(torch.full((2, 2), 3.0))[1:] == pytest.approx(
        (3.0, 3.0), rel=1e-5
    )  # a constant positive tensor still gets a range plotly can draw


def _trajectories(steps=(0, 2, 4), layers=2) -> dict:
    """Trajectories shaped as kvattn.diagnostics.load_probes returns them (values made up)."""
    from kvattn.diagnostics import COLLAPSE_LAYER_MEASURES, COLLAPSE_MODEL_MEASURES

    n = len(steps)
    probes = {"probe_blocks": 4, "step": list(steps)}
    for k, name in enumerate(COLLAPSE_LAYER_MEASURES):
        probes[name] = [[10.0 ** -(i + k) * (j + 1) for j in range(layers)] for i in range(n)]
        probes[f"{name}_heads"] = [[[v, v] for v in row] for row in probes[name]]
    for name in COLLAPSE_MODEL_MEASURES:
        probes[name] = [0.5 / (i + 1) for i in range(n)]
    return probes


def test_collapse_trajectories_draw_a_line_per_layer_and_measure():
    probes = _trajectories()
    probes["A_sigma_ratio"][1][0] = None  # undefined there: a gap
    fig = plots.collapse_trajectories(probes)
    assert len(fig.data) == 5 * 2 + 3
    first = fig.data[0]
    assert first.name == "layer 0" and list(first.x) == [0, 2, 4]
    assert list(first.y) == [1.0, 0.1, 0.01]
    assert list(fig.data[1].y) == [2.0, 0.2, 0.02]  # layer 1
    sigma = fig.data[3 * 2]  # A_sigma_ratio, layer 0
    assert list(sigma.y) == [0.001, None, 1e-05]
    assert [t.showlegend for t in fig.data[:4]] == [True, True, False, False]
    assert [t.name for t in fig.data[-3:]] == [
        "Δloss, donor's G_LM (nats/token)",
        "greedy agreement, donor's G_LM",
        "Δloss / Δloss of G_LM = I",
    ]
    assert list(fig.data[-3].y) == [0.5, 0.25, 0.1667]
    assert fig.layout.yaxis.type == "log" and fig.layout.yaxis6.type != "log"
    assert "4 probe blocks" in fig.layout.title.text
    linear = plots.collapse_trajectories(_trajectories(layers=3), log_y=False)
    assert len(linear.data) == 5 * 3 + 3 and linear.layout.yaxis.type != "log"


@pytest.mark.parametrize(
    ("change", "error", "match"),
    [
        (lambda p: p.clear(), ValueError, "probes is empty"),
        (lambda p: p.pop("G_spread"), ValueError, "probes lack G_spread"),
        (lambda p: p.update(step=[]), ValueError, r"probes\['step'\] must be a non-empty list"),
        (lambda p: p.update(step=[0, 4, 2]), ValueError, r"probes\['step'\] must increase"),
        (lambda p: p.update(step=[0, -2, 4]), ValueError, r"probes\['step'\]\[1\] must be ≥ 0"),
        (lambda p: p["G_order_rms"].pop(), ValueError, "one entry per step"),
        (lambda p: p["G_order_rms"][2].pop(), ValueError, "has 1 layers, expected 2"),
        (lambda p: p["delta_loss"].pop(), ValueError, r"probes\['delta_loss'\] must be a list"),
        (
            lambda p: p["A_row_spread"][0].__setitem__(1, math.nan),
            ValueError,
            r"probes\['A_row_spread'\]\[0\]\[1\] must be a finite number or null, got nan",
        ),
        (lambda p: p["agreement"].__setitem__(0, "1"), ValueError, "finite number or null"),
    ],
)
def test_collapse_trajectories_refuse_malformed_input(change, error, match):
    probes = _trajectories()
    change(probes)
    with pytest.raises(error, match=match):
        plots.collapse_trajectories(probes)


def test_collapse_trajectories_refuse_what_is_not_a_mapping():
    with pytest.raises(TypeError, match="probes must be a mapping"):
        plots.collapse_trajectories([1, 2])


def test_run_curves_draw_each_run_on_its_own_x_and_the_threshold_across_all():
    fig = plots.run_curves(
        {"base": ([0, 1, 2, 3], [0.3, 0.2, 0.15, 0.1]), "batch 64": ([0, 2], [0.3, 0.05])},
        title="t",
        xaxis="tokens",
        yaxis="order",
        log_y=True,
        threshold=(0.01, "collapsed below"),
    )
    base, batch, line = fig.data
    assert list(base.x) == [0, 1, 2, 3] and list(batch.x) == [0, 2] and list(batch.y) == [0.3, 0.05]
    assert (
        list(line.x) == [0, 3] and list(line.y) == [0.01, 0.01] and line.name == "collapsed below"
    )
    assert line.line.dash == "dash" and fig.layout.yaxis.type == "log"
    no_line = plots.run_curves({"a": ([1, 2], [-1.0, 1.0])}, title="t", xaxis="x", yaxis="y")
    assert len(no_line.data) == 1 and no_line.layout.yaxis.type != "log"


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"curves": {}}, ValueError, "curves"),
        ({"curves": {"a": [1, 2, 3]}}, TypeError, r"curves\['a'\] must be a pair"),
        ({"curves": {"a": ([1, 2], [1.0])}}, ValueError, "one y per x"),
        ({"curves": {"a": ([1, 2], [1.0, math.nan])}}, ValueError, "finite"),
        (
            {"curves": {"a": ([1, 2], [0.5, 0.0])}},
            ValueError,
            r"^curves\['a'\] y must be positive on a logarithmic axis, got 0.0 at index 1$",
        ),
        ({"curves": {"a": ([], [])}}, ValueError, r"^curves\['a'\] has no points$"),
        ({"threshold": (0.0, "zero")}, ValueError, "threshold value"),
        ({"threshold": (0.1,)}, ValueError, r"threshold must be \(value, label\)"),
        ({"threshold": (math.inf, "inf")}, ValueError, "threshold value"),
    ],
)
def test_run_curves_refuse_malformed_input(kwargs, error, match):
    args = {"curves": {"a": ([1, 2], [0.5, 0.25])}, "log_y": True, **kwargs}
    with pytest.raises(error, match=match):
        plots.run_curves(**args, title="t", xaxis="x", yaxis="y")


def test_run_panels_keep_one_style_per_series_name_across_panels():
    """Small multiples (chapter 11's hunt, one panel per knob): a series name has one colour and
    one legend entry in every panel; a dashed series can share its companion's colour."""
    fig = plots.run_panels(
        {
            "base": {"first seed": ([0, 1], [0.3, 0.2]), "second seed": ([0, 1], [0.3, 0.1])},
            "rate": {"first seed": ([0, 2], [0.3, 1e-3]), "|γ|": ([0, 2], [1.0, 0.01])},
        },
        title="t",
        xaxis="tokens",
        yaxis="order",
        log_y=True,
        threshold=(0.01, "0.01"),
        dashed=["|γ|"],
        colors={"|γ|": "#0072B2"},
        cols=2,
    )
    first = [t for t in fig.data if t.name == "first seed"]
    assert len(first) == 2 and first[0].line.color == first[1].line.color
    assert [t.showlegend for t in first] == [True, False]
    gamma = next(t for t in fig.data if t.name == "|γ|")
    assert gamma.line.dash == "dash" and gamma.line.color == "#0072B2"
    second = next(t for t in fig.data if t.name == "second seed")
    assert second.line.color not in (first[0].line.color, None)
    lines = [t for t in fig.data if t.name == "0.01"]
    assert len(lines) == 2 and list(lines[1].x) == [0, 2] and list(lines[1].y) == [0.01, 0.01]
    assert [a.text for a in fig.layout.annotations] == ["base", "rate"]
    assert fig.layout.yaxis.type == "log" and fig.layout.yaxis2.type == "log"


@pytest.mark.parametrize(
    "panels, kwargs, error, match",
    [
        ({}, {}, ValueError, "panels"),
        ({"p": {}}, {}, ValueError, r"panels\['p'\]"),
        ({"p": {"a": [1, 2, 3]}}, {}, TypeError, r"panels\['p'\]\['a'\] must be a pair"),
        ({"p": {"a": ([1, 2], [1.0])}}, {}, ValueError, "one y per x"),
        ({"p": {"a": ([1, 2], [0.0, 1.0])}}, {"log_y": True}, ValueError, "positive"),
        ({"p": {"a": ([1], [1.0])}}, {"threshold": (0.0, "x"), "log_y": True}, ValueError, "thr"),
        ({"p": {"a": ([1], [1.0])}}, {"colors": {"a": "nope"}}, ValueError, "colour"),
        ({"p": {str(i): ([1], [1.0]) for i in range(8)}}, {}, ValueError, "more than the 7"),
    ],
)
def test_run_panels_refuse_malformed_input(panels, kwargs, error, match):
    with pytest.raises(error, match=match):
        plots.run_panels(panels, title="t", xaxis="x", yaxis="y", **kwargs)


def test_interval_bands_shade_each_interval_in_its_series_colour():
    """Each series is a band (upper, then lower filled to it) and a line, in the house colour;
    the reference is a dotted line at its value."""
    x = [1, 2, 3]
    fig = plots.interval_bands(
        x,
        {"silu": ([0.0, 0.1, 0.2], [-0.1, 0.0, 0.1], [0.1, 0.2, 0.3])},
        title="t",
        xaxis="step",
        yaxis="difference",
        reference=0.05,
    )
    upper, lower, line = fig.data
    assert upper.y == (0.1, 0.2, 0.3) and lower.y == (-0.1, 0.0, 0.1) and line.y == (0.0, 0.1, 0.2)
    assert lower.fill == "tonexty" and upper.fill is None
    assert lower.fillcolor == "rgba(213, 94, 0, 0.2)" and line.line.color == plots.COLORS["silu"]
    assert not upper.showlegend and not lower.showlegend and line.name == "silu"
    assert [shape.y0 for shape in fig.layout.shapes] == [0.05]
    assert fig.layout.shapes[0].line.dash == "dot"
    no_line = plots.interval_bands(
        x, {"other": (x, x, x)}, title="t", xaxis="x", yaxis="y", reference=None
    )
    assert no_line.layout.shapes == () and no_line.data[2].line.color == "#0072B2"


@pytest.mark.parametrize(
    "series, kwargs, error, match",
    [
        ({}, {}, ValueError, "series is empty"),
        ({"a": ([0.0], [0.0])}, {}, TypeError, "center, lower, upper"),
        ({"a": ([0.0, 0.0], [0.0], [0.0])}, {}, ValueError, "center has 2 values, expected 1"),
        ({"a": ([0.0], [0.1], [0.2])}, {}, ValueError, "outside its interval"),
        ({"a": ([0.0], [-0.1], [math.nan])}, {}, ValueError, "upper must be finite"),
        ({"a": ([0.0], [0.0], [0.0])}, {"reference": math.inf}, ValueError, "reference"),
        ({"a": ([0.0], [0.0], [0.0])}, {"reference": "0"}, TypeError, "reference"),
    ],
)
def test_interval_bands_refuse_bad_series(series, kwargs, error, match):
    with pytest.raises(error, match=match):
        plots.interval_bands([1.0], series, title="t", xaxis="x", yaxis="y", **kwargs)


def test_loss_curves_refuse_a_loss_a_log_axis_would_drop():
    """Plotly dropped a zero or negative loss from the logarithmic axis without a word; a loss is
    never negative, so there it is a bug in the input. A linear axis still draws it."""
    history = History(steps=[1, 2, 3], loss=[1.0, 0.0, 0.5])
    with pytest.raises(
        ValueError,
        match=r"^loss of 'run' must be positive on a logarithmic axis, got 0.0 at index 1$",
    ):
        plots.loss_curves({"run": history}, title="t")
    with pytest.raises(ValueError, match=r"loss of 'b' must be positive .* got -0.25 at index 0$"):
        plots.loss_curves({"a": History([1], [0.5]), "b": History([1], [-0.25])}, title="t")
    linear = plots.loss_curves({"run": history}, title="t", log_y=False)
    assert list(linear.data[0].y) == [1.0, 0.0, 0.5] and linear.layout.yaxis.type != "log"
    logged = plots.loss_curves({"run": History([1, 2], [1.0, 0.5])}, title="t")
    assert list(logged.data[0].y) == [1.0, 0.5] and logged.layout.yaxis.type == "log"
    with pytest.raises(TypeError, match=r"^histories\['run'\] must be a History \(steps, loss\)"):
        plots.loss_curves({"run": [1.0, 0.5]}, title="t")


def test_static_attention_explorer_refuses_an_empty_or_unsplit_prompt():
    """An empty prompt drew an empty figure; a string of tokens was split into characters."""
    empty = HeadProfile(0, 0, torch.zeros(0, 0), torch.zeros(0))
    with pytest.raises(ValueError, match=r"^tokens is empty: nothing to show$"):
        explorers.attention.figure([empty], [])
    head = HeadProfile(0, 1, torch.eye(3), torch.zeros(3))
    with pytest.raises(TypeError, match=r"^tokens must be a sequence, got str$"):
        explorers.attention.figure([head], "abc")
    broken = HeadProfile(0, 1, torch.full((3, 3), math.nan), torch.zeros(3))
    with pytest.raises(ValueError, match=r"^E of layer 0, head 1 must be finite, got nan at"):
        explorers.attention.figure([broken], ["a", "b", "c"])


def test_bad_inputs_fail_before_anything_is_drawn():
    """Each raised deep inside (AttributeError, IndexError, a numpy or matplotlib complaint, a
    TraitError) or was drawn silently (a β of NaN)."""
    grid = [0.0, 1.0]
    with pytest.raises(ValueError, match=r"^x and y must not be empty, got 0 x and 0 y values$"):
        plots.heatmap_grid({"p": torch.zeros(0, 0)}, x=[], y=[], **LINE)
    with pytest.raises(TypeError, match=r"^cloud must be \(a, b, name\), got \(\[0.1\], \[0.2\]\)"):
        explorers.symmetry.figure([_profile()], _profile(), cloud=([0.1], [0.2]))
    with pytest.raises(TypeError, match=r"^cloud must be \(a, b, name\)"):
        explorers.symmetry.widget(cloud=(torch.zeros(3), torch.zeros(3)))
    v, y = [[0.0, 0.2], [0.4, 0.6]], [[3.0, 3.2], [2.9, 3.3]]
    with pytest.raises(ValueError, match=r"^betas must be finite, got nan at index 0$"):
        plots.dose_response([math.nan, 4.0], v, y, title="t")
    with pytest.raises(TypeError, match=r"^betas must hold numbers"):
        plots.dose_response(["small", "large"], v, y, title="t")
    with pytest.raises(TypeError, match=r"^densities\[4\] must be a torch.Tensor, got list$"):
        explorers.twirl.figure({4: [[1.0, 0.0], [0.0, 1.0]]})
    with pytest.raises(TypeError, match=r"^results\[0\] must be a Mapping, got int$"):
        plots.benchmark_ratios([1])
    with pytest.raises(TypeError, match=r"^frame 'a' must be a mapping, got list$"):
        plots.line_slider(grid, {}, {"a": [1.0, 2.0]}, prefix="", **LINE)
    transform = {"alphas": [0.5, 2.0], "scaled": [0.1, 0.0], "swap": 0.3}
    with pytest.raises(
        ValueError,
        match=r"^transforms\['s'\]\['scaled'\] must be positive on a logarithmic axis, got 0.0",
    ):
        explorers.symmetry.widget(transforms={"s": transform})
    with pytest.raises(ValueError, match=r"^transforms\['s'\]\['swap'\] must be finite, got nan$"):
        explorers.symmetry.widget(
            transforms={"s": {**transform, "scaled": [1, 2], "swap": math.nan}}
        )
    from kvattn.mlp import GatedMLP

    with pytest.raises(ValueError, match=r"^inputs must have shape \(n ≥ 1, 4\), got \(0, 4\)$"):
        explorers.interaction.widget(
            GatedMLP(4, 6, 3), list("abcd"), list("xyz"), torch.zeros(0, 4)
        )
    for runs, error, match in [
        ({"a": _runs([]), "b": _runs([])}, ValueError, r"^runs\['a'\].seeds is empty"),
        ({"a": [3.0], "b": [3.1]}, TypeError, r"^runs\['a'\] must be a SeedRuns, got list$"),
        (
            {"a": SeedRuns([0], [10], [[]], 100), "b": _runs([0])},
            ValueError,
            r"^runs\['a'\] has a seed without validation losses",
        ),
        (
            {"a": SeedRuns([0], [10], [[math.nan]], 100), "b": _runs([0])},
            ValueError,
            r"^final losses of runs\['a'\] must be finite, got nan at index 0$",
        ),
    ]:
        with pytest.raises(error, match=match):
            explorers.paired.widget(runs, "a", "b")


def test_heatmap_grid_embeds_two_significant_digits_of_each_panel():
    """Chapter 4's four 61 × 61 panels at three decimals embedded 99 kB in its page."""
    fig = plots.heatmap_grid(
        {"p": [[1.234, -9.87], [0.04, 0.0]], "q": [[0.01234, 0.002], [0.0, 0.0]]},
        x=[0, 1], y=[0, 1], shared_scale=False, **LINE,
    )  # fmt: skip
    assert [list(r) for r in fig.data[0].z] == [[1.2, -9.9], [0, 0]]
    assert [list(r) for r in fig.data[1].z] == [[0.012, 0.002], [0, 0]]


def test_figures_take_the_nested_lists_they_accept_as_tensors():
    """heatmap_grid and interaction_explorer checked lists, then called tensor methods on them."""
    panel = [[1.0, -2.0], [0.5, 0.0]]
    fig = plots.heatmap_grid({"p": panel}, x=[0, 1], y=[0, 1], **LINE)
    assert fig.data[0].zmax == 2.0 and fig.data[0].zmin == -2.0
    as_tensor = plots.heatmap_grid({"p": torch.tensor(panel)}, x=[0, 1], y=[0, 1], **LINE)
    assert as_tensor.to_plotly_json() == fig.to_plotly_json()
    B = [[[1.0, 2.0], [0.0, 1.0]]]
    target = [[[1.0, 1.0], [1.0, 3.0]]]
    fig = explorers.interaction.figure(B, ["a", "b"], ["o"], target)
    assert fig.data[0].zmax == 3.0 and list(fig.data[1].z[0]) == [1.0, 1.0]  # sym(B_o)
    same = explorers.interaction.figure(torch.tensor(B), ["a", "b"], ["o"], torch.tensor(target))
    assert same.to_plotly_json() == fig.to_plotly_json()


# -- the second audit's plot cases (NX…): flags, log axes, names and the explorers' profiles ------


def _flag_calls(flag: object) -> list:
    """Every figure that takes a bool flag, called with ``flag`` in one of its flags."""
    grid = torch.arange(2.0)
    panel = {"p": torch.ones(2, 2)}
    frames = {"a": {"s": [1.0, 2.0]}}
    curves = {"a": ([1, 2], [0.5, 0.25])}
    return [
        (lambda: plots.line_plot([1, 2], {"a": [1, 2]}, log_x=flag, **LINE), "log_x"),
        (lambda: plots.line_plot([1, 2], {"a": [1, 2]}, log_y=flag, **LINE), "log_y"),
        (lambda: plots.loss_curves({"a": History([1], [0.5])}, title="t", log_y=flag), "log_y"),
        (lambda: plots.heatmap_grid(panel, x=grid, y=grid, symmetric=flag, **LINE), "symmetric"),
        (
            lambda: plots.heatmap_grid(panel, x=grid, y=grid, shared_scale=flag, **LINE),
            "shared_scale",
        ),
        (lambda: plots.line_slider([1, 2], {}, frames, prefix="", log_x=flag, **LINE), "log_x"),
        (lambda: plots.line_slider([1, 2], {}, frames, prefix="", log_y=flag, **LINE), "log_y"),
        (lambda: plots.run_curves(curves, log_y=flag, **LINE), "log_y"),
        (lambda: plots.collapse_trajectories(_trajectories(), log_y=flag), "log_y"),
        (lambda: explorers.twirl.figure({2: torch.eye(4)}, interleaved=flag), "interleaved"),
    ]


@pytest.mark.parametrize("flag", ["no", 0, 1, None, np.float64(1.0)])
def test_every_figure_flag_must_be_a_bool(flag):
    """NX01: line_plot(log_x='no') drew a logarithmic axis (any truthy value counted as True, and
    0 or '' as False)."""
    for call, name in _flag_calls(flag):
        with pytest.raises(TypeError, match=rf"^{name} must be a bool, got {type(flag).__name__}$"):
            call()
    for call, _ in _flag_calls(False):  # the bools themselves still draw
        assert isinstance(call(), go.Figure)


def test_line_plot_and_line_slider_refuse_what_a_log_axis_would_drop():
    """NX02: line_plot(log_y=True) kept a 0, which plotly does not draw (loss_curves and
    run_curves refused the same input)."""
    with pytest.raises(
        ValueError, match=r"^series 'a' must be positive on a logarithmic axis, got 0.0 at index 0$"
    ):
        plots.line_plot([1, 2, 3], {"a": [0.0, 1, 2]}, log_y=True, **LINE)
    with pytest.raises(ValueError, match=r"^series 'b' must be positive .*, got -1.0 at index 2$"):
        plots.line_plot([1, 2, 3], {"a": [1, 2, 3], "b": [1, 2, -1]}, log_y=True, **LINE)
    with pytest.raises(
        ValueError,
        match=r"^fixed series 'f' must be positive on a logarithmic axis, got 0.0 at index 1$",
    ):
        plots.line_slider(
            [1, 2], {"f": [1, 0]}, {"a": {"s": [1, 2]}}, prefix="", log_y=True, **LINE
        )
    with pytest.raises(ValueError, match=r"^frame 'b' series 's' must be positive .* at index 0$"):
        plots.line_slider(
            [1, 2], {}, {"a": {"s": [1, 2]}, "b": {"s": [0, 2]}}, prefix="", log_y=True, **LINE
        )
    # a linear axis draws them
    linear = plots.line_plot([1, 2, 3], {"a": [0.0, -1, 2]}, **LINE)
    assert list(linear.data[0].y) == [0.0, -1.0, 2.0]
    sliding = plots.line_slider([1, 2], {}, {"a": {"s": [0, -2]}}, prefix="", **LINE)
    assert list(sliding.frames[0].data[0].y) == [0.0, -2.0]


def test_points_with_errors_refuse_repeated_names_and_check_colours():
    """NX03: two points named 'a' shared one x and overlapped without a word. NX04: a colour
    plotly does not know gave its validator's page-long message."""
    with pytest.raises(ValueError, match=r"^names must be distinct: 'a' is at index 0 and 2 "):
        plots.points_with_errors(["a", "b", "a"], [1.0, 2.0, 3.0], title="t", yaxis="y")
    for colors, error, match in [
        ([None, 5], TypeError, r"^colors\[1\] must be a colour \(a str\) or None, got int 5$"),
        (
            ["red", "nocolour"],
            ValueError,
            r"^colors\[1\] must be a colour plotly knows .*'nocolour'",
        ),
        (["#12345", "red"], ValueError, r"^colors\[0\] must be a colour plotly knows .*'#12345'$"),
        ("ab", TypeError, r"^colors must be a sequence, got str$"),
    ]:
        with pytest.raises(error, match=match):
            plots.points_with_errors(["a", "b"], [1.0, 2.0], title="t", yaxis="y", colors=colors)
    # None in the list: that name's house colour (the default blue for a name without one)
    fig = plots.points_with_errors(
        ["swiglu", "zzz", "c"], [1.0, 2.0, 3.0], title="t", yaxis="y", colors=[None, None, "red"]
    )
    assert list(fig.data[0].marker.color) == ["#D55E00", "#0072B2", "red"]
    for call in [
        lambda: plots.line_plot([1], {"a": [1]}, colors={"a": 5}, **LINE),
        lambda: plots.line_slider([1], {}, {"f": {"a": [1]}}, prefix="", colors={"a": 5}, **LINE),
    ]:
        with pytest.raises(TypeError, match=r"^colors\['a'\] must be a colour \(a str\) or None"):
            call()


def test_dose_response_takes_only_positive_real_betas():
    """NX05: a β of True was labelled 'β = 1'. NX06: a negative β was drawn (Swish-β needs
    β > 0)."""
    v, y = [[0.0, 0.2], [0.4, 0.6]], [[3.0, 3.2], [2.9, 3.3]]
    with pytest.raises(TypeError, match=r"^betas must hold numbers, got bool True at index 0$"):
        plots.dose_response([True, 2], v, y, title="t")
    for betas, bad in [([-1, 2], "-1 at index 0"), ([0.5, 0.0], "0.0 at index 1")]:
        with pytest.raises(ValueError, match=rf"^betas must be > 0 \(a Swish-β\), got {bad}$"):
            plots.dose_response(betas, v, y, title="t")
    # numpy would read the str '4' as the number 4
    with pytest.raises(TypeError, match=r"^betas must hold numbers, got str '4' at index 1$"):
        plots.dose_response([0.5, "4"], v, y, title="t")


def test_loss_curves_need_increasing_steps():
    """NX07: steps [0, 0, 0] drew a vertical line."""
    with pytest.raises(
        ValueError, match=r"^steps of 'a' must increase, got 0.0 then 0.0 at index 1$"
    ):
        plots.loss_curves({"a": History(steps=[0, 0, 0], loss=[3.0, 2.0, 1.0])}, title="t")
    with pytest.raises(
        ValueError, match=r"^steps of 'b' must increase, got 5.0 then 2.0 at index 2$"
    ):
        plots.loss_curves(
            {"a": History([1], [1.0]), "b": History([1, 5, 2], [3.0, 2.0, 1.0])}, title="t"
        )


def test_collapse_trajectories_draw_an_exact_zero_at_a_marked_floor():
    """NX11: with log_y an exact 0 of a per-layer measure (collapse itself) was kept and plotly
    did not draw it: the point of collapse vanished from the figure. Now it is drawn at a floor
    one decade below the panel's smallest positive value, as a cross in the layer's colour whose
    legend and hover say 'exactly 0', where the layer's line stops; a negative value (no measure
    is negative) is refused."""
    probes = _trajectories()
    probes["G_order_rms"][2] = [0.0, 0.0]  # both layers collapse at the last step
    probes["A_row_spread"][1][1] = 0.0
    fig = plots.collapse_trajectories(probes)
    rms = [t for t in fig.data if t.xaxis == "x2" and t.legendgroup and "layer" in t.legendgroup]
    assert [list(t.y) for t in rms] == [[0.1, 0.01, None], [0.2, 0.02, None]]
    zeros = [t for t in fig.data if t.name and t.name.startswith("exactly 0")]
    assert len(zeros) == 2  # one per panel with zeros, one legend entry for them all
    assert [t.showlegend for t in zeros] == [True, False]
    # G_order_rms is 10^-(i + 1) (j + 1): its smallest positive value left, 0.01, sits in the
    # decade of 0.01, so the floor is 0.001
    assert zeros[0].xaxis == "x2" and list(zeros[0].x) == [4, 4] and list(zeros[0].y) == [1e-3] * 2
    assert list(zeros[0].text) == ["layer 0: exactly 0", "layer 1: exactly 0"]
    assert list(zeros[0].marker.color) == list(plots.LAYER_COLORS[:2])
    assert "drawn at %{y}" in zeros[0].hovertemplate and zeros[0].marker.symbol == "x"
    # A_row_spread is 10^-(i + 4) (j + 1): smallest positive 1e-6, floor 1e-7
    assert zeros[1].xaxis == "x5" and list(zeros[1].x) == [2] and list(zeros[1].y) == [1e-07]
    assert list(zeros[1].text) == ["layer 1: exactly 0"]
    # a linear axis draws the zeros themselves, and adds nothing
    linear = plots.collapse_trajectories(probes, log_y=False)
    assert len(linear.data) == 5 * 2 + 3
    assert list(linear.data[2].y) == [0.1, 0.01, 0.0] and list(linear.data[3].y) == [0.2, 0.02, 0.0]
    # a panel that is all zeros has no decade to go below: its floor is 1
    probes = _trajectories()
    probes["G_spread"] = [[0.0, 0.0] for _ in range(3)]
    fig = plots.collapse_trajectories(probes)
    (zeros,) = [t for t in fig.data if t.name and t.name.startswith("exactly 0")]
    assert zeros.xaxis == "x3" and list(zeros.y) == [1.0] * 6
    probes = _trajectories()
    probes["A_sigma_ratio"][0][1] = -0.5
    with pytest.raises(
        ValueError,
        match=r"^probes\['A_sigma_ratio'\]\[0\]\[1\] must be ≥ 0 on a logarithmic axis \(the "
        r"measure is a size\), got -0.5$",
    ):
        plots.collapse_trajectories(probes)
    assert list(plots.collapse_trajectories(probes, log_y=False).data[6].y) == [
        0.001,
        0.0001,
        1e-05,
    ]


def test_collapse_trajectories_without_zeros_are_drawn_as_before():
    """The drawn floor appears only where there is an exact 0: the shipped trajectories hold none,
    and their figures keep their traces."""
    fig = plots.collapse_trajectories(_trajectories())
    assert len(fig.data) == 5 * 2 + 3
    assert not any(t.name and t.name.startswith("exactly 0") for t in fig.data)


def _symmetry(**change) -> SymmetryProfile:
    """A well-formed profile on a 3-point grid, with ``change`` applied to its fields."""
    grid = torch.linspace(-1, 1, 3)
    fields = dict(
        label="ReLU", grid=grid, violation=torch.zeros(3, 3), gate=grid, exchange=0.0,
        alphas=torch.tensor([2.0, -1.0]), scale=torch.zeros(2),
    )  # fmt: skip
    return SymmetryProfile(**{**fields, **change})


@pytest.mark.parametrize(
    ("change", "error", "match"),
    [
        (  # NX23: symmetry_profile(extent=0)
            dict(grid=torch.zeros(3)),
            ValueError,
            r"^profiles\[1\] \('ReLU'\): grid must span an interval, got all values 0.0$",
        ),
        (  # NX20b: symmetry_profile(extent=nan)
            dict(violation=torch.full((3, 3), math.nan)),
            ValueError,
            r"^profiles\[1\] \('ReLU'\): violation must be finite, got nan at index \(0, 0\)$",
        ),
        (  # NX21: symmetry_profile(n=0)
            dict(grid=torch.zeros(0), violation=torch.zeros(0, 0), gate=torch.zeros(0)),
            ValueError,
            r"^profiles\[1\] \('ReLU'\): grid has 0 values, expected at least 2$",
        ),
        (
            dict(violation=torch.zeros(3, 2)),
            ValueError,
            r"^profiles\[1\] \('ReLU'\): violation has shape \(3, 2\), expected \(3, 3\)",
        ),
        (  # NX25: symmetry_profile(alphas=[0.5, 2.0])
            dict(alphas=[0.5, 2.0]),
            TypeError,
            r"^profiles\[1\] \('ReLU'\): alphas must be a torch.Tensor, got list$",
        ),
        (
            dict(alphas=torch.tensor([2.0, 0.0])),
            ValueError,
            r"^profiles\[1\] \('ReLU'\): alphas must be non-zero, got 0.0 at index 1$",
        ),
        (
            dict(scale=torch.tensor([0.1, math.inf])),
            ValueError,
            r"^profiles\[1\] \('ReLU'\): scale must be finite, got inf at index 1$",
        ),
        (
            dict(gate=None),
            ValueError,
            r"^profiles\[1\] \('ReLU'\) has no gate \(σ\(0\) ≠ 0\): the figure's middle panel",
        ),
        (
            dict(exchange=math.nan),
            ValueError,
            r"^profiles\[1\] \('ReLU'\): exchange must be a finite number, got nan$",
        ),
    ],
)
def test_symmetry_explorer_refuses_a_degenerate_profile(change, error, match):
    """NX23, NX20b, NX21, NX25: a degenerate grid gave an empty axis range, a NaN map a blank
    heat-map, an empty grid torch's max() complaint and a list of α a '>' TypeError."""
    with pytest.raises(error, match=match):
        explorers.symmetry.figure([_symmetry(), _symmetry(**change)], _symmetry())
    with pytest.raises(error, match=match.replace(r"profiles\[1\]", "reference")):
        explorers.symmetry.figure([_symmetry()], _symmetry(**change))


def test_attention_explorer_needs_one_row_and_column_of_e_per_token():
    """NX30: an E of 3 × 5 for 5 tokens was drawn against 5 row labels."""
    wide = HeadProfile(0, 0, torch.rand(3, 5), torch.rand(4))
    with pytest.raises(
        ValueError, match=r"^E of layer 0, head 0 has shape \(3, 5\), expected \(5, 5\)"
    ):
        explorers.attention.figure([wide], ["a", "b", "c", "d", "e"])


def _deductive(value: float = 1.0, label: str = ""):
    from kvattn.diagnostics import DEDUCTIVE, DeductiveProfile

    t = torch.full((4, 4), value)
    return DeductiveProfile(
        0, 1, dict.fromkeys(DEDUCTIVE, t), dict.fromkeys(DEDUCTIVE, t.abs()),
        dict.fromkeys(DEDUCTIVE, 0.1), dict.fromkeys(DEDUCTIVE, 0.1), label,
    )  # fmt: skip


def test_deductive_explorer_refuses_non_finite_tensors():
    """NX31: infinite tensors gave 'cannot convert float infinity to integer'. NX32: NaN
    tensors were drawn as blank panels."""
    for value, match in [
        (math.inf, r"^profiles\[1\] \(m, layer 0, head 1\): first\['A'\] must be finite, got inf"),
        (math.nan, r"^profiles\[1\] \(m, layer 0, head 1\): first\['A'\] must be finite, got nan"),
    ]:
        with pytest.raises(ValueError, match=match):
            explorers.deductive.figure([_deductive(), _deductive(value, "m")])
    bad = _deductive()
    bad.spread["A_P"] = torch.full((4, 4), -1.0)
    with pytest.raises(
        ValueError, match=r"^profiles\[0\] \(layer 0, head 1\): spread\['A_P'\] must"
    ):
        explorers.deductive.figure([bad])
    bad = _deductive()
    del bad.spread["G_LM"]
    with pytest.raises(ValueError, match=r"spread has tensors \['A', 'A_LM', 'A_P'\], expected"):
        explorers.deductive.figure([bad])


def _reachable(fig: go.Figure) -> list[str]:
    """The frame each slider step shows; every frame name must be distinct for all to show."""
    steps = [step.args[0][0] for step in fig.layout.sliders[0].steps]
    assert steps == [f.name for f in fig.frames]
    assert len(set(steps)) == len(steps), steps
    return steps


def test_slider_frames_get_distinct_names_only_when_theirs_collide():
    """NX33, NX45, NX46: frames named by output name, slot or (layer, head) collided, and plotly
    keys frames by name, so one slider entry showed another's frame. Where the names are
    distinct they stay as they were (the book's figures keep their names)."""
    B = torch.randn(2, 3, 3, generator=torch.Generator().manual_seed(0))
    fig = explorers.interaction.figure(B, ["a", "b", "c"], ["o", "o"])
    assert _reachable(fig) == ["0: o", "1: o"]
    assert [s.label for s in fig.layout.sliders[0].steps] == ["o", "o"]
    distinct = explorers.interaction.figure(B, ["a", "b", "c"], ["o", "p"])
    assert _reachable(distinct) == ["o", "p"]
    assert fig.frames[1].data == distinct.frames[1].data  # the second output's own matrix

    from kvattn.memories import SlotReport

    reports = [SlotReport(layer, 3, [("c", "a", "b", 0.5)], [("x", 1.5)]) for layer in (0, 1)]
    fig = explorers.slot.figure(reports, "t")
    assert _reachable(fig) == ["0: 3", "1: 3"]
    assert fig.frames[1].layout.title.text == "t: layer 1, slot 3"
    other = SlotReport(1, 4, [("c", "a", "b", 0.5)], [("x", 1.5)])
    assert _reachable(explorers.slot.figure([reports[0], other], "t")) == ["3", "4"]

    twice = [
        HeadProfile(0, 0, torch.eye(3), torch.rand(2)),
        HeadProfile(0, 0, torch.ones(3, 3) / 3, torch.rand(2)),
    ]
    fig = explorers.attention.figure(twice, ["a", "b", "c"])
    assert _reachable(fig) == ["0: layer 0, head 0", "1: layer 0, head 0"]
    assert list(fig.frames[1].data[0].z[0]) == [0.333, 0.333, 0.333]
    heads = [twice[0], HeadProfile(1, 0, torch.eye(3), torch.rand(2))]
    assert _reachable(explorers.attention.figure(heads, ["a", "b", "c"])) == [
        "layer 0, head 0",
        "layer 1, head 0",
    ]
    # frame labels that differ only as str and int
    fig = plots.line_slider([1], {}, {1: {"s": [1]}, "1": {"s": [2]}}, prefix="", **LINE)
    assert _reachable(fig) == ["0: 1", "1: 1"]


def test_interaction_explorer_takes_names_as_lists_of_str():
    """NX34: feature_names='abc' was read as three one-letter names."""
    B = torch.randn(2, 3, 3)
    with pytest.raises(TypeError, match=r"^feature_names must be a sequence, got str$"):
        explorers.interaction.figure(B, "abc", ["o", "p"])
    with pytest.raises(TypeError, match=r"^output_names\[1\] must be a str, got int$"):
        explorers.interaction.figure(B, ["a", "b", "c"], ["o", 1])
    with pytest.raises(TypeError, match=r"^feature_names\[0\] must be a str, got int$"):
        explorers.interaction.figure(B, [0, 1, 2], ["o", "p"])


def test_round_significant_keeps_two_digits_of_the_largest_entry_and_writes_whole_numbers_as_ints():
    """The deductive explorer's heat maps are embedded at two significant digits (chapter 9's
    page was over its size limit at three): as fine as the colour scale resolves."""
    from kvattn.course.plots.style import round_significant

    z = torch.tensor([[4.751, -0.184, 0.0], [-0.004, 1.0, 2.0]])
    assert round_significant(z, 2) == [[4.8, -0.2, 0], [0, 1, 2]]
    assert round_significant(torch.tensor([[1234.5, 5.0]]), 2) == [[1200, 0]]
    assert round_significant(torch.zeros(2, 2), 2) == [[0, 0], [0, 0]]
    assert json.dumps(round_significant(torch.tensor([-0.0001]), 2)) == "[-0.0001]"


def test_long_lines_embed_at_most_max_line_points():
    """A 3,000-step loss curve of five runs made chapter 4's full build weigh over 1 MB: a line
    keeps every k-th point and its last, at most MAX_LINE_POINTS, and short lines keep all."""
    from kvattn.course.plots.style import MAX_LINE_POINTS, thinned
    from kvattn.train import History

    assert list(thinned(5)) == [0, 1, 2, 3, 4]
    assert list(thinned(MAX_LINE_POINTS)) == list(range(MAX_LINE_POINTS))
    for n in (MAX_LINE_POINTS + 1, 3000, 12_345):
        keep = thinned(n)
        assert len(keep) <= MAX_LINE_POINTS and keep[0] == 0 and keep[-1] == n - 1
        assert len(set(np.diff(keep[:-1]))) == 1  # evenly spaced but for the last
    steps = list(range(1, 3001))
    loss = [1.0 / s for s in steps]
    history = History(steps=steps, loss=loss)
    fig = plots.loss_curves({"a": history}, title="t")
    x, y = list(fig.data[0].x), list(fig.data[0].y)
    assert len(x) <= MAX_LINE_POINTS and (x[0], x[-1]) == (1, 3000) and isinstance(x[0], int)
    assert y[-1] == pytest.approx(1 / 3000, abs=1e-5)  # the last point, to five decimals
    line = plots.line_plot(steps, {"a": loss}, title="t", xaxis="x", yaxis="y")
    assert list(line.data[0].x) == [float(v) for v in x]


def test_heatmap_panels_on_their_own_scales_get_colour_bars_and_positive_ones_their_range():
    """Issue 31: chapter 7's A_LM and A_P (positive) were drawn on scales centred at 0 with no
    colour bar; each panel of its own scale now has a bar, and a positive one a sequential
    scale over its range."""
    fig = plots.heatmap_grid(
        {"pos": [[1.0, 2.0], [3.0, 4.0]], "mixed": [[-1.0, 2.0], [0.0, 1.0]]},
        x=[0, 1], y=[0, 1], shared_scale=False, **LINE,
    )  # fmt: skip
    pos, mixed = fig.data
    assert pos.colorscale[0][1] == "#440154" and (pos.zmin, pos.zmax) == (1.0, 4.0)
    assert mixed.colorscale[0][1] == "rgb(5,48,97)" and (mixed.zmin, mixed.zmax) == (-2.0, 2.0)
    assert pos.showscale and mixed.showscale
    assert pos.colorbar.x < mixed.colorbar.x  # each beside its own panel
    shared = plots.heatmap_grid({"a": [[1.0]], "b": [[2.0]]}, x=[0], y=[0], **LINE)
    assert [t.showscale for t in shared.data] == [True, False]


def test_symmetry_explorer_embeds_two_significant_digits_of_each_frame():
    """Chapter 4's two symmetry explorers (50 and 36 frames of a 61 × 61 map) at three decimals
    kept its full-mode page at the 800 KiB limit."""
    from kvattn import symmetry
    from kvattn.course.plots.style import _round, round_significant

    profile = symmetry.symmetry_profile("silu")
    fig = explorers.symmetry.figure([profile], profile)
    z = [list(row) for row in fig.frames[0].data[0].z]
    assert z == round_significant(profile.violation, 2)
    assert z != _round(profile.violation, 3)  # coarser than before, as fine as the colours
