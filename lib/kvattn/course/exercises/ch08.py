"""Exercises of chapter 8, Training small PLDR-LLMs: cases, references, mistakes."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ... import config, losses, pldr
from ._checker import Case, Exercise, Mistake, randn, register


def _ce_cases(gen):
    V = 7
    t1 = torch.randint(1, V, (2, 5), generator=gen)
    t2 = t1.clone()
    t2[0, 3:] = 0
    t2[1, 4] = 0
    return [
        Case("no padding", (randn(gen, 2, 5, V), t1, 0)),
        Case("padded targets", (randn(gen, 2, 5, V), t2, 0)),
        Case(
            "pad id 3",
            (
                randn(gen, 2, 5, V),
                torch.where(t1 == 3, 4, t1).index_fill(1, torch.tensor([4]), 3),
                3,
            ),
        ),
    ]


def _ce(logits, targets, pad_id):
    return float(losses.lm_cross_entropy(logits, targets, pad_id))


def _tiny_model(gen: torch.Generator, *, block_density: bool, seed: int) -> pldr.DecoderLM:
    """A seeded tiny PLDR-LLM (block density) or GPT in float64. The PLDR-LLM gets exponents P
    of order 1, so that its G_LM, and with it the full-pass loss, clearly depends on later
    tokens."""
    cfg = config.PLDRConfig(
        vocab_size=_V,
        hidden_size=16,
        num_attention_heads=2,
        num_hidden_layers=2,
        num_reslayerA=1,
        num_denseA=1,
        max_position_embeddings=16,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = (pldr.PLDRLLM if block_density else pldr.GPT)(cfg).double().eval()
    if block_density:
        with torch.no_grad():
            for layer in model.decoder.dec_layers:
                P = layer.mha1.plgatt_layer.P
                P.copy_(randn(gen, *P.shape) * 0.5)
    return model


def _tiny_lm(gen: torch.Generator, *, block_density: bool, seed: int):
    """:func:`_tiny_model` as the function ``ids [B, T] -> logits [B, T, V]``: a function, not
    the module, because the checker hands every case fresh copies of its inputs and a function
    is passed as it is."""
    model = _tiny_model(gen, block_density=block_density, seed=seed)

    @torch.no_grad()
    def logits(ids):
        return model(ids).logits

    logits.__name__ = "a block-density PLDR-LLM" if block_density else "a GPT"
    return logits


_V = 23


def _blocks(gen, B, S):
    """B blocks of S inputs and one last target: ids [B, S + 1] in [1, V) (0 is the pad id)."""
    return torch.randint(1, _V, (B, S + 1), generator=gen)


def _generation_cases(gen):
    return [
        Case(
            "a block-density PLDR-LLM, 2 blocks of 6",
            (_tiny_lm(gen, block_density=True, seed=0), _blocks(gen, 2, 6)),
        ),
        Case(
            "a GPT, 2 blocks of 6", (_tiny_lm(gen, block_density=False, seed=1), _blocks(gen, 2, 6))
        ),
        Case(
            "another PLDR-LLM, 3 blocks of 9",
            (_tiny_lm(gen, block_density=True, seed=2), _blocks(gen, 3, 9)),
        ),
        Case(
            "one block of one target",
            (_tiny_lm(gen, block_density=True, seed=3), _blocks(gen, 1, 1)),
        ),
    ]


def _token_losses(logits, targets):
    """Cross-entropy of every target, [B, S] (no padding in these cases)."""
    return F.cross_entropy(logits.transpose(1, 2), targets, reduction="none")


def _generation_logits(lm, blocks, extra: int = 0):
    """Row t: the last logits of lm on blocks[:, :t + 1 + extra] (extra = 1 sees the target)."""
    S = blocks.shape[1] - 1
    return torch.stack([lm(blocks[:, : t + 1 + extra])[:, -1] for t in range(S)], dim=1)


def _generation_loss(lm, blocks, how: str = ""):
    targets = blocks[:, 1:]
    if how == "full pass":
        return float(_token_losses(lm(blocks[:, :-1]), targets).mean())
    if how == "every position":
        S = targets.shape[1]
        losses_ = [_token_losses(lm(blocks[:, : t + 1]), targets[:, : t + 1]) for t in range(S)]
        return float(torch.cat(losses_, dim=1).mean())
    extra = 1 if how == "sees the target" else 0
    return float(_token_losses(_generation_logits(lm, blocks, extra), targets).mean())


def _gap_by_position(lm, blocks, how: str = ""):
    targets = blocks[:, 1:]
    full = lm(blocks)[:, :-1] if how == "whole block" else lm(blocks[:, :-1])
    gap = _token_losses(full, targets) - _token_losses(_generation_logits(lm, blocks), targets)
    if how == "reversed":
        return -gap.mean(0)
    return gap.sum(0) if how == "summed" else gap.mean(0)


register(
    Exercise(
        "masked_cross_entropy",
        8,
        "masked_cross_entropy(logits, targets, pad_id) -> float",
        "Mean next-token cross-entropy (nats) over the targets that are not pad_id; logits "
        "(B, S, V), targets (B, S) integer ids.",
        _ce,
        _ce_cases,
        (
            Mistake(
                "pad targets are counted; skip them (ignore_index=pad_id).",
                lambda lo, t, p: float(F.cross_entropy(lo.flatten(0, 1), t.flatten())),
            ),
            Mistake(
                "summed, not averaged, over the non-pad targets.",
                lambda lo, t, p: float(
                    F.cross_entropy(lo.flatten(0, 1), t.flatten(), ignore_index=p, reduction="sum")
                ),
            ),
        ),
    ),
    Exercise(
        "generation_loss",
        8,
        "generation_loss(lm, blocks) -> float",
        "Mean next-token cross-entropy (nats) when every position sees only its prefix: lm(ids) "
        "maps token ids (B, T) to logits (B, T, V); blocks (B, S + 1) hold the inputs "
        "blocks[:, :-1] and the targets blocks[:, 1:]; target t is predicted from the last "
        "logits of lm(blocks[:, :t + 1]).",
        _generation_loss,
        _generation_cases,
        (
            Mistake(
                "this is the full-pass (teacher-forced) loss, the one training reports: in one "
                "pass over the block every position's G_LM is built from the queries of the "
                "whole block, later tokens included. Run lm on each prefix blocks[:, :t + 1] "
                "and keep its last logits.",
                lambda lm, b: _generation_loss(lm, b, "full pass"),
            ),
            Mistake(
                "you averaged the losses of every position of each prefix's pass; only the last "
                "position of lm(blocks[:, :t + 1]) is what a decoder computes next.",
                lambda lm, b: _generation_loss(lm, b, "every position"),
            ),
            Mistake(
                "the prefix blocks[:, :t + 2] already holds the target blocks[:, t + 1], and its "
                "last logits predict the token after it; the prefix for target t is "
                "blocks[:, :t + 1].",
                lambda lm, b: _generation_loss(lm, b, "sees the target"),
            ),
        ),
        rtol=1e-9,
    ),
    Exercise(
        "gap_by_position",
        8,
        "gap_by_position(lm, blocks) -> Tensor",
        "For each target position t, the mean over the blocks of the full-pass cross-entropy "
        "minus the generation-mode one (nats), shape (S,): full pass lm(blocks[:, :-1]), "
        "generation mode the last logits of lm(blocks[:, :t + 1]); lm and blocks as for "
        "generation_loss.",
        _gap_by_position,
        _generation_cases,
        (
            Mistake(
                "generation minus full pass: the gap is the full-pass loss minus the "
                "generation-mode one (negative where the full pass flatters the model).",
                lambda lm, b: _gap_by_position(lm, b, "reversed"),
            ),
            Mistake(
                "the full pass runs on the inputs blocks[:, :-1], as in training; with the last "
                "target as an input too, every position's density also holds the query of a "
                "token that the training pass never sees.",
                lambda lm, b: _gap_by_position(lm, b, "whole block"),
            ),
            Mistake(
                "summed over the blocks; take their mean.",
                lambda lm, b: _gap_by_position(lm, b, "summed"),
            ),
        ),
        atol=1e-12,
    ),
)
