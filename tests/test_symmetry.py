"""Tests for :mod:`kvattn.symmetry`: exact symmetries of the layers, violation metrics, conserved
quantities under gradient descent and the Jacobian-rank count of effective parameters."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from kvattn import data, train
from kvattn.activations import resolve
from kvattn.mlp import (
    FullBilinearAttentionMLP,
    GatedMLP,
    GatedRankRMLP,
    KeyValueMLP,
    SymmetricRank1Bilinear,
)
from kvattn.symmetry import (
    conserved_quantities,
    exchange_violation,
    exchange_violation_map,
    gaussian_expectation,
    jacobian_rank,
    rescale,
    scale_violation,
    scale_violation_coefficient,
    scale_violation_map,
    swap_qk,
    symmetry_profile,
)

F64 = torch.float64
ACTS = ("identity", "relu", "silu", "gelu", "sigmoid")
# Powers of two rescale exactly in floating point; the others test invariance up to rounding.
ALPHAS = (-3.7, -1.0, -0.5, 0.3, 2.0, 6.1)
D, M, D_OUT = 6, 8, 4


def _x(n=64, d=D):
    return torch.randn(n, d, dtype=F64)


def _rel_change(new, old):
    return float((new - old).norm() / old.norm())


def _assert_same(a, b):
    torch.testing.assert_close(a, b, rtol=0, atol=1e-12)


# ---------------------------------------------------------------------------------------------
# 1. The symmetric forms keep both symmetries for every σ


@pytest.mark.parametrize("act", ACTS)
def test_symmetric_rank1_invariant_under_swap_and_rescale(act):
    """σ((q·x)(k·x)) is invariant under q ↔ k and (q, k) → (αq, k/α) for every σ and α ≠ 0."""
    mod = SymmetricRank1Bilinear(D, M, D_OUT, act=act).to(F64)
    x = _x()
    with torch.no_grad():
        y = mod(x)
        swapped = swap_qk(mod)
        assert not torch.equal(swapped.W_q, mod.W_q)
        _assert_same(swapped(x), y)
        for alpha in ALPHAS:
            new = rescale(mod, alpha)
            torch.testing.assert_close(new.W_q, alpha * mod.W_q)
            _assert_same(new(x), y)


@given(
    alpha=st.floats(-20, 20).filter(lambda a: abs(a) > 0.05),
    seed=st.integers(0, 2**16),
    act=st.sampled_from(ACTS),
)
def test_symmetric_rank1_rescale_property(alpha, seed, act):
    """Property: the rank-1 symmetric form is rescale-invariant for arbitrary α, σ and weights."""
    torch.manual_seed(seed)
    mod = SymmetricRank1Bilinear(4, 3, 2, act=act).to(F64)
    x = _x(16, 4)
    with torch.no_grad():
        torch.testing.assert_close(rescale(mod, alpha)(x), mod(x), rtol=1e-12, atol=1e-12)


def _gl_transform(mod, As):
    """Q_j → Q_j A_j and K_j → K_j A_j^{-T}, i.e. W_q[j] → A_jᵀ W_q[j], W_k[j] → A_j^{-1} W_k[j]."""
    new = FullBilinearAttentionMLP(mod.d_model, mod.n_slots, mod.d_out, rank=mod.rank, act=mod.act)
    new = new.to(F64)
    with torch.no_grad():
        new.load_state_dict(mod.state_dict())
        new.W_q.copy_(As.transpose(1, 2) @ mod.W_q)
        new.W_k.copy_(torch.linalg.inv(As) @ mod.W_k)
    return new


@pytest.mark.parametrize("act", ACTS)
def test_full_bilinear_swap_and_gl_invariance(act):
    """Rank-r form A: invariant under Q_j ↔ K_j and under the GL(r) map Q_j → Q_j A_j,
    K_j → K_j A_j^{-T} (a different random invertible A_j per slot)."""
    r = 3
    mod = FullBilinearAttentionMLP(D, M, D_OUT, rank=r, act=act).to(F64)
    x = _x()
    As = torch.randn(M, r, r, dtype=F64) + 2 * torch.eye(r, dtype=F64)
    assert float(torch.linalg.cond(As).max()) < 1e3
    with torch.no_grad():
        y = mod(x)
        _assert_same(swap_qk(mod)(x), y)
        torch.testing.assert_close(_gl_transform(mod, As)(x), y, rtol=1e-10, atol=1e-10)
        for alpha in ALPHAS:
            _assert_same(rescale(mod, alpha)(x), y)
        # Control: K_j → K_j A_j (not A_j^{-T}) is no symmetry, so the check above can fail.
        wrong = _gl_transform(mod, As)
        wrong.W_k.copy_(As.transpose(1, 2) @ mod.W_k)
        assert _rel_change(wrong(x), y) > 1e-2


# ---------------------------------------------------------------------------------------------
# 2. Gated forms: which symmetries survive which σ


@pytest.mark.parametrize("variant", ["glu", "reglu", "geglu", "swiglu"])
def test_gated_swap_is_broken(variant):
    """σ(q·x)(k·x) with non-linear σ changes clearly under q ↔ k."""
    mod = GatedMLP(D, M, D_OUT, variant=variant).to(F64)
    x = _x()
    with torch.no_grad():
        assert _rel_change(swap_qk(mod)(x), mod(x)) > 0.3


def test_bilinear_swap_is_exact():
    """The bilinear variant (identity σ) is exactly swap-invariant."""
    mod = GatedMLP(D, M, D_OUT, variant="bilinear").to(F64)
    x = _x()
    with torch.no_grad():
        _assert_same(swap_qk(mod)(x), mod(x))


_INVARIANT = {  # variants that are exactly invariant under (q, k) → (αq, k/α)
    "positive": {"bilinear", "reglu"},
    "negative": {"bilinear"},
}


@pytest.mark.parametrize("alpha", [0.3, 0.5, 2.0, 3.7, -0.5, -1.0, -2.5])
@pytest.mark.parametrize("variant", ["glu", "bilinear", "reglu", "geglu", "swiglu"])
def test_gated_rescale_invariance_by_variant(variant, alpha):
    """α > 0: only ReGLU and bilinear are invariant; α < 0: only bilinear."""
    mod = GatedMLP(D, M, D_OUT, variant=variant).to(F64)
    x = _x()
    invariant = variant in _INVARIANT["positive" if alpha > 0 else "negative"]
    with torch.no_grad():
        y, y_new = mod(x), rescale(mod, alpha)(x)
    if invariant:
        _assert_same(y_new, y)
    else:
        assert _rel_change(y_new, y) > 0.05


@pytest.mark.parametrize("alpha", [0.3, 2.0, -1.0, -4.2])
@pytest.mark.parametrize("variant", ["glu", "bilinear", "reglu", "geglu", "swiglu"])
def test_gated_key_value_rescale_is_exact(variant, alpha):
    """(k, v) → (αk, v/α) leaves every gated variant invariant: the key enters linearly."""
    mod = GatedMLP(D, M, D_OUT, variant=variant).to(F64)
    x = _x()
    with torch.no_grad():
        _assert_same(rescale(mod, alpha, pair=("W_k", "W_v"))(x), mod(x))


def test_key_value_rescale_breaks_symmetric_nonlinear_form():
    """Control: for σ((q·x)(k·x)) with non-linear σ, (k, v) → (αk, v/α) is not a symmetry."""
    mod = SymmetricRank1Bilinear(D, M, D_OUT, act="silu").to(F64)
    x = _x()
    with torch.no_grad():
        assert _rel_change(rescale(mod, 2.0, pair=("W_k", "W_v"))(x), mod(x)) > 0.05


def test_key_value_mlp_relu_positive_homogeneity():
    """KeyValueMLP with ReLU keeps (k, v) → (αk, v/α) for α > 0 only."""
    mod = KeyValueMLP(D, M, D_OUT, act="relu").to(F64)
    x = _x()
    with torch.no_grad():
        _assert_same(rescale(mod, 3.3, pair=("W_k", "W_v"))(x), mod(x))
        assert _rel_change(rescale(mod, -3.3, pair=("W_k", "W_v"))(x), mod(x)) > 0.3


def test_transforms_copy_and_validate():
    """swap_qk and rescale return new modules, leave the original alone, and reject bad input."""
    mod = GatedMLP(D, M, D_OUT)
    before = {k: v.clone() for k, v in mod.state_dict().items()}
    new = rescale(swap_qk(mod), 2.0)
    assert new is not mod
    for k, v in mod.state_dict().items():
        assert torch.equal(v, before[k])
    torch.testing.assert_close(new.W_q, 2.0 * before["W_k"])
    torch.testing.assert_close(new.W_k, before["W_q"] / 2.0)
    for bad in (0.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="finite and non-zero"):
            rescale(mod, bad)
    kv = KeyValueMLP(D, M)
    with pytest.raises(TypeError, match="no query/key pair"):
        swap_qk(kv)
    with pytest.raises(TypeError, match="has no weight 'W_q'"):
        rescale(kv, 2.0)


def test_rank_r_rescale_scales_every_component():
    """rescale on a rank-r layer multiplies every rank component of q_j by α (form B, α > 0 ReLU
    keeps the output)."""
    mod = GatedRankRMLP(D, M, D_OUT, rank=3, act="relu").to(F64)
    x = _x()
    with torch.no_grad():
        new = rescale(mod, 1.7)
        torch.testing.assert_close(new.W_q, 1.7 * mod.W_q)
        _assert_same(new(x), mod(x))


# ---------------------------------------------------------------------------------------------
# 6. Violation metrics


def test_gaussian_expectation_moments():
    """The quadrature reproduces Gaussian moments: E[1] = 1, E[z²] = 1, E[z⁴] = 3, E|z| = √(2/π)."""
    assert gaussian_expectation(torch.ones_like) == pytest.approx(1.0, abs=1e-12)
    assert gaussian_expectation(lambda z: z**2) == pytest.approx(1.0, abs=1e-12)
    assert gaussian_expectation(lambda z: z**4) == pytest.approx(3.0, abs=1e-11)
    assert gaussian_expectation(torch.abs) == pytest.approx(math.sqrt(2 / math.pi), abs=1e-10)
    with pytest.raises(ValueError, match="integrand must return shape"):
        gaussian_expectation(lambda z: z.sum())


# E[z²Φ(z)²] = 1/3 + 1/(2π√3) by Stein's lemma, so the GELU metrics have closed forms.
_GELU_SECOND = 1 / 3 + 1 / (2 * math.pi * math.sqrt(3))


def _trapezoid(f, half_width=14.0, n=200_001):
    """Independent check: E[f(z)], z ~ N(0,1), by the trapezoid rule in numpy (spectrally
    accurate for smooth, rapidly decaying integrands)."""
    z = np.linspace(-half_width, half_width, n)
    density = np.exp(-0.5 * z**2) / math.sqrt(2 * math.pi)
    return float(np.sum(f(z) * density) * (z[1] - z[0]))


def _np_silu(z):
    return z / (1 + np.exp(-z))


def test_exchange_violation_analytic_values():
    """identity 0, ReLU exactly 1, GELU 2 − 1/(2E[GELU²]) in closed form, SiLU by an
    independent trapezoid rule."""
    assert exchange_violation("identity") < 1e-12
    assert exchange_violation("relu") == pytest.approx(1.0, abs=1e-9)
    assert exchange_violation("gelu") == pytest.approx(2 - 1 / (2 * _GELU_SECOND), abs=1e-9)
    second = _trapezoid(lambda z: _np_silu(z) ** 2)
    assert exchange_violation("silu") == pytest.approx(2 - 1 / (2 * second), abs=1e-9)


def test_exchange_violation_ordering():
    """identity < SiLU < GELU < ReLU < sigmoid, and the sigmoid GLU exceeds 1."""
    values = [exchange_violation(a) for a in ("identity", "silu", "gelu", "relu", "sigmoid")]
    assert values == sorted(values)
    assert len(set(values)) == 5
    assert 1.0 < values[-1] < 2.0


@pytest.mark.parametrize("name", ["identity", "relu", "silu", "gelu"])
def test_self_gated_cross_moment_is_half(name):
    """For a gate g = ½ + (odd function), E[a σ(a)] = ½ exactly (the basis of the closed forms)."""
    sigma = resolve(name)
    expected = 1.0 if name == "identity" else 0.5
    assert gaussian_expectation(lambda z: z * sigma(z)) == pytest.approx(expected, abs=1e-10)


def test_swish_exchange_violation_monotone_in_beta():
    """Swish-β: E_ex rises strictly over β ∈ [0.05, 50], from ≈ 0 towards the ReLU value 1."""
    betas = np.geomspace(0.05, 50, 25)
    values = np.array([exchange_violation("swish", float(b)) for b in betas])
    assert np.all(np.diff(values) > 0)
    assert values[0] < 0.01
    assert 0.9999 < values[-1] < 1.0
    assert exchange_violation("swish", 1.0) == pytest.approx(exchange_violation("silu"), abs=1e-12)


def test_swish_exchange_violation_limits():
    """β → 0: E_ex ≈ 3β²/2 (Swish_β = z/2 + βz²/4 + …) and exactly 0 at β = 0; β → ∞: → 1."""
    assert exchange_violation("swish", 0.0) == 0.0
    for beta in (1e-3, 1e-2):
        assert exchange_violation("swish", beta) == pytest.approx(1.5 * beta**2, rel=1e-3)
    assert exchange_violation("swish", 1e4) == pytest.approx(1.0, abs=1e-6)


def test_scale_violation_relu_closed_form():
    """ReLU: 0 for α > 0; for α < 0, ReLU(αa)/α − ReLU(a) = −|a|, so E_sc = E[a²]/E[ReLU²] = 2."""
    for alpha in (0.1, 0.5, 2.0, 10.0):
        assert scale_violation("relu", alpha) < 1e-12
    for alpha in (-0.1, -0.5, -1.0, -2.0, -10.0):
        assert scale_violation("relu", alpha) == pytest.approx(2.0, abs=1e-9)


def test_scale_violation_identity_and_alpha_one():
    """E_sc is 0 for the identity at every α and 0 at α = 1 for every σ."""
    for alpha in (-3.0, -1.0, 0.2, 5.0):
        assert scale_violation("identity", alpha) < 1e-12
    for name in ("relu", "silu", "gelu", "sigmoid"):
        assert scale_violation(name, 1.0) == 0.0


@pytest.mark.parametrize("name", ["silu", "gelu"])
@pytest.mark.parametrize("alpha", [-2.0, -1.0, -0.5, 0.5, 0.9, 1.1, 2.0, 10.0])
def test_scale_violation_positive_for_smooth_gates(name, alpha):
    """SiLU and GELU break the scale symmetry for every α ≠ 1."""
    assert scale_violation(name, alpha) > 1e-4


@pytest.mark.parametrize("name", ["silu", "gelu", "sigmoid"])
def test_scale_violation_leading_term(name):
    """Chapter 4: V(α) = C_σ (ln α)² + O(|ln α|³) near α = 1, from either side."""
    C = scale_violation_coefficient(name)
    assert C > 0
    for alpha in (1.001, 1 / 1.001):
        ratio = scale_violation(name, alpha) / math.log(alpha) ** 2
        assert ratio == pytest.approx(C, rel=1e-2)


def test_scale_violation_coefficient_values_and_homogeneous_zeros():
    """C vanishes for positively homogeneous σ; SiLU's is larger than GELU's, the reverse of the
    exchange order, because C weights the gate's slope by z⁴ (its tails)."""
    assert scale_violation_coefficient("relu") == pytest.approx(0.0, abs=1e-12)
    assert scale_violation_coefficient("identity") == pytest.approx(0.0, abs=1e-12)
    silu, gelu = scale_violation_coefficient("silu"), scale_violation_coefficient("gelu")
    assert silu > gelu and exchange_violation("gelu") > exchange_violation("silu")
    # gated form: zσ' − σ = z² g'(z); for GELU g = Φ, so C = E[z⁴ φ(z)²] / E[z² Φ(z)²]
    phi = lambda z: torch.exp(-(z**2) / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    Phi = lambda z: 0.5 * (1 + torch.erf(z / math.sqrt(2)))  # noqa: E731
    closed = gaussian_expectation(lambda z: z**4 * phi(z) ** 2) / gaussian_expectation(
        lambda z: z**2 * Phi(z) ** 2
    )
    assert gelu == pytest.approx(closed, rel=1e-9)


def test_scale_violation_gelu_closed_form():
    """GELU at α = −1: E[a²(1 − 2Φ(a))²]/E[GELU²] = (1/3 + 2/(π√3)) / (1/3 + 1/(2π√3))."""
    expected = (1 / 3 + 2 / (math.pi * math.sqrt(3))) / _GELU_SECOND
    assert scale_violation("gelu", -1.0) == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize("alpha", [-2.0, 0.5, 2.0, 4.0])
def test_scale_violation_silu_independent_quadrature(alpha):
    """SiLU scale violation agrees with an independent trapezoid-rule evaluation."""
    second = _trapezoid(lambda z: _np_silu(z) ** 2)
    num = _trapezoid(lambda z: (_np_silu(alpha * z) / alpha - _np_silu(z)) ** 2)
    assert scale_violation("silu", alpha) == pytest.approx(num / second, abs=1e-9)


@pytest.mark.parametrize(
    ("name", "beta"),
    [
        ("identity", None),
        ("relu", None),
        ("silu", None),
        ("gelu", None),
        ("swish", 0.4),
        ("swish", 3.0),
    ],
)
def test_scale_violation_at_minus_one_is_twice_exchange(name, beta):
    """For σ(z) = z(½ + h(z)) with h odd, E_sc(α = −1) = 4E[z²h²]/(¼ + E[z²h²]) = 2·E_ex."""
    assert scale_violation(name, -1.0, beta) == pytest.approx(
        2 * exchange_violation(name, beta), abs=1e-9
    )


@given(beta=st.floats(0.0, 100.0), alpha=st.floats(-10, 10).filter(lambda a: abs(a) > 1e-2))
def test_violations_are_bounded(beta, alpha):
    """Property: 0 ≤ E_ex ≤ 2 (Cauchy–Schwarz) and E_sc ≥ 0 for every Swish-β."""
    e = exchange_violation("swish", beta)
    assert 0.0 <= e <= 2.0
    assert scale_violation("swish", alpha, beta) >= 0.0


@pytest.mark.parametrize("name", ["silu", "gelu"])
def test_monte_carlo_agrees_with_quadrature(name):
    """The seeded Monte Carlo estimate is within 2 % of the quadrature value, for E_ex and E_sc."""
    n = 1 << 21
    mc = exchange_violation(name, method="monte_carlo", n_samples=n, seed=1)
    assert mc == pytest.approx(exchange_violation(name), rel=0.02)
    mc = scale_violation(name, 2.0, method="monte_carlo", n_samples=n, seed=1)
    assert mc == pytest.approx(scale_violation(name, 2.0), rel=0.02)


def test_monte_carlo_is_reproducible():
    """Same seed, same estimate (bit for bit); another seed, another estimate."""
    kw = {"method": "monte_carlo", "n_samples": 1 << 16}
    assert exchange_violation("silu", seed=3, **kw) == exchange_violation("silu", seed=3, **kw)
    assert exchange_violation("silu", seed=3, **kw) != exchange_violation("silu", seed=4, **kw)
    assert scale_violation("gelu", -1, seed=5, **kw) == scale_violation("gelu", -1, seed=5, **kw)


def test_violation_errors():
    """α = 0, non-finite α, unknown methods, too few samples and σ ≡ 0 raise ValueError."""
    with pytest.raises(ValueError, match=r"alpha must be finite and non-zero, got 0\.0"):
        scale_violation("silu", alpha=0)
    with pytest.raises(ValueError, match="finite and non-zero"):
        scale_violation("silu", alpha=math.inf)
    with pytest.raises(ValueError, match="'quadrature' or 'monte_carlo'"):
        exchange_violation("silu", method="simpson")
    with pytest.raises(ValueError, match="n_samples must be an int >= 2"):
        exchange_violation("silu", method="monte_carlo", n_samples=1)
    with pytest.raises(ValueError, match="undefined"):
        exchange_violation(torch.zeros_like)
    with pytest.raises(ValueError, match="undefined"):
        scale_violation(torch.zeros_like, 2.0)
    with pytest.raises(ValueError, match="unknown activation"):
        exchange_violation("swishy")


@given(
    a=st.floats(-6, 6),
    b=st.floats(-6, 6),
    case=st.sampled_from([("relu", None), ("silu", None), ("gelu", None), ("swish", 2.5)]),
)
def test_exchange_violation_map_factorises(a, b, case):
    """Property: σ(a)b − σ(b)a = ab·(g(a) − g(b))."""
    act = resolve(*case)
    ta, tb = torch.tensor(a, dtype=F64), torch.tensor(b, dtype=F64)
    lhs = exchange_violation_map(act, ta, tb)
    rhs = ta * tb * (act.gate(ta) - act.gate(tb))
    torch.testing.assert_close(lhs, rhs, rtol=1e-12, atol=1e-12)


def test_exchange_violation_map_zero_set():
    """The pointwise violation vanishes on both axes and the diagonal; for ReLU on the same-sign
    quadrants too, and not on the mixed-sign ones."""
    t = torch.arange(-30, 31, dtype=F64) / 10  # t[30] == 0 exactly
    a, b = torch.meshgrid(t, t, indexing="ij")
    for name in ("silu", "gelu", "relu"):
        v = exchange_violation_map(name, a, b)
        assert v[30].abs().max() == 0 and v[:, 30].abs().max() == 0
        assert v.diagonal().abs().max() == 0
    relu = exchange_violation_map("relu", a, b)
    assert relu[a * b > 0].abs().max() == 0
    assert (relu[a * b < 0].abs() > 0).all()


def test_scale_violation_map():
    """σ(αa)/α − σ(a): zero for ReLU at α > 0, −|a| at α < 0; α = 0 is rejected."""
    a = torch.linspace(-3, 3, 13, dtype=F64)
    pos = scale_violation_map("relu", a[:, None], torch.tensor([0.5, 2.0], dtype=F64))
    assert pos.abs().max() == 0
    neg = scale_violation_map("relu", a[:, None], torch.tensor([-0.5, -3.0], dtype=F64))
    torch.testing.assert_close(neg, -a.abs()[:, None].expand(-1, 2))
    with pytest.raises(ValueError, match="non-zero"):
        scale_violation_map("silu", a, torch.tensor([1.0, 0.0]))


# ---------------------------------------------------------------------------------------------
# 7. Conserved quantities


def test_conserved_quantities_keys_shapes_values():
    """KeyValueMLP has only "kv"; gated/rank-r layers have "qk", "kv", "qv" of shape (m,) with the
    squared norms summed over rank components, and qv = qk + kv."""
    kv = conserved_quantities(KeyValueMLP(D, M, D_OUT))
    assert list(kv) == ["kv"]
    assert kv["kv"].shape == (M,)
    for mod in (GatedMLP(D, M, D_OUT), GatedRankRMLP(D, M, D_OUT, rank=3)):
        c = conserved_quantities(mod)
        assert list(c) == ["qk", "kv", "qv"]
        assert all(v.shape == (M,) for v in c.values())
        q2 = mod.W_q.detach().reshape(M, -1).pow(2).sum(1)
        k2 = mod.W_k.detach().reshape(M, -1).pow(2).sum(1)
        v2 = mod.W_v.detach().pow(2).sum(1)
        torch.testing.assert_close(c["qk"], q2 - k2)
        torch.testing.assert_close(c["kv"], k2 - v2)
        torch.testing.assert_close(c["qv"], c["qk"] + c["kv"])
        assert not c["qk"].requires_grad


def _drift(variant, lr=0.05, steps=300, weight_decay=0.0):
    """Max over slots of |C(end) − C(start)| after plain SGD on a teacher-student task."""
    task = data.teacher_student(d_in=10, d_out=5, n_train=256, n_test=8, seed=0)
    torch.manual_seed(0)
    mod = GatedMLP(10, 16, 5, variant=variant)
    c0 = conserved_quantities(mod)
    train.train(
        mod,
        train.regression_loss(mod, task),
        steps=steps,
        lr=lr,
        optimizer="sgd",
        weight_decay=weight_decay,
        progress=False,
    )
    c1 = conserved_quantities(mod)
    return {k: float((c1[k] - c0[k]).abs().max()) for k in c0}


@pytest.mark.slow
def test_bilinear_conserves_all_three_swiglu_only_kv():
    """Gradient descent keeps C_qk, C_kv, C_qv of a bilinear layer (and ReGLU) to O(lr), while
    SwiGLU's C_qk (broken scale symmetry) drifts ≫; SwiGLU still keeps C_kv."""
    bil, swi, reg = (_drift(v, steps=1000) for v in ("bilinear", "swiglu", "reglu"))
    assert max(bil.values()) < 0.02
    assert max(reg.values()) < 0.02
    assert swi["qk"] > 10 * bil["qk"]  # measured ≈ 40×
    assert swi["qv"] > 10 * bil["qv"]  # measured ≈ 26×
    assert swi["kv"] < 0.1 * swi["qk"]


def test_bilinear_drift_is_first_order_in_lr():
    """Halving lr (over the same time lr·steps) halves the bilinear drift: it is O(lr)."""
    coarse = _drift("bilinear", lr=0.05, steps=300)["qk"]
    fine = _drift("bilinear", lr=0.025, steps=600)["qk"]
    assert 1.6 < coarse / fine < 2.5


def test_weight_decay_breaks_conservation():
    """With weight decay the bilinear layer's C_qk is no longer conserved."""
    free = _drift("bilinear")
    decayed = _drift("bilinear", weight_decay=1e-2)
    assert decayed["qk"] > 10 * free["qk"]
    assert decayed["kv"] > 10 * free["kv"]


# ---------------------------------------------------------------------------------------------
# 8. Jacobian rank


@pytest.mark.parametrize(
    ("build", "deficit"),
    [
        (lambda: GatedMLP(6, 3, 4, variant="bilinear"), 6),
        (lambda: GatedMLP(6, 3, 4, variant="reglu"), 6),
        (lambda: GatedMLP(6, 3, 4, variant="swiglu"), 3),
        (lambda: GatedMLP(6, 3, 4, variant="geglu"), 3),
        (lambda: SymmetricRank1Bilinear(6, 3, 4, act="silu"), 3),
        (lambda: KeyValueMLP(6, 3, 4, act="silu"), 0),
        (lambda: KeyValueMLP(6, 3, 4, act="relu"), 3),
        (lambda: KeyValueMLP(6, 3, 4, act="identity"), 9),  # GL(3) acting on W_kᵀ W_v
    ],
)
def test_jacobian_rank_deficit(build, deficit):
    """d=6, m=3, d_out=4, 400 inputs: each continuous symmetry removes one direction per slot
    (bilinear/ReGLU 2 per slot, SwiGLU/GEGLU/σ(product) 1). Stable across seeds 0-4 (checked)."""
    torch.manual_seed(0)
    mod = build()
    x = torch.randn(400, 6)
    result = jacobian_rank(mod, x)
    n_params = sum(p.numel() for p in mod.parameters())
    assert result.n_params == n_params
    assert result.deficit == deficit
    assert result.rank == n_params - deficit
    s = result.singular_values
    assert torch.all(s[:-1] >= s[1:])
    # The gap is wide on both sides of the cut (rtol 1e-7): kept values > 1e-3, dropped < 1e-12.
    assert float(s[result.rank - 1] / s[0]) > 1e-3
    if deficit:
        assert float(s[result.rank] / s[0]) < 1e-12
    assert mod.W_v.dtype == torch.float32  # computed on a float64 copy


def test_jacobian_rank_errors():
    """x must be (n, d), give at least as many outputs as parameters, and rtol in (0, 1)."""
    mod = GatedMLP(6, 3, 4)  # 48 parameters, 4 outputs per input
    with pytest.raises(ValueError, match=r"x must have shape \(n, d_model\)"):
        jacobian_rank(mod, torch.randn(2, 3, 6))
    with pytest.raises(ValueError, match=r"fewer than the 48 parameters.*at least 12 inputs"):
        jacobian_rank(mod, torch.randn(11, 6))
    with pytest.raises(ValueError, match=r"rtol must lie in \(0, 1\)"):
        jacobian_rank(mod, torch.randn(12, 6), rtol=0.0)


def test_symmetry_profile_collects_the_metrics():
    """The explorer's profile holds the pointwise map, the gate and both scalar metrics."""
    prof = symmetry_profile("silu", n=11)
    assert prof.label == "SiLU"
    assert prof.grid.shape == (11,) and prof.violation.shape == (11, 11)
    a, b = prof.grid[:, None], prof.grid[None, :]
    torch.testing.assert_close(prof.violation, exchange_violation_map("silu", a, b))
    torch.testing.assert_close(prof.gate, torch.sigmoid(prof.grid))
    assert prof.exchange == exchange_violation("silu")
    assert prof.alphas.shape == (26,) and prof.scale.shape == (26,)
    assert (prof.alphas < 0).sum() == 13 and float(prof.alphas.abs().min()) == pytest.approx(0.1)
    for i in (0, 7, 19):
        expected = scale_violation("silu", float(prof.alphas[i]))
        assert float(prof.scale[i]) == pytest.approx(expected, rel=1e-6)
    glu = symmetry_profile("sigmoid", n=5, alphas=torch.tensor([2.0]))
    assert glu.gate is None
    assert glu.scale.shape == (1,)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_transforms_on_cuda():
    """swap_qk/rescale keep a CUDA float64 layer on its device and dtype, and stay exact."""
    mod = SymmetricRank1Bilinear(D, M, D_OUT, act="gelu").to("cuda", F64)
    x = torch.randn(32, D, dtype=F64, device="cuda")
    with torch.no_grad():
        for new in (swap_qk(mod), rescale(mod, -2.3)):
            assert new.W_q.device.type == "cuda" and new.W_q.dtype == F64
            torch.testing.assert_close(new(x), mod(x), rtol=0, atol=1e-12)


def test_scale_violation_needs_a_number():
    with pytest.raises(TypeError, match="alpha must be a number, got str"):
        scale_violation("silu", "2")


def test_trained_exchange_violation_is_the_ratio_over_inputs_and_slots():
    from kvattn.mlp import GatedMLP
    from kvattn.symmetry import trained_exchange_violation

    torch.manual_seed(0)
    layer = GatedMLP(8, 5, variant="swiglu")
    x = torch.randn(3, 7, 8)
    a = x.reshape(-1, 8).double() @ layer.W_q.detach().double().T
    b = x.reshape(-1, 8).double() @ layer.W_k.detach().double().T
    silu = torch.nn.functional.silu
    expected = ((silu(a) * b - silu(b) * a) ** 2).sum() / ((silu(a) * b) ** 2).sum()
    assert trained_exchange_violation(layer, x) == pytest.approx(float(expected), rel=1e-12)
    # exchange-symmetric case: a linear σ (the bilinear variant) gives exactly 0
    assert trained_exchange_violation(GatedMLP(8, 5, variant="bilinear"), x) == 0.0
    # with q = k for every slot, σ(a)b − σ(b)a = 0 whatever σ is
    with torch.no_grad():
        layer.W_k.copy_(layer.W_q)
    assert trained_exchange_violation(layer, x) == 0.0
    with pytest.raises(ValueError, match=r"shape \(\.\.\., 8\)"):
        trained_exchange_violation(layer, torch.randn(4, 6))
    with pytest.raises(ValueError, match="finite"):
        trained_exchange_violation(layer, torch.full((2, 8), float("nan")))
    with pytest.raises(TypeError, match="no query/key pair"):
        trained_exchange_violation(torch.nn.Linear(8, 8), x)


@pytest.mark.parametrize("act", ["silu", "gelu", "relu"])
def test_correlated_shifted_metrics_agree_with_monte_carlo_and_their_limits(act):
    from kvattn.symmetry import exchange_violation, scale_violation

    kwargs = dict(rho=0.5, mean=0.3)
    q = exchange_violation(act, **kwargs)
    mc = exchange_violation(act, method="monte_carlo", n_samples=1 << 22, seed=1, **kwargs)
    assert q == pytest.approx(mc, rel=0.02)
    q = scale_violation(act, 2.0, **kwargs)
    mc = scale_violation(act, 2.0, method="monte_carlo", n_samples=1 << 22, seed=1, **kwargs)
    assert q == pytest.approx(mc, rel=0.02, abs=1e-12)
    # the 2-D rule at a tiny ρ reproduces the exact 1-D formula of independent inputs
    assert exchange_violation(act, rho=1e-9) == pytest.approx(exchange_violation(act), rel=1e-6)
    # a → b as ρ → 1: nothing left to exchange
    assert exchange_violation(act, rho=0.999) < 1e-3


def test_correlation_outside_the_open_interval_is_refused():
    from kvattn.symmetry import exchange_violation

    with pytest.raises(ValueError, match=r"rho must lie in \(−1, 1\)"):
        exchange_violation("silu", rho=1.0)
    with pytest.raises(ValueError, match="mean must be a finite number"):
        exchange_violation("silu", mean=float("inf"))


def test_trained_exchange_violation_per_slot_pools_to_the_layer_value():
    from kvattn.mlp import GatedMLP
    from kvattn.symmetry import trained_exchange_violation

    torch.manual_seed(1)
    layer = GatedMLP(6, 4, variant="geglu")
    x = torch.randn(50, 6)
    per = trained_exchange_violation(layer, x, per_slot=True)
    assert per.shape == (4,) and bool((per >= 0).all())
    with torch.no_grad():
        a, b = x.double() @ layer.W_q.double().T, x.double() @ layer.W_k.double().T
    weights = (layer.act(a) * b).pow(2).sum(0)
    pooled = float((per * weights).sum() / weights.sum())
    assert pooled == pytest.approx(trained_exchange_violation(layer, x), rel=1e-12)


def test_slot_inputs_standardise_each_slot_and_pool_to_the_layer_violation():
    """Chapter 4's comparison: each slot's (a, b) standardised, its correlation and mean, and the
    whole layer's violation an energy-weighted mean of the slots' (so it can exceed the heaviest
    slot's, but never the largest)."""
    from kvattn.mlp import GatedMLP
    from kvattn.symmetry import slot_inputs, trained_exchange_violation

    torch.manual_seed(2)
    layer = GatedMLP(6, 5, variant="swiglu")
    x = torch.randn(300, 6) + 0.4
    got = slot_inputs(layer, x)
    assert got.a.shape == got.b.shape == (300, 5) and got.rho.shape == (5,)
    torch.testing.assert_close(got.a.std(0), torch.ones(5, dtype=torch.float64))
    with torch.no_grad():
        a = x.double() @ layer.W_q.double().T
        b = x.double() @ layer.W_k.double().T
    for j in range(5):
        r = torch.corrcoef(torch.stack([a[:, j], b[:, j]]))[0, 1]
        assert float(got.rho[j]) == pytest.approx(float(r), abs=1e-12)
        mean = (a[:, j].mean() / a[:, j].std() + b[:, j].mean() / b[:, j].std()) / 2
        assert float(got.mean[j]) == pytest.approx(float(mean), abs=1e-12)
    energy = (torch.nn.functional.silu(a) * b).pow(2).sum(0)
    assert got.heaviest == int(energy.argmax())
    torch.testing.assert_close(got.violation, trained_exchange_violation(layer, x, per_slot=True))
    layer_value = trained_exchange_violation(layer, x)
    assert got.layer_violation == pytest.approx(layer_value, rel=1e-12)
    assert float(got.violation.min()) <= layer_value <= float(got.violation.max())
    # a weighted mean, not a maximum and not the heaviest slot's value
    assert layer_value != pytest.approx(float(got.violation[got.heaviest]), rel=1e-3)
    with pytest.raises(ValueError, match="at least two inputs"):
        slot_inputs(layer, x[:1])
    with torch.no_grad():
        layer.W_q[0].zero_()  # a = 0 for every input: slot 0 has no spread, and σ(0)·b = 0
    with pytest.raises(ValueError, match="σ\\(a\\)b is 0 on every input"):
        slot_inputs(layer, x)
    with pytest.raises(TypeError, match="no query/key pair"):
        slot_inputs(torch.nn.Linear(6, 6), x)
    flat = x.clone()
    flat[:, 0] = 1.0
    with torch.no_grad():
        layer.W_q[0] = torch.eye(6)[0]  # a = 1 on every input: σ(a)b ≠ 0 but no spread
    with pytest.raises(ValueError, match="cannot be standardised"):
        slot_inputs(layer, flat)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (
            {"extent": math.nan},
            ValueError,
            r"^extent must be a finite number > 0, got nan$",
        ),  # NX20
        ({"extent": 0.0}, ValueError, r"^extent must be a finite number > 0, got 0\.0$"),  # NX23
        ({"extent": -1}, ValueError, r"^extent must be a finite number > 0, got -1$"),
        ({"extent": math.inf}, ValueError, r"^extent must be a finite number > 0, got inf$"),
        ({"extent": True}, ValueError, r"^extent must be a finite number > 0, got True$"),
        ({"n": 0}, ValueError, r"^n must be an int >= 2, got 0$"),  # NX21
        ({"n": 2.5}, ValueError, r"^n must be an int >= 2, got 2\.5$"),  # NX22
        ({"n": True}, ValueError, r"^n must be an int >= 2, got True$"),
        (
            {"alphas": [0.5, 2.0]},
            TypeError,
            r"^alphas must be None or a 1-D floating-point",
        ),  # NX25
        (
            {"alphas": torch.tensor([1, 2])},
            TypeError,
            r"floating-point tensor .*, got torch\.int64$",
        ),
        ({"alphas": torch.ones(2, 2)}, ValueError, r"^alphas must be a 1-D tensor of at least one"),
        ({"alphas": torch.tensor([])}, ValueError, r"^alphas must be a 1-D tensor of at least one"),
        ({"alphas": torch.tensor([0.5, 0.0])}, ValueError, r"^alphas must be finite and non-zero"),
        ({"rho": 1.0}, ValueError, r"^rho must lie in \(−1, 1\), got 1\.0$"),
    ],
)
def test_symmetry_profile_checks_every_argument_first(monkeypatch, kwargs, error, match):
    """Audit NX20-NX25: extent, n and alphas were never checked. extent=nan gave an all-NaN map,
    extent=0 a grid of zeros, n=0 or a list of alphas failed later in the explorer's figure and
    n=2.5 in torch.linspace. Each is refused by name before any work (no quadrature runs)."""

    def no_work(*args, **kw):
        raise AssertionError("computed before the arguments were checked")

    monkeypatch.setattr("kvattn.symmetry.profile.exchange_violation_map", no_work)
    with pytest.raises(error, match=match):
        symmetry_profile("silu", **kwargs)
