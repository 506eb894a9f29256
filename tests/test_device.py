"""Device-clean analysis, checked on a machine without a GPU (issue 14).

Readers run the chapters on CUDA and on Apple MPS; CI has neither. A model on an accelerator
breaks an analysis in three ways: a CPU tensor meets a device tensor in one operation, a device
tensor goes to NumPy, or (MPS only) a device tensor becomes float64. These tests run the
diagnostics, the explorers' compute functions and widgets, and the code cells of the Part II
chapters with every model "on" a simulated accelerator, and fail on any of the three.

How the accelerator is simulated, and why so: :class:`SimulatedDevice` is a
``torch.overrides.TorchFunctionMode`` that computes everything on the CPU, with real values, but
marks the tensors that live on the simulated device: those moved there (``.to``, ``Module.to``),
created there (``device=`` of a factory) or computed from a marked tensor. It reports their
``.device`` as ``cuda`` or ``mps``, so that code which follows a model's device does so here too,
and it raises where the real device raises: an operation that mixes marked tensors with CPU
tensors of one or more dimensions (a CPU 0-d tensor is a scalar, which CUDA accepts), ``.numpy()``
of a marked tensor, and, for ``mps``, any marked float64 tensor. It also counts host
synchronisations (``.item()``, ``float()``, ``bool()``, ``.tolist()``, copies to the CPU).
The alternatives were evaluated here (CPU build of torch) and rejected: under
``torch._subclasses.fake_tensor.FakeTensorMode`` a fake ``cuda`` tensor can be made and
``torch.cat`` of it with a CPU tensor does raise, but ``Module.to("cuda")`` and every value read
(``float()``, ``.item()``) fail with "PyTorch is not linked with support for cuda devices", and
fake tensors hold no values for the chapters' asserts and value-dependent loops (power iteration);
the ``meta`` device holds no values either. The simulation runs the real code on real values.
Its limits: it does not check the device of a ``torch.Generator`` (it cannot make a CUDA one, so
:class:`_CpuGenerator` stands in), and it knows only the mixing rule, not other CUDA behaviour.
"""

from __future__ import annotations

import contextlib
import io
import json
import time
from pathlib import Path

import pytest
import torch
from torch.overrides import TorchFunctionMode

from kvattn import diagnostics as D
from kvattn import losses

ROOT = Path(__file__).resolve().parents[1]
_MARK = "_kvattn_on_simulated_device"
# Functions that copy between devices in real PyTorch, or only read arguments' types or sizes or
# parse a device, so a CPU tensor (or a device argument) next to a device tensor is legitimate.
_PASS = (
    torch.Tensor.copy_,
    torch.Tensor.__setitem__,
    torch._has_compatible_shallow_copy_type,
    torch._C._nn._parse_to,
)
# Functions that only read their other tensor's size: the result lives where the first one does.
_SHAPED = (torch.Tensor.expand_as, torch.Tensor.view_as, torch.Tensor.reshape_as)
_SYNCS = (
    torch.Tensor.item,
    torch.Tensor.tolist,
    torch.Tensor.__float__,
    torch.Tensor.__int__,
    torch.Tensor.__bool__,
    torch.Tensor.__index__,
    torch.Tensor.__format__,
)


def _tensors(values) -> list[torch.Tensor]:
    """The tensors among ``values`` and inside their lists and tuples (what torch functions take
    and return; cheaper than a full pytree walk on every operation)."""
    out = []
    for v in values:
        if isinstance(v, torch.Tensor):
            out.append(v)
        elif isinstance(v, (list, tuple)):
            out.extend(_tensors(v))
    return out


def on_device(x) -> bool:
    """Whether ``x`` is a tensor on the simulated device."""
    return isinstance(x, torch.Tensor) and getattr(x, _MARK, False)


class SimulatedDevice(TorchFunctionMode):
    """Simulate an accelerator of type ``kind`` (``"cuda"`` or ``"mps"``) on the CPU."""

    def __init__(self, kind: str):
        super().__init__()
        self.device = torch.device(kind)
        self.syncs = 0

    def _mark(self, out):
        for t in _tensors([out]):
            if self.device.type == "mps" and t.dtype in (torch.float64, torch.complex128):
                raise TypeError(
                    "Cannot convert a MPS Tensor to float64 dtype as the MPS framework "
                    "doesn't support float64. Please use float32 instead."
                )
            setattr(t, _MARK, True)
        return out

    def _move(self, func, args, kwargs):
        src = args[0]
        if func is torch.Tensor.cpu:
            target, dtype = torch.device("cpu"), None
        elif func is torch.Tensor.cuda:
            target, dtype = torch.device("cuda"), None
        elif len(args) > 1 and isinstance(args[1], torch.Tensor):  # x.to(other)
            target = self.device if on_device(args[1]) else torch.device("cpu")
            dtype = args[1].dtype
        else:
            target, dtype, *_ = torch._C._nn._parse_to(*args[1:], **kwargs)
        out = src if dtype is None else src.to(dtype)
        if target is None:  # a cast on the tensor's own device
            return self._mark(out) if on_device(src) else out
        if target.type == self.device.type:
            if not on_device(src) and out is src:
                out = src.clone()
            return self._mark(out)
        if target.type == "cpu" and on_device(src):
            self.syncs += 1
            return src.clone() if out is src else out
        return func(*args, **kwargs)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        owner = getattr(func, "__self__", None)
        if owner is torch.Tensor.device:
            return self.device if on_device(args[0]) else func(*args)
        if owner is torch.Tensor.data and func.__name__ == "__set__":  # Module.to assigns .data
            func(*args)
            # the tensor now lives where its new data does: Module.to("cpu") brings it back
            setattr(args[0], _MARK, on_device(args[1]))
            return None
        if func in (torch.Tensor.to, torch.Tensor.cpu, torch.Tensor.cuda):
            return self._move(func, args, kwargs)
        if func is torch.Tensor.numpy and on_device(args[0]):
            raise TypeError(
                f"can't convert {self.device.type} device type tensor to numpy. "
                "Use Tensor.cpu() to copy the tensor to host memory first."
            )
        if func in _SYNCS and on_device(args[0]):
            self.syncs += 1
        if func in _PASS:
            return func(*args, **kwargs)
        device = kwargs.get("device")
        if device is not None and torch.device(device).type == self.device.type:  # a factory
            return self._mark(func(*args, **{**kwargs, "device": "cpu"}))
        if func in _SHAPED or func in (torch.Tensor.__deepcopy__, torch.Tensor.__getitem__):
            out = func(*args, **kwargs)  # (memo and CPU index tensors may mix legitimately)
            return self._mark(out) if on_device(args[0]) else out
        tensors = _tensors([*args, *kwargs.values()])
        if not any(on_device(t) for t in tensors):
            return func(*args, **kwargs)
        cpu = [tuple(t.shape) for t in tensors if not on_device(t) and t.dim() > 0]
        if cpu:
            raise RuntimeError(
                f"{getattr(func, '__name__', func)}: expected all tensors to be on the same "
                f"device, but found tensors on {self.device.type} and on cpu (shapes {cpu})"
            )
        return self._mark(func(*args, **kwargs))


def _deepcopy_parameter(original):
    """Parameter.__deepcopy__ builds a new Parameter outside any torch function: keep the mark."""

    def deepcopy(self, memo):
        out = original(self, memo)
        if on_device(self):
            setattr(out, _MARK, True)
        return out

    return deepcopy


class _CpuGenerator(torch.Generator):
    """torch.Generator that makes a CPU generator for a simulated device (a real CUDA or MPS
    generator cannot be made without the device; the draws are not what is checked here)."""

    def __new__(cls, device="cpu"):
        kind = torch.device(device).type
        return super().__new__(cls, "cpu" if kind in ("cuda", "mps") else device)

    def __init__(self, device="cpu"):
        pass  # all done in __new__


@pytest.fixture
def simulated(monkeypatch):
    """Enter a simulated accelerator: ``with simulated("cuda") as device: ...``."""
    monkeypatch.setattr(
        torch.nn.Parameter, "__deepcopy__", _deepcopy_parameter(torch.nn.Parameter.__deepcopy__)
    )
    return SimulatedDevice


# --- the guard itself -------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["cuda", "mps"])
def test_the_guard_catches_the_chapter_6_mix(simulated, kind):
    """The chapter-6 bug, reintroduced: a CPU tensor concatenated to and multiplied with tensors
    on the model's device must raise, while the device-clean version of the same code runs."""
    linear = torch.nn.Linear(4, 4)
    with simulated(kind) as guard:
        linear.to(kind)
        assert linear.weight.device.type == kind
        x = linear(torch.randn(3, 4, device=kind))
        with pytest.raises(RuntimeError, match="same device"):
            torch.cat([x, torch.ones(3, 1)], 1)
        with pytest.raises(RuntimeError, match="same device"):
            torch.ones(4, 4) @ linear.weight
        with pytest.raises(TypeError, match="numpy"):
            x.detach().numpy()
        clean = torch.cat([D.cpu64(x), torch.ones(3, 1, dtype=torch.float64)], 1)
        assert not on_device(clean) and clean.device.type == "cpu" and clean.shape == (3, 5)
        assert guard.syncs == 1  # the one copy to the host
        if kind == "mps":
            with pytest.raises(TypeError, match="float64"):
                x.double()  # what the chapters did before casting on the CPU
        else:
            assert x.double().device.type == "cuda"


def test_the_guard_catches_the_original_rope_rotation_and_head_form(simulated):
    """The original head_bilinear_form multiplied the device weights (cast in place) with the
    CPU R(δ) of rope_rotation; the guard raises on exactly that product."""
    attn = _gpt().decoder.dec_layers[0].mha1
    with simulated("cuda"):
        attn.to("cuda")
        Wq = attn.wq.weight[:8].detach().double()
        Wk = attn.wk.weight[:8].detach().double()
        with pytest.raises(RuntimeError, match="same device"):
            Wq.T @ D.rope_rotation(attn, 2) @ Wk
        M = D.head_bilinear_form(attn, 0, 2)
    assert M.device.type == "cpu" and M.dtype == torch.float64
    torch.testing.assert_close(M, D.cpu64(Wq).T @ D.rope_rotation(attn, 2) @ D.cpu64(Wk))


# --- the library's analysis functions on a model on the device -------------------------------


def _gpt():
    from kvattn.config import PLDRConfig
    from kvattn.pldr import GPT

    cfg = PLDRConfig(
        vocab_size=60,
        hidden_size=16,
        num_attention_heads=2,
        num_hidden_layers=2,
        max_position_embeddings=32,
    )
    return GPT(cfg)


def _pldr():
    from kvattn.config import PLDRConfig
    from kvattn.pldr import PLDRLLM

    cfg = PLDRConfig(
        vocab_size=60,
        hidden_size=16,
        num_attention_heads=2,
        num_hidden_layers=2,
        num_reslayerA=1,
        max_position_embeddings=32,
    )
    return PLDRLLM(cfg)


def _is_cpu64(x) -> bool:
    return x.device.type == "cpu" and not on_device(x) and x.dtype == torch.float64


@pytest.mark.parametrize("kind", ["cuda", "mps"])
def test_diagnostics_take_device_tensors_and_return_cpu_float64(simulated, kind):
    """Every public diagnostic, explorer compute function and figure that takes a model or model
    tensors, with the model on the device: CPU float64 results, no device mixing."""
    from kvattn.course import explorers

    gpt, pldr = _gpt(), _pldr()
    with simulated(kind) as guard:
        gpt.to(kind)
        pldr.to(kind)
        ids = torch.randint(4, 60, (1, 12), device=kind)
        prompts = [ids, torch.randint(4, 60, (1, 9), device=kind)]
        outputs = D.deductive_tensors(pldr, prompts)
        t = outputs[0][0]
        assert on_device(t.A_LM)
        for M in (t.A_LM, t.A_P, t.G_LM):
            loss = losses.dag_loss(M)  # the training loss stays on the device
            assert on_device(loss) and loss.shape == (1, 2)
            assert _is_cpu64(D.notears_h(M))
        assert D.order_parameter(outputs[0][1].G_LM, outputs[1][1].G_LM) > 0
        audit = D.rank_audit(t.A[0], head_dim=0)
        assert _is_cpu64(audit.sigma_ratio) and _is_cpu64(audit.row_spread)
        assert not on_device(audit.rank) and audit.head_spread >= 0
        lam, v = D.perron_frobenius(t.A_LM[0])
        assert _is_cpu64(lam) and _is_cpu64(v) and lam.shape == (2,)
        assert _is_cpu64(D.commutant_residual(t.G_LM))
        assert on_device(D.commutant_projection(t.G_LM))  # a projection stays where G is
        attn = gpt.decoder.dec_layers[1].mha1
        assert _is_cpu64(D.rope_rotation(attn, 3))
        assert _is_cpu64(D.head_bilinear_form(attn, 1, 3, with_bias=True))
        assert D.asymmetry(D.head_bilinear_form(attn, 0)) >= 0
        assert on_device(next(D.swap_attention_qk(gpt).parameters()))
        profile = D.head_profile(gpt, ids, 1, 1, max_distance=4)
        assert _is_cpu64(profile.E) and _is_cpu64(profile.asym)
        deductive = D.deductive_profile(outputs, 1, 0)
        assert all(_is_cpu64(x) for x in [*deductive.first.values(), *deductive.spread.values()])
        queries = D.layer_queries(pldr, ids, 1)
        assert _is_cpu64(queries) and queries.shape == (2, 12, 8)
        densities = D.twirl(pldr, ids, 1, 0, [4, 12])
        assert all(_is_cpu64(A) for A in densities.values())
        eval_ids = torch.randint(4, 60, (2, 10), device=kind)
        collapse = D.collapse_measures(pldr, prompts, eval_ids)
        assert all(_is_cpu64(x) for x in collapse.heads.values())
        assert all(isinstance(v, float) for v in (collapse.delta_loss, collapse.agreement))
        assert on_device(next(pldr.parameters()))
        explorers.attention.figure([profile], [str(i) for i in range(12)])
        explorers.deductive.figure([deductive])
        explorers.twirl.figure(densities)
        syncs = guard.syncs
        D.perron_frobenius(t.A_LM, iterations=500, tol=1e-300)
        # one copy to the host and one positivity/finiteness read, not one per iteration
        assert guard.syncs - syncs <= 2


@pytest.mark.parametrize("kind", ["cuda", "mps"])
def test_widgets_draw_for_a_model_on_the_device(simulated, monkeypatch, kind):
    """The live explorers that take a model draw once when made: their compute function, then
    matplotlib (no .numpy() of a device tensor, no float64 on MPS). Chapter 10's twirl explorer
    showed a traceback instead."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from kvattn.course import explorers
    from kvattn.mlp import GatedMLP

    shown, images = [], []
    monkeypatch.setattr(explorers.generation, "display", shown.append)
    monkeypatch.setattr(explorers._live, "display", images.append)
    monkeypatch.setattr(torch, "Generator", _CpuGenerator)

    class Tokenizer:  # the SentencePiece calls the widgets make
        def encode(self, text):
            return [4 + ord(c) % 50 for c in text]

        def id_to_piece(self, i):
            return str(i)

        def decode(self, ids):
            return " ".join(map(str, ids))

    text = "def f(x):\n    return x + 1\n"
    gpt, pldr, mlp = _gpt(), _pldr(), GatedMLP(4, 6, 3)
    plt.close("all")
    with simulated(kind):  # outside IPython, an error in the first draw propagates to here
        for module in (gpt, pldr, mlp):
            module.to(kind)
        explorers.twirl.widget(pldr, Tokenizer(), text, layer=1, head=1)
        explorers.attention.widget(gpt, Tokenizer(), text, layer=1, head=0)
        explorers.deductive.widget(pldr, Tokenizer(), [text, text[::-1]])
        x = torch.randn(5, 4, device=kind)
        explorers.interaction.widget(mlp, list("abcd"), list("xyz"), inputs=x)
        explorers.generation.widget({"gpt": gpt, "pldr": pldr}, Tokenizer(), text)
    assert len(images) == 4  # the four explorers that plot drew their figure
    assert "</b></pre>" in shown[-1].value  # and the generation explorer its continuation
    plt.close("all")


# --- the chapters' analysis code --------------------------------------------------------------

#: Cells skipped, by a piece of their source: not analysis on loaded models (training, the
#: network), each with its own device handling elsewhere. (Chapter 9's timing cell runs: its
#: budget is a few seconds in fast mode, and the cells after it read its result.) Chapter 8's
#: live pre-training is skipped with the cell that generates from its checkpoint.
_SKIP = ("pretrain(live", "result.out_dir", "published = load_pretrained(")
#: What the skipped cells leave behind when they run offline, for the cells after them.
_OFFLINE = {"published": None}


def _code_cells(name: str) -> list[tuple[int, str]]:
    """The chapter's code cells after the set-up cell and before its Exercises section."""
    nb = json.loads((ROOT / "notebooks" / name).read_text())
    cells = []
    for i, cell in enumerate(nb["cells"]):
        source = "".join(cell["source"])
        if cell["cell_type"] == "markdown" and source.lstrip().startswith("## Exercises"):
            break
        if cell["cell_type"] == "code" and "env.setup(" not in source:
            if not any(marker in source for marker in _SKIP):
                cells.append((i, source))
    return cells


@pytest.mark.slow
@pytest.mark.parametrize(
    "chapter",
    [
        "06_attention_bilinear.ipynb",
        "07_plga_piece_by_piece.ipynb",
        "08_training_pldr.ipynb",
        "09_inference_collapse.ipynb",
        "10_rope_twirl.ipynb",
        "11_criticality.ipynb",
    ],
)
def test_chapter_runs_with_the_model_on_the_device(simulated, monkeypatch, chapter):
    """Execute the chapter's code cells (fast mode, outputs discarded) with ``ENV.device`` a
    simulated accelerator: every cell must run, its own asserts included. MPS is the strictest
    simulation (the device-mixing rules of CUDA, and no float64), so it alone runs here."""
    kind = "mps"
    import matplotlib
    import plotly.basedatatypes

    matplotlib.use("Agg")
    import kvattn
    from kvattn.course import env, explorers

    monkeypatch.setenv("KVATTN_FAST", "1")
    monkeypatch.setattr(plotly.basedatatypes.BaseFigure, "show", lambda self, *a, **k: None)
    for live in (explorers.slot, explorers.generation):  # the explorers that display HTML
        monkeypatch.setattr(live, "display", lambda obj: None)
    monkeypatch.setattr(torch, "Generator", _CpuGenerator)
    # code that checks the device exists before any work (the benchmark) must see the simulated one
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    monkeypatch.chdir(ROOT / "notebooks")
    namespace = {"ENV": env.setup(seed=0, device=kind), "kvattn": kvattn, "env": env}
    namespace.update(_OFFLINE)
    hang_limit = 600  # generous; a hang, not a duration, is what this catches
    start = time.monotonic()
    with simulated(kind), contextlib.redirect_stdout(io.StringIO()):
        for index, source in _code_cells(chapter):
            try:
                exec(compile(source, f"{chapter}, cell {index}", "exec"), namespace)
            except Exception as err:
                raise AssertionError(f"{chapter}, cell {index} on {kind}: {err!r}") from err
            assert time.monotonic() - start < hang_limit
