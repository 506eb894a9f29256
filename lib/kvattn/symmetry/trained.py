"""The exchange violation of a trained gated layer on the inputs it sees, as a whole and slot by
slot, with each slot's standardised input cloud (chapters 4 and 5).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from .transforms import _require_qk

Tensor = torch.Tensor


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
