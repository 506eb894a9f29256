"""Exercises of chapter 3, Interaction tensors: cases, references, mistakes."""

from __future__ import annotations

import torch

from ... import interaction, mlp
from ._checker import Case, Exercise, Mistake, randn, register


def _sym_tensor(W_q, W_k, W_v):
    """sym(B) of a bilinear layer's slot weights, (d_out, d, d)."""
    return interaction.symmetrise(torch.einsum("jo,ja,jb->oab", W_v, W_q, W_k))


def _function_gap(first, second):
    return float((_sym_tensor(*first) - _sym_tensor(*second)).abs().max())


def _gap_cases(gen):
    d, m, d_out = 4, 5, 3

    def layer():
        return randn(gen, m, d), randn(gen, m, d), randn(gen, m, d_out)

    W_q, W_k, W_v = layer()
    exchanged = torch.tensor([True, False, True, False, False])[:, None]
    order = torch.tensor([3, 0, 4, 1, 2])
    mixed_q, mixed_k = torch.where(exchanged, W_k, W_q), torch.where(exchanged, W_q, W_k)
    alpha = torch.tensor([2.0, -0.5, 1.5, 3.0, -1.0], dtype=torch.float64)[:, None]
    beta = torch.tensor([0.25, 4.0, -2.0, 1.0, 0.5], dtype=torch.float64)[:, None]
    crossed = W_q.clone()
    crossed[[0, 1]] = W_q[[1, 0]]
    nudged = W_v.clone()
    nudged[2, 0] += 0.1
    return [
        Case("q_j ↔ k_j in every slot", ((W_q, W_k, W_v), (W_k, W_q, W_v))),
        Case(
            "slots reordered, q ↔ k in two of them",
            ((W_q, W_k, W_v), (mixed_q[order], mixed_k[order], W_v[order])),
        ),
        Case(
            "(q_j, k_j, v_j) → (α_j q_j, β_j k_j, v_j/(α_j β_j)), signs included",
            ((W_q, W_k, W_v), (alpha * W_q, beta * W_k, W_v / (alpha * beta))),
        ),
        Case("the queries of slots 0 and 1 exchanged", ((W_q, W_k, W_v), (crossed, W_k, W_v))),
        Case("one value entry moved by 0.1", ((W_q, W_k, W_v), (W_q, W_k, nudged))),
        Case("two unrelated layers", (layer(), layer())),
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


def _gated_module(gen, d, m, d_out, variant):
    """A float64 kvattn GatedMLP of ``variant`` with seeded weights, wrapped as a plain function
    (the reader's ``layer``; the checker compares inputs before and after, which a module's
    copy would fail). The module rides along as ``layer.module`` for the listed mistake."""
    module = mlp.GatedMLP(d, m, d_out, variant=variant).double().requires_grad_(False)
    for W in (module.W_q, module.W_k, module.W_v):
        W.copy_(randn(gen, *W.shape) / d**0.5)

    def layer(x):
        return module(x)

    layer.module = module
    return layer


def _cubic(w):
    """x ↦ ((x·w)³, x·w): no quadratic form fits it exactly, (..., 2)."""

    def layer(x):
        z = x @ w
        return torch.stack([z**3, z], dim=-1)

    return layer


def _fixed_form_cases(gen):
    d = 4
    return [
        Case(
            "bilinear layer, d = 4, 6 slots, 3 outputs, 200 inputs",
            (_gated_module(gen, d, 6, 3, "bilinear"), randn(gen, 200, d)),
        ),
        Case(
            "SwiGLU layer, d = 4, 6 slots, 2 outputs, 300 inputs",
            (_gated_module(gen, d, 6, 2, "swiglu"), randn(gen, 300, d)),
        ),
        Case(
            "ReGLU layer on shifted inputs, d = 3, 50 inputs",
            (_gated_module(gen, 3, 5, 2, "reglu"), randn(gen, 50, 3) + 0.5),
        ),
        Case("not quadratic: (x·w)³ and x·w, d = 3", (_cubic(randn(gen, 3)), randn(gen, 80, 3))),
        Case("d = 1", (_gated_module(gen, 1, 3, 2, "swiglu"), randn(gen, 20, 1))),
    ]


def _best_fixed_form(layer, x, halve=True):
    """The least-squares symmetric S with layer(x)[n, o] ≈ x_n S_o x_nᵀ over the inputs: one
    coefficient per product x_a x_b (a ≤ b), whose S_ab = S_ba are its halves off the diagonal;
    ``halve=False`` gives the listed mistake."""
    d = x.shape[-1]
    a, b = torch.triu_indices(d, d)
    # least squares by QR (torch.linalg.lstsq's default driver differs in the last bit from call
    # to call, and the checker wants the reference to agree with itself exactly)
    Q, R = torch.linalg.qr(x[:, a] * x[:, b])
    coefficients = torch.linalg.solve_triangular(R, Q.T @ layer(x), upper=True)  # (pairs, d_out)
    upper = torch.zeros(coefficients.shape[1], d, d, dtype=x.dtype)
    upper[:, a, b] = coefficients.T
    S = upper + upper.transpose(-1, -2)
    if halve:
        return S / 2
    return S - torch.diag_embed(torch.diagonal(upper, dim1=-2, dim2=-1))


def _mean_local_form(layer, x):
    """The listed mistake: the average over the inputs of the local matrices sym(B_o(x))."""
    return interaction.symmetrise(interaction.gated_interaction(layer.module, x)).mean(0)


register(
    Exercise(
        "function_gap",
        3,
        "function_gap(first, second) -> float",
        "first, second: the weights (W_q, W_k, W_v) of two bilinear layers "
        "((x W_qᵀ) ⊙ (x W_kᵀ)) W_v with the same d and d_out (W_q, W_k (m, d), W_v (m, d_out); "
        "the numbers of slots may differ). Return, as a float, the largest |difference| between "
        "the entries of their symmetrised interaction tensors sym(B): 0 exactly when the two "
        "layers compute the same function.",
        _function_gap,
        _gap_cases,
        (
            Mistake(
                "B compared instead of sym(B): exchanging q_j and k_j turns B_o into its "
                "transpose, a different tensor for the same function; only sym(B) is fixed by "
                "the outputs.",
                lambda first, second: float(
                    (
                        torch.einsum("jo,ja,jb->oab", first[2], first[0], first[1])
                        - torch.einsum("jo,ja,jb->oab", second[2], second[0], second[1])
                    )
                    .abs()
                    .max()
                ),
            ),
            Mistake(
                "the weights compared: reordering the slots, exchanging q_j and k_j or scaling "
                "(q_j, k_j, v_j) → (αq_j, βk_j, v_j/(αβ)) changes the weights but not the "
                "function; compare sym(B).",
                lambda first, second: max(
                    float((u - w).abs().max()) for u, w in zip(first, second, strict=True)
                ),
            ),
            Mistake(
                "the values left out, Σ_j q_j k_jᵀ: each circuit is weighted by its value, "
                "B_o = Σ_j W_v[j, o] q_j k_jᵀ, and a scaling that moves weight from q_j k_jᵀ "
                "to v_j changes the sum without the values.",
                lambda first, second: float(
                    (
                        interaction.symmetrise(torch.einsum("ja,jb->ab", first[0], first[1]))
                        - interaction.symmetrise(torch.einsum("ja,jb->ab", second[0], second[1]))
                    )
                    .abs()
                    .max()
                ),
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
        "best_fixed_form",
        3,
        "best_fixed_form(layer, x) -> Tensor",
        "layer: a function mapping float64 inputs (n, d) to outputs (n, d_out) (a gated layer, "
        "say); x: n inputs (n, d), with n ≥ d(d+1)/2 in general position. Return the symmetric "
        "matrices S, shape (d_out, d, d), whose quadratic forms x S_o xᵀ fit the layer's outputs "
        "on x best in least squares: the fixed interaction matrix closest to the layer's "
        "function on these inputs.",
        _best_fixed_form,
        _fixed_form_cases,
        (
            Mistake(
                "the off-diagonal entries are twice too large: the coefficient of x_a x_b "
                "(a < b) in x S xᵀ is S_ab + S_ba = 2 S_ab; halve it.",
                lambda layer, x: _best_fixed_form(layer, x, halve=False),
            ),
            Mistake(
                "the average of the layer's local matrices sym(B_o(x)): the output at x reads "
                "B_o(x) only along x, so the average also collects directions no output sees; "
                "fit the outputs themselves (least squares on the products x_a x_b).",
                _mean_local_form,
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
