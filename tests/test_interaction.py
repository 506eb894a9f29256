"""Tests for :mod:`kvattn.interaction`: a bilinear layer as a sum of rank-1 QK circuits."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from kvattn.interaction import (
    bilinear_form,
    eigendecompose,
    gated_interaction,
    interaction_tensor,
    output_direction,
    symmetrise,
)
from kvattn.mlp import (
    FullBilinearAttentionMLP,
    GatedMLP,
    GatedRankRMLP,
    KeyValueMLP,
    SymmetricRank1Bilinear,
)
from kvattn.symmetry import swap_qk

F64 = torch.float64
D, M, D_OUT = 5, 6, 3
TOL = {"rtol": 1e-12, "atol": 1e-12}

BILINEAR_LAYERS = {
    "gated_bilinear": lambda: GatedMLP(D, M, D_OUT, variant="bilinear"),
    "symmetric_identity": lambda: SymmetricRank1Bilinear(D, M, D_OUT, act="identity"),
    "full_bilinear_identity_r3": lambda: FullBilinearAttentionMLP(
        D, M, D_OUT, rank=3, act="identity"
    ),
}


@pytest.mark.parametrize("lead", [(17,), (2, 3)])
@pytest.mark.parametrize("name", list(BILINEAR_LAYERS))
def test_interaction_tensor_rewrites_forward(name, lead):
    """For a bilinear layer, y_o = x B_o xᵀ exactly, for batched inputs of any leading shape."""
    mod = BILINEAR_LAYERS[name]().to(F64)
    x = torch.randn(*lead, D, dtype=F64)
    B = interaction_tensor(mod)
    assert B.shape == (D_OUT, D, D)
    assert B.dtype == F64
    with torch.no_grad():
        torch.testing.assert_close(bilinear_form(B, x), mod(x), **TOL)


def test_interaction_tensor_explicit_sum_and_weights_form():
    """B_o = Σ_j P_oj q_j k_jᵀ with P = W_vᵀ; passing the three weights gives the same tensor."""
    mod = GatedMLP(D, M, D_OUT, variant="bilinear").to(F64)
    W_q, W_k, W_v = (p.detach() for p in (mod.W_q, mod.W_k, mod.W_v))
    expected = sum(W_v[j][:, None, None] * torch.outer(W_q[j], W_k[j]) for j in range(M))
    torch.testing.assert_close(interaction_tensor(mod), expected, **TOL)
    torch.testing.assert_close(interaction_tensor(W_q, W_k, W_v), expected, **TOL)
    # Rank-r weights sum over the rank components.
    full = FullBilinearAttentionMLP(D, M, D_OUT, rank=2, act="identity").to(F64)
    rank_r = interaction_tensor(full)
    by_component = sum(
        interaction_tensor(full.W_q[:, s], full.W_k[:, s], full.W_v) for s in range(2)
    )
    torch.testing.assert_close(rank_r, by_component, **TOL)


def test_interaction_tensor_does_not_track_gradients():
    """The tensor is built from detached weights."""
    assert not interaction_tensor(GatedMLP(D, M, D_OUT, variant="bilinear")).requires_grad


def test_symmetrise_keeps_outputs():
    """sym(B) = ½(B + Bᵀ) is symmetric, idempotent and leaves every x B xᵀ unchanged."""
    B = torch.randn(D_OUT, D, D, dtype=F64)
    S = symmetrise(B)
    torch.testing.assert_close(S, S.transpose(-1, -2), rtol=0, atol=0)
    torch.testing.assert_close(symmetrise(S), S, rtol=0, atol=0)
    x = torch.randn(2, 3, D, dtype=F64)
    torch.testing.assert_close(bilinear_form(S, x), bilinear_form(B, x), **TOL)
    assert not torch.allclose(S, B)
    with pytest.raises(ValueError, match="square matrices"):
        symmetrise(torch.randn(3, 4))


def test_eigendecompose_reconstructs_outputs():
    """y_o = Σ_i λ_oi (u_oi·x)² with orthonormal u_oi and ascending λ_oi."""
    mod = GatedMLP(D, M, D_OUT, variant="bilinear").to(F64)
    lam, U = eigendecompose(interaction_tensor(mod))
    assert lam.shape == (D_OUT, D) and U.shape == (D_OUT, D, D)
    assert torch.all(lam[:, 1:] >= lam[:, :-1])
    eye = torch.eye(D, dtype=F64).expand(D_OUT, D, D)
    torch.testing.assert_close(U.transpose(-1, -2) @ U, eye, **TOL)
    x = torch.randn(40, D, dtype=F64)
    proj = torch.einsum("ni,oik->nok", x, U)  # (x·u_ok)
    y = (lam * proj**2).sum(-1)
    with torch.no_grad():
        torch.testing.assert_close(y, mod(x), **TOL)


@given(seed=st.integers(0, 2**16), d=st.integers(2, 7))
def test_single_unit_eigenvalues(seed, d):
    """One unit's sym(q kᵀ) has eigenvalues ½(q·k ± ‖q‖‖k‖) and d − 2 zeros."""
    gen = torch.Generator().manual_seed(seed)
    q, k = torch.randn(2, d, generator=gen, dtype=F64)
    B = interaction_tensor(q[None], k[None], torch.ones(1, 1, dtype=F64))
    lam, _ = eigendecompose(B)
    half_dot, half_norm = 0.5 * (q @ k), 0.5 * q.norm() * k.norm()
    expected = torch.cat(
        [
            (half_dot - half_norm).reshape(1),
            torch.zeros(d - 2, dtype=F64),
            (half_dot + half_norm).reshape(1),
        ]
    )
    torch.testing.assert_close(lam[0], expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("name", ["gated_bilinear", "symmetric_identity"])
def test_swap_changes_B_but_not_its_symmetric_part(name):
    """q ↔ k transposes every B_o (a different tensor) but leaves sym(B) unchanged: symmetrising
    quotients out the exchange symmetry."""
    mod = BILINEAR_LAYERS[name]().to(F64)
    B, B_swapped = interaction_tensor(mod), interaction_tensor(swap_qk(mod))
    torch.testing.assert_close(B_swapped, B.transpose(-1, -2), rtol=0, atol=0)
    assert (B_swapped - B).abs().max() > 1e-3
    torch.testing.assert_close(symmetrise(B_swapped), symmetrise(B), **TOL)


@pytest.mark.parametrize(
    "build",
    [
        lambda: GatedMLP(D, M, D_OUT, variant="swiglu"),
        lambda: GatedMLP(D, M, D_OUT, variant="swiglu", beta=2.5),
        lambda: GatedMLP(D, M, D_OUT, variant="geglu"),
        lambda: GatedMLP(D, M, D_OUT, variant="reglu"),
        lambda: GatedMLP(D, M, D_OUT, variant="bilinear"),
    ],
)
def test_gated_interaction_reproduces_forward(build):
    """B_o(x) = Σ_j P_oj g(q_j·x) q_j k_jᵀ gives the gated output exactly, x of shape (2, 3, d)."""
    mod = build().to(F64)
    x = torch.randn(2, 3, D, dtype=F64)
    Bx = gated_interaction(mod, x)
    assert Bx.shape == (2, 3, D_OUT, D, D)
    with torch.no_grad():
        torch.testing.assert_close(bilinear_form(Bx, x), mod(x), **TOL)


def test_gated_interaction_of_bilinear_is_input_independent():
    """With identity σ the gate is 1: B(x) is the static interaction tensor for every x."""
    mod = GatedMLP(D, M, D_OUT, variant="bilinear").to(F64)
    Bx = gated_interaction(mod, torch.randn(4, D, dtype=F64))
    torch.testing.assert_close(Bx, interaction_tensor(mod).expand(4, -1, -1, -1), **TOL)


def test_gated_interaction_of_swiglu_depends_on_input():
    """For SwiGLU the interaction matrix changes with x (the gate reweights the QK circuits)."""
    mod = GatedMLP(D, M, D_OUT, variant="swiglu").to(F64)
    Bx = gated_interaction(mod, torch.randn(2, D, dtype=F64))
    assert (Bx[0] - Bx[1]).abs().max() > 1e-3


def test_gated_interaction_errors():
    """Sigmoid GLU (σ(0) ≠ 0) raises ValueError; non-gated layers raise TypeError; bad x too."""
    x = torch.randn(3, D)
    with pytest.raises(ValueError, match="pole"):
        gated_interaction(GatedMLP(D, M, D_OUT, variant="glu"), x)
    for mod in (
        KeyValueMLP(D, M, D_OUT),
        SymmetricRank1Bilinear(D, M, D_OUT),
        GatedRankRMLP(D, M, D_OUT, rank=2),
    ):
        with pytest.raises(TypeError, match="expected a GatedMLP"):
            gated_interaction(mod, x)
    with pytest.raises(ValueError, match="expected last dimension 5"):
        gated_interaction(GatedMLP(D, M, D_OUT), torch.randn(3, D + 1))


def test_output_direction():
    """Q_u = Σ_o u_o B_o: x Q_u xᵀ = u·y, and a basis vector picks out B_o."""
    mod = GatedMLP(D, M, D_OUT, variant="bilinear").to(F64)
    B = interaction_tensor(mod)
    u = torch.randn(D_OUT, dtype=F64)
    Qu = output_direction(B, u)
    assert Qu.shape == (D, D)
    x = torch.randn(10, D, dtype=F64)
    with torch.no_grad():
        torch.testing.assert_close(torch.einsum("ni,ij,nj->n", x, Qu, x), mod(x) @ u, **TOL)
    torch.testing.assert_close(output_direction(B, torch.eye(D_OUT, dtype=F64)[1]), B[1])
    with pytest.raises(ValueError, match=r"u must have shape \(3,\)"):
        output_direction(B, torch.ones(D_OUT + 1, dtype=F64))


def test_interaction_tensor_errors():
    """Wrong arguments raise TypeError/ValueError saying what is needed."""
    mod = GatedMLP(D, M, D_OUT, variant="bilinear")
    with pytest.raises(TypeError, match="either a module or the three weights"):
        interaction_tensor(mod, mod.W_k)
    with pytest.raises(TypeError, match="needs all three weights"):
        interaction_tensor(mod.W_q, mod.W_k)
    with pytest.raises(TypeError, match="has no W_q, W_k, W_v"):
        interaction_tensor(KeyValueMLP(D, M))
    with pytest.raises(ValueError, match="W_q and W_k must both have shape"):
        interaction_tensor(torch.randn(M, D), torch.randn(M, D + 1), torch.randn(M, 2))
    with pytest.raises(ValueError, match=r"W_v must have shape \(6, d_out\)"):
        interaction_tensor(torch.randn(M, D), torch.randn(M, D), torch.randn(M + 1, 2))
    with pytest.raises(ValueError, match="NaN"):
        bilinear_form(interaction_tensor(mod), torch.full((2, D), float("nan")))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_interaction_on_cuda():
    """On CUDA the tensors stay on the device in float64 and the rewrites remain exact."""
    mod = GatedMLP(D, M, D_OUT, variant="swiglu").to("cuda", F64)
    x = torch.randn(2, 3, D, dtype=F64, device="cuda")
    Bx = gated_interaction(mod, x)
    assert Bx.device.type == "cuda" and Bx.dtype == F64
    with torch.no_grad():
        torch.testing.assert_close(bilinear_form(Bx, x), mod(x), **TOL)
    bil = GatedMLP(D, M, D_OUT, variant="bilinear").to("cuda", F64)
    lam, _ = eigendecompose(interaction_tensor(bil))
    assert lam.device.type == "cuda"


def test_interaction_tensor_checks_its_weights():
    import numpy as np

    W = torch.randn(3, 4)
    with pytest.raises(TypeError, match=r"W_q must be a torch\.Tensor, got ndarray"):
        interaction_tensor(np.zeros((3, 4)), W, torch.randn(3, 2))
    with pytest.raises(ValueError, match="W_k must be a floating-point tensor"):
        interaction_tensor(W, torch.ones(3, 4, dtype=torch.long), torch.randn(3, 2))


def test_bilinear_form_names_a_batch_mismatch():
    B = torch.randn(5, 2, 4, 4)  # batched over 5
    with pytest.raises(ValueError, match=r"needs leading shape \(5,\)"):
        bilinear_form(B, torch.randn(3, 4))
