"""Exercises of chapter 1, Key-value memories: cases, references, mistakes."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ._checker import Case, Exercise, Mistake, randn, register


def _kv_cases(gen):
    d, m = 6, 10
    return [
        Case("random, 5 tokens", (randn(gen, 5, d), randn(gen, m, d), randn(gen, m, d))),
        Case("one token", (randn(gen, 1, d), randn(gen, m, d), randn(gen, m, 3))),
        Case("d_out ≠ d", (randn(gen, 4, d), randn(gen, m, d), randn(gen, m, 2))),
        Case("x = 0", (torch.zeros(3, d, dtype=torch.float64), randn(gen, m, d), randn(gen, m, d))),
        Case("batch axis", (randn(gen, 2, 3, d), randn(gen, m, d), randn(gen, m, d))),
        Case(
            "all keys negative",
            (randn(gen, 3, d).abs(), -randn(gen, m, d).abs(), randn(gen, m, d)),
        ),
    ]


def _top_trigger_cases(gen):
    return [
        Case("random, k=3", (randn(gen, 20, 7), 3)),
        Case("k=1", (randn(gen, 12, 5), 1)),
        Case("k = every position", (randn(gen, 6, 4), 6)),
        Case("one key", (randn(gen, 9, 1), 2)),
    ]


def _absorb_cases(gen):
    d, m = 5, 8
    return [
        Case("random non-symmetric Q", (randn(gen, m, d), randn(gen, d, d))),
        Case("Q = identity", (randn(gen, m, d), torch.eye(d, dtype=torch.float64))),
        Case(
            "Q = a permutation",
            (randn(gen, m, d), torch.eye(d, dtype=torch.float64)[[1, 2, 3, 4, 0]]),
        ),
        Case("one key", (randn(gen, 1, d), randn(gen, d, d))),
    ]


register(
    Exercise(
        "kv_memory",
        1,
        "kv_memory(x, K, V) -> Tensor",
        "The feed-forward layer as a key-value memory: relu(x Kᵀ) V. x (..., d), keys K (m, d) "
        "(rows of W1), values V (m, d_out) (rows of W2); returns (..., d_out).",
        lambda x, K, V: F.relu(x @ K.T) @ V,
        _kv_cases,
        (
            Mistake(
                "no activation: the memory coefficients must be relu(x·k_j), not x·k_j.",
                lambda x, K, V: (x @ K.T) @ V,
            ),
            Mistake(
                "softmax over the slots: that is attention over keys, but an FFN uses an "
                "unnormalised relu.",
                lambda x, K, V: (x @ K.T).softmax(-1) @ V,
            ),
            Mistake(
                "relu applied after the values: the non-linearity acts on the coefficients "
                "x Kᵀ, before they weight V.",
                lambda x, K, V: F.relu(x @ K.T @ V),
            ),
        ),
    ),
    Exercise(
        "top_triggers",
        1,
        "top_triggers(coefficients, k) -> LongTensor",
        "coefficients (n, m): the memory coefficient of each of m keys at each of n positions. "
        "Return the k positions where each key fires most, shape (m, k), strongest first.",
        lambda c, k: c.topk(k, dim=0).indices.T,
        _top_trigger_cases,
        (
            Mistake(
                "the k weakest positions: sort in descending order (largest first).",
                lambda c, k: c.topk(k, dim=0, largest=False).indices.T,
            ),
            Mistake(
                "shape (k, m): transpose so that row j lists key j's triggers.",
                lambda c, k: c.topk(k, dim=0).indices,
            ),
        ),
    ),
    Exercise(
        "absorb_query",
        1,
        "absorb_query(K, Q) -> Tensor",
        "A layer relu((x Q) Kᵀ) V with a global query matrix Q (d, d) equals a key-value MLP "
        "relu(x K'ᵀ) V. Return the new keys K' (m, d).",
        lambda K, Q: K @ Q.T,
        _absorb_cases,
        (Mistake("K' = K Q: (xQ)·k = x·(k Qᵀ), so the keys become K Qᵀ.", lambda K, Q: K @ Q),),
    ),
)
