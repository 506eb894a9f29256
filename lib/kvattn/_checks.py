"""The argument checks the package shares: an int at or above a bound, a finite real number, one
of a few choices, a bool, a sequence; and, for tensors, a stack of square matrices and finite
entries.

Each refuses ``bool`` where a number is wanted (``True`` is an ``int`` to Python, and a flag
passed as a count is always a mistake) and coerces nothing. The message names the argument,
what was expected and what was given. Two wordings exist because tests pin them: a one-line
``ValueError`` (``"steps must be an int >= 1, got 0"``), used by default, and a ``TypeError``
for the wrong type then a ``ValueError`` for the wrong value (``typed=True``), which the
benchmark's options use.
"""

from __future__ import annotations

import argparse
import math
import numbers
from collections.abc import Callable, Iterable, Mapping, Sequence, Sized
from collections.abc import Set as AbstractSet
from types import UnionType
from typing import Union, get_args, get_origin, get_type_hints

import torch


def is_int(value: object) -> bool:
    """Whether ``value`` is an ``int`` and not a ``bool``."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_real(value: object) -> bool:
    """Whether ``value`` is a finite real number (an ``int``, ``float`` or NumPy scalar), not a
    ``bool``."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def check_int(name: str, value: object, *, low: int, typed: bool = False) -> None:
    """``value`` is an int ≥ ``low``.

    Raises
    ------
    ValueError
        ``value`` is not an int (a bool included) or is below ``low``; with ``typed``, only when
        it is below ``low``.
    TypeError
        With ``typed``: ``value`` is not an int (a bool included).
    """
    if typed:
        if not is_int(value):
            raise TypeError(f"{name} must be an int, got {type(value).__name__}")
        if value < low:
            raise ValueError(f"{name} must be >= {low}, got {value}")
    elif not is_int(value) or value < low:
        raise ValueError(f"{name} must be an int >= {low}, got {value!r}")


def check_positive_int(name: str, value: object) -> int:
    """``value`` is an int ≥ 1 (the wording of the model configs: "a positive int"); returns it.

    Raises
    ------
    ValueError
        ``value`` is not an int (a bool included) or is below 1.
    """
    if not is_int(value) or value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


def check_choice(name: str, value: object, choices: Sequence[object]) -> None:
    """``value`` is one of ``choices`` (compared with ``==``), named in the message as
    ``'a', 'b' or 'c'``.

    Raises
    ------
    ValueError
        ``value`` is not one of ``choices``.
    """
    if value not in choices:
        names = [repr(c) for c in choices]
        allowed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
        raise ValueError(f"{name} must be {allowed}, got {value!r}")


def check_bool(name: str, value: object, *, typed: bool = False) -> None:
    """``value`` is ``True`` or ``False`` (not 0 or 1, not a string).

    Raises
    ------
    ValueError
        ``value`` is not a bool.
    TypeError
        With ``typed``: ``value`` is not a bool.
    """
    if isinstance(value, bool):
        return
    if typed:
        raise TypeError(f"{name} must be a bool, got {type(value).__name__}")
    raise ValueError(f"{name} must be True or False, got {value!r}")


def is_list_like(values: object) -> bool:
    """Whether ``values`` is a sequence or an array: not a string (which would be read one
    character at a time), a mapping, or a set (whose order is arbitrary, and the course's lists
    are ordered: seeds pair runs, rates form a grid, p-values match hypotheses)."""
    return (
        isinstance(values, Sized)
        and isinstance(values, Iterable)
        and not isinstance(values, str | bytes | Mapping | AbstractSet)
    )


def check_fraction(name: str, value: object) -> None:
    """``value`` is a real number strictly between 0 and 1 (a level, a power).

    Raises
    ------
    ValueError
        ``value`` is not a finite real number in (0, 1).
    """
    if not (is_real(value) and 0 < value < 1):
        raise ValueError(f"{name} must be a number in (0, 1), got {value!r}")


def check_square(X: torch.Tensor, name: str) -> None:
    """``X`` is a floating-point tensor of square matrices ``[..., d, d]``, d ≥ 1.

    Raises
    ------
    TypeError
        ``X`` is not a floating-point tensor.
    ValueError
        ``X`` is not ``[..., d, d]`` with d ≥ 1.
    """
    if not isinstance(X, torch.Tensor) or not X.is_floating_point():
        got = X.dtype if isinstance(X, torch.Tensor) else type(X).__name__
        raise TypeError(f"{name} must be a floating-point tensor, got {got}")
    if X.ndim < 2 or X.shape[-1] != X.shape[-2] or X.shape[-1] == 0:
        raise ValueError(f"{name} must have shape (..., d, d) with d ≥ 1, got {tuple(X.shape)}")


def check_finite(X: torch.Tensor, name: str) -> None:
    """``X`` has no NaN or infinite entry (one host synchronisation on a GPU).

    Raises
    ------
    ValueError
        Naming how many entries are not finite.
    """
    bad = int((~torch.isfinite(X)).sum())
    if bad:
        raise ValueError(f"{name} has {bad} non-finite (NaN or infinite) entries")


def check_device(name: str, device: object) -> torch.device:
    """``device`` names a torch device this machine has (``"cpu"``, ``"cuda"``, ``"cuda:1"``,
    ``"mps"`` or a :class:`torch.device`); returns it as a :class:`torch.device`. ``"meta"``
    (tensors with shapes but no values) and other kinds are refused.

    Raises
    ------
    ValueError
        ``device`` is not a device torch knows, is the meta device, or this machine lacks it.
    """
    try:
        where = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(
            f"{name} must name a torch device such as 'cpu' or 'cuda', got {device!r}"
        ) from err
    if where.type == "meta":
        raise ValueError(
            f"{name} 'meta' holds shapes but no values, so nothing can be computed on it: "
            "choose cpu, cuda or mps"
        )
    available = {
        "cpu": True,
        "cuda": torch.cuda.is_available() and (where.index or 0) < torch.cuda.device_count(),
        "mps": torch.backends.mps.is_available(),
    }
    if not available.get(where.type, False):
        raise ValueError(f"{name} {device!r} is not available on this machine")
    return where


def matches_hint(value: object, hint: object) -> bool:
    """Whether plain (JSON) data ``value`` has the type ``hint``: ``int``, ``float`` (any real
    number but NaN, ints and ±inf included: a t statistic is ±inf when se = 0), ``str``,
    ``bool``, ``list[T]``, ``dict[K, V]``, a bare ``list``/``dict``, or ``X | None``. Nothing
    is coerced; ``bool`` is no number."""
    origin, args = get_origin(hint), get_args(hint)
    if origin in (Union, UnionType):
        return any(matches_hint(value, arg) for arg in args)
    if hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, numbers.Real) and not isinstance(value, bool) and value == value
    if hint is int:
        return is_int(value)
    if origin is list:
        return isinstance(value, list) and all(matches_hint(v, args[0]) for v in value)
    if origin is dict:
        return isinstance(value, dict) and all(
            matches_hint(k, args[0]) and matches_hint(v, args[1]) for k, v in value.items()
        )
    return isinstance(value, hint)


def check_fields(cls: type, record: object) -> None:
    """``record`` (plain JSON data) holds exactly the fields of the dataclass ``cls``, each of
    its type hint (:func:`matches_hint`), so that a file's mistakes are named when it is read
    rather than found where a value is used.

    Raises
    ------
    ValueError
        ``record`` is not a dict, a key is missing or unknown (all are named), or a field's value
        does not have its type.
    """
    if not isinstance(record, dict):
        raise ValueError(f"expected a JSON object for {cls.__name__}, got {type(record).__name__}")
    hints = get_type_hints(cls)
    missing, unknown = sorted(set(hints) - set(record)), sorted(set(record) - set(hints))
    if missing or unknown:
        raise ValueError(f"{cls.__name__}: missing keys {missing}, unknown keys {unknown}")
    for name, hint in hints.items():
        if not matches_hint(record[name], hint):
            expected = getattr(hint, "__name__", None) if get_origin(hint) is None else None
            raise ValueError(
                f"{cls.__name__}: {name} must be {expected or hint}, got {record[name]!r:.200}"
            )


def int_argument(minimum: int, why: str = "") -> Callable[[str], int]:
    """An argparse ``type``: an integer of at least ``minimum``; anything else is a usage error
    whose message says what was expected (``why`` adds the reason for the bound)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}{why}, got {text}")
        return value

    return parse
