"""The command ``python -m kvattn.pretrain --config FILE`` (``kvattn-train``): a config file in,
a run out, every refusal in one line.
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import fields, replace

from ..distributed import RendezvousError
from .config import PretrainConfig
from .run import pretrain


def config_help() -> str:
    """One line per :class:`PretrainConfig` field (name, type, default, description), generated
    from the dataclass, for ``python -m kvattn.pretrain --help``."""
    lines = ["PretrainConfig fields (keys of the --config JSON file):"]
    for f in fields(PretrainConfig):
        default = f.default_factory() if callable(f.default_factory) else f.default
        lines.append(
            f"  {f.name} ({f.type}, default {json.dumps(default)}): {f.metadata.get('help', '')}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """``python -m kvattn.pretrain --config FILE [--resume | --overwrite] [--steps N] [--out-dir
    DIR]``; ``--help`` lists the config fields. A bad config and every refusal of :func:`pretrain`
    exit 1 with one line that says why, not a traceback; a usage error exits 2."""
    parser = argparse.ArgumentParser(
        prog="python -m kvattn.pretrain",
        description=(pretrain.__doc__ or "").split("\n\n")[0],
        epilog=config_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--config", required=True, help="JSON file with PretrainConfig fields")
    runs = parser.add_mutually_exclusive_group()
    runs.add_argument("--resume", action="store_true", help="continue from out_dir/checkpoint")
    runs.add_argument(
        "--overwrite", action="store_true", help="replace a run already in out_dir (sets overwrite)"
    )
    parser.add_argument("--steps", type=int, help="override the number of steps")
    parser.add_argument("--out-dir", help="override out_dir")
    args = parser.parse_args(argv)
    overrides = {
        "steps": args.steps,
        "out_dir": args.out_dir,
        "overwrite": True if args.overwrite else None,
    }
    try:
        cfg = PretrainConfig.from_file(args.config)
        # replace() re-runs the validation on the overridden values
        cfg = replace(cfg, **{k: v for k, v in overrides.items() if v is not None})
    except (ValueError, TypeError, FileNotFoundError) as err:  # a bad config: say why, no traceback
        parser.exit(1, f"{parser.prog}: error: {err}\n")
    try:
        result = pretrain(cfg, resume=args.resume)
    except (FileExistsError, FileNotFoundError, ValueError, RendezvousError) as err:
        # pretrain's refusals carry their reason; a traceback would only bury it
        parser.exit(1, f"{parser.prog}: error: {err}\n")
    if int(os.environ.get("RANK", "0")) == 0:
        final = result.history.evals[-1] if result.history.evals else float("nan")
        print(
            f"done: {cfg.steps} steps, final validation loss {final:.4f}; checkpoint in "
            f"{result.out_dir / 'checkpoint'}"
        )
    return 0
