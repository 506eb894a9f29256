"""A benchmark's results: at a glance (:func:`summary`, the main ratios with what each means,
and :func:`targets`, the course's own targets in :data:`~kvattn.benchmark.reporting.BARS` and
whether a run meets them), in full as text (:func:`report`, a ⚠ line under each flagged ratio),
as JSON (:func:`as_json`), with the machine they were measured on (:func:`machine`), and read
back from a ``--json`` record (:func:`load_results`) so that a stored run prints as the live one
did. Every line is at most :data:`~kvattn.benchmark.reporting.WIDTH` characters, the text
column of a book page.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import asdict, fields
from pathlib import Path

import torch

from .timing import Ratio

#: The course's own targets, set when it tuned PLGA's implementation (not figures from the
#: papers). The PLDR / GPT training step time may be at most ``train_over_flops`` times the same
#: ratio in FLOPs, and the metric learner's share of the time at most its share of the FLOPs plus
#: ``share_over_flops``: PLGA should cost what its arithmetic costs. Decoding with the KV + G
#: cache must be at least ``kvg_over_none`` times as fast as without a cache, and PLDR with it at
#: least ``pldr_kvg_over_gpt_kv`` times as fast as GPT with its KV cache. :func:`targets` says
#: whether a run meets them; :func:`report` prints each beside its ratio.
BARS = {
    "train_over_flops": 1.1,
    "share_over_flops": 0.10,
    "kvg_over_none": 5.0,
    "pldr_kvg_over_gpt_kv": 0.95,
}

#: The widest line that :func:`report`, :func:`summary` and :func:`targets` print: the text
#: column of a book page at 1280 px.
WIDTH = 80

# the keys of a Ratio written by as_json: a dict with exactly these is read back as a Ratio
_RATIO_FIELDS = {f.name for f in fields(Ratio)}
_LABEL = 38  # the label column of a report line


def _wrap(text: str, indent: str = "") -> str:
    """``text`` broken into lines of at most ``WIDTH`` characters, the later ones indented by
    ``indent``."""
    return textwrap.fill(
        text, WIDTH, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False
    )


def _wrap_items(head: str, items: Sequence[str], tail: str = "", indent: str = "  ") -> str:
    """``head`` and ``items`` joined by commas, then ``tail``, broken into lines of at most
    ``WIDTH`` characters only between items (an item such as ``pldr 33.4 (17%)`` stays on one
    line)."""
    glued = [item.replace(" ", "\N{NO-BREAK SPACE}") for item in items]
    return _wrap(head + ", ".join(glued) + tail, indent).replace("\N{NO-BREAK SPACE}", " ")


def _is_share(key: str) -> bool:
    """Whether the quantity ``key`` names is a share (printed as a percentage)."""
    return "share" in key


def _fmt(value: float, share: bool) -> str:
    """A ratio as ``1.38x``, a share as ``27.0%``."""
    return f"{value:.1%}" if share else f"{value:.2f}x"


def _line(label: str, r: Ratio, note: str = "") -> str:
    """One ratio's line: its median (a percentage for a share) and quartiles, its rounds,
    ``note`` on a line of its own, and a ⚠ line under it when it is flagged."""
    share = _is_share(label)
    value = f"{r.median:6.1%}" if share else f"{r.median:6.2f}x"
    quart = f"[{r.q1:.1%}, {r.q3:.1%}]" if share else f"[{r.q1:.2f}, {r.q3:.2f}]"
    # the brackets hold the middle half of the per-round ratios (their quartiles)
    lines = [f"{label:{_LABEL}s} {value}  {quart}, {r.rounds} rounds"]
    if note:
        lines.append(_wrap(f"{'':{_LABEL}s} {note}", " " * (_LABEL + 1)))
    if r.flag:
        lines.append(_wrap(f"{'':{_LABEL}s} ⚠ {r.flag}", " " * (_LABEL + 3)))
    return "\n".join(lines)


def _target(r: Mapping, key: str) -> tuple[float, str, bool] | None:
    """The target in ``BARS`` that ratio ``key`` of result ``r`` has: ``(median, the target as
    text, met)``, or ``None`` when ``r`` lacks the ratio or it has no target."""
    ratio = r.get(key)
    if not isinstance(ratio, Ratio):
        return None
    if key == "train_pldr_over_gpt" and "train_flops_pldr_over_gpt" in r:
        bar = BARS["train_over_flops"] * r["train_flops_pldr_over_gpt"]
        return ratio.median, f"<= {bar:.2f}x", ratio.median <= bar
    if key == "metric_learner_share" and "metric_learner_flop_share" in r:
        bar = r["metric_learner_flop_share"] + BARS["share_over_flops"]
        return ratio.median, f"<= {bar:.1%}", ratio.median <= bar
    if key in ("kvg_over_none", "pldr_kvg_over_gpt_kv"):
        return ratio.median, f">= {BARS[key]:g}x", ratio.median >= BARS[key]
    return None


def _verdict(r: Mapping, key: str, shown: bool) -> str:
    """The note that says whether ratio ``key`` meets its target (empty when not ``shown``)."""
    target = _target(r, key)
    if not shown or target is None:
        return ""
    return f"course target {target[1]}: {'met' if target[2] else 'NOT met'}"


def _rates(label: str, rates: dict[str, float | None], fractions: dict[str, float | None]) -> str:
    """The lines of achieved FLOP/s, in GFLOP/s with each model's fraction of the large matmul
    (``-`` where a rate is ``None``), and a ⚠ line when one is impossibly above 1."""
    parts = [
        f"{k} {v / 1e9:.1f} ({fractions[k]:.0%})" if v is not None else f"{k} -"
        for k, v in rates.items()
    ]
    line = _wrap_items(f"  {label}: ", parts, indent="    ")
    if any(f is not None and f > 1 for f in fractions.values()):
        line += "\n" + _wrap(
            f"{'':{_LABEL}s} ⚠ impossible: a model faster than one large matrix product; the "
            "reference product was slowed down (a busy machine?)",
            " " * (_LABEL + 3),
        )
    return line


def kvg_over_kv(r: Mapping) -> tuple[float, str | None] | None:
    """The speed of PLDR-LLM's decoding with the KV + G cache over the exact KV cache (which
    reruns the metric learner for every new token) in a
    :func:`~kvattn.benchmark.runs.bench_generate` result: ``(median, flag)``, or ``None`` when
    ``r`` has no generation ratios.

    A result that measured it (``r["kvg_over_kv"]``) gives that ratio's median and flag. A record
    made before it was measured gives ``kvg_over_none`` / ``kv_over_none``: both are medians of
    the same rounds of the three PLDR modes, and within a round their quotient is exactly the
    KV + G over exact KV ratio, so the quotient of the medians is close to its median; the flag
    is the first of theirs (``"unstable: ..."`` where either is unstable).
    """
    if isinstance(r.get("kvg_over_kv"), Ratio):
        return r["kvg_over_kv"].median, r["kvg_over_kv"].flag
    kvg, kv = r.get("kvg_over_none"), r.get("kv_over_none")
    if not (isinstance(kvg, Ratio) and isinstance(kv, Ratio)):
        return None
    return kvg.median / kv.median, kvg.flag or kv.flag


#: The rows of :func:`summary`: the result key (``"kvg_over_kv"`` by :func:`kvg_over_kv`), what
#: is compared, and what the ratio means.
SUMMARY_ROWS = (
    (
        "train_pldr_over_gpt",
        "Training step, PLDR / same-size GPT (time)",
        "how many times as long PLDR's step takes; lower is better",
    ),
    (
        "train_flops_pldr_over_gpt",
        "  the same in FLOPs",
        "PLDR's extra arithmetic; time above it goes to many small kernels",
    ),
    (
        "metric_learner_share",
        "Metric learner's share of PLDR's step",
        "the time spent computing G_LM, the part GPT does not have",
    ),
    (
        "kvg_over_none",
        "Decoding, KV + G cache / no cache",
        "caching K, V and G_LM against recomputing the whole sequence per token",
    ),
    (
        "kv_over_none",
        "Decoding, exact KV cache / no cache",
        "caching K and V only: the metric learner still reruns for every token",
    ),
    (
        "kvg_over_kv",
        "Decoding, KV + G cache / exact KV cache",
        "what caching G_LM adds to a KV cache: no metric learner per new token",
    ),
    (
        "pldr_kvg_over_gpt_kv",
        "Decoding, PLDR with KV + G / GPT with KV",
        "PLGA's price once G_LM is cached; 1 would be as fast as GPT",
    ),
    (
        "prefix_over_block",
        "Training step, prefix / block density",
        "the price of a G_LM that sees only each position's prefix",
    ),
)


def _check_results(results: object) -> list[Mapping]:
    """``results`` is a sequence of result dicts, each with a ``config`` (``TypeError`` or
    ``ValueError`` otherwise); returns it as a list."""
    if isinstance(results, (str, bytes, Mapping)) or not isinstance(results, Sequence):
        raise TypeError(f"results must be a list of result dicts, got {type(results).__name__}")
    for r in results:
        if not isinstance(r, Mapping):
            raise TypeError(f"every result must be a dict, got {type(r).__name__}")
        if not isinstance(r.get("config"), str):
            raise ValueError(f"every result needs a 'config' name, got {dict(r)!r:.80}")
    return list(results)


def _cell(r: Mapping, key: str) -> tuple[float, bool] | None:
    """Ratio ``key`` of result ``r`` as ``(value, flagged)``, or ``None`` when ``r`` lacks it."""
    if key == "kvg_over_kv":
        derived = kvg_over_kv(r)
        return None if derived is None else (derived[0], derived[1] is not None)
    value = r.get(key)
    if isinstance(value, Ratio):
        return value.median, value.flag is not None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value), False
    return None


def summary_rows(results: Sequence[Mapping]) -> list[dict]:
    """The values of :func:`summary`: one dict per row of
    :data:`~kvattn.benchmark.reporting.SUMMARY_ROWS` that some result holds, with ``key``,
    ``label``, ``meaning`` and ``values``: configuration name → ``(value, flagged)`` (the median
    of a measured ratio, a share as a fraction; ``flagged`` when the run flagged it). Each
    configuration's first result that holds a ratio gives it, training ratios from the plain (not
    compiled) step.

    Raises
    ------
    TypeError
        ``results`` is not a sequence of dicts.
    ValueError
        A result without a ``config`` name, or results that hold none of the rows' ratios.
    """
    results = _check_results(results)
    rows = []
    for key, label, meaning in SUMMARY_ROWS:
        values: dict[str, tuple[float, bool]] = {}
        for r in results:
            cell = None if r.get("compiled") else _cell(r, key)
            if cell is not None and r["config"] not in values:
                values[r["config"]] = cell
        if values:
            rows.append(dict(key=key, label=label, meaning=meaning, values=values))
    if not rows:
        raise ValueError("results hold none of the summary's ratios (expected benchmark results)")
    return rows


def summary(results: Sequence[Mapping]) -> str:
    """The main ratios of benchmark results at a glance: one row per comparison of
    :data:`~kvattn.benchmark.reporting.SUMMARY_ROWS` (what is compared; one column per
    configuration; under it, what the ratio means), ⚠ beside a ratio that its run flagged, ``-``
    where a configuration lacks it. Ratios are medians of paired rounds (see
    :func:`~kvattn.benchmark.timing.interleaved`); the KV + G over exact KV speed-up of an older
    record is :func:`kvg_over_kv`'s quotient. Every line is at most
    :data:`~kvattn.benchmark.reporting.WIDTH` characters for up to three configurations.

    Raises
    ------
    TypeError, ValueError
        As :func:`summary_rows`.
    """
    rows = summary_rows(results)
    configs = list(dict.fromkeys(c for row in rows for c in row["values"]))
    lines = [f"{'compared':44s}" + "".join(f"{c:>9s}  " for c in configs).rstrip()]
    flagged_any = False
    for row in rows:
        cells = []
        for c in configs:
            if c not in row["values"]:
                cells.append(f"{'-':>9s}  ")
                continue
            value, flag = row["values"][c]
            flagged_any |= flag
            cells.append(f"{_fmt(value, _is_share(row['key'])):>9s}" + (" ⚠" if flag else "  "))
        lines += [f"{row['label']:44s}" + "".join(cells).rstrip(), f"    {row['meaning']}"]
    if flagged_any:
        lines.append("⚠ flagged by its run (too few rounds or too wide a spread): read it as rough")
    return "\n".join(lines)


#: The rows of :func:`targets`: the ratio that has a target in ``BARS``, and the target in words.
_TARGET_ROWS = (
    ("train_pldr_over_gpt", f"step time PLDR / GPT <= {BARS['train_over_flops']:g} x FLOP ratio"),
    ("metric_learner_share", f"learner's share <= FLOPs' + {BARS['share_over_flops'] * 100:g} pts"),
    ("kvg_over_none", f"KV + G / no cache >= {BARS['kvg_over_none']:g}x"),
    ("pldr_kvg_over_gpt_kv", f"PLDR KV + G / GPT KV >= {BARS['pldr_kvg_over_gpt_kv']:g}x"),
)


def targets(results: Sequence[Mapping]) -> str:
    """The course's targets (:data:`~kvattn.benchmark.reporting.BARS`) against benchmark
    results: one row per target, one column per configuration with the ratio, the target it had
    in that run (the training targets depend on the run's FLOP counts) and whether it was met (⚠
    where the run flagged the ratio). Each configuration's first plain (not compiled) result with
    the ratio gives it.

    Raises
    ------
    TypeError, ValueError
        As :func:`summary_rows`; ``ValueError`` also when no result has a ratio with a target.
    """
    results = _check_results(results)
    configs = list(dict.fromkeys(r["config"] for r in results))
    lines = [f"{'course target':41s}" + "".join(f"{c:20s}" for c in configs).rstrip()]
    for key, words in _TARGET_ROWS:
        cells = {}
        for r in results:
            found = None if r.get("compiled") else _target(r, key)
            if found is not None and r["config"] not in cells:
                value, bar, met = found
                mark = " ⚠" if r[key].flag else ""
                cells[r["config"]] = (
                    f"{_fmt(value, _is_share(key))} vs {bar.split()[1]}: "
                    f"{'yes' if met else 'no'}{mark}"
                )
        if cells:
            lines.append(
                f"{words:41s}" + "".join(f"{cells.get(c, '-'):20s}" for c in configs).rstrip()
            )
    if len(lines) == 1:
        raise ValueError("results hold no ratio with a course target")
    return "\n".join(lines)


def report(r: dict, *, show_targets: bool = True) -> str:
    """A plain-text summary of a :func:`~kvattn.benchmark.runs.bench_train`,
    :func:`~kvattn.benchmark.runs.bench_generate` or :func:`~kvattn.benchmark.runs.bench_density`
    result (or several merged), in lines of at most :data:`~kvattn.benchmark.reporting.WIDTH`
    characters; flagged ratios carry a ⚠ line saying what is wrong with them, and with
    ``show_targets`` ratios with a target in :data:`~kvattn.benchmark.reporting.BARS` say whether it
    is met (:func:`targets` puts them in one table instead)."""
    tensors = r.get("tensors", {})  # records made before the count lack it
    threads = f", {r['threads']} threads" if r.get("threads") else ""
    lines = [
        _wrap_items(
            f"== {r['config']} on {r['device']}{threads}, autocast {r['autocast']} (parameters ",
            [
                f"{k} {v:,}" + (f" in {tensors[k]} tensors" if k in tensors else "")
                for k, v in r["parameters"].items()
            ],
            ")",
            "   ",
        )
    ]
    if "train_pldr_over_gpt" in r:
        flop_ratio = r["train_flops_pldr_over_gpt"]
        flop_share = r["metric_learner_flop_share"]
        calls = "train_calls" in r  # records made before the count lack it
        in_calls = f"{'    the same in kernel calls (eager)':{_LABEL}s} "
        lines += [
            _wrap(
                f"train{' (compiled)' if r.get('compiled') else ''} (batch {r['batch']} x "
                f"{r['seq']} tokens, AdamW {r.get('optimizer', 'kernel not recorded')}; "
                f"medians {r['train_step_s']['pldr'] * 1e3:.1f} ms PLDR, "
                f"{r['train_step_s']['gpt'] * 1e3:.1f} ms GPT)",
                "  ",
            ),
            _line(
                "  step time PLDR / GPT",
                r["train_pldr_over_gpt"],
                _verdict(r, "train_pldr_over_gpt", show_targets),
            ),
            f"{'    the same in FLOPs':{_LABEL}s} {flop_ratio:6.2f}x",
            *([in_calls + f"{r['train_calls_pldr_over_gpt']:6.2f}x"] if calls else []),
            _line(
                "  metric learner's share",
                r["metric_learner_share"],
                _verdict(r, "metric_learner_share", show_targets),
            ),
            f"{'    the same in FLOPs':{_LABEL}s} {flop_share:6.1%}",
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
        lines += [
            _wrap_items(
                f"generate ({r['new_tokens']} tokens after a {r['prompt_len']}-token prompt; "
                "new tokens/s, prompt's pass included: ",
                [f"{k} {v:.0f}" for k, v in r["generate_tokens_per_s"].items()],
                ")",
            ),
            _line(
                "  speed kv+g / no cache",
                r["kvg_over_none"],
                _verdict(r, "kvg_over_none", show_targets),
            ),
            _line("  speed kv / no cache", r["kv_over_none"]),
        ]
        if isinstance(r.get("kvg_over_kv"), Ratio):
            lines.append(_line("  speed kv+g / kv", r["kvg_over_kv"]))
        else:  # records made before it was measured: the quotient of the two above
            lines.append(
                f"{'  speed kv+g / kv (the two above)':{_LABEL}s} {kvg_over_kv(r)[0]:6.2f}x"
            )
        lines.append(
            _line(
                "  speed PLDR kv+g / GPT kv",
                r["pldr_kvg_over_gpt_kv"],
                _verdict(r, "pldr_kvg_over_gpt_kv", show_targets),
            )
        )
        if "constant_g_kv_over_gpt_kv" in r:  # records made before it lack the split
            ceiling = r["constant_g_kv_over_gpt_kv"]
            below = show_targets and ceiling.median < BARS["pldr_kvg_over_gpt_kv"]
            lines += [
                _line("    = PLDR kv+g / constant-G kv", r["pldr_kvg_over_constant_g_kv"]),
                _line(
                    "    x constant-G kv / GPT kv (ceiling)",
                    ceiling,
                    "below the target on this run: no KV + G cache could meet it" if below else "",
                ),
            ]
    if "prefix_over_block" in r:
        lines += [
            _wrap_items(
                f"density (batch {r['batch']} x {r['seq']} tokens; medians ",
                [f"{k} {v * 1e3:.1f} ms" for k, v in r["density_step_s"].items()],
                ")",
            ),
            _line("  step time prefix / block", r["prefix_over_block"]),
            f"{'    the same in FLOPs':{_LABEL}s} {r['prefix_flops_over_block']:6.2f}x",
            "  peak memory (MiB): "
            + ", ".join(f"{k} {v:.0f}" for k, v in r["density_peak_mib"].items()),
        ]
    for key, what in (("train_peak_mib", "training step"), ("generate_peak_mib", "generation")):
        if r.get(key):
            lines.append(
                _wrap_items(
                    f"peak memory of a {what} (MiB): ",
                    [f"{k} {v:.1f}" for k, v in r[key].items()],
                )
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
