"""Tests for :mod:`kvattn.course.env`: fast mode, seeding, device choice and the book's plotly
renderer."""

from __future__ import annotations

import random
import sys
import types

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
import pytest
import torch
from plotly.io.base_renderers import MimetypeRenderer

from kvattn.course import env


@pytest.fixture
def restore_renderer():
    """setup()/use_book_renderer() change plotly's global default; put it back afterwards."""
    old = pio.renderers.default
    yield
    pio.renderers.default = old


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1", True),
        ("true", True),
        ("TRUE", True),
        (" yes ", True),
        ("0", False),
        ("false", False),
        ("No", False),
        ("", False),
    ],
)
def test_fast_mode_parses(monkeypatch, value, expected):
    """KVATTN_FAST accepts 1/true/yes and 0/false/no/"" (any case, surrounding blanks)."""
    monkeypatch.setenv(env.FAST_ENV, value)
    assert env.fast_mode() is expected


def test_fast_mode_unset_is_off(monkeypatch):
    """No KVATTN_FAST at all means full mode."""
    monkeypatch.delenv(env.FAST_ENV, raising=False)
    assert env.fast_mode() is False


@pytest.mark.parametrize("value", ["2", "on", "off", "maybe", "y"])
def test_fast_mode_rejects_other_values(monkeypatch, value):
    """Anything else raises ValueError naming the variable and the accepted values."""
    monkeypatch.setenv(env.FAST_ENV, value)
    with pytest.raises(ValueError, match=r"KVATTN_FAST must be one of 1/true/yes or 0/false/no"):
        env.fast_mode()


def test_pick(monkeypatch):
    """pick(full, fast) follows the fast-mode flag."""
    monkeypatch.setenv(env.FAST_ENV, "1")
    assert env.pick(2000, 200) == 200
    monkeypatch.setenv(env.FAST_ENV, "0")
    assert env.pick(2000, 200) == 2000


def test_seed_everything_makes_generators_reproducible():
    """Seeding twice gives the same torch, NumPy and Python draws; another seed differs."""
    env.seed_everything(123)
    first = (torch.randn(5), np.random.rand(3), random.random())  # noqa: NPY002
    env.seed_everything(123)
    second = (torch.randn(5), np.random.rand(3), random.random())  # noqa: NPY002
    assert torch.equal(first[0], second[0])
    assert np.array_equal(first[1], second[1])
    assert first[2] == second[2]
    env.seed_everything(124)
    assert not torch.equal(torch.randn(5), first[0])
    env.seed_everything(2**40)  # larger than NumPy's 32-bit range: reduced, not rejected


@pytest.mark.parametrize("bad", [1.5, "3", True])
def test_seed_everything_rejects_non_int(bad):
    """Only a plain int seed is accepted."""
    with pytest.raises(TypeError, match="seed must be an int"):
        env.seed_everything(bad)


def test_default_device():
    """CUDA when available, then MPS, else the CPU (the CPU on CI)."""
    if torch.cuda.is_available():
        expected = "cuda"
    elif torch.backends.mps.is_available():
        expected = "mps"
    else:
        expected = "cpu"
    assert env.default_device() == torch.device(expected)


def test_setup_reports_device_mode_and_sets_renderer(monkeypatch, restore_renderer):
    """setup() seeds, picks the device, reads the mode and selects the book renderer."""
    monkeypatch.setenv(env.FAST_ENV, "1")
    s = env.setup(seed=7)
    assert isinstance(s, env.Setup)
    assert (s.seed, s.fast, s.device) == (7, True, env.default_device())
    text = str(s)
    assert f"device {s.device.type}" in text
    assert "mode fast" in text and "seed 7" in text and torch.__version__ in text
    assert pio.renderers.default == "plotly_mimetype+book"
    after_setup = torch.randn(3)
    env.seed_everything(7)
    assert torch.equal(torch.randn(3), after_setup)

    monkeypatch.setenv(env.FAST_ENV, "0")
    s = env.setup(seed=1, device="cpu")
    assert s.device == torch.device("cpu")
    assert str(s).startswith("kvattn: device cpu; seed 1; mode full;")


def test_setup_str_for_other_devices(monkeypatch):
    """The report names MPS, and in Colab on the CPU it says how to get a GPU."""
    assert "device mps (Apple GPU)" in str(env.Setup(torch.device("mps"), 0, False))
    assert "GPU" not in str(env.Setup(torch.device("cpu"), 0, False))
    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    assert env.in_colab()
    assert "Runtime > Change runtime type" in str(env.Setup(torch.device("cpu"), 0, False))


def test_book_renderer_bundle(restore_renderer):
    """The "book" renderer emits only text/html: the figure's div and its newPlot call, with no
    external <script src> (no CDN MathJax) and no inlined plotly.js."""
    env.use_book_renderer()
    renderer = pio.renderers[env.BOOK_RENDERER]
    assert isinstance(renderer, MimetypeRenderer)  # so it can be combined with plotly_mimetype
    fig = go.Figure(go.Scatter(x=[1, 2, 3], y=[3, 1, 2]), layout={"title": {"text": "$x^2$"}})
    bundle = renderer.to_mimebundle(fig.to_dict())
    assert list(bundle) == ["text/html"]
    html = bundle["text/html"]
    assert "plotly-graph-div" in html
    assert "Plotly.newPlot" in html
    assert "<script src" not in html
    assert "mathjax" not in html.lower()
    assert len(html) < 50_000  # plotly.min.js alone is several MB
    assert '"displaylogo": false' in html


def test_colab_uses_colab_renderer(monkeypatch, restore_renderer):
    """In Colab the colab renderer is chosen instead of the book pair."""
    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    env.use_book_renderer()
    assert pio.renderers.default == "colab"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_setup_on_cuda(restore_renderer):
    """With a GPU, setup() picks CUDA and the report names the GPU."""
    s = env.setup()
    assert s.device.type == "cuda"
    assert f"device cuda ({torch.cuda.get_device_name(s.device)})" in str(s)
    env.seed_everything(5)
    a = torch.randn(4, device="cuda")
    env.seed_everything(5)
    assert torch.equal(torch.randn(4, device="cuda"), a)
