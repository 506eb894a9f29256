"""The synthetic tasks of Part I, made from a seed: a teacher-student regression, known quadratic
forms, and a key-value table to memorise.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .._checks import is_int

Tensor = torch.Tensor


def _check_seed(seed: object) -> None:
    """``seed`` is what ``torch.Generator.manual_seed`` takes whole, an int in [0, 2**64)."""
    if not is_int(seed) or not 0 <= seed < 2**64:
        raise ValueError(f"seed must be an int in [0, 2**64), got {seed!r}")


@dataclass(frozen=True)
class RegressionTask:
    """Inputs and targets of a regression task: ``x_*`` ``(n, d_in)``, ``y_*`` ``(n, d_out)``."""

    x_train: Tensor
    y_train: Tensor
    x_test: Tensor
    y_test: Tensor


def teacher_student(
    d_in: int = 10,
    d_out: int = 5,
    n_train: int = 512,
    n_test: int = 2048,
    width: int = 32,
    seed: int = 0,
) -> RegressionTask:
    """A random teacher network y = tanh(x W₁ᵀ + b₁) W₂ to imitate, on inputs with a constant 1.

    The first ``d_in − 1`` input features are N(0, 1); the last is the constant 1, which stands in
    for the biases that the course's layers leave out (without it every form σ((q·x)(k·x)) would be
    an even function of x). The teacher is a tanh network, so no student layer (bilinear, ReGLU,
    SwiGLU, ...) has its form. W₁ ~ N(0, 1/d_in), b₁ ~ N(0, 1), W₂ ~ N(0, 1/width); float32;
    seeded.

    Raises
    ------
    ValueError
        A size that is not an int (``True`` included), ``d_in`` < 2 or another size < 1 (the one
        is named); ``seed`` not an int in [0, 2**64).
    """
    sizes = dict(d_in=(d_in, 2), d_out=(d_out, 1), n_train=(n_train, 1), n_test=(n_test, 1))
    for name, (value, low) in {**sizes, "width": (width, 1)}.items():
        if not is_int(value) or value < low:
            raise ValueError(
                f"need d_in >= 2 and positive d_out, n_train, n_test, width (ints), got {name} = "
                f"{value!r}"
            )
    _check_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    W1 = torch.randn(width, d_in, generator=gen) / d_in**0.5
    b1 = torch.randn(width, generator=gen)
    W2 = torch.randn(width, d_out, generator=gen) / width**0.5
    x = torch.randn(n_train + n_test, d_in, generator=gen)
    x[:, -1] = 1.0
    y = torch.tanh(x @ W1.T + b1) @ W2
    return RegressionTask(x[:n_train], y[:n_train], x[n_train:], y[n_train:])


def quadratic_task(
    A: Tensor,
    n_train: int = 1024,
    n_test: int = 1024,
    seed: int = 0,
    constant_feature: bool = True,
) -> RegressionTask:
    """Targets that are known quadratic forms, y_o = x A_o xᵀ, for reading interaction tensors.

    ``A`` has shape ``(d_out, d, d)``. Inputs are N(0, I) in every feature except, with
    ``constant_feature``, the last one, fixed at 1 so that A can also hold linear terms
    (entries pairing a feature with the constant) and offsets. Only the symmetric part of each
    A_o affects y. float32; seeded.
    """
    if A.ndim != 3 or A.shape[1] != A.shape[2]:
        raise ValueError(f"A must have shape (d_out, d, d), got {tuple(A.shape)}")
    gen = torch.Generator().manual_seed(seed)
    d = A.shape[-1]
    x = torch.randn(n_train + n_test, d, generator=gen)
    if constant_feature:
        x[:, -1] = 1.0
    y = torch.einsum("ni,oij,nj->no", x, A.float(), x)
    return RegressionTask(x[:n_train], y[:n_train], x[n_train:], y[n_train:])


@dataclass(frozen=True)
class RecallTask:
    """A key → value table to memorise.

    ``keys`` has shape ``(n_pairs, d)``; ``values`` is int64 of shape ``(n_pairs,)``.
    """

    keys: Tensor
    values: Tensor
    n_values: int


def key_value_recall(
    n_pairs: int = 512, d: int = 32, n_values: int = 64, seed: int = 0
) -> RecallTask:
    """A synthetic key-value memory task: random keys on the sphere of radius √d, each assigned a
    uniformly random value class. A layer of d inputs and ``n_values`` logits must store the table;
    accuracy on the keys measures how much it can hold.

    Raises
    ------
    ValueError
        A size that is not an int (``True`` included) or below its bound (the one is named);
        ``seed`` not an int in [0, 2**64).
    """
    for name, (value, low) in dict(n_pairs=(n_pairs, 1), d=(d, 1), n_values=(n_values, 2)).items():
        if not is_int(value) or value < low:
            raise ValueError(
                f"need n_pairs >= 1, d >= 1 and n_values >= 2 (ints), got {name} = {value!r}"
            )
    _check_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    keys = torch.randn(n_pairs, d, generator=gen)
    keys = keys / keys.norm(dim=1, keepdim=True) * d**0.5
    values = torch.randint(0, n_values, (n_pairs,), generator=gen)
    return RecallTask(keys, values, n_values)
