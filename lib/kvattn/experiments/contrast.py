"""The symmetric-vs-gated contrast: does moving σ onto one factor make a better layer?

:func:`~kvattn.experiments.symmetry_contrast` tests the hypothesis of chapters 4–5 (Breslow 2026
states it and runs no experiment; the design is ours): gated MLPs σ(a)·b work well *because*
moving σ onto one factor breaks the exchange and inverse-scale symmetries of the symmetric rank-1
form σ(a·b). The fair contrast keeps σ and moves only where it sits: for each σ, symmetric σ(a·b)
against gated σ(a)·b, at matched parameter count, each at its own best learning rate, over paired
seeds.

The design, in order:

1. *Learning rates are chosen on seeds of their own.* Every kind trains at every rate of ``lrs``
   on the ``select_seeds``; its rate is the one with the lowest mean final validation loss. Picking
   the rate on the seeds that are then compared would favour whichever kind happened to get lucky.
2. *The comparison runs on fresh, paired seeds.* Every kind trains at its chosen rate on the
   ``test_seeds``; seed s fixes the initialisation and the batch order, so symmetric and gated runs
   with the same s see the same batches, and their difference cancels the seed's luck.
3. *Each contrast reports* the mean paired difference (symmetric − gated, nats/token; positive:
   the gated form reaches a lower loss), its standard error, Student's t, the two-sided p-value,
   and the **minimum detectable effect**: the true difference the design would detect with
   probability ``power`` at level ``alpha``, given the observed spread of the paired differences.
   A non-significant result with a minimum detectable effect above the effect of interest says
   "this design cannot tell", not "no effect".
4. *Whether training has flattened* is measured, not assumed: the drop of the validation loss over
   the last fifth of training, per kind.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from .._checks import check_bool, check_fraction, check_int, is_list_like, is_real
from ..data import TokenData
from ..lm import TinyLMConfig
from ..train import MAX_LR, SeedRuns, train_lm_seeds
from .recipe import _check_recipe, _check_seeds, _config, _duplicates, _map, _setup
from .records import ContrastResult, paired_contrast

#: σ → (symmetric kind, gated kind) of :func:`kvattn.mlp.make_mlp`: the same σ in both places.
CONTRASTS = {
    "silu": ("symmetric_rank1", "swiglu"),
    "gelu": ("symmetric_rank1", "geglu"),
    "relu": ("symmetric_rank1", "reglu"),
}
#: Reference kinds beside the contrasts, no σ at all (a·b) and the plain key-value memory σ(x·k).
REFERENCES = {"bilinear": ("bilinear", None), "key_value": ("key_value", "relu")}


def kinds(acts: Sequence[str], references: bool) -> dict[str, tuple[str, str | None]]:
    """Name → (ffn kind, σ) of every layer kind the experiment trains.

    Raises
    ------
    ValueError
        ``acts`` not a sequence of σ names, empty, with an unknown σ or with one twice (each σ
        is one contrast); ``references`` not a bool.
    """
    check_bool("references", references)
    if not is_list_like(acts):
        raise ValueError(f"acts must be a sequence of σ names such as ['silu'], got {acts!r}")
    if len(acts) == 0:
        raise ValueError(f"acts must name at least one σ of {list(CONTRASTS)}, got {acts!r}")
    out: dict[str, tuple[str, str | None]] = {}
    for act in acts:
        if not isinstance(act, str) or act not in CONTRASTS:
            raise ValueError(f"act must be one of {list(CONTRASTS)}, got {act!r}")
    repeated = _duplicates(acts)
    if repeated:
        raise ValueError(f"acts has duplicates {repeated}, got {list(acts)}")
    for act in acts:
        symmetric, gated = CONTRASTS[act]
        out[f"{act} symmetric"] = (symmetric, act)
        out[f"{act} gated"] = (gated, None)
    if references:
        out.update(REFERENCES)
    return out


def _late_drop(curves: list[list[float]], eval_steps: list[int]) -> float:
    """Mean over seeds of (loss at 80 % of training − final loss)."""
    last = eval_steps[-1]
    i = min(range(len(eval_steps)), key=lambda k: abs(eval_steps[k] - 0.8 * last))
    return sum(c[i] - c[-1] for c in curves) / len(curves)


def _select_and_test(
    name: str,
    cfg: TinyLMConfig,
    tokens: TokenData,
    lrs: Sequence[float],
    select_seeds: Sequence[int],
    test_seeds: Sequence[int],
    recipe: dict,
) -> tuple[dict[str, list[float]], float, SeedRuns]:
    """One kind: every rate on the selection seeds, then the best rate on the test seeds (a single
    rate needs no selection runs)."""
    if len(lrs) == 1:
        selection, chosen = {}, lrs[0]
    else:
        selection = {
            f"{lr:g}": train_lm_seeds(
                cfg, tokens, list(select_seeds), lr=lr, desc=f"{name} lr {lr:g}", **recipe
            ).final
            for lr in lrs
        }
        chosen = min(lrs, key=lambda lr: sum(selection[f"{lr:g}"]))
    tested = train_lm_seeds(
        cfg, tokens, list(test_seeds), lr=chosen, desc=f"{name} lr {chosen:g}", **recipe
    )
    return selection, chosen, tested


def check_contrast_design(
    *,
    acts: Sequence[str],
    references: bool,
    steps: int,
    lrs: Sequence[float] | Mapping[str, Sequence[float]],
    select_seeds: Sequence[int],
    test_seeds: Sequence[int],
    eval_every: int | None = None,
    alpha: float = 0.05,
    power: float = 0.8,
) -> None:
    """Refuse a design that :func:`symmetry_contrast` would refuse (the arguments mean what they
    mean there), without the corpus or the device: the checks that function makes of them before
    it trains, for a caller that settles a design before other work, so that a bad design is
    refused at once.

    Raises
    ------
    ValueError
        As :func:`symmetry_contrast`, for these arguments.
    """
    _contrast_design(
        acts, references, steps, lrs, select_seeds, test_seeds, eval_every, alpha, power
    )


def _contrast_design(
    acts: Sequence[str],
    references: bool,
    steps: int,
    lrs: Sequence[float] | Mapping[str, Sequence[float]],
    select_seeds: Sequence[int],
    test_seeds: Sequence[int],
    eval_every: int | None,
    alpha: float,
    power: float,
) -> tuple[dict[str, tuple[str, str | None]], dict[str, list[float]], Sequence[int]]:
    """The checked design of :func:`symmetry_contrast`: its kinds (:func:`kinds`), each kind's
    grid of rates, and the selection seeds it uses (none where no kind has a rate to choose)."""
    check_int("steps", steps, low=1)
    if eval_every is not None and (
        isinstance(eval_every, bool) or not isinstance(eval_every, int) or eval_every < 1
    ):
        raise ValueError(f"eval_every must be None or an int >= 1, got {eval_every!r}")
    check_fraction("alpha", alpha)
    check_fraction("power", power)
    check_bool("references", references)
    _check_seeds("test_seeds", test_seeds)
    _check_seeds("select_seeds", select_seeds)
    if len(test_seeds) < 2:
        raise ValueError(f"need at least 2 test seeds for a paired test, got {list(test_seeds)}")
    spec = kinds(acts, references)
    if isinstance(lrs, Mapping):
        if set(lrs) != set(spec):
            raise ValueError(f"lrs names the kinds {sorted(lrs)}, the run trains {sorted(spec)}")
        grids = {name: lrs[name] for name in spec}
    else:
        grids = {name: lrs for name in spec}
    for name, grid in grids.items():
        if not is_list_like(grid):
            raise ValueError(
                f"lrs must be a sequence of rates or map each kind to one, got {grid!r} for {name}"
            )
        for lr in grid:
            if not (is_real(lr) and 0 < lr < MAX_LR):  # train's bound, checked before any run
                raise ValueError(
                    f"every rate of lrs must be a positive finite number below {MAX_LR:g}, got "
                    f"{lr!r} for {name}"
                )
        repeated = _duplicates(f"{lr:g}" for lr in grid)
        if repeated:
            raise ValueError(f"the grid of {name} has duplicates {repeated}, got {list(grid)}")
    grids = {name: list(grid) for name, grid in grids.items()}
    if not all(grids.values()):
        raise ValueError(f"every kind needs at least one rate, got {grids}")
    if all(len(g) == 1 for g in grids.values()):
        select_seeds = ()  # nothing to choose between: no selection runs
    elif len(select_seeds) == 0:
        raise ValueError(f"choosing among the rates {grids} needs at least one selection seed")
    shared = sorted(set(select_seeds) & set(test_seeds))
    if shared:
        raise ValueError(f"selection and test seeds must differ, both have {shared}")
    return spec, grids, select_seeds


def symmetry_contrast(
    tokens: TokenData,
    *,
    acts: Sequence[str] = ("silu", "gelu", "relu"),
    references: bool = True,
    d_model: int = 64,
    n_layers: int = 1,
    n_heads: int = 4,
    block_size: int = 64,
    steps: int,
    lrs: Sequence[float] | Mapping[str, Sequence[float]] = (1e-3, 3e-3, 1e-2, 3e-2),
    select_seeds: Sequence[int] = (1000, 1001),
    test_seeds: Sequence[int] = tuple(range(8)),
    batch_size: int = 32,
    eval_every: int | None = None,
    alpha: float = 0.05,
    power: float = 0.8,
    device: torch.device | str = "cpu",
    progress: bool = True,
    workers: int = 1,
) -> ContrastResult:
    """Run the symmetric-vs-gated experiment (module docstring) on a one-layer-family TinyLM.

    Every kind's feed-forward layer gets the parameter budget of a key-value layer with
    ``4·d_model`` slots (:func:`kvattn.mlp.matched_slots`); everything else is shared. Runs
    ``len(kinds) × (len(lrs) × len(select_seeds) + len(test_seeds))`` trainings of ``steps`` steps
    (recipe of :func:`kvattn.train.train_lm_seeds`). ``workers`` > 1 trains that many kinds at
    once in separate processes with one thread each (results are identical: every run is seeded).

    ``lrs`` is one grid for every kind, or a mapping from each kind's name (``"silu symmetric"``,
    ``"silu gated"``, …, ``"bilinear"``, ``"key_value"``) to a grid of its own: a follow-up can
    give every kind the rate that an earlier run chose for it. Where every grid holds a single
    rate there is nothing to choose: no selection runs are made, ``select_seeds`` is ignored
    (recorded as ``[]``) and ``selection`` is empty.

    Every argument is checked before any training; :func:`check_contrast_design` makes the checks
    of the design alone.

    Raises
    ------
    TypeError
        ``tokens`` is not a :class:`kvattn.data.TokenData`.
    ValueError
        ``acts`` not a sequence of known σ, empty or with a σ twice; seeds that are not ints >= 0,
        a seed twice in ``test_seeds`` or in ``select_seeds`` (it would count one pair twice),
        fewer than 2 test seeds, or seeds shared between selection and test; ``lrs`` not a
        sequence or a mapping of sequences of positive finite rates below
        :data:`kvattn.train.optim.MAX_LR`, an empty grid, a rate twice
        in a grid (as ``f"{lr:g}"``, the key of ``selection``), or a mapping whose kinds differ
        from the run's; several rates but no ``select_seeds``; ``d_model``, ``n_layers``,
        ``n_heads``, ``block_size``, ``steps``, ``batch_size``, ``workers`` not ints >= 1
        (``eval_every`` not None or one), ``d_model`` not divisible by ``n_heads``, a token stream
        of ``tokens`` no longer than ``block_size``; ``alpha`` or ``power`` not numbers in
        (0, 1); ``references`` or ``progress`` not a bool; a ``device`` torch does not know or
        this machine lacks.
    """
    _check_recipe(
        tokens,
        dict(d_model=d_model, n_layers=n_layers, n_heads=n_heads, block_size=block_size),
        batch_size, device, progress, workers,
    )  # fmt: skip
    spec, grids, select_seeds = _contrast_design(
        acts, references, steps, lrs, select_seeds, test_seeds, eval_every, alpha, power
    )
    if eval_every is None:
        eval_every = max(1, steps // 20)
    budget, shape, recipe = _setup(
        d_model, n_layers, n_heads, block_size,
        steps=steps, batch_size=batch_size, eval_every=eval_every, device=device, progress=progress,
    )  # fmt: skip
    jobs = [
        (
            name,
            _config(tokens, *spec[name], shape, budget),
            tokens,
            grids[name],
            select_seeds,
            test_seeds,
            recipe,
        )
        for name in spec
    ]
    done = dict(zip(spec, _map(_select_and_test, jobs, workers), strict=True))
    selection = {name: done[name][0] for name in spec}
    chosen = {name: done[name][1] for name in spec}
    tested = {name: done[name][2] for name in spec}
    result = ContrastResult(
        design=dict(
            d_model=d_model,
            n_layers=n_layers,
            n_heads=n_heads,
            block_size=block_size,
            steps=steps,
            lrs=grids if isinstance(lrs, Mapping) else list(lrs),
            select_seeds=list(select_seeds),
            test_seeds=list(test_seeds),
            batch_size=batch_size,
            alpha=alpha,
            power=power,
            parameter_budget=budget,
            vocab_size=tokens.vocab_size,
        ),
        selection=selection,
        chosen_lr=chosen,
        eval_steps=tested[next(iter(spec))].eval_steps,
        final={name: r.final for name, r in tested.items()},
        curves={name: r.evals for name, r in tested.items()},
        late_drop={name: _late_drop(r.evals, r.eval_steps) for name, r in tested.items()},
        n_parameters={name: r.n_params for name, r in tested.items()},
    )
    result.contrasts = [
        paired_contrast(
            act, result.final[f"{act} symmetric"], result.final[f"{act} gated"], alpha, power
        )
        for act in acts
    ]
    return result
