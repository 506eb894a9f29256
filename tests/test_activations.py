"""Tests for :mod:`kvattn.activations`: σ, its gate g(z) = σ(z)/z and the Swish-β orbit."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from kvattn import activations as A
from kvattn.activations import NAMES, Activation, resolve

F64 = torch.float64

#: (name, beta) of every self-gated activation σ(z) = z·g(z).
SELF_GATED = [
    ("identity", None),
    ("relu", None),
    ("silu", None),
    ("gelu", None),
    ("swish", None),
    ("swish", 0.3),
    ("swish", 2.5),
    ("silu", 4.0),
]

#: A grid on [-8, 8] that contains 0 exactly and values very close to it.
GRID = torch.cat(
    [
        torch.linspace(-8, 8, 321, dtype=F64),
        torch.tensor([0.0, 1e-12, -1e-12, 1e-6, -1e-6, 30.0, -30.0], dtype=F64),
    ]
)


def _normal_cdf(z: float) -> float:
    return 0.5 * (1 + math.erf(z / math.sqrt(2)))


@pytest.mark.parametrize(("name", "beta"), SELF_GATED)
def test_sigma_equals_z_times_gate(name, beta):
    """σ(z) = z·g(z) on a grid including 0, for every self-gated activation (float64)."""
    act = resolve(name, beta)
    torch.testing.assert_close(act(GRID), GRID * act.gate(GRID), rtol=1e-14, atol=1e-15)


@given(
    z=st.floats(-40, 40, allow_nan=False),
    case=st.sampled_from(SELF_GATED),
)
def test_sigma_equals_z_times_gate_property(z, case):
    """Property: σ(z) = z·g(z) for arbitrary z in [-40, 40]."""
    act = resolve(*case)
    t = torch.tensor([z], dtype=F64)
    torch.testing.assert_close(act(t), t * act.gate(t), rtol=1e-13, atol=1e-300)


@pytest.mark.parametrize(
    ("name", "beta", "limit"),
    [
        ("identity", None, 1.0),
        ("silu", None, 0.5),
        ("gelu", None, 0.5),
        ("swish", None, 0.5),
        ("swish", 7.0, 0.5),
        ("relu", None, 0.5),  # documented midpoint of the Heaviside step
    ],
)
def test_gate_value_at_zero(name, beta, limit):
    """g(0) is the limit of σ(z)/z at 0 (and the documented midpoint H(0) = ½ for ReLU)."""
    act = resolve(name, beta)
    assert float(act.gate(torch.zeros((), dtype=F64))) == limit


@pytest.mark.parametrize(("name", "beta"), [("identity", None), ("silu", None), ("gelu", None)])
def test_gate_continuous_at_zero(name, beta):
    """For smooth σ the gate is continuous at 0: g(±ε) → g(0)."""
    act = resolve(name, beta)
    eps = torch.tensor([-1e-7, 1e-7], dtype=F64)
    g0 = act.gate(torch.zeros(1, dtype=F64))
    torch.testing.assert_close(act.gate(eps), g0.expand(2), atol=1e-7, rtol=0)


def test_named_gates_closed_forms():
    """Closed-form gates: sigmoid (SiLU), Φ (GELU), the step (ReLU), sigmoid(βz) (Swish-β)."""
    z = torch.tensor([-3.0, -0.7, 0.4, 2.2], dtype=F64)
    torch.testing.assert_close(resolve("silu").gate(z), torch.sigmoid(z), rtol=0, atol=0)
    phi = torch.tensor([_normal_cdf(float(v)) for v in z], dtype=F64)
    torch.testing.assert_close(resolve("gelu").gate(z), phi, rtol=1e-14, atol=1e-15)
    assert resolve("relu").gate(z).tolist() == [0.0, 0.0, 1.0, 1.0]
    torch.testing.assert_close(resolve("swish", 3.0).gate(z), torch.sigmoid(3.0 * z))
    assert resolve("identity").gate(z).tolist() == [1.0] * 4


def test_custom_callable_gate():
    """A callable's gate is σ(z)/z away from 0 and σ'(0) at 0 (tanh: g(0) = 1)."""
    act = resolve(lambda z: torch.tanh(z))
    z = torch.tensor([-2.0, -0.3, 0.0, 0.5, 4.0], dtype=F64)
    g = act.gate(z)
    nz = z != 0
    torch.testing.assert_close(g[nz], torch.tanh(z[nz]) / z[nz])
    assert float(g[2]) == 1.0
    # σ(z) = sin(3z): g(0) = σ'(0) = 3, found by autograd.
    assert float(resolve(lambda z: torch.sin(3 * z)).gate(torch.zeros(1, dtype=F64))) == 3.0


def test_custom_callable_gate_matches_named_silu():
    """F.silu passed as a callable has the same gate as the named SiLU (closed form sigmoid)."""
    custom = resolve(F.silu)
    torch.testing.assert_close(custom.gate(GRID), torch.sigmoid(GRID), rtol=1e-13, atol=1e-15)


def test_custom_gate_preserves_dtype():
    """The autograd-based gate returns the input's dtype (float32 stays float32)."""
    act = resolve(lambda z: torch.tanh(z))
    z = torch.tensor([0.0, 1.0], dtype=torch.float32)
    assert act.gate(z).dtype == torch.float32


def test_sigmoid_gate_has_a_pole():
    """σ(0) = ½ ≠ 0 for the logistic sigmoid (the original GLU): its gate raises ValueError."""
    with pytest.raises(ValueError, match="pole"):
        resolve("sigmoid").gate(torch.zeros(3))
    with pytest.raises(ValueError, match="self-gated"):
        resolve(lambda z: torch.cos(z)).gate(torch.ones(3))


@pytest.mark.parametrize("alpha", [0.1, 0.5, 1.0, 2.0, 7.5])
def test_silu_rescaling_is_swish(alpha):
    """The Swish-β orbit: SiLU(αz)/α = Swish_α(z) = z·sigmoid(αz)."""
    z = GRID
    lhs = F.silu(alpha * z) / alpha
    torch.testing.assert_close(lhs, A.swish(z, beta=alpha), rtol=1e-14, atol=1e-15)
    torch.testing.assert_close(lhs, resolve("swish", alpha)(z), rtol=1e-14, atol=1e-15)
    torch.testing.assert_close(lhs, resolve("silu", beta=alpha)(z), rtol=1e-14, atol=1e-15)


@given(alpha=st.floats(-20, 20).filter(lambda a: abs(a) > 1e-3))
def test_silu_rescaling_is_swish_property(alpha):
    """Property: SiLU(αz)/α = swish(z, β=α) for every non-zero α, negative ones included."""
    z = GRID
    torch.testing.assert_close(F.silu(alpha * z) / alpha, A.swish(z, alpha), rtol=1e-12, atol=1e-14)


def test_swish_limits():
    """Swish-β is z/2 at β = 0 and tends to ReLU as β → ∞."""
    z = GRID
    torch.testing.assert_close(resolve("swish", 0.0)(z), z / 2, rtol=0, atol=0)
    torch.testing.assert_close(A.swish(z, 1e4)[z.abs() > 1e-2], F.relu(z)[z.abs() > 1e-2])


def test_silu_taylor_residual_is_sixth_order():
    """SiLU(z) = z/2 + z²/4 − z⁴/48 + z⁶/480 + O(z⁸): the residual is O(z⁶), coefficient 1/480."""
    z = torch.tensor([0.02, -0.05, 0.1, -0.1], dtype=F64)
    residual = F.silu(z) - (z / 2 + z**2 / 4 - z**4 / 48)
    ratio = residual / z**6
    torch.testing.assert_close(ratio, torch.full_like(z, 1 / 480), rtol=3e-3, atol=0)
    # Halving z divides the residual by ≈ 2⁶.
    r1 = F.silu(torch.tensor(0.1, dtype=F64)) - (0.05 + 0.01 / 4 - 1e-4 / 48)
    r2 = F.silu(torch.tensor(0.05, dtype=F64)) - (0.025 + 0.0025 / 4 - 0.05**4 / 48)
    assert 60 < float(r1 / r2) < 68


def test_gelu_taylor_residual_is_sixth_order():
    """GELU(z) = z/2 + z²/√(2π) − z⁴/(6√(2π)) + z⁶/(40√(2π)) + O(z⁸)."""
    c = 1 / math.sqrt(2 * math.pi)
    z = torch.tensor([0.02, -0.05, 0.1], dtype=F64)
    residual = F.gelu(z) - (z / 2 + c * z**2 - c * z**4 / 6)
    torch.testing.assert_close(residual / z**6, torch.full_like(z, c / 40), rtol=3e-3, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", NAMES)
def test_activation_preserves_shape_and_dtype(name, dtype):
    """σ acts elementwise: same shape and dtype out as in."""
    z = torch.randn(2, 3, 4, dtype=dtype)
    out = resolve(name)(z)
    assert out.shape == z.shape
    assert out.dtype == dtype


def test_resolve_names_and_passthrough():
    """resolve is case-insensitive, keeps an Activation unchanged and normalises SiLU with β = 1."""
    act = resolve("SiLU")
    assert act.name == "silu"
    assert resolve(act) is act
    assert resolve("silu", beta=1.0).name == "silu"
    assert resolve("swish").beta == 1.0
    assert resolve("swish", 2.0).label == "Swish-β (β=2)"
    assert [resolve(n).label for n in ("relu", "silu", "gelu", "identity")] == [
        "ReLU",
        "SiLU",
        "GELU",
        "identity",
    ]
    assert isinstance(resolve(torch.tanh), Activation)
    assert resolve(torch.tanh).name == "tanh"


def test_resolve_errors():
    """Bad activations raise ValueError/TypeError saying what was expected."""
    with pytest.raises(ValueError, match="unknown activation 'softplus'; expected one of"):
        resolve("softplus")
    with pytest.raises(ValueError, match="takes no beta"):
        resolve("relu", beta=2.0)
    with pytest.raises(ValueError, match="takes no beta"):
        resolve("gelu", beta=0.5)
    with pytest.raises(ValueError, match="finite and >= 0"):
        resolve("swish", beta=-1.0)
    with pytest.raises(ValueError, match="finite and >= 0"):
        resolve("silu", beta=math.inf)
    with pytest.raises(ValueError, match="not to a callable"):
        resolve(torch.tanh, beta=2.0)
    with pytest.raises(TypeError, match="activation name or a callable"):
        resolve(3)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("name", ["silu", "gelu", "relu", "identity"])
def test_gate_on_cuda(name):
    """On CUDA, σ and its gate stay on the device and keep the dtype; the identity still holds."""
    z = torch.linspace(-4, 4, 101, device="cuda", dtype=F64)
    act = resolve(name)
    g = act.gate(z)
    assert g.device.type == "cuda" and g.dtype == F64
    torch.testing.assert_close(act(z), z * g)
    custom = resolve(lambda t: torch.tanh(t)).gate(z)
    assert custom.device.type == "cuda" and custom.dtype == F64


def test_scalar_callables_and_layers_are_rejected_with_a_clear_message():
    """math.tanh works on floats only; a layer maps (..., d) to another width: both are refused."""
    import math

    from kvattn.mlp import GatedMLP

    with pytest.raises(TypeError, match="must map a tensor to a tensor of the same shape"):
        resolve(math.tanh)
    with pytest.raises(TypeError, match="must map a tensor to a tensor of the same shape"):
        resolve(GatedMLP(64, 8))


@pytest.mark.parametrize("beta", ["2", True, [2.0], torch.tensor(2.0)])
def test_non_numeric_beta_is_named_as_swish_beta(beta):
    """A β that is not a real number (a string, a bool, a tensor ...) is refused with a message
    that says it is Swish's β and must be a number, for "swish" and for "silu"."""
    for name in ("swish", "silu"):
        with pytest.raises(TypeError, match=r"beta is Swish's β .* must be a real number, got"):
            resolve(name, beta)


def test_numeric_betas_of_any_real_type_are_accepted():
    import numpy as np

    assert resolve("swish", 2).beta == 2.0
    assert resolve("swish", np.float64(0.5)).beta == 0.5


@pytest.mark.parametrize(
    ("fn", "error", "match"),
    [
        (lambda z: z.float(), TypeError, "must keep the input's dtype: torch.float64 in, torch.fl"),
        (
            lambda z: z.double(),
            TypeError,
            "must keep the input's dtype: torch.float32 in, torch.fl",
        ),
        (
            lambda z: torch.full_like(z, math.nan),
            ValueError,
            r"must give finite values; on \[-1.0, -0.5, 0.0, 0.5, 1.0\] it gave \[nan, nan, nan",
        ),
        (lambda z: z * torch.log(z.abs()), ValueError, r"it gave \[-0.0, .*nan"),
        (torch.relu_, ValueError, r"must not change its input \(relu_ works in place"),
        (lambda z: z.mul_(2), ValueError, "must not change its input"),
    ],
)
def test_callables_that_change_dtype_give_nan_or_work_in_place_are_refused(fn, error, match):
    """Audit V10, V11, V14: a callable that changed the dtype (float64 came back float32), one
    that returned NaN, and an in-place one (torch.relu_ overwrote the tensor it was given) were
    all accepted. Each is refused by the probe call, which runs on a copy in float64 and float32."""
    with pytest.raises(error, match=match):
        resolve(fn)


def test_elementwise_callables_that_keep_their_input_are_accepted():
    """The identity returns its input itself; that is not working in place."""
    z = torch.tensor([-1.0, 2.0])
    for fn in (lambda t: t, torch.tanh, F.silu, torch.nn.GELU()):
        out = resolve(fn)(z)
        assert out.dtype == z.dtype and z.tolist() == [-1.0, 2.0]


def test_swish_beta_beyond_float32_is_refused():
    """Audit E66 (the activation's part): β = 1e308 was accepted; every β above the largest
    float32 is infinite in the model's float32 (and half) arithmetic, where σ(0) = 0·sigmoid(∞·0)
    is NaN. The largest float32 itself still gives finite values."""
    largest = torch.finfo(torch.float32).max
    for name in ("swish", "silu"):
        with pytest.raises(
            ValueError, match=r"beta must be at most 3.4e\+38 \(the largest float32"
        ):
            resolve(name, 1e39)
    z = torch.tensor([-1.0, 0.0, 1.0])
    assert resolve("swish", largest)(z).tolist() == [-0.0, 0.0, 1.0]
