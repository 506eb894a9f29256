"""Choosing the next token: the one sampler (greedy, temperature, top-p) of every model of the
package, and the check of its arguments.

:meth:`kvattn.pldr.DecoderLM.generate` and :meth:`kvattn.lm.TinyLM.generate` both call
:func:`sample_next`; :func:`check_decoding_args` is what they, and
:func:`kvattn.generate.generate_text` before it loads anything, check first;
:func:`decoding_mode` reconciles ``generate``'s ``cache`` and ``use_cache``.
"""

from __future__ import annotations

import math
import numbers

import torch

from .config import CACHE_MODES

Tensor = torch.Tensor


#: The smallest sampling temperature, the smallest normal float32 (the sampler's precision).
MIN_TEMPERATURE = torch.finfo(torch.float32).tiny


def check_decoding_args(
    max_new_tokens: int, cache: str | None, temperature: float, top_p: float
) -> None:
    """Check the decoding arguments of :meth:`kvattn.pldr.DecoderLM.generate` (and of
    :func:`kvattn.generate.generate_text`, before it loads anything).

    ``max_new_tokens``: an int >= 0; ``cache``: None or one of :data:`~kvattn.config.CACHE_MODES`;
    ``temperature``: a real number, 0 (greedy) or in [:data:`MIN_TEMPERATURE`, ∞);
    ``top_p``: a real number in (0, 1]. Raises ``TypeError`` for a wrong type (strings, and
    bools where numbers are expected, are never converted), ``ValueError`` for a wrong value.
    """
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, numbers.Integral):
        raise TypeError(f"max_new_tokens must be an int, got {max_new_tokens!r}")
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be a non-negative int, got {max_new_tokens}")
    if cache is not None and not isinstance(cache, str):
        raise TypeError(f"cache must be None or a str, got {cache!r}")
    if cache is not None and cache not in CACHE_MODES:
        raise ValueError(f"cache must be one of {CACHE_MODES}, got {cache!r}")
    for name, value in (("temperature", temperature), ("top_p", top_p)):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"{name} must be a real number, got {value!r}")
    if not (math.isfinite(temperature) and temperature >= 0):
        raise ValueError(f"need a finite temperature >= 0, got temperature={temperature}")
    if 0 < temperature < MIN_TEMPERATURE:
        raise ValueError(
            f"temperature={temperature} is below the smallest normal float32, "
            f"{MIN_TEMPERATURE:.3g}, the sampler's precision; "
            "use temperature=0 for greedy decoding"
        )
    if not 0 < top_p <= 1:
        raise ValueError(f"need 0 < top_p <= 1, got top_p={top_p}")


def decoding_mode(cache: str | None, use_cache: bool | None) -> str:
    """The decoding mode of :meth:`kvattn.pldr.DecoderLM.generate`: ``cache`` (already checked by
    :func:`check_decoding_args`) when given, else ``"none"`` for ``use_cache=False`` and ``"kv"``
    for True or None.

    Raises
    ------
    TypeError
        ``use_cache`` is not None or a bool.
    ValueError
        ``use_cache`` contradicts ``cache``: False with ``"kv"`` or ``"kv+g"``, True with
        ``"none"``.
    """
    if use_cache is not None and not isinstance(use_cache, bool):
        raise TypeError(f"use_cache must be a bool, got {type(use_cache).__name__}")
    if cache is None:
        return "none" if use_cache is False else "kv"
    if use_cache is not None and use_cache != (cache != "none"):
        raise ValueError(
            f"use_cache={use_cache} contradicts cache={cache!r}; give only cache "
            "(use_cache=True means 'kv', False means 'none')"
        )
    return cache


def sample_next(
    logits: Tensor, temperature: float, top_p: float, generator: torch.Generator | None
) -> Tensor:
    """The next token ``[B, 1]`` (int64) for next-token logits ``[B, vocab]``: the argmax when
    ``temperature`` is 0, else one draw (``torch.multinomial`` with ``generator``, one call per
    step, so a seeded generator repeats a run) from softmax(logits / temperature) cut to its
    top-p nucleus (the most probable tokens whose cumulative probability, before each, stays
    below ``top_p``) and renormalised. The arguments are those :func:`check_decoding_args`
    accepts; the logits may be of any float dtype and may hold NaN or ±inf (a step of a broken
    model), which the callers report after decoding.
    """
    if temperature == 0:
        return logits.argmax(-1, keepdim=True)
    # Non-finite logits are reported after decoding (no per-step sync); until then they must
    # not crash the sampler. Shifting by the maximum first keeps a tiny temperature finite.
    logits = logits.float().nan_to_num()
    probs = torch.softmax((logits - logits.amax(-1, keepdim=True)) / temperature, dim=-1)
    if top_p < 1:
        sorted_p, order = probs.sort(dim=-1, descending=True)
        keep = sorted_p.cumsum(-1) - sorted_p < top_p
        sorted_p = sorted_p * keep
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_p)
    return torch.multinomial(probs / probs.sum(-1, keepdim=True), 1, generator=generator)
