"""The Swish-β dose-response of chapter 5: loss against a trained layer's exchange violation."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .._checks import check_int, is_list_like, is_real
from ..data import TokenData
from ..lm import TinyLM, TinyLMConfig
from ..symmetry import exchange_violation, trained_exchange_violation
from ..train import MAX_LR, SeedRuns, train_lm_seeds
from .recipe import _check_recipe, _check_seeds, _config, _duplicates, _map, _setup
from .records import DoseResponse, paired_contrast

#: The Swish β a dose-response takes. At β = 1e-4, sigmoid(βz) − ½ ≈ βz/4 is a few hundred float32
#: rounding steps of ½ for z of order 1, and none below about 1e-7: layers of smaller β are (to
#: float32) the same bilinear ½ a·b. Above 1e3, sigmoid(βz) is the step function to float32 for
#: ``|z| > 0.02`` (every β is ReGLU); βz overflows float32 (NaN at z = 0) from about 3e38.
BETA_RANGE = (1e-4, 1e3)


def _train_beta(
    beta: float, cfg: TinyLMConfig, tokens: TokenData, seeds: Sequence[int], lr: float, recipe: dict
) -> SeedRuns:
    def violation(model: TinyLM) -> float:
        block = model.cfg.block_size
        n = min(64, (len(tokens.val) - 1) // block)
        idx = tokens.val[: n * block].view(n, block).to(next(model.parameters()).device)
        inputs: list[torch.Tensor] = []
        with torch.no_grad():
            model(idx, ffn_inputs=inputs)
        return trained_exchange_violation(model.blocks[0].ffn, inputs[0])

    return train_lm_seeds(
        cfg, tokens, list(seeds), lr=lr, desc=f"Swish-β {beta:g}", measure=violation, **recipe
    )


def check_dose_design(betas: Sequence[float], seeds: Sequence[int]) -> None:
    """Refuse a design whose summary :func:`swish_beta_dose_response` could not compute, as that
    function does before it trains: a caller that trains something else first (the contrast of
    ``kvattn-reproduce contrast``) calls this before, so that a bad design is not found
    after hours of training.

    Each seed's slope of loss against violation needs at least two distinct β (a β given twice
    would add a point, not a dose; with only one β the slope is 0/0), and the paired test of the
    slopes at least two distinct seeds (a seed given twice counts one slope twice).

    Raises
    ------
    ValueError
        ``betas`` not a sequence of positive finite numbers, a β outside
        :data:`~kvattn.experiments.dose.BETA_RANGE`, a β twice or fewer than 2 β; ``seeds`` not a
        sequence of ints >= 0, a seed twice or fewer than 2 seeds.
    """
    if not is_list_like(betas):
        raise ValueError(f"betas must be a sequence of numbers, got {betas!r}")
    if any(not (is_real(b) and b > 0) for b in betas):
        raise ValueError(f"every β must be a positive number, got {list(betas)}")
    low, high = BETA_RANGE
    if any(not low <= b <= high for b in betas):
        raise ValueError(
            f"every β must lie in [{low:g}, {high:g}] (below, σ_β is z/2 to float32 precision; "
            f"above, ReLU), got {list(betas)}"
        )
    repeated = _duplicates(betas)
    if repeated:
        raise ValueError(f"betas has duplicates {repeated}, got {list(betas)}")
    if len(betas) < 2:
        raise ValueError(f"need at least 2 distinct β for a slope, got {list(betas)}")
    _check_seeds("seeds", seeds)
    if len(seeds) < 2:
        raise ValueError(
            f"need at least 2 seeds for a paired test of the slopes, got {list(seeds)}"
        )


def swish_beta_dose_response(
    tokens: TokenData,
    *,
    betas: Sequence[float] = (0.25, 0.5, 1.0, 2.0, 8.0),
    seeds: Sequence[int] = tuple(range(8)),
    steps: int,
    lr: float,
    d_model: int = 64,
    n_heads: int = 4,
    block_size: int = 64,
    batch_size: int = 32,
    device: torch.device | str = "cpu",
    progress: bool = True,
    workers: int = 1,
) -> DoseResponse:
    """Dose-response of chapter 5: train a one-layer TinyLM whose feed-forward layer is the gated
    σ_β(a)·b (Swish-β, ``swiglu`` with β) at each β of ``betas``, on the same paired seeds and
    recipe as :func:`symmetry_contrast` (same parameter budget), and measure each trained layer's
    exchange violation on the inputs it sees.

    As β → 0, σ_β(z) → z/2 and the layer becomes the exchange-symmetric bilinear ½ a·b; as β
    grows, σ_β tends to ReLU and the violation to its maximum. β therefore moves the violation,
    but it also changes the nonlinearity itself (curvature, saturation): a trend of loss against
    violation is consistent with the symmetry-breaking hypothesis, not a proof of it.

    Every argument is checked before any training; :func:`check_dose_design` makes the checks of
    ``betas`` and ``seeds`` alone.

    Raises
    ------
    TypeError
        ``tokens`` is not a :class:`kvattn.data.TokenData`.
    ValueError
        A bad design (:func:`check_dose_design`: a β or a seed twice, fewer than 2 of either, a
        β that is not a positive number in :data:`~kvattn.experiments.dose.BETA_RANGE`, a seed
        that is not an int >= 0); ``lr`` not a positive finite number below
        :data:`kvattn.train.optim.MAX_LR`; ``d_model``, ``n_heads``, ``block_size``, ``steps``,
        ``batch_size``, ``workers`` not ints >= 1, ``d_model`` not divisible by ``n_heads``, a
        token stream of ``tokens`` no longer than ``block_size``; ``progress`` not a bool; a
        ``device`` torch does not know or this machine lacks; after training, a seed whose trained
        layers have the same violation at every β (its slope would be 0/0).
    """
    _check_recipe(
        tokens,
        dict(d_model=d_model, n_heads=n_heads, block_size=block_size),
        batch_size, device, progress, workers,
    )  # fmt: skip
    check_int("steps", steps, low=1)
    if not (is_real(lr) and 0 < lr < MAX_LR):
        raise ValueError(f"lr must be a positive finite number below {MAX_LR:g}, got {lr!r}")
    check_dose_design(betas, seeds)
    budget, shape, recipe = _setup(
        d_model, 1, n_heads, block_size,
        steps=steps, batch_size=batch_size, eval_every=max(1, steps // 20), device=device,
        progress=progress,
    )  # fmt: skip
    jobs = [
        (
            float(b),
            _config(tokens, "swiglu", None, shape, budget, float(b)),
            tokens,
            seeds,
            lr,
            recipe,
        )
        for b in betas
    ]
    runs = _map(_train_beta, jobs, workers)
    final = [r.final for r in runs]
    violation = [r.measured for r in runs]
    slopes = []
    for s in range(len(seeds)):
        v = torch.tensor([row[s] for row in violation], dtype=torch.float64)
        y = torch.tensor([row[s] for row in final], dtype=torch.float64)
        vc = v - v.mean()
        if not (vc != 0).any():
            raise ValueError(
                f"seed {seeds[s]}: the trained layers have the same exchange violation {v[0]:g} "
                f"at every β of {list(betas)}, so its slope of loss against violation is 0/0"
            )
        slopes.append(float((vc * (y - y.mean())).sum() / (vc**2).sum()))
    summary = paired_contrast("slope", slopes, [0.0] * len(slopes), 0.05, 0.8)
    return DoseResponse(
        design=dict(
            shape,
            steps=steps,
            lr=lr,
            batch_size=batch_size,
            parameter_budget=budget,
            vocab_size=tokens.vocab_size,
        ),
        betas=[float(b) for b in betas],
        seeds=list(seeds),
        final=final,
        violation=violation,
        gaussian=[exchange_violation("swish", float(b)) for b in betas],
        slope=summary.mean,
        slope_se=summary.se,
        slope_t=summary.t,
        slope_p=summary.p,
    )
