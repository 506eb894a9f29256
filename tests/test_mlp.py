"""Tests for :mod:`kvattn.mlp`: forward formulas, shapes, dtypes, costs, factories and errors."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from kvattn.mlp import (
    GATED_VARIANTS,
    MLP_KINDS,
    FullBilinearAttentionMLP,
    GatedMLP,
    GatedRankRMLP,
    KeyValueMLP,
    SymmetricRank1Bilinear,
    check_input,
    make_mlp,
    matched_slots,
    mlp_cost,
    score_cut,
    slot_form_report,
    slot_matrices,
    truncate_rank,
)

F64 = torch.float64
D, M, D_OUT = 5, 7, 3

#: One factory per layer class/configuration, all with d_model = D, n_slots = M, d_out = D_OUT.
FACTORIES = {
    "key_value": lambda: KeyValueMLP(D, M, D_OUT),
    **{v: (lambda v=v: GatedMLP(D, M, D_OUT, variant=v)) for v in GATED_VARIANTS},
    "swish_beta": lambda: GatedMLP(D, M, D_OUT, variant="swiglu", beta=2.5),
    "symmetric_rank1": lambda: SymmetricRank1Bilinear(D, M, D_OUT, act="gelu"),
    "full_bilinear_r2": lambda: FullBilinearAttentionMLP(D, M, D_OUT, rank=2),
    "full_bilinear_full": lambda: FullBilinearAttentionMLP(D, M, D_OUT, rank=None, act="relu"),
    "gated_rank_r3": lambda: GatedRankRMLP(D, M, D_OUT, rank=3),
}


def _reference_forward(mod, x):
    """The layer's output computed from its documented formula, slot by slot."""
    act = mod.act
    y = torch.zeros(*x.shape[:-1], mod.d_out, dtype=x.dtype)
    for j in range(mod.n_slots):
        if isinstance(mod, KeyValueMLP):
            h = act(x @ mod.W_k[j])
        elif isinstance(mod, GatedMLP):
            h = act(x @ mod.W_q[j]) * (x @ mod.W_k[j])
        elif isinstance(mod, SymmetricRank1Bilinear):
            h = act((x @ mod.W_q[j]) * (x @ mod.W_k[j]))
        elif isinstance(mod, FullBilinearAttentionMLP):
            Qj, Kj = mod.W_q[j].T, mod.W_k[j].T  # (d, r)
            h = act(torch.einsum("...i,ij,...j->...", x, Qj @ Kj.T, x))
        else:  # GatedRankRMLP
            h = (act(x @ mod.W_q[j].T) * (x @ mod.W_k[j].T)).sum(-1)
        y = y + h[..., None] * mod.W_v[j]
    return y


@pytest.mark.parametrize("name", list(FACTORIES))
def test_forward_matches_documented_formula(name):
    """Each class computes exactly the formula in its docstring (float64)."""
    mod = FACTORIES[name]().to(F64)
    x = torch.randn(11, D, dtype=F64)
    with torch.no_grad():
        torch.testing.assert_close(mod(x), _reference_forward(mod, x), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("lead", [(), (5,), (2, 3)])
@pytest.mark.parametrize("name", list(FACTORIES))
def test_shapes_and_dtype(name, lead, dtype):
    """Any leading shape works, the output is (..., d_out) in the input's dtype, and a batch gives
    the same rows as single inputs."""
    mod = FACTORIES[name]().to(dtype)
    x = torch.randn(*lead, D, dtype=dtype)
    with torch.no_grad():
        y = mod(x)
        assert y.shape == (*lead, D_OUT)
        assert y.dtype == dtype
        assert mod.hidden(x).shape == (*lead, M)
        rows = torch.stack([mod(row) for row in x.reshape(-1, D)])
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    torch.testing.assert_close(y.reshape(-1, D_OUT), rows, rtol=tol, atol=tol)


@pytest.mark.parametrize("variant", list(GATED_VARIANTS))
def test_gated_rank_r_with_rank_one_is_gated_mlp(variant):
    """GatedRankRMLP(rank=1) with the same weights and σ equals GatedMLP."""
    gated = GatedMLP(D, M, D_OUT, variant=variant).to(F64)
    rank_r = GatedRankRMLP(D, M, D_OUT, rank=1, act=gated.act).to(F64)
    with torch.no_grad():
        rank_r.W_q.copy_(gated.W_q[:, None])
        rank_r.W_k.copy_(gated.W_k[:, None])
        rank_r.W_v.copy_(gated.W_v)
    x = torch.randn(2, 3, D, dtype=F64)
    with torch.no_grad():
        torch.testing.assert_close(rank_r(x), gated(x), rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("act", ["identity", "relu", "silu", "gelu", "sigmoid"])
def test_full_bilinear_with_rank_one_is_symmetric_rank1(act):
    """FullBilinearAttentionMLP(rank=1) with the same weights equals SymmetricRank1Bilinear."""
    sym = SymmetricRank1Bilinear(D, M, D_OUT, act=act).to(F64)
    full = FullBilinearAttentionMLP(D, M, D_OUT, rank=1, act=act).to(F64)
    with torch.no_grad():
        full.W_q.copy_(sym.W_q[:, None])
        full.W_k.copy_(sym.W_k[:, None])
        full.W_v.copy_(sym.W_v)
    x = torch.randn(4, D, dtype=F64)
    with torch.no_grad():
        torch.testing.assert_close(full(x), sym(x), rtol=1e-13, atol=1e-13)


def test_gated_rank_r_is_tied_wide_gated_mlp():
    """Form B with m slots of rank r is a gated MLP of width m·r with down projection tied in
    groups of r (the docstring's expressivity remark)."""
    r = 3
    rank_r = GatedRankRMLP(D, M, D_OUT, rank=r, act="silu").to(F64)
    wide = GatedMLP(D, M * r, D_OUT, variant="swiglu").to(F64)
    with torch.no_grad():
        wide.W_q.copy_(rank_r.W_q.reshape(M * r, D))
        wide.W_k.copy_(rank_r.W_k.reshape(M * r, D))
        wide.W_v.copy_(rank_r.W_v.repeat_interleave(r, dim=0))
    x = torch.randn(9, D, dtype=F64)
    with torch.no_grad():
        torch.testing.assert_close(rank_r(x), wide(x), rtol=1e-12, atol=1e-12)


def test_full_bilinear_default_rank_is_d_model():
    """rank=None means r = d_model (the full bilinear form)."""
    mod = FullBilinearAttentionMLP(D, M)
    assert mod.rank == D
    assert mod.W_q.shape == (M, D, D)
    assert mod.d_out == D
    assert "rank=5" in repr(mod)


def test_slot_scores_have_unit_variance_at_init():
    """The documented initialisation: for x ~ N(0, I) every slot score has variance ≈ 1."""
    d, m, n = 64, 64, 4000
    x = torch.randn(n, d)
    with torch.no_grad():
        kv = KeyValueMLP(d, m, act="identity").hidden(x)
        gated = GatedMLP(d, m, variant="bilinear").hidden(x)
        sym = SymmetricRank1Bilinear(d, m, act="identity").hidden(x)
        rank4 = FullBilinearAttentionMLP(d, m, rank=4, act="identity").hidden(x)
    for h in (kv, gated, sym, rank4):
        assert 0.8 < float(h.var(0).mean()) < 1.25


# ---------------------------------------------------------------------------------------------
# Costs


SIZES = [(4, 3, 2, None), (6, 5, 3, 7), (8, 2, 4, 1)]


def _classes(d, m, r, d_out):
    return [
        KeyValueMLP(d, m, d_out),
        GatedMLP(d, m, d_out, variant="geglu"),
        SymmetricRank1Bilinear(d, m, d_out),
        FullBilinearAttentionMLP(d, m, d_out, rank=r),
        FullBilinearAttentionMLP(d, m, d_out, rank=None),
        GatedRankRMLP(d, m, d_out, rank=r),
    ]


@pytest.mark.parametrize(("d", "m", "r", "d_out"), SIZES)
def test_parameter_count_matches_mlp_cost(d, m, r, d_out):
    """sum(p.numel()) equals mlp_cost(form, ...)[0] for every class."""
    for mod in _classes(d, m, r, d_out):
        n_params = sum(p.numel() for p in mod.parameters())
        assert n_params == mlp_cost(mod.form, d, m, mod.rank, d_out)[0], type(mod).__name__


@pytest.mark.parametrize(("d", "m", "r", "d_out"), SIZES)
def test_flops_match_flop_counter(d, m, r, d_out):
    """flops_per_token() equals what FlopCounterMode counts on one token of shape (1, d)."""
    for mod in _classes(d, m, r, d_out):
        counter = FlopCounterMode(display=False)
        with counter, torch.no_grad():
            mod(torch.randn(1, d))
        assert mod.flops_per_token() == counter.get_total_flops(), type(mod).__name__


def test_mlp_cost_table_values():
    """Spot values of the cost table, worked out by hand."""
    assert mlp_cost("key_value", 10, 4, d_out=3) == (52, 104)
    assert mlp_cost("gated", 10, 4) == (120, 240)
    assert mlp_cost("symmetric_rank1", 10, 4) == (120, 240)
    assert mlp_cost("rank_r", 10, 4, rank=3) == (4 * 70, 8 * 70)
    assert mlp_cost("full_matrix", 3, 2, d_out=4) == (26, 64)


def test_full_matrix_flops_match_flop_counter():
    """full_matrix FLOPs = 2m(d² + d + d_out): x M_j, then its dot product with x, then values;
    the same function as rank d stored as factors."""
    d, m, d_out = 6, 4, 3
    mod = FullBilinearAttentionMLP(d, m, d_out, rank=None, act="silu")
    Mj = (mod.W_q.transpose(1, 2) @ mod.W_k).detach()  # (m, d, d): Q_j K_jᵀ
    x = torch.randn(1, d)
    counter = FlopCounterMode(display=False)
    with counter:
        scores = ((x @ Mj) @ x.T).reshape(1, m)  # (m,1,d) then (m,1,1)
        y = F.silu(scores) @ mod.W_v.detach()
    assert counter.get_total_flops() == mlp_cost("full_matrix", d, m, d_out=d_out)[1]
    with torch.no_grad():
        torch.testing.assert_close(y, mod(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("m1", [300, 3000, 30_000])
def test_matched_slots_gated_is_two_thirds(m1):
    """At equal parameters a gated MLP has 2/3 of a key-value MLP's slots (d_out = d)."""
    d = 64
    budget = mlp_cost("key_value", d, m1)[0]
    assert matched_slots("gated", d, budget) == 2 * m1 // 3
    assert mlp_cost("gated", d, matched_slots("gated", d, budget))[0] <= budget


@pytest.mark.parametrize("r", [1, 2, 4, 7])
def test_matched_slots_rank_r(r):
    """Rank r matches rank 1 with 3m₁/(2r+1) slots (d_out = d)."""
    d, m1 = 32, 3 * 5 * 9 * 7  # divisible by every 2r + 1 used
    budget = mlp_cost("symmetric_rank1", d, m1)[0]
    assert matched_slots("rank_r", d, budget, rank=r) == 3 * m1 // (2 * r + 1)


def test_matched_slots_rejects_tiny_budget():
    """A budget below one slot raises ValueError naming the per-slot cost."""
    with pytest.raises(ValueError, match=r"below one gated slot \(30\)"):
        matched_slots("gated", 10, 29)


# ---------------------------------------------------------------------------------------------
# Factory


@pytest.mark.parametrize("kind", MLP_KINDS)
def test_make_mlp_builds_each_kind(kind):
    """make_mlp builds the right class, σ and rank for every kind; rank only where it applies."""
    has_rank = kind in ("full_bilinear", "gated_rank_r")
    mod = make_mlp(kind, 6, 4, 3, rank=2 if has_rank else 1)
    if not has_rank:
        with pytest.raises(ValueError, match="rank applies to"):
            make_mlp(kind, 6, 4, 3, rank=2)
    expected = {
        "key_value": (KeyValueMLP, "relu", 1),
        "symmetric_rank1": (SymmetricRank1Bilinear, "silu", 1),
        "full_bilinear": (FullBilinearAttentionMLP, "silu", 2),
        "gated_rank_r": (GatedRankRMLP, "silu", 2),
    }
    cls, act, rank = expected.get(kind, (GatedMLP, GATED_VARIANTS.get(kind), 1))
    assert type(mod) is cls
    assert mod.act.name == act
    assert mod.rank == rank
    assert (mod.d_model, mod.n_slots, mod.d_out) == (6, 4, 3)
    if cls is GatedMLP:
        assert mod.variant == kind
    assert mod(torch.randn(2, 6)).shape == (2, 3)


def test_make_mlp_options_and_errors():
    """act/beta are forwarded; a gated variant rejects act; unknown kinds are rejected."""
    assert make_mlp("key_value", 4, 2, act="gelu").act.name == "gelu"
    swish = make_mlp("swiglu", 4, 2, beta=3.0).act
    assert (swish.name, swish.beta) == ("swish", 3.0)
    assert make_mlp("full_bilinear", 4, 2, act="relu", rank=3).act.name == "relu"
    with pytest.raises(ValueError, match="fixes its activation"):
        make_mlp("reglu", 4, 2, act="relu")
    with pytest.raises(ValueError, match="unknown kind 'mlp'; expected one of"):
        make_mlp("mlp", 4, 2)
    with pytest.raises(ValueError, match="takes no beta"):
        make_mlp("key_value", 4, 2, beta=2.0)


# ---------------------------------------------------------------------------------------------
# Bad input


@pytest.mark.parametrize("name", list(FACTORIES))
def test_bad_inputs_raise_clear_errors(name):
    """Wrong last dimension, integer/bool dtype, NaN/inf and non-tensors are rejected clearly."""
    mod = FACTORIES[name]()
    with pytest.raises(ValueError, match=rf"expected last dimension {D}, got shape \(2, 4\)"):
        mod(torch.randn(2, D - 1))
    with pytest.raises(ValueError, match=rf"floating-point tensor of shape \(\.\.\., {D}\)"):
        mod(torch.ones(2, D, dtype=torch.long))
    with pytest.raises(ValueError, match="floating-point"):
        mod(torch.ones(2, D, dtype=torch.bool))
    bad = torch.randn(2, D)
    bad[1, 2] = float("nan")
    with pytest.raises(ValueError, match="NaN or infinite"):
        mod(bad)
    bad[1, 2] = float("inf")
    with pytest.raises(ValueError, match="NaN or infinite"):
        mod(bad)
    with pytest.raises(ValueError, match="expected last dimension"):
        mod(torch.tensor(1.0))
    with pytest.raises(TypeError, match=r"torch\.Tensor"):
        mod([[0.0] * D])


def test_check_input_returns_input():
    """A valid input passes through unchanged (same object)."""
    x = torch.randn(3, 4)
    assert check_input(x, 4) is x


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: FullBilinearAttentionMLP(4, 3, rank=0), "rank must be a positive int, got 0"),
        (lambda: GatedRankRMLP(4, 3, rank=-1), "rank must be a positive int, got -1"),
        (lambda: KeyValueMLP(4, 0), "n_slots must be a positive int, got 0"),
        (lambda: GatedMLP(4, -2), "n_slots must be a positive int, got -2"),
        (lambda: SymmetricRank1Bilinear(4, True), "n_slots must be a positive int, got True"),
        (lambda: KeyValueMLP(4, 2.0), "n_slots must be a positive int, got 2.0"),
        (lambda: KeyValueMLP(0, 3), "d_model must be a positive int"),
        (lambda: GatedMLP(4, 3, d_out=0), "d_out must be a positive int"),
        (lambda: GatedMLP(4, 3, variant="swish"), "unknown variant 'swish'; expected one of"),
        (lambda: GatedMLP(4, 3, variant="reglu", beta=2.0), "takes no beta"),
        (lambda: KeyValueMLP(4, 3, act="tanh"), "unknown activation 'tanh'; expected one of"),
        (lambda: mlp_cost("dense", 4, 3), "unknown form 'dense'; expected one of"),
        (lambda: mlp_cost("gated", 4, 0), "n_slots must be a positive int"),
        (lambda: mlp_cost("rank_r", 4, 3, rank=0), "rank must be a positive int"),
    ],
)
def test_bad_configuration_raises_value_error(build, message):
    """Bad sizes, variants, activations and cost forms raise ValueError naming what was expected."""
    with pytest.raises(ValueError, match=message):
        build()


def test_extra_repr_names_the_configuration():
    """repr shows the variant, sizes, rank (when ≠ 1) and σ."""
    assert "variant=swiglu, d_model=5, n_slots=7, d_out=3, act=SiLU" in repr(
        GatedMLP(5, 7, 3, variant="swiglu")
    )
    assert "rank=3" in repr(GatedRankRMLP(5, 7, rank=3))
    assert "rank=" not in repr(SymmetricRank1Bilinear(5, 7))


# ---------------------------------------------------------------------------------------------
# Slot matrices and rank truncation


def test_slot_matrices_give_the_scores():
    """M_j = Q_j K_jᵀ: x M_j xᵀ is slot j's score; for rank 1 it is the outer product q_j k_jᵀ."""
    full = FullBilinearAttentionMLP(D, M, D_OUT, rank=3, act="identity").to(F64)
    Ms = slot_matrices(full)
    assert Ms.shape == (M, D, D)
    x = torch.randn(6, D, dtype=F64)
    with torch.no_grad():
        torch.testing.assert_close(torch.einsum("ni,mij,nj->nm", x, Ms, x), full.hidden(x))
    sym = SymmetricRank1Bilinear(D, M, D_OUT).to(F64)
    torch.testing.assert_close(slot_matrices(sym)[2], torch.outer(sym.W_q[2], sym.W_k[2]).detach())


def test_truncate_rank_is_exact_at_full_rank_and_eckart_young_below():
    """Cutting to a rank ≥ the slots' rank keeps the function; cutting below leaves exactly the
    discarded singular values as Frobenius error; σ, values, dtype are kept."""
    layer = FullBilinearAttentionMLP(D, M, D_OUT, rank=2, act="gelu").to(F64)
    x = torch.randn(2, 3, D, dtype=F64)
    with torch.no_grad():
        for r in (2, D):
            same = truncate_rank(layer, r)
            assert same.rank == r and same.W_q.dtype == F64 and same.act is layer.act
            torch.testing.assert_close(same(x), layer(x), rtol=1e-10, atol=1e-10)
    one = truncate_rank(layer, 1, cut="matrix")
    s = torch.linalg.svdvals(slot_matrices(layer))
    error = (slot_matrices(one) - slot_matrices(layer)).flatten(1).norm(dim=1)
    torch.testing.assert_close(error, s[:, 1:].norm(dim=1), rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(one.W_v, layer.W_v, rtol=0, atol=0)
    rank1 = truncate_rank(SymmetricRank1Bilinear(D, M, D_OUT).to(F64), 1)
    assert rank1.W_q.shape == (M, 1, D)
    with pytest.raises(ValueError, match="rank must be at most d_model=5, got 6"):
        truncate_rank(layer, D + 1)
    with pytest.raises(ValueError, match="rank must be a positive int"):
        truncate_rank(layer, 0)


def test_rank_one_truncation_is_the_symmetric_rank1_form():
    """Theorem (chapter 2, ii): with q_j = √s1 u1 and k_j = √s1 v1 from the SVD of M_j, the slot
    σ(x q_j k_jᵀ xᵀ) is σ((x·q_j)(x·k_j)): the rank-1 cut of a full-rank layer is the symmetric
    rank-1 layer with those weights."""
    layer = FullBilinearAttentionMLP(D, M, D_OUT, rank=D, act="silu").to(F64)
    U, S, Vh = torch.linalg.svd(slot_matrices(layer))
    q = U[:, :, 0] * S[:, :1].sqrt()
    k = Vh[:, 0, :] * S[:, :1].sqrt()
    sym = SymmetricRank1Bilinear(D, M, D_OUT, act="silu").to(F64)
    with torch.no_grad():
        sym.W_q.copy_(q)
        sym.W_k.copy_(k)
        sym.W_v.copy_(layer.W_v)
    x = torch.randn(6, D, dtype=F64)
    with torch.no_grad():
        expected = torch.nn.functional.silu((x @ q.T) * (x @ k.T)) @ layer.W_v
        torch.testing.assert_close(sym(x), expected, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(
            truncate_rank(layer, 1, cut="matrix")(x), expected, rtol=1e-12, atol=1e-12
        )
        assert (layer(x) - expected).abs().max() > 1e-3  # the cut changes a full-rank layer


def sym(M):
    return (M + M.mT) / 2


@pytest.mark.parametrize("rank", [1, 2, 3])
def test_score_cut_keeps_the_extreme_eigenpairs_of_the_symmetric_part(rank):
    """Theorem (chapter 2, best rank-r slot): the cut's symmetric part is sym(M)'s r largest
    positive and r most negative eigenpairs, so its score error ‖sym(M − Q Kᵀ)‖ is the norm of
    the other eigenvalues, never above the SVD cut's (strictly below on random matrices)."""
    M = torch.randn(40, 6, 6, dtype=F64)
    Q, K = score_cut(M, rank)
    assert Q.shape == K.shape == (40, rank, 6)
    N = Q.mT @ K
    assert (torch.linalg.matrix_rank(N) <= rank).all()
    lam, V = torch.linalg.eigh(sym(M))
    keep = torch.zeros_like(lam, dtype=torch.bool)
    keep[:, -rank:] |= lam[:, -rank:] > 0
    keep[:, :rank] |= lam[:, :rank] < 0
    kept = V @ torch.diag_embed(torch.where(keep, lam, 0.0)) @ V.mT
    torch.testing.assert_close(sym(N), kept, rtol=1e-10, atol=1e-10)
    error = (sym(M) - sym(N)).flatten(1).norm(dim=1)
    torch.testing.assert_close(error, torch.where(keep, 0.0, lam).norm(dim=1))
    U, S, Vh = torch.linalg.svd(M)
    svd_cut = U[..., :rank] @ torch.diag_embed(S[:, :rank]) @ Vh[:, :rank]
    svd_error = (sym(M) - sym(svd_cut)).flatten(1).norm(dim=1)
    assert (error <= svd_error + 1e-12).all()
    assert error.mean() < 0.9 * svd_error.mean()


def test_no_rank_one_slot_found_by_descent_beats_the_score_cut():
    """An independent check of optimality: Adam on ‖sym(M − q kᵀ)‖² from 20 random starts
    never ends below the closed-form cut."""
    M = torch.randn(6, 6, dtype=F64)
    Q, K = score_cut(M, 1)
    best = (sym(M) - sym(Q.mT @ K)).norm()
    q = torch.randn(20, 6, dtype=F64, requires_grad=True)
    k = torch.randn(20, 6, dtype=F64, requires_grad=True)
    opt = torch.optim.Adam([q, k], lr=0.03)
    for _ in range(1500):
        loss = (sym(M) - sym(q[:, :, None] * k[:, None, :])).flatten(1).norm(dim=1) ** 2
        opt.zero_grad()
        loss.sum().backward()
        opt.step()
    found = (sym(M) - sym(q[:, :, None] * k[:, None, :])).flatten(1).norm(dim=1).detach()
    assert found.min() >= best - 1e-6
    assert found.min() < best + 1e-3  # descent does reach it: the bound is attained


def test_truncate_rank_score_cut_keeps_the_score_of_a_low_rank_layer():
    """A rank-2 layer cut to rank 2 by the score cut computes the same function (its symmetric
    parts have at most 2 positive and 2 negative eigenvalues); at rank 1 every slot's form is at
    least as close to the original's as the matrix cut's."""
    layer = FullBilinearAttentionMLP(D, M, D_OUT, rank=2, act="gelu").to(F64)
    x = torch.randn(64, D, dtype=F64)
    with torch.no_grad():
        torch.testing.assert_close(truncate_rank(layer, 2)(x), layer(x), rtol=1e-9, atol=1e-9)
    Ms = slot_matrices(layer)
    err = {
        cut: (sym(Ms) - sym(slot_matrices(truncate_rank(layer, 1, cut)))).flatten(1).norm(dim=1)
        for cut in ("score", "matrix")
    }
    assert (err["score"] <= err["matrix"] + 1e-12).all()
    with pytest.raises(ValueError, match="cut must be 'score' or 'matrix', got 'svd'"):
        truncate_rank(layer, 1, cut="svd")
    with pytest.raises(ValueError, match="square matrices"):
        score_cut(torch.randn(3, 4), 1)


def test_mean_squared_score_error_of_gaussian_inputs():
    """The identity behind score_cut's caveat (Isserlis): for x ~ N(0, I) and symmetric D,
    E[(x D xᵀ)²] = 2‖D‖² + (tr D)², so for random inputs the trace of the dropped part counts
    too, and the form-optimal cut need not minimise every input distribution's score error."""
    gen = torch.Generator().manual_seed(3)
    D_ = sym(torch.randn(5, 5, dtype=F64, generator=gen))
    x = torch.randn(400_000, 5, dtype=F64, generator=gen)
    mc = torch.einsum("ni,ij,nj->n", x, D_, x).pow(2)
    exact = 2 * D_.pow(2).sum() + D_.trace() ** 2
    # 5 standard errors of the Monte Carlo mean
    assert (mc.mean() - exact).abs() < 5 * mc.std() / len(mc) ** 0.5


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", list(FACTORIES))
def test_cuda_device_and_dtype_preserved(name, dtype):
    """On CUDA every layer keeps device and dtype and agrees with the CPU result."""
    mod = FACTORIES[name]().to(dtype)
    x = torch.randn(2, 3, D, dtype=dtype)
    with torch.no_grad():
        y_cpu = mod(x)
        y = mod.to("cuda")(x.to("cuda"))
    assert y.device.type == "cuda"
    assert y.dtype == dtype
    tol = 1e-4 if dtype == torch.float32 else 1e-10
    torch.testing.assert_close(y.cpu(), y_cpu, rtol=tol, atol=tol)


def test_rank_is_keyword_only_so_d_out_is_never_mistaken_for_it():
    """FullBilinearAttentionMLP(10, 16, 5) has d_out = 5, like GatedMLP(10, 16, 5)."""
    assert FullBilinearAttentionMLP(10, 16, 5).d_out == 5
    assert FullBilinearAttentionMLP(10, 16, 5).rank == 10
    with pytest.raises(TypeError):
        FullBilinearAttentionMLP(10, 16, 5, 2)  # rank only by name
    with pytest.raises(TypeError):
        GatedRankRMLP(10, 16, 5)  # rank is required


def test_input_dtype_must_match_the_layer():
    layer = GatedMLP(6, 3)
    with pytest.raises(ValueError, match=r"input dtype torch\.float64 differs from the layer"):
        layer(torch.randn(2, 6, dtype=torch.float64))


def test_mlp_cost_and_make_mlp_reject_rank_where_it_does_not_apply():
    with pytest.raises(ValueError, match="rank applies to the 'rank_r' form"):
        mlp_cost("gated", 8, 4, rank=4)
    assert mlp_cost("rank_r", 8, 4, rank=4) == (4 * (2 * 4 * 8 + 8), 2 * 4 * (2 * 4 * 8 + 8))


def test_slot_form_report_measures_each_slot():
    """slot_form_report: a symmetric slot has asymmetry 0 and an antisymmetric one inf; a rank-1
    slot's top singular value carries all of it and both rank-1 cuts keep its score exactly; on a
    full-rank slot the score cut is never farther than Eckart–Young (strictly closer here), and
    the top share is s_1²/Σ s_i² from svdvals."""
    layer = FullBilinearAttentionMLP(4, 3, 2, rank=4, act="silu").to(F64)
    q = torch.randn(4, dtype=F64)
    A = torch.randn(4, 4, dtype=F64)
    with torch.no_grad():
        layer.W_q.zero_()
        layer.W_k.zero_()
        layer.W_q[0, 0], layer.W_k[0, 0] = q, q  # slot 0: q qᵀ, symmetric and rank 1
        layer.W_q[1] = torch.eye(4, dtype=F64)  # slot 1: M = W_q[1]ᵀ W_k[1] = A − Aᵀ
        layer.W_k[1] = A - A.T
        layer.W_q[2], layer.W_k[2] = A, torch.randn(4, 4, dtype=F64)  # slot 2: full rank
    M = slot_matrices(layer)
    torch.testing.assert_close(M[1], A - A.T)
    report = slot_form_report(layer)
    assert set(report) == {"top_share", "asymmetry", "score_cut", "matrix_cut"}
    assert report["asymmetry"][0] == 0 and math.isinf(report["asymmetry"][1])
    torch.testing.assert_close(report["top_share"][0], torch.tensor(1.0, dtype=F64))
    assert report["score_cut"][0] < 1e-12 and report["matrix_cut"][0] < 1e-12
    s = torch.linalg.svdvals(M[2])
    torch.testing.assert_close(report["top_share"][2], s[0] ** 2 / (s**2).sum())
    assert report["score_cut"][2] < report["matrix_cut"][2] - 1e-6
    assert (report["score_cut"] <= report["matrix_cut"] + 1e-12).all()
    with pytest.raises(TypeError, match="got KeyValueMLP"):
        slot_form_report(KeyValueMLP(4, 3))
    with pytest.raises(ValueError, match="rank must be at most d_model=4, got 5"):
        slot_form_report(layer, 5)
