"""Exercises of chapter 4, Symmetry breaking: cases, references, mistakes."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .. import mlp, symmetry
from ._checker import Case, Exercise, Mistake, randn, register


def _violation_cases(gen, with_alpha: bool):
    cases = []
    for label, sigma in (
        ("SiLU", F.silu),
        ("ReLU", F.relu),
        ("tanh", torch.tanh),
        ("identity", lambda z: z),
    ):
        a, b = randn(gen, 2000), randn(gen, 2000)
        alpha = (2.0, -1.5, 0.5, 3.0)[len(cases)]
        cases.append(
            Case(f"{label}, 2000 samples", (sigma, alpha, a, b) if with_alpha else (sigma, a, b))
        )
    return cases


def _exchange_violation(sigma, a, b):
    return float(((sigma(a) * b - sigma(b) * a) ** 2).mean() / ((sigma(a) * b) ** 2).mean())


def _scale_violation(sigma, alpha, a, b):
    return float(
        ((sigma(alpha * a) * b / alpha - sigma(a) * b) ** 2).mean() / ((sigma(a) * b) ** 2).mean()
    )


def _conserved_cases(gen):
    return [
        Case("random", (randn(gen, 6, 4), randn(gen, 6, 4))),
        Case("rank-r slots (m, r, d)", (randn(gen, 5, 2, 4), randn(gen, 5, 2, 4))),
        Case("balanced: W_q = W_k", ((lambda w: (w, w.clone()))(randn(gen, 3, 4)))),
    ]


# The Part I capstone: the gated MLP built slot by slot, then its symmetry breaking measured.

_VARIANT = {F.silu: "swiglu", F.relu: "reglu", F.gelu: "geglu", torch.sigmoid: "glu"}


def _with_weights(layer: mlp.SlotMLP, W_q, W_k, W_v) -> mlp.SlotMLP:
    layer = layer.double().requires_grad_(False)
    layer.W_q.copy_(W_q)
    layer.W_k.copy_(W_k)
    layer.W_v.copy_(W_v)
    return layer


def gated_layer(W_q, W_k, W_v, act):
    """The course's :class:`kvattn.mlp.GatedMLP` (float64) holding these slot weights: W_q, W_k
    ``(m, d)``, W_v ``(m, d_out)``; ``act`` is ``F.silu``, ``F.relu``, ``F.gelu`` or
    ``torch.sigmoid`` (SwiGLU, ReGLU, GEGLU, GLU). The reference ``gated_from_slots`` rebuilds.

    Raises ``ValueError`` for any other ``act``.
    """
    if act not in _VARIANT:
        raise ValueError(
            f"act must be F.silu, F.relu, F.gelu or torch.sigmoid (a GatedMLP variant), got {act!r}"
        )
    m, d = W_q.shape
    return _with_weights(mlp.GatedMLP(d, m, W_v.shape[1], _VARIANT[act]), W_q, W_k, W_v)


def symmetric_layer(W_q, W_k, W_v, act):
    """The course's :class:`kvattn.mlp.SymmetricRank1Bilinear` σ((x·q_j)(x·k_j)) (float64)
    holding these slot weights; shapes as :func:`gated_layer`, ``act`` any activation."""
    m, d = W_q.shape
    return _with_weights(mlp.SymmetricRank1Bilinear(d, m, W_v.shape[1], act), W_q, W_k, W_v)


def _slot_weights(gen, d: int, m: int, d_out: int) -> tuple:
    return tuple(randn(gen, *shape) / math.sqrt(d) for shape in ((m, d), (m, d), (m, d_out)))


def _gated_from_slots_cases(gen):
    d, m = 5, 7
    return [
        Case(label, (*_slot_weights(gen, d, m, d_out), act), apply_to=(randn(gen, *x_shape),))
        for label, act, d_out, x_shape in (
            ("SiLU (SwiGLU), 4 tokens", F.silu, d, (4, d)),
            ("ReLU (ReGLU), one token, d_out ≠ d", F.relu, 3, (1, d)),
            ("GELU (GEGLU), batch axis", F.gelu, 2, (2, 3, d)),
            ("sigmoid (GLU), 6 tokens", torch.sigmoid, d, (6, d)),
        )
    ]


def _slot_sum(W_q, W_k, W_v, act, where: str):
    """Σ_j (coefficient of slot j) v_j with the activation on the query factor, the key factor
    or the product: the listed wrong places for σ."""

    def layer(x):
        a, b = x @ W_q.T, x @ W_k.T
        coefficients = {"key": a * act(b), "product": act(a * b), "none": a * b}[where]
        return coefficients @ W_v

    return layer


def _violations(build, W_q, W_k, W_v, act, x, alpha):
    layer = build(W_q, W_k, W_v, act)
    y = layer(x)

    def relative(z):
        return float(((z - y) ** 2).sum() / (y**2).sum())

    return relative(symmetry.swap_qk(layer)(x)), relative(symmetry.rescale(layer, alpha)(x))


def _violation_variant(build, W_q, W_k, W_v, act, x, alpha, how: str):
    """The listed wrong measurements of (exchange, scale)."""
    y = build(W_q, W_k, W_v, act)(x)
    swapped = build(W_k, W_k if how == "query only" else W_q, W_v, act)(x)
    k_scale = alpha if how == "same direction" else 1 / alpha
    scaled = build(alpha * W_q, W_k * k_scale, W_v, act)(x)

    def relative(z):
        if how == "unnormalised":
            return float(((z - y) ** 2).sum())
        if how == "by the transformed":
            return float(((z - y) ** 2).sum() / (z**2).sum())
        if how == "norms":
            return float((z - y).norm() / y.norm())
        if how == "per token":
            return float((((z - y) ** 2).sum(-1) / (y**2).sum(-1)).mean())
        return float(((z - y) ** 2).sum() / (y**2).sum())

    return relative(swapped), relative(scaled)


def _symmetry_breaking_cases(gen):
    d, m = 5, 7
    return [
        Case(label, (build, *_slot_weights(gen, d, m, d), act, randn(gen, *x_shape), alpha))
        for label, build, act, x_shape, alpha in (
            ("SwiGLU, α = 2", gated_layer, F.silu, (8, d), 2.0),
            ("ReGLU, α = 0.5 (ReLU is positively homogeneous)", gated_layer, F.relu, (8, d), 0.5),
            ("ReGLU, α = −1", gated_layer, F.relu, (8, d), -1.0),
            ("symmetric rank-1 σ((x·q)(x·k)), SiLU, α = 3", symmetric_layer, F.silu, (8, d), 3.0),
            ("GEGLU, batch axis, α = 0.3", gated_layer, F.gelu, (2, 4, d), 0.3),
        )
    ]


register(
    Exercise(
        "exchange_violation_samples",
        4,
        "exchange_violation_samples(sigma, a, b) -> float",
        "The normalised exchange violation mean((σ(a)b − σ(b)a)²) / mean((σ(a)b)²) over paired "
        "samples a, b (n,).",
        _exchange_violation,
        lambda g: _violation_cases(g, with_alpha=False),
        (
            Mistake(
                "not normalised: divide by mean((σ(a)b)²).",
                lambda s, a, b: float(((s(a) * b - s(b) * a) ** 2).mean()),
            ),
            Mistake(
                "the difference is not squared before averaging.",
                lambda s, a, b: float((s(a) * b - s(b) * a).mean() / ((s(a) * b) ** 2).mean()),
            ),
        ),
    ),
    Exercise(
        "scale_violation_samples",
        4,
        "scale_violation_samples(sigma, alpha, a, b) -> float",
        "The normalised inverse-scale violation mean((σ(αa)b/α − σ(a)b)²) / mean((σ(a)b)²): "
        "the "
        "transformed slot (αq, k/α) against the original.",
        _scale_violation,
        lambda g: _violation_cases(g, with_alpha=True),
        (
            Mistake(
                "the key is not divided by α: the transform is (q, k) → (αq, k/α).",
                lambda s, al, a, b: float(
                    ((s(al * a) * b - s(a) * b) ** 2).mean() / ((s(a) * b) ** 2).mean()
                ),
            ),
            Mistake(
                "α applied after σ: scaling the query scales σ's argument, σ(αa).",
                lambda s, al, a, b: float(
                    ((al * s(a) * b / al - s(a) * b) ** 2).mean() / ((s(a) * b) ** 2).mean()
                ),
            ),
        ),
    ),
    Exercise(
        "conserved_qk",
        4,
        "conserved_qk(W_q, W_k) -> Tensor",
        "The per-slot quantity ‖q_j‖² − ‖k_j‖² that gradient flow conserves under the scale "
        "symmetry, shape (m,); rank-r slots (m, r, d) sum over all their components.",
        lambda Wq, Wk: Wq.flatten(1).pow(2).sum(1) - Wk.flatten(1).pow(2).sum(1),
        _conserved_cases,
        (
            Mistake(
                "norms, not squared norms: the conserved quantity is ‖q_j‖² − ‖k_j‖².",
                lambda Wq, Wk: Wq.flatten(1).norm(dim=1) - Wk.flatten(1).norm(dim=1),
            ),
            Mistake(
                "summed over the wrong axis: one value per slot j (rows), not per coordinate.",
                lambda Wq, Wk: Wq.pow(2).sum(0) - Wk.pow(2).sum(0),
            ),
        ),
    ),
    Exercise(
        "gated_from_slots",
        4,
        "gated_from_slots(W_q, W_k, W_v, act) -> Callable[[Tensor], Tensor]",
        "Part I capstone, step 1. Build the gated MLP from its slots: return a function layer(x) "
        "= Σ_j σ(x·q_j)(x·k_j) v_j, the rank-1 bilinear attention over memory slots with σ moved "
        "onto the query factor. W_q, W_k (m, d) hold q_j, k_j as rows, W_v (m, d_out) holds v_j; "
        "act is σ (a function on tensors); layer maps x (..., d) to (..., d_out). The checker "
        "calls your layer and compares it with kvattn.mlp.GatedMLP holding the same weights.",
        gated_layer,
        _gated_from_slots_cases,
        (
            Mistake(
                "σ on the key factor, (x·q_j)σ(x·k_j): the gate is σ(x·q_j), on the query "
                "(GatedMLP's W_q is the gate projection).",
                lambda Wq, Wk, Wv, act: _slot_sum(Wq, Wk, Wv, act, "key"),
            ),
            Mistake(
                "σ on the whole score, σ((x·q_j)(x·k_j)): that is the symmetric rank-1 form "
                "(before the symmetry is broken); the gated MLP moves σ onto the query factor.",
                lambda Wq, Wk, Wv, act: _slot_sum(Wq, Wk, Wv, act, "product"),
            ),
            Mistake(
                "no activation, (x·q_j)(x·k_j): that is the bilinear layer (σ = identity); "
                "apply σ to x·q_j.",
                lambda Wq, Wk, Wv, act: _slot_sum(Wq, Wk, Wv, act, "none"),
            ),
        ),
    ),
    Exercise(
        "symmetry_breaking",
        4,
        "symmetry_breaking(build, W_q, W_k, W_v, act, x, alpha) -> tuple[float, float]",
        "Part I capstone, step 2. Measure the two broken symmetries of the layer "
        "f = build(W_q, W_k, W_v, act) (build has gated_from_slots' signature) on the inputs "
        "x (..., d): return (exchange, scale), the relative violations ‖f'(x) − f(x)‖² / "
        "‖f(x)‖² (sums over every token and output coordinate) where f' swaps the queries and "
        "keys (q_j ↔ k_j) for exchange, and maps q_j → α q_j, k_j → k_j / α for scale. Both "
        "are 0 for a symmetric layer. The checker compares with kvattn.symmetry.swap_qk and "
        "rescale on the course's layers.",
        _violations,
        _symmetry_breaking_cases,
        (
            Mistake(
                "k_j multiplied by α as well: the inverse-scale map is q_j → α q_j, k_j → k_j/α "
                "(the product (x·q_j)(x·k_j) is then unchanged).",
                lambda *a: _violation_variant(*a, how="same direction"),
            ),
            Mistake(
                "the exchange replaces only the queries (q_j → k_j, keys kept): swap both, "
                "build(W_k, W_q, …).",
                lambda *a: _violation_variant(*a, how="query only"),
            ),
            Mistake(
                "not normalised: divide the squared difference by ‖f(x)‖².",
                lambda *a: _violation_variant(*a, how="unnormalised"),
            ),
            Mistake(
                "normalised by the transformed layer's output ‖f'(x)‖²; divide by the original "
                "‖f(x)‖².",
                lambda *a: _violation_variant(*a, how="by the transformed"),
            ),
            Mistake(
                "a ratio of norms ‖f' − f‖ / ‖f‖; the violation is the ratio of squared norms.",
                lambda *a: _violation_variant(*a, how="norms"),
            ),
            Mistake(
                "the mean of per-token ratios; sum the squared differences over every token, "
                "then divide by the sum of ‖f(x)‖² over every token.",
                lambda *a: _violation_variant(*a, how="per token"),
            ),
        ),
    ),
)
