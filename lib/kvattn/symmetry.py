"""Exchange and inverse-scale symmetries of bilinear and gated layers: metrics, transforms,
conserved quantities and an effective-parameter count.

The two symmetries of one slot's score (q·x)(k·x) (Breslow 2026):

* exchange  q ↔ k;
* inverse scale  (q, k) → (αq, k/α), α ≠ 0.

The rank-1 symmetric form σ((q·x)(k·x)) keeps both for every σ. The gated form σ(q·x)(k·x) keeps
exchange only if σ is linear, and the scale symmetry for α > 0 only if σ is positively homogeneous
(ReLU); for α < 0 only if σ is linear. The scalar metrics below measure how badly each σ breaks
them, for a, b ~ N(0, 1) independent (course chapter 4):

    exchange violation  E_ex(σ)   = E[(σ(a)b − σ(b)a)²] / E[(σ(a)b)²]
    scale violation     E_sc(σ,α) = E[(σ(αa)b/α − σ(a)b)²] / E[(σ(a)b)²]

Both reduce to one-dimensional Gaussian integrals, because b is independent of a:

    E_ex = 2 − 2 E[a σ(a)]² / E[σ(a)²],        E_sc = E[(σ(αa)/α − σ(a))²] / E[σ(a)²],

which :func:`gaussian_expectation` evaluates by composite Simpson quadrature (error below 1e-9 for
the named activations). A seeded Monte Carlo estimate of the original two-dimensional expectation is
offered for comparison; it is heavy-tailed, so it needs millions of samples for two digits.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from ._checks import check_int, is_real
from .activations import Activation, resolve
from .mlp import SlotMLP

Tensor = torch.Tensor
ActLike = str | Callable[[Tensor], Tensor] | Activation

_QUAD_HALF_WIDTH = 12.0  # N(0,1) mass beyond ±12 is below 1e-32
_QUAD_INTERVALS = 24_000  # even; the grid contains z = 0, where ReLU-like σ have their kink


def gaussian_expectation(f: Callable[[Tensor], Tensor]) -> float:
    """E[f(z)] for z ~ N(0, 1), by composite Simpson quadrature on [−12, 12] in float64.

    ``f`` maps a float64 tensor of shape ``(n,)`` to one of the same shape. The grid has a node at
    0, so integrands with a kink there (ReLU, Heaviside gates) converge at the full Simpson rate on
    each half-line.
    """
    n = _QUAD_INTERVALS
    z = torch.linspace(-_QUAD_HALF_WIDTH, _QUAD_HALF_WIDTH, n + 1, dtype=torch.float64)
    h = 2 * _QUAD_HALF_WIDTH / n
    w = torch.ones(n + 1, dtype=torch.float64)
    w[1:-1:2], w[2:-1:2] = 4.0, 2.0
    density = torch.exp(-0.5 * z**2) / math.sqrt(2 * math.pi)
    values = f(z)
    if values.shape != z.shape:
        raise ValueError(f"integrand must return shape {tuple(z.shape)}, got {tuple(values.shape)}")
    return float((w * density * values).sum() * h / 3)


_PAIR_HALF_WIDTH = 8.0  # N(0,1) mass beyond ±8 is below 1e-15
_PAIR_INTERVALS = 800  # even; Simpson in each of the two standard-normal coordinates


def _check_pair(rho: float, mean: float) -> None:
    for name, value in (("rho", rho), ("mean", mean)):
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
        ):
            raise ValueError(f"{name} must be a finite number, got {value!r}")
    if not -1 < rho < 1:
        raise ValueError(f"rho must lie in (−1, 1), got {rho}")


def _pair(z1: Tensor, z2: Tensor, rho: float, mean: float) -> tuple[Tensor, Tensor]:
    """(a, b) with unit variances, correlation ρ and both means ``mean``, from independent
    standard normal z1, z2."""
    return mean + z1, mean + rho * z1 + math.sqrt(1 - rho * rho) * z2


def input_contour(rho: float, mean: float, radius: float, n: int = 73) -> tuple[Tensor, Tensor]:
    """The points (a, b) at Mahalanobis distance ``radius`` from the mean of the inputs of
    :func:`pair_expectation` (unit variances, correlation ρ, common mean): two float64 tensors of
    ``n`` points, a closed curve (radius 1 and 2 enclose about 39 % and 86 % of the inputs).

    Raises
    ------
    ValueError
        ρ outside (−1, 1) or a non-finite ``mean``.
    """
    _check_pair(rho, mean)
    t = torch.linspace(0, 2 * math.pi, n, dtype=torch.float64)
    return _pair(radius * t.cos(), radius * t.sin(), rho, mean)


def pair_expectation(f: Callable[[Tensor, Tensor], Tensor], rho: float, mean: float) -> float:
    """E[f(a, b)] for (a, b) jointly normal with unit variances, correlation ρ and common mean
    ``mean``: a product Simpson rule on [−8, 8]² in the two independent coordinates, float64.

    Accurate to about 1e-6 relative for smooth integrands; a kink of σ (ReLU) that does not lie on
    a grid line lowers it to about 1e-4. ``f`` maps two float64 tensors of one shape to that shape.

    Raises
    ------
    ValueError
        ρ outside (−1, 1), a non-finite ``mean``, or ``f`` returning the wrong shape.
    """
    _check_pair(rho, mean)
    n = _PAIR_INTERVALS
    z = torch.linspace(-_PAIR_HALF_WIDTH, _PAIR_HALF_WIDTH, n + 1, dtype=torch.float64)
    h = 2 * _PAIR_HALF_WIDTH / n
    w = torch.ones(n + 1, dtype=torch.float64)
    w[1:-1:2], w[2:-1:2] = 4.0, 2.0
    w = w * torch.exp(-0.5 * z**2) / math.sqrt(2 * math.pi) * h / 3
    a, b = _pair(z[:, None], z[None, :], rho, mean)
    a = a.expand(n + 1, n + 1)
    values = f(a, b)
    if values.shape != a.shape:
        raise ValueError(f"integrand must return shape {tuple(a.shape)}, got {tuple(values.shape)}")
    return float(w @ values @ w)


def _check_method(method: str, n_samples: int) -> None:
    if method not in ("quadrature", "monte_carlo"):
        raise ValueError(f"method must be 'quadrature' or 'monte_carlo', got {method!r}")
    if method == "monte_carlo" and (not isinstance(n_samples, int) or n_samples < 2):
        raise ValueError(f"n_samples must be an int >= 2, got {n_samples!r}")


def _monte_carlo_ratio(
    numerator: Callable[[Tensor, Tensor], Tensor],
    denominator: Callable[[Tensor, Tensor], Tensor],
    n_samples: int,
    seed: int,
    rho: float = 0.0,
    mean: float = 0.0,
) -> float:
    """E[num(a,b)] / E[den(a,b)] over seeded (a, b) (unit variances, correlation ρ, common mean
    ``mean``), in float64 chunks of 2^20."""
    gen = torch.Generator().manual_seed(seed)
    num = den = 0.0
    remaining = n_samples
    while remaining > 0:
        n = min(remaining, 1 << 20)
        a, b = _pair(
            torch.randn(n, generator=gen, dtype=torch.float64),
            torch.randn(n, generator=gen, dtype=torch.float64),
            rho,
            mean,
        )
        num += float(numerator(a, b).sum())
        den += float(denominator(a, b).sum())
        remaining -= n
    return num / den


def exchange_violation(
    act: ActLike,
    beta: float | None = None,
    *,
    rho: float = 0.0,
    mean: float = 0.0,
    method: str = "quadrature",
    n_samples: int = 1 << 22,
    seed: int = 0,
) -> float:
    """Normalised exchange violation E[(σ(a)b − σ(b)a)²] / E[(σ(a)b)²], a, b ~ N(0,1) i.i.d.

    0 exactly for linear σ, exactly 1 for ReLU, between for SiLU and GELU, and monotone in β for
    Swish-β (0 as β → 0, the ReLU value as β → ∞). Dimensionless.

    ``rho`` and ``mean`` move away from independent standard inputs: (a, b) jointly normal with
    unit variances, correlation ρ and common mean ``mean`` (:func:`pair_expectation`). Correlated
    factors are exchanged with less effect (ρ → 1 makes a = b and the violation 0); a shared
    mean moves the inputs to where the gate is flatter or steeper.

    Parameters
    ----------
    act, beta:
        The activation, by name or callable (see :func:`kvattn.activations.resolve`).
    method:
        ``"quadrature"`` (default; deterministic, ≈1e-10 accurate) or ``"monte_carlo"``
        (``n_samples`` seeded draws of (a, b); relative error about 0.1 % at 2²² samples, and
        heavy-tailed).

    Raises
    ------
    ValueError
        Unknown activation or method, ρ outside (−1, 1), a non-finite mean, or E[σ(a)²] = 0 (σ
        vanishes almost everywhere).
    """
    _check_method(method, n_samples)
    _check_pair(rho, mean)
    sigma = resolve(act, beta)
    numerator = lambda a, b: (sigma(a) * b - sigma(b) * a) ** 2  # noqa: E731
    denominator = lambda a, b: (sigma(a) * b) ** 2  # noqa: E731
    if method == "monte_carlo":
        return _monte_carlo_ratio(numerator, denominator, n_samples, seed, rho, mean)
    if rho or mean:
        bottom = pair_expectation(denominator, rho, mean)
        if bottom <= 0:
            raise ValueError(f"E[(σ(a)b)²] = 0 for {sigma.label}; the violation is undefined")
        return max(0.0, pair_expectation(numerator, rho, mean) / bottom)
    second_moment = gaussian_expectation(lambda z: sigma(z) ** 2)
    if second_moment <= 0:
        raise ValueError(f"E[σ(a)²] = 0 for {sigma.label}; the violation is undefined")
    cross = gaussian_expectation(lambda z: z * sigma(z))
    # Clamp: for linear σ the two terms cancel to rounding error.
    return max(0.0, 2.0 - 2.0 * cross**2 / second_moment)


@torch.no_grad()
def trained_exchange_violation(
    layer: nn.Module, x: Tensor, per_slot: bool = False
) -> float | Tensor:
    """The exchange violation of a trained gated layer on the inputs it actually sees:
    Σ (σ(a)b − σ(b)a)² / Σ (σ(a)b)² over every input row and slot, with a = x W_qᵀ, b = x W_kᵀ.

    :func:`exchange_violation` is the same ratio for a, b ~ N(0, 1) independent; a trained
    layer's (a, b) are neither standard nor independent, so the two can differ (chapter 5's
    Swish-β dose-response measures this one). Dimensionless; 0 for a linear σ. With
    ``per_slot`` the ratio is taken for each slot separately: a float64 tensor ``(n_slots,)``.

    Parameters
    ----------
    layer:
        A module with ``W_q``, ``W_k`` ``(n_slots, d_model)`` and ``act`` (e.g. a
        :class:`kvattn.mlp.GatedMLP`).
    x:
        Inputs ``(..., d_model)``, e.g. the normalised feed-forward inputs a model records with
        ``TinyLM.forward(idx, ffn_inputs=...)``.

    Raises
    ------
    TypeError
        ``layer`` has no query/key pair.
    ValueError
        ``x``'s last size is not ``d_model``, ``x`` is empty or not finite, or σ(a)b is 0 on
        every input.
    """
    _require_qk(layer)
    d = layer.W_q.shape[1]
    if not isinstance(x, Tensor) or x.ndim < 1 or x.shape[-1] != d or x.numel() == 0:
        raise ValueError(f"x must be a non-empty tensor of shape (..., {d})")
    if not torch.isfinite(x).all():
        raise ValueError("x must be finite")
    x = x.reshape(-1, d).to(torch.float64)
    a = x @ layer.W_q.detach().to(torch.float64).T
    b = x @ layer.W_k.detach().to(torch.float64).T
    gated = layer.act(a) * b
    numerator = (gated - layer.act(b) * a) ** 2
    if per_slot:
        denominator = (gated**2).sum(0)
        if (denominator == 0).any():
            raise ValueError("σ(a)b is 0 on every input for some slot; its violation is undefined")
        return numerator.sum(0) / denominator
    denominator = float((gated**2).sum())
    if denominator == 0:
        raise ValueError("σ(a)b is 0 on every input and slot; the violation is undefined")
    return float(numerator.sum()) / denominator


@dataclass(frozen=True)
class SlotInputs:
    """The inputs ``(a, b) = (x·q_j, x·k_j)`` that each slot of a gated layer sees, standardised,
    with the numbers chapter 4 compares against the Gaussian model of :func:`exchange_violation`.

    ``a`` and ``b`` are float64 ``(n_inputs, n_slots)``, each column divided by its standard
    deviation (means kept); ``rho`` is each slot's correlation of ``a`` and ``b``, ``mean`` the
    average of their two standardised means, ``energy`` the slot's Σ (σ(a)b)² in the layer's own
    units (before standardising), and ``violation`` its measured exchange violation
    (:func:`trained_exchange_violation` with ``per_slot``). All per-slot fields are ``(n_slots,)``.
    """

    a: Tensor
    b: Tensor
    rho: Tensor
    mean: Tensor
    energy: Tensor
    violation: Tensor

    @property
    def heaviest(self) -> int:
        """The slot with the largest ``energy``: the one that carries most of the layer's
        coefficients σ(a)b."""
        return int(self.energy.argmax())

    @property
    def layer_violation(self) -> float:
        """The whole layer's exchange violation, the per-slot ``violation`` averaged with weights
        ``energy``, which is :func:`trained_exchange_violation` of the layer. A weighted mean, it
        lies between the smallest and the largest slot's violation, wherever the heaviest slot's
        falls."""
        return float((self.violation * self.energy).sum() / self.energy.sum())


def slot_inputs(layer: nn.Module, x: Tensor) -> SlotInputs:
    """Each slot's standardised input cloud ``(a, b)``, its correlation, mean, energy and measured
    exchange violation, for a gated layer on the inputs ``x`` it sees (course chapter 4, "The
    inputs a trained unit sees").

    Parameters
    ----------
    layer:
        A module with ``W_q``, ``W_k`` ``(n_slots, d_model)`` and ``act`` (a
        :class:`kvattn.mlp.GatedMLP`, say).
    x:
        Inputs ``(..., d_model)``, at least two rows.

    Raises
    ------
    TypeError
        ``layer`` has no query/key pair.
    ValueError
        As :func:`trained_exchange_violation`, or fewer than two inputs, or a slot whose ``a`` or
        ``b`` is constant over the inputs (it has no standard deviation to divide by).
    """
    violation = trained_exchange_violation(layer, x, per_slot=True)
    d = layer.W_q.shape[1]
    x = x.reshape(-1, d).to(torch.float64)
    if x.shape[0] < 2:
        raise ValueError(f"x must hold at least two inputs to standardise, got {x.shape[0]}")
    with torch.no_grad():
        a = x @ layer.W_q.detach().to(torch.float64).T
        b = x @ layer.W_k.detach().to(torch.float64).T
        energy = (layer.act(a) * b).pow(2).sum(0)
    sa, sb = a.std(0), b.std(0)
    if bool((sa == 0).any() | (sb == 0).any()):
        raise ValueError(
            "a slot's x·q or x·k is constant over the inputs; it cannot be standardised"
        )
    a, b = a / sa, b / sb
    centred_a, centred_b = a - a.mean(0), b - b.mean(0)
    rho = (centred_a * centred_b).sum(0) / (centred_a.norm(dim=0) * centred_b.norm(dim=0))
    return SlotInputs(
        a=a,
        b=b,
        rho=rho,
        mean=(a.mean(0) + b.mean(0)) / 2,
        energy=energy,
        violation=violation,
    )


def scale_violation(
    act: ActLike,
    alpha: float,
    beta: float | None = None,
    *,
    rho: float = 0.0,
    mean: float = 0.0,
    method: str = "quadrature",
    n_samples: int = 1 << 22,
    seed: int = 0,
) -> float:
    """Normalised inverse-scale violation E[(σ(αa)b/α − σ(a)b)²] / E[(σ(a)b)²], a, b ~ N(0,1).

    Zero for every α ≠ 0 when σ is linear; zero for α > 0 (and 2 for α = −1) for ReLU, which is
    positively homogeneous; positive for every α ≠ 1 for SiLU and GELU. Dimensionless.
    ``rho`` and ``mean`` as in :func:`exchange_violation`.

    Raises
    ------
    ValueError
        α = 0 or non-finite, or the conditions of :func:`exchange_violation`.
    """
    if isinstance(alpha, bool) or not isinstance(alpha, int | float):
        raise TypeError(f"alpha must be a number, got {type(alpha).__name__}")
    alpha = float(alpha)
    if alpha == 0 or not math.isfinite(alpha):
        raise ValueError(f"alpha must be finite and non-zero, got {alpha}")
    _check_method(method, n_samples)
    _check_pair(rho, mean)
    sigma = resolve(act, beta)
    numerator = lambda a, b: ((sigma(alpha * a) / alpha - sigma(a)) * b) ** 2  # noqa: E731
    denominator = lambda a, b: (sigma(a) * b) ** 2  # noqa: E731
    if method == "monte_carlo":
        return _monte_carlo_ratio(numerator, denominator, n_samples, seed, rho, mean)
    if rho or mean:
        bottom = pair_expectation(denominator, rho, mean)
        if bottom <= 0:
            raise ValueError(f"E[(σ(a)b)²] = 0 for {sigma.label}; the violation is undefined")
        return pair_expectation(numerator, rho, mean) / bottom
    second_moment = gaussian_expectation(lambda z: sigma(z) ** 2)
    if second_moment <= 0:
        raise ValueError(f"E[σ(a)²] = 0 for {sigma.label}; the violation is undefined")
    return (
        gaussian_expectation(lambda z: (sigma(alpha * z) / alpha - sigma(z)) ** 2) / second_moment
    )


def scale_violation_coefficient(act: ActLike, beta: float | None = None) -> float:
    """Leading coefficient C_σ of the scale violation near α = 1: V(α) = C_σ (ln α)² + O((ln α)³).

    With α = eᵗ, σ(αz)/α − σ(z) = t (zσ'(z) − σ(z)) + O(t²), so

        C_σ = E[(zσ'(z) − σ(z))²] / E[σ(z)²],  z ~ N(0, 1).

    zσ' − σ vanishes exactly for positively homogeneous σ (linear, ReLU: C = 0). For a gated
    σ(z) = z·g(z) it equals z²·g'(z): C_σ weights the gate's *slope* by z⁴, so a gate that is still
    moving in the tails (the logistic gate of SiLU, whose slope decays like e^(−|z|)) scores higher
    than one that has saturated there (GELU's Φ, slope φ(z) ∝ e^(−z²/2)), although GELU's steeper
    centre makes it break the exchange symmetry more. Dimensionless. Ours (chapter 4).

    Raises
    ------
    ValueError
        Unknown activation, or E[σ(z)²] = 0.
    """
    sigma = resolve(act, beta)

    def homogeneity_defect(z: Tensor) -> Tensor:
        z = z.clone().requires_grad_(True)
        with torch.enable_grad():
            y = sigma(z)
            (slope,) = torch.autograd.grad(y.sum(), z)
        return (z * slope - y).detach()

    second_moment = gaussian_expectation(lambda z: sigma(z) ** 2)
    if second_moment <= 0:
        raise ValueError(f"E[σ(a)²] = 0 for {sigma.label}; the violation is undefined")
    return gaussian_expectation(lambda z: homogeneity_defect(z) ** 2) / second_moment


def exchange_violation_map(act: ActLike, a: Tensor, b: Tensor, beta: float | None = None) -> Tensor:
    """Pointwise exchange violation σ(a)b − σ(b)a = ab·(g(a) − g(b)), broadcast over a and b.

    Zero on both axes and on the diagonal a = b; for ReLU also on the quadrants where a and b
    share a sign.
    """
    sigma = resolve(act, beta)
    return sigma(a) * b - sigma(b) * a


def scale_violation_map(
    act: ActLike, a: Tensor, alpha: Tensor, beta: float | None = None
) -> Tensor:
    """Pointwise scale violation σ(αa)/α − σ(a), broadcast over a and α (α must be non-zero)."""
    if (alpha == 0).any():
        raise ValueError("alpha must be non-zero")
    sigma = resolve(act, beta)
    return sigma(alpha * a) / alpha - sigma(a)


# ---------------------------------------------------------------------------------------------
# Transforms of a (trained) layer


def _require_qk(module: nn.Module) -> None:
    if not (hasattr(module, "W_q") and hasattr(module, "W_k")):
        raise TypeError(
            f"{type(module).__name__} has no query/key pair; expected a module with W_q and W_k "
            "(GatedMLP, SymmetricRank1Bilinear, FullBilinearAttentionMLP, GatedRankRMLP)"
        )


def swap_qk(module: nn.Module) -> nn.Module:
    """A copy of ``module`` with its query and key weights exchanged (q_j ↔ k_j for every slot).

    The original is left untouched. For the symmetric forms the copy computes the same function;
    for a gated MLP it moves the gate onto the former key.
    """
    _require_qk(module)
    new = copy.deepcopy(module)
    with torch.no_grad():
        new.W_q.copy_(module.W_k)
        new.W_k.copy_(module.W_q)
    return new


def rescale(module: nn.Module, alpha: float, pair: tuple[str, str] = ("W_q", "W_k")) -> nn.Module:
    """A copy of ``module`` with the first weight of ``pair`` multiplied by α and the second
    divided by α, slot by slot (default: q_j → αq_j, k_j → k_j/α).

    ``pair=("W_k", "W_v")`` applies the up/down rescaling that every gated MLP keeps (its key
    factor enters linearly). α must be finite and non-zero.
    """
    alpha = float(alpha)
    if alpha == 0 or not math.isfinite(alpha):
        raise ValueError(f"alpha must be finite and non-zero, got {alpha}")
    first, second = pair
    for name in pair:
        if not isinstance(getattr(module, name, None), nn.Parameter):
            raise TypeError(f"{type(module).__name__} has no weight {name!r}")
    new = copy.deepcopy(module)
    with torch.no_grad():
        getattr(new, first).mul_(alpha)
        getattr(new, second).div_(alpha)
    return new


def conserved_quantities(module: SlotMLP) -> dict[str, Tensor]:
    """Per-slot differences of squared norms that gradient flow conserves under a scale symmetry.

    Returns a dict of tensors of shape ``(n_slots,)``: ``"qk"`` = ‖q_j‖² − ‖k_j‖²,
    ``"kv"`` = ‖k_j‖² − ‖v_j‖², ``"qv"`` = ‖q_j‖² − ‖v_j‖² (a key-value MLP has only ``"kv"``).
    Norms include every rank component of rank-r slots.

    A continuous symmetry (u, w) → (αu, w/α) of the loss makes ‖u‖² − ‖w‖² constant along gradient
    flow (Du, Hu & Lee 2018; Kunin et al. 2021): the bilinear layer has all three, ReGLU all three
    (α > 0), SwiGLU only ``"kv"``. A finite learning rate moves them by O(lr²) per step; weight
    decay shrinks them geometrically.
    """
    with torch.no_grad():
        sq = {
            name: getattr(module, name).detach().flatten(1).pow(2).sum(1)
            for name in ("W_q", "W_k", "W_v")
            if hasattr(module, name)
        }
    out = {"kv": sq["W_k"] - sq["W_v"]}
    if "W_q" in sq:
        out = {"qk": sq["W_q"] - sq["W_k"], **out, "qv": sq["W_q"] - sq["W_v"]}
    return out


@dataclass(frozen=True)
class JacobianRank:
    """Result of :func:`jacobian_rank`: numerical rank, parameter count and singular values."""

    rank: int
    n_params: int
    singular_values: Tensor

    @property
    def deficit(self) -> int:
        """Number of parameter directions that leave the function unchanged locally:
        ``n_params − rank``."""
        return self.n_params - self.rank


def jacobian_rank(module: nn.Module, x: Tensor, rtol: float = 1e-7) -> JacobianRank:
    """Numerical rank of ∂(outputs on ``x``)/∂(parameters): the locally effective parameter count.

    Each continuous symmetry removes one direction per slot from the Jacobian's row space, so the
    deficit counts them: a bilinear layer loses 2 per slot (q/k and k/v scalings), SwiGLU only 1
    (its broken q/k scaling becomes a free "gate temperature"). Discrete symmetries (swap,
    permutation) do not show up here.

    Computed in float64 on a copy of the module; ``x`` has shape ``(n, d_model)`` and should
    have n·d_out ≥ n_params. Singular values below ``rtol`` × the largest count as zero.
    """
    if x.ndim != 2:
        raise ValueError(f"x must have shape (n, d_model), got {tuple(x.shape)}")
    n_params = sum(p.numel() for p in module.parameters())
    per_input = getattr(module, "d_out", 1)
    if x.shape[0] * per_input < n_params:
        need = -(-n_params // per_input)
        raise ValueError(
            f"{x.shape[0]} inputs give {x.shape[0] * per_input} outputs, fewer than the "
            f"{n_params} parameters, which would cap the rank; use at least {need} inputs"
        )
    if not 0 < rtol < 1:
        raise ValueError(f"rtol must lie in (0, 1), got {rtol}")
    model = copy.deepcopy(module).to(torch.float64)
    params = {k: v.detach() for k, v in model.named_parameters()}
    inputs = x.detach().to(torch.float64)

    def outputs(p: dict[str, Tensor]) -> Tensor:
        return torch.func.functional_call(model, p, (inputs,)).reshape(-1)

    jac = torch.func.jacrev(outputs)(params)
    matrix = torch.cat([j.reshape(j.shape[0], -1) for j in jac.values()], dim=1)
    s = torch.linalg.svdvals(matrix)
    rank = int((s > rtol * s[0]).sum())
    return JacobianRank(rank=rank, n_params=matrix.shape[1], singular_values=s)


# ---------------------------------------------------------------------------------------------
# The compute function behind the symmetry explorer (both faces: kvattn.explorers.symmetry)


@dataclass(frozen=True)
class SymmetryProfile:
    """Everything the symmetry explorer shows for one activation.

    ``violation[i, k]`` = σ(a_i)b_k − σ(b_k)a_i on the grid ``grid`` (so rows are a, columns b);
    ``gate`` = g(z) on ``grid`` (``None`` when σ(0) ≠ 0 and σ has no gate);
    ``exchange`` = E_ex(σ); ``scale[i]`` = E_sc(σ, ``alphas[i]``); both for (a, b) with unit
    variances, correlation ``rho`` and common mean ``mean`` (0 and 0: independent standard).
    """

    label: str
    grid: Tensor
    violation: Tensor
    gate: Tensor | None
    exchange: float
    alphas: Tensor
    scale: Tensor
    rho: float = 0.0
    mean: float = 0.0


def symmetry_profile(
    act: ActLike,
    beta: float | None = None,
    extent: float = 3.0,
    n: int = 41,
    alphas: Tensor | None = None,
    *,
    rho: float = 0.0,
    mean: float = 0.0,
) -> SymmetryProfile:
    """Pointwise exchange violation on [−extent, extent]², the gate, and both scalar metrics,
    the metrics for inputs with correlation ``rho`` and common mean ``mean`` (see
    :func:`exchange_violation`).

    ``alphas`` defaults to 26 values of α, 13 positive ones log-spaced in [0.1, 10] and their
    negatives.

    Raises
    ------
    TypeError
        ``alphas`` is not None or a floating-point tensor.
    ValueError
        ``extent`` is not a finite number > 0, ``n`` not an int ≥ 2 (a bool included),
        ``alphas`` not 1-D with at least one entry, all finite and non-zero, ρ outside
        (−1, 1) or a non-finite ``mean``; an unknown ``act`` or a bad ``beta`` (see
        :func:`kvattn.activations.resolve`). All before any work.
    """
    sigma = resolve(act, beta)
    if not (is_real(extent) and extent > 0):  # nan gave an all-NaN map, 0 a grid of zeros
        raise ValueError(f"extent must be a finite number > 0, got {extent!r}")
    check_int("n", n, low=2)
    if alphas is not None:
        if not isinstance(alphas, Tensor) or not alphas.is_floating_point():
            got = alphas.dtype if isinstance(alphas, Tensor) else type(alphas).__name__
            raise TypeError(
                "alphas must be None or a 1-D floating-point tensor such as "
                f"torch.tensor([0.5, 2.0]), got {got}"
            )
        if alphas.ndim != 1 or len(alphas) == 0:
            raise ValueError(
                f"alphas must be a 1-D tensor of at least one α, got shape {tuple(alphas.shape)}"
            )
        if not bool((torch.isfinite(alphas) & (alphas != 0)).all()):
            raise ValueError(f"alphas must be finite and non-zero, got {alphas.tolist()}")
    _check_pair(rho, mean)
    grid = torch.linspace(-extent, extent, n, dtype=torch.float64)
    if alphas is None:
        pos = torch.logspace(-1, 1, 13, dtype=torch.float64)
        alphas = torch.cat([-pos.flip(0), pos])
    try:
        gate = sigma.gate(grid)
    except ValueError:  # not self-gated (the sigmoid of the original GLU)
        gate = None
    return SymmetryProfile(
        label=sigma.label,
        grid=grid,
        violation=exchange_violation_map(sigma, grid[:, None], grid[None, :]),
        gate=gate,
        exchange=exchange_violation(sigma, rho=rho, mean=mean),
        alphas=alphas,
        scale=torch.tensor(
            [scale_violation(sigma, float(a), rho=rho, mean=mean) for a in alphas],
            dtype=torch.float64,
        ),
        rho=float(rho),
        mean=float(mean),
    )
