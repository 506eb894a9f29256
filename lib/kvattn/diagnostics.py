"""Measurements of PLGA's deductive tensors: DAG losses, order parameters, rank-1 audit,
Perron–Frobenius eigenpair and the RoPE-commutant residual.

All functions take tensors whose last two axes are d_k × d_k matrices (any leading shape, e.g.
``[B, H, d_k, d_k]`` from :class:`kvattn.pldr.DeductiveOutputs`), on any device. Except for the
training loss :func:`dag_loss` (which stays on its input's device and dtype), they move their
inputs to the CPU *then* cast them to float64 (:func:`cpu64`) and return CPU float64 results, so
that analyses never mix devices and work on Apple MPS, which has no float64.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field

import torch

from ._checks import check_finite, check_square
from .ablations import constant_g_from, generation_mode_logits
from .losses import lm_cross_entropy, log_trace_expm_squared
from .pldr import PLDRLLM, Attention, DecoderLM

Tensor = torch.Tensor


# ---------------------------------------------------------------------------------------------
# Shared checks


def cpu64(x: Tensor) -> Tensor:
    """``x`` detached, moved to the CPU and *then* cast to float64: what every analysis here
    computes on (the input itself when it already is a detached CPU float64 tensor).

    The order matters: MPS has no float64, so ``x.double()`` fails on an MPS tensor, and a float64
    copy left on a GPU would mix devices with the CPU tensors an analysis builds.

    Raises
    ------
    TypeError
        If ``x`` is not a tensor.
    """
    if not isinstance(x, Tensor):
        raise TypeError(f"expected a torch.Tensor, got {type(x).__name__}")
    return x.detach().cpu().double()


def _matrices(X: Tensor, name: str) -> None:
    """Raise unless ``X`` is a stack of square matrices ``[..., d, d]`` with finite entries."""
    check_square(X, name)
    check_finite(X, name)


def _index(value: int, name: str, size: int) -> int:
    """Check a layer or head index against ``range(size)``; negative indices are refused."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if not 0 <= value < size:
        raise ValueError(f"{name} must be in 0 … {size - 1}, got {value}")
    return value


def _attention(model, layer: int):
    """The attention module of decoder layer ``layer`` of ``model``, model type and index
    checked."""
    if not isinstance(model, DecoderLM):
        raise TypeError(f"model must be a PLDRLLM or GPT, got {type(model).__name__}")
    layers = model.decoder.dec_layers
    return layers[_index(layer, "layer", len(layers))].mha1


def _check_attention(attention) -> None:
    """Raise unless ``attention`` is the attention module of one decoder layer."""

    if not isinstance(attention, Attention):
        raise TypeError(
            "attention must be a layer's attention module (model.decoder.dec_layers[i].mha1), "
            f"got {type(attention).__name__}"
        )


def _check_pldrllm(model) -> None:
    """Raise unless ``model`` is a PLDRLLM (PLGA or constant-G): the models that have a G_LM."""

    if not isinstance(model, PLDRLLM):
        raise TypeError(
            "model must be a PLDRLLM (PLGA or constant-G; a GPT has no G_LM), got "
            f"{type(model).__name__}"
        )


def _check_sequence(ids: object, name: str) -> None:
    """Raise unless ``ids`` is one sequence of token ids: an int64 or int32 tensor ``[1, S]``,
    S ≥ 1."""
    if not isinstance(ids, Tensor) or ids.dtype not in (torch.int64, torch.int32):
        got = ids.dtype if isinstance(ids, Tensor) else type(ids).__name__
        raise TypeError(f"{name} must be a tensor of int64 (or int32) token ids, got {got}")
    if ids.ndim != 2 or ids.shape[0] != 1 or ids.shape[1] < 1:
        raise ValueError(f"{name} must have shape (1, S) with S ≥ 1, got {tuple(ids.shape)}")


def _check_blocks(ids: object, name: str, pad: int) -> None:
    """Raise unless ``ids`` are evaluation blocks: an int64 tensor ``[B, S + 1]`` (B, S ≥ 1;
    int64 because the targets ``ids[:, 1:]`` index the cross-entropy) with at least one target
    that is not ``pad``, so that the loss averages over something."""
    if not isinstance(ids, Tensor) or ids.dtype != torch.int64:
        got = ids.dtype if isinstance(ids, Tensor) else type(ids).__name__
        raise TypeError(f"{name} must be an int64 tensor of token ids, got {got}")
    if ids.ndim != 2 or ids.shape[0] < 1 or ids.shape[1] < 2:
        raise ValueError(
            f"{name} must have shape [B, S + 1] with B >= 1 and S >= 1, got {tuple(ids.shape)}"
        )
    if bool((ids[:, 1:] == pad).all()):
        raise ValueError(f"every target {name}[:, 1:] is pad_token_id = {pad}: no loss to average")


# ---------------------------------------------------------------------------------------------
# DAG losses


def notears_h(M: Tensor) -> Tensor:
    """The NOTEARS acyclicity function h(M) = tr(exp(M∘M)) − d (Zheng et al. 2018), in float64.

    Returns ``inf`` where the trace exceeds float64's range (its log is finite: see
    :func:`log_trace_expm_squared`); a CPU tensor ``[...]`` for ``M`` on any device.
    """
    log_tr = log_trace_expm_squared(cpu64(M))
    return torch.exp(log_tr) - M.shape[-1]


# ---------------------------------------------------------------------------------------------
# Order parameters


def order_parameter(x1: Tensor, x2: Tensor, normalisation: str = "mean") -> float:
    """How much a deductive tensor changes between two runs, pooled over all its values.

    ``"mean"`` (SOC paper): ``RMSE(x1 − x2) / |mean(x1)|``, the root-mean-square difference over the
    magnitude of the mean of the reference run x1. ``"rms"`` (the math-foundations audit):
    rms(x1 − x2) / ½(rms x1 + rms x2), bounded by 2. The two must not be mixed.

    Identical runs give exactly 0 under both normalisations (no change, whatever the scale, also
    for all-zero tensors, where the "rms" ratio would read 0/0). Otherwise a zero mean of x1 leaves
    the "mean" normalisation without a scale, and it raises rather than return inf: a tensor
    centred on zero needs ``"rms"``. Inputs on any device; computed in float64 on the CPU.

    Raises
    ------
    ValueError
        For different shapes, empty or non-finite inputs, an unknown ``normalisation``, or
        ``"mean"`` with mean(x1) = 0 and x1 ≠ x2.
    """
    if normalisation not in ("mean", "rms"):
        raise ValueError(f"normalisation must be 'mean' or 'rms', got {normalisation!r}")
    a, b = cpu64(x1), cpu64(x2)
    if a.shape != b.shape:
        raise ValueError(f"shapes differ: {tuple(a.shape)} vs {tuple(b.shape)}")
    if a.numel() == 0:
        raise ValueError("x1 and x2 are empty")
    check_finite(a, "x1")
    check_finite(b, "x2")
    rmse = float((a - b).pow(2).mean().sqrt())
    if rmse == 0.0:
        return 0.0
    if normalisation == "mean":
        mean = float(a.mean().abs())
        if mean == 0.0:
            raise ValueError(
                "x1 has mean 0, so the 'mean' normalisation (RMSE / |mean(x1)|) is undefined; "
                "use normalisation='rms'"
            )
        return rmse / mean
    return rmse / float(0.5 * (a.pow(2).mean().sqrt() + b.pow(2).mean().sqrt()))


# ---------------------------------------------------------------------------------------------
# Rank-1 audit


@dataclass(frozen=True)
class RankAudit:
    """Rank-1 audit of matrices ``[..., d, d]`` (e.g. the metric learner output A per head).

    ``rank``: numerical rank of each matrix (singular values above 64·eps·σ1 of float32, as the
    audit); ``sigma_ratio``: σ2/σ1; ``row_spread``: variance across rows over the mean square
    (0 when all rows are identical, A = 𝟙αᵀ); ``head_spread``: RMS difference between heads over
    the RMS (0 when every head has the same matrix), if a head axis is given. For a zero matrix
    (rank 0) the three ratios are defined as 0: it has at most one direction, identical rows and
    identical heads. All on the CPU, float64 (rank: int64).
    """

    rank: Tensor
    sigma_ratio: Tensor
    row_spread: Tensor
    head_spread: float | None


def rank_audit(A: Tensor, head_dim: int | None = 1) -> RankAudit:
    """Audit every matrix in ``A [..., d, d]`` (d ≥ 2, any device); ``head_dim`` is the axis of
    heads, one of the leading axes 0 … A.ndim − 3 (None: no head axis).

    Raises
    ------
    ValueError
        If A is not ``[..., d, d]`` with d ≥ 2, has non-finite entries, or ``head_dim`` is not a
        leading axis.
    """
    X = cpu64(A)
    _matrices(X, "A")
    if X.shape[-1] < 2:
        raise ValueError(f"A needs d ≥ 2 for σ2/σ1, got shape {tuple(X.shape)}")
    if head_dim is not None:
        if X.ndim == 2:
            raise ValueError(f"A of shape {tuple(X.shape)} has no head axis: pass head_dim=None")
        _index(head_dim, "head_dim", X.ndim - 2)
    s = torch.linalg.svdvals(X)
    tol = 64 * torch.finfo(torch.float32).eps * s[..., :1]
    rank = (s > tol).sum(-1)
    ratio = _ratio(s[..., 1], s[..., 0])
    row_spread = _ratio(X.var(dim=-2, unbiased=False).mean(-1), X.pow(2).mean((-2, -1)))
    head_spread = None
    if head_dim is not None:
        mean_head = X.mean(dim=head_dim, keepdim=True)
        head_spread = float(_ratio((X - mean_head).pow(2).mean().sqrt(), X.pow(2).mean().sqrt()))
    return RankAudit(rank, ratio, row_spread, head_spread)


def _ratio(num: Tensor, den: Tensor) -> Tensor:
    """num / den, and 0 where den = 0 (used where den = 0 forces num = 0, e.g. a zero matrix)."""
    return torch.where(den > 0, num / torch.where(den > 0, den, 1.0), 0.0)


def _check_probes(probes: object, at_least: int, too_few: str, name: str = "probes") -> None:
    """Raise unless ``probes`` is a list or tuple of at least ``at_least`` token-id tensors of
    shape ``[1, S]`` with S ≥ 1 (ValueError with ``too_few`` when there are fewer); ``name``
    is the argument's name in the messages."""
    if not isinstance(probes, list | tuple):
        raise TypeError(
            f"{name} must be a list of token-id tensors of shape (1, S), got "
            f"{type(probes).__name__}"
        )
    if len(probes) < at_least:
        raise ValueError(too_few)
    for i, p in enumerate(probes):
        _check_sequence(p, f"{name}[{i}]")


def row_map_gain(model, probes: list[Tensor]) -> Tensor:
    """How strongly each layer's metric learner still responds to its input: the largest
    singular value of the Jacobian of the row map, median over the rows the probes visit.

    The metric learner acts on each row of ``LayerNorm(A0)`` on its own: a row ``r`` of length
    d_k goes through the residual units to the same row of A, ``φ(r)``. Its Jacobian ``∂φ/∂r``
    (d_k × d_k) says how much A can still change when the input changes; a row map that has
    flattened to a constant has gain 0 and makes A, hence G_LM, the same for every input
    (row-map collapse). For each probe (at its last position, as :func:`collapse_measures`) and
    head, every one of the d_k rows is a visited row.

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

    Source: the row-map collapse criterion of the training-dynamics study (Gokden 2026,
    repository PLDR-LLM-Training-Dynamics: median top singular value of the row map's Jacobian
    over visited rows, collapsed below 0.1); computed here with ``torch.func`` (one Jacobian per
    row) on CPU float64 copies of the LayerNorm and the units, whatever the model's device.

    Raises
    ------
    TypeError
        ``model`` is not a PLGA PLDRLLM (a GPT or a constant-G model has no metric learner),
        ``probes`` is not a list or tuple, or a probe is not an int64 (or int32) tensor.
    ValueError
        No probes, or a probe not of shape ``[1, S]`` with S ≥ 1.
    """

    if not isinstance(model, PLDRLLM) or model.kind != "plga":
        raise TypeError("model must be a PLDRLLM with PLGA (only PLGA has a metric learner)")
    _check_probes(probes, 1, "need a list of one or more probes")
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            outputs = [
                [_last_position(o) for o in out]
                for out in deductive_tensors(model, [p.to(device) for p in probes])
            ]
        gains = []
        for layer, block in enumerate(model.decoder.dec_layers):
            attention = block.mha1
            # CPU float64 copies of the (small) row map: the analysis convention of this module,
            # and torch.func then never meets an accelerator's kernels or MPS's lack of float64
            norm, units = (
                copy.deepcopy(m).to(device="cpu", dtype=torch.float64)
                for m in (attention.layernorm1, attention.reslayerAs)
            )

            def row_map(r: Tensor, units=units) -> Tensor:
                for unit in units:
                    r = unit(r)
                return r

            A0 = torch.cat([cpu64(o[layer].A0) for o in outputs])  # [P, H, d, d]
            with torch.no_grad():
                rows = norm(A0)
            J = torch.func.vmap(torch.func.jacrev(row_map))(rows.reshape(-1, rows.shape[-1]))
            gain = torch.linalg.matrix_norm(J.detach(), ord=2).reshape(rows.shape[:-1])
            # median over the visited rows: every probe and every row of each head's matrix
            gains.append(gain.transpose(0, 1).reshape(gain.shape[1], -1).median(-1).values)
    finally:
        model.train(was_training)
    return torch.stack(gains)


# ---------------------------------------------------------------------------------------------
# Perron–Frobenius


def perron_frobenius(
    A_LM: Tensor, iterations: int = 500, tol: float = 1e-12
) -> tuple[Tensor, Tensor]:
    """Dominant eigenvalue and eigenvector of entrywise-positive matrices ``[..., d, d]``.

    A_LM ≥ ε > 0 elementwise, so by Perron–Frobenius its spectral radius is a simple positive
    eigenvalue with an entrywise-positive eigenvector. Power iteration in float64 on the CPU
    (one transfer from the input's device, then no host synchronisation with it); returns CPU
    tensors ``(eigenvalue [...], eigenvector [..., d])`` with the eigenvector normalised to unit
    sum. Stops when no entry of the eigenvector moves by ``tol`` or more, or after ``iterations``.

    Raises
    ------
    ValueError
        If A_LM is not ``[..., d, d]``, has a non-finite or non-positive entry (the theorem needs
        a positive matrix), or ``iterations`` < 1 or ``tol`` ≤ 0.
    """
    if not isinstance(iterations, int) or isinstance(iterations, bool) or iterations < 1:
        raise ValueError(f"iterations must be an int ≥ 1, got {iterations!r}")
    if not tol > 0:
        raise ValueError(f"tol must be positive, got {tol!r}")
    X = cpu64(A_LM)
    _matrices(X, "A_LM")
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
    if not isinstance(d_k, int) or isinstance(d_k, bool) or d_k < 2 or d_k % 2:
        raise ValueError(f"d_k must be an even int ≥ 2, got {d_k!r}")
    if interleaved:
        return [(2 * i, 2 * i + 1) for i in range(d_k // 2)]
    return [(i, i + d_k // 2) for i in range(d_k // 2)]


def commutant_projection(G: Tensor, interleaved: bool = True) -> Tensor:
    """Project ``G [..., d_k, d_k]`` onto the matrices that commute with every RoPE rotation.

    With distinct frequencies per plane, the commutant is block-diagonal in the RoPE planes with
    each 2×2 block of the form [[α, −β], [β, α]] (a rotation-scaling). The orthogonal
    (Frobenius) projection keeps, per plane, α = mean of the diagonal pair and β = mean of
    (G[j,i], −G[i,j]), and zeroes everything else. Stays on G's device and dtype.

    Raises
    ------
    TypeError
        If G is not a floating-point tensor (an integer G would truncate the averages α, β).
    ValueError
        If G is not ``[..., d_k, d_k]`` with d_k even.
    """
    check_square(G, "G")
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
    """‖G − Π(G)‖_F / ‖G‖_F per matrix ``[...]`` (CPU, float64): 0 when G commutes with RoPE (the
    score q G kᵀ then depends only on relative positions), near 1 when G uses absolute-position
    directions; 0 for G = 0, which is in the commutant.

    Raises
    ------
    ValueError
        If G is not ``[..., d_k, d_k]`` with d_k even, or has non-finite entries.
    """
    X = cpu64(G)
    _matrices(X, "G")
    residual = X - commutant_projection(X, interleaved)
    return _ratio(residual.norm(dim=(-2, -1)), X.norm(dim=(-2, -1)))


# ---------------------------------------------------------------------------------------------
# Attention heads as bilinear forms


def rope_rotation(attention, distance: int) -> Tensor:
    """The d_k × d_k matrix R(δ) by which an attention layer's RoPE rotates a row vector at
    position δ (so that q_rot = q R(i) and R(i) R(j)ᵀ = R(i − j)); CPU, float64, whatever the
    device of ``attention`` (RoPE keeps its angle tables in float64 on the CPU).

    Raises
    ------
    TypeError
        If ``attention`` is not a layer's attention module (``model.decoder.dec_layers[i].mha1``).
    ValueError
        If ``distance`` is not in 0 … max_position_embeddings − 1.
    """
    _check_attention(attention)
    _index(distance, "distance", attention.cfg.max_position_embeddings)
    return attention.rope.matrix(distance)


def head_bilinear_form(attention, head: int, distance: int = 0, with_bias: bool = False) -> Tensor:
    """The learned bilinear form of one SDPA head at query–key distance δ = i − j, d × d:

        M_h(δ) = W_Q,hᵀ R(δ) W_K,h,   score(i, j) = x_i M_h(i − j) x_jᵀ / √d_k (+ bias terms),

    where W_Q,h, W_K,h are the head's d_k × d rows of ``wq`` and ``wk`` and R is RoPE
    (course, chapter 6). With ``with_bias`` the form acts on [x, 1] and includes the biases,
    shape (d + 1) × (d + 1), so that the score is exactly [x_i, 1] M [x_j, 1]ᵀ / √d_k. CPU,
    float64, for a layer on any device.

    Raises
    ------
    TypeError
        If ``attention`` is not a layer's attention module (``model.decoder.dec_layers[i].mha1``).
    ValueError
        For PLGA and constant-G layers, whose score q G kᵀ does not reduce to one form per δ; for
        ``head`` outside 0 … H − 1 or ``distance`` outside 0 … max_position_embeddings − 1.
    """
    _check_attention(attention)
    if attention.kind != "sdpa":
        raise ValueError("only scaled dot-product attention has one bilinear form per distance")
    d_k = attention.cfg.d_k
    _index(head, "head", attention.cfg.num_attention_heads)
    R = rope_rotation(attention, distance)
    rows = slice(head * d_k, (head + 1) * d_k)
    Wq, Wk = cpu64(attention.wq.weight[rows]), cpu64(attention.wk.weight[rows])
    if with_bias:
        zeros = torch.zeros(d_k, 1, dtype=torch.float64)
        bq, bk = (
            zeros if b is None else cpu64(b[rows])[:, None]
            for b in (attention.wq.bias, attention.wk.bias)
        )
        Wq, Wk = torch.cat([Wq, bq], 1), torch.cat([Wk, bk], 1)
    # q_rot = x Wqᵀ R(i) and k_rot = x Wkᵀ R(j), so q_rot k_rotᵀ = x Wqᵀ R(i) R(j)ᵀ Wk xᵀ and
    # R(i) R(j)ᵀ = R(i − j).
    return Wq.T @ R @ Wk


def asymmetry(M: Tensor) -> float:
    """‖M − Mᵀ‖_F / ‖M‖_F, between 0 (symmetric: exchanging query and key changes nothing) and 2
    (antisymmetric); √2 when tr(M²) = 0, as for a typical random matrix; 0 for M = 0 (symmetric).

    Raises
    ------
    ValueError
        If M is not square or has non-finite entries.
    """
    X = cpu64(M)
    _matrices(X, "M")
    return float(_ratio((X - X.transpose(-1, -2)).norm(), X.norm()))


def swap_attention_qk(model):
    """A copy of ``model`` whose attention layers exchange their query and key projections
    (weights and biases), i.e. whose bilinear forms are transposed: token i then scores token j
    as token j scored token i before."""
    import copy

    new = copy.deepcopy(model)
    with torch.no_grad():
        for layer in new.decoder.dec_layers:
            attn = layer.mha1
            wq, wk = attn.wq.weight.clone(), attn.wk.weight.clone()
            attn.wq.weight.copy_(wk)
            attn.wk.weight.copy_(wq)
            if attn.wq.bias is not None:
                bq, bk = attn.wq.bias.clone(), attn.wk.bias.clone()
                attn.wq.bias.copy_(bk)
                attn.wk.bias.copy_(bq)
    return new


@dataclass(frozen=True)
class HeadProfile:
    """One head of a GPT on one input: its attention weights ``E`` ``[S, S]`` and the asymmetry
    of its bilinear form M_h(δ) for δ = 0 … len(asym) − 1."""

    layer: int
    head: int
    E: Tensor
    asym: Tensor


@torch.no_grad()
def head_profile(model, ids: Tensor, layer: int, head: int, max_distance: int = 16) -> HeadProfile:
    """The compute function of chapter 6's attention explorer (both faces): ``ids`` ``(1, S)`` on
    the model's device; results on the CPU in float64.

    Raises
    ------
    TypeError
        For a model that is not a PLDRLLM or GPT, ids that are not an int64 (or int32) tensor,
        a ``max_distance`` that is not an int.
    ValueError
        For ids not of shape (1, S), ``layer``/``head`` out of range, ``max_distance`` outside
        1 … max_position_embeddings, or a PLDRLLM (PLGA and constant-G heads have no bilinear
        form per distance: see :func:`head_bilinear_form`).
    """
    _check_sequence(ids, "ids")
    attn = _attention(model, layer)
    _index(head, "head", model.config.num_attention_heads)
    n_positions = model.config.max_position_embeddings
    if not isinstance(max_distance, int) or isinstance(max_distance, bool):
        raise TypeError(f"max_distance must be an int, got {type(max_distance).__name__}")
    if not 1 <= max_distance <= n_positions:
        raise ValueError(f"max_distance must be in 1 … {n_positions}, got {max_distance}")
    # the forms first: they refuse a PLDRLLM's heads before the forward pass
    asym = torch.tensor(
        [asymmetry(head_bilinear_form(attn, head, d)) for d in range(max_distance)],
        dtype=torch.float64,
    )
    out = model(ids, output_pldr_attentions=True)
    E = cpu64(out.pldr_attentions[layer].E[0, head])
    return HeadProfile(layer, head, E, asym)


# ---------------------------------------------------------------------------------------------
# The G_LM invariance explorer's compute function

#: The deductive tensors the explorers and order parameters look at, in pipeline order.
DEDUCTIVE = ("A", "A_LM", "A_P", "G_LM")


@dataclass(frozen=True)
class DeductiveProfile:
    """One head of a PLGA layer over several prompts.

    ``first[name]``: the tensor on the first prompt, ``[d_k, d_k]``; ``spread[name]``: its
    standard deviation across the prompts, entry by entry; ``order[name]``: the order parameter
    (SOC normalisation: RMSE over the magnitude of the mean) between the first prompt and each
    other, averaged; ``order_rms[name]``: the same with the audit's RMS normalisation; for every
    name in :data:`DEDUCTIVE` that the model computes (a constant-G model has G_LM only).
    ``order`` is ``nan`` where its normalisation is undefined (the first prompt's tensor has mean
    exactly 0 and another prompt's differs, as A of a freshly initialised model): see
    :func:`order_parameter`. ``label`` names the model (e.g. "trained") for explorers that
    compare several.
    """

    layer: int
    head: int
    first: dict[str, Tensor]
    spread: dict[str, Tensor]
    order: dict[str, float]
    order_rms: dict[str, float] = field(default_factory=dict)
    label: str = ""

    def relative_spread(self, name: str) -> float:
        """rms of the spread over rms of the first prompt's tensor (0: input-invariant)."""
        rms = float(self.first[name].pow(2).mean().sqrt())
        return float(self.spread[name].pow(2).mean().sqrt()) / rms if rms else math.nan


@torch.no_grad()
def deductive_tensors(model, prompts: list[Tensor]) -> list[list]:
    """The deductive outputs of every prompt: ``out[p][layer]`` is a
    :class:`kvattn.pldr.DeductiveOutputs`; each prompt is token ids of shape ``(1, S)``.

    Raises
    ------
    TypeError
        ``prompts`` is not a list or tuple, or a prompt is not an int64 (or int32) tensor.
    ValueError
        No prompts, or a prompt not of shape ``(1, S)`` with S ≥ 1 (a batch would be profiled
        by its first row only).
    """
    _check_probes(prompts, 1, "need a list of one or more prompts", "prompts")
    return [model(ids, output_pldr_attentions=True).pldr_attentions for ids in prompts]


def deductive_profile(
    outputs: list[list], layer: int, head: int, label: str = ""
) -> DeductiveProfile:
    """Summarise :func:`deductive_tensors` for one layer and head (needs 2+ prompts); tensors on
    any device, results on the CPU in float64. Tensors the model does not compute (None, as A of
    a constant-G model) are left out; a constant-G model's G_LM ``[H, d_k, d_k]`` is the same for
    every prompt. For the prefix density (tensors ``[1, H, S, d_k, d_k]``), each prompt's tensors
    are taken at its last position, whose density sums over the whole prompt (as
    :func:`collapse_measures` does).

    Raises
    ------
    TypeError
        For outputs without G_LM (a GPT's).
    ValueError
        For fewer than two prompts, outputs of a batch of more than one prompt, or
        ``layer``/``head`` out of range.
    """
    if len(outputs) < 2:
        raise ValueError("need the deductive tensors of at least two prompts")
    _index(layer, "layer", len(outputs[0]))
    G = outputs[0][layer].G_LM
    if G is None:
        raise TypeError("the outputs have no G_LM (a GPT's): profile a PLDRLLM's outputs")
    if G.ndim >= 4 and G.shape[0] != 1:
        raise ValueError(
            f"outputs must be of one prompt each (batch 1, as deductive_tensors gives), got "
            f"G_LM of shape {tuple(G.shape)}"
        )
    _index(head, "head", G.shape[0] if G.ndim == 3 else G.shape[1])
    first, spread, order, order_rms = {}, {}, {}, {}
    for name in DEDUCTIVE:
        if getattr(outputs[0][layer], name) is None:
            continue
        stack = torch.stack(
            [
                cpu64(t[head] if t.ndim == 3 else t[0, head] if t.ndim == 4 else t[0, head, -1])
                for t in (getattr(o[layer], name) for o in outputs)
            ]
        )
        first[name] = stack[0]
        spread[name] = stack.std(0)
        if float(stack[0].mean()) == 0.0 and not bool((stack == stack[0]).all()):
            order[name] = math.nan
        else:
            order[name] = sum(order_parameter(stack[0], s) for s in stack[1:]) / (len(stack) - 1)
        order_rms[name] = sum(order_parameter(stack[0], s, "rms") for s in stack[1:]) / (
            len(stack) - 1
        )
    return DeductiveProfile(layer, head, first, spread, order, order_rms, label)


# ---------------------------------------------------------------------------------------------
# The three steps of the collapse mechanism (course, chapter 10)


@torch.no_grad()
def attention_input(model, ids: Tensor, layer: int) -> Tensor:
    """What enters the attention of ``layer`` when ``model`` reads ``ids``: the hidden states
    ``[B, S, d]`` on the model's device (for PLDR-LLM v51, the previous layer's output; for
    layer 0, the LayerNorm of the scaled embedding).

    Raises
    ------
    TypeError
        For a model that is not a PLDRLLM or GPT.
    ValueError
        For ``layer`` out of range.
    """
    captured = {}

    def keep_input(module, args) -> None:  # returns None: the layer's arguments stay as they are
        captured["x"] = args[0]

    handle = _attention(model, layer).register_forward_pre_hook(keep_input)
    try:
        model(ids)
    finally:
        handle.remove()
    return captured["x"]


@torch.no_grad()
def layer_queries(model, ids: Tensor, layer: int, rope: bool = True) -> Tensor:
    """The queries of every head of ``layer`` on ``ids`` (shape ``(1, S)``, on the model's
    device), as ``[H, S, d_k]`` on the CPU in float64, after RoPE (``rope=True``, what the density
    sums) or before it.

    Raises
    ------
    TypeError
        For a model that is not a PLDRLLM or GPT, or ids that are not an int64 (or int32) tensor.
    ValueError
        For ids not of shape (1, S) or ``layer`` out of range.
    """
    _check_sequence(ids, "ids")
    attn = _attention(model, layer)
    x = attention_input(model, ids, layer)
    q = attn.wq(x).view(x.shape[0], x.shape[1], attn.cfg.num_attention_heads, attn.cfg.d_k)
    if rope:
        q = attn.rope(q)
    return cpu64(q[0].transpose(0, 1))


def twirl(model, ids: Tensor, layer: int, head: int, lengths: list[int]) -> dict[int, Tensor]:
    """The normalised density A0/S of one head over the first S tokens, for each S in
    ``lengths`` (CPU float64 ``[d_k, d_k]``): the compute function of chapter 10's explorer.

    Raises
    ------
    TypeError
        For a model that is not a PLDRLLM or GPT, ids that are not an int64 (or int32) tensor,
        or ``lengths`` that is not a list or tuple of ints.
    ValueError
        For ids not of shape (1, S), ``layer``/``head`` out of range, no lengths, or a length
        outside 1 … S.
    """
    _check_sequence(ids, "ids")
    _index(head, "head", _attention(model, layer).cfg.num_attention_heads)
    if not isinstance(lengths, list | tuple) or not all(
        isinstance(S, int) and not isinstance(S, bool) for S in lengths
    ):
        raise TypeError(f"lengths must be a list of ints, got {lengths!r}")
    if not lengths or min(lengths) < 1:
        raise ValueError(f"lengths must be a non-empty list of ints ≥ 1, got {lengths!r}")
    if max(lengths) > ids.shape[1]:
        raise ValueError(f"lengths go up to {max(lengths)} but the input has {ids.shape[1]} tokens")
    q = layer_queries(model, ids, layer)[head]
    return {S: q[:S].T @ q[:S] / S for S in lengths}


# ---------------------------------------------------------------------------------------------
# Collapse, measured by what it does (course, chapter 9)


def attention_shift_bound(q: Tensor, k: Tensor, v: Tensor, delta: Tensor) -> Tensor:
    """Upper bound on how far each query's attention output moves when the head's bilinear form
    changes from G to G + Δ (near-invariance theorem, chapter 9; ours).

    With scores s_ij = q_i G k_jᵀ / √d_k, E = softmax over j and o_i = Σ_j E_ij v_j,

        ‖o_i(G + Δ) − o_i(G)‖ ≤ (‖q_i‖ ‖Δ‖₂ / √d_k) · 2 max_j ‖k_j‖ · max_j ‖v_j‖,

    because (1) the score change of query i is at most ‖q_i‖ ‖Δ‖₂ ‖k_j‖ / √d_k in size; (2) the
    softmax moves by at most the oscillation of the score change in ℓ¹ (its Jacobian
    diag(p) − p pᵀ maps δ to a vector of ℓ¹ norm Σ p_i·abs(δ_i − p·δ), at most max δ − min δ);
    (3) a change of weights summing to 0 moves a weighted mean of the v_j by at most its ℓ¹
    norm times max ‖v_j‖. The bound holds for every G, so if G_LM(x) stays within ε of one
    constant (spectral norm), every head output stays within this bound, with ‖Δ‖₂ = ε, of the
    constant-G model's.

    Parameters
    ----------
    q, k, v:
        Queries ``[..., S_q, d_k]``, keys ``[..., S_k, d_k]``, values ``[..., S_k, d_v]`` (as
        attention sees them, after RoPE); any device.
    delta:
        The change of G, ``[..., d_k, d_k]`` (broadcast over the leading axes).

    Returns
    -------
    The bound per query, ``[..., S_q]``, CPU float64.

    Raises
    ------
    TypeError
        If an argument is not a tensor.
    ValueError
        For shapes that do not fit together (leading axes that do not broadcast included), no
        keys (S_k = 0: the maximum over keys is undefined), or non-finite entries.
    """
    q, k, v, delta = (cpu64(t) for t in (q, k, v, delta))
    for name, t in (("q", q), ("k", k), ("v", v), ("delta", delta)):
        check_finite(t, name)
    check_square(delta, "delta")
    try:
        torch.broadcast_shapes(*(t.shape[:-2] for t in (q, k, v, delta)))
        fits = min(q.ndim, k.ndim, v.ndim) >= 2
    except RuntimeError:
        fits = False
    if not (fits and q.shape[-1] == k.shape[-1] == delta.shape[-1] and k.shape[-2] == v.shape[-2]):
        raise ValueError(
            f"shapes do not fit: q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}, "
            f"delta {tuple(delta.shape)} (need q, k [..., S, d_k], v [..., S_k, d_v], "
            "delta [..., d_k, d_k])"
        )
    if k.shape[-2] == 0:
        raise ValueError(f"k and v have no positions (S_k = 0): k {tuple(k.shape)}")
    d_k = q.shape[-1]
    spectral = torch.linalg.matrix_norm(delta, ord=2)[..., None]
    k_max = k.norm(dim=-1).amax(-1, keepdim=True)
    v_max = v.norm(dim=-1).amax(-1, keepdim=True)
    return q.norm(dim=-1) * spectral / math.sqrt(d_k) * 2 * k_max * v_max


@dataclass(frozen=True)
class GSubstitution:
    """What freezing G_LM at other inputs' values does to a model's predictions.

    ``delta_loss[d]``: mean next-token loss of the constant-G model built from donor d's G_LM
    minus the model's own (nats/token, on the same blocks, each position seeing its prefix);
    ``agreement[d]``: the share of positions whose greedy next token is unchanged;
    ``identity_delta``: the same loss difference with G_LM = I in every head (the G = I
    substitution: SDPA's form with the PLDR weights, not a trained SDPA model), the scale
    against which ``delta_loss`` is small or large; ``loss``: the model's own loss.
    """

    loss: float
    delta_loss: Tensor
    agreement: Tensor
    identity_delta: float

    @property
    def share_of_g_effect(self) -> float:
        """Mean ``delta_loss`` as a share of ``identity_delta``: 0 when any input's G_LM does as
        well as the input's own (collapse, functionally), 1 when a frozen G_LM is no better
        than none; ``nan`` when ``identity_delta`` is exactly 0 (G_LM = I changes nothing, so
        there is no scale: a model whose G_LM is the identity)."""
        if not self.identity_delta:
            return math.nan
        return float(self.delta_loss.mean()) / self.identity_delta


@torch.no_grad()
def g_substitution(model, ids: Tensor, donors: list[Tensor]) -> GSubstitution:
    """The functional measure of collapse: replace every layer's G_LM by the value it takes on a
    donor input (the G ablation of the PLDR-LLM papers, :func:`kvattn.ablations.constant_g_from`)
    and measure the loss and the greedy tokens on ``ids``, for each donor (for the prefix density,
    its G_LM at the donor's last position, which sums over the whole donor).

    ``model``: a :class:`kvattn.pldr.PLDRLLM` (PLGA or constant-G); ``ids``: evaluation blocks,
    int64 ``[B, S + 1]`` (inputs are ``ids[:, :-1]``, targets ``ids[:, 1:]``, pad targets left
    out of the loss); ``donors``: a list of token-id tensors ``[1, S_d]``, one sequence each
    (all on the model's device). The model's own loss and greedy tokens are those of generation
    (:func:`kvattn.ablations.generation_mode_logits`), since a full pass with the published block
    density sees later tokens while a constant-G model does not.
    Unlike an order parameter, the result does not depend on how large the mean of G_LM is, only
    on what changing it does.

    Raises
    ------
    TypeError
        ``model`` is not a PLDRLLM (a GPT has no G_LM); ``ids`` is not an int64 tensor;
        ``donors`` is not a list or tuple (one tensor of several donors included), or a donor is
        not an int64 (or int32) tensor.
    ValueError
        No donors, a donor not of shape ``[1, S_d]`` with S_d ≥ 1, ``ids`` not of shape
        ``[B, S + 1]`` with B, S ≥ 1, or every target ``ids[:, 1:]`` is ``pad_token_id`` (the
        loss would average over nothing).
    """
    _check_pldrllm(model)
    _check_probes(donors, 1, "need at least one donor input", "donors")
    _check_blocks(ids, "ids", model.config.pad_token_id)
    inputs, targets = ids[:, :-1], ids[:, 1:]
    pad = model.config.pad_token_id

    def run(m, logits=None) -> tuple[float, Tensor]:
        logits = m(inputs).logits if logits is None else logits
        return lm_cross_entropy(logits, targets, pad).item(), logits.argmax(-1)

    # the model's own predictions as a decoder makes them: with a generated G_LM and the block
    # density a full pass sees later tokens; a constant-G or prefix-density model is causal, and
    # its full pass is computed exactly as the constant-G models' below
    cfg = model.config
    leaks = cfg.custom_G_type is None and cfg.density == "block"
    loss, greedy = run(model, generation_mode_logits(model, ids) if leaks else None)
    deltas, agreements = [], []
    for donor in donors:
        outs = model(donor, output_pldr_attentions=True).pldr_attentions
        # a generated G_LM is [1, H, d_k, d_k] ([1, H, S_d, d_k, d_k] for the prefix density:
        # the last position's sums over the whole donor); a constant-G model reports [H, d_k, d_k]
        G = [_last_position(o).G_LM[0] if o.G_LM.ndim >= 4 else o.G_LM for o in outs]
        donor_loss, donor_greedy = run(constant_g_from(model, G))
        deltas.append(donor_loss - loss)
        agreements.append((donor_greedy == greedy).float().mean().item())  # MPS: no float64
    eye = torch.eye(model.config.d_k, device=G[0].device, dtype=G[0].dtype)
    identity_loss, _ = run(constant_g_from(model, [eye.expand_as(g) for g in G]))
    return GSubstitution(
        loss,
        torch.tensor(deltas, dtype=torch.float64),
        torch.tensor(agreements, dtype=torch.float64),
        identity_loss - loss,
    )


# ---------------------------------------------------------------------------------------------
# Order parameters during training (issue 10): how close a model is to collapse, on fixed probes

#: Per-layer measures of :func:`collapse_measures`, each kept per head (``[L, H]``).
COLLAPSE_LAYER_MEASURES = (
    "G_order_mean",
    "G_order_rms",
    "G_spread",
    "A_sigma_ratio",
    "A_row_spread",
)
#: Whole-model measures of :func:`collapse_measures` (the G substitution of every layer at once).
COLLAPSE_MODEL_MEASURES = ("loss", "delta_loss", "agreement", "identity_delta", "share_of_g_effect")


@dataclass(frozen=True)
class CollapseMeasures:
    """How close a PLDR-LLM is to inference collapse, on fixed probe inputs.

    ``heads[name]``: for every name in :data:`COLLAPSE_LAYER_MEASURES`, a CPU float64 tensor
    ``[L, H]`` (layer, head), all dimensionless:

    * ``G_order_mean``, ``G_order_rms``: the entrywise order parameter of G_LM between the first
      probe and each other probe, averaged over the others (:func:`order_parameter`, by the
      magnitude of the mean, as the SOC paper, and by the RMS, as the audit); ``nan`` where the
      normalisation by the mean is undefined (see :class:`DeductiveProfile`);
    * ``G_spread``: the entrywise standard deviation of G_LM across the probes, rms over the
      entries, over the rms of the first probe's G_LM (:meth:`DeductiveProfile.relative_spread`);
    * ``A_sigma_ratio``, ``A_row_spread``: σ2/σ1 of the metric learner output A and its row
      spread (:func:`rank_audit`), averaged over the probes; ``nan`` for a model that computes no
      A (a constant-G model).

    The whole-model fields come from :func:`g_substitution` with the probes as donors:
    ``loss`` (the model's own loss on the evaluation blocks, nats/token), ``delta_loss`` and
    ``agreement`` (averaged over the donors), ``identity_delta`` (G_LM = I) and
    ``share_of_g_effect`` (mean ``delta_loss`` over ``identity_delta``; ``nan`` when
    ``identity_delta`` is exactly 0).
    """

    heads: dict[str, Tensor]
    loss: float
    delta_loss: float
    agreement: float
    identity_delta: float
    share_of_g_effect: float

    def layers(self, name: str) -> Tensor:
        """``heads[name]`` averaged over heads, ``[L]`` (CPU float64)."""
        return self.heads[name].mean(-1)

    def as_record(self) -> dict:
        """Plain JSON-ready values: ``name`` → one float per layer and ``name + "_heads"`` → one
        list per layer of one float per head for the per-layer measures, a float for each
        whole-model measure; ``None`` stands for ``nan`` (JSON has no NaN)."""

        def plain(x: float) -> float | None:
            return x if math.isfinite(x) else None

        record: dict = {}
        for name in COLLAPSE_LAYER_MEASURES:
            record[name] = [plain(float(v)) for v in self.layers(name)]
            record[f"{name}_heads"] = [[plain(float(v)) for v in row] for row in self.heads[name]]
        for name in COLLAPSE_MODEL_MEASURES:
            record[name] = plain(float(getattr(self, name)))
        return record


def _last_position(outputs):
    """The deductive outputs of a prefix-density layer (``[B, H, S, d_k, d_k]``) at the last
    position, whose density sums over the whole probe as the block density does; others as
    they are."""
    import dataclasses

    return dataclasses.replace(
        outputs,
        **{
            name: t[:, :, -1]
            for name in (*DEDUCTIVE, "A0")
            if (t := getattr(outputs, name)) is not None and t.ndim == 5
        },
    )


@torch.no_grad()
def collapse_measures(model, probes: list[Tensor], eval_ids: Tensor) -> CollapseMeasures:
    """Order parameters, rank-1 audit and functional measure of collapse of ``model`` on fixed
    probes: the quantities a pre-training run records as trajectories (``probe_every`` of
    :class:`kvattn.train.PretrainConfig`).

    Parameters
    ----------
    model:
        A :class:`kvattn.pldr.PLDRLLM` (PLGA or constant-G) on any device. It runs in eval mode
        and gets its mode back; the global random stream is left as it was (building the
        constant-G models of the substitution draws initial weights from it).
    probes:
        Two or more token-id tensors ``[1, S_p]``, any device: the inputs between which G_LM is
        compared, and the donors of the substitution. For the prefix density, each probe's
        tensors are taken at its last position.
    eval_ids:
        Blocks ``[B, S + 1]`` (any device) on which the substitution is scored
        (:func:`g_substitution`); best distinct from the probes.

    Returns
    -------
    :class:`CollapseMeasures`, CPU float64. A constant-G model gives exactly 0 for the order
    parameters, the spread and ``delta_loss``; a model with input-dependent G_LM gives positive
    values.

    Source: the order parameter of the SOC paper (§3) and of the audit (pldr-spec §4.1), the
    rank-1 audit of A (§4.3), the G ablation of the KVG paper as a loss difference (chapter 9);
    the combination and the fixed probes are ours.

    Raises
    ------
    TypeError
        ``model`` is not a PLDRLLM (a GPT has no G_LM), ``probes`` is not a list or tuple, a
        probe is not an int64 (or int32) tensor, or ``eval_ids`` is not an int64 tensor.
    ValueError
        Fewer than two probes, a probe not of shape ``[1, S]`` with S ≥ 1, ``eval_ids`` not
        ``[B, S + 1]`` with B, S ≥ 1, or every target ``eval_ids[:, 1:]`` is ``pad_token_id``.
    """
    _check_pldrllm(model)
    _check_probes(probes, 2, "need a list of at least two probes to compare G_LM between inputs")
    _check_blocks(eval_ids, "eval_ids", model.config.pad_token_id)
    device = next(model.parameters()).device
    probes = [p.to(device) for p in probes]
    was_training = model.training
    model.eval()
    # Only the CPU stream is forked: constant_g_from builds its models on the CPU, then moves them.
    with torch.random.fork_rng(devices=[]):
        try:
            outputs = [[_last_position(o) for o in out] for out in deductive_tensors(model, probes)]
            sub = g_substitution(model, eval_ids.to(device), probes)
        finally:
            model.train(was_training)
    L = len(outputs[0])
    H = model.config.num_attention_heads
    heads = {
        name: torch.full((L, H), math.nan, dtype=torch.float64) for name in COLLAPSE_LAYER_MEASURES
    }
    for layer in range(L):
        for head in range(H):
            profile = deductive_profile(outputs, layer, head)
            heads["G_order_mean"][layer, head] = profile.order["G_LM"]
            heads["G_order_rms"][layer, head] = profile.order_rms["G_LM"]
            heads["G_spread"][layer, head] = profile.relative_spread("G_LM")
        if outputs[0][layer].A is not None:
            audit = rank_audit(torch.cat([o[layer].A for o in outputs]), head_dim=1)
            heads["A_sigma_ratio"][layer] = audit.sigma_ratio.mean(0)
            heads["A_row_spread"][layer] = audit.row_spread.mean(0)
    delta = float(sub.delta_loss.mean())
    return CollapseMeasures(
        heads=heads,
        loss=sub.loss,
        delta_loss=delta,
        agreement=float(sub.agreement.mean()),
        identity_delta=sub.identity_delta,
        share_of_g_effect=delta / sub.identity_delta + 0.0 if sub.identity_delta else math.nan,
    )
