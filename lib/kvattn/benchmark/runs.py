"""The three benchmarks, each a function that checks its arguments, builds its models and
returns a dict of results (its ratios as :class:`~kvattn.benchmark.timing.Ratio`, flagged where
they cannot be right):

* :func:`bench_train`: the training step (forward, backward, AdamW) of PLDR-LLM, its constant-G
  model and GPT, timed and counted (FLOPs, kernel calls, peak memory, achieved FLOP/s);
* :func:`bench_density`: PLDR-LLM's step with the prefix-consistent density against the
  published block density;
* :func:`bench_generate`: greedy generation per decoding mode, and against GPT's KV cache.

:data:`CONFIGS` holds the model sizes the command line measures. The argument checks the
benchmarks share (``_check_run``, ``_check_step``) are here too: the command line runs them on
every configuration before it measures anything.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

import torch

from .._checks import check_bool, check_int
from ..config import PUBLISHED_110M, PLDRConfig
from ..losses import lm_cross_entropy
from ..pldr import GPT, PLDRLLM
from ..train import adamw
from .counting import _peak_memory, _step_counts, matmul_rate
from .timing import Ratio, _check_device, _check_seconds, _timed, flagged, interleaved

#: The model sizes the command line measures, by name (the course's tiny one, a mid-size one
#: and the published 110M PLDR-LLM); ``PLDRConfig(**CONFIGS[name])`` builds one.
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


def _check_run(
    name: str, cfg: PLDRConfig, device: torch.device, budget_s: float, autocast: torch.dtype | None
) -> None:
    """What every measurement takes: a label, a configuration, a device, a budget, a dtype."""
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    if not isinstance(cfg, PLDRConfig):
        raise TypeError(f"cfg must be a PLDRConfig, got {type(cfg).__name__}")
    if cfg.vocab_size <= 4:
        raise ValueError(
            "random token ids are drawn from [4, vocab_size), above the special tokens: need "
            f"vocab_size > 4, got {cfg.vocab_size}"
        )
    _check_device(device)
    _check_seconds(budget_s)
    if autocast not in (None, torch.bfloat16, torch.float16):
        raise TypeError(
            f"autocast must be None (float32), torch.bfloat16 or torch.float16, got {autocast!r}"
        )


def _check_step(cfg: PLDRConfig, batch: int, seq: int) -> None:
    """A training step's shape: ``batch`` rows of ``seq`` inputs (``seq + 1`` ids, so that even
    ``seq = 1`` has a next token to predict) within the positions of ``cfg``."""
    check_int("batch", batch, low=1, typed=True)
    check_int("seq", seq, low=1, typed=True)
    if seq > cfg.max_position_embeddings:
        raise ValueError(
            f"seq = {seq} exceeds max_position_embeddings = {cfg.max_position_embeddings}"
        )


def _variant(cfg: PLDRConfig, **changes: object) -> PLDRConfig:
    """``cfg`` with some fields changed (validated as any configuration is)."""
    return PLDRConfig.from_dict({**cfg.to_dict(), **changes})


def _models(cfg: PLDRConfig, device: torch.device) -> dict[str, torch.nn.Module]:
    """PLDR-LLM, its constant-G model (G_LM = I, no metric learner) and GPT of ``cfg`` on
    ``device``, always the same initial weights (seed 0)."""
    torch.manual_seed(0)
    return {
        "pldr": PLDRLLM(cfg).to(device),
        "constant_g": PLDRLLM(_variant(cfg, custom_G_type="identity")).to(device),
        "gpt": GPT(cfg).to(device),
    }


def _autocast(device: torch.device, dtype: torch.dtype | None) -> dict:
    """The arguments of ``torch.autocast`` for ``dtype`` on ``device`` (``None``: float32, off)."""
    return dict(device_type=device.type, dtype=dtype or torch.float32, enabled=dtype is not None)


def _header(
    name: str,
    cfg: PLDRConfig,
    device: torch.device,
    models: dict[str, torch.nn.Module],
    dtype: torch.dtype | None,
) -> dict:
    """What every result starts with: the configuration's name, the device, the autocast dtype,
    each model's parameter count and parameter tensors, and the CPU's threads."""
    return {
        "config": name,
        "device": str(device),
        "autocast": str(dtype).removeprefix("torch.") if dtype else "none (float32)",
        "parameters": {k: m.num_parameters() for k, m in models.items()},
        "tensors": {k: len(list(m.parameters())) for k, m in models.items()},
        "threads": torch.get_num_threads() if device.type == "cpu" else None,
    }


def _train_step(
    model: PLDRLLM | GPT,
    ids: torch.Tensor,
    device: torch.device,
    autocast: torch.dtype | None,
    compiled: bool,
    fused_adamw: bool = False,
) -> tuple[Callable[[], None], torch.optim.Optimizer]:
    """One training step of ``model`` on ``ids`` ``[batch, seq + 1]`` (inputs and next-token
    targets) as a function of no arguments, and the AdamW optimiser it steps."""
    forward = torch.compile(model) if compiled else model
    opt = adamw(list(model.parameters()), lr=1e-4, fused=fused_adamw)  # as training makes it

    def step() -> None:
        with torch.autocast(**_autocast(device, autocast)):
            # as pre-training computes it: no host synchronisation to read the targets
            loss = lm_cross_entropy(forward(ids[:, :-1]).logits, ids[:, 1:], check_targets=False)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step, opt


def bench_train(
    name: str,
    cfg: PLDRConfig,
    device: torch.device,
    *,
    batch: int = 8,
    seq: int = 128,
    budget_s: float = 60.0,
    autocast: torch.dtype | None = None,
    compile: bool = False,
    fused_adamw: bool = False,
) -> dict:
    """Training step (forward, backward, AdamW) of PLDR-LLM, its constant-G model and GPT.

    ``batch`` × ``seq`` random token ids per step; ``autocast`` a dtype for ``torch.autocast`` or
    ``None`` for float32 (use :func:`kvattn.train.default_autocast`, as training does);
    ``compile`` times ``torch.compile``-d models (FLOPs and memory are those of the plain ones);
    ``fused_adamw`` steps every model with PyTorch's fused AdamW kernel instead of the course's
    default foreach one (:func:`kvattn.train.adamw`; ``PretrainConfig(fused_adamw=True)``).

    Returns a dict: the ``optimizer`` kernel (``"foreach"`` or ``"fused"``),
    ``train_pldr_over_gpt`` and ``metric_learner_share`` as
    :class:`~kvattn.benchmark.timing.Ratio`, the median step times ``train_step_s`` (seconds),
    FLOPs per step ``train_flops`` and their ratios, kernel calls per step of the plain models
    ``train_calls`` (:class:`~kvattn.benchmark.counting.KernelCalls`) with the same ratios
    (``train_calls_pldr_over_gpt``, ``metric_learner_call_share``), achieved FLOP/s
    ``train_flop_per_s`` (and the metric learner's own, from the PLDR and constant-G
    differences), the same as fractions of :func:`~kvattn.benchmark.counting.matmul_rate`
    (``train_matmul_fraction``), ``train_peak_mib``, and with ``compile`` the seconds each
    model's first step took beyond a compiled step (``compile_s``).

    Raises
    ------
    TypeError
        An argument of the wrong type (``device`` must be a ``torch.device``, ``autocast``
        ``None``, ``torch.bfloat16`` or ``torch.float16``).
    ValueError
        ``batch`` or ``seq`` < 1, ``seq`` beyond ``max_position_embeddings``, a budget that is
        not a positive finite number of seconds, ``vocab_size`` <= 4, or a device that this
        machine does not have. All is checked before any model is built.
    """
    _check_run(name, cfg, device, budget_s, autocast)
    _check_step(cfg, batch, seq)
    check_bool("compile", compile, typed=True)
    check_bool("fused_adamw", fused_adamw, typed=True)
    models = _models(cfg, device)
    out = _header(name, cfg, device, models, autocast)
    out.update(
        batch=batch, seq=seq, compiled=compile, optimizer="fused" if fused_adamw else "foreach"
    )
    ids = torch.randint(4, cfg.vocab_size, (batch, seq + 1), device=device)
    plain, optimizers = {}, {}
    for k, m in models.items():
        plain[k], optimizers[k] = _train_step(m, ids, device, autocast, False, fused_adamw)
    counts = {k: _step_counts(fn) for k, fn in plain.items()}
    flops = {k: c[0] for k, c in counts.items()}
    steps = plain
    if compile:
        steps = {
            k: _train_step(m, ids, device, autocast, True, fused_adamw)[0]
            for k, m in models.items()
        }
        first_s = {k: _timed(fn, device) for k, fn in steps.items()}
    times, ratios = interleaved(
        steps,
        {"pldr/gpt": ("pldr", "gpt"), "constant_g/pldr": ("constant_g", "pldr")},
        device,
        budget_s=budget_s,
    )
    over_gpt = ratios["pldr/gpt"]
    out["train_pldr_over_gpt"] = flagged(
        over_gpt,
        "implausible: PLDR-LLM's step does all of GPT's work and more, yet took less time"
        if over_gpt.median < 1
        else None,
    )
    c = ratios["constant_g/pldr"]  # share = 1 − c: the quartiles swap
    share = Ratio(1 - c.median, 1 - c.q3, 1 - c.q1, c.rounds)
    out["metric_learner_share"] = flagged(
        share,
        f"impossible: a share must lie in [0, 1], measured {share.median:.1%}"
        if not 0 <= share.median <= 1
        else None,
    )
    step_s = {k: statistics.median(v) for k, v in times.items()}
    out["train_step_s"] = step_s
    if compile:
        out["compile_s"] = {k: max(first_s[k] - step_s[k], 0.0) for k in models}
    out["train_flops"] = flops
    out["train_flops_pldr_over_gpt"] = flops["pldr"] / flops["gpt"]
    out["metric_learner_flop_share"] = 1 - flops["constant_g"] / flops["pldr"]
    out["train_calls"] = {k: c[1] for k, c in counts.items()}
    out["train_calls_pldr_over_gpt"] = counts["pldr"][1] / counts["gpt"][1]
    out["metric_learner_call_share"] = 1 - counts["constant_g"][1] / counts["pldr"][1]
    rates = {k: flops[k] / step_s[k] for k in models}
    extra_s = step_s["pldr"] - step_s["constant_g"]
    # the metric learner's own rate: its FLOPs over the time it adds (None if it added none)
    rates["metric learner"] = (
        (flops["pldr"] - flops["constant_g"]) / extra_s if extra_s > 0 else None
    )
    out["train_flop_per_s"] = rates
    out["matmul_flop_per_s"] = matmul_rate(device, autocast or torch.float32)
    out["train_matmul_fraction"] = {
        k: v / out["matmul_flop_per_s"] if v is not None else None for k, v in rates.items()
    }
    out["train_peak_mib"] = {
        k: _peak_memory(models[k], plain[k], device, optimizers[k]) for k in models
    }
    return out


def bench_density(
    name: str,
    cfg: PLDRConfig,
    device: torch.device,
    *,
    batch: int = 8,
    seq: int = 128,
    budget_s: float = 60.0,
    autocast: torch.dtype | None = None,
) -> dict:
    """Training step of PLDR-LLM with the prefix-consistent density (``density="prefix"``: one
    density, hence one metric-learner pass, per position) against the published block density,
    on the same weights.

    Returns a dict: ``prefix_over_block`` (a :class:`~kvattn.benchmark.timing.Ratio` of step
    times), the same ratio in FLOPs (``prefix_flops_over_block``), median step times
    ``density_step_s`` (seconds) and peak memory ``density_peak_mib`` (MiB) of both. The prefix
    density multiplies the metric learner's work and its saved activations by ``seq``: use a
    small configuration.

    Raises ``TypeError``/``ValueError`` for bad arguments, as :func:`bench_train` does, before
    any model is built.
    """
    _check_run(name, cfg, device, budget_s, autocast)
    _check_step(cfg, batch, seq)
    torch.manual_seed(0)
    block = PLDRLLM(_variant(cfg, density="block")).to(device)
    prefix = PLDRLLM(_variant(cfg, density="prefix")).to(device)
    prefix.load_state_dict(block.state_dict())
    models = {"block": block, "prefix": prefix}
    out = _header(name, cfg, device, models, autocast)
    out.update(batch=batch, seq=seq)
    ids = torch.randint(4, cfg.vocab_size, (batch, seq + 1), device=device)
    steps, optimizers = {}, {}
    for k, m in models.items():
        steps[k], optimizers[k] = _train_step(m, ids, device, autocast, False)
    flops = {k: _step_counts(fn)[0] for k, fn in steps.items()}
    times, ratios = interleaved(
        steps, {"prefix/block": ("prefix", "block")}, device, budget_s=budget_s
    )
    r = ratios["prefix/block"]
    out["prefix_over_block"] = flagged(
        r,
        "implausible: the prefix density does the block density's work and more"
        if r.median < 1
        else None,
    )
    out["prefix_flops_over_block"] = flops["prefix"] / flops["block"]
    out["density_step_s"] = {k: statistics.median(v) for k, v in times.items()}
    out["density_peak_mib"] = {
        k: _peak_memory(models[k], steps[k], device, optimizers[k]) for k in models
    }
    return out


def bench_generate(
    name: str,
    cfg: PLDRConfig,
    device: torch.device,
    *,
    prompt_len: int = 64,
    new_tokens: int = 256,
    budget_s: float = 60.0,
    autocast: torch.dtype | None = None,
    model: PLDRLLM | None = None,
) -> dict:
    """Greedy generation of ``new_tokens`` tokens after a ``prompt_len``-token random prompt, by
    PLDR-LLM in modes ``"none"``, ``"kv"``, ``"kv+g"``, by GPT with its KV cache and by the
    constant-G model with its KV cache.

    The constant-G model attends with a fixed G_LM: per token it does GPT's work plus one
    ``q G_LM`` product per layer, which is what the KV + G cache leaves of PLGA's work once the
    prompt's pass (the only one through the metric learner) is done. As speeds multiply,
    ``pldr_kvg_over_gpt_kv`` = ``pldr_kvg_over_constant_g_kv`` × ``constant_g_kv_over_gpt_kv``
    (exactly within each round, nearly for the medians); the first factor is at most 1 in work
    (noise can lift the measured one a little above), near 1 when the cache leaves nothing but
    that product and the prompt's pass, so the second is the *ceiling* of
    ``pldr_kvg_over_gpt_kv``: the best any implementation of the cache can reach without a
    cheaper product. Either factor is flagged implausible when the middle half of its
    rounds lies above 1 (for ratios near 1 by design, a median above 1 is noise half the time).

    ``model`` measures a given (e.g. trained) PLDR-LLM instead of a fresh one of ``cfg``; GPT
    and the constant-G model are always fresh ones of the same configuration. Returns a dict
    with the speed-ups ``kvg_over_none``, ``kv_over_none``, ``kvg_over_kv`` (the KV + G cache
    over the exact KV cache, which reruns the metric learner for every new token),
    ``pldr_kvg_over_gpt_kv``, ``pldr_kvg_over_constant_g_kv`` and ``constant_g_kv_over_gpt_kv``
    as :class:`~kvattn.benchmark.timing.Ratio` (as speed ratios: above 1 means faster; the first
    three from rounds of the three PLDR modes within a third of ``budget_s``, the last three from
    rounds of the three cached decoders alone within the rest, since ratios near 1 need the most
    rounds), ``generate_tokens_per_s`` (new tokens over the median time of a whole ``generate``
    call, the prompt's pass included) and ``generate_peak_mib`` (MiB).

    Raises
    ------
    TypeError
        An argument of the wrong type, as for :func:`bench_train`, or a ``model`` that is not a
        :class:`~kvattn.pldr.PLDRLLM`.
    ValueError
        ``prompt_len`` or ``new_tokens`` < 1; the prompt and the new tokens do not fit in
        ``max_position_embeddings`` (of ``cfg``, and of ``model``'s configuration); ``model``
        has a smaller vocabulary than ``cfg`` (the prompt's ids come from ``cfg``) or lies on
        another device; a bad budget, vocabulary or device as for :func:`bench_train`. All is
        checked before any model is built.
    """
    _check_run(name, cfg, device, budget_s, autocast)
    check_int("prompt_len", prompt_len, low=1, typed=True)
    check_int("new_tokens", new_tokens, low=1, typed=True)
    if prompt_len + new_tokens > cfg.max_position_embeddings:
        raise ValueError(
            f"prompt_len + new_tokens = {prompt_len + new_tokens} exceeds "
            f"max_position_embeddings = {cfg.max_position_embeddings}"
        )
    if model is not None:
        if not isinstance(model, PLDRLLM):
            raise TypeError(f"model must be a PLDRLLM or None, got {type(model).__name__}")
        own = model.config
        if prompt_len + new_tokens > own.max_position_embeddings:
            raise ValueError(
                f"prompt_len + new_tokens = {prompt_len + new_tokens} exceeds the model's "
                f"max_position_embeddings = {own.max_position_embeddings}"
            )
        if own.vocab_size < cfg.vocab_size:
            raise ValueError(
                f"the model's vocab_size = {own.vocab_size} is smaller than cfg's "
                f"{cfg.vocab_size}: the prompt's ids are drawn from cfg's"
            )
        where = next(model.parameters()).device
        if where.type != device.type or (device.index is not None and where != device):
            raise ValueError(f"the model is on {where}, not on {device}")
    models = _models(cfg, device)
    if model is not None:
        models["pldr"] = model
    out = _header(name, cfg, device, {k: models[k] for k in ("pldr", "gpt")}, autocast)
    out.update(prompt_len=prompt_len, new_tokens=new_tokens)
    prompt = torch.randint(4, cfg.vocab_size, (1, prompt_len), device=device)

    def generate(m: PLDRLLM | GPT, cache: str) -> Callable[[], None]:
        def run() -> None:
            with torch.autocast(**_autocast(device, autocast)):
                m.generate(prompt, new_tokens, cache=cache)

        return run

    runs = {
        "pldr none": (models["pldr"], generate(models["pldr"], "none")),
        "pldr kv": (models["pldr"], generate(models["pldr"], "kv")),
        "pldr kv+g": (models["pldr"], generate(models["pldr"], "kv+g")),
        "gpt kv": (models["gpt"], generate(models["gpt"], "kv")),
        "constant-G kv": (models["constant_g"], generate(models["constant_g"], "kv")),
    }
    # Speed ratio a over b = time(b) / time(a). The cached decoders are compared in rounds of
    # their own: a round that also ran "none" (several times slower) would give them far fewer
    # rounds, and the ratio that is closest to 1 needs the most.
    times, ratios = interleaved(
        {k: runs[k][1] for k in ("pldr none", "pldr kv", "pldr kv+g")},
        {
            "kv+g/none": ("pldr none", "pldr kv+g"),
            "kv/none": ("pldr none", "pldr kv"),
            "kv+g/kv": ("pldr kv", "pldr kv+g"),
        },
        device,
        budget_s=budget_s / 3,
    )
    cached_times, cached = interleaved(
        {k: runs[k][1] for k in ("pldr kv+g", "gpt kv", "constant-G kv")},
        {
            "pldr kv+g/gpt kv": ("gpt kv", "pldr kv+g"),
            "pldr kv+g/constant-G kv": ("constant-G kv", "pldr kv+g"),
            "constant-G kv/gpt kv": ("gpt kv", "constant-G kv"),
        },
        device,
        budget_s=budget_s * 2 / 3,
    )
    ratios.update(cached)
    times = {**times, "pldr kv+g": times["pldr kv+g"] + cached_times["pldr kv+g"]}
    times["gpt kv"] = cached_times["gpt kv"]
    times["constant-G kv"] = cached_times["constant-G kv"]
    slower = (
        "a cache slower than no cache: suspicious; at this size the per-token bookkeeping can "
        "outweigh the recomputation it saves (more new tokens, or a quieter machine, will tell)"
    )
    out["kvg_over_none"] = flagged(
        ratios["kv+g/none"], slower if ratios["kv+g/none"].median < 1 else None
    )
    out["kv_over_none"] = flagged(
        ratios["kv/none"], slower if ratios["kv/none"].median < 1 else None
    )
    out["kvg_over_kv"] = flagged(
        ratios["kv+g/kv"],
        "implausible: the KV + G cache skips the metric learner that the exact KV cache reruns "
        "for every new token, yet ran slower"
        if ratios["kv+g/kv"].median < 1
        else None,
    )
    over_gpt = ratios["pldr kv+g/gpt kv"]
    out["pldr_kvg_over_gpt_kv"] = flagged(
        over_gpt,
        "implausible: PLDR-LLM with a cached G does all of GPT's work and more, yet ran faster"
        if over_gpt.median > 1
        else None,
    )
    for key, name, more in (
        ("pldr_kvg_over_constant_g_kv", "pldr kv+g/constant-G kv", "PLDR-LLM with a cached G"),
        ("constant_g_kv_over_gpt_kv", "constant-G kv/gpt kv", "the constant-G model"),
    ):
        factor = ratios[name]
        out[key] = flagged(
            factor,
            f"implausible: {more} does all of the other's work and more, yet ran faster in "
            "most rounds"
            if factor.q1 > 1
            else None,
        )
    out["generate_tokens_per_s"] = {k: new_tokens / statistics.median(v) for k, v in times.items()}
    out["generate_peak_mib"] = {k: _peak_memory(m, fn, device) for k, (m, fn) in runs.items()}
    return out
