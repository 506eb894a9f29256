"""Exercises of chapter 1, Key-value memories: cases, references, mistakes."""

from __future__ import annotations

import math

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


def _agreement_cases(gen):
    # Slots' next tokens drawn from a skewed (Zipf-like) vocabulary, as in real text; about a
    # fifth of the values point at their slot's next token, the rest at a token of their own.
    weights = 1.0 / torch.arange(1, 41, dtype=torch.float64)
    next_token = torch.multinomial(weights, 300, replacement=True, generator=gen)
    own = torch.multinomial(weights, 300, replacement=True, generator=gen)
    hit = torch.rand(300, generator=gen, dtype=torch.float64) < 0.2
    perm = torch.randperm(12, generator=gen)
    distinct_top = perm.clone()
    distinct_top[3:] = perm[3:].roll(1)  # three slots agree, the other nine are a cycle
    return [
        Case(
            "300 slots, skewed token frequencies", (next_token, torch.where(hit, next_token, own))
        ),
        Case("12 slots, every token once", (perm, distinct_top)),
        Case("every slot the same token", (torch.full((8,), 5), torch.full((8,), 5))),
        Case("one slot", (torch.tensor([7]), torch.tensor([7]))),
        Case("no slot agrees", (torch.tensor([0, 1, 2, 3]), torch.tensor([1, 2, 3, 0]))),
    ]


def _chance(next_token, top_token):
    """Expected agreement rate when values are paired with keys at random: Σ_t n_t n'_t / m²."""
    size = int(torch.cat([next_token, top_token]).max()) + 1
    n = torch.bincount(next_token, minlength=size).double()
    n_top = torch.bincount(top_token, minlength=size).double()
    return (n * n_top).sum() / len(next_token) ** 2


def _agreement_over_chance(next_token, top_token):
    rate = (next_token == top_token).double().mean()
    return float(rate / _chance(next_token, top_token))


def _over(chance):
    """A wrong answer that divides the right rate by a wrong chance level."""
    return lambda nxt, top: float((nxt == top).double().mean() / chance(nxt, top))


def _slots_needed(n_pairs, n_values, d, d_out, bits_per_weight):
    return math.ceil(n_pairs * math.log2(n_values) / (bits_per_weight * (d + d_out)))


def _slots_cases(_gen):
    return [
        Case("4096 pairs of 32 values, d = 16, d_out = 32", (4096, 32, 16, 32, 0.7)),
        Case("the bits fill the slots exactly", (64, 32, 16, 16, 0.625)),
        Case("1000 pairs of 10 values, wide keys", (1000, 10, 128, 10, 0.3)),
        Case("one value: nothing to store", (500, 1, 16, 1, 1.0)),
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
        "agreement_over_chance",
        1,
        "agreement_over_chance(next_token, top_token) -> float",
        "next_token (m,): for every slot, the token that followed its key's top trigger; "
        "top_token (m,): its value's top token (integer ids). Return the agreement rate (the "
        "share of slots where the two are equal) divided by the rate expected when values are "
        "paired with the slots' keys at random, computed exactly rather than by shuffling.",
        _agreement_over_chance,
        _agreement_cases,
        (
            Mistake(
                "chance taken as 1/m, the probability that a random pairing gives a slot its own "
                "value back; but any value whose top token is the slot's next token agrees, so "
                "frequent tokens agree by chance far more often. Count, for every token t, the "
                "slots with next token t and the values with top token t.",
                _over(lambda nxt, top: 1 / len(nxt)),
            ),
            Mistake(
                "chance taken as 1 / (number of distinct tokens), as if every token were equally "
                "likely; the tokens of real text are far from uniform, and agreement by chance "
                "depends on how often each token occurs on both sides.",
                _over(lambda nxt, top: 1 / len(torch.unique(torch.cat([nxt, top])))),
            ),
            Mistake(
                "chance computed from the values alone (the chance that two random values share "
                "a top token); a chance agreement pairs a slot's next token with another slot's "
                "value, so it needs the frequencies of both.",
                _over(lambda nxt, top: (torch.bincount(top).double() ** 2).sum() / len(top) ** 2),
            ),
            Mistake(
                "the ratio upside down: divide the measured rate by the chance rate.",
                lambda nxt, top: float(_chance(nxt, top) / (nxt == top).double().mean()),
            ),
        ),
    ),
    Exercise(
        "slots_needed",
        1,
        "slots_needed(n_pairs, n_values, d, d_out, bits_per_weight) -> int",
        "The fewest slots m of a key-value layer (keys in R^d, values in R^d_out) that can store "
        "n_pairs associations, each naming one of n_values values, if the layer stores "
        "bits_per_weight bits in each of its weights.",
        _slots_needed,
        _slots_cases,
        (
            Mistake(
                "one pair per slot: a slot is not a pigeon-hole; which slots fire, and how "
                "strongly, is a code shared by all the pairs, and the chapter measured capacity "
                "per weight.",
                lambda n, k, d, d_out, b: n,
            ),
            Mistake(
                "n_values bits per association: naming one of n_values values takes "
                "log2(n_values) bits.",
                lambda n, k, d, d_out, b: math.ceil(n * k / (b * (d + d_out))),
            ),
            Mistake(
                "only the values' weights counted: every slot brings d key weights as well as "
                "d_out value weights.",
                lambda n, k, d, d_out, b: math.ceil(n * math.log2(k) / (b * d_out)),
            ),
            Mistake(
                "whole bits per association: naming one of n_values values carries log2(n_values) "
                "bits, a fraction in general; rounding it up for every pair overcounts, since the "
                "pairs share the layer's weights and their bits add up before any rounding.",
                lambda n, k, d, d_out, b: math.ceil(
                    n * math.ceil(math.log2(k)) / (b * (d + d_out))
                ),
            ),
            Mistake(
                "rounded down: the slots must hold at least all the bits, so round up.",
                lambda n, k, d, d_out, b: math.floor(n * math.log2(k) / (b * (d + d_out))),
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
