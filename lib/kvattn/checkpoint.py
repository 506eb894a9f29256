"""Checkpoints in the published PLDR-LLM format: ``config.json`` + ``model.safetensors``.

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

A ``density="prefix"`` PLDR-LLM (a kvattn deviation, see :mod:`kvattn.pldr`) is written with
``model_type`` :data:`PREFIX_MODEL_TYPE` and ``architectures`` [:data:`PREFIX_ARCHITECTURE`]:
a published loader (``AutoConfig``/``AutoModelForCausalLM``) refuses the unknown model type instead
of silently running it as the block-density model, and :func:`load_pretrained` maps both back.

:func:`save_pretrained` replaces a folder crash-safely: it writes a complete sibling folder, moves
the old one aside, moves the new one in and only then deletes the old one (see
:func:`replace_directory`; :func:`recover_directory` finishes or undoes an interrupted replace).

Only JSON and safetensors are ever read; pickle-based files (``.bin``, ``.pt``, ``.pth``,
``.pkl``, ``.ckpt``) are refused, because unpickling an untrusted file can run arbitrary code.
:func:`save_pretrained` records a SHA-256 checksum of the tensors in the safetensors metadata,
and :func:`load_pretrained` verifies it when present.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save_file

from .pldr import GPT, PLDRLLM, PLDRConfig

Tensor = torch.Tensor

CONFIG_NAME = "config.json"
#: safetensors metadata key of the checksum :func:`save_pretrained` records (published files
#: have none; corrupted bytes in them cannot be detected).
CHECKSUM_KEY = "kvattn_sha256"
WEIGHTS_NAME = "model.safetensors"
_PLGA_NAMES = {"W": "Wlst", "b_W": "blst", "P": "pwlst", "a": "alst", "b_a": "balst"}
#: ``model_type`` of a ``density="prefix"`` PLDR-LLM's config.json (unknown to published loaders).
PREFIX_MODEL_TYPE = "kvattn_pldrllm_prefix"
#: ``architectures`` entry of a ``density="prefix"`` PLDR-LLM's config.json.
PREFIX_ARCHITECTURE = "KvattnPrefixPldrllmForCausalLM"
_ARCHITECTURES = {
    PLDRLLM.architecture: PLDRLLM,
    GPT.architecture: GPT,
    PREFIX_ARCHITECTURE: PLDRLLM,
}
#: Suffixes of the sibling folders of a crash-safe replace (new contents; the old folder).
_STAGING, _ASIDE = ".kvattn-staging", ".kvattn-replaced"
_PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".ckpt")


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


def save_pretrained(model: PLDRLLM | GPT, directory: str | Path) -> Path:
    """Write ``config.json`` and ``model.safetensors`` for ``model`` into ``directory``.

    The config records ``architectures`` (``PldrllmForCausalLM``, ``KvattnGPTForCausalLM`` or, for
    ``density="prefix"``, :data:`PREFIX_ARCHITECTURE` with ``model_type``
    :data:`PREFIX_MODEL_TYPE`) and ``torch_dtype``; the weights use the published names.

    The write is crash-safe: everything goes into the sibling folder ``<directory>.kvattn-staging``
    (other files already in ``directory`` are carried over), which then replaces ``directory``
    through :func:`replace_directory`, so a kill leaves either the old or the new checkpoint,
    never a new ``config.json`` beside old weights. Returns the directory.

    Raises
    ------
    ValueError
        ``directory`` is ``"."`` or ends in ``".."``, or exists and is not a folder.
    """
    directory = Path(directory)
    if directory.name in ("", ".."):
        # the folder is swapped as a whole, so it must not be the working directory or above
        raise ValueError(f"directory must name a folder such as 'ckpt', got {str(directory)!r}")
    recover_directory(directory)
    if directory.exists() and not directory.is_dir():
        raise ValueError(f"directory {directory} exists and is not a folder")
    staging = staging_directory(directory)
    shutil.rmtree(staging, ignore_errors=True)
    if directory.is_dir():
        shutil.copytree(
            directory,
            staging,
            ignore=lambda folder, names: (
                {CONFIG_NAME, WEIGHTS_NAME} if Path(folder) == directory else set()
            ),
            copy_function=_link_or_copy,
        )
    write_pretrained(model, staging)
    replace_directory(directory)
    return directory


def write_pretrained(model: PLDRLLM | GPT, directory: Path) -> None:
    """Write ``config.json`` and ``model.safetensors`` into ``directory`` (created if missing) in
    place, with no crash safety: for a fresh staging folder that :func:`replace_directory` then
    moves into place (as :func:`save_pretrained` and :func:`kvattn.train.pretrain` do)."""
    directory.mkdir(parents=True, exist_ok=True)
    config = {
        **model.config.to_dict(),
        "architectures": [model.architecture],
        "torch_dtype": str(next(model.parameters()).dtype).removeprefix("torch."),
    }
    if isinstance(model, PLDRLLM) and model.config.density == "prefix":
        config.update(model_type=PREFIX_MODEL_TYPE, architectures=[PREFIX_ARCHITECTURE])
    (directory / CONFIG_NAME).write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    tensors = {k: v.cpu() for k, v in to_published(model.state_dict(), model.config).items()}
    save_file(
        tensors,
        directory / WEIGHTS_NAME,
        metadata={"format": "pt", CHECKSUM_KEY: _checksum(tensors)},
    )


def staging_directory(directory: Path) -> Path:
    """The sibling folder ``<directory>.kvattn-staging`` where the new contents of ``directory``
    are written in full before :func:`replace_directory` swaps them in."""
    return directory.with_name(directory.name + _STAGING)


def _link_or_copy(src: str, dst: str) -> None:
    # A hard link costs no space for large carried-over files; across file systems, copy.
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def replace_directory(directory: Path) -> None:
    """Replace ``directory`` by the complete folder :func:`staging_directory` names, so that a
    kill at any moment leaves a complete folder: move the old one aside to
    ``<directory>.kvattn-replaced``, move the staging folder in, then delete the old one.
    :func:`recover_directory` repairs an interrupted replace."""
    aside = directory.with_name(directory.name + _ASIDE)
    shutil.rmtree(aside, ignore_errors=True)
    if directory.exists():
        directory.rename(aside)
    staging_directory(directory).rename(directory)
    shutil.rmtree(aside, ignore_errors=True)


def recover_directory(directory: Path) -> None:
    """Finish or undo a :func:`replace_directory` that was interrupted.

    With ``directory`` present, leftover siblings are stale and removed. Without it, a
    ``<directory>.kvattn-replaced`` folder means the kill came between the two moves: the staging
    folder was complete by then (the old one is moved aside only afterwards), so it is moved in;
    if it is gone the old folder is restored. A lone staging folder is an incomplete write and is
    removed."""
    directory = Path(directory)
    staging, aside = staging_directory(directory), directory.with_name(directory.name + _ASIDE)
    if not directory.exists() and aside.is_dir():
        (staging if staging.is_dir() else aside).rename(directory)
    shutil.rmtree(staging, ignore_errors=True)
    shutil.rmtree(aside, ignore_errors=True)


def _checksum(tensors: dict[str, Tensor]) -> str:
    """SHA-256 over every tensor's name, dtype, shape and bytes, in name order."""
    digest = hashlib.sha256()
    for key in sorted(tensors):
        t = tensors[key].contiguous()
        digest.update(f"{key}|{t.dtype}|{tuple(t.shape)}|".encode())
        digest.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return digest.hexdigest()


def resolve_checkpoint(path_or_hub_id: str | Path, revision: str | None = None) -> Path:
    """The local folder of a checkpoint: ``path_or_hub_id`` itself, or a hub download."""
    path = Path(path_or_hub_id)
    if path.suffix in _PICKLE_SUFFIXES:
        raise ValueError(
            f"{path} is a pickle-based checkpoint; kvattn reads only safetensors and JSON "
            "(unpickling can run arbitrary code). Convert it to model.safetensors first."
        )
    if path.exists():
        if not path.is_dir():
            raise ValueError(
                f"expected a checkpoint directory with {CONFIG_NAME} and "
                f"{WEIGHTS_NAME}, got the file {path}"
            )
        return path
    looks_local = path.parent != Path(".") and path.parent.exists()
    if (
        looks_local
        or str(path_or_hub_id).count("/") != 1
        or str(path_or_hub_id).startswith((".", "/"))
    ):
        raise FileNotFoundError(f"no checkpoint directory at {path}")
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise FileNotFoundError(
            f"no local directory {path}; to download {path_or_hub_id!r} from the Hugging Face "
            "hub, install huggingface_hub (pip install huggingface_hub)"
        ) from None
    return Path(
        snapshot_download(
            str(path_or_hub_id),
            revision=revision,
            allow_patterns=[CONFIG_NAME, WEIGHTS_NAME, "tokenizer.model"],
        )
    )


def read_config(directory: Path) -> tuple[dict, PLDRConfig]:
    """The raw ``config.json`` and the :class:`kvattn.pldr.PLDRConfig` built from it."""
    file = directory / CONFIG_NAME
    if not file.exists():
        raise FileNotFoundError(f"{directory} has no {CONFIG_NAME}")
    try:
        raw = json.loads(file.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{file} is not valid JSON: {err}") from None
    if not isinstance(raw, dict):
        raise ValueError(f"{file} must hold a JSON object")
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
    known = {k: v for k, v in raw.items() if k not in ("architectures", "torch_dtype")}
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
    try:
        return raw, PLDRConfig.from_dict(known)
    except ValueError as err:
        raise ValueError(f"{file}: {err}") from None


def load_pretrained(
    path_or_hub_id: str | Path,
    *,
    device: str | torch.device | None = None,
    dtype: torch.dtype | None = None,
    revision: str | None = None,
) -> PLDRLLM | GPT:
    """Load a model saved by :func:`save_pretrained` or published on the Hugging Face hub.

    ``path_or_hub_id`` is a local directory with ``config.json`` and ``model.safetensors``, or a
    hub id such as ``"fromthesky/PLDR-LLM-v51-SOC-110M-5"`` (downloaded with ``huggingface_hub``
    when online). The model class follows ``architectures`` (default PLDR-LLM); the dtype is
    ``dtype`` if given, else the one ``config.json`` records, else float32.

    Raises
    ------
    ValueError
        Pickle-based files; invalid or contradictory ``config.json`` (including a non-list
        ``architectures`` and a non-null ``rope_scaling``); missing or unexpected tensors;
        tensors whose shapes do not match the config; integer or non-finite weights (named); a
        truncated or corrupted safetensors file.
    FileNotFoundError
        No such directory (and no hub access), or a missing file in it.
    """
    directory = resolve_checkpoint(path_or_hub_id, revision)
    raw, config = read_config(directory)
    arch = (raw.get("architectures") or [PLDRLLM.architecture])[0]
    if arch not in _ARCHITECTURES:
        raise ValueError(f"unknown architecture {arch!r}; expected one of {list(_ARCHITECTURES)}")
    weights = directory / WEIGHTS_NAME
    if not weights.exists():
        raise FileNotFoundError(f"{directory} has no {WEIGHTS_NAME}")
    try:
        published = load_file(weights)
        with safe_open(weights, framework="pt") as handle:
            recorded = (handle.metadata() or {}).get(CHECKSUM_KEY)
    except (SafetensorError, OSError, ValueError) as err:
        raise ValueError(f"{weights} is truncated or corrupted: {err}") from None
    if recorded is not None and recorded != _checksum(published):
        raise ValueError(
            f"{weights} is corrupted: its tensors do not match the SHA-256 checksum "
            "recorded when it was saved"
        )
    for key, tensor in published.items():
        if key == "decoder.past_G_values_status":
            continue
        if not tensor.dtype.is_floating_point:
            raise ValueError(
                f"{weights}: tensor {key} has dtype {tensor.dtype}; weights must be floating "
                "point (integer weights are not cast silently)"
            )
        if not bool(torch.isfinite(tensor).all()):
            raise ValueError(f"{weights}: tensor {key} holds NaN or infinite values")
    with torch.device("meta"):
        model = _ARCHITECTURES[arch](config)
    state = from_published(published, config)
    expected = {k: v.shape for k, v in model.state_dict().items()}
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    if missing or unexpected:
        raise ValueError(
            f"{weights} does not match its config ({arch}): "
            + (f"missing {len(missing)} tensors, e.g. {missing[:3]}; " if missing else "")
            + (f"unexpected {len(unexpected)} tensors, e.g. {unexpected[:3]}" if unexpected else "")
        )
    for key, shape in expected.items():
        if state[key].shape != shape:
            raise ValueError(
                f"{key} has shape {tuple(state[key].shape)} but config.json implies "
                f"{tuple(shape)} (hidden_size={config.hidden_size}, heads="
                f"{config.num_attention_heads}, head_dim={config.head_dim}, vocab_size="
                f"{config.vocab_size}, intermediate_size={config.intermediate_size}, "
                f"A_dff={config.A_dff})"
            )
    model = model.to_empty(device=device or "cpu")
    model.load_state_dict(state)
    for module in model.modules():  # RoPE tables are not weights: rebuild them off meta
        if hasattr(module, "rope"):
            module.rope = type(module.rope)(
                config.d_k, config.max_position_embeddings, config.rope_theta, config.reference_rope
            )
    return model.to(dtype or _recorded_dtype(raw)).eval()


def _recorded_dtype(raw: dict) -> torch.dtype:
    """The dtype ``config.json`` records (``torch_dtype``, or the published ``dtype``)."""
    name = raw.get("torch_dtype") or raw.get("dtype") or "float32"
    dtype = getattr(torch, str(name), None)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"config.json records an unknown dtype {name!r}")
    return dtype
