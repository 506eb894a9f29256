"""Exercises of chapter 7, Power Law Graph Attention piece by piece: cases, references, mistakes."""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F

from .. import diagnostics, pldr
from ..checkpoint import load_pretrained
from ..data import shipped
from ..generate import load_tokenizer
from ._checker import Case, Exercise, Mistake, causal_mask, randn, register


def _density_cases(gen):
    return [
        Case("6 tokens", (randn(gen, 6, 4),)),
        Case("batch and heads", (randn(gen, 2, 3, 5, 4),)),
        Case("one token", (randn(gen, 1, 3),)),
    ]


def _iswiglu_cases(gen):
    return [
        Case("random", (randn(gen, 3, 4, 4) * 3,)),
        Case("zeros", (torch.zeros(2, 2, dtype=torch.float64),)),
        Case(
            "large |u| (no overflow)",
            (torch.tensor([-80.0, -30.0, 30.0, 80.0], dtype=torch.float64),),
        ),
    ]


def _power_law_cases(gen):
    def positive(*s):
        return randn(gen, *s).abs() + 0.1

    return [
        Case("one head", (positive(4, 4), randn(gen, 4, 4), randn(gen, 4, 4), randn(gen, 4, 4))),
        Case(
            "heads (H, d_k, d_k)",
            (positive(2, 3, 3), randn(gen, 2, 3, 3), randn(gen, 2, 3, 3), randn(gen, 2, 3, 3)),
        ),
        Case(
            "P = 1, a = I, b = 0 (G = A_LM)",
            (
                positive(3, 3),
                torch.ones(3, 3, dtype=torch.float64),
                torch.eye(3, dtype=torch.float64),
                torch.zeros(3, 3, dtype=torch.float64),
            ),
        ),
    ]


def _power_law(A_LM, P, a, b_a):
    return a @ A_LM.pow(P) + b_a


def _perron_cases(gen):
    return [
        Case("random positive 5×5", (randn(gen, 5, 5).abs() + 0.01,)),
        Case(
            "rank 1 (A = u vᵀ)",
            (torch.outer(randn(gen, 4).abs() + 0.1, randn(gen, 4).abs() + 0.1),),
        ),
        Case("all ones", (torch.ones(3, 3, dtype=torch.float64),)),
    ]


def _perron(A):
    lam, v = diagnostics.perron_frobenius(A, iterations=10_000, tol=1e-15)
    return float(lam), v


# The Part II capstone: one PLGA head from scratch, checked stage by stage against the shipped
# checkpoint's own deductive tensors.

_STAGES = ("A0", "A", "A_LM", "A_P", "G_LM", "E", "y")
_PROMPT = "for index, item in enumerate(items):\n    if item is None:\n        continue"


def _head_weights(attn: pldr.Attention, head: int) -> dict:
    """The weights one PLGA head uses, as plain tensors: the metric learner's (shared by the
    heads; nn.Linear layout, weight (out, in)) and the head's five power-law tensors."""

    def t(x):
        return x.detach().clone()

    def norm(layer):
        return {"weight": t(layer.weight), "bias": t(layer.bias)}

    def glu(block):
        return {
            f"{name}{i}": t(getattr(getattr(block, f"gluw{i}"), full))
            for i in (1, 2, 3)
            for name, full in (("w", "weight"), ("b", "bias"))
        }

    pg = attn.plgatt_layer
    return {
        "layernorm": norm(attn.layernorm1),
        "units": [
            {"glus": [glu(b) for b in unit.denseAs], "layernorm": norm(unit.layernormA)}
            for unit in attn.reslayerAs
        ],
        **{name: t(getattr(pg, name)[head]) for name in ("W", "b_W", "P", "a", "b_a")},
        "eps": attn.cfg.layer_norm_eps,
    }


@torch.no_grad()
def shipped_head(model: pldr.PLDRLLM, ids: torch.Tensor, layer: int, head: int) -> tuple:
    """(q, k, v, weights) of one PLGA head of ``model`` on token ids ``(1, S)``: post-RoPE queries
    and keys and the values, each ``(S, d_k)`` in the model's dtype, and the head's weights (see
    the ``plga_head`` exercise of chapter 7; the published layout of ``pldr.Attention``).

    Raises
    ------
    TypeError
        ``model`` is not a PLDRLLM (a GPT or constant-G model has no metric learner), or
        ``layer``/``head`` is not an int.
    ValueError
        ``ids`` not of shape ``(1, S)``, or ``layer``/``head`` out of range.
    """
    if not isinstance(model, pldr.PLDRLLM) or model.kind != "plga":
        what = getattr(model, "kind", type(model).__name__)
        raise TypeError(f"model must be a PLDRLLM with PLGA attention, got {what!r}")
    if not isinstance(ids, torch.Tensor) or ids.ndim != 2 or ids.shape[0] != 1:
        got = tuple(ids.shape) if isinstance(ids, torch.Tensor) else type(ids).__name__
        raise ValueError(f"ids must be token ids of shape (1, S), got {got}")
    attn = diagnostics._attention(model, layer)
    diagnostics._index(head, "head", attn.cfg.num_attention_heads)
    x = diagnostics.attention_input(model, ids, layer)
    H, d_k = attn.cfg.num_attention_heads, attn.cfg.d_k

    def split(proj):
        return proj(x).view(1, x.shape[1], H, d_k)

    q, k = attn.rope(split(attn.wq))[0, :, head], attn.rope(split(attn.wk))[0, :, head]
    return q, k, split(attn.wv)[0, :, head], _head_weights(attn, head)


@functools.cache
def shipped_model() -> pldr.PLDRLLM:
    """The shipped ``pldr_tiny`` checkpoint in float64 (loaded once per process)."""
    return load_pretrained(shipped("pldr_tiny")).double().eval().requires_grad_(False)


@functools.cache
def _plga_head_inputs() -> tuple[Case, ...]:
    model = shipped_model()
    ids = torch.tensor([load_tokenizer(shipped("pldr_tiny")).encode(_PROMPT)])
    return tuple(
        Case(f"pldr_tiny, layer {layer}, head {head}, {prompt.shape[1]} {what}", head_inputs)
        for layer, head, prompt, what in (
            (0, 0, ids, "tokens of Python"),
            (1, 2, ids, "tokens of Python"),
            (0, 3, ids[:, :1], "token (A0 of rank 1)"),
        )
        for head_inputs in [shipped_head(model, prompt, layer, head)]
    )


def _plga_head_cases(_gen):
    return list(_plga_head_inputs())


def _layer_norm(x, norm, eps, axis=-1):
    x = x.transpose(axis, -1)
    return F.layer_norm(x, x.shape[-1:], norm["weight"], norm["bias"], eps).transpose(axis, -1)


def _glu(x, g):
    gate = F.silu(F.linear(x, g["w1"], g["b1"]))
    return F.linear(gate * F.linear(x, g["w2"], g["b2"]), g["w3"], g["b3"])


def _plga_head(q, k, v, w, how: str = ""):
    """One PLGA head (the reference), or with ``how`` one of the listed mistakes."""
    S, d_k = q.shape
    A0 = q.T @ q / (S if how == "mean density" else 1)
    A = _layer_norm(A0, w["layernorm"], w["eps"], axis=-2 if how == "norm columns" else -1)
    for unit in w["units"]:
        out = A
        for g in unit["glus"]:
            out = _glu(out, g)
        A = _layer_norm(out if how == "no residual" else out + A, unit["layernorm"], w["eps"])
    WA = A @ w["W"] if how == "A W" else w["W"] @ A
    A_LM = pldr.iswiglu(WA + w["b_W"]) + (0.0 if how == "no floor" else pldr.EPSILON_A)
    A_P = A_LM.pow(w["P"])
    G_LM = (w["a"] * A_P if how == "elementwise a" else w["a"] @ A_P) + w["b_a"]
    G = G_LM.T if how == "G transposed" else G_LM
    scores = q @ G @ k.T / (1.0 if how == "no scale" else math.sqrt(d_k))
    if how != "no mask":
        scores = scores.masked_fill(~causal_mask(S), -math.inf)
    E = scores.softmax(-2 if how == "softmax over queries" else -1)
    return A0, A, A_LM, A_P, G_LM, E, E @ v


register(
    Exercise(
        "density",
        7,
        "density(q) -> Tensor",
        "The density (Gram) operator A0 = Σ_s q_sᵀ q_s of the block's queries q (..., S, d_k), "
        "shape (..., d_k, d_k) (a sum over positions, not a mean).",
        lambda q: q.transpose(-1, -2) @ q,
        _density_cases,
        (
            Mistake(
                "q qᵀ is the S × S Gram matrix of positions; the density is qᵀ q (d_k × d_k).",
                lambda q: q @ q.transpose(-1, -2),
            ),
            Mistake(
                "a mean over positions; the published density is a sum.",
                lambda q: q.transpose(-1, -2) @ q / q.shape[-2],
            ),
        ),
    ),
    Exercise(
        "iswiglu",
        7,
        "iswiglu(u) -> Tensor",
        "iSwiGLU(u) = u · silu(u) = u² sigmoid(u), elementwise (≥ 0).",
        pldr.iswiglu,
        _iswiglu_cases,
        (
            Mistake("silu(u) alone: iSwiGLU multiplies it by u once more (u² sigmoid(u)).", F.silu),
            Mistake(
                "u · sigmoid(u)² — the sigmoid appears once.",
                lambda u: u * torch.sigmoid(u) ** 2,
            ),
        ),
    ),
    Exercise(
        "power_law_G",
        7,
        "power_law_G(A_LM, P, a, b_a) -> Tensor",
        "G_LM = a A_P + b_a with the potential A_P = A_LM^{∘P} (elementwise power, exponent "
        "matrix P); all (..., d_k, d_k), a A_P a matrix product.",
        _power_law,
        _power_law_cases,
        (
            Mistake(
                "a ∘ A_P elementwise: a multiplies A_P as a matrix (a @ A_P).",
                lambda A, P, a, b: a * A.pow(P) + b,
            ),
            Mistake(
                "A_P a: the product is a A_P (a on the left).",
                lambda A, P, a, b: A.pow(P) @ a + b,
            ),
            Mistake(
                "torch.matrix_power is a matrix power with an integer exponent; the power "
                "law is elementwise with exponents P.",
                lambda A, P, a, b: a @ A.pow(P.mean()) + b,
            ),
        ),
    ),
    Exercise(
        "perron_pair",
        7,
        "perron_pair(A_LM) -> (float, Tensor)",
        "The Perron–Frobenius eigenpair of an entrywise-positive matrix (d, d): the dominant "
        "eigenvalue and its eigenvector, scaled to be positive with unit sum.",
        _perron,
        _perron_cases,
        (
            Mistake(
                "the eigenvector has unit Euclidean norm; scale it to unit sum.",
                lambda A: (lambda lv: (lv[0], lv[1] / lv[1].norm()))(_perron(A)),
            ),
        ),
    ),
    Exercise(
        "plga_head",
        7,
        "plga_head(q, k, v, weights) -> tuple of 7 tensors",
        "Part II capstone. One head of Power Law Graph Attention from its weights and its "
        "post-RoPE queries, keys and values q, k, v (S, d_k): return (A0, A, A_LM, A_P, G_LM, "
        "E, y). A0 = qᵀq; A = the metric learner on A0 (LayerNorm over each row with "
        "weights['layernorm'], then for each unit of weights['units']: its SwiGLU blocks "
        "w3·(silu(w1·r + b1) ⊙ (w2·r + b2)) + b3 applied to each row r in turn, added to the "
        "unit's input and LayerNorm-ed with the unit's 'layernorm'; eps weights['eps']; weights "
        "in nn.Linear layout (out, in)); A_LM = iSwiGLU(W A + b_W) + 1e-9; A_P = A_LM^∘P; "
        "G_LM = a A_P + b_a; E = causal softmax(q G_LM kᵀ/√d_k) over the keys; y = E v. The "
        "checker runs the shipped pldr_tiny checkpoint and names the first stage that differs.",
        _plga_head,
        _plga_head_cases,
        tuple(
            Mistake(explanation, functools.partial(_plga_head, how=how))
            for how, explanation in (
                (
                    "mean density",
                    "A0 divided by S: the density is the sum Σ_s q_sᵀ q_s, not the mean.",
                ),
                (
                    "norm columns",
                    "LayerNorm over the columns of A0: it normalises each row (the last axis, "
                    "d_k features of one row), as nn.LayerNorm(d_k) does.",
                ),
                (
                    "no residual",
                    "the residual unit without its skip connection: LayerNorm(blocks(A) + A), "
                    "not LayerNorm(blocks(A)).",
                ),
                ("A W", "A W instead of W A: the learned W multiplies A from the left."),
                (
                    "no floor",
                    "no ε floor: A_LM = iSwiGLU(W A + b_W) + 1e-9 keeps every entry positive, "
                    "so that every power A_LM^P is finite.",
                ),
                (
                    "elementwise a",
                    "a ⊙ A_P (elementwise): G_LM = a A_P + b_a is a matrix product.",
                ),
                ("G transposed", "q G_LMᵀ kᵀ: the score is q G_LM kᵀ (G_LM is not symmetric)."),
                ("no scale", "no 1/√d_k in the scores: E = softmax(q G_LM kᵀ/√d_k)."),
                ("no mask", "no causal mask: position i attends to keys j ≤ i only."),
                (
                    "softmax over queries",
                    "softmax over the queries (axis −2): each query's weights over the keys (the "
                    "last axis) sum to 1.",
                ),
            )
        ),
        atol=1e-12,
        outputs=_STAGES,
    ),
)
