"""The losses the models train on: next-token cross-entropy and the DAG regulariser of PLDR-LLM.

* :func:`lm_cross_entropy` — the reference's masked next-token loss (padding left out);
* :func:`dag_loss` — ``|log(tr(exp(M∘M)) / d)|``, the DAG regulariser of PLDR-LLM v510_dag
  [gokden2024pldrllm] built on the NOTEARS acyclicity function [zheng2018dags], computed without
  overflow by :func:`log_trace_expm_squared`;
* :func:`dag_penalty` — its weighted sum over A_LM, A_P and G_LM of every layer, as pre-training
  adds it to the loss.

Unlike the analyses of :mod:`kvattn.diagnostics`, these stay on their input's device and dtype
and keep the graph. Bracketed keys cite ``book/references.bib``.
"""

from __future__ import annotations

import math
import numbers

import torch
import torch.nn.functional as F

from ._checks import check_bool, check_finite, check_square

Tensor = torch.Tensor


def lm_cross_entropy(
    logits: Tensor, targets: Tensor, pad_id: int = 0, *, check_targets: bool = True
) -> Tensor:
    """Mean next-token cross-entropy over non-pad targets (the reference's masked loss), in
    float32: ``logits [B, S, V]``, ``targets [B, S]`` int32 or int64 ids (the models take both;
    the loss needs int64), ``pad_id`` the id left out of the mean.

    ``check_targets=False`` skips the one check that reads the targets' values (that some target
    is not ``pad_id``), which costs a host synchronisation on a GPU: a training step whose batch
    is cut from a packed token stream always has targets, and a nan loss would stop it anyway.
    Without the check, meta tensors give a meta loss (shapes only).

    Raises
    ------
    TypeError
        ``logits`` is not a floating-point tensor, ``targets`` not an int64 (or int32) tensor
        (float ids would be truncated), ``pad_id`` not an int (a bool included), or
        ``check_targets`` not a bool.
    ValueError
        The shapes are not ``[B, S, V]`` and ``[B, S]`` with B, S, V ≥ 1, or ``pad_id`` is
        outside int64; unless ``check_targets`` is False, ``targets`` on the meta device (no
        values to check) or every target ``pad_id`` (the mean would be over no target: nan).
    """
    if not isinstance(logits, Tensor) or not logits.is_floating_point():
        got = logits.dtype if isinstance(logits, Tensor) else type(logits).__name__
        raise TypeError(f"logits must be a floating-point tensor, got {got}")
    if not isinstance(targets, Tensor) or targets.dtype not in (torch.int64, torch.int32):
        got = targets.dtype if isinstance(targets, Tensor) else type(targets).__name__
        raise TypeError(f"targets must be an int64 (or int32) tensor of token ids, got {got}")
    # any integer, NumPy's included (F.cross_entropy takes them), but not a bool
    if not isinstance(pad_id, numbers.Integral) or isinstance(pad_id, bool):
        raise TypeError(f"pad_id must be an int, got {type(pad_id).__name__}")
    check_bool("check_targets", check_targets, typed=True)
    if not -(2**63) <= pad_id < 2**63:  # torch compares ids as int64 (and overflows beyond)
        raise ValueError(f"pad_id must be an int64 id in [-2**63, 2**63), got {pad_id}")
    if logits.ndim != 3 or targets.shape != logits.shape[:2] or 0 in logits.shape:
        raise ValueError(
            "logits must have shape [B, S, V] and targets [B, S] (B, S, V >= 1), got logits "
            f"{tuple(logits.shape)} and targets {tuple(targets.shape)}"
        )
    if check_targets and targets.device.type == "meta":
        raise ValueError(
            "targets are on the meta device, which holds no values: the check that some target "
            "is not pad_id reads them (check_targets=False skips it and gives a meta loss)"
        )
    if check_targets and not bool((targets != pad_id).any()):
        raise ValueError(f"every target is pad_id = {pad_id}: no loss to average")
    return F.cross_entropy(
        logits.flatten(0, 1).float(), targets.flatten().long(), ignore_index=pad_id
    )


def dag_penalty(outputs: list, coefficients: tuple[float, float, float]) -> Tensor:
    """c_A·ℓ(A_LM) + c_Ap·ℓ(A_P) + c_G·ℓ(G_LM), each ℓ averaged over layers, batch and heads
    (:func:`dag_loss`; float32, outside autocast)."""
    terms = []
    for c, name in zip(coefficients, ("A_LM", "A_P", "G_LM"), strict=True):
        if c > 0:
            stacked = torch.stack([getattr(o, name) for o in outputs if o is not None])
            with torch.autocast(stacked.device.type, enabled=False):
                terms.append(c * dag_loss(stacked.float()).mean())
    return sum(terms)


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

    Raises
    ------
    TypeError
        If ``M`` is not a float32 or float64 tensor (``matrix_exp`` in bfloat16 or float16
        returns nan or inf: pass ``M.float()``).
    ValueError
        If ``M`` is not ``[..., d, d]``, or M or M∘M has a non-finite entry (entries of M beyond
        the square root of the dtype's largest value overflow); one host synchronisation.
    """
    check_square(M, "M")
    if M.dtype not in (torch.float32, torch.float64):
        # refused rather than computed in float32: the caller chooses the dtype of the loss
        raise TypeError(
            "M must be float32 or float64 (matrix_exp is not accurate in half precision: pass "
            f"M.float()), got {M.dtype}"
        )
    X = M * M
    check_finite(X.detach(), "M∘M")
    c = _perron_upper_bound(X.detach())
    eye = torch.eye(X.shape[-1], dtype=X.dtype, device=X.device)
    shifted = torch.linalg.matrix_exp(X - c[..., None, None] * eye)
    trace = shifted.diagonal(dim1=-2, dim2=-1).sum(-1)
    return c + torch.log(trace)


def dag_loss(M: Tensor) -> Tensor:
    """The reference's DAG regulariser ``ℓ(M) = |log(tr(exp(M∘M)) / d)|``, per matrix ``[...]``.

    It is log(1 + h(M)/d) in absolute value, with h the NOTEARS acyclicity function
    (:func:`~kvattn.diagnostics.measures.notears_h`); zero exactly when M∘M is nilpotent (M is the
    weighted adjacency of a DAG). PLDR-LLM v510_dag applies it to A_LM, A_P and G_LM (not to A) with
    separate coefficients. Raises as :func:`log_trace_expm_squared`.
    """
    return (log_trace_expm_squared(M) - math.log(M.shape[-1])).abs()
