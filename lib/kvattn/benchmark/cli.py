"""Benchmark PLDR-LLM against a same-size GPT: training step time, generation speed per decoding
mode, peak memory. Everything is measured side by side and reported as ratios with their spread.

    python -m kvattn.benchmark                  # the course's tiny and a mid-size config
    python -m kvattn.benchmark --configs 110M   # the published size (on a GPU)
    python -m kvattn.benchmark --json out.json  # also write the numbers as JSON
    python -m kvattn.benchmark --compile        # also the training step under torch.compile
    python -m kvattn.benchmark --fused-adamw    # every model steps with the fused AdamW

How it measures. The variants being compared run *interleaved*: every round times each variant
once, in an order that rotates from round to round, and each ratio is taken within a round. A
busy machine slows all variants of one round alike, so the per-round ratios cancel most of the
load that absolute times would carry. Rounds go on until every ratio's interquartile range is
within ``target_spread`` of its median or the time budget ends; the report gives the median ratio,
its quartiles and the number of rounds.

Ratios reported, per configuration:

* training step time PLDR-LLM / GPT, and the metric learner's share of the PLDR step
  (1 − constant-G step / PLDR step), each beside the same ratio in FLOPs (PyTorch's FLOP counter:
  matrix products and attention, forward and backward) and in kernel calls
  (:class:`~kvattn.benchmark.counting.KernelCalls`: the operators an eager step runs, views
  excluded), and each model's achieved FLOP/s: a time ratio far above its FLOP ratio, towards its
  call ratio, means the extra work runs below the hardware's speed (many small kernels, each with
  a fixed cost), not that there is more of it;
* generation speed-ups of ``new_tokens`` new tokens over no cache (mode ``"none"``): the KV + G
  cache (``"kv+g"``) and the exact KV cache (``"kv"``), the KV + G cache over the exact one (what
  caching G_LM adds), and the speed of PLDR-LLM with the KV + G cache over GPT with its KV cache,
  split at the constant-G model with its KV cache (which does per generated token exactly the
  work that the KV + G cache leaves: GPT's plus one ``q G_LM`` product per layer), whose speed
  over GPT's is the best that ratio can reach;
* peak memory of each model: the most alive at once during the measured call, of what the
  model holds when it starts (weights, buffers, and for a training step the last step's
  gradients and AdamW's two moments per weight) and of what the call allocates (on CUDA from
  the allocator's statistics, elsewhere by :class:`~kvattn.benchmark.counting.TensorMemory`,
  which adds up the storages of the tensors alive at once);
* each model's achieved FLOP/s as a fraction of the FLOP/s that one large square matrix product
  reaches on the same device and dtype (:func:`~kvattn.benchmark.counting.matmul_rate`: the
  device's practical peak, measured, rather than a datasheet number);
* with :func:`~kvattn.benchmark.runs.bench_density`, the prefix-consistent density (one
  metric-learner pass per position) against the published block density: step time, FLOPs and
  peak memory.

Each ratio with a target of the course is printed with it and whether it is met
(:data:`~kvattn.benchmark.reporting.BARS`). With ``compile=True`` (``--compile``) the training step
is measured on ``torch.compile``-d models, each one's compile time reported; with
``fused_adamw=True`` (``--fused-adamw``) every model steps with PyTorch's fused AdamW kernel
instead of training's default foreach one.

A ratio that cannot be right, or that did not settle, is *flagged* rather than printed as a
result: a share outside [0, 1] (impossible); a PLDR-LLM training step, or its generation with
the KV + G cache, faster than GPT's (implausible: it does all of GPT's work and more); a cache
slower than no cache (possible for a tiny model and a few tokens, where the per-token
bookkeeping outweighs the recomputation it saves, but suspicious); a ratio whose interquartile
range is wider than :data:`~kvattn.benchmark.timing.UNSTABLE_SPREAD` of its median.

The book's *Benchmarks* appendix runs :func:`~kvattn.benchmark.runs.bench_train` and
:func:`~kvattn.benchmark.runs.bench_generate` cell by cell, each within its time budget; chapter 9
runs :func:`~kvattn.benchmark.runs.bench_generate` on its trained model.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch

from .._checks import int_argument
from .._files import write_bytes
from ..config import PLDRConfig
from ..train import default_autocast
from .reporting import as_json, machine, report
from .runs import CONFIGS, _check_run, _check_step, bench_density, bench_generate, bench_train
from .timing import _check_device, _check_seconds


def _seconds(text: str) -> float:
    """An argparse type: a positive, finite number of seconds."""
    try:
        value = float(text)
        _check_seconds(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be a positive number of seconds, got {text!r}"
        ) from None
    return value


def _device(text: str) -> torch.device:
    """An argparse type: a device that this machine has."""
    try:
        device = torch.device(text)
    except RuntimeError:
        raise argparse.ArgumentTypeError(
            f"expected a torch device (cpu, cuda, cuda:1, mps), got {text!r}"
        ) from None
    try:
        _check_device(device)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return device


def main(argv: list[str] | None = None, *, prog: str | None = None) -> int:
    """Command line: ``python -m kvattn.benchmark [--configs ...] [--json FILE]`` (console script
    ``kvattn-benchmark``); ``argv`` defaults to ``sys.argv[1:]``, ``prog`` (the name the usage
    line shows) to the script's name. Prints a :func:`~kvattn.benchmark.reporting.report` per
    measurement as it ends, and returns the exit code 0.

    Every argument is checked against every configuration it will be used with, and the
    ``--json`` file's folder, before anything is measured: a bad one exits with a usage error
    (exit code 2). ``--json`` never replaces an existing file unless ``--overwrite`` is given.
    """
    parser = argparse.ArgumentParser(  # the module's docstring, what is measured and how
        prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--configs", nargs="+", default=["tiny", "mid"], choices=list(CONFIGS))
    parser.add_argument(
        "--device", type=_device, default="cuda" if torch.cuda.is_available() else "cpu"
    )
    parser.add_argument("--batch", type=int_argument(1), default=8)
    parser.add_argument(
        "--seq",
        type=int_argument(2, " (the generation prompt is --seq // 2 tokens)"),
        default=128,
    )
    parser.add_argument("--new-tokens", type=int_argument(1), default=256)
    parser.add_argument(
        "--budget", type=_seconds, default=60.0, help="seconds per measurement (default 60)"
    )
    parser.add_argument("--no-amp", action="store_true", help="float32 even where bf16 is native")
    parser.add_argument(
        "--compile",
        action="store_true",
        help="also time the training step of torch.compile-d models (reports compile times)",
    )
    parser.add_argument(
        "--fused-adamw",
        action="store_true",
        help="step every model with PyTorch's fused AdamW kernel (default: foreach, as training)",
    )
    parser.add_argument(
        "--density-configs",
        nargs="*",
        choices=list(CONFIGS),
        help="configs of --configs whose prefix density is measured against the block density "
        "(default: tiny, when --configs has it; the prefix density's memory grows with seq: keep "
        "it small)",
    )
    parser.add_argument("--json", type=Path, help="write the results as JSON")
    parser.add_argument(
        "--overwrite", action="store_true", help="let --json replace an existing file"
    )
    args = parser.parse_args(argv)
    device = args.device
    dtype = None if args.no_amp else default_autocast(device)
    prompt_len = args.seq // 2
    for option, names in (("--configs", args.configs), ("--density-configs", args.density_configs)):
        repeated = sorted({n for n in names or [] if names.count(n) > 1})
        if repeated:
            parser.error(f"{option} names {repeated} more than once")
    if args.density_configs is None:
        args.density_configs = [n for n in ("tiny",) if n in args.configs]
    unmeasured = [n for n in args.density_configs if n not in args.configs]
    if unmeasured:
        parser.error(
            f"--density-configs {unmeasured} are not in --configs {args.configs}: only the "
            "configs measured can have their density measured"
        )
    configs = [(name, PLDRConfig(**CONFIGS[name])) for name in args.configs]
    for name, cfg in configs:
        try:
            _check_run(name, cfg, device, args.budget, dtype)
            _check_step(cfg, args.batch, args.seq)
        except (TypeError, ValueError) as err:
            parser.error(f"config {name!r}: {err}")
        if prompt_len + args.new_tokens > cfg.max_position_embeddings:
            parser.error(
                f"--seq {args.seq} with --new-tokens {args.new_tokens} does not fit config "
                f"{name!r}: the prompt (--seq // 2 = {prompt_len} tokens) and the new tokens "
                f"exceed max_position_embeddings = {cfg.max_position_embeddings}"
            )
    if args.json is not None:
        # a link is written through to its target: the target's folder must exist
        folder = (args.json.resolve() if args.json.is_symlink() else args.json).parent
        if args.json.is_dir():
            parser.error(f"--json {args.json} is a folder, expected a file to write")
        if not folder.is_dir():
            parser.error(f"--json {args.json}: the folder {folder} does not exist")
        if (args.json.exists() or args.json.is_symlink()) and not args.overwrite:
            parser.error(f"--json {args.json} exists: pass --overwrite to replace it")
        if not os.access(folder, os.W_OK):
            parser.error(f"--json {args.json}: the folder {folder} is not writable")
    results = []
    common = dict(budget_s=args.budget, autocast=dtype)  # every measurement's
    step = dict(batch=args.batch, seq=args.seq, **common)  # the training steps'
    for name, cfg in configs:
        r = bench_train(name, cfg, device, fused_adamw=args.fused_adamw, **step)
        r.update(
            bench_generate(
                name, cfg, device, prompt_len=prompt_len, new_tokens=args.new_tokens, **common
            )
        )
        results.append(as_json(r))
        print(report(r), flush=True)
        if args.compile:
            rc = bench_train(name, cfg, device, compile=True, fused_adamw=args.fused_adamw, **step)
            results.append(as_json(rc))
            print(report(rc), flush=True)
        if name in args.density_configs:
            rd = bench_density(name, cfg, device, **step)
            results.append(as_json(rd))
            print(report(rd), flush=True)
    if args.json:
        record = {
            "machine": machine(device),
            "command": "python -m kvattn.benchmark " + " ".join(argv or sys.argv[1:]),
            "results": results,
        }
        # whole, so a kill leaves the old record or the new one; a ratio of a zero time may be
        # inf, which Python's JSON writes as Infinity rather than lose the run at its end
        write_bytes(args.json, (json.dumps(record, indent=1) + "\n").encode())
    return 0
