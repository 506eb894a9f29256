"""Chapter 5's experiments (``data/experiments/<name>.json``): the symmetric-vs-gated contrast
and its Swish-β dose-response, from a design given as command-line options (the plans in
``data/plans/experiments.json`` are lists of these options)."""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

import torch

from .. import data, experiments
from .._checks import int_argument
from ..data import MIN_VOCAB_SIZE, TokenData
from .files import ReproduceError

#: The grid of rates a design searches when it names neither ``--lrs`` nor ``--rates-from``.
DEFAULT_LRS = (3e-3, 1e-2, 3e-2)
#: The Swish-β values of the dose-response when a design with SiLU names none.
DEFAULT_BETAS = (0.25, 0.5, 1.0, 2.0, 8.0)
#: The design's keys that :func:`kvattn.experiments.symmetry_contrast` takes as they are.
CONTRAST_KEYS = ("acts", "steps", "lrs", "select_seeds", "test_seeds", "references")


def contrast_parser() -> argparse.ArgumentParser:
    """The options of a contrast design (a parent parser: no help of its own)."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--steps", type=int_argument(1), default=1000)
    p.add_argument("--vocab-size", type=int_argument(MIN_VOCAB_SIZE), default=512)
    rates = p.add_mutually_exclusive_group()
    rates.add_argument(
        "--lrs",
        type=float,
        nargs="+",
        help=f"the grid each kind chooses its rate from (default {list(DEFAULT_LRS)})",
    )
    rates.add_argument(
        "--rates-from",
        metavar="NAME",
        help="instead of --lrs, train every kind at the rate that the shipped experiment "
        "data/experiments/NAME.json chose for it (a follow-up: no selection runs)",
    )
    p.add_argument(
        "--select-seeds",
        type=int_argument(1),
        default=1,
        help="seeds 1000, 1001, ... (ignored with a single rate: nothing to choose)",
    )
    p.add_argument("--test-seeds", type=int_argument(2), default=8, help="how many test seeds")
    p.add_argument(
        "--first-test-seed",
        type=int_argument(0),
        default=0,
        help="test seeds are first, first + 1, ... (a confirmatory run uses seeds not yet seen)",
    )
    p.add_argument("--acts", nargs="+", default=list(experiments.CONTRASTS))
    p.add_argument(
        "--betas",
        type=float,
        nargs="*",
        help=f"Swish-β values of the dose-response, which needs SiLU in --acts (default "
        f"{list(DEFAULT_BETAS)} with SiLU; none given: skip it)",
    )
    p.add_argument(
        "--no-references",
        action="store_true",
        help="train only the symmetric and gated kinds (no bilinear and key-value references)",
    )
    return p


def contrast_design(options: Sequence[str]) -> dict:
    """Parse and check a contrast design given as command-line options (as in the plans): a dict of
    :data:`~kvattn.reproduce.contrast.CONTRAST_KEYS`, ``vocab_size`` and the dose-response's
    ``betas``.

    Raises
    ------
    ~kvattn.reproduce.files.ReproduceError
        An option that does not parse, or a design that the experiment would refuse (checked
        here, before any training).
    """
    parser = contrast_parser()
    parser.error = _refuse  # type: ignore[method-assign]  # an error, not an exit, for a plan
    return design_from(parser.parse_args(list(options)))


def _refuse(message: str) -> None:
    raise ReproduceError(f"the contrast options do not parse: {message}")


def design_from(args: argparse.Namespace) -> dict:
    """The checked design from parsed contrast options (:func:`contrast_parser`).

    Raises
    ------
    ~kvattn.reproduce.files.ReproduceError
        As :func:`contrast_design`.
    """
    unknown = sorted(set(args.acts) - set(experiments.CONTRASTS))
    if unknown:
        raise ReproduceError(
            f"unknown --acts {unknown}; the contrasts: {list(experiments.CONTRASTS)}"
        )
    if args.betas and "silu" not in args.acts:
        raise ReproduceError(
            f"--betas {args.betas} asks for the Swish-β dose-response, which needs silu in --acts"
        )
    references = not args.no_references
    lrs: list[float] | dict[str, list[float]] = list(args.lrs or DEFAULT_LRS)
    if args.rates_from:
        try:
            chosen = experiments.load_shipped(args.rates_from).contrast.chosen_lr
        except (FileNotFoundError, TypeError, ValueError) as err:
            raise ReproduceError(f"--rates-from {args.rates_from}: {err}") from None
        names = experiments.kinds(args.acts, references)
        missing = sorted(set(names) - set(chosen))
        if missing:
            raise ReproduceError(f"{args.rates_from} chose no rate for {missing}")
        lrs = {name: [chosen[name]] for name in names}
    betas = list(DEFAULT_BETAS if args.betas is None and "silu" in args.acts else args.betas or [])
    design = {
        "acts": args.acts,
        "steps": args.steps,
        "lrs": lrs,
        "select_seeds": [1000 + i for i in range(args.select_seeds)],
        "test_seeds": list(range(args.first_test_seed, args.first_test_seed + args.test_seeds)),
        "references": references,
        "vocab_size": args.vocab_size,
        "betas": betas,
    }
    try:
        experiments.check_contrast_design(**{k: design[k] for k in CONTRAST_KEYS})
        if betas:
            experiments.check_dose_design(betas=betas, seeds=design["test_seeds"])
    except (TypeError, ValueError) as err:
        raise ReproduceError(f"the design is refused: {err}") from None
    return design


def tokens_for(designs: Sequence[dict]) -> dict[int, TokenData]:
    """The tokenised corpus of every vocabulary size the designs use, made before any training
    so that a size the text cannot support is refused first.

    Raises
    ------
    ~kvattn.reproduce.files.ReproduceError
        A vocabulary SentencePiece cannot train on the corpus (the message gives the largest).
    """
    tokens = {}
    for vocab_size in sorted({d["vocab_size"] for d in designs}):
        try:
            tokens[vocab_size] = data.tokenize(data.load_text("pydoc"), vocab_size=vocab_size)
        except ValueError as err:
            raise ReproduceError(f"--vocab-size {vocab_size}: {err}") from None
    return tokens


def run_contrast(design: dict, tokens: TokenData, device: str, workers: int, command: str) -> dict:
    """Train a contrast design (:func:`contrast_design`) on ``tokens`` and, when it has β
    values, the Swish-β dose-response at the rate the contrast chose for SiLU gated; return the
    record the course ships: the results, the dose-response and the provenance."""
    start = time.perf_counter()
    result = experiments.symmetry_contrast(
        tokens, **{k: design[k] for k in CONTRAST_KEYS}, device=device, workers=workers
    )
    dose = None
    if design["betas"]:
        dose = experiments.swish_beta_dose_response(
            tokens,
            betas=design["betas"],
            seeds=design["test_seeds"],
            steps=design["steps"],
            lr=result.chosen_lr["silu gated"],
            device=device,
            workers=workers,
        )
    return {
        **result.to_dict(),
        "dose_response": dose.to_dict() if dose else None,
        "provenance": {
            "torch": torch.__version__,
            "device": torch.cuda.get_device_name() if device.startswith("cuda") else "cpu",
            "corpus": "pydoc",
            "seconds": round(time.perf_counter() - start),
            "command": command,
        },
    }


def summary(record: dict) -> str:
    """The contrasts and the dose-response slope of a record, one line each."""
    result = experiments.ContrastResult.from_dict(
        {k: v for k, v in record.items() if k not in ("dose_response", "provenance")}
    )
    lines = [
        f"{c.act}: symmetric − gated {c.mean:+.4f} ± {c.se:.4f} nats/token (p = {c.p:.3f}, "
        f"n = {c.n}); minimum detectable effect {c.mde:.4f}"
        for c in result.contrasts
    ]
    if record["dose_response"]:
        dose = experiments.DoseResponse.from_dict(record["dose_response"])
        lines.append(
            f"Swish-β: slope {dose.slope:+.4f} ± {dose.slope_se:.4f} nats/token per unit "
            f"exchange violation (p = {dose.slope_p:.3f})"
        )
    if result.lr_at_edge:
        lines.append(f"warning: the chosen rate is at the edge of the grid for {result.lr_at_edge}")
    return "\n".join(lines)
