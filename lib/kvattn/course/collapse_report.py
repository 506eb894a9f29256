"""What Part II found: one table, the same for chapters 9 and 11.

Each row is a model; each column one of the course's measures of inference collapse, taken on
the same held-out code for every model (each model with its own tokenizer):

* ``order_rms``: the course's order parameter of G_LM, the RMS-relative form
  (:func:`~kvattn.diagnostics.measures.order_parameter` with ``"rms"``), of every snippet
  against the first, averaged over the snippets, in the least collapsed layer (collapse needs
  every layer);
* ``delta_loss`` and its 95 % interval over donors: the frozen-G Δ loss
  (:func:`~kvattn.diagnostics.collapse.g_substitution`), nats/token;
* ``sigma_ratio``: σ2/σ1 of the metric learner's output A, the median over snippets and heads,
  in the least collapsed layer (0 for a rank-1 A);
* ``gamma``: mean ``|γ|`` of each layer's last metric-learner LayerNorm
  (:func:`~kvattn.diagnostics.measures.metric_norm`; 0 is chapter 9's model flattened by hand);
* ``kvg_same``: on how many prompts greedy decoding with the KV + G cache gives exactly the
  tokens of decoding without a cache.

:data:`PUBLISHED_110M` holds the figures the authors' audit reports for their collapsed
PLDR-LLM-v51-SOC-110M-5 [gokden2026mathfoundations], ``None`` where it reports none.
:func:`format_findings` prints the rows at most :data:`MAX_WIDTH` characters a line.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch.nn import functional

from .. import diagnostics
from .._checks import check_int
from ..ablations import constant_g_from, generation_mode_logits
from ..data import blocks
from ..pldr import PLDRLLM
from ..readings import check_finding
from ..stats import t_interval
from .env import pick

#: The widest line :func:`format_findings` prints (the text column of the book at 1280 px).
MAX_WIDTH = 80
#: Characters of held-out text per snippet.
SNIPPET_CHARS = 300
#: Tokens of each decoding prompt (the start of a snippet).
PROMPT_TOKENS = 32


@dataclass(frozen=True)
class Finding:
    """One row of the table (see the module's docstring for each measure). ``None``: not
    measured (for a published model: not reported). ``delta_interval``: the 95 % Student-t
    interval of the mean Δ loss over the donors; ``kvg_same``: (prompts decoded alike,
    prompts tried); ``source``: "measured" or the work the figures come from, in words."""

    label: str
    order_rms: float | None
    delta_loss: float | None
    delta_interval: tuple[float, float] | None
    sigma_ratio: float | None
    gamma: tuple[float, ...] | None
    kvg_same: tuple[int, int] | None
    source: str = "measured"


#: The collapsed 110M model as the authors' audit measured it [gokden2026mathfoundations]. The
#: RMS order parameter of G_LM 0 (two sampled continuations of five prompts), median σ2/σ1 of A
#: 8.7e-17 over 560 head-prompt pairs, and G_LM cached against recomputed over greedy decoding
#: of four prompts with no greedy token changed. No frozen-G Δ loss and no LayerNorm scale are
#: reported.
PUBLISHED_110M = Finding(
    "published 110M",
    0.0,
    None,
    None,
    8.7e-17,
    None,
    (4, 4),
    "the authors' audit (PLDR-LLM Math Foundations)",
)


def _snippets(text: str, n: int, seed: int) -> list[str]:
    gen = torch.Generator().manual_seed(seed)
    starts = torch.randint(0, len(text) - SNIPPET_CHARS, (n,), generator=gen).tolist()
    return [text[s : s + SNIPPET_CHARS] for s in starts]


@torch.no_grad()
def measure_finding(
    label: str,
    model: PLDRLLM,
    tokenizer,
    text: str,
    *,
    snippets: int | None = None,
    eval_blocks: int | None = None,
    new_tokens: int | None = None,
    seed: int = 0,
) -> Finding:
    """Measure one row of the table on ``text`` (held-out text the model never trained on).

    ``snippets`` (default 12, 4 in fast mode) random pieces of :data:`SNIPPET_CHARS` characters
    of ``text`` give the order parameter and σ2/σ1 (each against the first); all but the first
    are the donors of the frozen-G Δ loss, scored on the first ``eval_blocks`` (default 16, 4
    in fast mode) blocks of the whole of ``text``; the first :data:`PROMPT_TOKENS` tokens of
    each snippet are the prompts continued greedily by ``new_tokens`` (default 32, 12 in fast
    mode) tokens with ``cache="none"`` and ``cache="kv+g"``. ``seed`` fixes the snippets.

    Raises
    ------
    TypeError
        ``model`` is not a PLGA :class:`kvattn.pldr.PLDRLLM` (a constant-G model has no A),
        ``text`` not a str.
    ValueError
        A size not an int ≥ its minimum (3 snippets: a Δ-loss interval needs two donors;
        1 block; 1 token), ``text`` too short for the snippets or one block, or a snippet
        shorter than :data:`PROMPT_TOKENS` tokens.
    """
    if not isinstance(model, PLDRLLM) or model.config.custom_G_type is not None:
        raise TypeError(f"model must be a PLGA PLDRLLM, got {type(model).__name__}")
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    snippets = pick(12, 4) if snippets is None else snippets
    eval_blocks = pick(16, 4) if eval_blocks is None else eval_blocks
    new_tokens = pick(32, 12) if new_tokens is None else new_tokens
    check_int("snippets", snippets, low=3)
    check_int("eval_blocks", eval_blocks, low=1)
    check_int("new_tokens", new_tokens, low=1)
    if len(text) <= SNIPPET_CHARS:
        raise ValueError(f"text needs more than {SNIPPET_CHARS} characters, got {len(text)}")
    cfg, device = model.config, next(model.parameters()).device
    ids = [
        torch.tensor([tokenizer.encode(t)[: cfg.max_position_embeddings]], device=device)
        for t in _snippets(text, snippets, seed)
    ]
    if min(i.shape[1] for i in ids) < PROMPT_TOKENS:
        raise ValueError(f"a snippet is shorter than {PROMPT_TOKENS} tokens")
    held = blocks(torch.tensor(tokenizer.encode(text)), cfg.max_position_embeddings)
    if len(held) < eval_blocks:
        raise ValueError(f"text gives {len(held)} blocks, fewer than eval_blocks={eval_blocks}")
    outs = diagnostics.deductive_tensors(model, ids)
    orders, ratios = [], []
    for li in range(cfg.num_hidden_layers):
        G = [o[li].G_LM for o in outs]
        orders.append(
            sum(diagnostics.order_parameter(G[0], g, "rms") for g in G[1:]) / (len(G) - 1)
        )
        A = torch.stack([o[li].A[0] for o in outs])  # [snippets, heads, d_k, d_k]
        ratios.append(float(diagnostics.rank_audit(A, head_dim=1).sigma_ratio.median()))
    sub = diagnostics.g_substitution(model, held[:eval_blocks].to(device), ids[1:])
    deltas = sub.delta_loss
    mean, n = float(deltas.mean()), len(deltas)
    interval = t_interval(mean, float(deltas.std()) / math.sqrt(n), n)
    same = sum(
        torch.equal(
            model.generate(p[:, :PROMPT_TOKENS], new_tokens, cache="none"),
            model.generate(p[:, :PROMPT_TOKENS], new_tokens, cache="kv+g"),
        )
        for p in ids
    )
    gamma = tuple(float(g) for g in diagnostics.metric_norm(model).scale)
    return Finding(label, max(orders), mean, interval, max(ratios), gamma, (same, len(ids)))


def _number(value: float | None, width: int) -> str:
    text = "—" if value is None else ("0" if value == 0 else f"{value:.1e}")
    text = f"{value:.0e}" if len(text) > width else text  # e.g. 1.0e+100: one digit fewer
    return f"{text:>{width}s}"


def _delta(f: Finding) -> str:
    if f.delta_loss is None or f.delta_interval is None:
        return f"{'not reported':>18s}"
    half = (f.delta_interval[1] - f.delta_interval[0]) / 2
    text = f"{f.delta_loss:+.1e} ± {half:.1e}"
    text = text if len(text) <= 18 else f"{f.delta_loss:+.0e} ± {half:.0e}"
    return f"{text:>18s}"


def _study(f: Finding) -> str:
    """Whether the row meets the training-dynamics study's criterion (RMS order parameter of
    G_LM below 1e-2 in every layer; ``order_rms`` is the least collapsed layer's)."""
    if f.order_rms is None:
        return "—"
    return (
        "met"
        if diagnostics.collapse_reading({"G_order_rms": [f.order_rms]}, "study").verdict
        else "not"
    )


def _gamma(f: Finding) -> str:
    """Mean ``|γ|`` per layer in 14 characters; where the layers do not fit (the published
    model's five), the smallest and largest over them and the count of layers."""
    if f.gamma is None:
        return f"{'not reported':>14s}"
    text = ", ".join(f"{g:.2g}" for g in f.gamma)
    lo, hi, n = min(f.gamma), max(f.gamma), len(f.gamma)
    for fit in (text, f"{lo:.2g}–{hi:.2g} ({n})"):
        if len(fit) <= 14:
            return f"{fit:>14s}"
    return f"{f'{lo:.0e}–{hi:.0e}':>14s}"  # |γ| ≥ 0 (checked): at most 11 characters


def format_findings(rows: Sequence[Finding]) -> str:
    """The table of ``rows``, one model a line, at most :data:`MAX_WIDTH` characters a line:
    the RMS order parameter of G_LM, whether it meets the study's criterion
    (``COLLAPSE_CRITERIA["study"]``, "met" or "not"), the frozen-G Δ loss ± the half-width of
    its 95 % interval (nats/token), σ2/σ1 of A, mean ``|γ|`` per layer (where the layers do not
    fit, as for a 5-layer model: smallest–largest and the count) and the KV + G prompts
    decoded as without a cache. A row from a publication is marked ``*``; the footnote names its
    source.

    Raises
    ------
    TypeError
        ``rows`` is not a sequence of :class:`Finding`.
    ValueError
        No rows, a label longer than 16 characters, or a reading that is NaN, infinite,
        negative where it is a size (order parameter, σ2/σ1, ``|γ|``), an interval whose low end
        is above its high end, or more prompts decoded alike than tried (naming the row).
    """
    if not isinstance(rows, Sequence) or not all(isinstance(r, Finding) for r in rows):
        raise TypeError("rows must be a sequence of Finding")
    if not rows:
        raise ValueError("need at least one row")
    long = [r.label for r in rows if len(r.label) > 16]
    if long:
        raise ValueError(f"labels longer than 16 characters: {long}")
    for r in rows:
        check_finding(r)
    lines = [
        f"{'':16s} {'order':>7s} {'study':>5s} {'frozen-G Δ loss':>18s} {'σ2/σ1':>7s} "
        f"{'mean |γ|':>14s} {'KV+G':>5s}",
        f"{'model':16s} {'(RMS)':>7s} {'crit.':>5s} {'nats/token, 95%':>18s} {'of A':>7s} "
        f"{'layer 0, 1…':>14s} {'=none':>5s}",
    ]
    for r in rows:
        kvg = "—" if r.kvg_same is None else f"{r.kvg_same[0]}/{r.kvg_same[1]}"
        mark = "*" if r.source != "measured" else ""
        lines.append(
            f"{r.label + mark:16s} {_number(r.order_rms, 7)} {_study(r):>5s} {_delta(r)} "
            f"{_number(r.sigma_ratio, 7)} {_gamma(r)} {kvg:>5s}"
        )
    for source in dict.fromkeys(r.source for r in rows if r.source != "measured"):
        lines.append(f"* the figures reported by {source}")
    return "\n".join(lines)


def format_criteria() -> str:
    """The course's collapse criteria (:data:`kvattn.diagnostics.criteria.COLLAPSE_CRITERIA`),
    one a line of at most :data:`MAX_WIDTH` characters: name, the measures that must each be
    below the threshold, the threshold, the rule's count of layers ("every" or "any") and the
    source (a bib key, or "ours")."""
    lines = [
        f"{'criterion':10s} {'measures, each below the threshold':34s} {'below':>6s} layers  source"
    ]
    for row in diagnostics.collapse_criteria():
        lines.append(
            f"{row['name']:10s} {row['measures']:34s} {row['below']:6g} {row['layers']:7s} "
            f"{row['source']}"
        )
    return "\n".join(lines)


@dataclass(frozen=True)
class FrozenGByPosition:
    """The frozen-G Δ loss resolved by block and by position (nats/token): ``per_block``, CPU
    float64 ``[B]``, each block's mean over its positions and the donors; ``early`` and
    ``rest``, the mean over the first ``early`` positions of every block and over the others."""

    per_block: torch.Tensor
    early: float
    rest: float


@torch.no_grad()
def frozen_g_by_position(
    model: PLDRLLM, ids: torch.Tensor, donors: list[torch.Tensor], early: int = 16
) -> FrozenGByPosition:
    """Where the frozen-G Δ loss of :func:`~kvattn.diagnostics.collapse.g_substitution` comes
    from: the next-token loss of the constant-G model built from each donor's G_LM
    (:func:`kvattn.ablations.constant_g_from`) minus the model's own in generation mode
    (:func:`kvattn.ablations.generation_mode_logits`, each position seeing its prefix), token by
    token on ``ids`` (int64 ``[B, S + 1]``, no pad targets), averaged over the donors (each
    ``[1, S_d]``). Its grand mean is ``g_substitution(model, ids, donors).delta_loss.mean()``.
    The global random state is left as it was (building a constant-G model draws weights).

    Raises
    ------
    TypeError
        ``model`` not a PLGA :class:`kvattn.pldr.PLDRLLM`, ``ids`` not an int64 tensor.
    ValueError
        ``ids`` not ``[B, S + 1]`` with S > ``early``; ``early`` not an int ≥ 1; no donors, or
        a donor not of shape ``[1, S_d]``.
    """
    if not isinstance(model, PLDRLLM) or model.config.custom_G_type is not None:
        raise TypeError(f"model must be a PLGA PLDRLLM, got {type(model).__name__}")
    if not isinstance(ids, torch.Tensor) or ids.dtype != torch.int64:
        raise TypeError("ids must be an int64 tensor [B, S + 1]")
    check_int("early", early, low=1)
    if ids.ndim != 2 or ids.shape[1] - 1 <= early:
        raise ValueError(f"ids must be [B, S + 1] with S > early={early}, got {tuple(ids.shape)}")
    if not donors or any(d.ndim != 2 or d.shape[0] != 1 for d in donors):
        raise ValueError("donors must be a non-empty list of [1, S_d] tensors")

    def per_token(logits: torch.Tensor) -> torch.Tensor:
        flat = functional.cross_entropy(
            logits.flatten(0, 1), ids[:, 1:].flatten(), reduction="none"
        )
        return flat.view(len(ids), -1)

    with torch.random.fork_rng(devices=[]):
        own = per_token(generation_mode_logits(model, ids))
        deltas = []
        for d in donors:
            G = [o.G_LM[0] for o in model(d, output_pldr_attentions=True).pldr_attentions]
            deltas.append(per_token(constant_g_from(model, G)(ids[:, :-1]).logits) - own)
    delta = diagnostics.cpu64(torch.stack(deltas).mean(0))  # [blocks, positions]
    return FrozenGByPosition(
        delta.mean(1), float(delta[:, :early].mean()), float(delta[:, early:].mean())
    )
