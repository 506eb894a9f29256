"""Diagnostics of PLGA's deductive tensors, each on a constructed case with a known answer."""

import json
import math
import re
from pathlib import Path

import pytest
import torch

from kvattn import diagnostics as D
from kvattn import losses


def _rot(angle: float) -> torch.Tensor:
    c, s = math.cos(angle), math.sin(angle)
    return torch.tensor([[c, -s], [s, c]], dtype=torch.float64)


def rope_matrix(d_k: int, position: int, interleaved: bool, theta: float = 10000.0):
    """The d_k × d_k RoPE rotation at ``position`` built from its planes."""
    R = torch.zeros(d_k, d_k, dtype=torch.float64)
    for i, (a, b) in enumerate(D.rope_planes(d_k, interleaved)):
        block = _rot(position * theta ** (-2 * i / d_k))
        R[a, a], R[a, b], R[b, a], R[b, b] = block[0, 0], block[0, 1], block[1, 0], block[1, 1]
    return R


# --- DAG losses ------------------------------------------------------------------------------


def test_dag_loss_is_zero_for_a_dag():
    """A strictly upper-triangular M is the adjacency of a DAG: M∘M is nilpotent, tr e^{M∘M} = d
    and both the reference loss and NOTEARS h vanish."""
    torch.manual_seed(0)
    M = torch.randn(3, 6, 6, dtype=torch.float64).triu(1)
    assert torch.allclose(losses.dag_loss(M), torch.zeros(3, dtype=torch.float64), atol=1e-12)
    assert torch.allclose(D.notears_h(M), torch.zeros(3, dtype=torch.float64), atol=1e-10)


def test_dag_loss_floor_for_entries_bounded_away_from_zero():
    """Theorem (chapter 8): |M_ij| ≥ ε everywhere ⇒ ℓ(M) ≥ log(1 + ε²); checked on random matrices
    with |M_ij| ≥ ε and on matrices with every entry ±ε, whose loss has a closed form."""
    gen = torch.Generator().manual_seed(12)
    for eps in (1e-3, 0.1, 0.5, 1.0):
        signs = torch.randint(0, 2, (50, 6, 6), generator=gen).double() * 2 - 1
        M = signs * (eps + torch.rand(50, 6, 6, generator=gen, dtype=torch.float64))
        assert bool((losses.dag_loss(M) >= math.log1p(eps**2)).all())
        edge = eps * signs  # every entry exactly ±ε: the loss is log(tr e^{ε²𝟙𝟙ᵀ}/d)
        expected = math.log((6 - 1 + math.exp(6 * eps**2)) / 6)
        torch.testing.assert_close(
            losses.dag_loss(edge), torch.full((50,), expected, dtype=torch.float64)
        )
        assert expected >= math.log1p(eps**2)


def test_log_trace_matches_direct_computation_where_it_does_not_overflow():
    torch.manual_seed(1)
    M = torch.randn(4, 8, 8, dtype=torch.float64)
    direct = torch.log(torch.linalg.matrix_exp(M * M).diagonal(dim1=-2, dim2=-1).sum(-1))
    assert torch.allclose(losses.log_trace_expm_squared(M), direct, rtol=1e-10)
    h = D.notears_h(M)
    assert torch.allclose(losses.dag_loss(M), torch.log1p(h / 8).abs(), rtol=1e-10)


def test_dag_loss_does_not_overflow_float32_and_has_finite_gradients():
    """Entries of 8 give tr e^{M∘M} ≈ e^{64·d}, far beyond float32 (and float64 for d = 64); the
    shifted computation stays finite: log tr = ρ(M∘M) + log(multiplicity) for a constant matrix."""
    d = 64
    M = torch.full((2, d, d), 8.0, requires_grad=True)
    loss = losses.dag_loss(M)
    # M∘M = 64·𝟙𝟙ᵀ has eigenvalues 64d (once) and 0 (d−1 times): tr e = e^{64d} + d − 1
    expected = 64 * d + math.log1p((d - 1) * math.exp(-64 * d)) - math.log(d)
    assert torch.allclose(loss, torch.full((2,), expected), rtol=1e-5)
    loss.sum().backward()
    assert torch.isfinite(M.grad).all()
    assert torch.isinf(D.notears_h(M.detach())).all()


def test_dag_loss_gradient_matches_finite_differences():
    torch.manual_seed(2)
    M = (0.5 * torch.randn(5, 5, dtype=torch.float64)).requires_grad_()
    assert torch.autograd.gradcheck(lambda m: losses.dag_loss(m), (M,))


# --- order parameters ------------------------------------------------------------------------


def test_order_parameter_known_values():
    x1 = torch.full((10, 4), 2.0)
    x2 = x1 + torch.tensor([0.1, -0.1, 0.1, -0.1])
    assert D.order_parameter(x1, x1) == 0.0
    assert D.order_parameter(x1, x2, "mean") == pytest.approx(0.1 / 2.0)
    rms2 = math.sqrt(((2.1**2) + (1.9**2)) / 2)
    assert D.order_parameter(x1, x2, "rms") == pytest.approx(0.1 / (0.5 * (2.0 + rms2)))
    assert D.order_parameter(x1, -x1, "rms") == pytest.approx(2.0)  # the bound
    with pytest.raises(ValueError, match="normalisation"):
        D.order_parameter(x1, x2, "max")
    with pytest.raises(ValueError, match="shapes differ"):
        D.order_parameter(x1, x2[:3])


# --- rank-1 audit ----------------------------------------------------------------------------


def test_rank_audit_of_identical_rows_and_heads():
    """A = 𝟙αᵀ with the same α in every head: rank 1, σ2/σ1 ≈ 0, identical rows and heads."""
    alpha = torch.randn(16, dtype=torch.float64)
    A = torch.ones(16, 1, dtype=torch.float64) * alpha
    stack = A.expand(2, 3, 16, 16)  # [B, H, d, d]
    audit = D.rank_audit(stack, head_dim=1)
    assert (audit.rank == 1).all()
    assert (audit.sigma_ratio < 1e-12).all()
    assert (audit.row_spread < 1e-20).all()
    assert audit.head_spread == pytest.approx(0.0, abs=1e-15)


def test_identical_rows_have_the_rank_one_properties():
    """Theorem (chapter 9): A = 𝟙αᵀ has σ1 = √d‖α‖ and σ2 = 0, A² = (Σα)A with eigenvector 𝟙,
    and q A = (q·𝟙)αᵀ for every row vector q."""
    gen = torch.Generator().manual_seed(11)
    d = 7
    alpha = torch.randn(d, dtype=torch.float64, generator=gen)
    ones = torch.ones(d, 1, dtype=torch.float64)
    A = ones * alpha
    s = torch.linalg.svdvals(A)
    assert float(s[0]) == pytest.approx(math.sqrt(d) * float(alpha.norm()), rel=1e-12)
    assert float(s[1:].abs().max()) < 1e-12
    torch.testing.assert_close(A @ A, alpha.sum() * A)
    torch.testing.assert_close(A @ ones, alpha.sum() * ones)
    q = torch.randn(3, d, dtype=torch.float64, generator=gen)
    torch.testing.assert_close(q @ A, q.sum(1, keepdim=True) * alpha)


def test_rank_audit_of_random_matrices():
    torch.manual_seed(3)
    A = torch.randn(2, 3, 16, 16, dtype=torch.float64)
    audit = D.rank_audit(A)
    assert (audit.rank == 16).all()
    assert (audit.sigma_ratio > 0.2).all()
    assert (audit.row_spread > 0.5).all()
    assert audit.head_spread > 0.5


# --- Perron–Frobenius ------------------------------------------------------------------------


def test_perron_frobenius_matches_eig_on_positive_matrices():
    torch.manual_seed(4)
    A = torch.rand(3, 10, 10, dtype=torch.float64) + 1e-9
    lam, v = D.perron_frobenius(A)
    eig = torch.linalg.eigvals(A)
    assert torch.allclose(lam, eig.abs().amax(-1), rtol=1e-9)
    assert (v > 0).all()
    assert torch.allclose(v.sum(-1), torch.ones(3, dtype=torch.float64))
    assert torch.allclose(A @ v[..., None], lam[:, None, None] * v[..., None], atol=1e-9)


def test_perron_frobenius_needs_positive_entries():
    with pytest.raises(ValueError, match="positive"):
        D.perron_frobenius(torch.eye(3))


# --- RoPE commutant --------------------------------------------------------------------------


@pytest.mark.parametrize("interleaved", [True, False])
def test_commutant_projection_commutes_with_rope_and_is_orthogonal(interleaved):
    torch.manual_seed(5)
    d_k = 8
    G = torch.randn(d_k, d_k, dtype=torch.float64)
    P = D.commutant_projection(G, interleaved)
    for position in [1, 3, 17]:
        R = rope_matrix(d_k, position, interleaved)
        assert torch.allclose(R @ P, P @ R, atol=1e-12)
        assert not torch.allclose(R @ G, G @ R, atol=1e-3)
    # G − Π(G) is orthogonal to the commutant (Frobenius inner product with Π of anything)
    other = D.commutant_projection(torch.randn(d_k, d_k, dtype=torch.float64), interleaved)
    assert float(((G - P) * other).sum()) == pytest.approx(0.0, abs=1e-12)
    assert torch.allclose(D.commutant_projection(P, interleaved), P)  # idempotent


@pytest.mark.parametrize("interleaved", [True, False])
def test_commutant_residual_zero_for_rotation_scalings_and_one_for_off_block(interleaved):
    d_k = 8
    G = torch.zeros(d_k, d_k, dtype=torch.float64)
    for i, (a, b) in enumerate(D.rope_planes(d_k, interleaved)):
        G[a, a] = G[b, b] = 1.0 + i
        G[b, a], G[a, b] = 0.5 * i, -0.5 * i
    assert float(D.commutant_residual(G, interleaved)) == pytest.approx(0.0, abs=1e-15)
    off = torch.zeros(d_k, d_k, dtype=torch.float64)
    a0, _ = D.rope_planes(d_k, interleaved)[0]
    a1, _ = D.rope_planes(d_k, interleaved)[1]
    off[a0, a1] = 1.0  # couples two different planes: nothing of it is in the commutant
    assert float(D.commutant_residual(off, interleaved)) == pytest.approx(1.0)


def test_relative_position_scores_for_commuting_g():
    """If G commutes with RoPE, q_m G k_nᵀ (rotated) depends only on m − n."""
    torch.manual_seed(6)
    d_k = 8
    G = D.commutant_projection(torch.randn(d_k, d_k, dtype=torch.float64))
    q, k = torch.randn(d_k, dtype=torch.float64), torch.randn(d_k, dtype=torch.float64)

    def score(m, n):
        return (q @ rope_matrix(d_k, m, True).T) @ G @ (k @ rope_matrix(d_k, n, True).T)

    for delta in (-3, 0, 4):
        scores = [float(score(n + delta, n)) for n in range(0, 40, 7) if n + delta >= 0]
        assert max(scores) - min(scores) < 1e-12, (delta, scores)
    assert abs(float(score(5, 2)) - float(score(5, 1))) > 1e-3  # but it does depend on m − n
    generic = torch.randn(
        d_k, d_k, dtype=torch.float64
    )  # outside the commutant: absolute positions
    moved = [
        float((q @ rope_matrix(d_k, n + 3, True).T) @ generic @ (k @ rope_matrix(d_k, n, True).T))
        for n in (0, 7, 14)
    ]
    assert max(moved) - min(moved) > 1e-3


# --- attention heads as bilinear forms -------------------------------------------------------


def _gpt(**kw):
    from kvattn.config import PLDRConfig
    from kvattn.pldr import GPT

    cfg = PLDRConfig(
        vocab_size=60,
        hidden_size=16,
        num_attention_heads=2,
        num_hidden_layers=2,
        max_position_embeddings=32,
        **kw,
    )
    torch.manual_seed(0)
    model = GPT(cfg).double()
    with torch.no_grad():  # non-zero biases so that the [x, 1] form is exercised
        for layer in model.decoder.dec_layers:
            layer.mha1.wq.bias.normal_()
            layer.mha1.wk.bias.normal_()
    return model


def test_rope_rotation_composes_to_relative_positions():
    attn = _gpt().decoder.dec_layers[0].mha1
    R3, R5, R2 = (D.rope_rotation(attn, p) for p in (3, 5, 2))
    assert torch.allclose(R5 @ R3.T, R2, atol=1e-12)
    assert torch.allclose(R3 @ R3.T, torch.eye(8, dtype=torch.float64), atol=1e-12)


@pytest.mark.parametrize("reference_rope", [True, False])
def test_head_bilinear_form_reproduces_the_attention_weights(reference_rope):
    """softmax([x_i, 1] M(i − j) [x_j, 1]ᵀ / √d_k) over j ≤ i equals the model's E exactly."""
    model = _gpt(reference_rope=reference_rope)
    ids = torch.randint(4, 60, (1, 9))
    with torch.no_grad():
        x = model.decoder.layernorm1(model.decoder.embedding(ids) * model.decoder.scale)[0]
        E = model(ids, output_pldr_attentions=True).pldr_attentions[0].E[0]
    x1 = torch.cat([x, torch.ones(9, 1, dtype=torch.float64)], 1)
    attn = model.decoder.dec_layers[0].mha1
    for head in range(2):
        scores = torch.full((9, 9), float("-inf"), dtype=torch.float64)
        for i in range(9):
            for j in range(i + 1):
                M = D.head_bilinear_form(attn, head, i - j, with_bias=True)
                scores[i, j] = x1[i] @ M @ x1[j] / 8**0.5
        assert torch.allclose(torch.softmax(scores, -1), E[head], atol=1e-12)


def test_swapping_query_and_key_transposes_the_forms_and_keeps_self_scores():
    model = _gpt()
    swapped = D.swap_attention_qk(model)
    a, b = model.decoder.dec_layers[1].mha1, swapped.decoder.dec_layers[1].mha1
    M, Ms = D.head_bilinear_form(a, 0, 0, True), D.head_bilinear_form(b, 0, 0, True)
    assert torch.allclose(Ms, M.T, atol=1e-12)
    x = torch.randn(5, 17, dtype=torch.float64)
    assert torch.allclose(
        torch.einsum("si,ij,sj->s", x, M, x), torch.einsum("si,ij,sj->s", x, Ms, x), atol=1e-10
    )
    assert D.asymmetry(M) > 0.1 and D.asymmetry(M + M.T) < 1e-12
    assert D.asymmetry(M - M.T) == pytest.approx(2.0)


def test_head_bilinear_form_refuses_plga_layers():
    from kvattn.config import PLDRConfig
    from kvattn.pldr import PLDRLLM

    model = PLDRLLM(
        PLDRConfig(
            vocab_size=60,
            hidden_size=16,
            num_attention_heads=2,
            num_hidden_layers=1,
            num_reslayerA=1,
            max_position_embeddings=32,
        )
    )
    with pytest.raises(ValueError, match="one bilinear form per distance"):
        D.head_bilinear_form(model.decoder.dec_layers[0].mha1, 0)


def test_deductive_profile_of_a_constant_g_model_has_no_spread():
    """A constant-G model's G_LM is the same for every prompt: zero spread and order parameter;
    a PLGA model's is not."""
    from kvattn.config import PLDRConfig
    from kvattn.pldr import PLDRLLM

    cfg = dict(
        vocab_size=60,
        hidden_size=16,
        num_attention_heads=2,
        num_hidden_layers=1,
        num_reslayerA=1,
        max_position_embeddings=32,
    )
    torch.manual_seed(1)
    plga = PLDRLLM(PLDRConfig(**cfg)).double()
    with torch.no_grad():
        plga.decoder.dec_layers[0].mha1.plgatt_layer.P.mul_(50)  # make G depend on the input
    prompts = [torch.randint(4, 60, (1, n)) for n in (5, 8, 11)]
    profile = D.deductive_profile(D.deductive_tensors(plga, prompts), 0, 1)
    assert profile.order["G_LM"] > 1e-6 and profile.spread["G_LM"].abs().max() > 0
    assert set(profile.first) == set(D.DEDUCTIVE)
    assert profile.order_rms["G_LM"] > 1e-6 and profile.relative_spread("G_LM") > 0
    with pytest.raises(ValueError, match="at least two prompts"):
        D.deductive_profile(D.deductive_tensors(plga, prompts[:1]), 0, 0)
    from kvattn.ablations import constant_g_from

    with torch.no_grad():
        G = [o.G_LM[0] for o in plga(prompts[0], output_pldr_attentions=True).pldr_attentions]
    fixed = D.deductive_profile(
        D.deductive_tensors(constant_g_from(plga, G), prompts), 0, 1, label="constant-G"
    )
    assert set(fixed.first) == {"G_LM"} and fixed.label == "constant-G"
    torch.testing.assert_close(fixed.first["G_LM"], G[0][1].double())
    assert fixed.order["G_LM"] == fixed.order_rms["G_LM"] == fixed.relative_spread("G_LM") == 0.0
    profile0 = D.head_profile(_gpt(), torch.randint(4, 60, (1, 7)), 1, 0, max_distance=4)
    assert profile0.E.shape == (7, 7) and profile0.asym.shape == (4,)
    assert torch.allclose(profile0.E.sum(-1), torch.ones(7, dtype=torch.float64))


def test_layer_queries_and_twirl_match_the_density():
    """The queries read by hook give the model's own density; twirl(S = all) is A0 / S."""
    from kvattn.config import PLDRConfig
    from kvattn.pldr import PLDRLLM

    torch.manual_seed(3)
    model = PLDRLLM(
        PLDRConfig(
            vocab_size=60,
            hidden_size=16,
            num_attention_heads=2,
            num_hidden_layers=2,
            num_reslayerA=1,
            max_position_embeddings=32,
        )
    ).double()
    ids = torch.randint(4, 60, (1, 10))
    for layer in range(2):
        q = D.layer_queries(model, ids, layer)  # [H, S, d_k]
        with torch.no_grad():
            A0 = model(ids, output_pldr_attentions=True).pldr_attentions[layer].A0[0]
        assert torch.allclose(q.transpose(-1, -2) @ q, A0, atol=1e-10)
        densities = D.twirl(model, ids, layer, 1, [3, 10])
        assert torch.allclose(densities[10], A0[1] / 10, atol=1e-12)
    raw = D.layer_queries(model, ids, 0, rope=False)
    assert torch.allclose(raw.norm(dim=-1), D.layer_queries(model, ids, 0).norm(dim=-1))
    assert not torch.allclose(raw, D.layer_queries(model, ids, 0))
    with pytest.raises(ValueError, match="lengths go up to 11"):
        D.twirl(model, ids, 0, 0, [11])


# --- bad input (issue 9) ---------------------------------------------------------------------


def test_order_parameter_of_identical_runs_is_zero_and_zero_mean_raises():
    """Identical runs are 0 under both normalisations, all-zero tensors included (the 'rms'
    ratio would be 0/0); a zero mean of x1 leaves the 'mean' normalisation undefined: it raises
    (it returned inf) and names the alternative."""
    zeros = torch.zeros(4, 4)
    centred = torch.tensor([[1.0, -1.0], [2.0, -2.0]])
    assert D.order_parameter(zeros, zeros) == 0.0
    assert D.order_parameter(zeros, zeros, "rms") == 0.0
    assert D.order_parameter(centred, centred.clone()) == 0.0
    with pytest.raises(ValueError, match=r"mean 0.*normalisation='rms'"):
        D.order_parameter(centred, centred + 0.1)
    assert D.order_parameter(centred, centred + 0.1, "rms") == pytest.approx(
        0.1 / (0.5 * (math.sqrt(2.5) + math.sqrt((1.1**2 + 0.9**2 + 2.1**2 + 1.9**2) / 4)))
    )
    assert D.order_parameter(zeros, zeros + 1.0, "rms") == pytest.approx(2.0)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_order_parameter_refuses_non_finite_and_empty_inputs(bad):
    x = torch.ones(3, 3)
    y = x.clone()
    y[1, 2] = bad
    for a, b, name in [(x, y, "x2"), (y, x, "x1")]:
        with pytest.raises(ValueError, match=f"{name} has 1 non-finite"):
            D.order_parameter(a, b)
    with pytest.raises(ValueError, match="empty"):
        D.order_parameter(torch.ones(0), torch.ones(0))


def test_rank_audit_defines_zero_matrices_and_checks_its_input():
    """A zero matrix has rank 0 and, by definition, ratios 0 (they were NaN); non-finite input,
    d < 2 and a head axis that is not a leading axis (it silently averaged over columns) raise."""
    audit = D.rank_audit(torch.zeros(2, 3, 4, 4))
    assert (audit.rank == 0).all()
    assert (audit.sigma_ratio == 0).all() and (audit.row_spread == 0).all()
    assert audit.head_spread == 0.0
    mixed = torch.zeros(2, 4, 4, dtype=torch.float64)
    mixed[1] = torch.eye(4)  # one zero head and one identity: heads differ
    audit = D.rank_audit(mixed, head_dim=0)
    assert audit.rank.tolist() == [0, 4] and audit.sigma_ratio.tolist() == [0.0, 1.0]
    assert audit.head_spread == pytest.approx(0.5**0.5)  # RMS of ±I/2 over the RMS of [0, I]
    A = torch.randn(4, 4)
    with pytest.raises(ValueError, match=r"no head axis: pass head_dim=None"):
        D.rank_audit(A)  # [d, d] has no head axis
    with pytest.raises(ValueError, match=r"head_dim must be in 0 … 0, got 1"):
        D.rank_audit(A[None])
    assert D.rank_audit(A, head_dim=None).head_spread is None
    with pytest.raises(ValueError, match="d ≥ 2"):
        D.rank_audit(torch.ones(3, 1, 1), head_dim=None)
    A[2, 2] = float("nan")
    with pytest.raises(ValueError, match="A has 1 non-finite"):
        D.rank_audit(A, head_dim=None)


def test_perron_frobenius_refuses_non_finite_input_and_bad_settings():
    A = torch.ones(2, 3, 3)
    A[1, 0, 0] = float("inf")  # positive, so the positivity check let it through to NaN
    with pytest.raises(ValueError, match="A_LM has 1 non-finite"):
        D.perron_frobenius(A)
    with pytest.raises(ValueError, match="iterations"):
        D.perron_frobenius(torch.ones(3, 3), iterations=0)
    with pytest.raises(ValueError, match="tol"):
        D.perron_frobenius(torch.ones(3, 3), tol=float("nan"))
    with pytest.raises(ValueError, match=r"\(\.\.\., d, d\)"):
        D.perron_frobenius(torch.ones(3, 4))
    lam, v = D.perron_frobenius(torch.ones(3, 3, dtype=torch.float32))
    assert lam.dtype == torch.float64 and float(lam) == pytest.approx(3.0)
    torch.testing.assert_close(v, torch.full((3,), 1 / 3, dtype=torch.float64))


def test_dag_losses_define_zero_and_refuse_non_finite_or_overflowing_input():
    """ℓ(0) = h(0) = 0 (0 is a DAG); NaN, inf and entries whose square overflows raise instead
    of returning NaN."""
    zero = torch.zeros(2, 5, 5)
    assert torch.equal(losses.dag_loss(zero), torch.zeros(2))
    torch.testing.assert_close(D.notears_h(zero), torch.zeros(2, dtype=torch.float64))
    for bad in (float("nan"), float("inf"), 1e200):
        M = torch.zeros(4, 4, dtype=torch.float64)
        M[0, 1] = bad
        for f in (losses.dag_loss, D.notears_h, losses.log_trace_expm_squared):
            with pytest.raises(ValueError, match="M∘M has 1 non-finite"):
                f(M)
    with pytest.raises(ValueError, match=r"\(\.\.\., d, d\)"):
        losses.dag_loss(torch.ones(3, 4))


def test_commutant_residual_and_asymmetry_of_zero_are_zero():
    """0 is in the commutant and is symmetric (both were 0/0 = NaN); non-finite input raises."""
    assert float(D.commutant_residual(torch.zeros(6, 6))) == 0.0
    assert D.asymmetry(torch.zeros(3, 3)) == 0.0
    G = torch.eye(6)
    G[0, 5] = float("inf")
    with pytest.raises(ValueError, match="G has 1 non-finite"):
        D.commutant_residual(G)
    with pytest.raises(ValueError, match="M has 1 non-finite"):
        D.asymmetry(G)
    with pytest.raises(ValueError, match="even int"):
        D.commutant_residual(torch.eye(5))
    with pytest.raises(ValueError, match=r"G must have shape \(\.\.\., d, d\)"):
        D.commutant_projection(torch.ones(4, 6))


def test_layer_head_and_distance_indices_are_checked():
    """Out-of-range indices gave bare IndexErrors (or, negative, silently another head)."""
    gpt = _gpt()
    ids = torch.randint(4, 60, (1, 6))
    attn = gpt.decoder.dec_layers[0].mha1
    with pytest.raises(ValueError, match=r"head must be in 0 … 1, got 2"):
        D.head_bilinear_form(attn, 2)
    with pytest.raises(ValueError, match=r"head must be in 0 … 1, got -1"):
        D.head_bilinear_form(attn, -1)
    with pytest.raises(TypeError, match="head must be an int"):
        D.head_bilinear_form(attn, 1.0)
    for distance in (-1, 32):
        with pytest.raises(ValueError, match=rf"distance must be in 0 … 31, got {distance}"):
            D.head_bilinear_form(attn, 0, distance)
    with pytest.raises(ValueError, match=r"layer must be in 0 … 1, got 2"):
        D.head_profile(gpt, ids, 2, 0)
    with pytest.raises(ValueError, match=r"head must be in 0 … 1, got 5"):
        D.head_profile(gpt, ids, 0, 5)
    with pytest.raises(ValueError, match=r"max_distance must be in 1 … 32, got 0"):
        D.head_profile(gpt, ids, 0, 0, max_distance=0)
    with pytest.raises(ValueError, match=r"layer must be in 0 … 1, got -1"):
        D.layer_queries(gpt, ids, -1)
    with pytest.raises(ValueError, match="ids must have shape"):
        D.layer_queries(gpt, ids[0], 0)
    with pytest.raises(ValueError, match=r"head must be in 0 … 1, got 2"):
        D.twirl(gpt, ids, 0, 2, [3])
    for lengths in ([], [0, 3]):
        with pytest.raises(ValueError, match="lengths must be a non-empty list"):
            D.twirl(gpt, ids, 0, 0, lengths)
    outputs = D.deductive_tensors(_gpt_as_plga(), [ids, ids.flip(1)])
    with pytest.raises(ValueError, match=r"layer must be in 0 … 0, got 1"):
        D.deductive_profile(outputs, 1, 0)
    with pytest.raises(ValueError, match=r"head must be in 0 … 1, got 2"):
        D.deductive_profile(outputs, 0, 2)


def _gpt_as_plga():
    from kvattn.config import PLDRConfig
    from kvattn.pldr import PLDRLLM

    torch.manual_seed(2)
    return PLDRLLM(
        PLDRConfig(
            vocab_size=60,
            hidden_size=16,
            num_attention_heads=2,
            num_hidden_layers=1,
            num_reslayerA=1,
            max_position_embeddings=32,
        )
    )


def test_deductive_profile_marks_an_undefined_order_parameter_as_nan():
    """A tensor whose first-prompt value has mean exactly 0 has no SOC order parameter: nan
    (documented), not inf and not an error that would stop the explorers."""
    from types import SimpleNamespace

    def outputs(A):
        base = torch.ones(1, 1, 2, 2)
        return [SimpleNamespace(A=A, A_LM=base, A_P=base, G_LM=2 * base)]

    centred = torch.tensor([[1.0, -1.0], [3.0, -3.0]])[None, None]
    profile = D.deductive_profile([outputs(centred), outputs(centred + 1)], 0, 0)
    assert math.isnan(profile.order["A"]) and profile.order["G_LM"] == 0.0
    same = D.deductive_profile([outputs(centred), outputs(centred.clone())], 0, 0)
    assert same.order["A"] == 0.0


# --- chapter 9: collapse measured by what it does ----------------------------------------------


def _attend(q, k, v, G):
    d_k = q.shape[-1]
    E = torch.softmax(q @ G @ k.mT / math.sqrt(d_k), dim=-1)
    return E @ v


@pytest.mark.parametrize("scale", [1e-3, 0.1, 3.0])
def test_attention_shift_bound_holds(scale):
    """Near-invariance theorem (chapter 9): moving G by Δ moves every head output by at most
    ‖q_i‖ ‖Δ‖₂ · 2 max‖k_j‖ · max‖v_j‖ / √d_k; checked on random heads, small and large Δ."""
    gen = torch.Generator().manual_seed(7)
    for _ in range(20):
        q, k = torch.randn(2, 3, 9, 8, dtype=torch.float64, generator=gen).unbind(0)
        v = torch.randn(3, 9, 5, dtype=torch.float64, generator=gen)
        G = torch.randn(3, 8, 8, dtype=torch.float64, generator=gen)
        delta = scale * torch.randn(3, 8, 8, dtype=torch.float64, generator=gen)
        moved = (_attend(q, k, v, G + delta) - _attend(q, k, v, G)).norm(dim=-1)
        bound = D.attention_shift_bound(q, k, v, delta)
        assert bound.shape == (3, 9)
        assert (moved <= bound + 1e-12).all()


def test_attention_shift_bound_is_linear_and_zero_at_zero():
    q, k, v = torch.randn(4, 6), torch.randn(7, 6), torch.randn(7, 3)
    delta = torch.randn(6, 6)
    b1, b2 = D.attention_shift_bound(q, k, v, delta), D.attention_shift_bound(q, k, v, 2 * delta)
    torch.testing.assert_close(b2, 2 * b1)
    assert (D.attention_shift_bound(q, k, v, torch.zeros(6, 6)) == 0).all()
    assert b1.dtype == torch.float64 and b1.device.type == "cpu"
    with pytest.raises(ValueError, match="shapes do not fit"):
        D.attention_shift_bound(q, k, v[:3], delta)
    with pytest.raises(ValueError, match="non-finite"):
        D.attention_shift_bound(q, k, v, torch.full((6, 6), math.nan))


@pytest.fixture(scope="module")
def tiny_pldr():
    from kvattn.checkpoint import load_pretrained
    from kvattn.data import shipped

    return load_pretrained(shipped("pldr_tiny"))


@pytest.fixture(scope="module")
def constant_pldr(tiny_pldr):
    """pldr_tiny's weights with one random G per layer: a constant-G model."""
    from kvattn.ablations import constant_g_from

    gen = torch.Generator().manual_seed(0)
    cfg = tiny_pldr.config
    shape = (cfg.num_attention_heads, cfg.d_k, cfg.d_k)
    return constant_g_from(
        tiny_pldr, [torch.randn(shape, generator=gen) for _ in range(cfg.num_hidden_layers)]
    )


def test_g_substitution_is_exactly_zero_for_a_constant_g_model(tiny_pldr, constant_pldr):
    """A constant-G model's G_LM is the same for every input: substituting any donor's changes
    nothing, exactly."""
    constant = constant_pldr
    ids = torch.randint(4, tiny_pldr.config.vocab_size, (2, 33))
    donors = [torch.randint(4, tiny_pldr.config.vocab_size, (1, n)) for n in (10, 20)]
    r = D.g_substitution(constant, ids, donors)
    assert (r.delta_loss == 0).all() and (r.agreement == 1).all()
    assert r.identity_delta != 0 and r.share_of_g_effect == 0


def test_g_substitution_on_the_trained_model(tiny_pldr):
    """On pldr_tiny a donor's G_LM changes the loss far less than removing G_LM (G = I) does:
    the functional measure sees what the order parameter hides."""
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(4, tiny_pldr.config.vocab_size, (2, 65), generator=gen)
    donors = [torch.randint(4, tiny_pldr.config.vocab_size, (1, 40), generator=gen)]
    r = D.g_substitution(tiny_pldr, ids, donors)
    assert r.delta_loss.shape == r.agreement.shape == (1,)
    assert 0 < r.agreement.item() <= 1
    assert abs(r.delta_loss.item()) < abs(r.identity_delta)
    assert r.share_of_g_effect == pytest.approx(r.delta_loss.item() / r.identity_delta)
    with pytest.raises(ValueError, match="at least one donor"):
        D.g_substitution(tiny_pldr, ids, [])


def test_g_substitution_of_a_constant_g_model_is_exactly_zero_on_long_blocks(constant_pldr):
    """Regression (full build of chapter 9): on 16 blocks of 128 tokens the constant-G model's own
    loss came from prefix passes and its donors' from a full pass, and rounding left Δ ≠ 0."""
    constant = constant_pldr
    cfg = constant.config
    ids = torch.randint(4, cfg.vocab_size, (8, cfg.max_position_embeddings + 1))
    r = D.g_substitution(constant, ids, [ids[:1, :30]])
    assert (r.delta_loss == 0).all() and (r.agreement == 1).all()


def test_attention_input_is_what_each_layer_reads_and_leaves_the_forward_unchanged(tiny_pldr):
    """Layer 0 reads LayerNorm(√d · embedding); layer 1 reads layer 0's output. Capturing it must
    not change the model's forward (a pre-hook that returns a value would replace the layer's
    arguments, dropping its mask)."""
    ids = torch.tensor([[0, 5, 9, 0, 17, 3]])  # pad id 0 inside: the mask matters
    dec = tiny_pldr.decoder
    with torch.no_grad():
        expected0 = dec.layernorm1(dec.embedding(ids) * dec.scale)
        assert torch.equal(D.attention_input(tiny_pldr, ids, 0), expected0)
        mask = torch.ones(6, 6, dtype=torch.bool).tril()[None, None] & (ids != 0)[:, None, None]
        mask = torch.where(mask.any(-1, keepdim=True), mask, torch.ones_like(mask).tril())
        expected1 = dec.dec_layers[0](expected0, mask)[0]
        torch.testing.assert_close(D.attention_input(tiny_pldr, ids, 1), expected1)
        before = tiny_pldr(ids).logits
        D.attention_input(tiny_pldr, ids, 1)
        assert torch.equal(tiny_pldr(ids).logits, before)
    with pytest.raises(ValueError, match="layer"):
        D.attention_input(tiny_pldr, ids, 5)


# --- issue 10: order parameters during training --------------------------------------------------


def _tiny_pldr(seed: int = 0, **kw):
    from kvattn.config import PLDRConfig
    from kvattn.pldr import PLDRLLM

    torch.manual_seed(seed)
    cfg = dict(
        vocab_size=60,
        hidden_size=16,
        num_attention_heads=2,
        num_hidden_layers=2,
        num_reslayerA=1,
        max_position_embeddings=32,
    )
    return PLDRLLM(PLDRConfig(**{**cfg, **kw}))


def _probe_inputs(seed: int = 5):
    gen = torch.Generator().manual_seed(seed)
    probes = [torch.randint(4, 60, (1, 16), generator=gen) for _ in range(3)]
    return probes, torch.randint(4, 60, (3, 17), generator=gen)


@pytest.mark.parametrize("density", ["block", "prefix"])
def test_collapse_measures_are_positive_at_initialisation(density):
    """A freshly initialised PLGA model's G_LM depends on its input and its A is far from rank 1
    (the audit's random-init control: σ2/σ1 ≈ 0.7): every measure is positive and finite; the
    model keeps its mode and the global random stream is untouched."""
    model = _tiny_pldr(density=density).train()
    probes, eval_ids = _probe_inputs()
    state = torch.get_rng_state()
    m = D.collapse_measures(model, probes, eval_ids)
    assert torch.equal(torch.get_rng_state(), state) and model.training
    for name in D.COLLAPSE_LAYER_MEASURES:
        assert m.heads[name].shape == (2, 2) and m.heads[name].dtype == torch.float64
        assert (m.heads[name] > 0).all() and torch.isfinite(m.heads[name]).all(), name
        torch.testing.assert_close(m.layers(name), m.heads[name].mean(-1))
    assert 0.3 < float(m.heads["A_sigma_ratio"].min()) <= float(m.heads["A_sigma_ratio"].max()) < 1
    assert m.delta_loss != 0 and 0 < m.agreement < 1
    assert m.share_of_g_effect == pytest.approx(m.delta_loss / m.identity_delta)
    record = m.as_record()
    assert record["G_order_rms"] == m.layers("G_order_rms").tolist()
    assert record["G_spread_heads"] == m.heads["G_spread"].tolist()
    assert record["agreement"] == m.agreement
    # the order parameter is the deductive profile's, head by head
    outputs = D.deductive_tensors(model, probes)
    if density == "block":
        profile = D.deductive_profile(outputs, 1, 0)
        assert m.heads["G_order_mean"][1, 0] == profile.order["G_LM"]
        assert m.heads["G_spread"][1, 0] == profile.relative_spread("G_LM")


def test_collapse_measures_are_exactly_zero_for_a_constant_g_model():
    """A constant-G model has one G_LM for every input: order parameters, spread and the loss
    change of substituting a donor's G_LM are exactly 0; it has no A (nan, None in the record)."""
    from kvattn.ablations import constant_g_from

    model = _tiny_pldr()
    probes, eval_ids = _probe_inputs()
    with torch.no_grad():
        G = [o.G_LM[0] for o in model(probes[0], output_pldr_attentions=True).pldr_attentions]
    m = D.collapse_measures(constant_g_from(model, G), probes, eval_ids)
    for name in ("G_order_mean", "G_order_rms", "G_spread"):
        assert (m.heads[name] == 0).all(), name
    assert m.delta_loss == 0 and m.agreement == 1 and m.share_of_g_effect == 0
    assert m.identity_delta != 0
    assert (
        torch.isnan(m.heads["A_sigma_ratio"]).all() and torch.isnan(m.layers("A_row_spread")).all()
    )
    assert m.as_record()["A_sigma_ratio"] == [None, None]


def test_collapse_measures_refuse_bad_input():
    model = _tiny_pldr()
    probes, eval_ids = _probe_inputs()
    with pytest.raises(TypeError, match="a GPT has no G_LM"):
        D.collapse_measures(_gpt(), probes, eval_ids)
    with pytest.raises(ValueError, match="at least two probes"):
        D.collapse_measures(model, probes[:1], eval_ids)
    with pytest.raises(ValueError, match=r"probes\[1\] must have shape \(1, S\)"):
        D.collapse_measures(model, [probes[0], probes[1][0]], eval_ids)
    with pytest.raises(TypeError, match=r"probes\[0\] must be a tensor"):
        D.collapse_measures(model, [[1, 2], probes[1]], eval_ids)
    with pytest.raises(ValueError, match=r"ids must have shape \[B, S \+ 1\]"):
        D.collapse_measures(model, probes, eval_ids[0])


def test_row_map_gain_matches_a_finite_difference_jacobian():
    """The gain is the median over visited rows of ‖∂φ/∂r‖₂ of the metric learner's row map:
    recomputed here by central differences on every row of one head, in float64."""
    model = _tiny_pldr(num_reslayerA=2).double()
    probes, _ = _probe_inputs()
    gain = D.row_map_gain(model, probes[:2])
    assert gain.shape == (2, 2) and gain.dtype == torch.float64
    attention = model.decoder.dec_layers[1].mha1
    outputs = D.deductive_tensors(model, probes[:2])
    rows = torch.cat([attention.layernorm1(o[1].A0[:, 0]) for o in outputs]).reshape(-1, 8)

    def phi(r):
        for unit in attention.reslayerAs:
            r = unit(r)
        return r

    h = 1e-6
    norms = []
    with torch.no_grad():
        for r in rows:
            J = torch.stack([(phi(r + h * e) - phi(r - h * e)) / (2 * h) for e in torch.eye(8)], 1)
            norms.append(torch.linalg.matrix_norm(J, ord=2))
    assert float(gain[1, 0]) == pytest.approx(float(torch.stack(norms).median()), rel=1e-6)


def test_row_map_gain_is_zero_for_a_flat_row_map_and_one_for_a_passive_unit():
    """Row-map collapse in its extreme form: the last unit's LayerNorm gain γ = 0 makes every row
    of A equal to β whatever the input (gain exactly 0); a unit that adds nothing has gain 1.
    The model's mode is restored."""
    model = _tiny_pldr(num_reslayerA=2).train()
    probes, _ = _probe_inputs()
    with torch.no_grad():
        for block in model.decoder.dec_layers:
            block.mha1.reslayerAs[-1].layernormA.weight.zero_()
    assert (D.row_map_gain(model, probes) == 0).all() and model.training
    # a unit whose GLU blocks add nothing is LayerNorm of a LayerNormed row: a projection that
    # removes the mean and the row's own direction, gain 1 (up to LayerNorm's eps)
    passive = _tiny_pldr(num_reslayerA=1, layer_norm_eps=1e-12)
    with torch.no_grad():
        for block in passive.decoder.dec_layers:
            for dense in block.mha1.reslayerAs[0].denseAs:
                for parameter in dense.gluw3.parameters():
                    parameter.zero_()
    torch.testing.assert_close(
        D.row_map_gain(passive, probes), torch.ones(2, 2, dtype=torch.float64), rtol=1e-5, atol=0
    )
    trained_like = D.row_map_gain(_tiny_pldr(num_reslayerA=2), probes)
    assert (trained_like > 0.3).all()  # a random metric learner is far from flat


def test_row_map_gain_refuses_models_without_a_metric_learner_and_bad_probes():
    from kvattn.ablations import constant_g_from

    model = _tiny_pldr()
    probes, _ = _probe_inputs()
    with pytest.raises(TypeError, match="PLDRLLM with PLGA"):
        D.row_map_gain(_gpt(), probes)
    G = [torch.eye(8).expand(2, 8, 8) for _ in range(2)]
    with pytest.raises(TypeError, match="PLDRLLM with PLGA"):
        D.row_map_gain(constant_g_from(model, G), probes)
    with pytest.raises(ValueError, match="one or more probes"):
        D.row_map_gain(model, [])
    with pytest.raises(ValueError, match=r"probes\[0\] must have shape \(1, S\)"):
        D.row_map_gain(model, [probes[0][0]])


# --- issue 28: bad input is refused up front, with the expected form named ----------------------


class _NoForward:
    """Fails the test if the model's decoder ran inside the block: the input was refused only
    after work had been done."""

    def __init__(self, model):
        self.model, self.calls = model, []

    def __enter__(self):
        hook = self.calls.append
        self.handle = self.model.decoder.register_forward_pre_hook(lambda m, a: hook(m))
        return self

    def __exit__(self, *exc):
        self.handle.remove()
        assert not self.calls, "the model ran before the input was refused"


def _causal_models():
    """A prefix-density PLGA model and a constant-G model: the causal PLDRLLMs, whose own loss
    is a full pass (no generation-mode check on the targets)."""
    from kvattn.ablations import constant_g_from

    model = _tiny_pldr()
    G = [torch.randn(2, 8, 8, generator=torch.Generator().manual_seed(i)) for i in range(2)]
    return {"prefix": _tiny_pldr(density="prefix"), "constant-G": constant_g_from(model, G)}


def test_g_substitution_refuses_a_model_without_g_lm_before_any_work():
    """A GPT ran its generation-mode pass, then failed on 'NoneType' object has no attribute
    'ndim' at the first donor."""
    probes, eval_ids = _probe_inputs()
    gpt = _gpt()
    with _NoForward(gpt), pytest.raises(TypeError, match=r"PLDRLLM \(PLGA or constant-G"):
        D.g_substitution(gpt, eval_ids, probes)


def test_g_substitution_refuses_donors_that_are_not_a_list_of_single_sequences():
    """A donor of batch 2 was accepted and only its first row used; donors as one tensor failed
    on the truth value of a tensor; a float donor failed inside the model."""
    model = _tiny_pldr()
    probes, eval_ids = _probe_inputs()
    pair = torch.cat(probes[:2])  # [2, S]: two donors in one tensor
    with _NoForward(model):
        with pytest.raises(ValueError, match=r"donors\[0\] must have shape \(1, S\).*\(2, 16\)"):
            D.g_substitution(model, eval_ids, [pair])
        with pytest.raises(TypeError, match=r"donors must be a list of token-id tensors.*Tensor"):
            D.g_substitution(model, eval_ids, pair)
        with pytest.raises(TypeError, match=r"donors\[1\] must be a tensor of int64"):
            D.g_substitution(model, eval_ids, [probes[0], probes[1].float()])
        with pytest.raises(ValueError, match="at least one donor"):
            D.g_substitution(model, eval_ids, ())


def test_g_substitution_refuses_eval_blocks_of_the_wrong_type():
    """ids as a list failed on .ndim; int32 ids failed inside the cross-entropy, after every
    pass had been run."""
    model = _tiny_pldr()
    probes, eval_ids = _probe_inputs()
    with _NoForward(model):
        with pytest.raises(TypeError, match="ids must be an int64 tensor of token ids, got list"):
            D.g_substitution(model, eval_ids.tolist(), probes)
        with pytest.raises(TypeError, match=r"ids must be an int64 tensor.*int32"):
            D.g_substitution(model, eval_ids.int(), probes)
        with pytest.raises(ValueError, match=r"ids must have shape \[B, S \+ 1\].*\(0, 17\)"):
            D.g_substitution(model, eval_ids[:0], probes)


@pytest.mark.parametrize("kind", ["prefix", "constant-G"])
def test_all_pad_targets_are_refused_instead_of_giving_nan_losses(kind):
    """A causal model with every target pad_token_id gave NaN losses (mean over no target) in
    g_substitution and collapse_measures; now both refuse before running the model."""
    model = _causal_models()[kind]
    probes, _ = _probe_inputs()
    pad = model.config.pad_token_id
    blocks = torch.full((2, 9), pad)
    blocks[:, 0] = 7  # real inputs, padded targets only
    with _NoForward(model):
        with pytest.raises(ValueError, match=rf"every target ids\[:, 1:\] is pad_token_id = {pad}"):
            D.g_substitution(model, blocks, probes)
        with pytest.raises(ValueError, match=r"every target eval_ids\[:, 1:\] is pad_token_id"):
            D.collapse_measures(model, probes, blocks)
    blocks[1, 4] = 11  # one real target is enough: finite losses
    r = D.g_substitution(model, blocks, probes)
    assert math.isfinite(r.loss) and torch.isfinite(r.delta_loss).all()


def test_collapse_measures_refuse_eval_ids_and_probes_of_the_wrong_type_before_any_work():
    """eval_ids as a list failed on .to after the probes' passes; probes as one tensor read as
    'too few probes'."""
    model = _tiny_pldr()
    probes, eval_ids = _probe_inputs()
    with _NoForward(model):
        with pytest.raises(TypeError, match=r"eval_ids must be an int64 tensor.*got list"):
            D.collapse_measures(model, probes, eval_ids.tolist())
        with pytest.raises(TypeError, match="probes must be a list of token-id tensors"):
            D.collapse_measures(model, torch.cat(probes), eval_ids)


def test_share_of_g_effect_is_nan_without_a_g_effect():
    """identity_delta = 0 (G_LM = I already) raised ZeroDivisionError; collapse_measures
    documents nan for it, and so does the property now."""
    r = D.GSubstitution(2.0, torch.tensor([0.5, 0.25], dtype=torch.float64), torch.ones(2), 0.0)
    assert math.isnan(r.share_of_g_effect)
    assert D.GSubstitution(2.0, r.delta_loss, r.agreement, 1.5).share_of_g_effect == 0.25


def test_attention_shift_bound_refuses_no_keys_and_shapes_that_do_not_broadcast():
    """k and v with no position failed inside amax; a 1-D k failed on a tuple index; leading
    axes that do not broadcast failed in the final product."""
    q, k, v, delta = torch.randn(4, 6), torch.randn(7, 6), torch.randn(7, 3), torch.randn(6, 6)
    with pytest.raises(ValueError, match=r"no positions \(S_k = 0\)"):
        D.attention_shift_bound(q, k[:0], v[:0], delta)
    with pytest.raises(ValueError, match="shapes do not fit"):
        D.attention_shift_bound(q, k[0], v, delta)
    with pytest.raises(ValueError, match="shapes do not fit"):
        D.attention_shift_bound(q.expand(3, 4, 6), k.expand(2, 7, 6), v, delta)
    # no query is fine: an empty bound
    assert D.attention_shift_bound(q[:0], k, v, delta).shape == (0,)


def test_deductive_profile_refuses_gpt_outputs_and_batches():
    """A GPT's outputs (no G_LM) failed on 'NoneType' has no attribute 'ndim'; a batch of two
    prompts was profiled by its first row only; deductive_tensors took such a batch, or a tensor
    of prompts, without a word."""
    ids = torch.randint(4, 60, (2, 6), generator=torch.Generator().manual_seed(3))
    gpt_outputs = D.deductive_tensors(_gpt(), [ids[:1], ids[1:]])
    with pytest.raises(TypeError, match="no G_LM"):
        D.deductive_profile(gpt_outputs, 0, 0)
    model = _tiny_pldr()
    batched = [model(ids, output_pldr_attentions=True).pldr_attentions] * 2
    with pytest.raises(ValueError, match=r"one prompt each.*\(2, 2, 8, 8\)"):
        D.deductive_profile(batched, 0, 0)
    with pytest.raises(ValueError, match=r"prompts\[0\] must have shape \(1, S\)"):
        D.deductive_tensors(model, [ids])
    with pytest.raises(TypeError, match="prompts must be a list"):
        D.deductive_tensors(model, ids)


def test_deductive_profile_of_the_prefix_density_takes_the_last_position():
    """The prefix density's [1, H, S, d_k, d_k] tensors were stacked whole: prompts of different
    lengths failed in torch.stack, equal lengths gave [S, d_k, d_k] 'first' tensors pooled over
    positions. Now each prompt's tensors at its last position, as collapse_measures takes them."""
    model = _tiny_pldr(density="prefix")
    probes, _ = _probe_inputs()
    prompts = [probes[0], probes[1][:, :9]]
    outputs = D.deductive_tensors(model, prompts)
    profile = D.deductive_profile(outputs, 1, 1)
    last = [D.cpu64(o[1].G_LM[0, 1, -1]) for o in outputs]
    assert profile.first["G_LM"].shape == (8, 8)
    assert torch.equal(profile.first["G_LM"], last[0])
    assert profile.order_rms["G_LM"] == D.order_parameter(last[0], last[1], "rms") > 0


def test_commutant_projection_refuses_integer_and_non_tensor_input():
    """An integer G was projected into an integer tensor: α = 1.5 became 1, silently."""
    G = torch.tensor([[1, 0], [0, 2]])
    with pytest.raises(TypeError, match=r"G must be a floating-point tensor, got torch.int64"):
        D.commutant_projection(G)
    with pytest.raises(TypeError, match=r"G must be a floating-point tensor, got list"):
        D.commutant_projection(G.tolist())
    assert torch.equal(D.commutant_projection(G.double()), 1.5 * torch.eye(2, dtype=torch.float64))


def test_dag_losses_refuse_integer_and_non_tensor_input():
    """An integer M failed in torch.finfo inside the Perron bound; a list failed on .ndim."""
    for f in (losses.dag_loss, losses.log_trace_expm_squared):
        with pytest.raises(TypeError, match=r"M must be a floating-point tensor, got torch.int64"):
            f(torch.ones(3, 3, dtype=torch.int64))
        with pytest.raises(TypeError, match=r"M must be a floating-point tensor, got list"):
            f([[0.0, 1.0], [0.0, 0.0]])


def test_head_profile_refuses_pldr_models_and_bad_arguments_before_the_forward_pass():
    """A PLDRLLM ran its forward pass before head_bilinear_form refused it; ids as a list failed
    on .ndim; a float max_distance passed the range check and failed in range()."""
    model = _tiny_pldr()
    gpt = _gpt()
    ids = torch.randint(4, 60, (1, 6))
    with _NoForward(model), pytest.raises(ValueError, match="scaled dot-product attention"):
        D.head_profile(model, ids, 0, 0)
    with _NoForward(gpt):
        with pytest.raises(TypeError, match="max_distance must be an int, got float"):
            D.head_profile(gpt, ids, 0, 0, max_distance=2.5)
        with pytest.raises(TypeError, match=r"ids must be a tensor of int64.*got list"):
            D.head_profile(gpt, ids.tolist(), 0, 0)
    assert D.head_profile(gpt, ids, 1, 1, max_distance=3).asym.shape == (3,)


def test_layer_functions_refuse_the_wrong_model_ids_and_lengths():
    """A module that is not a PLDRLLM or GPT failed on a missing attribute; float ids and
    lengths failed inside the model or in slicing; a length beyond the input was noticed only
    after the forward pass."""
    gpt = _gpt()
    ids = torch.randint(4, 60, (1, 6))
    other = torch.nn.Linear(4, 4)
    for call in (
        lambda: D.attention_input(other, ids, 0),
        lambda: D.layer_queries(other, ids, 0),
        lambda: D.twirl(other, ids, 0, 0, [3]),
    ):
        with pytest.raises(TypeError, match="model must be a PLDRLLM or GPT, got Linear"):
            call()
    with pytest.raises(TypeError, match=r"ids must be a tensor of int64.*float32"):
        D.layer_queries(gpt, ids.float(), 0)
    with _NoForward(gpt):
        for lengths in (3, [2.5], torch.tensor([2, 3])):
            with pytest.raises(TypeError, match="lengths must be a list of ints"):
                D.twirl(gpt, ids, 0, 0, lengths)
        with pytest.raises(ValueError, match="lengths go up to 7 but the input has 6 tokens"):
            D.twirl(gpt, ids, 0, 0, [3, 7])
    with pytest.raises(TypeError, match=r"attention module.*got GPT"):
        D.head_bilinear_form(gpt, 0)
    with pytest.raises(TypeError, match=r"attention module.*got GPT"):
        D.rope_rotation(gpt, 0)


def test_row_map_gain_refuses_probes_of_the_wrong_type():
    """Probes as one tensor read as 'no probes'; float probes failed inside the model."""
    model = _tiny_pldr()
    probes, _ = _probe_inputs()
    with _NoForward(model):
        with pytest.raises(TypeError, match="probes must be a list of token-id tensors"):
            D.row_map_gain(model, probes[0])
        with pytest.raises(TypeError, match=r"probes\[0\] must be a tensor of int64.*float32"):
            D.row_map_gain(model, [probes[0].float()])


# --- audit of the bad input the diagnostics accepted or refused unclearly ------------------------


def test_repeated_probes_are_refused_instead_of_reading_as_collapse():
    """Audit D03: collapse_measures(M, [p, p], ev) gave G order parameters of exactly 0, the
    reading of a collapsed model; deductive_tensors and row_map_gain took repeats too. Now all
    three refuse a repeated probe before the model runs; donors of g_substitution may repeat."""
    model = _tiny_pldr()
    probes, eval_ids = _probe_inputs()
    repeated = [probes[0], probes[1], probes[0].clone()]
    with _NoForward(model):
        with pytest.raises(
            ValueError,
            match=r"^probes\[2\] repeats probes\[0\]: each of the probes must be a different "
            r"input \(a repeat compared with itself reads as an input-invariant G_LM, a false "
            r"collapse\)$",
        ):
            D.collapse_measures(model, repeated, eval_ids)
        with pytest.raises(
            ValueError, match=r"^prompts\[2\] repeats prompts\[0\]: each of the prompts"
        ):
            D.deductive_tensors(model, repeated)
        with pytest.raises(ValueError, match=r"^probes\[2\] repeats probes\[0\]"):
            D.row_map_gain(model, repeated)
    # the same tokens in a longer probe are a different input
    m = D.collapse_measures(model, [probes[0], probes[0][:, :9]], eval_ids)
    assert (m.heads["G_order_rms"] > 0).all()
    r = D.g_substitution(model, eval_ids, [probes[0], probes[0]])
    assert r.delta_loss[0] == r.delta_loss[1]


def test_eval_ids_and_probes_on_the_meta_device_are_refused_by_name():
    """Audit D14: g_substitution with eval_ids on the meta device failed in torch internals
    ('Tensor.item() cannot be called on meta tensors')."""
    model = _tiny_pldr()
    probes, eval_ids = _probe_inputs()
    with _NoForward(model):
        with pytest.raises(
            ValueError,
            match=r"^ids is on the meta device, which holds no values: pass token ids on the "
            r"model's device$",
        ):
            D.g_substitution(model, eval_ids.to("meta"), probes)
        with pytest.raises(ValueError, match=r"^probes\[1\] is on the meta device"):
            D.collapse_measures(model, [probes[0], probes[1].to("meta")], eval_ids)


def test_complex_and_bool_tensors_are_refused_instead_of_cast():
    """Audit D24, D43, D45, D54: cpu64 cast complex tensors to real (imaginary part dropped,
    only a torch warning) and bools to 0/1: a shift bound of 0, an order parameter of 0 between
    1+1j and 1+2j, rank 0 for a purely imaginary A."""
    q, k, v, delta = torch.randn(2, 5, 4), torch.randn(2, 6, 4), torch.randn(2, 6, 3), torch.eye(4)
    with pytest.raises(
        TypeError,
        match=r"^q must be a real tensor \(floating-point or integer\), got "
        r"torch\.complex64$",
    ):
        D.attention_shift_bound(q.to(torch.complex64) * 1j, k, v, delta)
    with pytest.raises(TypeError, match=r"^delta must be a real tensor .* got torch\.bool$"):
        D.attention_shift_bound(q, k, v, delta.bool())
    with pytest.raises(TypeError, match=r"^x1 must be a real tensor .* got torch\.complex64$"):
        D.order_parameter(torch.tensor([1 + 1j]), torch.tensor([1 + 2j]))
    with pytest.raises(TypeError, match=r"^x2 must be a real tensor .* got torch\.bool$"):
        D.order_parameter(torch.tensor([1.0, 0.0]), torch.tensor([True, True]))
    with pytest.raises(TypeError, match=r"^A must be a real tensor .* got torch\.complex128$"):
        D.rank_audit(torch.randn(2, 3, 4, 4, dtype=torch.complex128) * 1j)
    with pytest.raises(TypeError, match=r"^M must be a real tensor .* got torch\.complex64$"):
        D.notears_h(torch.eye(3, dtype=torch.complex64) * 1j)
    with pytest.raises(TypeError, match=r"^x must be a real tensor .* got torch\.bool$"):
        D.cpu64(torch.ones(2, dtype=torch.bool))
    with pytest.raises(TypeError, match=r"^x1 must be a torch\.Tensor, got list$"):
        D.order_parameter([1.0], torch.ones(1))
    # integers are real: cast exactly, as before
    assert D.order_parameter(torch.tensor([2, 4]), torch.tensor([2, 5])) == pytest.approx(
        math.sqrt(0.5) / 3
    )
    assert torch.equal(D.cpu64(torch.tensor([3])), torch.tensor([3.0], dtype=torch.float64))


@pytest.mark.parametrize("tol", ["1e-3", True, float("inf"), 1.0, 0.0, -1e-9, float("nan")])
def test_perron_frobenius_needs_a_tolerance_in_the_open_unit_interval(tol):
    """Audit D60, D61, D62: tol='1e-3' failed on '>' between str and int, tol=True ran as 1, and
    tol=inf stopped after one power step (1.9103 against 1.9113) without a word. The eigenvector
    sums to 1, so no entry moves by 1 or more: a tol of 1 or more always stopped there."""
    P = torch.rand(3, 3, generator=torch.Generator().manual_seed(0)) + 0.1
    with pytest.raises(ValueError, match=rf"^tol must be a number in \(0, 1\), got {tol!r}$"):
        D.perron_frobenius(P, tol=tol)
    lam, _ = D.perron_frobenius(P, tol=0.5)  # still allowed: a coarse tolerance
    assert lam.shape == ()


def test_deductive_profile_refuses_outputs_that_are_not_deductive_tensors():
    """Audit D82: deductive_profile('abc', 0, 0) failed on "'str' object has no attribute
    'G_LM'"; outputs of a different number of layers per prompt failed on an index."""
    model = _tiny_pldr()
    probes, _ = _probe_inputs()
    outputs = D.deductive_tensors(model, probes[:2])
    expected = (
        r"^outputs must be a list with, per prompt, the list of DeductiveOutputs of every layer "
        r"\(what deductive_tensors returns\), got "
    )
    with pytest.raises(TypeError, match=expected + "str$"):
        D.deductive_profile("abc", 0, 0)
    with pytest.raises(TypeError, match=expected + r"outputs\[1\] = NoneType$"):
        D.deductive_profile([outputs[0], None], 0, 0)
    with pytest.raises(TypeError, match=expected + r"outputs\[0\]\[1\] = Tensor$"):
        D.deductive_profile([[outputs[0][0], probes[0]], outputs[1]], 0, 0)
    with pytest.raises(
        ValueError, match=r"^outputs must hold every layer for every prompt, got 2, 1 layers$"
    ):
        D.deductive_profile([outputs[0], outputs[1][:1]], 0, 0)
    assert D.deductive_profile(tuple(outputs), 1, 1).order_rms["G_LM"] > 0


def test_twirl_refuses_repeated_lengths():
    """Audit D90: twirl(..., [2, 2]) returned one density instead of two, without a word."""
    gpt = _gpt()
    ids = torch.randint(4, 60, (1, 6))
    with _NoForward(gpt):
        with pytest.raises(ValueError, match=r"^lengths has duplicates \[2\], got \[2, 3, 2\]$"):
            D.twirl(gpt, ids, 0, 0, [2, 3, 2])
    assert list(D.twirl(gpt, ids, 0, 0, (3, 2))) == [3, 2]


def _probe_record(tmp_path, change=None, raw=None):
    """A shipped trajectory written to tmp_path/probes.json, changed by ``change``."""
    from kvattn.data import collapse_hunt

    record = D.load_probes(collapse_hunt("base"))
    path = tmp_path / "probes.json"
    if raw is not None:
        path.write_bytes(raw)
    else:
        if change is not None:
            change(record)
        path.write_text(json.dumps(record))
    return path


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda r: r.update(step=["a"] * len(r["step"])),
            r"'step' must be a list of increasing ints >= 0, got step\[0\] = 'a'",
        ),
        (
            lambda r: r["step"].__setitem__(2, 250),
            r"'step' must be a list of increasing ints >= 0, got step\[2\] = 250",
        ),
        (lambda r: r.update(probe_blocks=-3), r"'probe_blocks' must be an int >= 2, got -3"),
        (lambda r: r.update(probe_blocks=4.0), r"'probe_blocks' must be an int >= 2, got 4\.0"),
        (
            lambda r: r.update(G_order_mean=["x"] * len(r["step"])),
            r"G_order_mean\[0\] must be a list of 2 numbers \(or null\), one per layer, got 'x'",
        ),
        (
            lambda r: r["A_sigma_ratio"][3].__setitem__(1, True),
            r"A_sigma_ratio\[3\] must be a list of 2 numbers \(or null\), one per layer, got "
            r"\[0\.\d+, True\]",
        ),
        (
            lambda r: r["G_spread"][0].append(0.5),
            r"G_spread\[0\] must be a list of 2 numbers \(or null\), one per layer, got \[",
        ),
        (
            lambda r: r["G_spread_heads"][1][0].pop(),
            r"G_spread_heads\[1\] must be a list of 2 lists \(one per layer\) of 4 numbers \(or "
            r"null\), one per head, got \[\[",
        ),
        (
            lambda r: r["delta_loss"].__setitem__(4, "0.1"),
            r"delta_loss\[4\] must be a number \(or null\), got '0\.1'",
        ),
        (
            lambda r: r["loss"].__setitem__(0, math.inf),
            r"loss\[0\] must be a number \(or null\), got inf",
        ),
    ],
    ids=[
        "step strings",
        "step repeated",
        "probe_blocks -3",
        "probe_blocks float",
        "layer entries strings",
        "layer entry bool",
        "layer entry too long",
        "head row too short",
        "model measure string",
        "model measure inf",
    ],
)
def test_load_probes_refuses_malformed_entries(tmp_path, change, message):
    """Audit L03, L04, L05: a probes.json with step ['a', ...], G_order_mean ['x', ...] or
    probe_blocks -3 loaded without a word (and failed later, in a figure or in collapsed)."""
    path = _probe_record(tmp_path, change)
    with pytest.raises(ValueError, match="^" + re.escape(str(path)) + ": " + message):
        D.load_probes(tmp_path)


def test_load_probes_accepts_null_values_and_every_shipped_trajectory(tmp_path):
    """None (JSON null) stands for an undefined value: it loads; so do all the shipped files."""

    def undefined(r):
        r["A_sigma_ratio"][0] = [None, None]
        r["A_sigma_ratio_heads"][0][1] = [None] * 4
        r["share_of_g_effect"][2] = None

    assert D.load_probes(_probe_record(tmp_path, undefined))["A_sigma_ratio"][0] == [None, None]
    data = Path(__file__).resolve().parents[1] / "data"
    shipped = sorted(data.glob("collapse_hunt/*.json")) + sorted(data.glob("trajectories/*.json"))
    assert len(shipped) == 18
    for path in shipped:
        assert len(D.load_probes(path)["step"]) > 1, path


def test_load_probes_names_the_file_that_is_not_text_and_refuses_a_path_that_is_not_one(
    tmp_path,
):
    """Audit L06, L08: a binary probes.json raised UnicodeDecodeError without the file name;
    load_probes(123) raised pathlib's TypeError."""
    path = _probe_record(tmp_path, raw=b"\xff\xfe\x00garbage")
    with pytest.raises(
        ValueError, match="^" + re.escape(str(path)) + r" is not a UTF-8 text \(JSON\) file: "
    ):
        D.load_probes(tmp_path)
    with pytest.raises(
        TypeError,
        match=r"^path must be a str or os\.PathLike \(a probes\.json file or the folder holding "
        r"it\), got int$",
    ):
        D.load_probes(123)
