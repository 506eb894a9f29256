"""Activations σ and their gates g(z) = σ(z)/z.

A *self-gated* activation can be written σ(z) = z·g(z). Then one gated-MLP unit factorises as

    σ(q·x)(k·x) = (q·x)(k·x) · g(q·x),

a symmetric rank-1 bilinear score times a gate that reads only the query (course, chapter 4). The
gate is 1 for the identity (the bilinear unit), the Heaviside step for ReLU, the logistic sigmoid
σ_s(βz) for Swish-β (SiLU is β = 1) and the normal CDF Φ for GELU.

Activations are given by name (``"identity"``, ``"relu"``, ``"silu"``, ``"swish"``, ``"gelu"``,
``"sigmoid"``) or as a callable on tensors; :func:`resolve` turns either into an
:class:`Activation`.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

Tensor = torch.Tensor

#: The activation names :func:`resolve` accepts.
NAMES = ("identity", "relu", "silu", "swish", "gelu", "sigmoid")

#: The largest Swish β :func:`resolve` accepts, the largest float32 (about 3.4e38).
MAX_BETA = torch.finfo(torch.float32).max


def identity(z: Tensor) -> Tensor:
    """σ(z) = z."""
    return z


def swish(z: Tensor, beta: float = 1.0) -> Tensor:
    """Swish-β: σ(z) = z·sigmoid(βz) (Ramachandran et al. 2017). β = 1 is SiLU, β → 0 gives z/2,
    β → ∞ gives ReLU."""
    return z * torch.sigmoid(beta * z)


def _heaviside_gate(z: Tensor) -> Tensor:
    # ReLU(z) = z·H(z) for any value of H(0); we take the midpoint 1/2.
    return torch.heaviside(z, torch.full((), 0.5, dtype=z.dtype, device=z.device))


def _normal_cdf(z: Tensor) -> Tensor:
    return 0.5 * (1.0 + torch.erf(z / math.sqrt(2.0)))


@dataclass(frozen=True)
class Activation:
    """An activation σ, with its gate g(z) = σ(z)/z where that is finite.

    Call it like a function: ``Activation(...)(z)`` returns σ(z), elementwise, same shape and
    dtype as ``z``.
    """

    name: str
    fn: Callable[[Tensor], Tensor]
    beta: float | None = None
    _gate: Callable[[Tensor], Tensor] | None = None

    def __call__(self, z: Tensor) -> Tensor:
        return self.fn(z)

    @property
    def label(self) -> str:
        """A short human-readable name, e.g. ``"Swish-β (β=2)"``."""
        if self.name == "swish":
            return f"Swish-β (β={self.beta:g})"
        return {"relu": "ReLU", "silu": "SiLU", "gelu": "GELU"}.get(self.name, self.name)

    def gate(self, z: Tensor) -> Tensor:
        """g(z) = σ(z)/z, elementwise, with its limit at z = 0.

        Closed forms are used for the named self-gated activations. For a callable σ, g is
        σ(z)/z away from 0 and σ'(0) (by automatic differentiation) at 0. ReLU's gate, the
        Heaviside step, has no limit at 0; we return the midpoint 1/2 there (any value gives
        ReLU(0) = 0·g(0)).

        Raises
        ------
        ValueError
            If σ(0) ≠ 0 (e.g. the logistic sigmoid of the original GLU): then g has a pole at 0
            and σ is not self-gated.
        """
        if self._gate is not None:
            return self._gate(z)
        zero = torch.zeros((), dtype=torch.float64, requires_grad=True)
        value_at_zero = self.fn(zero)
        if abs(float(value_at_zero.detach())) > 1e-12:
            raise ValueError(
                f"the gate g(z) = σ(z)/z of {self.label!r} has a pole at 0 because "
                f"σ(0) = {float(value_at_zero.detach()):.4g} ≠ 0; gates exist only for self-gated σ"
            )
        (slope,) = torch.autograd.grad(value_at_zero, zero)
        safe = torch.where(z == 0, torch.ones_like(z), z)
        return torch.where(z == 0, slope.to(z.dtype), self.fn(safe) / safe)


def _probe(act: Callable[[Tensor], Tensor], name: str, dtype: torch.dtype) -> None:
    """Call ``act`` on five points of [-1, 1] in ``dtype``: it must return a tensor of their shape
    and dtype, finite, and leave its input as it was."""
    probe = torch.linspace(-1.0, 1.0, 5, dtype=dtype)
    given = probe.clone()
    try:
        out = act(probe)
    except Exception as err:  # a scalar function such as math.tanh, a layer, ...
        raise TypeError(
            "a callable activation must map a tensor to a tensor of the same shape "
            f"(elementwise); calling it on a tensor of shape (5,) failed: {err}"
        ) from None
    if not isinstance(out, Tensor) or out.shape != probe.shape:
        raise TypeError(
            "a callable activation must map a tensor to a tensor of the same shape (elementwise)"
        )
    if not torch.equal(probe, given):
        # a layer's input is often still needed (the residual stream, the backward pass)
        raise ValueError(
            f"a callable activation must not change its input ({name} works in place); use "
            "its out-of-place form, e.g. torch.relu for torch.relu_"
        )
    if out.dtype != dtype:
        raise TypeError(
            f"a callable activation must keep the input's dtype: {dtype} in, {out.dtype} out"
        )
    if not bool(torch.isfinite(out).all()):
        raise ValueError(
            f"a callable activation must give finite values; on {given.tolist()} it gave "
            f"{out.tolist()}"
        )


def resolve(
    act: str | Callable[[Tensor], Tensor] | Activation, beta: float | None = None
) -> Activation:
    """Turn an activation name or callable into an :class:`Activation`.

    Parameters
    ----------
    act:
        One of :data:`NAMES`, a callable mapping a tensor to a tensor of the same shape and dtype
        without changing it (checked on five points of [-1, 1] in float64 and float32, where it
        must also be finite), or an :class:`Activation` (returned unchanged when ``beta`` is
        None).
    beta:
        Inverse temperature of Swish-β. Allowed only with ``"swish"`` (default 1) and ``"silu"``
        (which then becomes Swish-β). A real number (int, float, NumPy scalar; not a string, bool
        or tensor), finite and in [0, :data:`MAX_BETA`]; β = 0 is the linear map z/2.

    Raises
    ------
    ValueError
        Unknown name, ``beta`` given for an activation that has none, or a β that is negative,
        non-finite or above :data:`MAX_BETA`; a callable that changes its input (works in place)
        or gives NaN or infinite values on the probe.
    TypeError
        ``act`` is neither a string nor a callable; a β that is not a real number; a callable
        that fails on a tensor, changes its shape or its dtype.
    """
    if isinstance(act, Activation) and beta is None:
        return act
    if isinstance(act, str):
        name = act.lower()
        if name not in NAMES:
            raise ValueError(f"unknown activation {act!r}; expected one of {', '.join(NAMES)}")
        if beta is not None and name not in ("swish", "silu"):
            raise ValueError(f"beta is the Swish-β temperature; {act!r} takes no beta")
        if name in ("swish", "silu") and beta is not None:
            if isinstance(beta, bool) or not isinstance(beta, numbers.Real):
                raise TypeError(
                    f"beta is Swish's β (the inverse temperature in z·sigmoid(βz)) and must be a "
                    f"real number, got {beta!r} ({type(beta).__name__})"
                )
            if not math.isfinite(beta) or beta < 0:
                raise ValueError(f"beta must be finite and >= 0, got {beta}")
            if beta > MAX_BETA:
                raise ValueError(
                    f"beta must be at most {MAX_BETA:.2g} (the largest float32): a larger β is "
                    "infinite in float32 and half precision, where σ(0) = 0·sigmoid(∞·0) is NaN; "
                    f"got {beta}"
                )
            if name == "silu" and beta == 1.0:
                beta = None
            else:
                b = float(beta)
                return Activation(
                    "swish",
                    lambda z: swish(z, b),
                    beta=b,
                    _gate=lambda z: torch.sigmoid(b * z),
                )
        if name == "swish":
            return Activation("swish", swish, beta=1.0, _gate=torch.sigmoid)
        table = {
            "identity": (identity, torch.ones_like),
            "relu": (F.relu, _heaviside_gate),
            "silu": (F.silu, torch.sigmoid),
            "gelu": (F.gelu, _normal_cdf),
            "sigmoid": (torch.sigmoid, None),
        }
        fn, gate = table[name]
        return Activation(name, fn, _gate=gate)
    if callable(act):
        if beta is not None:
            raise ValueError("beta applies to the named Swish-β activation, not to a callable")
        name = getattr(act, "__name__", type(act).__name__)
        # Both dtypes, so that a callable casting to either one (z.float(), z.double()) shows it.
        for dtype in (torch.float64, torch.float32):
            _probe(act, name, dtype)
        return Activation(name, act)
    raise TypeError(f"act must be an activation name or a callable, got {type(act).__name__}")
