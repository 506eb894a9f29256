"""The metric learner's row map, the route of collapse: how strongly it still responds to its
input, unit by unit, and how A's row energy splits between the last LayerNorm's scale γ and
the shape of the rows it normalises.

The metric learner acts on each row of ``LayerNorm(A0)`` on its own: a row ``r`` of length d_k
goes through ``num_reslayerA`` residual units ``u_1 … u_N`` to the same row of A,
``φ(r) = u_N(… u_1(r))``. Each unit ends in a LayerNorm, ``u(r) = β + γ ⊙ n(z)`` with
``z = GLU(GLU(r)) + r`` and ``n(z)`` the row ``z`` normalised to mean 0 and variance 1 (up to
the LayerNorm's ε). Two routes make A the same for every input (chapter 11):

* the **gate**: γ of the last unit → 0, and every row of A is β;
* **contraction**: each unit's Jacobian shrinks the differences between rows, and the spread
  of A's rows shrinks like the product of the units' gains (:func:`unit_gains`).

* :func:`row_map_gain` — the composite gain ``‖∂φ/∂r‖₂``, median over visited rows, per head;
* :func:`unit_gains` — each unit's gain and the composite, median over every visited row;
* :func:`row_energy_split` — A's row energy and its split ``Σ_j γ_j² × shape energy_j``;
* :func:`identical_rows` — whether A's rows are bitwise identical in the model's precision.

Source: the row-map criterion and the LayerNorm gate of the training-dynamics study
[gokden2026dynamics]; contraction across units (Contraction.lean) and the LayerNorm and
rank-one results of the author's formalisation [gokden2026mathfoundations], whose audit of the
published 110M model reports per-unit and composite gains. Computed here on CPU float64 copies
of the LayerNorm and the units, whatever the model's device (bracketed keys cite
``book/references.bib``).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch

from ..pldr import PLDRLLM
from .heads import _last_position, deductive_tensors
from .measures import _check_probes, cpu64

Tensor = torch.Tensor


def _check_plga(model: object, what: str) -> None:
    if not isinstance(model, PLDRLLM) or model.kind != "plga":
        raise TypeError(f"model must be a PLDRLLM with PLGA (only PLGA has {what})")


def _outputs(model: PLDRLLM, probes: list[Tensor]) -> list[list]:
    """The deductive tensors of every probe at its last position (eval mode, mode restored),
    after the checks every function here makes first."""
    _check_plga(model, "a metric learner")
    _check_probes(probes, 1, "need a list of one or more probes", distinct=True)
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            return [
                [_last_position(o) for o in out]
                for out in deductive_tensors(model, [p.to(device) for p in probes])
            ]
    finally:
        model.train(was_training)


def _row_maps(model: PLDRLLM, probes: list[Tensor]) -> list[tuple[Tensor, list]]:
    """Per layer: the visited rows ``LayerNorm(A0)`` ``[P, H, d_k, d_k]`` (every probe at its
    last position) and CPU float64 copies of the layer's residual units."""
    outputs = _outputs(model, probes)
    maps = []
    with torch.no_grad():
        for layer, block in enumerate(model.decoder.dec_layers):
            attention = block.mha1
            # float64 CPU copies: the analysis convention of the diagnostics, and torch.func
            # then never meets an accelerator's kernels or MPS's lack of float64
            norm, units = (
                copy.deepcopy(m).to(device="cpu", dtype=torch.float64).eval()
                for m in (attention.layernorm1, attention.reslayerAs)
            )
            A0 = torch.cat([cpu64(o[layer].A0) for o in outputs])
            maps.append((norm(A0), list(units)))
    return maps


def _compose(units: list):
    """The row map ``r -> u_N(... u_1(r))`` of ``units``."""

    def row_map(r: Tensor) -> Tensor:
        for unit in units:
            r = unit(r)
        return r

    return row_map


def _gain(fn, rows: Tensor) -> Tensor:
    """``‖∂fn/∂r‖₂`` at every row of ``rows`` ``[..., d]`` (largest singular value), ``[...]``."""
    flat = rows.reshape(-1, rows.shape[-1])
    J = torch.func.vmap(torch.func.jacrev(fn))(flat)
    return torch.linalg.matrix_norm(J.detach(), ord=2).reshape(rows.shape[:-1])


def row_map_gain(model: PLDRLLM, probes: list[Tensor]) -> Tensor:
    """How strongly each layer's metric learner still responds to its input: the largest
    singular value of the Jacobian of the row map, median over the rows the probes visit.

    Its Jacobian ``∂φ/∂r`` (d_k × d_k) says how much A can still change when the input changes;
    a row map that has flattened to a constant has gain 0 and makes A, hence G_LM, the same for
    every input (row-map collapse). For each probe (at its last position, as
    :func:`~kvattn.diagnostics.collapse.collapse_measures`) and head, every one of the d_k rows
    is a visited row.

    Parameters
    ----------
    model:
        A :class:`kvattn.pldr.PLDRLLM` with PLGA (any device; run in eval mode, mode restored).
    probes:
        One or more token-id tensors ``[1, S]``.

    Returns
    -------
    CPU float64 tensor ``[L, H]``: per layer and head, the median over the visited rows of
    ``‖∂φ/∂r‖₂`` (dimensionless: A and its input are both LayerNorm outputs). Units whose GLU
    blocks add nothing give gain 1 (LayerNorm of a LayerNormed row is a projection); a randomly
    initialised metric learner gives about 1.2.

    Source: the row-map collapse criterion of the training-dynamics study
    [gokden2026dynamics]: median top singular value of the row map's Jacobian over visited rows,
    collapsed below 0.1.

    Raises
    ------
    TypeError
        ``model`` is not a PLGA PLDRLLM (a GPT or a constant-G model has no metric learner),
        ``probes`` is not a list or tuple, or a probe is not an int64 (or int32) tensor.
    ValueError
        No probes, a probe not of shape ``[1, S]`` with S ≥ 1 or on the meta device, or two
        probes with the same ids (a repeat would count its rows twice in the median).
    """
    gains = []
    for rows, units in _row_maps(model, probes):
        gain = _gain(_compose(units), rows)  # [P, H, d_k]
        gains.append(gain.transpose(0, 1).reshape(gain.shape[1], -1).median(-1).values)
    return torch.stack(gains)


@dataclass(frozen=True)
class UnitGains:
    """The row map's gains, per layer, each the median over every visited row (all probes and
    heads), CPU float64 and dimensionless.

    ``unit``: ``[L, N]``, unit n's gain ``‖∂u_n/∂r‖₂`` at the rows as they reach unit n;
    ``composite``: ``[L]``, the whole map's ``‖∂φ/∂r‖₂``; ``product``: ``[L]``, the median over
    rows of the product of the units' gains at that row, a bound on the composite at that row
    (the norm of a product of Jacobians is at most the product of their norms)."""

    unit: Tensor
    composite: Tensor
    product: Tensor


def unit_gains(model: PLDRLLM, probes: list[Tensor]) -> UnitGains:
    """Each residual unit's gain along the row map, and the composite gain, per layer.

    Contraction through the metric learner's depth multiplies: if every unit shrinks the
    differences between rows by at most K, N units shrink them by K^N. This measures it on the
    rows the probes visit: unit n's Jacobian is taken at ``u_{n-1}(… u_1(r))``.

    Parameters
    ----------
    model:
        A :class:`kvattn.pldr.PLDRLLM` with PLGA (any device; run in eval mode, mode restored).
    probes:
        One or more distinct token-id tensors ``[1, S]`` (each at its last position).

    Returns
    -------
    :class:`UnitGains`. A passive unit (GLU blocks that output 0) has gain 1; a metric learner
    whose last LayerNorm has γ = 0 has unit gain 0 there and composite 0.

    Source: per-unit and composite row-map Jacobians of the audit of the published 110M model
    [gokden2026mathfoundations] (per-unit median 0.47, composite median 4.9e-12 over its 8
    units); contraction across units (Contraction.lean, same source).

    Raises
    ------
    TypeError, ValueError
        As :func:`row_map_gain`.
    """
    per_unit, composite, product = [], [], []
    for rows, units in _row_maps(model, probes):
        flat = rows.reshape(-1, rows.shape[-1])
        gains = []
        with torch.no_grad():
            at = flat
            for unit in units:
                gains.append(_gain(unit, at))
                at = unit(at)
        g = torch.stack(gains)  # [N, rows]
        per_unit.append(g.median(-1).values)
        composite.append(_gain(_compose(units), flat).median())
        product.append(g.prod(0).median())
    return UnitGains(torch.stack(per_unit), torch.stack(composite), torch.stack(product))


@dataclass(frozen=True)
class RowEnergySplit:
    """A's row energy and its split through the last LayerNorm, per layer, CPU float64.

    For one head's A (d_k rows) the row energy is the mean over rows of ``‖A_i − Ā‖²``, with Ā
    the mean row: 0 exactly when every row is the same, i.e. A = 1Āᵀ has rank at most 1.
    ``A_energy`` ``[L]``: averaged over probes and heads. ``shape_energy`` ``[L, d_k]``: per
    coordinate j, the same for the normalised shape ``n`` the last LayerNorm scales, so that
    ``A_energy = Σ_j γ_j² shape_energy_j`` (:attr:`split`); ``gamma`` ``[L, d_k]``: γ of each
    layer's last LayerNorm."""

    A_energy: Tensor
    shape_energy: Tensor
    gamma: Tensor

    @property
    def split(self) -> Tensor:
        """``Σ_j γ_j² × shape_energy_j`` per layer ``[L]``: equal to ``A_energy`` (theorem)."""
        return (self.gamma**2 * self.shape_energy).sum(-1)

    @property
    def shape_total(self) -> Tensor:
        """``Σ_j shape_energy_j`` per layer ``[L]``: the row energy A would have with γ = 1."""
        return self.shape_energy.sum(-1)


def _row_energy(rows: Tensor) -> Tensor:
    """Per coordinate, the mean over rows (axis -2) of the squared deviation from the mean row,
    averaged over every leading axis: ``[d]``."""
    dev = rows - rows.mean(-2, keepdim=True)
    return (dev**2).mean(-2).reshape(-1, rows.shape[-1]).mean(0)


def row_energy_split(model: PLDRLLM, probes: list[Tensor]) -> RowEnergySplit:
    """A's row energy and the last LayerNorm's split of it into scale and shape, per layer.

    The last unit returns ``A_i = β + γ ⊙ n_i`` for every row i, so ``A_i − Ā = γ ⊙ (n_i − n̄)``:
    β cancels and ``Σ_i ‖A_i − Ā‖² = Σ_j γ_j² Σ_i (n_ij − n̄_j)²`` exactly (chapter 11's
    theorem). A's rows become equal, and A rank 1, when γ → 0 (the gate) or when the shapes
    become equal (the shape route), and the split says which of the two a model is on.

    Parameters
    ----------
    model:
        A :class:`kvattn.pldr.PLDRLLM` with PLGA (any device; run in eval mode, mode restored).
    probes:
        One or more distinct token-id tensors ``[1, S]`` (each at its last position).

    Returns
    -------
    :class:`RowEnergySplit`: ``A_energy`` (from A as the units compute it), ``shape_energy``
    (from the shape the last LayerNorm normalises) and ``gamma``.

    Source: the LayerNorm gate and the energy factorisation of the training-dynamics study
    [gokden2026dynamics] (LayerNormGate.lean; checked there to 1e-5 relative in float32).

    Raises
    ------
    TypeError, ValueError
        As :func:`row_map_gain`.
    """
    A_energy, shape_energy, gamma = [], [], []
    with torch.no_grad():
        for rows, units in _row_maps(model, probes):
            for unit in units[:-1]:
                rows = unit(rows)
            last = units[-1]
            z = rows
            for dense in last.denseAs:
                z = dense(z)
            z = z + rows
            norm = last.layernormA
            mean = z.mean(-1, keepdim=True)
            var = z.var(-1, unbiased=False, keepdim=True)
            shape = (z - mean) / torch.sqrt(var + norm.eps)
            A = last(rows)
            A_energy.append(_row_energy(A).sum())
            shape_energy.append(_row_energy(shape))
            gamma.append(norm.weight.detach().clone())
    return RowEnergySplit(torch.stack(A_energy), torch.stack(shape_energy), torch.stack(gamma))


def identical_rows(model: PLDRLLM, probes: list[Tensor]) -> Tensor:
    """The published model's exact state, tested: the share of A's matrices (every probe at its
    last position, every head) whose rows are bitwise identical in the model's own precision,
    per layer. A row map whose gain is far below the precision's resolution (2⁻²⁴ ≈ 6e-8 for
    float32) sends every row to the same floats, and A = 1αᵀ is exactly rank 1 in floating
    point too.

    Parameters
    ----------
    model:
        A :class:`kvattn.pldr.PLDRLLM` with PLGA (any device and dtype; run in eval mode, mode
        restored). A is computed as the model computes it, not in float64.
    probes:
        One or more distinct token-id tensors ``[1, S]``.

    Returns
    -------
    CPU float64 tensor ``[L]``, each entry in [0, 1] (1: every matrix of the layer has identical
    rows).

    Source: the audit of the published 110M model [gokden2026mathfoundations] (A of numerical
    rank 1 in all 560 layer × head × prompt matrices, rows identical in float32).

    Raises
    ------
    TypeError, ValueError
        As :func:`row_map_gain`.
    """
    outputs = _outputs(model, probes)
    shares = []
    for layer in range(len(outputs[0])):
        A = torch.cat([o[layer].A for o in outputs])  # [P, H, d_k, d_k]
        same = (A == A[..., :1, :]).all(-1).all(-1)
        shares.append(same.cpu().double().mean())  # MPS has no float64
    return torch.stack(shares)
