"""The argument checks of the figures and explorers: every plot refuses bad input before drawing.

Plotly silently drops unmatched or non-finite points and ipywidgets clamps out-of-range slider
values, so each figure and each explorer checks its arguments first. These checks are stricter
than the package-wide ones of ``kvattn._checks``: they take tensors and array-likes, name the
index of the first bad value, and keep the wording that the figures' tests and chapters pin
(``"x must be one of 'a', 'b'; got 'c'"``, ``"… is empty: nothing to show"``). A wrong value
raises ``ValueError`` naming the argument, the value and what is allowed; a wrong kind of value
raises ``TypeError``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Sized
from numbers import Integral, Real

import numpy as np
import plotly.graph_objects as go
import torch

from ..._checks import is_real


def _require_number(
    name: str, value: object, low: float, high: float = np.inf, *, integer: bool = False
) -> None:
    """``value`` is a real number (an int when ``integer``) in ``[low, high]``."""
    if isinstance(value, bool) or not isinstance(value, Integral if integer else Real):
        kind = "an int" if integer else "a number"
        raise TypeError(f"{name} must be {kind}, got {type(value).__name__} {value!r}")
    if not low <= value <= high:  # also refuses NaN
        allowed = f"≥ {low:g}" if high == np.inf else f"in [{low:g}, {high:g}]"
        raise ValueError(f"{name} must be {allowed}, got {value!r}")


def _require_index(name: str, value: object, n: int, of: str) -> None:
    """``value`` indexes one of ``n`` items; ``of`` names them for the message ("layers")."""
    if n < 1:
        raise ValueError(f"there is no {name} to choose: the number of {of} is 0")
    try:
        _require_number(name, value, 0, n - 1, integer=True)
    except ValueError:
        raise ValueError(
            f"{name} must be in 0 … {n - 1} (number of {of}: {n}), got {value!r}"
        ) from None


def _require_choice(name: str, value: object, options: Sequence) -> None:
    if value not in options:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, options))}; got {value!r}")


def _require_items(
    name: str,
    items: object,
    kind: type | None = None,
    *,
    container: type = Sequence,
    empty: bool = False,
) -> list:
    """``items`` (a ``container``: a Sequence, or a Mapping whose keys are listed) as a list,
    non-empty unless ``empty``, each item of type ``kind`` when given."""
    if isinstance(items, str | bytes) or not isinstance(items, container):
        what = "a mapping" if container is Mapping else "a sequence"
        raise TypeError(f"{name} must be {what}, got {type(items).__name__}")
    if len(items) == 0 and not empty:
        raise ValueError(f"{name} is empty: nothing to show")
    listed = list(items)
    if kind is not None:
        for i, item in enumerate(listed):
            if not isinstance(item, kind):
                raise TypeError(f"{name}[{i}] must be a {kind.__name__}, got {type(item).__name__}")
    return listed


def _require_length(name: str, items: Sized, n: int, per: str) -> None:
    if len(items) != n:
        raise ValueError(f"{name} has length {len(items)}, expected {n} (one per {per})")


def _require_array(
    name: str,
    values: object,
    shape: tuple[int, ...] | int,
    per: str = "",
    *,
    positive: bool = False,
    nonnegative: bool = False,
    square: bool = False,
) -> np.ndarray:
    """``values`` (a tensor or nested sequence of numbers) as a finite float array of ``shape``
    (an int: that many dimensions, any sizes); ``per`` says what sets the expected sizes.
    ``positive`` is for logarithmic axes, ``nonnegative`` for error bars, ``square`` for
    matrices in the last two axes."""
    if isinstance(values, torch.Tensor):
        if values.device.type == "meta":
            raise ValueError(f"{name} is a meta tensor: it has a shape but no values to draw")
        array = values.detach().cpu().to(torch.float64).numpy()
    elif isinstance(values, str | bytes):
        raise TypeError(f"{name} must hold numbers, got a string {values!r}")
    else:
        try:
            array = np.asarray(values, dtype=float)
        except (TypeError, ValueError):
            raise TypeError(f"{name} must hold numbers, got {values!r:.80}") from None
    ndim = shape if isinstance(shape, int) else len(shape)
    if array.ndim != ndim or (not isinstance(shape, int) and array.shape != shape):
        why = f" ({per})" if per else ""
        if isinstance(shape, int):
            raise ValueError(f"{name} has shape {array.shape}, expected {ndim} dimensions{why}")
        if ndim == 1:
            raise ValueError(f"{name} has {array.size} values, expected {shape[0]}{why}")
        raise ValueError(f"{name} has shape {array.shape}, expected {shape}{why}")
    if square and (0 in array.shape[-2:] or array.shape[-1] != array.shape[-2]):
        raise ValueError(
            f"{name} has shape {array.shape}, expected square matrices (last two axes)"
        )
    for bad, what in (
        (~np.isfinite(array), "finite"),
        (array <= 0 if positive else None, "positive on a logarithmic axis"),
        (array < 0 if nonnegative else None, "≥ 0"),
    ):
        if bad is not None and bad.any():
            index = tuple(int(i) for i in np.argwhere(bad)[0])
            where = "" if ndim == 0 else f" at index {index[0] if ndim == 1 else index}"
            raise ValueError(f"{name} must be {what}, got {float(array[index])}{where}")
    return array


def _require_cloud(cloud: object) -> tuple[np.ndarray, np.ndarray]:
    """``cloud`` = (a, b, name): points a, b of equal length and their legend name, as arrays."""
    if not isinstance(cloud, tuple | list) or len(cloud) != 3 or not isinstance(cloud[2], str):
        raise TypeError(f"cloud must be (a, b, name), got {cloud!r:.80}")
    a = _require_array("cloud's a", cloud[0], 1)
    return a, _require_array("cloud's b", cloud[1], a.shape, "one per a")


def _require_value(name: str, value: object) -> float | None:
    """A finite real number or None (a measure that is undefined there, drawn as a gap)."""
    if value is None:
        return None
    if not is_real(value):
        raise ValueError(f"{name} must be a finite number or null, got {value!r}")
    return float(f"{float(value):.4g}")  # four significant digits: values span many decades


def _require_distinct(name: str, items: Sequence[object], why: str) -> None:
    """No item of ``items`` repeats; ``why`` says what a repeat would hide (plotly puts equal
    names at one place: a categorical x, a frame)."""
    first: dict[object, int] = {}
    for i, item in enumerate(items):
        if item in first:
            raise ValueError(
                f"{name} must be distinct: {item!r} is at index {first[item]} and {i} ({why})"
            )
        first[item] = i


def _require_color(name: str, value: object) -> None:
    """``value`` is a colour plotly draws: a str such as ``'#0072B2'``, ``'rgb(0, 114, 178)'`` or
    a CSS name (plotly's own validator says which; its error is a page long, so this one names
    the argument)."""
    if not isinstance(value, str):
        raise TypeError(
            f"{name} must be a colour (a str) or None, got {type(value).__name__} {value!r:.80}"
        )
    try:
        go.scatter.Marker(color=value)
    except ValueError:
        raise ValueError(
            f"{name} must be a colour plotly knows ('#rrggbb', 'rgb(r, g, b)' or a CSS name such "
            f"as 'red'), got {value!r:.80}"
        ) from None


def _require_color_map(colors: object) -> None:
    """``colors`` is None or a mapping of names to colours (None: the name's house colour)."""
    if colors is None:
        return
    _require_items("colors", colors, container=Mapping, empty=True)
    for name, value in colors.items():
        if value is not None:
            _require_color(f"colors[{name!r}]", value)


def _require_threshold(threshold: object, log_y: bool) -> None:
    """``threshold`` is None or ``(value, label)``: a finite number (positive on a logarithmic
    axis) and a str, the dashed line a run plot draws across its x range."""
    if threshold is None:
        return
    if (
        not isinstance(threshold, tuple | list)
        or len(threshold) != 2
        or not isinstance(threshold[1], str)
    ):
        raise ValueError(f"threshold must be (value, label), got {threshold!r:.80}")
    biggest = float(np.finfo(float).max)  # refuses ±inf
    _require_number(
        "threshold value", threshold[0], np.nextafter(0.0, 1.0) if log_y else -biggest, biggest
    )


#: The width in CSS px of a book page's text column at a 1280 px window, at which a plotly
#: figure is drawn in the book and the widest a widget's image is shown.
PAGE_WIDTH = 688
#: The smallest text a static widget image may show on the page at 1280 px (CSS px).
MIN_TEXT_PX = 10.0
