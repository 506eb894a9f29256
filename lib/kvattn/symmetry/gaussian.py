"""Expectations over Gaussian inputs, the integrals the violation metrics reduce to.

:func:`~kvattn.symmetry.gaussian_expectation` for one standard normal variable (composite Simpson
quadrature), :func:`~kvattn.symmetry.pair_expectation` for a jointly normal pair (a, b) with
unit variances, correlation ρ and a common mean (a product Simpson rule), the pair's contours
(:func:`~kvattn.symmetry.input_contour`), and a seeded Monte Carlo ratio of two expectations to
compare them with.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

Tensor = torch.Tensor

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
