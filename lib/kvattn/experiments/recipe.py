"""What every run of both designs shares: distinct seeds, the checked recipe, the matched
parameter budget, the model's configuration and the worker processes.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor

import torch

from .._checks import check_bool, check_device, check_int, is_list_like
from ..data import TokenData
from ..lm import TinyLMConfig
from ..mlp import matched_slots, mlp_cost


def _duplicates(values: Iterable) -> list:
    """The values that occur more than once, each named once, in order of first occurrence."""
    seen, repeated = set(), []
    for value in values:
        if value in seen and value not in repeated:
            repeated.append(value)
        seen.add(value)
    return repeated


def _check_seeds(name: str, seeds: Sequence[int]) -> None:
    """Seeds are ints >= 0 and distinct: a seed given twice is one pair counted twice, which
    shrinks the standard error (to 0 for all-equal seeds: t = inf, p = 0)."""
    if not is_list_like(seeds):
        raise ValueError(f"{name} must be a sequence of ints, got {seeds!r}")
    if any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in seeds):
        raise ValueError(f"{name} must be ints >= 0, got {list(seeds)}")
    repeated = _duplicates(seeds)
    if repeated:
        raise ValueError(f"{name} has duplicates {repeated}, got {list(seeds)}")


def _check_recipe(
    tokens: TokenData,
    shape: dict[str, int],
    batch_size: int,
    device: torch.device | str,
    progress: bool,
    workers: int,
) -> None:
    """The arguments both designs share, checked before any training: a check that training
    makes itself would come only after the runs before it (or, for the validation stream, after
    the first run's first ``eval_every`` steps)."""
    if not isinstance(tokens, TokenData):
        raise TypeError(f"tokens must be a kvattn.data.TokenData, got {type(tokens).__name__}")
    for name, value in {**shape, "batch_size": batch_size}.items():
        check_int(name, value, low=1)
    block = shape["block_size"]
    for split in ("train", "val"):
        if len(getattr(tokens, split)) <= block:  # a window is block_size + 1 ids
            raise ValueError(
                f"block_size {block} needs more than {block} ids in tokens.{split}, which has "
                f"{len(getattr(tokens, split))}"
            )
    check_device("device", device)
    check_bool("progress", progress)
    check_int("workers", workers, low=1)


def _map(fn: Callable, jobs: list, workers: int) -> list:
    """``[fn(*job) for job in jobs]``, in ``workers`` processes when ``workers`` > 1."""
    if workers == 1 or len(jobs) < 2:
        return [fn(*job) for job in jobs]
    context = multiprocessing.get_context("spawn")  # a fork of a threaded torch can deadlock
    with ProcessPoolExecutor(min(workers, len(jobs)), context, initializer=_one_thread) as pool:
        return list(pool.map(fn, *zip(*jobs, strict=True)))


def _one_thread() -> None:
    torch.set_num_threads(1)


def _setup(
    d_model: int, n_layers: int, n_heads: int, block_size: int, **recipe: object
) -> tuple[int, dict, dict]:
    """The feed-forward budget (a key-value layer with 4·d_model slots), the model shape and the
    training recipe that every run of both designs shares."""
    budget = mlp_cost("key_value", d_model, 4 * d_model)[0]
    shape = dict(d_model=d_model, n_layers=n_layers, n_heads=n_heads, block_size=block_size)
    return budget, shape, recipe


def _config(
    tokens: TokenData,
    ffn: str,
    act: str | None,
    shape: dict,
    budget: int,
    beta: float | None = None,
) -> TinyLMConfig:
    form = {"key_value": "key_value", "symmetric_rank1": "symmetric_rank1"}.get(ffn, "gated")
    return TinyLMConfig(
        vocab_size=tokens.vocab_size,
        ffn=ffn,
        act=act,
        beta=beta,
        n_slots=matched_slots(form, shape["d_model"], budget),
        **shape,
    )
