"""A benchmark's results: as text (:func:`report`, which says for each ratio with a target in
:data:`BARS` whether it is met and prints a ⚠ line under each flagged one), as JSON
(:func:`as_json`), with the machine they were measured on (:func:`machine`), and read back from a
``--json`` record (:func:`load_results`) so that :func:`report` prints a stored run as it printed
the live one.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
from dataclasses import asdict, fields
from pathlib import Path

import torch

from .timing import Ratio

#: The course's targets, which the report checks where it prints each ratio. The PLDR / GPT step
#: time may be at most ``train_over_flops`` times the same ratio in FLOPs, the metric learner's
#: share of the time at most its share of the FLOPs plus ``share_over_flops``; decoding with the
#: KV + G cache must be at least ``kvg_over_none`` times as fast as without a cache, and PLDR with
#: it at least ``pldr_kvg_over_gpt_kv`` times as fast as GPT with its KV cache.
BARS = {
    "train_over_flops": 1.1,
    "share_over_flops": 0.10,
    "kvg_over_none": 5.0,
    "pldr_kvg_over_gpt_kv": 0.95,
}

# the keys of a Ratio written by as_json: a dict with exactly these is read back as a Ratio
_RATIO_FIELDS = {f.name for f in fields(Ratio)}


def _line(label: str, r: Ratio, note: str = "") -> str:
    """One ratio's line: its median (a percentage for a share) and quartiles, its rounds,
    ``note``, and a ⚠ line under it when it is flagged."""
    value = f"{r.median:6.1%}" if "share" in label else f"{r.median:6.2f}x"
    quart = f"[{r.q1:.1%}, {r.q3:.1%}]" if "share" in label else f"[{r.q1:.2f}, {r.q3:.2f}]"
    line = f"{label:38s} {value}  middle half {quart}, {r.rounds} rounds{note}"
    return line + (f"\n{'':38s} ⚠ {r.flag}" if r.flag else "")


def _verdict(met: bool, bar: str) -> str:
    """The note that says whether a ratio meets its ``bar`` (e.g. ``">= 5x"``)."""
    return f"  (bar {bar}: {'met' if met else 'NOT met'})"


def _rates(label: str, rates: dict[str, float | None], fractions: dict[str, float | None]) -> str:
    """The line of achieved FLOP/s, in GFLOP/s with each model's fraction of the large matmul
    (``-`` where a rate is ``None``), and a ⚠ line when one is impossibly above 1."""
    parts = [
        f"{k} {v / 1e9:.1f} ({fractions[k]:.0%})" if v is not None else f"{k} -"
        for k, v in rates.items()
    ]
    line = f"  {label}: " + ", ".join(parts)
    if any(f is not None and f > 1 for f in fractions.values()):
        line += (
            f"\n{'':38s} ⚠ impossible: a model faster than one large matrix product; the "
            "reference product was slowed down (a busy machine?)"
        )
    return line


def report(r: dict) -> str:
    """A plain-text summary of a :func:`~kvattn.benchmark.runs.bench_train`,
    :func:`~kvattn.benchmark.runs.bench_generate` or :func:`~kvattn.benchmark.runs.bench_density`
    result (or several merged); flagged ratios carry a ⚠ line saying what is wrong with them,
    and ratios with a target in :data:`~kvattn.benchmark.reporting.BARS` say whether it is
    met."""
    tensors = r.get("tensors", {})  # records made before the count lack it
    threads = f", {r['threads']} threads" if r.get("threads") else ""
    lines = [
        f"== {r['config']} on {r['device']}{threads}, autocast {r['autocast']} (parameters "
        + ", ".join(
            f"{k} {v:,}" + (f" in {tensors[k]} tensors" if k in tensors else "")
            for k, v in r["parameters"].items()
        )
        + ")"
    ]
    if "train_pldr_over_gpt" in r:
        flop_ratio = r["train_flops_pldr_over_gpt"]
        flop_share = r["metric_learner_flop_share"]
        time_bar = BARS["train_over_flops"] * flop_ratio
        share_bar = flop_share + BARS["share_over_flops"]
        calls = "train_calls" in r  # records made before the count lack it
        in_calls = f"{'    the same in kernel calls (eager)':38s} "
        lines += [
            f"train{' (compiled)' if r.get('compiled') else ''} (batch {r['batch']} x "
            f"{r['seq']} tokens, AdamW {r.get('optimizer', 'kernel not recorded')}; "
            f"medians {r['train_step_s']['pldr'] * 1e3:.1f} ms PLDR, "
            f"{r['train_step_s']['gpt'] * 1e3:.1f} ms GPT)",
            _line(
                "  step time PLDR / GPT",
                r["train_pldr_over_gpt"],
                _verdict(r["train_pldr_over_gpt"].median <= time_bar, f"<= {time_bar:.2f}x"),
            ),
            f"{'    the same in FLOPs':38s} {flop_ratio:6.2f}x",
            *([in_calls + f"{r['train_calls_pldr_over_gpt']:6.2f}x"] if calls else []),
            _line(
                "  metric learner's share",
                r["metric_learner_share"],
                _verdict(r["metric_learner_share"].median <= share_bar, f"<= {share_bar:.1%}"),
            ),
            f"{'    the same in FLOPs':38s} {flop_share:6.1%}",
            *([in_calls + f"{r['metric_learner_call_share']:6.1%}"] if calls else []),
            _rates(
                f"achieved GFLOP/s (% of a {r['matmul_flop_per_s'] / 1e9:.0f} GFLOP/s large "
                "matmul)",
                r["train_flop_per_s"],
                r["train_matmul_fraction"],
            ),
        ]
        if r.get("compile_s"):
            lines.append(
                "  compile time (s): "
                + ", ".join(f"{k} {v:.1f}" for k, v in r["compile_s"].items())
            )
    if "kvg_over_none" in r:
        kvg, over_gpt = r["kvg_over_none"], r["pldr_kvg_over_gpt_kv"]
        lines += [
            f"generate ({r['new_tokens']} tokens after a {r['prompt_len']}-token prompt; "
            "new tokens/s, prompt's pass included: "
            + ", ".join(f"{k} {v:.0f}" for k, v in r["generate_tokens_per_s"].items())
            + ")",
            _line(
                "  speed kv+g / no cache",
                kvg,
                _verdict(kvg.median >= BARS["kvg_over_none"], f">= {BARS['kvg_over_none']:g}x"),
            ),
            _line("  speed kv / no cache", r["kv_over_none"]),
            _line(
                "  speed PLDR kv+g / GPT kv",
                over_gpt,
                _verdict(
                    over_gpt.median >= BARS["pldr_kvg_over_gpt_kv"],
                    f">= {BARS['pldr_kvg_over_gpt_kv']:g}x",
                ),
            ),
        ]
        if "constant_g_kv_over_gpt_kv" in r:  # records made before it lack the split
            ceiling = r["constant_g_kv_over_gpt_kv"]
            below = ceiling.median < BARS["pldr_kvg_over_gpt_kv"]
            lines += [
                _line("    = PLDR kv+g / constant-G kv", r["pldr_kvg_over_constant_g_kv"]),
                _line(
                    "    x constant-G kv / GPT kv (ceiling)",
                    ceiling,
                    "  (below the bar on this run: no KV + G cache could meet it)" if below else "",
                ),
            ]
    if "prefix_over_block" in r:
        lines += [
            f"density (batch {r['batch']} x {r['seq']} tokens; medians "
            + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in r["density_step_s"].items())
            + ")",
            _line("  step time prefix / block", r["prefix_over_block"]),
            f"{'    the same in FLOPs':38s} {r['prefix_flops_over_block']:6.2f}x",
            "  peak memory (MiB): "
            + ", ".join(f"{k} {v:.0f}" for k, v in r["density_peak_mib"].items()),
        ]
    for key, what in (("train_peak_mib", "training step"), ("generate_peak_mib", "generation")):
        if r.get(key):
            lines.append(
                f"peak memory of a {what} (MiB): "
                + ", ".join(f"{k} {v:.1f}" for k, v in r[key].items())
            )
    return "\n".join(lines)


def as_json(r: dict) -> dict:
    """``r`` with every :class:`~kvattn.benchmark.timing.Ratio` as a plain dict (for
    ``json.dumps``)."""
    return {k: asdict(v) if isinstance(v, Ratio) else v for k, v in r.items()}


def machine(device: torch.device) -> dict:
    """Where a run was measured: the processor, its core count, the GPU's name (CUDA), the
    operating system, torch's version and the date (UTC)."""
    cpu = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        names = [
            line.split(":", 1)[1].strip()
            for line in cpuinfo.read_text().splitlines()
            if line.startswith("model name")
        ]
        cpu = names[0] if names else cpu
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        "os": platform.platform(),
        "torch": torch.__version__,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
    }


def load_results(path: str | Path) -> tuple[dict, list[dict]]:
    """Read a ``--json`` record: ``(machine, results)``, each result with its ratios as
    :class:`~kvattn.benchmark.timing.Ratio` again, so that :func:`report` prints it as it printed
    the live run. A record made before the machine was kept gives ``{"torch": version}``.

    Raises
    ------
    ValueError
        The file is not such a record (no ``results`` list, or a result without ``config``).
    """
    data = json.loads(Path(path).read_text())
    if not isinstance(data, dict) or not isinstance(data.get("results"), list):
        raise ValueError(f"{path}: not a benchmark record (expected a 'results' list)")
    results = []
    for r in data["results"]:
        if not isinstance(r, dict) or "config" not in r:
            raise ValueError(f"{path}: every result needs a 'config', got {r!r:.80}")
        results.append(
            {
                k: Ratio(**v) if isinstance(v, dict) and set(v) == _RATIO_FIELDS else v
                for k, v in r.items()
            }
        )
    return data.get("machine", {"torch": data.get("torch")}), results
