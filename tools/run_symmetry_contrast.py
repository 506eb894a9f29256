"""Run chapter 5's experiments and save their results as a small JSON file that the chapter reads:
the symmetric-vs-gated contrast (kvattn.experiments.symmetry_contrast), then the Swish-β
dose-response (kvattn.experiments.swish_beta_dose_response) at the rate that the contrast chose
for SiLU gated.

    python tools/run_symmetry_contrast.py --workers 2        # the shipped CPU-budget design
    python tools/run_symmetry_contrast.py --steps 200 --test-seeds 3 --out /tmp/pilot.json

The default design trains 8 kinds × (3 rates × 1 selection seed + 8 test seeds) = 88 models and
5 β × 8 seeds = 40 more, each 1,000 steps at vocabulary 512: about 50 minutes on two CPU cores
(`--workers 2`), a few minutes on a GPU. The output records the design, the torch version, the
device and the wall time beside every result, so a reader can tell how it was made.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

from kvattn import data, experiments

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "data" / "experiments" / "symmetry_contrast.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--vocab-size", type=int, default=512)
    parser.add_argument("--lrs", type=float, nargs="+", default=[3e-3, 1e-2, 3e-2])
    parser.add_argument(
        "--rates-from",
        metavar="NAME",
        help="instead of --lrs, train every kind at the rate that the shipped experiment "
        "data/experiments/NAME.json chose for it (a follow-up: no selection runs)",
    )
    parser.add_argument(
        "--select-seeds",
        type=int,
        default=1,
        help="seeds 1000, 1001, ... (ignored with a single rate: nothing to choose)",
    )
    parser.add_argument("--test-seeds", type=int, default=8, help="how many test seeds")
    parser.add_argument(
        "--first-test-seed",
        type=int,
        default=0,
        help="test seeds are first, first + 1, ... (a confirmatory run uses seeds not yet seen)",
    )
    parser.add_argument("--acts", nargs="+", default=list(experiments.CONTRASTS))
    parser.add_argument(
        "--betas",
        type=float,
        nargs="*",
        default=[0.25, 0.5, 1.0, 2.0, 8.0],
        help="Swish-β values of the dose-response (none: skip it)",
    )
    parser.add_argument("--workers", type=int, default=1, help="processes, one thread each")
    parser.add_argument(
        "--no-references",
        action="store_true",
        help="train only the symmetric and gated kinds (no bilinear and key-value references)",
    )
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    if args.device == "cpu":
        torch.set_num_threads(1)  # tiny models: one thread is fastest and leaves cores free
    tokens = data.tokenize(data.load_text("pydoc"), vocab_size=args.vocab_size)
    lrs = args.lrs
    if args.rates_from:
        chosen = experiments.load_shipped(args.rates_from).contrast.chosen_lr
        names = experiments.kinds(args.acts, not args.no_references)
        missing = sorted(set(names) - set(chosen))
        if missing:
            parser.error(f"{args.rates_from} chose no rate for {missing}")
        lrs = {name: [chosen[name]] for name in names}
    start = time.perf_counter()
    result = experiments.symmetry_contrast(
        tokens,
        acts=args.acts,
        steps=args.steps,
        lrs=lrs,
        select_seeds=[1000 + i for i in range(args.select_seeds)],
        test_seeds=list(range(args.first_test_seed, args.first_test_seed + args.test_seeds)),
        device=args.device,
        workers=args.workers,
        references=not args.no_references,
    )
    dose = None
    if args.betas and "silu gated" in result.chosen_lr:
        dose = experiments.swish_beta_dose_response(
            tokens,
            betas=args.betas,
            seeds=list(range(args.first_test_seed, args.first_test_seed + args.test_seeds)),
            steps=args.steps,
            lr=result.chosen_lr["silu gated"],
            device=args.device,
            workers=args.workers,
        )
    out = {
        **result.to_dict(),
        "dose_response": dose.to_dict() if dose else None,
        "provenance": {
            "torch": torch.__version__,
            "device": torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu",
            "corpus": "pydoc",
            "seconds": round(time.perf_counter() - start),
            "command": " ".join(["python tools/run_symmetry_contrast.py", *(argv or sys.argv[1:])]),
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1))
    for c in result.contrasts:
        print(
            f"{c.act}: symmetric − gated {c.mean:+.4f} ± {c.se:.4f} nats/token (p = {c.p:.3f}, "
            f"n = {c.n}); minimum detectable effect {c.mde:.4f}"
        )
    print(f"late drop of validation loss per kind: {result.late_drop}")
    if dose:
        print(
            f"Swish-β: loss against trained exchange violation, slope {dose.slope:+.4f} ± "
            f"{dose.slope_se:.4f} nats/token per unit violation (p = {dose.slope_p:.3f})"
        )
    if result.lr_at_edge:
        print(f"warning: the chosen rate is at the edge of the grid for {result.lr_at_edge}")
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
