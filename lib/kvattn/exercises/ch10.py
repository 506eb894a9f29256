"""Exercises of chapter 10, RoPE twirl, concentration, contraction: cases, references, mistakes."""

from __future__ import annotations

import torch

from .. import diagnostics
from ._checker import Case, Exercise, Mistake, randn, register


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
        "The orthogonal projection of G (..., d_k, d_k) onto the matrices that commute with "
        "every "
        "RoPE rotation (interleaved planes): per plane a block [[α, −β], [β, α]], zero "
        "elsewhere.",
        diagnostics.commutant_projection,
        _commutant_cases,
        (
            Mistake(
                "the 2×2 diagonal blocks were kept as they are; only their rotation-scaling "
                "part [[α, −β], [β, α]] commutes with a rotation.",
                _block_diagonal_only,
            ),
            Mistake(
                "β with the wrong sign: β = ½(G[j, i] − G[i, j]) for the plane (i, j).",
                _commutant_flipped_beta,
            ),
        ),
    ),
    Exercise(
        "commutant_residual",
        10,
        "commutant_residual(G) -> Tensor",
        "‖G − Π(G)‖_F / ‖G‖_F per matrix of G (..., d_k, d_k), Π the commutant projection: 0 "
        "when "
        "G keeps only relative positions.",
        diagnostics.commutant_residual,
        _commutant_cases,
        (
            Mistake(
                "not normalised by ‖G‖_F.",
                lambda G: (G - diagnostics.commutant_projection(G)).norm(dim=(-2, -1)),
            ),
            Mistake(
                "squared norms: the ratio of Frobenius norms, not of their squares.",
                lambda G: (
                    (G - diagnostics.commutant_projection(G)).pow(2).sum((-2, -1))
                    / G.pow(2).sum((-2, -1))
                ),
            ),
        ),
    ),
)
