"""The published PLDR-LLM checkpoint format: ``config.json`` + ``model.safetensors``, written
and read.

The tensor names and shapes are those of the published ``state_dict`` (native ``PLDR_Model`` and
the Hugging Face port ``PldrllmForCausalLM`` share them), so models trained here load in the
author's code and published checkpoints load here. Inside :mod:`kvattn.pldr` the five PLGA tensors
carry the papers' symbols (inside ``...plgatt_layer``); this module renames them:

* ``W``, ``b_W`` are ``Wlst``, ``blst``;
* ``P`` is ``pwlst``;
* ``a``, ``b_a`` are ``alst``, ``balst``.

A constant-G model stores its G_LM as the Hugging Face port does for ``custom_G_type``:
``decoder.past_G_values`` of shape ``[L, 3, 1, H, d_k, d_k]`` (index 2 along the second axis is
G_LM; indices 0 and 1, the port's A and A_LM, are written as zeros) and
``decoder.past_G_values_status`` ``[L]``.

A :class:`kvattn.pldr.GPT` is written as the published format's own scaled dot-product attention
model: ``custom_G_type "identity"``, ``architectures ["PldrllmForCausalLM"]`` and the G buffers
above with G_LM = I (A and A_LM zero, as the port's ``G_values_init`` makes them), plus the key
:data:`GPT_MARKER_KEY` that published loaders ignore. The port then builds no metric learner or
PLGA tensors and computes q·I·kᵀ = q·kᵀ: the GPT's logits [gokden2025kvg].

A ``density="prefix"`` PLDR-LLM (a kvattn deviation, see :mod:`kvattn.pldr`) is written with
``model_type`` :data:`PREFIX_MODEL_TYPE` and ``architectures`` [:data:`PREFIX_ARCHITECTURE`]: a
published loader (``AutoConfig``/``AutoModelForCausalLM``) refuses the unknown model type instead of
silently running it as the block-density model, and :func:`~kvattn.checkpoint.load_pretrained` maps
both back.

The weights carry a SHA-256 checksum of the tensors in the safetensors metadata
(:data:`CHECKSUM_KEY`), which the loader verifies when present.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import torch
from safetensors.torch import save_file

from ..config import PLDRConfig
from ..pldr import GPT, PLDRLLM
from ..schema import read_json

Tensor = torch.Tensor

CONFIG_NAME = "config.json"
#: safetensors metadata key of the checksum :func:`~kvattn.checkpoint.save_pretrained` records
#: (published files have none; corrupted bytes in them cannot be detected).
CHECKSUM_KEY = "kvattn_sha256"
WEIGHTS_NAME = "model.safetensors"
_PLGA_NAMES = {"W": "Wlst", "b_W": "blst", "P": "pwlst", "a": "alst", "b_a": "balst"}
#: ``model_type`` of a ``density="prefix"`` PLDR-LLM's config.json (unknown to published loaders).
PREFIX_MODEL_TYPE = "kvattn_pldrllm_prefix"
#: ``architectures`` entry of a ``density="prefix"`` PLDR-LLM's config.json.
PREFIX_ARCHITECTURE = "KvattnPrefixPldrllmForCausalLM"
#: config.json key (value ``GPT.architecture``) that marks a GPT written as an identity-G
#: PLDR-LLM; published loaders ignore it, :func:`~kvattn.checkpoint.load_pretrained` builds a
#: GPT from it.
GPT_MARKER_KEY = "kvattn_architecture"


def to_published(state: dict[str, Tensor], config: PLDRConfig) -> dict[str, Tensor]:
    """Rename a kvattn ``state_dict`` to the published key names (and stack constant G_LMs)."""
    out: dict[str, Tensor] = {}
    G = {}
    for key, value in state.items():
        parts = key.split(".")
        if len(parts) > 1 and parts[-2] == "plgatt_layer":
            key = ".".join([*parts[:-1], _PLGA_NAMES[parts[-1]]])
        elif parts[-1] == "G_LM":
            G[int(parts[2])] = value
            continue
        out[key] = value.detach().contiguous()
    if G:
        L, H, d_k = config.num_hidden_layers, config.num_attention_heads, config.d_k
        past = torch.zeros(L, 3, 1, H, d_k, d_k, dtype=G[0].dtype)
        for i, g in G.items():
            past[i, 2, 0] = g
        out["decoder.past_G_values"] = past
        out["decoder.past_G_values_status"] = torch.ones(L, dtype=torch.bool)
    return out


def from_published(state: dict[str, Tensor], config: PLDRConfig) -> dict[str, Tensor]:
    """Inverse of :func:`to_published`."""
    reverse = {v: k for k, v in _PLGA_NAMES.items()}
    out: dict[str, Tensor] = {}
    for key, value in state.items():
        parts = key.split(".")
        if len(parts) > 1 and parts[-2] == "plgatt_layer" and parts[-1] in reverse:
            out[".".join([*parts[:-1], reverse[parts[-1]]])] = value
        elif key == "decoder.past_G_values":
            if value.ndim != 6 or value.shape[1] != 3 or value.shape[2] != 1:
                raise ValueError(
                    "decoder.past_G_values must have shape [L, 3, 1, H, d_k, d_k], got "
                    f"{tuple(value.shape)}"
                )
            for i in range(value.shape[0]):
                out[f"decoder.dec_layers.{i}.mha1.G_LM"] = value[i, 2, 0]
        elif key == "decoder.past_G_values_status":
            if not bool(value.all()):
                raise ValueError("decoder.past_G_values_status marks some layers' G as unset")
        else:
            out[key] = value
    return out


def write_pretrained(model: PLDRLLM | GPT, directory: Path) -> None:
    """Write ``config.json`` and ``model.safetensors`` into ``directory`` (created if missing) in
    place, with no crash safety: for a fresh staging folder that :func:`replace_directory` then
    moves into place (as :func:`save_pretrained` and :func:`kvattn.pretrain.pretrain` do).

    Raises
    ------
    TypeError
        ``model`` is not a :class:`kvattn.pldr.PLDRLLM` or :class:`kvattn.pldr.GPT` (before the
        folder is created).
    """
    _check_model(model)
    directory.mkdir(parents=True, exist_ok=True)
    dtype = next(model.parameters()).dtype
    config = {
        **model.config.to_dict(),
        "architectures": [model.architecture],
        "torch_dtype": str(dtype).removeprefix("torch."),
    }
    state = model.state_dict()
    if isinstance(model, PLDRLLM) and model.config.density == "prefix":
        config.update(model_type=PREFIX_MODEL_TYPE, architectures=[PREFIX_ARCHITECTURE])
    elif isinstance(model, GPT):
        # the published format's SDPA model, so that the port builds this model (G_LM = I)
        config.update(
            custom_G_type="identity",
            architectures=[PLDRLLM.architecture],
            **{GPT_MARKER_KEY: GPT.architecture},
        )
        d_k, H = model.config.d_k, model.config.num_attention_heads
        eye = torch.eye(d_k, dtype=dtype).expand(H, d_k, d_k)
        for i in range(model.config.num_hidden_layers):
            state[f"decoder.dec_layers.{i}.mha1.G_LM"] = eye
    (directory / CONFIG_NAME).write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    tensors = {k: v.cpu() for k, v in to_published(state, model.config).items()}
    metadata = {"format": "pt", CHECKSUM_KEY: _checksum(tensors)}
    save_file(tensors, directory / WEIGHTS_NAME, metadata=metadata)


def _check_model(model: object) -> None:
    if not isinstance(model, PLDRLLM | GPT):
        raise TypeError(f"model must be a PLDRLLM or GPT, got {type(model).__name__}")


def _checksum(tensors: dict[str, Tensor]) -> str:
    """SHA-256 over every tensor's name, dtype, shape and bytes, in name order."""
    digest = hashlib.sha256()
    for key in sorted(tensors):
        t = tensors[key].contiguous()
        digest.update(f"{key}|{t.dtype}|{tuple(t.shape)}|".encode())
        digest.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return digest.hexdigest()


def read_config(directory: Path) -> tuple[dict, PLDRConfig]:
    """The raw ``config.json`` and the :class:`kvattn.config.PLDRConfig` built from it (for a GPT
    marked with :data:`~kvattn.checkpoint.published.GPT_MARKER_KEY`, the GPT's config:
    ``custom_G_type`` None). A key close to a field, or another library's name for one, draws a
    :class:`kvattn.config.ConfigKeyWarning` (see :meth:`kvattn.config.PLDRConfig.from_dict`).

    Raises
    ------
    FileNotFoundError
        No ``config.json`` in ``directory``.
    ValueError
        Invalid JSON, or a config that is invalid or contradicts itself (see
        :func:`load_pretrained`), naming the file.
    """
    file = directory / CONFIG_NAME
    if not file.exists():
        raise FileNotFoundError(f"{directory} has no {CONFIG_NAME}")
    raw = read_json(file, "config")  # SchemaError (a ValueError) names the file and the field
    architectures = raw.get("architectures")
    if architectures is not None and (
        not isinstance(architectures, list)
        or not architectures
        or not all(isinstance(a, str) for a in architectures)
    ):
        raise ValueError(
            f"{file}: architectures must be a non-empty list of class names such as "
            f"[{PLDRLLM.architecture!r}], got {architectures!r}"
        )
    known = {
        k: v for k, v in raw.items() if k not in ("architectures", "torch_dtype", GPT_MARKER_KEY)
    }
    if GPT_MARKER_KEY in raw:
        if raw[GPT_MARKER_KEY] != GPT.architecture:
            raise ValueError(
                f"{file}: {GPT_MARKER_KEY} must be {GPT.architecture!r} (a kvattn GPT written as "
                f"an identity-G PLDR-LLM), got {raw[GPT_MARKER_KEY]!r}"
            )
        if raw.get("custom_G_type") != "identity":
            raise ValueError(
                f"{file}: {GPT_MARKER_KEY} marks a GPT, which is written with custom_G_type "
                f"'identity', but custom_G_type is {raw.get('custom_G_type')!r}"
            )
        known["custom_G_type"] = None  # a GPT's config (the file needs it for published loaders)
    model_type = raw.get("model_type", "pldrllm")
    if model_type == PREFIX_MODEL_TYPE:
        if raw.get("density") != "prefix":
            raise ValueError(
                f"{file} has model_type {PREFIX_MODEL_TYPE!r} but density "
                f"{raw.get('density')!r}; that model type is written only for density 'prefix'"
            )
        known["model_type"] = "pldrllm"
    elif model_type != "pldrllm":
        raise ValueError(
            f"{file} describes model_type {model_type!r}, not 'pldrllm' or {PREFIX_MODEL_TYPE!r}"
        )
    elif raw.get("density") == "prefix":
        # published loaders ignore density and would run this file as the block-density model
        raise ValueError(
            f"{file} has density 'prefix' but model_type {model_type!r}, which published loaders "
            "run as the block-density model; save_pretrained writes a prefix-density model with "
            f"model_type {PREFIX_MODEL_TYPE!r} and architectures [{PREFIX_ARCHITECTURE!r}]: set "
            "both if this is one, or density 'block'"
        )
    try:
        _recorded_dtype(raw)  # checked here, before any weights are read
    except ValueError as err:
        raise ValueError(f"{file} {err}") from None
    try:
        return raw, PLDRConfig.from_dict(known)
    except ValueError as err:
        raise ValueError(f"{file}: {err}") from None


def _recorded_dtype(raw: dict) -> torch.dtype:
    """The dtype ``config.json`` records (``torch_dtype``, or the published ``dtype``; both must
    agree when both are given)."""
    if raw.get("torch_dtype") and raw.get("dtype") and raw["torch_dtype"] != raw["dtype"]:
        raise ValueError(
            f"records torch_dtype {raw['torch_dtype']!r} but dtype {raw['dtype']!r}; they must "
            "agree (one of them is enough)"
        )
    name = raw.get("torch_dtype") or raw.get("dtype") or "float32"
    dtype = getattr(torch, str(name), None)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"records an unknown dtype {name!r}")
    return dtype
