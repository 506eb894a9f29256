"""Reading a trained feed-forward layer as a key-value memory (Geva et al. 2021).

* A *key* k_j is a pattern detector: its memory coefficient σ(x_t·k_j) at each prefix t of real
  text ranks the prefixes; the top ones are the key's *trigger examples*.
* A *value* v_j, read out through the output head, is a distribution over the next token.
* *Agreement*: how often a value's top token is the token that actually followed its key's top
  trigger example — compared with the same statistic for randomly re-paired keys and values.

All functions take a :class:`kvattn.lm.TinyLM` and a 1-D stream of token ids.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ._checks import check_int
from .data import TokenData
from .lm import TinyLM
from .mlp import KeyValueMLP

Tensor = torch.Tensor


@dataclass(frozen=True)
class Triggers:
    """Top trigger examples of every slot of one layer.

    ``coefficient[j, i]`` is the i-th largest memory coefficient of slot j over the scanned
    prefixes; ``position[j, i]`` the index in the scanned stream of that prefix's last token (so
    ``stream[position + 1]`` is the token that followed). Shapes ``(n_slots, top_k)``.
    ``layer`` is the layer scanned (None when unknown, for triggers built by hand).
    """

    coefficient: Tensor
    position: Tensor
    stream: Tensor
    layer: int | None = None


@torch.no_grad()
def top_triggers(
    model: TinyLM,
    ids: Tensor,
    layer: int,
    top_k: int = 10,
    max_windows: int = 400,
    batch_size: int = 32,
) -> Triggers:
    """Scan consecutive windows of ``ids`` and keep, for every slot of ``layer``, the ``top_k``
    prefixes with the largest memory coefficient.

    Each window has the model's block size; a prefix sees only its own window (the model's
    context). The last position of each window is skipped, so every prefix has a next token.
    """
    if not 0 <= layer < len(model.blocks):
        raise ValueError(f"layer must lie in [0, {len(model.blocks)}), got {layer}")
    T = model.cfg.block_size
    n = min(max_windows, (len(ids) - 1) // T)
    if n < 1:
        raise ValueError(f"need more than {T + 1} ids, got {len(ids)}")
    stream = ids[: n * T + 1]
    device = next(model.parameters()).device
    best_c = best_p = None
    for start in range(0, n, batch_size):
        stop = min(n, start + batch_size)
        x = stream[start * T : stop * T].view(stop - start, T).to(device)
        coeff = model.memory_coefficients(x, layer)[:, :-1]  # (b, T-1, m)
        pos = (
            torch.arange(start, stop, device=device)[:, None] * T
            + torch.arange(T - 1, device=device)[None, :]
        )  # (b, T-1)
        c = coeff.reshape(-1, coeff.shape[-1]).T  # (m, b*(T-1))
        p = pos.reshape(-1).expand_as(c)
        if best_c is not None:
            c, p = torch.cat([best_c, c], 1), torch.cat([best_p, p], 1)
        best_c, idx = c.topk(min(top_k, c.shape[1]), dim=1)
        best_p = p.gather(1, idx)
    return Triggers(best_c.cpu(), best_p.cpu(), stream, layer)


@torch.no_grad()
def value_distributions(model: TinyLM, layer: int, seen: Tensor | None = None) -> Tensor:
    """Next-token distribution of every value of ``layer``: softmax(v_j W_Uᵀ).

    ``seen`` (bool, shape ``(vocab,)``) restricts the distribution to tokens that occur in the
    training text: a token the model never saw keeps its random output-embedding row, which can
    rank high by chance (the 256 byte-fallback pieces of a small SentencePiece model, for
    example). Build it with :func:`seen_tokens`. Shape ``(n_slots, vocab)``, on the CPU.
    """
    if not 0 <= layer < len(model.blocks):
        raise ValueError(f"layer must lie in [0, {len(model.blocks)}), got {layer}")
    logits = model.value_logits(layer).cpu()
    if seen is not None:
        if seen.shape != logits.shape[-1:] or seen.dtype != torch.bool:
            raise ValueError(f"seen must be a bool tensor of shape ({logits.shape[-1]},)")
        logits = logits.masked_fill(~seen, float("-inf"))
    return torch.softmax(logits, dim=-1)


def seen_tokens(ids: Tensor, vocab_size: int) -> Tensor:
    """Which of ``vocab_size`` token ids occur in the id stream ``ids`` (bool ``(vocab_size,)``)."""
    return torch.bincount(ids.flatten(), minlength=vocab_size)[:vocab_size] > 0


@dataclass(frozen=True)
class Agreement:
    """Agreement between values and their keys' trigger examples (Geva et al. 2021, §4).

    ``rate``: fraction of slots whose value's top token equals the token after the slot's top
    trigger; ``baseline``: the same with values paired with other slots' keys (mean over
    ``n_shuffles`` random pairings); ``rank``: for each slot, the rank (0 = top) of that next
    token in the value's distribution.
    """

    rate: float
    baseline: float
    rank: Tensor


def agreement(triggers: Triggers, values: Tensor, n_shuffles: int = 20, seed: int = 0) -> Agreement:
    """Compare each value's top token with the token following its key's top trigger example."""
    next_token = triggers.stream[triggers.position[:, 0] + 1]  # (m,)
    top_token = values.argmax(-1)
    rate = float((top_token == next_token).float().mean())
    gen = torch.Generator().manual_seed(seed)
    shuffled = [
        float(
            (top_token[torch.randperm(len(top_token), generator=gen)] == next_token).float().mean()
        )
        for _ in range(n_shuffles)
    ]
    target_p = values.gather(1, next_token[:, None])
    rank = (values > target_p).sum(1)
    return Agreement(rate, sum(shuffled) / n_shuffles, rank)


def pattern_consistency(triggers: Triggers) -> Tensor:
    """For each slot, the fraction of its top triggers that end in the slot's most common last
    token: 1 means a "shallow" key that fires on one token, low values a key that fires on a
    broader pattern. Shape ``(n_slots,)``."""
    last = triggers.stream[triggers.position]  # (m, top_k)
    counts = (last[:, :, None] == last[:, None, :]).sum(-1)  # (m, top_k)
    return counts.max(-1).values.float() / last.shape[1]


@dataclass(frozen=True)
class SlotReport:
    """What one memory slot stores: its top trigger examples and its value's top next tokens.

    ``triggers`` holds ``(context, last, next, coefficient)`` per example: the text before the
    prefix's last token (newlines shown as ⏎), that token and the token that actually followed
    (as SentencePiece pieces: ▁ marks a leading space, ``[END]`` ends a document), and the memory
    coefficient. ``value_tokens`` holds ``(token, lift)`` for the value's most likely next tokens,
    where lift = probability × the number of tokens the distribution can give (the vocabulary, or
    the seen tokens when :func:`value_distributions` was restricted to them): the factor by which
    the value raises the token above a uniform guess over the same tokens (small models have small
    values, so raw probabilities are all tiny).
    """

    layer: int
    slot: int
    triggers: list[tuple[str, str, str, float]]
    value_tokens: list[tuple[str, float]]


def slot_report(
    data: TokenData,
    triggers: Triggers,
    values: Tensor,
    layer: int,
    slot: int,
    n_triggers: int = 5,
    n_tokens: int = 8,
    context: int = 8,
) -> SlotReport:
    """Describe slot ``slot`` of ``layer`` (the compute function of the chapter's explorer).

    ``triggers`` and ``values`` are :func:`top_triggers` and :func:`value_distributions` of that
    layer; ``context`` is the number of tokens shown before each trigger's last token. At most
    ``n_triggers`` examples (as many as ``triggers`` holds) and ``n_tokens`` tokens are shown.

    Raises
    ------
    TypeError
        ``triggers`` is not a :class:`Triggers`, or ``values`` not a floating-point tensor.
    ValueError
        ``values`` is not ``(n_slots, V)`` with the triggers' ``n_slots``; ``layer``, ``slot``,
        ``n_triggers``, ``n_tokens`` or ``context`` is not an int ≥ 0 (a bool included);
        ``slot`` ≥ n_slots; ``n_tokens`` > V; ``layer`` is not the layer the triggers were
        computed for (when they record it). All before any work.
    """
    if not isinstance(triggers, Triggers):
        raise TypeError(
            f"triggers must be a Triggers (from top_triggers), got {type(triggers).__name__}"
        )
    if not isinstance(values, Tensor) or not values.is_floating_point():
        got = values.dtype if isinstance(values, Tensor) else type(values).__name__
        raise TypeError(f"values must be a floating-point tensor (n_slots, V), got {got}")
    n_slots = triggers.position.shape[0]
    if values.ndim != 2 or values.shape[0] != n_slots:
        raise ValueError(
            f"values must have shape ({n_slots}, V), the triggers' {n_slots} slots, got "
            f"{tuple(values.shape)}"
        )
    for name, value in (
        ("layer", layer),
        ("slot", slot),
        ("n_triggers", n_triggers),
        ("n_tokens", n_tokens),
        ("context", context),
    ):
        check_int(name, value, low=0)
    if slot >= n_slots:
        raise ValueError(f"slot must lie in [0, {n_slots}), got {slot}")
    if n_tokens > values.shape[1]:
        raise ValueError(
            f"n_tokens must be at most the vocabulary ({values.shape[1]}), got {n_tokens}"
        )
    if triggers.layer is not None and layer != triggers.layer:
        # the layer is only a label here: a wrong one would mislabel the report
        raise ValueError(
            f"layer {layer} is not the layer of the triggers ({triggers.layer}); pass the layer "
            "that top_triggers and value_distributions were given"
        )
    stream = triggers.stream
    examples = []
    for i in range(min(n_triggers, triggers.position.shape[1])):
        pos = int(triggers.position[slot, i])
        start = max(0, pos - context)
        examples.append(
            (
                data.decode(stream[start:pos]).replace("\n", "⏎"),
                data.pieces(stream[pos : pos + 1])[0],
                data.pieces(stream[pos + 1 : pos + 2])[0],
                float(triggers.coefficient[slot, i]),
            )
        )
    probs, ids = values[slot].topk(n_tokens)
    # uniform over the tokens the distribution can give (the seen ones, if values were restricted)
    support = int((values[slot] > 0).sum())
    tokens = [
        (data.pieces([int(t)])[0], float(p) * support) for p, t in zip(probs, ids, strict=True)
    ]
    return SlotReport(layer, slot, examples, tokens)


def lift_labels(lifts: list[float], max_decimals: int = 4) -> list[str]:
    """Each lift as "×1.27", with the fewest decimals (1 to ``max_decimals``) that tell the given
    lifts apart: a briefly trained model raises its top tokens by nearly equal factors, which one
    fixed precision would print as the same number.

    Raises ValueError for an empty list or ``max_decimals`` < 1.
    """
    if not lifts:
        raise ValueError("lifts is empty")
    if isinstance(max_decimals, bool) or not isinstance(max_decimals, int) or max_decimals < 1:
        raise ValueError(f"max_decimals must be an int >= 1, got {max_decimals!r}")
    distinct = len(set(lifts))
    decimals = next(
        (n for n in range(1, max_decimals + 1) if len({round(x, n) for x in lifts}) == distinct),
        max_decimals,
    )
    return [f"×{x:.{decimals}f}" for x in lifts]


def absorb_global_query(layer: KeyValueMLP, Q: Tensor) -> KeyValueMLP:
    """A key-value layer that computes σ((x Q) W_kᵀ) W_v without Q: its keys are k'_j = Q k_j.

    A single query matrix shared by all slots adds nothing: (xQ)·k_j = x·(Q k_j), so the keys
    become k'_j = Q k_j (course, chapter 1; x is a row vector, k_j a column vector stored as row j
    of ``W_k``). ``Q`` has shape ``(d_model, d_model)``; returns a new layer with
    ``W_k' = W_k Qᵀ``.
    """
    if not isinstance(layer, KeyValueMLP):
        raise TypeError(f"expected a KeyValueMLP (σ(x W_kᵀ) W_v), got {type(layer).__name__}")
    if Q.shape != (layer.d_model, layer.d_model):
        raise ValueError(
            f"Q must have shape ({layer.d_model}, {layer.d_model}), got {tuple(Q.shape)}"
        )
    with torch.random.fork_rng(devices=[]):  # the throw-away initial weights use no global RNG
        new = KeyValueMLP(layer.d_model, layer.n_slots, layer.d_out, act=layer.act)
    new = new.to(device=layer.W_k.device, dtype=layer.W_k.dtype)
    with torch.no_grad():
        new.W_k.copy_(layer.W_k @ Q.T)
        new.W_v.copy_(layer.W_v)
    return new
