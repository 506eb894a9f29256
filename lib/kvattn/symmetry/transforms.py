"""Transforms of a (trained) layer along its symmetries, and what they leave unchanged: swapping
query and key, rescaling a pair of factors, the quantities gradient flow conserves, and the
Jacobian's rank (the locally effective parameter count).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import torch
from torch import nn

from ..mlp import SlotMLP

Tensor = torch.Tensor


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
