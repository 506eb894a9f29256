"""Benchmark PLDR-LLM against a same-size GPT: training step time, generation speed per decoding
mode, peak memory. Everything is measured side by side in one run and reported as ratios of
medians (machines are noisy; absolute times are printed for context only).

    python -m kvattn.benchmark                  # the course's tiny and a mid-size config
    python -m kvattn.benchmark --configs 110M   # the published size (on a GPU)
    python -m kvattn.benchmark --json out.json  # also write the numbers as JSON

The book's *Benchmarks* appendix runs :func:`bench` on the machine that builds it.

Ratios reported, per configuration:

* train step time PLDR-LLM / GPT, and the metric learner's share of the PLDR step
  (1 − constant-G step / PLDR step);
* generation tokens/s of 256 new tokens: KV + G cache (mode "kv+g") / no cache, exact KV cache
  (mode "kv") / no cache, and PLDR-LLM with KV + G cache / GPT with KV cache;
* peak memory of each (CUDA only; CPU peak memory is not tracked per measurement).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

from .pldr import GPT, PLDRLLM, PUBLISHED_110M, PLDRConfig
from .train import lm_cross_entropy

CONFIGS = {
    "tiny": dict(
        vocab_size=1024,
        hidden_size=64,
        num_attention_heads=4,
        num_hidden_layers=2,
        num_reslayerA=2,
        num_denseA=2,
        max_position_embeddings=512,
    ),
    "mid": dict(
        vocab_size=8192,
        hidden_size=256,
        num_attention_heads=4,
        num_hidden_layers=4,
        num_reslayerA=4,
        num_denseA=2,
        max_position_embeddings=512,
    ),
    "110M": PUBLISHED_110M,
}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn: Callable[[], object], device: torch.device, repeats: int) -> float:
    """Median wall time of ``fn()`` in seconds over ``repeats`` runs, after one warm-up run."""
    fn()
    times = []
    for _ in range(repeats):
        _sync(device)
        start = time.perf_counter()
        fn()
        _sync(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def peak_memory(fn: Callable[[], object], device: torch.device) -> float | None:
    """Peak CUDA memory of ``fn()`` in MiB (None off CUDA)."""
    if device.type != "cuda":
        return None
    torch.cuda.reset_peak_memory_stats(device)
    fn()
    _sync(device)
    return torch.cuda.max_memory_allocated(device) / 2**20


def bench(
    name: str,
    cfg: PLDRConfig,
    device: torch.device,
    batch: int,
    seq: int,
    new_tokens: int,
    repeats: int,
    amp: bool,
) -> dict:
    """Measure one configuration; returns the medians and ratios as a dict (see :func:`report`).

    ``batch`` × ``seq`` tokens per training step; generation continues a ``seq/2``-token prompt
    by ``new_tokens`` tokens; ``amp`` runs bf16 autocast (CUDA).
    """
    torch.manual_seed(0)
    models = {
        "pldr": PLDRLLM(cfg).to(device),
        "constant_g": PLDRLLM(
            PLDRConfig.from_dict({**cfg.to_dict(), "custom_G_type": "identity"})
        ).to(device),
        "gpt": GPT(cfg).to(device),
    }
    ids = torch.randint(4, cfg.vocab_size, (batch, seq + 1), device=device)
    autocast = dict(device_type=device.type, dtype=torch.bfloat16, enabled=amp)
    out: dict = {
        "config": name,
        "device": str(device),
        "batch": batch,
        "seq": seq,
        "parameters": {k: m.num_parameters() for k, m in models.items()},
    }

    def train_step(model):
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

        def step():
            with torch.autocast(**autocast):
                loss = lm_cross_entropy(model(ids[:, :-1]).logits, ids[:, 1:])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

        return step

    step_time = {k: timed(train_step(m), device, repeats) for k, m in models.items()}
    out["train_step_s"] = step_time
    out["train_pldr_over_gpt"] = step_time["pldr"] / step_time["gpt"]
    out["metric_learner_share"] = 1 - step_time["constant_g"] / step_time["pldr"]
    out["train_peak_mib"] = {k: peak_memory(train_step(m), device) for k, m in models.items()}

    prompt = ids[:1, : seq // 2]
    gen_time = {}
    for label, model, cache in [
        ("pldr none", models["pldr"], "none"),
        ("pldr kv", models["pldr"], "kv"),
        ("pldr kv+g", models["pldr"], "kv+g"),
        ("gpt kv", models["gpt"], "kv"),
    ]:

        def run(model=model, cache=cache):
            with torch.autocast(**autocast):
                model.generate(prompt, new_tokens, cache=cache)

        gen_time[label] = timed(run, device, max(1, repeats // 2))
        out.setdefault("generate_peak_mib", {})[label] = peak_memory(run, device)
    tps = {k: new_tokens / t for k, t in gen_time.items()}
    out["generate_tokens_per_s"] = tps
    out["kvg_over_none"] = tps["pldr kv+g"] / tps["pldr none"]
    out["kv_over_none"] = tps["pldr kv"] / tps["pldr none"]
    out["pldr_kvg_over_gpt_kv"] = tps["pldr kv+g"] / tps["gpt kv"]
    return out


def report(r: dict) -> str:
    """A plain-text summary of one :func:`bench` result."""
    lines = [
        f"== {r['config']} on {r['device']} (batch {r['batch']}, sequence {r['seq']}; "
        f"parameters PLDR {r['parameters']['pldr']:,}, GPT {r['parameters']['gpt']:,})",
        f"train step  PLDR / GPT                 {r['train_pldr_over_gpt']:6.2f}x   "
        f"(medians {r['train_step_s']['pldr'] * 1e3:.1f} ms vs "
        f"{r['train_step_s']['gpt'] * 1e3:.1f} ms)",
        f"            metric learner's share     {r['metric_learner_share']:6.1%}",
        f"generate    kv+g / no cache            {r['kvg_over_none']:6.2f}x   (goal >= 3x)",
        f"            kv / no cache              {r['kv_over_none']:6.2f}x",
        f"            PLDR kv+g / GPT kv         {r['pldr_kvg_over_gpt_kv']:6.2f}x"
        "   (goal >= 0.9x)",
        "            tokens/s: "
        + ", ".join(f"{k} {v:.0f}" for k, v in r["generate_tokens_per_s"].items()),
    ]
    if r["train_peak_mib"]["pldr"] is not None:
        lines.append(
            "peak memory (MiB): train "
            + ", ".join(f"{k} {v:.0f}" for k, v in r["train_peak_mib"].items())
            + "; generate "
            + ", ".join(f"{k} {v:.0f}" for k, v in r["generate_peak_mib"].items())
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command line: ``python -m kvattn.benchmark [--configs ...] [--json FILE]``."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--configs", nargs="+", default=["tiny", "mid"], choices=list(CONFIGS))
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-amp", action="store_true", help="no bf16 autocast on CUDA")
    parser.add_argument("--json", type=Path, help="write the results as JSON")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    amp = device.type == "cuda" and not args.no_amp
    results = []
    for name in args.configs:
        cfg = PLDRConfig(**CONFIGS[name])
        r = bench(name, cfg, device, args.batch, args.seq, args.new_tokens, args.repeats, amp)
        results.append(r)
        print(report(r), flush=True)
    if args.json:
        args.json.write_text(json.dumps({"torch": torch.__version__, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
