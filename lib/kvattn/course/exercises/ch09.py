"""Exercises of chapter 9, Inference collapse: cases, references, mistakes."""

from __future__ import annotations

import torch

from ... import diagnostics
from ._checker import Case, Exercise, Mistake, randn, register


def _order_cases(gen):
    x = randn(gen, 3, 4, 4) + 2.0
    centred = randn(gen, 3, 4, 4)
    centred = centred - centred.mean() + 0.05  # entries of both signs, mean near 0, as G_LM's
    return [
        Case("random", (x, x + 0.1 * randn(gen, 3, 4, 4))),
        Case("centred near 0", (centred, centred + 0.3 * randn(gen, 3, 4, 4))),
        Case("identical runs", (x, x.clone())),
        Case("negative mean", (-x, -x + 0.05 * randn(gen, 3, 4, 4))),
    ]


def _rms(x):
    return x.pow(2).mean().sqrt()


def _order_inflation(x1, x2):
    return float(0.5 * (_rms(x1) + _rms(x2)) / x1.mean().abs())


def _audit_cases(gen):
    u, a = randn(gen, 4), randn(gen, 4)
    return [
        Case("random (H, d, d)", (randn(gen, 3, 4, 4),)),
        Case("identical rows (A = 1 αᵀ)", (torch.ones(4, 1, dtype=torch.float64) * a,)),
        Case("rank 1 (A = u αᵀ), non-symmetric", (torch.outer(u, a),)),
        Case("identity (all directions equal)", (torch.eye(4, dtype=torch.float64),)),
    ]


def _rank_one_distance(A):
    s = torch.linalg.svdvals(A)
    return s[..., 1:].pow(2).sum(-1).sqrt() / s.pow(2).sum(-1).sqrt()


def _row_spread(A):
    return diagnostics.rank_audit(A, head_dim=None).row_spread


def _agreement_cases(gen):
    def ids(*shape):
        return torch.randint(4, 50, shape, generator=gen)

    prompt = ids(3, 5)
    ref = torch.cat([prompt, ids(3, 8)], 1)
    out = ref.clone()
    out[0, 5 + 6] += 1  # prompt 0: the 7th new token differs, then they happen to agree again
    out[1, 5 + 2 :] = ids(6)  # prompt 1 diverges at the 3rd new token
    out[1, 5 + 2] = ref[1, 5 + 2] + 1
    out[2, 5 + 0] += 1  # prompt 2 at the first new token; the rest agree by chance
    single = ids(1, 7)
    return [
        Case("3 prompts of 5 tokens, 8 new", (ref, out, 5)),
        Case("identical", (ref, ref.clone(), 5)),
        Case(
            "one prompt, differs at once",
            (single, torch.cat([single[:, :3], single[:, 3:] + 1], 1), 3),
        ),
    ]


def _first_difference(ref, out, prompt_len):
    """For each row, the number of generated tokens before the first that differs."""
    same = (ref[:, prompt_len:] == out[:, prompt_len:]).long()
    return same.cumprod(1).sum(1)


def _decoding_agreement(ref, out, prompt_len):
    n_new = ref.shape[1] - prompt_len
    return float(_first_difference(ref, out, prompt_len).sum() / (ref.shape[0] * n_new))


register(
    Exercise(
        "order_inflation",
        9,
        "order_inflation(x1, x2) -> float",
        "By what factor the papers' order parameter RMSE(x1 − x2)/|mean(x1)| exceeds the audit's "
        "'rms' variant RMSE(x1 − x2)/½(rms(x1) + rms(x2)), for two runs' tensors of the same "
        "shape, as a closed form (no RMSE needed).",
        _order_inflation,
        _order_cases,
        (
            Mistake(
                "only x1's RMS: the 'rms' variant divides by the mean of both runs' RMS, "
                "½(rms(x1) + rms(x2)).",
                lambda a, b: float(_rms(a) / a.mean().abs()),
            ),
            Mistake(
                "mean(|x1|) instead of |mean(x1)|: the papers take the magnitude of the mean, "
                "which entries of both signs make small.",
                lambda a, b: float(0.5 * (_rms(a) + _rms(b)) / a.abs().mean()),
            ),
            Mistake(
                "the ratio is inverted: the 'mean' order parameter over the 'rms' one.",
                lambda a, b: 1 / _order_inflation(a, b),
            ),
        ),
    ),
    Exercise(
        "rank_one_distance",
        9,
        "rank_one_distance(A) -> Tensor",
        "How far each matrix of A (..., d, d) is from rank 1: the smallest ‖A − B‖_F over the "
        "matrices B of rank ≤ 1, divided by ‖A‖_F (0 for a rank-1 A).",
        _rank_one_distance,
        _audit_cases,
        (
            Mistake(
                "σ2/σ1 is the audit's ratio, not the distance: the nearest rank-1 matrix leaves "
                "every singular value after the first, √(σ2² + σ3² + …).",
                lambda A: (lambda s: s[..., 1] / s[..., 0])(torch.linalg.svdvals(A)),
            ),
            Mistake(
                "the squared distance: a ratio of norms, not of squared norms.",
                lambda A: _rank_one_distance(A) ** 2,
            ),
            Mistake(
                "divided by σ1 instead of ‖A‖_F = √(σ1² + σ2² + …).",
                lambda A: (lambda s: s[..., 1:].pow(2).sum(-1).sqrt() / s[..., 0])(
                    torch.linalg.svdvals(A)
                ),
            ),
        ),
        atol=1e-7,  # √(1 − σ1²/Σσ²) is a fair formula that loses ~1e-8 to cancellation at rank 1
    ),
    Exercise(
        "row_spread",
        9,
        "row_spread(A) -> Tensor",
        "The share of each matrix's squared Frobenius norm that no matrix with identical rows "
        "can capture: min over α of ‖A − 𝟙αᵀ‖²_F / ‖A‖²_F, for A (..., d, d); 0 when A = 𝟙αᵀ.",
        _row_spread,
        _audit_cases,
        (
            Mistake(
                "α is the first row: that fits row 0 exactly but not the others; the least-squares "
                "α is the mean of the rows.",
                lambda A: (A - A[..., :1, :]).pow(2).sum((-2, -1)) / A.pow(2).sum((-2, -1)),
            ),
            Mistake(
                "the rows were replaced by their own means (A − m 𝟙ᵀ, a constant per row): "
                "identical rows means one α shared by every row, a mean over dim=-2.",
                lambda A: A.var(dim=-1, unbiased=False).mean(-1) / A.pow(2).mean((-2, -1)),
            ),
            Mistake(
                "a ratio of norms: the share asked for is of squared norms.",
                lambda A: _row_spread(A).sqrt(),
            ),
        ),
    ),
    Exercise(
        "decoding_agreement",
        9,
        "decoding_agreement(reference, tokens, prompt_len) -> float",
        "How far greedy decoding with a cache agrees with decoding without one: for token ids "
        "reference and tokens (B, prompt_len + n) from the same prompts, the share of the B·n "
        "generated tokens that come before the first difference in their row (1 when every row "
        "agrees, 0 when every row differs at its first new token).",
        _decoding_agreement,
        _agreement_cases,
        (
            Mistake(
                "every position that matches was counted: after the first difference the two "
                "continuations read different text, and later matches are coincidences.",
                lambda r, o, n: float((r[:, n:] == o[:, n:]).double().mean()),
            ),
            Mistake(
                "the prompt was counted: it is copied into both outputs and always agrees; "
                "only the generated tokens measure the cache.",
                lambda r, o, n: float(
                    (_first_difference(r, o, 0).sum()) / (r.shape[0] * r.shape[1])
                ),
            ),
            Mistake(
                "the share of prompts whose continuations are identical throughout: that says "
                "whether a row differs, not how long it agrees.",
                lambda r, o, n: float((r[:, n:] == o[:, n:]).all(1).double().mean()),
            ),
        ),
    ),
)
