"""Exercises of chapter 10, RoPE twirl, concentration, contraction: cases, references, mistakes."""

from __future__ import annotations

import torch

from ... import diagnostics
from ._checker import Case, Exercise, Mistake, randn, register
from .ch06 import rope_matrix


def _rope_cases(gen):
    return [
        Case("6 positions, d_k=4, θ=10000", (randn(gen, 6, 4), 10_000.0)),
        Case("d_k=8, θ=100", (randn(gen, 5, 8), 100.0)),
        Case("one position (no rotation)", (randn(gen, 1, 6), 10_000.0)),
    ]


def _rope(x, theta, interleaved=True, sign=1.0):
    S, d_k = x.shape
    inv_freq = theta ** (-torch.arange(0, d_k, 2, dtype=torch.float64) / d_k)
    angle = torch.arange(S, dtype=torch.float64)[:, None] * inv_freq
    cos, sin = angle.cos(), sign * angle.sin()
    if interleaved:
        x1, x2 = x[:, 0::2], x[:, 1::2]
        return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), -1).flatten(-2)
    x1, x2 = x[:, : d_k // 2], x[:, d_k // 2 :]
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), -1)


def _commutant_cases(gen):
    return [
        Case("random 4×4", (randn(gen, 4, 4),)),
        Case("a stack of 6×6", (randn(gen, 2, 6, 6),)),
        Case("already in the commutant", (diagnostics.commutant_projection(randn(gen, 4, 4)),)),
        Case("d_k=2 (one plane)", (randn(gen, 2, 2),)),
    ]


def _block_diagonal_only(G):
    out = torch.zeros_like(G)
    for i, j in diagnostics.rope_planes(G.shape[-1]):
        out[..., i : j + 1, i : j + 1] = G[..., i : j + 1, i : j + 1]
    return out


def _commutant_flipped_beta(G):
    P = diagnostics.commutant_projection(G)
    for i, j in diagnostics.rope_planes(G.shape[-1]):
        P[..., i, j], P[..., j, i] = -P[..., i, j], -P[..., j, i]
    return P


def _plane_residuals(G, how: str = ""):
    """(..., d_k/2, d_k/2): entry (a, b) is ‖block (a, b) of G − Π(G)‖²_F / ‖G‖²_F."""
    R = G - (
        _block_diagonal_only(G) if how == "whole blocks" else diagnostics.commutant_projection(G)
    )
    n = G.shape[-1] // 2
    blocks = R.pow(2).unflatten(-1, (n, 2)).unflatten(-3, (n, 2)).sum((-3, -1))
    if how == "not normalised":
        return blocks
    total = G.pow(2).sum((-2, -1))[..., None, None]
    return blocks.sqrt() / total.sqrt() if how == "norms" else blocks / total


def _rotations(d_k, n, theta, interleaved=True):
    return torch.stack([rope_matrix(d_k, p, theta, interleaved) for p in range(n)])


def _twirl_average(G, theta, n, how: str = ""):
    R = _rotations(G.shape[-1], n + (how == "from 1"), theta, how != "half-split")
    if how == "from 1":
        R = R[1:]
    R = R.reshape(n, *([1] * (G.ndim - 2)), *R.shape[-2:])
    if how == "inverse":
        return (R @ G[None] @ R.transpose(-1, -2)).mean(0)
    return (R.transpose(-1, -2) @ G[None] @ R).mean(0)


def _twirl_cases(gen):
    return [
        Case("random 4×4, θ=10000, 8 positions", (randn(gen, 4, 4), 10_000.0, 8)),
        Case("a stack of 6×6, θ=100, 50 positions", (randn(gen, 2, 6, 6), 100.0, 50)),
        Case("one position (no rotation)", (randn(gen, 4, 4), 10_000.0, 1)),
        Case(
            "G in the commutant (the average keeps it)",
            (diagnostics.commutant_projection(randn(gen, 6, 6)), 10.0, 5),
        ),
    ]


register(
    Exercise(
        "rope",
        10,
        "rope(x, theta) -> Tensor",
        "Rotate the rows x (S, d_k) of positions 0…S−1 by RoPE in the interleaved layout: "
        "plane "
        "i = (2i, 2i+1) turns by p·θ^(−2i/d_k) at position p, (x1, x2) → (x1 cos − x2 sin, "
        "x1 sin + x2 cos).",
        _rope,
        _rope_cases,
        (
            Mistake(
                "the half-split layout (planes (i, i + d_k/2)); this model uses interleaved "
                "pairs (2i, 2i+1).",
                lambda x, t: _rope(x, t, interleaved=False),
            ),
            Mistake(
                "rotation in the opposite direction (sin with the wrong sign).",
                lambda x, t: _rope(x, t, sign=-1.0),
            ),
            Mistake("frequency exponent −i/d_k; it is −2i/d_k.", lambda x, t: _rope(x, t**0.5)),
        ),
    ),
    Exercise(
        "commutant_projection",
        10,
        "commutant_projection(G) -> Tensor",
        "The orthogonal (Frobenius) projection of G (..., d_k, d_k) onto the matrices that "
        "commute with every RoPE rotation (interleaved planes, distinct frequencies): those are "
        "block-diagonal in the planes with each 2×2 block a·I + b·J, J the rotation by 90°.",
        diagnostics.commutant_projection,
        _commutant_cases,
        (
            Mistake(
                "the 2×2 diagonal blocks were kept as they are; only their a·I + b·J part "
                "commutes with a rotation, the symmetric traceless rest does not.",
                _block_diagonal_only,
            ),
            Mistake(
                "b with the wrong sign: the coefficient of J in the plane (i, j) is "
                "⟨G, J⟩/⟨J, J⟩ = ½(G[j, i] − G[i, j]) for J = [[0, −1], [1, 0]].",
                _commutant_flipped_beta,
            ),
            Mistake(
                "the coefficients were not divided by ⟨B, B⟩ = 2: the basis I, J of a plane is "
                "orthogonal but not orthonormal.",
                lambda G: 2 * diagnostics.commutant_projection(G),
            ),
        ),
    ),
    Exercise(
        "plane_residuals",
        10,
        "plane_residuals(G) -> Tensor",
        "Where the part of G (..., d_k, d_k) outside the RoPE commutant lives: a "
        "(..., d_k/2, d_k/2) tensor whose entry (a, b) is the squared Frobenius norm of the 2×2 "
        "block of G − Π(G) in rows of plane a and columns of plane b, over ‖G‖²_F; its entries "
        "sum to the squared commutant residual.",
        _plane_residuals,
        _commutant_cases,
        (
            Mistake(
                "the diagonal blocks were counted as inside the commutant: only their a·I + b·J "
                "part is; the rest of a diagonal block is outside.",
                lambda G: _plane_residuals(G, "whole blocks"),
            ),
            Mistake(
                "not normalised by ‖G‖²_F.",
                lambda G: _plane_residuals(G, "not normalised"),
            ),
            Mistake(
                "norms, not squared norms: only the squares add up to the squared residual.",
                lambda G: _plane_residuals(G, "norms"),
            ),
        ),
    ),
    Exercise(
        "twirl_average",
        10,
        "twirl_average(G, theta, n) -> Tensor",
        "The average the density applies to one position's term, over positions p = 0 … n−1: "
        "(1/n) Σ_p R(p)ᵀ G R(p), for G (..., d_k, d_k) and RoPE's R(p) with base θ "
        "(interleaved planes; rope(x) = x R(p) for a row x).",
        _twirl_average,
        _twirl_cases,
        (
            Mistake(
                "R(p) G R(p)ᵀ rotates the other way (the twirl by −p): a query rotated as "
                "q R(p) contributes R(p)ᵀ qᵀ q R(p) to the density.",
                lambda G, t, n: _twirl_average(G, t, n, "inverse"),
            ),
            Mistake(
                "positions 1 … n: the block starts at position 0, which is not rotated.",
                lambda G, t, n: _twirl_average(G, t, n, "from 1"),
            ),
            Mistake(
                "the half-split layout (planes (t, t + d_k/2)); this model rotates interleaved "
                "pairs (2t, 2t+1).",
                lambda G, t, n: _twirl_average(G, t, n, "half-split"),
            ),
        ),
    ),
)
