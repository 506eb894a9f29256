"""Benchmark PLDR-LLM against a same-size GPT, with ratios that know when they are wrong, in five
modules, each importing only from those listed before it:

* :mod:`kvattn.benchmark.timing` — how it times: the variants interleaved round by round
  (:func:`~kvattn.benchmark.timing.interleaved`), each ratio's median and quartiles
  (:class:`~kvattn.benchmark.timing.Ratio`), the flags of a ratio that cannot be trusted
  (:func:`~kvattn.benchmark.timing.flagged`), the budget and device checks;
* :mod:`kvattn.benchmark.counting` — what it counts: peak memory
  (:class:`~kvattn.benchmark.counting.TensorMemory`), kernel calls
  (:class:`~kvattn.benchmark.counting.KernelCalls`), FLOPs, and the FLOP/s of one large matrix
  product (:func:`~kvattn.benchmark.counting.matmul_rate`);
* :mod:`kvattn.benchmark.reporting` — results at a glance
  (:func:`~kvattn.benchmark.reporting.summary`, :func:`~kvattn.benchmark.reporting.targets`), a
  result as text (:func:`~kvattn.benchmark.reporting.report`), the course's targets
  (:data:`~kvattn.benchmark.reporting.BARS`), as JSON
  and back (:func:`~kvattn.benchmark.reporting.as_json`,
  :func:`~kvattn.benchmark.reporting.load_results`), and the machine it was measured on;
* :mod:`kvattn.benchmark.runs` — the three benchmarks (training step, density, generation) and
  the model sizes they run (:data:`~kvattn.benchmark.runs.CONFIGS`);
* :mod:`kvattn.benchmark.cli` — the command line, ``python -m kvattn.benchmark`` or
  ``kvattn-benchmark``; its docstring (the command's ``--help``) says what is measured and how.

Every public name is re-exported here, so ``kvattn.benchmark.X`` works for all of them.
"""

from .cli import main
from .counting import KernelCalls, TensorMemory, matmul_rate
from .reporting import (
    BARS,
    SUMMARY_ROWS,
    WIDTH,
    as_json,
    kvg_over_kv,
    load_results,
    machine,
    report,
    summary,
    summary_rows,
    targets,
)
from .runs import CONFIGS, bench_density, bench_generate, bench_train
from .timing import MIN_ROUNDS_FOR_SPREAD, UNSTABLE_SPREAD, Ratio, flagged, interleaved

__all__ = [
    "BARS",
    "CONFIGS",
    "MIN_ROUNDS_FOR_SPREAD",
    "SUMMARY_ROWS",
    "UNSTABLE_SPREAD",
    "WIDTH",
    "KernelCalls",
    "Ratio",
    "TensorMemory",
    "as_json",
    "bench_density",
    "bench_generate",
    "bench_train",
    "flagged",
    "interleaved",
    "kvg_over_kv",
    "load_results",
    "machine",
    "main",
    "matmul_rate",
    "report",
    "summary",
    "summary_rows",
    "targets",
]
