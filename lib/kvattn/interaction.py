"""Interaction tensors: a bilinear layer as a sum of rank-1 QK circuits.

For a bilinear layer y = ((x W_qᵀ) ⊙ (x W_kᵀ)) W_v, output o is a quadratic form in the input,

    y_o = x B_o xᵀ,     B_o = Σ_j P_oj q_j k_jᵀ,     P = W_vᵀ  (shape (d_out, m)),

so each slot contributes a rank-1 "QK circuit" q_j k_jᵀ weighted by its value column (Sharkey 2023;
Pearce et al. 2025). Only the symmetric part of B_o enters x B_o xᵀ; symmetrising quotients out
exactly the q ↔ k exchange freedom. The eigen-decomposition of sym(B_o) writes y_o as
Σ_i λ_i (u_i·x)². A gated unit σ(q·x)(k·x) = (q·x)(k·x) g(q·x) gives an *input-dependent*
interaction matrix B_o(x) = Σ_j P_oj g(q_j·x) q_j k_jᵀ, the attention picture: the gate is a
data-dependent weighting of rank-1 QK circuits.
"""

from __future__ import annotations

import torch
from torch import nn

from .mlp import check_input

Tensor = torch.Tensor


def _weights(module_or_W_q: nn.Module | Tensor, W_k: Tensor | None, W_v: Tensor | None):
    if isinstance(module_or_W_q, nn.Module):
        if W_k is not None or W_v is not None:
            raise TypeError("pass either a module or the three weights W_q, W_k, W_v")
        try:
            W_q, W_k, W_v = (getattr(module_or_W_q, n) for n in ("W_q", "W_k", "W_v"))
        except AttributeError:
            raise TypeError(
                f"{type(module_or_W_q).__name__} has no W_q, W_k, W_v; an interaction tensor "
                "needs a bilinear or gated layer"
            ) from None
    else:
        W_q = module_or_W_q
        if W_k is None or W_v is None:
            raise TypeError("interaction_tensor(W_q, W_k, W_v) needs all three weights")
        for name, w in (("W_q", W_q), ("W_k", W_k), ("W_v", W_v)):
            if not isinstance(w, Tensor):
                raise TypeError(f"{name} must be a torch.Tensor, got {type(w).__name__}")
            if not w.is_floating_point():
                raise ValueError(f"{name} must be a floating-point tensor, got {w.dtype}")
    if W_q.shape != W_k.shape or W_q.ndim not in (2, 3):
        raise ValueError(
            f"W_q and W_k must both have shape (m, d) or (m, r, d); got {tuple(W_q.shape)} "
            f"and {tuple(W_k.shape)}"
        )
    if W_v.ndim != 2 or W_v.shape[0] != W_q.shape[0]:
        raise ValueError(f"W_v must have shape ({W_q.shape[0]}, d_out), got {tuple(W_v.shape)}")
    if W_q.ndim == 2:
        W_q, W_k = W_q.unsqueeze(1), W_k.unsqueeze(1)
    return W_q.detach(), W_k.detach(), W_v.detach()


def interaction_tensor(
    module_or_W_q: nn.Module | Tensor, W_k: Tensor | None = None, W_v: Tensor | None = None
) -> Tensor:
    """The interaction tensor B with B[o] = Σ_j P_oj Σ_s q_js k_jsᵀ, shape ``(d_out, d, d)``.

    Accepts a layer with ``W_q``, ``W_k``, ``W_v`` (rank-1 weights of shape ``(m, d)`` or rank-r
    of shape ``(m, r, d)``) or the three tensors. For a bilinear layer (identity σ) the layer's
    output is exactly ``bilinear_form(B, x)``; for other σ, B is the layer's bilinear skeleton.
    """
    W_q, W_k, W_v = _weights(module_or_W_q, W_k, W_v)
    return torch.einsum("mo,msi,msj->oij", W_v, W_q, W_k)


def symmetrise(B: Tensor) -> Tensor:
    """½(B + Bᵀ) over the last two axes; leaves every quadratic form x B xᵀ unchanged."""
    if B.ndim < 2 or B.shape[-1] != B.shape[-2]:
        raise ValueError(f"expected square matrices in the last two axes, got {tuple(B.shape)}")
    return 0.5 * (B + B.transpose(-1, -2))


def bilinear_form(B: Tensor, x: Tensor) -> Tensor:
    """y_o = x B_o xᵀ for B of shape ``(d_out, d, d)`` (or ``(..., d_out, d, d)`` batched with x)
    and x of shape ``(..., d)``; returns shape ``(..., d_out)``."""
    check_input(x, B.shape[-1])
    if B.ndim > 3:
        try:
            torch.broadcast_shapes(x.shape[:-1], B.shape[:-3])
        except RuntimeError:
            raise ValueError(
                f"batched B {tuple(B.shape)} needs leading shape {tuple(B.shape[:-3])} to "
                f"broadcast with x's {tuple(x.shape[:-1])}"
            ) from None
    return torch.einsum("...i,...oij,...j->...o", x, B, x)


def eigendecompose(B: Tensor) -> tuple[Tensor, Tensor]:
    """Eigenvalues (ascending) and orthonormal eigenvectors of sym(B_o), for every output o.

    Returns ``(eigenvalues, eigenvectors)`` of shapes ``(..., d)`` and ``(..., d, d)``, the
    eigenvectors in the columns, so that x B_o xᵀ = Σ_i λ_oi (x·u_oi)².
    """
    return torch.linalg.eigh(symmetrise(B))


def output_direction(B: Tensor, u: Tensor) -> Tensor:
    """The interaction matrix Q_u = Σ_o u_o B_o of the output direction u (shape ``(d_out,)``)."""
    if u.shape != B.shape[-3:-2]:
        raise ValueError(f"u must have shape ({B.shape[-3]},), got {tuple(u.shape)}")
    return torch.einsum("o,...oij->...ij", u, B)


def gated_interaction(module: nn.Module, x: Tensor) -> Tensor:
    """Input-dependent interaction tensor of a gated layer, shape ``(..., d_out, d, d)``:

        B_o(x) = Σ_j P_oj g(q_j·x) q_j k_jᵀ,   g(z) = σ(z)/z,

    so that the layer's output is ``bilinear_form(B(x), x)`` exactly (the factorisation
    σ(q·x)(k·x) = (q·x)(k·x) g(q·x)). Needs a rank-1 gated layer with a self-gated σ.

    Raises
    ------
    TypeError
        The module is not a rank-1 gated layer.
    ValueError
        σ is not self-gated (the sigmoid GLU), or bad input.
    """
    if getattr(module, "form", None) != "gated":
        raise TypeError(f"expected a GatedMLP, got {type(module).__name__}")
    check_input(x, module.d_model)
    g = module.act.gate(x @ module.W_q.detach().T)  # (..., m)
    return torch.einsum(
        "...m,mo,mi,mj->...oij", g, module.W_v.detach(), module.W_q.detach(), module.W_k.detach()
    )
