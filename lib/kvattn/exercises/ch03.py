"""Exercises of chapter 3, Interaction tensors: cases, references, mistakes."""

from __future__ import annotations

import torch

from .. import interaction
from ._checker import Case, Exercise, Mistake, randn, register


def _interaction_cases(gen):
    d, m = 4, 6
    return [
        Case("random", (randn(gen, m, d), randn(gen, m, d), randn(gen, m, 3))),
        Case("one slot", (randn(gen, 1, d), randn(gen, 1, d), randn(gen, 1, 2))),
        Case("d_out = d", (randn(gen, m, d), randn(gen, m, d), randn(gen, m, d))),
    ]


def _bilinear_layer(W_q, W_k, W_v):
    """The bilinear layer ((x W_qᵀ) ⊙ (x W_kᵀ)) W_v as a function of x (..., d) only."""

    def layer(x):
        return ((x @ W_q.T) * (x @ W_k.T)) @ W_v

    return layer


def _quadratic_form(A):
    """x ↦ x A xᵀ for one matrix A (d, d), as a layer with one output, (..., 1)."""

    def layer(x):
        return ((x @ A) * x).sum(-1, keepdim=True)

    return layer


def _form_cases(gen):
    d = 4
    N = randn(gen, d, d)
    return [
        Case(
            "bilinear layer, 6 slots, d = 4, 3 outputs",
            (_bilinear_layer(randn(gen, 6, d), randn(gen, 6, d), randn(gen, 6, 3)), d),
        ),
        Case("one non-symmetric form x A xᵀ, d = 5", (_quadratic_form(randn(gen, 5, 5)), 5)),
        Case("an antisymmetric form: the layer outputs 0", (_quadratic_form(N - N.T), d)),
        Case("d = 1", (_bilinear_layer(randn(gen, 2, 1), randn(gen, 2, 1), randn(gen, 2, 2)), 1)),
    ]


def _polarise(layer, d, half_off=True, diagonal="polarised"):
    """sym(B) from outputs: S_ab = ½(f(e_a + e_b) − f(e_a) − f(e_b)); the keyword arguments give
    the listed wrong variants (½ forgotten off the diagonal, or f(e_a + e_b) read as S_ab)."""
    eye = torch.eye(d, dtype=torch.float64)
    single = layer(eye)  # (d, d_out): f(e_a) = S_aa
    pairs = layer(eye[:, None, :] + eye[None, :, :])  # (d, d, d_out): f(e_a + e_b)
    if diagonal == "raw pairs":
        S = pairs.clone()
    else:
        S = (pairs - single[:, None, :] - single[None, :, :]) * (0.5 if half_off else 1.0)
    if diagonal != "polarised":
        S[range(d), range(d)] = single
    return S.permute(2, 0, 1)


def _effective_cases(gen):
    return [
        Case(label, (randn(gen, m, d), randn(gen, m, d), randn(gen, m, d_out)))
        for label, d, m, d_out in (
            ("d = 4, 2 slots, 3 outputs", 4, 2, 3),
            ("one slot, d = 3, one output", 3, 1, 1),
            ("chapter 4's size: d = 6, 3 slots, 4 outputs", 6, 3, 4),
            ("many slots: d = 3, 6 slots, 2 outputs", 3, 6, 2),
        )
    ]


def _jacobian_rank_of(form, W_q, W_k, W_v) -> int:
    jac = torch.func.jacrev(form, argnums=(0, 1, 2))(W_q, W_k, W_v)
    matrix = torch.cat([j.reshape(j.shape[0], -1) for j in jac], dim=1)
    s = torch.linalg.svdvals(matrix)
    return int((s > 1e-10 * s[0]).sum())


def _effective_parameters(W_q, W_k, W_v):
    return _jacobian_rank_of(
        lambda q, k, v: interaction.symmetrise(torch.einsum("jo,ja,jb->oab", v, q, k)).flatten(),
        W_q,
        W_k,
        W_v,
    )


def _n_params(W_q, W_k, W_v):
    return W_q.numel() + W_k.numel() + W_v.numel()


def _gated_interaction_cases(gen):
    d, m = 4, 6

    def sigmoid(z):
        return torch.sigmoid(z)

    def relu_gate(z):
        return (z > 0).to(z.dtype)

    return [
        Case(
            "SiLU gate (sigmoid)",
            (randn(gen, d), randn(gen, m, d), randn(gen, m, d), randn(gen, m, 3), sigmoid),
        ),
        Case(
            "ReLU gate (step)",
            (randn(gen, d), randn(gen, m, d), randn(gen, m, d), randn(gen, m, 2), relu_gate),
        ),
        Case(
            "x = 0",
            (
                torch.zeros(d, dtype=torch.float64),
                randn(gen, m, d),
                randn(gen, m, d),
                randn(gen, m, 2),
                sigmoid,
            ),
        ),
    ]


def _gated_interaction(x, W_q, W_k, W_v, gate):
    return torch.einsum("mo,m,mi,mj->oij", W_v, gate(W_q @ x), W_q, W_k)


register(
    Exercise(
        "interaction_tensor",
        3,
        "interaction_tensor(W_q, W_k, W_v) -> Tensor",
        "B with B[o] = Σ_j W_v[j, o] q_j k_jᵀ, shape (d_out, d, d), so that a bilinear layer's "
        "output o is x B[o] xᵀ. W_q, W_k (m, d); W_v (m, d_out).",
        lambda Wq, Wk, Wv: interaction.interaction_tensor(Wq, Wk, Wv),
        _interaction_cases,
        (
            Mistake(
                "k_j q_jᵀ instead of q_j k_jᵀ: the quadratic form is the same, but B is the "
                "transpose (the q↔k exchange).",
                lambda Wq, Wk, Wv: torch.einsum("mo,mi,mj->oij", Wv, Wk, Wq),
            ),
            Mistake(
                "the value weights are missing: each slot's q_j k_jᵀ is weighted by W_v[j, o].",
                lambda Wq, Wk, Wv: torch.einsum("mi,mj->ij", Wq, Wk).expand(Wv.shape[1], -1, -1),
            ),
        ),
    ),
    Exercise(
        "form_from_outputs",
        3,
        "form_from_outputs(layer, d) -> Tensor",
        "layer: a function mapping float64 tokens (..., d) to (..., d_out) that is a quadratic "
        "form in every output (a bilinear layer, say), weights unseen. Return sym(B), shape "
        "(d_out, d, d), the symmetric matrices with layer(x)[o] = x sym(B_o) xᵀ, using only calls "
        "to layer.",
        _polarise,
        _form_cases,
        (
            Mistake(
                "2 sym(B): f(e_a + e_b) − f(e_a) − f(e_b) counts the cross term twice, "
                "x S xᵀ holds S_ab and S_ba (the Hessian of x S xᵀ is 2S as well); halve it.",
                lambda layer, d: 2 * _polarise(layer, d),
            ),
            Mistake(
                "the off-diagonal entries are twice too large: f(e_a + e_b) − f(e_a) − f(e_b) "
                "= S_ab + S_ba = 2 S_ab for a symmetric S.",
                lambda layer, d: _polarise(layer, d, half_off=False, diagonal="single"),
            ),
            Mistake(
                "f(e_a + e_b) read as S_ab: it also holds the diagonal terms S_aa + S_bb; "
                "subtract f(e_a) and f(e_b), then halve.",
                lambda layer, d: _polarise(layer, d, diagonal="raw pairs"),
            ),
        ),
    ),
    Exercise(
        "gated_interaction",
        3,
        "gated_interaction(x, W_q, W_k, W_v, gate) -> Tensor",
        "The input-dependent interaction tensor of a gated layer at one input x (d,): "
        "B(x)[o] = Σ_j W_v[j, o] g(q_j·x) q_j k_jᵀ, shape (d_out, d, d); gate is g(z) = "
        "σ(z)/z.",
        _gated_interaction,
        _gated_interaction_cases,
        (
            Mistake(
                "the gate reads the key, g(k_j·x); in the gated MLP it reads the query.",
                lambda x, Wq, Wk, Wv, g: torch.einsum("mo,m,mi,mj->oij", Wv, g(Wk @ x), Wq, Wk),
            ),
            Mistake(
                "the gate is missing (this is the bilinear layer's constant B).",
                lambda x, Wq, Wk, Wv, g: torch.einsum("mo,mi,mj->oij", Wv, Wq, Wk),
            ),
        ),
    ),
    Exercise(
        "effective_parameters",
        3,
        "effective_parameters(W_q, W_k, W_v) -> int",
        "The number of directions in weight space that change the function of the bilinear "
        "layer ((x W_qᵀ) ⊙ (x W_kᵀ)) W_v near these weights: the rank of the Jacobian of the "
        "function with respect to all weights. W_q, W_k (m, d), W_v (m, d_out); generic "
        "(random) weights.",
        _effective_parameters,
        _effective_cases,
        (
            Mistake(
                "the number of weights: each slot's scalings (q, k, v) → (αq, βk, v/(αβ)) "
                "change no output, two directions per slot that the function does not feel.",
                _n_params,
            ),
            Mistake(
                "the exchange q_j ↔ k_j counted as a direction: it is a discrete swap, which "
                "removes no direction; only the continuous scalings do (two per slot).",
                lambda Wq, Wk, Wv: _n_params(Wq, Wk, Wv) - 3 * len(Wq),
            ),
            Mistake(
                "one direction per slot: the bilinear layer has two scalings per slot, "
                "(q, k) → (αq, k/α) and (k, v) → (αk, v/α).",
                lambda Wq, Wk, Wv: _n_params(Wq, Wk, Wv) - len(Wq),
            ),
            Mistake(
                "the weights minus two per slot, without asking whether the function has room "
                "for them: the function is sym(B), d_out·d(d+1)/2 numbers, and with many slots "
                "the weights have more directions than that.",
                lambda Wq, Wk, Wv: _n_params(Wq, Wk, Wv) - 2 * len(Wq),
            ),
            Mistake(
                "the Jacobian of B instead of sym(B) (or of the outputs): B also records the "
                "antisymmetric part, which no output sees, so it counts directions that change "
                "the weights' tensor but not the function.",
                lambda Wq, Wk, Wv: _jacobian_rank_of(
                    lambda q, k, v: torch.einsum("jo,ja,jb->oab", v, q, k).flatten(), Wq, Wk, Wv
                ),
            ),
        ),
    ),
)
