"""Exercises of chapter 7, Power Law Graph Attention piece by piece: cases, references, mistakes."""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F

from ... import config, diagnostics, pldr, plga
from ...checkpoint import load_pretrained
from ...data import load_tokenizer, shipped
from ...diagnostics.measures import _attention, _index
from ._checker import Case, Exercise, Mistake, causal_mask, randn, register


def _density_cases(gen):
    return [
        Case("6 tokens", (randn(gen, 6, 4),)),
        Case("batch and heads", (randn(gen, 2, 3, 5, 4),)),
        Case("one token", (randn(gen, 1, 3),)),
    ]


def _prefix_density(q, how: str = ""):
    terms = q[..., :, None] * q[..., None, :]  # [..., S, d_k, d_k]: q_sᵀ q_s for each s
    if how == "block":
        return terms.sum(-3, keepdim=True).expand_as(terms)
    running = terms.cumsum(-3)
    if how == "exclusive":
        return running - terms
    if how == "mean":
        count = torch.arange(1, q.shape[-2] + 1, dtype=q.dtype)
        return running / count[:, None, None]
    return running


def _slope_cases(gen):
    return [
        Case("random", (randn(gen, 3, 4, 4) * 3,)),
        Case("zeros", (torch.zeros(2, 2, dtype=torch.float64),)),
        Case(
            "large |u| (no overflow)",
            (torch.tensor([-80.0, -30.0, 30.0, 80.0], dtype=torch.float64),),
        ),
    ]


def _iswiglu_slope(u):
    s = torch.sigmoid(u)
    return 2 * u * s + u * u * s * (1 - s)


def _recover_cases(gen):
    def positive_away_from_one(*shape):
        # entries e^{±(0.5 … 3)}: log A_LM is never near 0, so P is well determined
        sign = torch.where(torch.rand(*shape, generator=gen) < 0.5, -1.0, 1.0).double()
        return (sign * (0.5 + 2.5 * torch.rand(*shape, generator=gen, dtype=torch.float64))).exp()

    def case(label, A_LM, P, a, b_a):
        return Case(label, (A_LM, a @ A_LM.pow(P) + b_a, a, b_a))

    eye3 = torch.eye(3, dtype=torch.float64)
    floor = positive_away_from_one(4, 4)
    floor[0, 1] = floor[2, 3] = config.EPSILON_A
    return [
        case(
            "one head, diagonal a",
            positive_away_from_one(4, 4),
            0.3 * randn(gen, 4, 4),
            torch.diag(1 + torch.rand(4, generator=gen, dtype=torch.float64)),
            torch.rand(4, 4, generator=gen, dtype=torch.float64),
        ),
        case(
            "heads (H, d_k, d_k)",
            positive_away_from_one(2, 3, 3),
            0.3 * randn(gen, 2, 3, 3),
            eye3 + 0.3 * randn(gen, 2, 3, 3),
            randn(gen, 2, 3, 3),
        ),
        case(
            "a = I, b_a = 0 (G = A_P)",
            positive_away_from_one(3, 3),
            randn(gen, 3, 3),
            eye3,
            0 * eye3,
        ),
        case(
            "entries at the floor ε",
            floor,
            0.05 * randn(gen, 4, 4),
            torch.eye(4, dtype=torch.float64) + 0.2 * randn(gen, 4, 4),
            randn(gen, 4, 4),
        ),
    ]


def _recover_P(A_LM, G_LM, a, b_a):
    return torch.linalg.solve(a, G_LM - b_a).log() / A_LM.log()


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


def _head_weights(attn: plga.Attention, head: int) -> dict:
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
    the ``plga_head`` exercise of chapter 7; the published layout of ``plga.Attention``).

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
    attn = _attention(model, layer)
    _index(head, "head", attn.cfg.num_attention_heads)
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
    A_LM = plga.iswiglu(WA + w["b_W"]) + (0.0 if how == "no floor" else config.EPSILON_A)
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
        "The density of every prefix of a block, for its queries q (..., S, d_k): "
        "A0(t) = Σ_{s ≤ t} q_sᵀ q_s for t = 0 … S−1, shape (..., S, d_k, d_k) (sums, not means). "
        "The last one is the published block density qᵀq.",
        _prefix_density,
        _density_cases,
        (
            Mistake(
                "every position got the block density qᵀq: position t's density sums over its "
                "own prefix s ≤ t only.",
                lambda q: _prefix_density(q, "block"),
            ),
            Mistake(
                "the prefix stops before t: position t's own query belongs to its density "
                "(s ≤ t), as in the KV cache, which adds the new token's term.",
                lambda q: _prefix_density(q, "exclusive"),
            ),
            Mistake(
                "a mean over the prefix; the density is a sum (the last position must give qᵀq).",
                lambda q: _prefix_density(q, "mean"),
            ),
        ),
    ),
    Exercise(
        "iswiglu_slope",
        7,
        "iswiglu_slope(u) -> Tensor",
        "The derivative of iSwiGLU(u) = u² sigmoid(u), elementwise, derived by hand (no "
        "autograd); finite for |u| = 80.",
        _iswiglu_slope,
        _slope_cases,
        (
            Mistake(
                "2u·sigmoid(u) treats sigmoid(u) as a constant: the product rule also "
                "differentiates sigmoid, with sigmoid′ = sigmoid·(1 − sigmoid).",
                lambda u: 2 * u * torch.sigmoid(u),
            ),
            Mistake(
                "that is the slope of silu(u) = u·sigmoid(u); iSwiGLU is u·silu(u), one more "
                "factor u.",
                lambda u: torch.sigmoid(u) * (1 + u * (1 - torch.sigmoid(u))),
            ),
            Mistake(
                "sigmoid′ = sigmoid² is wrong: sigmoid′ = sigmoid·(1 − sigmoid).",
                lambda u: 2 * u * torch.sigmoid(u) + u * u * torch.sigmoid(u) ** 2,
            ),
        ),
    ),
    Exercise(
        "recover_P",
        7,
        "recover_P(A_LM, G_LM, a, b_a) -> Tensor",
        "Read a head's learned exponents off its tensors: given A_LM (entrywise positive, no "
        "entry equal to 1), G_LM = a A_LM^{∘P} + b_a, a (invertible) and b_a, all (..., d_k, "
        "d_k), return P.",
        _recover_P,
        _recover_cases,
        (
            Mistake(
                "a was undone from the right, (G_LM − b_a) a⁻¹: G_LM = a A_P + b_a has a on the "
                "left, so solve a X = G_LM − b_a.",
                lambda A, G, a, b: ((G - b) @ torch.linalg.inv(a)).log() / A.log(),
            ),
            Mistake(
                "b_a was not subtracted: A_P = a⁻¹ (G_LM − b_a).",
                lambda A, G, a, b: torch.linalg.solve(a, G).log() / A.log(),
            ),
            Mistake(
                "the ratio of logarithms is inverted: log A_P = P ∘ log A_LM, so "
                "P = log A_P / log A_LM.",
                lambda A, G, a, b: A.log() / torch.linalg.solve(a, G - b).log(),
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
