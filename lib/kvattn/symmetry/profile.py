"""The compute function behind the symmetry explorer: one activation's violation map, gate and
metrics (both faces of the explorer, ``kvattn.course.explorers.symmetry``, draw it).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .._checks import check_int, is_real
from ..activations import resolve
from .gaussian import _check_pair
from .violation import ActLike, exchange_violation, exchange_violation_map, scale_violation

Tensor = torch.Tensor


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
