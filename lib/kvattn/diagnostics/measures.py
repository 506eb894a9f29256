"""Measurements of PLGA's deductive tensors, and the checks the diagnostics share.

Order parameters, the rank-1 audit, the Perron–Frobenius eigenpair, asymmetry and the NOTEARS
acyclicity function of a stack of d_k × d_k matrices (any leading shape, e.g. ``[B, H, d_k, d_k]``
from :class:`kvattn.plga.DeductiveOutputs`), on any device. They move their inputs to the CPU
*then* cast them to float64 (:func:`cpu64`) and return CPU float64 results, so that analyses never
mix devices and work on Apple MPS, which has no float64. (The DAG regulariser that training
differentiates, on the input's device, is :func:`kvattn.losses.dag_loss`.)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .._checks import check_finite, check_fraction, check_square
from ..losses import log_trace_expm_squared
from ..pldr import PLDRLLM, DecoderLM
from ..plga import Attention

Tensor = torch.Tensor


def cpu64(x: Tensor, name: str = "x") -> Tensor:
    """``x`` detached, moved to the CPU and *then* cast to float64: what every analysis here
    computes on (the input itself when it already is a detached CPU float64 tensor). Integer
    tensors are cast exactly (up to 2^53); ``name`` is the argument's name in the messages.

    The order matters: MPS has no float64, so ``x.double()`` fails on an MPS tensor, and a float64
    copy left on a GPU would mix devices with the CPU tensors an analysis builds.

    Raises
    ------
    TypeError
        If ``x`` is not a tensor, or is complex or bool (the cast would drop the imaginary part,
        or read truth values as 0 and 1).
    ValueError
        If ``x`` is on the meta device (no values to copy).
    """
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.is_complex() or x.dtype == torch.bool:
        raise TypeError(f"{name} must be a real tensor (floating-point or integer), got {x.dtype}")
    if x.device.type == "meta":
        raise ValueError(f"{name} is on the meta device, which holds no values")
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


def _attention(model: DecoderLM, layer: int) -> Attention:
    """The attention module of decoder layer ``layer`` of ``model``, model type and index
    checked."""
    if not isinstance(model, DecoderLM):
        raise TypeError(f"model must be a PLDRLLM or GPT, got {type(model).__name__}")
    layers = model.decoder.dec_layers
    return layers[_index(layer, "layer", len(layers))].mha1


def _check_attention(attention: object) -> None:
    """Raise unless ``attention`` is the attention module of one decoder layer."""

    if not isinstance(attention, Attention):
        raise TypeError(
            "attention must be a layer's attention module (model.decoder.dec_layers[i].mha1), "
            f"got {type(attention).__name__}"
        )


def _check_pldrllm(model: object) -> None:
    """Raise unless ``model`` is a PLDRLLM (PLGA or constant-G): the models that have a G_LM."""

    if not isinstance(model, PLDRLLM):
        raise TypeError(
            "model must be a PLDRLLM (PLGA or constant-G; a GPT has no G_LM), got "
            f"{type(model).__name__}"
        )


def _check_not_meta(ids: Tensor, name: str) -> None:
    """Raise unless the token ids ``ids`` hold values (the checks and the model read them)."""
    if ids.device.type == "meta":
        raise ValueError(
            f"{name} is on the meta device, which holds no values: pass token ids on the "
            "model's device"
        )


def _check_sequence(ids: object, name: str) -> None:
    """Raise unless ``ids`` is one sequence of token ids: an int64 or int32 tensor ``[1, S]``,
    S ≥ 1, not on the meta device."""
    if not isinstance(ids, Tensor) or ids.dtype not in (torch.int64, torch.int32):
        got = ids.dtype if isinstance(ids, Tensor) else type(ids).__name__
        raise TypeError(f"{name} must be a tensor of int64 (or int32) token ids, got {got}")
    _check_not_meta(ids, name)
    if ids.ndim != 2 or ids.shape[0] != 1 or ids.shape[1] < 1:
        raise ValueError(f"{name} must have shape (1, S) with S ≥ 1, got {tuple(ids.shape)}")


def _check_blocks(ids: object, name: str, pad: int) -> None:
    """Raise unless ``ids`` are evaluation blocks: an int64 tensor ``[B, S + 1]`` (B, S ≥ 1;
    int64 because the targets ``ids[:, 1:]`` index the cross-entropy), not on the meta device,
    with at least one target that is not ``pad``, so that the loss averages over something."""
    if not isinstance(ids, Tensor) or ids.dtype != torch.int64:
        got = ids.dtype if isinstance(ids, Tensor) else type(ids).__name__
        raise TypeError(f"{name} must be an int64 tensor of token ids, got {got}")
    _check_not_meta(ids, name)
    if ids.ndim != 2 or ids.shape[0] < 1 or ids.shape[1] < 2:
        raise ValueError(
            f"{name} must have shape [B, S + 1] with B >= 1 and S >= 1, got {tuple(ids.shape)}"
        )
    if bool((ids[:, 1:] == pad).all()):
        raise ValueError(f"every target {name}[:, 1:] is pad_token_id = {pad}: no loss to average")


def notears_h(M: Tensor) -> Tensor:
    """The NOTEARS acyclicity function h(M) = tr(exp(M∘M)) − d (Zheng et al. 2018), in float64.

    Returns ``inf`` where the trace exceeds float64's range (its log is finite: see
    :func:`~kvattn.losses.log_trace_expm_squared`); a CPU tensor ``[...]`` for ``M`` on any device.

    Raises
    ------
    TypeError
        If M is not a real (floating-point or integer) tensor (a complex M would lose its
        imaginary part).
    ValueError
        If M is not ``[..., d, d]`` or M∘M has a non-finite entry.
    """
    log_tr = log_trace_expm_squared(cpu64(M, "M"))
    return torch.exp(log_tr) - M.shape[-1]


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
    TypeError
        If x1 or x2 is not a real (floating-point or integer) tensor.
    ValueError
        For different shapes, empty or non-finite inputs, an unknown ``normalisation``, or
        ``"mean"`` with mean(x1) = 0 and x1 ≠ x2.
    """
    if normalisation not in ("mean", "rms"):
        raise ValueError(f"normalisation must be 'mean' or 'rms', got {normalisation!r}")
    a, b = cpu64(x1, "x1"), cpu64(x2, "x2")
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
    TypeError
        If A is not a real (floating-point or integer) tensor.
    ValueError
        If A is not ``[..., d, d]`` with d ≥ 2, has non-finite entries, or ``head_dim`` is not a
        leading axis.
    """
    X = cpu64(A, "A")
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


@dataclass(frozen=True)
class MetricNorm:
    """The metric learner's last LayerNorm, per layer: ``scale`` = mean ``|γ|`` and ``shift`` =
    mean ``|β|`` over its d_k entries, CPU float64 tensors ``[L]`` (dimensionless: A is a LayerNorm
    output); ``nan`` in a layer without a metric learner (constant-G)."""

    scale: Tensor
    shift: Tensor


def metric_norm(model: PLDRLLM) -> MetricNorm:
    """Mean ``|γ|`` and mean ``|β|`` of the LayerNorm that ends each layer's metric learner (its
    last residual unit's, ``reslayerAs[-1].layernormA``), the LayerNorm whose output is A.

    Each row of A is ``γ ⊙ n + β`` with ``n`` a row normalised to mean 0 and RMS 1, so γ sets
    how much of A can still depend on the input and β is the part every input shares: with
    γ = 0 every row of A equals β whatever the input (row-map collapse, chapter 9's model
    flattened by hand). Read from the weights; no input is needed.

    Source: the route to row-map collapse proposed by the training-dynamics study
    [gokden2026dynamics] (AdamW's decoupled weight decay shrinking the scale of the metric
    learner's last LayerNorm); the measurement is ours (bracketed keys cite
    ``book/references.bib``).

    Parameters
    ----------
    model:
        A :class:`kvattn.pldr.PLDRLLM` (PLGA or constant-G), any device.

    Returns
    -------
    :class:`MetricNorm`: ``scale`` and ``shift``, ``[L]`` each, CPU float64; ``nan`` for every
    layer of a constant-G model, which has no metric learner.

    Raises
    ------
    TypeError
        ``model`` is not a PLDRLLM (a GPT has no metric learner).
    ValueError
        The weights are on the meta device (no values to read).
    """
    _check_pldrllm(model)
    scale, shift = [], []
    for block in model.decoder.dec_layers:
        attention = block.mha1
        if attention.kind != "plga":
            scale.append(torch.tensor(float("nan"), dtype=torch.float64))
            shift.append(torch.tensor(float("nan"), dtype=torch.float64))
            continue
        norm = attention.reslayerAs[-1].layernormA
        scale.append(cpu64(norm.weight, "the LayerNorm's scale").abs().mean())
        shift.append(cpu64(norm.bias, "the LayerNorm's shift").abs().mean())
    return MetricNorm(torch.stack(scale), torch.stack(shift))


def _ratio(num: Tensor, den: Tensor) -> Tensor:
    """num / den, and 0 where den = 0 (used where den = 0 forces num = 0, e.g. a zero matrix)."""
    return torch.where(den > 0, num / torch.where(den > 0, den, 1.0), 0.0)


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
    TypeError
        If A_LM is not a real (floating-point or integer) tensor.
    ValueError
        If A_LM is not ``[..., d, d]``, has a non-finite or non-positive entry (the theorem needs
        a positive matrix), ``iterations`` is not an int ≥ 1, or ``tol`` is not a number in
        (0, 1): the eigenvector sums to 1, so no entry moves by 1 or more, and a ``tol`` of 1 or
        more (inf included) would stop after one step.
    """
    if not isinstance(iterations, int) or isinstance(iterations, bool) or iterations < 1:
        raise ValueError(f"iterations must be an int ≥ 1, got {iterations!r}")
    check_fraction("tol", tol)
    X = cpu64(A_LM, "A_LM")
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


def asymmetry(M: Tensor) -> float:
    """‖M − Mᵀ‖_F / ‖M‖_F, between 0 (symmetric: exchanging query and key changes nothing) and 2
    (antisymmetric); √2 when tr(M²) = 0, as for a typical random matrix; 0 for M = 0 (symmetric).

    Raises
    ------
    TypeError
        If M is not a real (floating-point or integer) tensor.
    ValueError
        If M is not square or has non-finite entries.
    """
    X = cpu64(M, "M")
    _matrices(X, "M")
    return float(_ratio((X - X.transpose(-1, -2)).norm(), X.norm()))


def _check_probes(
    probes: object, at_least: int, too_few: str, name: str = "probes", distinct: bool = False
) -> None:
    """Raise unless ``probes`` is a list or tuple of at least ``at_least`` token-id tensors of
    shape ``[1, S]`` with S ≥ 1 (ValueError with ``too_few`` when there are fewer); ``name``
    is the argument's name in the messages. With ``distinct``, no two may hold the same ids
    (one host synchronisation per probe on a GPU)."""
    if not isinstance(probes, list | tuple):
        raise TypeError(
            f"{name} must be a list of token-id tensors of shape (1, S), got "
            f"{type(probes).__name__}"
        )
    if len(probes) < at_least:
        raise ValueError(too_few)
    for i, p in enumerate(probes):
        _check_sequence(p, f"{name}[{i}]")
    if distinct:
        # Measures across inputs compare each probe with the others: a repeat compared with
        # itself changes nothing, which is what collapse looks like.
        seen: dict[tuple[int, ...], int] = {}
        for i, p in enumerate(probes):
            first = seen.setdefault(tuple(p.flatten().tolist()), i)
            if first != i:
                raise ValueError(
                    f"{name}[{i}] repeats {name}[{first}]: each of the {name} must be a "
                    "different input (a repeat compared with itself reads as an input-invariant "
                    "G_LM, a false collapse)"
                )
