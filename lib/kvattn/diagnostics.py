"""Measurements of PLGA's deductive tensors: DAG losses, order parameters, rank-1 audit,
Perron–Frobenius eigenpair and the RoPE-commutant residual.

All functions take tensors whose last two axes are d_k × d_k matrices (any leading shape, e.g.
``[B, H, d_k, d_k]`` from :class:`kvattn.pldr.DeductiveOutputs`) and compute in float64 unless
they are used as a training loss.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

Tensor = torch.Tensor


# ---------------------------------------------------------------------------------------------
# DAG losses


@torch.no_grad()
def _perron_upper_bound(X: Tensor, iterations: int = 30) -> Tensor:
    """An upper bound on the Perron root ρ(X) of nonnegative matrices ``[..., d, d]``.

    Power iteration from the all-ones vector, then the Collatz–Wielandt bound
    max_i (Xv)_i / v_i ≥ ρ(X), which is tight once v has converged.
    """
    v = torch.ones(*X.shape[:-1], 1, dtype=X.dtype, device=X.device)
    for _ in range(iterations):
        w = X @ v
        v = w / w.amax(dim=-2, keepdim=True).clamp_min(torch.finfo(X.dtype).tiny)
        v = v.clamp_min(torch.finfo(X.dtype).tiny)
    return ((X @ v) / v).amax(dim=(-2, -1))


def log_trace_expm_squared(M: Tensor) -> Tensor:
    """log tr(exp(M∘M)) for every matrix in ``M [..., d, d]``, without overflow; differentiable.

    M∘M is nonnegative, so its largest real eigenvalue is its Perron root ρ. With a constant
    shift c ≥ ρ (a Collatz–Wielandt bound, computed without gradient),
    log tr e^{X} = c + log tr e^{X − cI}, and e^{X − cI} has spectral radius ≤ 1. The trained
    tensors of PLDR-LLMs make tr e^{M∘M} overflow float32 (log values ~1e3), which is why the
    reference's direct ``matrix_exp`` cannot be used as is.
    """
    X = M * M
    c = _perron_upper_bound(X.detach())
    eye = torch.eye(X.shape[-1], dtype=X.dtype, device=X.device)
    shifted = torch.linalg.matrix_exp(X - c[..., None, None] * eye)
    trace = shifted.diagonal(dim1=-2, dim2=-1).sum(-1)
    return c + torch.log(trace)


def dag_loss(M: Tensor) -> Tensor:
    """The reference's DAG regulariser ``ℓ(M) = |log(tr(exp(M∘M)) / d)|``, per matrix ``[...]``.

    It is log(1 + h(M)/d) in absolute value, with h the NOTEARS acyclicity function
    (:func:`notears_h`); zero exactly when M∘M is nilpotent (M is the weighted adjacency of a DAG).
    PLDR-LLM v510_dag applies it to A_LM, A_P and G_LM (not to A) with separate coefficients.
    """
    return (log_trace_expm_squared(M) - math.log(M.shape[-1])).abs()


def notears_h(M: Tensor) -> Tensor:
    """The NOTEARS acyclicity function h(M) = tr(exp(M∘M)) − d (Zheng et al. 2018), in float64.

    Returns ``inf`` where the trace exceeds float64's range (its log is finite: see
    :func:`log_trace_expm_squared`).
    """
    log_tr = log_trace_expm_squared(M.detach().double())
    return torch.exp(log_tr) - M.shape[-1]


# ---------------------------------------------------------------------------------------------
# Order parameters


def order_parameter(x1: Tensor, x2: Tensor, normalisation: str = "mean") -> float:
    """How much a deductive tensor changes between two runs, pooled over all its values.

    ``"mean"`` (SOC paper): ``RMSE(x1 − x2) / |mean(x1)|``, the root-mean-square difference over the
    mean magnitude of the reference run x1. ``"rms"`` (the math-foundations audit):
    rms(x1 − x2) / ½(rms x1 + rms x2), bounded by 2. The two must not be mixed.
    """
    if x1.shape != x2.shape:
        raise ValueError(f"shapes differ: {tuple(x1.shape)} vs {tuple(x2.shape)}")
    a, b = x1.detach().double(), x2.detach().double()
    rmse = (a - b).pow(2).mean().sqrt()
    if normalisation == "mean":
        return float(rmse / a.mean().abs())
    if normalisation == "rms":
        return float(rmse / (0.5 * (a.pow(2).mean().sqrt() + b.pow(2).mean().sqrt())))
    raise ValueError(f"normalisation must be 'mean' or 'rms', got {normalisation!r}")


# ---------------------------------------------------------------------------------------------
# Rank-1 audit


@dataclass(frozen=True)
class RankAudit:
    """Rank-1 audit of matrices ``[..., d, d]`` (e.g. the metric learner output A per head).

    ``rank``: numerical rank of each matrix (singular values above 64·eps·σ1 of float32, as the
    audit); ``sigma_ratio``: σ2/σ1; ``row_spread``: variance across rows over the mean square
    (0 when all rows are identical, A = 𝟙αᵀ); ``head_spread``: RMS difference between heads over
    the RMS (0 when every head has the same matrix), if a head axis is given.
    """

    rank: Tensor
    sigma_ratio: Tensor
    row_spread: Tensor
    head_spread: float | None


def rank_audit(A: Tensor, head_dim: int | None = 1) -> RankAudit:
    """Audit every matrix in ``A [..., d, d]``; ``head_dim`` is the axis of heads (None: none)."""
    X = A.detach().double()
    s = torch.linalg.svdvals(X)
    tol = 64 * torch.finfo(torch.float32).eps * s[..., :1]
    rank = (s > tol).sum(-1)
    ratio = s[..., 1] / s[..., 0]
    row_spread = X.var(dim=-2, unbiased=False).mean(-1) / X.pow(2).mean((-2, -1))
    head_spread = None
    if head_dim is not None:
        mean_head = X.mean(dim=head_dim, keepdim=True)
        head_spread = float((X - mean_head).pow(2).mean().sqrt() / X.pow(2).mean().sqrt())
    return RankAudit(rank, ratio, row_spread, head_spread)


# ---------------------------------------------------------------------------------------------
# Perron–Frobenius


def perron_frobenius(
    A_LM: Tensor, iterations: int = 500, tol: float = 1e-12
) -> tuple[Tensor, Tensor]:
    """Dominant eigenvalue and eigenvector of entrywise-positive matrices ``[..., d, d]``.

    A_LM ≥ ε > 0 elementwise, so by Perron–Frobenius its spectral radius is a simple positive
    eigenvalue with an entrywise-positive eigenvector. Power iteration in float64; returns
    ``(eigenvalue [...], eigenvector [..., d])`` with the eigenvector normalised to unit sum.

    Raises
    ------
    ValueError
        If some entry is not positive (the theorem needs a positive matrix).
    """
    X = A_LM.detach().double()
    if not bool((X > 0).all()):
        raise ValueError("Perron–Frobenius needs entrywise-positive matrices")
    v = torch.ones(*X.shape[:-1], dtype=X.dtype, device=X.device) / X.shape[-1]
    for _ in range(iterations):
        w = (X @ v[..., None])[..., 0]
        w = w / w.sum(-1, keepdim=True)
        if float((w - v).abs().max()) < tol:
            v = w
            break
        v = w
    lam = ((X @ v[..., None])[..., 0] / v).mean(-1)
    return lam, v


# ---------------------------------------------------------------------------------------------
# RoPE commutant


def rope_planes(d_k: int, interleaved: bool = True) -> list[tuple[int, int]]:
    """The coordinate pairs RoPE rotates: (2i, 2i+1) interleaved, (i, i + d_k/2) half-split."""
    if d_k % 2:
        raise ValueError(f"d_k must be even, got {d_k}")
    if interleaved:
        return [(2 * i, 2 * i + 1) for i in range(d_k // 2)]
    return [(i, i + d_k // 2) for i in range(d_k // 2)]


def commutant_projection(G: Tensor, interleaved: bool = True) -> Tensor:
    """Project ``G [..., d_k, d_k]`` onto the matrices that commute with every RoPE rotation.

    With distinct frequencies per plane, the commutant is block-diagonal in the RoPE planes with
    each 2×2 block of the form [[α, −β], [β, α]] (a rotation-scaling). The orthogonal
    (Frobenius) projection keeps, per plane, α = mean of the diagonal pair and β = mean of
    (G[j,i], −G[i,j]), and zeroes everything else.
    """
    out = torch.zeros_like(G)
    for i, j in rope_planes(G.shape[-1], interleaved):
        alpha = 0.5 * (G[..., i, i] + G[..., j, j])
        beta = 0.5 * (G[..., j, i] - G[..., i, j])
        out[..., i, i] = alpha
        out[..., j, j] = alpha
        out[..., j, i] = beta
        out[..., i, j] = -beta
    return out


def commutant_residual(G: Tensor, interleaved: bool = True) -> Tensor:
    """‖G − Π(G)‖_F / ‖G‖_F per matrix: 0 when G commutes with RoPE (the score q G kᵀ then
    depends only on relative positions), near 1 when G uses absolute-position directions."""
    X = G.detach().double()
    residual = X - commutant_projection(X, interleaved)
    return residual.norm(dim=(-2, -1)) / X.norm(dim=(-2, -1))
