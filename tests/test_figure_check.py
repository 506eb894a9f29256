"""The figure check (kvattn.course.plots.legibility.check_figure, issue 38): it fails on figures a
reader cannot read (a log axis with one labelled tick, overlapping labels, a label on a marker, a
colour bar over the next panel, a framed figure clipped by its first frame's range, a widget image
whose text is too small), the course's plotting helpers and live explorers pass it, and
``KVATTN_FIGURE_CHECK`` installs it on every figure shown."""

from __future__ import annotations

import io
import warnings

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import plotly.graph_objects as go
import pytest
import torch
from plotly.subplots import make_subplots

from kvattn import symmetry
from kvattn.course import explorers, plots
from kvattn.course.plots.legibility import (
    FigureCheckError,
    FigureCheckWarning,
    check_figure,
    figure_problems,
    install_figure_check,
)
from kvattn.experiments import load_shipped
from kvattn.memories import SlotReport
from kvattn.train import SeedRuns

LINE = dict(title="t", xaxis="x", yaxis="y")


@pytest.fixture(autouse=True)
def _closed():
    yield
    plt.close("all")
    install_figure_check("0")


# -- bad figures fail ----------------------------------------------------------------------------


def test_a_plotly_log_axis_with_one_labelled_tick_fails():
    """Chapter 2's truncation figure: a test error between 0.009 and 0.03 on a log axis with one
    label a decade showed only "0.01"."""
    fig = go.Figure(go.Scatter(x=[1, 2, 3], y=[0.009, 0.012, 0.03]))
    fig.update_yaxes(type="log", dtick=1)
    with pytest.raises(FigureCheckError, match=r"log axis y shows 1 labelled tick\(s\) \(1e-2\)"):
        check_figure(fig)
    fig.update_yaxes(tickvals=[0.01, 0.02], ticktext=["0.01", "0.02"])
    assert figure_problems(fig) == []


def test_a_matplotlib_log_axis_with_one_labelled_tick_fails():
    fig, ax = plt.subplots()
    ax.semilogy([1, 2], [0.006, 0.04])
    ax.set_ylim(0.005, 0.05)
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    assert any("log y axis" in p and "1 labelled" in p for p in figure_problems(fig))
    ax.set_ylim(0.005, 0.5)
    assert figure_problems(fig) == []


def test_overlapping_labels_fail_in_both_libraries():
    fig = go.Figure(
        go.Scatter(
            x=[1, 1.01, 2], y=[1, 1.0, 2], mode="markers+text", text=["lr 1e-2", "lr 3e-2", "c"],
            textposition="top center",
        )
    )  # fmt: skip
    problems = figure_problems(fig)
    assert any(
        "labels overlap: point label 'lr 1e-2' and point label 'lr 3e-2'" in p for p in problems
    )
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    ax.text(0.5, 0.5, "first label")
    ax.text(0.52, 0.5, "second label")
    assert figure_problems(fig) == ["labels overlap: text 'first label' and text 'second label'"]


def test_a_label_printed_on_its_marker_fails_and_placing_it_beside_passes():
    """Chapter 5's dose-response printed β on the marker."""
    fig = go.Figure(
        go.Scatter(
            x=[0.0, 1.0, 2.0], y=[0.0, 1.0, 0.5], mode="markers+text", text=["β = 1"] * 3,
            textposition="middle center", marker=dict(size=12),
        )
    )  # fmt: skip
    assert any("printed on its marker" in p for p in figure_problems(fig))
    assert figure_problems(plots.place_point_labels(fig)) == []


def test_a_colour_bar_over_the_next_panel_fails():
    """Chapter 7: the colour-bar labels of a panel ran over the next panel."""
    fig = make_subplots(rows=1, cols=3, horizontal_spacing=0.01)
    for c in (1, 2, 3):
        fig.add_trace(
            go.Heatmap(z=[[-0.00123, 1.0], [2.0, 3.0]], colorbar=dict(x=c / 3 - 0.01)), 1, c
        )
    assert any("colour bar" in p for p in figure_problems(fig))
    grid = plots.heatmap_grid(
        {n: torch.randn(6, 6) * 1e-3 for n in ("A0", "A", "A_LM", "A_P", "G_LM")},
        x=torch.arange(6), y=torch.arange(6), cols=5, shared_scale=False, **LINE,
    )  # fmt: skip
    assert figure_problems(grid) == []


def test_labels_placed_by_axis_domain_or_paper_are_checked():
    """Chapter 4: ``add_hline`` labels its line at "x domain" (a fraction of the axis's
    domain), which the check took for an axis name and crashed on; a label is now placed in
    whatever reference plotly reads ("paper", "x2 domain", "y2"), each coordinate on its own."""
    from kvattn.course.plots.geometry import PlotlyGeometry, data_to_px

    fig = make_subplots(rows=1, cols=2)
    for c in (1, 2):
        fig.add_trace(go.Scatter(x=[0.1, 10.0], y=[0.0, 2.0]), 1, c)
    fig.update_xaxes(type="log", row=1, col=2)
    fig.add_hline(y=1.0, annotation_text="ReLU", row=1, col=1)
    fig.add_hline(y=1.0, annotation_text="SiLU", row=1, col=2)  # same height, other panel
    fig.add_vline(x=1.0, annotation_text="β = 1", row=1, col=2)  # x on a log axis, y domain
    fig.add_annotation(text="note", x=0.5, y=1.5, xref="paper", yref="y", showarrow=False)
    assert figure_problems(fig) == []
    fig.add_hline(y=1.02, annotation_text="GELU", row=1, col=2)
    assert figure_problems(fig) == ["labels overlap: annotation 'SiLU' and annotation 'GELU'"]
    geo = PlotlyGeometry(fig, 688.0)
    x0, x1 = fig.layout.xaxis2.domain
    (left, top), (right, bottom) = geo.px(x0, 1), geo.px(x1, 0)
    assert data_to_px(geo, fig, "x2 domain", "y2 domain")(1, 0) == pytest.approx((right, bottom))
    assert data_to_px(geo, fig, "paper", "y2 domain")(0, 1) == pytest.approx((geo.left, top))
    x, _ = data_to_px(geo, fig, "x2", "y2")(1.0, 1.0)  # 10^0 in the middle of 10^-1 … 10^1
    assert x == pytest.approx((left + right) / 2)
    assert data_to_px(geo, fig, "x2", "y2")(-1.0, 1.0) is None  # off a log axis


def test_a_framed_figure_clipped_by_its_first_frame_fails():
    """Chapter 4 §4.4.1: E_sc's y range came from the first frame and cut off the others."""
    fig = go.Figure(go.Scatter(x=[1, 2], y=[0.0, 0.5]))
    fig.frames = [go.Frame(data=[go.Scatter(y=[0.0, 2.0])], traces=[0], name="b")]
    assert any("first frame" in p for p in figure_problems(fig))
    fig.update_yaxes(range=[0, 1])
    assert any("cuts off" in p for p in figure_problems(fig))
    fig.update_yaxes(range=[-0.1, 2.1])
    assert figure_problems(fig) == []


def test_the_interaction_explorer_holds_every_outputs_eigenvalues():
    """Chapter 3: the eigenvalue axis took its range from the first output and clipped the
    others' bars."""
    B = torch.randn(3, 4, 4, generator=torch.Generator().manual_seed(0))
    B[1] *= 5
    for target in (None, torch.zeros(3, 4, 4)):
        fig = explorers.interaction.figure(B, list("abcd"), ["o", "p", "q"], target)
        assert figure_problems(fig) == []


def test_the_deductive_explorers_colour_bars_stay_beside_their_panels():
    """Chapters 7 and 9: each colour bar's labels ("-1.2e-05" at 9 px) ran over the next panel,
    at every scale of tensor; a constant-G model's blank panels included."""
    from kvattn.diagnostics import DEDUCTIVE, DeductiveProfile

    gen = torch.Generator().manual_seed(0)
    for scale in (1.23e-5, 1.23e-3, 0.37, 123.0):
        first = {
            n: scale * torch.randn(8, 8, generator=gen, dtype=torch.float64) for n in DEDUCTIVE
        }
        first["A_LM"] = first["A_LM"].abs() + scale  # positive: its own sequential range
        spread = {n: 0.1 * v.abs() for n, v in first.items()}
        order = dict.fromkeys(DEDUCTIVE, 1.0)
        fixed = DeductiveProfile(
            0, 0, {"G_LM": first["G_LM"]}, {"G_LM": spread["G_LM"]}, {"G_LM": 0.0}, label="c"
        )
        for profile in (DeductiveProfile(0, 0, first, spread, order, order), fixed):
            assert figure_problems(explorers.deductive.figure([profile])) == [], scale


def test_small_text_in_a_widget_image_fails():
    """Chapter 4's live explorer: four panels in a 1,065 px image shrunk to the column."""
    fig, axes = plt.subplots(1, 4, figsize=(14.8, 3.4), dpi=72)
    for ax in axes:
        ax.plot([0, 1], [0, 1])
    assert any("px on the page" in p for p in figure_problems(fig, min_text_px=10))
    fig, axes = plots.widget_axes(4)
    for ax in axes:
        ax.plot([0, 1], [0, 1])
    fig.tight_layout()
    assert figure_problems(fig, min_text_px=10) == []


def test_check_figure_refuses_what_is_not_a_figure():
    with pytest.raises(TypeError, match="plotly or a matplotlib figure"):
        check_figure({"data": []})


# -- the course's helpers pass --------------------------------------------------------------------


def test_log_ticks_label_at_least_two_values_on_any_range():
    for low, high in [(0.009, 0.03), (0.011, 0.019), (0.25, 4.0), (2e-4, 8e-4), (3.0, 3.3)]:
        ticks = plots.log_ticks(low, high)
        assert len(ticks) >= 2 and all(low <= t <= high for t in ticks), (low, high, ticks)
    assert plots.log_ticks(1e-3, 0.5) is None  # two decades: one label a decade


def test_the_plotting_helpers_draw_legible_figures():
    dose = load_shipped("symmetry_contrast").dose_response
    betas = [0.1, 0.2, 0.5, 1.0, 1.7, 3.0, 5.0, 10.0, 20.0]
    swish = [symmetry.symmetry_profile("swish", beta=b) for b in betas]
    alphas = torch.tensor([-2.0, -1.0, -0.5, 0.25, 0.5, 2.0, 4.0], dtype=torch.float64)
    inputs = [
        symmetry.symmetry_profile("silu", alphas=alphas, rho=r, mean=m)
        for r, m in [(-0.6, 0.0), (0.0, 0.0), (0.598355, -1.87229)]
    ]
    ds = np.array([64, 128, 256, 512, 1024, 2048, 4096, 8192])
    figures = {
        "line, within a decade": plots.line_plot(
            [1, 2, 3], {"a": [0.03, 0.012, 0.009]}, log_y=True, **LINE
        ),
        "dose-response": plots.dose_response(dose.betas, dose.violation, dose.final, title="t"),
        "symmetry, Swish-β": explorers.symmetry.figure(swish, symmetry.symmetry_profile("gelu")),
        "symmetry, inputs": explorers.symmetry.figure(
            inputs, inputs[1], labels=["a", "b", "c"], prefix="",
            cloud=(np.linspace(-3, 3, 30), np.linspace(3, -3, 30), "unit"),
        ),
        "line slider": plots.line_slider(
            ds, {"kv": ds * 8.0}, {str(r): {"rank r": ds * 8.0 * r} for r in (1, 4, 64)},
            prefix="r = ", log_x=True, log_y=True, **LINE,
        ),
        "run panels": plots.run_panels(
            {"a": {"s": ([0, 1, 2], [0.02, 0.015, 0.011])}, "b": {"s": ([0, 1], [0.03, 0.01])}},
            log_y=True, threshold=(0.012, "0.012"), **LINE,
        ),
    }  # fmt: skip
    problems = {name: figure_problems(fig) for name, fig in figures.items()}
    assert problems == {name: [] for name in figures}
    title = figures["symmetry, inputs"].frames[-1].layout.title.text
    assert title.endswith("(ρ = 0.598, mean -1.87)")  # three significant digits


def _live_images(monkeypatch) -> list:
    images = []
    monkeypatch.setattr(explorers._live, "display", images.append)
    return images


def test_the_live_explorers_draw_legible_images(monkeypatch):
    """Each of these live faces draws through savefig, which the installed check watches: an
    illegible drawing raises instead of reaching the page."""
    from kvattn.mlp import GatedMLP

    images = _live_images(monkeypatch)
    monkeypatch.setattr(
        explorers.slot, "slot_report",
        lambda *a: SlotReport(0, 3, [("…ctx", "a", "b", 0.5)], [("▁x", 1.27), ("▁yy", 1.25)]),
    )  # fmt: skip
    monkeypatch.setattr(explorers.slot, "display", lambda _: None)
    assert install_figure_check("1")
    transforms = {
        "swiglu": {"alphas": [0.25, 0.5, 2.0, 4.0], "scaled": [3.1, 3.0, 3.0, 3.2], "swap": 3.4},
        "reglu": {"alphas": [0.25, 0.5, 2.0, 4.0], "scaled": [3.0, 3.0, 3.0, 3.0], "swap": 3.3},
    }
    explorers.symmetry.widget("swish", 1.0, rho=0.6, mean=-1.9, transforms=transforms,
                              cloud=(torch.randn(30), torch.randn(30), "unit 3"))  # fmt: skip
    explorers.symmetry.widget("relu")
    explorers.slot.widget(None, None, torch.rand(8, 10), layer=0, slot=3)
    explorers.cost.widget(768)
    runs = {n: SeedRuns([0, 1, 2], [10], [[3.0 + i / 10] for i in range(3)], 100) for n in "ab"}
    explorers.paired.widget(runs, "a", "b")
    names = [f"feature {i}" for i in range(4)]
    explorers.interaction.widget(GatedMLP(4, 6, 3), names, ["x", "y", "z"], torch.randn(2, 4))
    assert len(images) == 6


class _Chars:
    """A stand-in for a SentencePiece processor: one token per visible character."""

    def encode(self, text: str) -> list[int]:
        return [ord(c) % 16 for c in text if c.isprintable() and not c.isspace()]

    def id_to_piece(self, i: int) -> str:
        return "▁" + chr(ord("a") + i) * 3

    def decode(self, ids: list[int]) -> str:
        return "".join(map(self.id_to_piece, ids))


def test_the_model_explorers_draw_legible_images(monkeypatch, capsys):
    """Chapters 6, 7 and 9: the attention explorer's token labels were 7 px on the page and the
    deductive explorer's image, 850 px wide, was shrunk to the column and its titles to 6.5 px.
    A prompt as long as the context and a constant-G model (three blank panels) included."""
    from kvattn.ablations import constant_g_from
    from kvattn.config import PLDRConfig
    from kvattn.pldr import GPT, PLDRLLM

    images = _live_images(monkeypatch)
    cfg = PLDRConfig(
        vocab_size=16, hidden_size=16, num_attention_heads=2, num_hidden_layers=2,
        num_reslayerA=1, A_dff=8, max_position_embeddings=32,
    )  # fmt: skip
    torch.manual_seed(0)
    gpt, pldr = GPT(cfg).eval(), PLDRLLM(cfg).eval()
    G = [torch.randn(2, 8, 8) for _ in range(2)]
    assert install_figure_check("1")
    explorers.attention.widget(gpt, _Chars(), "a cat", layer=1, head=1)
    explorers.attention.widget(gpt, _Chars(), "the quick brown fox jumps over the lazy dog" * 2)
    explorers.deductive.widget(pldr, _Chars(), ["a cat", "a dog", "the cow"])
    explorers.deductive.widget(constant_g_from(pldr, G).eval(), _Chars(), ["a cat", "a dog"])
    assert len(images) == 4
    printed = capsys.readouterr().out
    assert "sees only its first 32" in printed
    assert max(len(line) for line in printed.splitlines() if "tensor" in line) <= 80
    assert "stage ratios of the relative spread: A→A_LM" in printed


# -- the hook --------------------------------------------------------------------------------------


def _one_tick() -> go.Figure:
    fig = go.Figure(go.Scatter(x=[1, 2], y=[0.011, 0.019]), layout=dict(title="bad"))
    return fig.update_yaxes(type="log", dtick=1)


def test_the_installed_check_raises_or_warns_when_a_figure_is_shown():
    bad = _one_tick()
    assert install_figure_check("1")
    with pytest.raises(FigureCheckError, match="figure 'bad' is not legible"):
        bad._repr_mimebundle_()
    with pytest.raises(FigureCheckError):
        bad.show(renderer="json")
    fig, ax = plt.subplots()
    ax.text(0.5, 0.5, "one")
    ax.text(0.5, 0.5, "two")
    with pytest.raises(FigureCheckError, match="labels overlap"):
        fig.savefig(io.BytesIO(), format="png")
    assert install_figure_check("warn")
    with pytest.warns(FigureCheckWarning, match="0 labelled tick"):
        bad._repr_mimebundle_()
    assert not install_figure_check("0")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        bad._repr_mimebundle_()  # unchecked again
    with pytest.raises(ValueError, match="KVATTN_FIGURE_CHECK must be one of"):
        install_figure_check("yes please")


def test_importing_plots_installs_the_check_when_the_environment_asks(tmp_path):
    import subprocess
    import sys

    code = (
        "import plotly.graph_objects as go, kvattn.course.plots\n"
        "f = go.Figure(go.Scatter(x=[1, 2], y=[0.011, 0.019])).update_yaxes(type='log', dtick=1)\n"
        "f._repr_mimebundle_()\n"
    )
    env = {**__import__("os").environ, "KVATTN_FIGURE_CHECK": "1"}
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert run.returncode == 1 and "FigureCheckError" in run.stderr
    env["KVATTN_FIGURE_CHECK"] = "0"
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


def test_signed_heat_maps_follow_the_colour_convention():
    """book/notation.md: red positive, blue negative, white 0, on a scale symmetric about 0."""
    signed = torch.tensor([[-2.0, 1.0], [0.5, 0.0]])
    grid = plots.heatmap_grid({"a": signed, "b": -signed}, x=[0, 1], y=[0, 1], **LINE)
    own = plots.heatmap_grid({"a": signed}, x=[0, 1], y=[0, 1], shared_scale=False, **LINE)
    profile = symmetry.symmetry_profile("silu", n=11)
    maps = [*grid.data, *own.data, explorers.symmetry.figure([profile], profile).data[0]]
    for heat in maps:
        assert heat.colorscale[0][1] == "rgb(5,48,97)"  # RdBu_r: blue at the low end
        assert heat.colorscale[-1][1] == "rgb(103,0,31)"  # red at the high end
        assert heat.zmin == -heat.zmax
    assert plots.SIGNED_SCALE == "RdBu_r"
