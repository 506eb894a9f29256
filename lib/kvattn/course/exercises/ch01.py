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


def _slot_sizes(x, K, V):
    """How much each slot writes for each token: relu(x·k_j) ‖v_j‖, shape (..., m)."""
    return F.relu(x @ K.T) * V.norm(dim=-1)


def _read_top(rank_by):
    """The read-out of the n slots that ``rank_by(x, K, V)`` (shape (..., m)) ranks highest."""

    def read(x, K, V, n):
        kept = rank_by(x, K, V).topk(n, dim=-1).indices
        mask = torch.zeros(*x.shape[:-1], K.shape[0], dtype=x.dtype).scatter(-1, kept, 1.0)
        return (F.relu(x @ K.T) * mask) @ V

    return read


def _strongest_cases(gen):
    d, m = 6, 12

    def values(*shape):  # values of very different lengths, as in a trained layer
        return randn(gen, *shape) * torch.exp(randn(gen, shape[0], 1))

    return [
        Case("random, 5 tokens, n = 3", (randn(gen, 5, d), randn(gen, m, d), values(m, 4), 3)),
        Case("one token, n = 1", (randn(gen, 1, d), randn(gen, m, d), values(m, d), 1)),
        Case("batch axis, n = 4", (randn(gen, 2, 3, d), randn(gen, m, d), values(m, 2), 4)),
        Case("n = m: the whole layer", (randn(gen, 4, d), randn(gen, m, d), values(m, 3), m)),
        Case(
            "fewer slots fire than n",
            (randn(gen, 3, d).abs(), -randn(gen, m, d).abs(), values(m, 3), 5),
        ),
    ]


def _write_values(X, Y):
    return torch.linalg.solve(F.relu(X @ X.T), Y)


def _write_cases(gen):
    def unit(n, d):
        x = randn(gen, n, d)
        return x / x.norm(dim=-1, keepdim=True)

    return [
        Case("6 keys in R^8, d_out = 3", (unit(6, 8), randn(gen, 6, 3))),
        Case("more keys than dimensions: 12 keys in R^5", (unit(12, 5), randn(gen, 12, 4))),
        Case("keys of different lengths", (randn(gen, 5, 6) * 3, randn(gen, 5, 2))),
        Case("one key", (unit(1, 4), randn(gen, 1, 3))),
        Case(
            "orthonormal keys",
            (torch.linalg.qr(randn(gen, 6, 4))[0].T.contiguous(), randn(gen, 4, 3)),
        ),
    ]


def _fold_cases(gen):
    d, m = 5, 8
    gain = torch.exp(randn(gen, d) / 2)
    return [
        Case("random non-symmetric A, c ≠ 0", (randn(gen, m, d), randn(gen, d, d), randn(gen, d))),
        Case(
            "a LayerNorm's gain and shift: A = diag(γ), c = β",
            (randn(gen, m, d), torch.diag(gain), randn(gen, d)),
        ),
        Case(
            "a global query: c = 0",
            (randn(gen, m, d), randn(gen, d, d), torch.zeros(d, dtype=torch.float64)),
        ),
        Case("one slot", (randn(gen, 1, d), randn(gen, d, d), randn(gen, d))),
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
        "strongest_slots",
        1,
        "strongest_slots(x, K, V, n) -> Tensor",
        "Read a key-value memory relu(x Kᵀ) V through only the n slots that write the most for "
        "each token: slot j writes relu(x·k_j) v_j, and its size is the norm of that vector. "
        "x (..., d), keys K (m, d), values V (m, d_out), 1 ≤ n ≤ m; returns (..., d_out), the sum "
        "of the n largest contributions of each token.",
        _read_top(_slot_sizes),
        _strongest_cases,
        (
            Mistake(
                "slots ranked by their memory coefficient relu(x·k_j) alone: a slot writes "
                "relu(x·k_j) v_j, so a slot that fires weakly but holds a long value can write "
                "more than one that fires hard with a short value. Rank by relu(x·k_j) ‖v_j‖.",
                _read_top(lambda x, K, V: F.relu(x @ K.T)),
            ),
            Mistake(
                "slots ranked by |x·k_j|: a key that points away from the token has a large "
                "|x·k_j| but relu silences it, so it writes nothing and takes the place of a slot "
                "that does.",
                _read_top(lambda x, K, V: (x @ K.T).abs() * V.norm(dim=-1)),
            ),
            Mistake(
                "slots ranked by the length of their values alone: which slots write depends on "
                "the token, through relu(x·k_j); a long value whose key is silent writes nothing.",
                _read_top(lambda x, K, V: V.norm(dim=-1).expand(*x.shape[:-1], -1)),
            ),
            Mistake(
                "the n slots that write the least: keep the largest contributions.",
                _read_top(lambda x, K, V: -_slot_sizes(x, K, V)),
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
        "write_values",
        1,
        "write_values(X, Y) -> Tensor",
        "Write a memory: N stored inputs X (N, d) become the keys of an N-slot ReLU key-value "
        "layer (K = X). Return the values V (N, d_out) for which the layer reads every stored "
        "input back as its target exactly: relu(X Xᵀ) V = Y, for targets Y (N, d_out).",
        _write_values,
        _write_cases,
        (
            Mistake(
                "V = Y, each slot writing its own target: reading key i fires every slot whose "
                "key is not at more than 90° from it, so the read-out of x_i is "
                "Σ_j relu(x_i·x_j) v_j, not v_i. The values must undo that crosstalk: solve "
                "relu(X Xᵀ) V = Y.",
                lambda X, Y: Y.clone(),
            ),
            Mistake(
                "V solves (X Xᵀ) V = Y, without the relu: the layer's coefficients are "
                "relu(x_i·x_j), and the negative overlaps are silenced, not subtracted.",
                lambda X, Y: torch.linalg.lstsq(X @ X.T, Y).solution,
            ),
            Mistake(
                "V = relu(X Xᵀ) Y: that reads the targets through the memory once more; the "
                "values are what relu(X Xᵀ) must turn into Y, so solve for them.",
                lambda X, Y: F.relu(X @ X.T) @ Y,
            ),
            Mistake(
                "keys normalised inside the read: the stored inputs are the keys as they are, "
                "and an input read back is x_i itself, with its length.",
                lambda X, Y: _write_values(X / X.norm(dim=-1, keepdim=True), Y),
            ),
        ),
    ),
    Exercise(
        "fold_affine",
        1,
        "fold_affine(K, A, c) -> tuple[Tensor, Tensor]",
        "A key-value layer relu((x A + c) Kᵀ) V reads its tokens through one affine map shared by "
        "all slots (a LayerNorm's gain and shift A = diag(γ), c = β; a global query A = Q, c = 0). "
        "Return the keys K' (m, d) and per-slot thresholds b (m,) of the same layer written "
        "relu(x K'ᵀ + b) V. K (m, d), A (d, d), c (d,).",
        lambda K, A, c: (K @ A.T, K @ c),
        _fold_cases,
        (
            Mistake(
                "keys K A: slot j's score is (x A)·k_j = x·(k_j Aᵀ), so with keys as rows "
                "K' = K Aᵀ; the two differ unless A is symmetric (a LayerNorm's diagonal gain "
                "is, a query matrix is not).",
                lambda K, A, c: (K @ A, K @ c),
            ),
            Mistake(
                "thresholds from the new keys, K' c: the shift c is added after A, so it meets "
                "the original key: c·k_j.",
                lambda K, A, c: (K @ A.T, K @ A.T @ c),
            ),
            Mistake(
                "no thresholds: the shift c does not vanish; it becomes a threshold c·k_j of its "
                "own for every slot, a bias the layer without c does not have.",
                lambda K, A, c: (K @ A.T, torch.zeros(K.shape[0], dtype=K.dtype)),
            ),
        ),
        outputs=("keys K'", "thresholds b"),
    ),
)
