"""Exercises of chapter 4, Symmetry breaking: cases, references, mistakes."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

from ... import mlp, symmetry
from ._checker import Case, Exercise, Mistake, randn, register


def _step(z):
    return (z > 0).to(z.dtype)


def _normal_cdf(z):
    return 0.5 * (1 + torch.erf(z / math.sqrt(2)))


def _exchange_cases(gen):
    return [
        Case(f"{label}, 2000 samples", (gate, randn(gen, 2000), randn(gen, 2000)))
        for label, gate in (
            ("SiLU's gate, sigmoid", torch.sigmoid),
            ("ReLU's gate, the step", _step),
            ("GELU's gate, the normal CDF", _normal_cdf),
            ("the identity's gate, 1", torch.ones_like),
        )
    ]


def _coefficient_cases(gen):
    return [
        Case(label, (gate, randn(gen, n) * spread))
        for label, gate, n, spread in (
            ("SiLU's gate, sigmoid, 2000 standard normal samples", torch.sigmoid, 2000, 1.0),
            ("GELU's gate, the normal CDF, 2000 samples", _normal_cdf, 2000, 1.0),
            ("Swish-β's gate, sigmoid(3z), 500 samples", lambda z: torch.sigmoid(3 * z), 500, 1.0),
            ("sigmoid on wider samples (standard deviation 2)", torch.sigmoid, 1000, 2.0),
        )
    ]


def _exchange_violation(gate, a, b):
    return float(((a * b * (gate(a) - gate(b))) ** 2).mean() / ((a * b * gate(a)) ** 2).mean())


def _gate_and_slope(gate, z):
    """g(z) and g′(z) at every sample: g acts elementwise, so the gradient of Σ g(z_i) is g′."""
    z = z.detach().requires_grad_(True)
    g = gate(z)
    (slope,) = torch.autograd.grad(g.sum(), z)
    return z.detach(), g.detach(), slope


def _coefficient(numerator: Callable, denominator: Callable) -> Callable:
    """An estimate mean(numerator) / mean(denominator), both functions of (z, g(z), g′(z))."""

    def estimate(gate, z):
        z, g, slope = _gate_and_slope(gate, z)
        return float(numerator(z, g, slope).mean() / denominator(z, g, slope).mean())

    return estimate


def _sigma_squared(z, g, slope):
    return (z * g) ** 2


_scale_coefficient = _coefficient(lambda z, g, slope: (z**2 * slope) ** 2, _sigma_squared)


def _conserved_cases(gen):
    return [
        Case("q/k scaling, exponents (1, −1)", ((randn(gen, 6, 4), randn(gen, 6, 4)), (1, -1))),
        Case(
            "rank-r slots (m, r, d), exponents (1, −1)",
            ((randn(gen, 5, 2, 4), randn(gen, 5, 2, 4)), (1, -1)),
        ),
        Case(
            "a gated layer's k/v scaling: W_k (m, d), W_v (m, d_out)",
            ((randn(gen, 6, 4), randn(gen, 6, 3)), (1, -1)),
        ),
        Case(
            "the bilinear layer's (q, k, v) → (αq, αk, v/α²): exponents (1, 1, −2)",
            ((randn(gen, 6, 4), randn(gen, 6, 4), randn(gen, 6, 3)), (1, 1, -2)),
        ),
        Case(
            "balanced slots, W_q = W_k",
            ((lambda w: (w, w.clone()))(randn(gen, 3, 4)), (1, -1)),
        ),
    ]


def _conserved(weights, exponents, power=2, weight=lambda c: c):
    """Σ_i weight(c_i) ‖θ_i[j]‖^power per slot j: the reference (power 2, weight c) and the listed
    wrong variants."""
    return sum(
        weight(c) * w.flatten(1).norm(dim=1) ** power
        for w, c in zip(weights, exponents, strict=True)
    )


# Continuous symmetries per slot of each layer kind: the scalings that leave the function
# unchanged ((q, k) → (αq, k/α) where σ(z) is positively homogeneous on the query side, and
# (k, v) → (αk, v/α) where the key enters linearly).
_DIRECTIONS = {
    "swiglu": 1,
    "bilinear": 2,
    "symmetric_silu": 1,
    "reglu": 2,
    "key_value_relu": 1,
    "key_value_silu": 0,
    "geglu": 1,
    "glu": 1,
}
_GATED = ("bilinear", "reglu", "swiglu", "geglu", "glu")


def _directions_cases(_gen):
    return [Case(kind, (kind,)) for kind in _DIRECTIONS]


def _directions_variant(kind, how):
    n = _DIRECTIONS[kind]
    if how == "gate scaling" and kind in ("swiglu", "geglu"):
        return 2
    if how == "relu like silu" and kind in ("reglu", "key_value_relu"):
        return n - 1
    if how == "no k/v" and kind in _GATED:
        return n - 1
    if how == "product keeps k/v" and kind == "symmetric_silu":
        return 2
    if how == "exchange" and kind in ("bilinear", "symmetric_silu"):
        return n + 1
    if how == "silu key-value" and kind == "key_value_silu":
        return 1
    return n


# The positively homogeneous activations σ(z) = c₊z (z > 0), c₋z (z < 0): their violations in
# closed form, for a, b ~ N(0, 1) independent (kvattn.symmetry's E_ex and E_sc).


def _half_line_change(c_plus, c_minus, alpha, *, divide=True):
    """E[(σ(αz)/α − σ(z))²] / E[σ(z)²] for the two-slope σ, from the change on each half-line:
    d₊ z for z > 0 and d₋ z for z < 0, each half-line holding half of E[z²] = 1. ``divide=False``
    drops the 1/α (the listed mistake that leaves the key unscaled)."""
    same, other = (c_plus, c_minus) if alpha > 0 else (c_minus, c_plus)
    factor = 1.0 if divide else alpha
    d_plus = same * factor - c_plus  # αz on the half-line of sign(α)
    d_minus = other * factor - c_minus
    return (d_plus**2 + d_minus**2) / (c_plus**2 + c_minus**2)


def _homogeneous_exchange(c_plus, c_minus):
    """E_ex = 2 − 2 E[aσ(a)]² / E[σ(a)²] with E[aσ] = (c₊ + c₋)/2, E[σ²] = (c₊² + c₋²)/2."""
    return (c_plus - c_minus) ** 2 / (c_plus**2 + c_minus**2)


def _homogeneous_violations(c_plus, c_minus, alpha):
    return _homogeneous_exchange(c_plus, c_minus), _half_line_change(c_plus, c_minus, alpha)


def _homogeneous_cases(_gen):
    return [
        Case(label, (c_plus, c_minus, alpha))
        for label, c_plus, c_minus, alpha in (
            ("c₊ = 2, c₋ = 0.5, α = 1", 2.0, 0.5, 1.0),
            ("ReLU (c₊ = 1, c₋ = 0), α = 2", 1.0, 0.0, 2.0),
            ("ReLU, α = −1", 1.0, 0.0, -1.0),
            ("leaky ReLU (c₋ = 0.1), α = −0.5", 1.0, 0.1, -0.5),
            ("the identity (c₊ = c₋ = 1), α = −3", 1.0, 1.0, -3.0),
            ("|z| (c₊ = 1, c₋ = −1), α = 0.5", 1.0, -1.0, 0.5),
            ("σ(z) = min(z, 0) (c₊ = 0, c₋ = 1), α = −2", 0.0, 1.0, -2.0),
        )
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
        "exchange_violation_samples(gate, a, b) -> float",
        "The normalised exchange violation E[(σ(a)b − σ(b)a)²] / E[(σ(a)b)²] of a self-gated σ, "
        "estimated with sample means over paired samples a, b (n,), when only the gate "
        "g(z) = σ(z)/z is given (as a function on tensors).",
        _exchange_violation,
        _exchange_cases,
        (
            Mistake(
                "the score ab dropped: σ(a)b − σ(b)a = ab (g(a) − g(b)), and the gates' "
                "difference alone weights every sample alike, whatever the size of its score.",
                lambda g, a, b: float(((g(a) - g(b)) ** 2).mean() / (g(a) ** 2).mean()),
            ),
            Mistake(
                "the gate used as the activation: σ(z) = z g(z), not g(z).",
                lambda g, a, b: float(
                    ((g(a) * b - g(b) * a) ** 2).mean() / ((g(a) * b) ** 2).mean()
                ),
            ),
            Mistake(
                "not normalised: divide by the mean of (σ(a)b)² = (ab g(a))².",
                lambda g, a, b: float(((a * b * (g(a) - g(b))) ** 2).mean()),
            ),
        ),
    ),
    Exercise(
        "scale_coefficient_samples",
        4,
        "scale_coefficient_samples(gate, z) -> float",
        "The coefficient C_σ = E[(zσ′(z) − σ(z))²] / E[σ(z)²] of the small-α scale violation, "
        "E_sc(α) ≈ C_σ (ln α)², for a self-gated σ(z) = z g(z), estimated with sample means over "
        "samples z (n,) when only the gate g is given (a differentiable function on tensors): "
        "g′ comes from automatic differentiation, not from a formula for one gate.",
        _scale_coefficient,
        _coefficient_cases,
        (
            Mistake(
                "the defect taken as z g′(z): for σ = z g, zσ′ − σ = z(g + z g′) − z g = z² g′.",
                _coefficient(lambda z, g, slope: (z * slope) ** 2, _sigma_squared),
            ),
            Mistake(
                "(zσ′)² used for the defect: the σ term cancels the g inside σ′, leaving z² g′.",
                _coefficient(lambda z, g, slope: (z * (g + z * slope)) ** 2, _sigma_squared),
            ),
            Mistake(
                "normalised by E[g²]: the denominator is E[σ(z)²] = E[z² g(z)²].",
                _coefficient(lambda z, g, slope: (z**2 * slope) ** 2, lambda z, g, slope: g**2),
            ),
        ),
    ),
    Exercise(
        "conserved_quantity",
        4,
        "conserved_quantity(weights, exponents) -> Tensor",
        "weights: a tuple of weight tensors θ_1, …, θ_n, each with the slot axis first (m, …); "
        "exponents: numbers c_1, …, c_n such that θ_i → α^(c_i) θ_i (every slot j on its own, "
        "any α > 0) leaves the loss unchanged. Return the quantity per slot, shape (m,), that "
        "gradient flow conserves, normalised so that (q, k) with exponents (1, −1) gives "
        "‖q_j‖² − ‖k_j‖².",
        _conserved,
        _conserved_cases,
        (
            Mistake(
                "norms, not squared norms: along gradient flow d/dt ‖θ‖² = −2 θ·∇L, and the "
                "symmetry makes Σ c_i θ_i·∇_i L = 0.",
                lambda w, c: _conserved(w, c, power=1),
            ),
            Mistake(
                "the exponents squared (or dropped): the sign of c_i matters, the total norm "
                "‖q‖² + ‖k‖² is not conserved.",
                lambda w, c: _conserved(w, c, weight=lambda e: e * e),
            ),
            Mistake(
                "summed over the slots, one value per coordinate: the symmetry acts on every "
                "slot on its own, so there is one conserved quantity per slot (rows).",
                lambda w, c: sum(e * t.pow(2).sum(0) for t, e in zip(w, c, strict=True)),
            ),
            Mistake(
                "each squared norm divided by its exponent: the symmetry's generator weights "
                "θ_i by c_i, so the conserved sum is Σ c_i ‖θ_i‖²; the two agree only when every "
                "|c_i| = 1.",
                lambda w, c: _conserved(w, c, weight=lambda e: 1 / e),
            ),
        ),
    ),
    Exercise(
        "symmetry_directions",
        4,
        "symmetry_directions(kind) -> int",
        "How many directions per slot the continuous symmetries of a layer remove from the "
        "Jacobian of its outputs with respect to its weights (generic weights, slots well below "
        "saturation). kind is one of 'swiglu', 'bilinear', 'symmetric_silu' (σ((x·q)(x·k)) with "
        "SiLU), 'reglu', 'key_value_relu', 'key_value_silu', 'geglu', 'glu'.",
        lambda kind: _DIRECTIONS[kind],
        _directions_cases,
        (
            Mistake(
                "SwiGLU and GEGLU given the q/k scaling: σ(αz)/α ≠ σ(z) for SiLU and GELU, so "
                "rescaling a query changes the gate; only the k/v scaling survives.",
                lambda kind: _directions_variant(kind, "gate scaling"),
            ),
            Mistake(
                "ReLU treated like SiLU: ReLU is positively homogeneous, ReLU(αz) = α ReLU(z) for "
                "α > 0, so ReGLU keeps the q/k scaling and a ReLU key-value layer keeps (k, v) → "
                "(αk, v/α).",
                lambda kind: _directions_variant(kind, "relu like silu"),
            ),
            Mistake(
                "the k/v scaling missed: in every gated unit the key factor x·k_j enters "
                "linearly, so (k_j, v_j) → (αk_j, v_j/α) never changes the output.",
                lambda kind: _directions_variant(kind, "no k/v"),
            ),
            Mistake(
                "the symmetric rank-1 form given a k/v scaling: σ acts on the product "
                "(x·q)(x·k), so scaling k changes σ's argument and cannot be undone on v; its "
                "q/k scaling is the one that survives.",
                lambda kind: _directions_variant(kind, "product keeps k/v"),
            ),
            Mistake(
                "the exchange q ↔ k counted: it is a discrete symmetry, which removes no "
                "direction from the Jacobian.",
                lambda kind: _directions_variant(kind, "exchange"),
            ),
            Mistake(
                "the SiLU key-value layer given a k/v scaling: σ(x·k) is not homogeneous for "
                "SiLU, so rescaling a key changes the coefficient in a way no value can undo.",
                lambda kind: _directions_variant(kind, "silu key-value"),
            ),
        ),
    ),
    Exercise(
        "homogeneous_violations",
        4,
        "homogeneous_violations(c_plus, c_minus, alpha) -> tuple[float, float]",
        "The exchange and inverse-scale violations (E_ex, E_sc(α)) of kvattn.symmetry, for a, b "
        "~ N(0, 1) independent, of the positively homogeneous σ(z) = c_plus·z for z > 0 and "
        "c_minus·z for z < 0 (ReLU: 1, 0; leaky ReLU: 1, s; |z|: 1, −1; the identity: 1, 1), in "
        "closed form. c_plus and c_minus are numbers, not both 0; α ≠ 0.",
        _homogeneous_violations,
        _homogeneous_cases,
        (
            Mistake(
                "the scale violation 0 for every α: for α < 0, αz lands on the other half-line, "
                "where σ has the other slope, so σ(αz)/α − σ(z) = ±(c₋ − c₊)z; only α > 0 (or "
                "c₊ = c₋, a linear σ) keeps the symmetry.",
                lambda cp, cm, al: (_homogeneous_exchange(cp, cm), 0.0),
            ),
            Mistake(
                "the scale violation for α < 0 taken equal to the exchange violation: the change "
                "±(c₋ − c₊)z has mean square (c₊ − c₋)², twice the numerator of E_ex, "
                "E[(σ(a)b − σ(b)a)²] = (c₊ − c₋)²/2.",
                lambda cp, cm, al: (
                    _homogeneous_exchange(cp, cm),
                    _homogeneous_exchange(cp, cm) if al < 0 else 0.0,
                ),
            ),
            Mistake(
                "the exchange violation not normalised: divide E[(σ(a)b − σ(b)a)²] by "
                "E[(σ(a)b)²] = E[σ(a)²] = (c₊² + c₋²)/2.",
                lambda cp, cm, al: ((cp - cm) ** 2 / 2, _half_line_change(cp, cm, al)),
            ),
            Mistake(
                "half the exchange violation: E[(σ(a)b − σ(b)a)²] holds two squares, "
                "E[σ(a)²]E[b²] and E[σ(b)²]E[a²], minus twice E[aσ(a)]², so E_ex = 2 − "
                "2 E[aσ]²/E[σ²].",
                lambda cp, cm, al: (
                    _homogeneous_exchange(cp, cm) / 2,
                    _half_line_change(cp, cm, al),
                ),
            ),
            Mistake(
                "the key left unscaled, σ(αa)b − σ(a)b: the inverse scaling maps k to k/α as "
                "well, so the change is σ(αa)/α − σ(a).",
                lambda cp, cm, al: (
                    _homogeneous_exchange(cp, cm),
                    _half_line_change(cp, cm, al, divide=False),
                ),
            ),
        ),
    ),
    Exercise(
        "gated_from_slots",
        4,
        "gated_from_slots(W_q, W_k, W_v, act) -> Callable[[Tensor], Tensor]",
        "Part I capstone, step 1 (find the bug). Build the gated MLP from its slots: return a "
        "function layer(x) = Σ_j σ(x·q_j)(x·k_j) v_j, the rank-1 bilinear attention over memory "
        "slots with σ moved onto the query factor. W_q, W_k (m, d) hold q_j, k_j as rows, "
        "W_v (m, d_out) holds v_j; act is σ (a function on tensors); layer maps x (..., d) to "
        "(..., d_out). The checker calls your layer and compares it with kvattn.mlp.GatedMLP "
        "holding the same weights.",
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
