"""Designed experiments: the contrasts a chapter's claim calls for, with their statistics.

:func:`symmetry_contrast` tests the hypothesis of chapters 4–5 (Breslow 2026 states it and runs no
experiment; the design is ours): gated MLPs σ(a)·b work well *because* moving σ onto one factor
breaks the exchange and inverse-scale symmetries of the symmetric rank-1 form σ(a·b). The fair
contrast keeps σ and moves only where it sits: for each σ, symmetric σ(a·b) against gated
σ(a)·b, at matched parameter count, each at its own best learning rate, over paired seeds.

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

Statistics use ``scipy.stats`` (Student's t quantiles and tail probabilities).
"""

from __future__ import annotations

import json
import math
import multiprocessing
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field

import torch

from ._checks import (
    check_bool,
    check_device,
    check_fields,
    check_fraction,
    check_int,
    is_list_like,
    is_real,
    matches_hint,
)
from .data import TokenData, experiment
from .lm import TinyLM, TinyLMConfig
from .mlp import matched_slots, mlp_cost
from .stats import (
    check_paired_summary,
    equivalence_p,
    minimum_detectable_effect,
    paired_difference,
    t_interval,
)
from .symmetry import exchange_violation, trained_exchange_violation
from .train import MAX_LR, SeedRuns, train_lm_seeds

#: σ → (symmetric kind, gated kind) of :func:`kvattn.mlp.make_mlp`: the same σ in both places.
CONTRASTS = {
    "silu": ("symmetric_rank1", "swiglu"),
    "gelu": ("symmetric_rank1", "geglu"),
    "relu": ("symmetric_rank1", "reglu"),
}
#: Reference kinds beside the contrasts, no σ at all (a·b) and the plain key-value memory σ(x·k).
REFERENCES = {"bilinear": ("bilinear", None), "key_value": ("key_value", "relu")}
#: The Swish β a dose-response takes. At β = 1e-4, sigmoid(βz) − ½ ≈ βz/4 is a few hundred float32
#: rounding steps of ½ for z of order 1, and none below about 1e-7: layers of smaller β are (to
#: float32) the same bilinear ½ a·b. Above 1e3, sigmoid(βz) is the step function to float32 for
#: ``|z| > 0.02`` (every β is ReGLU); βz overflows float32 (NaN at z = 0) from about 3e38.
BETA_RANGE = (1e-4, 1e3)


@dataclass(frozen=True)
class Contrast:
    """Paired difference symmetric − gated for one σ (nats/token; positive: gated is lower).
    Raises ``ValueError`` for what no paired t-test gives: ``act`` not a str, a non-finite mean,
    se < 0, n < 2 (or not an int), t NaN (±inf only with se = 0), p outside [0, 1], mde < 0."""

    act: str
    mean: float
    se: float
    t: float
    p: float
    n: int
    mde: float  # minimum detectable effect at the design's alpha and power

    def __post_init__(self) -> None:
        # a record read from a file may hold anything; n < 2 or se < 0 would spoil the interval
        if not isinstance(self.act, str):
            raise ValueError(f"act must be a str naming the contrast's σ, got {self.act!r}")
        check_paired_summary(self.mean, self.se, self.n)
        if not matches_hint(self.t, float) or (math.isinf(self.t) and self.se > 0):
            raise ValueError(f"t must be a number, ±inf only when se = 0, got {self.t!r}")
        if not (is_real(self.p) and 0 <= self.p <= 1):
            raise ValueError(f"p must be a number in [0, 1], got {self.p!r}")
        if not (is_real(self.mde) and self.mde >= 0):
            raise ValueError(f"mde must be a finite number >= 0, got {self.mde!r}")

    @property
    def sd(self) -> float:
        """The standard deviation of the paired differences, se · √n (nats/token)."""
        return self.se * math.sqrt(self.n)

    def interval(self, level: float = 0.95) -> tuple[float, float]:
        """The two-sided Student-t confidence interval of the mean difference at ``level``
        (nats/token; :func:`kvattn.stats.t_interval`). Raises ``ValueError`` unless
        0 < level < 1."""
        return t_interval(self.mean, self.se, self.n, level)

    def equivalence_p(self, margin: float) -> float:
        """The p-value of the two one-sided tests that the mean difference lies inside
        (−``margin``, +``margin``) nats/token (:func:`kvattn.stats.equivalence_p`): a small value
        supports "no difference as large as margin". Raises ``ValueError`` unless margin is a
        positive finite number."""
        return equivalence_p(self.mean, self.se, self.n, margin)


@dataclass
class ContrastResult:
    """Everything :func:`symmetry_contrast` ran and concluded (plain data, JSON-ready via
    ``to_dict()``).

    ``selection[kind][lr]`` holds the final validation losses of the selection seeds;
    ``chosen_lr[kind]`` the rate each kind then used; ``final[kind]`` the test seeds' final
    validation losses (in ``test_seeds`` order); ``curves[kind]`` their validation curves at
    ``eval_steps``; ``late_drop[kind]`` the mean drop of validation loss over the last fifth of
    training (nats/token; near 0 when the curves have flattened); ``contrasts`` one
    :class:`Contrast` per σ.
    """

    design: dict
    selection: dict[str, dict[str, list[float]]]
    chosen_lr: dict[str, float]
    eval_steps: list[int]
    final: dict[str, list[float]]
    curves: dict[str, list[list[float]]]
    late_drop: dict[str, float]
    n_parameters: dict[str, int]
    contrasts: list[Contrast] = field(default_factory=list)

    @property
    def lr_at_edge(self) -> list[str]:
        """The kinds whose chosen rate is the smallest or largest of the grid (so their best rate
        may lie outside it, and the grid should be widened before their contrast is trusted)."""
        grid = self.design["lrs"]
        edge = []
        for kind, lr in self.chosen_lr.items():
            lrs = grid[kind] if isinstance(grid, dict) else grid
            if len(lrs) > 1 and lr in (min(lrs), max(lrs)):
                edge.append(kind)
        return edge

    def to_dict(self) -> dict:
        out = asdict(self)
        out["contrasts"] = [asdict(c) for c in self.contrasts]
        return out

    @classmethod
    def from_dict(cls, d: dict) -> ContrastResult:
        """The inverse of ``to_dict``; raises ``ValueError`` naming a missing or unknown key, a
        field whose value does not have its type (``final`` must map kinds to lists of numbers,
        ...), or a contrast (by index) that is not one (:class:`Contrast`)."""
        # the contrasts are records of their own, each checked below
        check_fields(cls, {**d, "contrasts": []} if isinstance(d, dict) and "contrasts" in d else d)
        if not isinstance(d["contrasts"], list):
            raise ValueError(f"ContrastResult: contrasts must be a list, got {d['contrasts']!r}")
        contrasts = []
        for i, c in enumerate(d["contrasts"]):
            try:
                check_fields(Contrast, c)
                contrasts.append(Contrast(**c))
            except ValueError as err:
                raise ValueError(f"contrasts[{i}]: {err}") from None
        return cls(**{**d, "contrasts": contrasts})


def paired_contrast(
    act: str, symmetric: Sequence[float], gated: Sequence[float], alpha: float, power: float
) -> Contrast:
    """The paired t-test of ``symmetric − gated`` (same seeds, same order), as a
    :class:`Contrast`.

    Raises
    ------
    ValueError
        ``act`` not a str; lists of different lengths or shorter than 2, a value that is not a
        finite number (each is named with its index; as :func:`kvattn.stats.paired_difference`),
        or bad ``alpha``/``power`` (as :func:`~kvattn.stats.minimum_detectable_effect`).
    """
    d = paired_difference(symmetric, gated, names=("symmetric", "gated"))
    mde = minimum_detectable_effect(d.sd, d.n, alpha, power)
    return Contrast(act, d.mean, d.se, d.t, d.p, d.n, mde)


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


def _duplicates(values: Iterable) -> list:
    """The values that occur more than once, each named once, in order of first occurrence."""
    seen, repeated = set(), []
    for value in values:
        if value in seen and value not in repeated:
            repeated.append(value)
        seen.add(value)
    return repeated


def _check_seeds(name: str, seeds: Sequence[int]) -> None:
    """Seeds are ints >= 0 and distinct: a seed given twice is one pair counted twice, which
    shrinks the standard error (to 0 for all-equal seeds: t = inf, p = 0)."""
    if not is_list_like(seeds):
        raise ValueError(f"{name} must be a sequence of ints, got {seeds!r}")
    if any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in seeds):
        raise ValueError(f"{name} must be ints >= 0, got {list(seeds)}")
    repeated = _duplicates(seeds)
    if repeated:
        raise ValueError(f"{name} has duplicates {repeated}, got {list(seeds)}")


def _check_recipe(
    tokens: TokenData,
    shape: dict[str, int],
    batch_size: int,
    device: torch.device | str,
    progress: bool,
    workers: int,
) -> None:
    """The arguments both designs share, checked before any training: a check that training
    makes itself would come only after the runs before it (or, for the validation stream, after
    the first run's first ``eval_every`` steps)."""
    if not isinstance(tokens, TokenData):
        raise TypeError(f"tokens must be a kvattn.data.TokenData, got {type(tokens).__name__}")
    for name, value in {**shape, "batch_size": batch_size}.items():
        check_int(name, value, low=1)
    block = shape["block_size"]
    for split in ("train", "val"):
        if len(getattr(tokens, split)) <= block:  # a window is block_size + 1 ids
            raise ValueError(
                f"block_size {block} needs more than {block} ids in tokens.{split}, which has "
                f"{len(getattr(tokens, split))}"
            )
    check_device("device", device)
    check_bool("progress", progress)
    check_int("workers", workers, low=1)


def _map(fn: Callable, jobs: list, workers: int) -> list:
    """``[fn(*job) for job in jobs]``, in ``workers`` processes when ``workers`` > 1."""
    if workers == 1 or len(jobs) < 2:
        return [fn(*job) for job in jobs]
    context = multiprocessing.get_context("spawn")  # a fork of a threaded torch can deadlock
    with ProcessPoolExecutor(min(workers, len(jobs)), context, initializer=_one_thread) as pool:
        return list(pool.map(fn, *zip(*jobs, strict=True)))


def _one_thread() -> None:
    torch.set_num_threads(1)


def _setup(
    d_model: int, n_layers: int, n_heads: int, block_size: int, **recipe: object
) -> tuple[int, dict, dict]:
    """The feed-forward budget (a key-value layer with 4·d_model slots), the model shape and the
    training recipe that every run of both designs shares."""
    budget = mlp_cost("key_value", d_model, 4 * d_model)[0]
    shape = dict(d_model=d_model, n_layers=n_layers, n_heads=n_heads, block_size=block_size)
    return budget, shape, recipe


def _config(
    tokens: TokenData,
    ffn: str,
    act: str | None,
    shape: dict,
    budget: int,
    beta: float | None = None,
) -> TinyLMConfig:
    form = {"key_value": "key_value", "symmetric_rank1": "symmetric_rank1"}.get(ffn, "gated")
    return TinyLMConfig(
        vocab_size=tokens.vocab_size,
        ffn=ffn,
        act=act,
        beta=beta,
        n_slots=matched_slots(form, shape["d_model"], budget),
        **shape,
    )


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
        :data:`kvattn.train.MAX_LR`, an empty grid, a rate twice
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


@dataclass
class DoseResponse:
    """Swish-β gated layers σ_β(a)·b trained at several β (plain data, JSON-ready via
    ``to_dict()``).

    ``final[i][s]`` is the final validation loss (nats/token) at ``betas[i]`` and seed
    ``seeds[s]``; ``violation[i][s]`` the exchange violation of that trained layer on its own
    inputs (:func:`kvattn.symmetry.trained_exchange_violation`); ``gaussian[i]`` the violation of
    σ_β for independent standard normal a, b (:func:`kvattn.symmetry.exchange_violation`).
    ``slope`` is the paired summary: for each seed, the least-squares slope of final loss against
    trained violation across β; ``slope`` the mean over seeds, with ``slope_se``, ``slope_t``,
    ``slope_p`` (two-sided, n − 1 degrees of freedom).
    """

    design: dict
    betas: list[float]
    seeds: list[int]
    final: list[list[float]]
    violation: list[list[float]]
    gaussian: list[float]
    slope: float
    slope_se: float
    slope_t: float
    slope_p: float

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> DoseResponse:
        """The inverse of ``to_dict``; raises ``ValueError`` naming a missing or unknown key or a
        field whose value does not have its type."""
        check_fields(cls, d)
        return cls(**d)


@dataclass
class ShippedExperiment:
    """Chapter 5's experiments as shipped in ``data/experiments/<name>.json``: the contrast, the
    dose-response (``None`` if the run had no SiLU kinds) and how they were made (``provenance``:
    torch, device, corpus, seconds, and the command as it was run)."""

    name: str
    contrast: ContrastResult
    dose_response: DoseResponse | None
    provenance: dict

    @property
    def command(self) -> str:
        """The command that remakes this file, ``kvattn-reproduce experiment <name>``. It runs
        the design that ``data/plans/experiments.json`` records for it (the arguments it ran
        with) and writes ``reproduced/experiments/<name>.json`` (``--out data --overwrite``
        replaces the shipped file). ``provenance["command"]`` is the command as it was run."""
        return f"kvattn-reproduce experiment {self.name}"


def load_shipped(name: str = "symmetry_contrast") -> ShippedExperiment:
    """Read the results that ``kvattn-reproduce experiment`` writes to
    ``data/experiments/<name>.json`` (plain JSON; nothing is unpickled).

    Raises
    ------
    FileNotFoundError
        No such shipped experiment (the message lists them).
    ValueError
        The file is not the tool's output: a missing or unknown key, a value of the wrong type
        or a contrast no paired t-test gives (:class:`Contrast`) is named with the file.
    """
    raw = json.loads(experiment(name).read_text())
    if not isinstance(raw, dict):
        raise ValueError(f"data/experiments/{name}.json does not hold a JSON object")
    raw = dict(raw)
    dose = raw.pop("dose_response", None)
    provenance = raw.pop("provenance", None)
    if not isinstance(provenance, dict):
        raise ValueError(f"data/experiments/{name}.json has no provenance object")
    try:
        contrast = ContrastResult.from_dict(raw)
        dose = DoseResponse.from_dict(dose) if dose is not None else None
    except ValueError as err:
        raise ValueError(f"data/experiments/{name}.json: {err}") from None
    return ShippedExperiment(name, contrast, dose, provenance)


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
        ``betas`` not a sequence of positive finite numbers, a β outside :data:`BETA_RANGE`, a β
        twice or fewer than 2 β; ``seeds`` not a sequence of ints >= 0, a seed twice or fewer
        than 2 seeds.
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
        β that is not a positive number in :data:`BETA_RANGE`, a seed that is not an int >= 0);
        ``lr`` not a positive finite number below :data:`kvattn.train.MAX_LR`; ``d_model``,
        ``n_heads``, ``block_size``, ``steps``, ``batch_size``, ``workers`` not ints >= 1,
        ``d_model`` not divisible by ``n_heads``, a token stream of ``tokens`` no longer than
        ``block_size``; ``progress`` not a bool; a ``device`` torch does not know or this
        machine lacks; after training, a seed whose trained layers have the same violation at
        every β (its slope would be 0/0).
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
