"""Loading a checkpoint: a local folder or a hub download, its config, its tensors verified, and
the model class its ``architectures`` name.

Only JSON and safetensors are ever read; pickle-based files (``.bin``, ``.pt``, ``.pth``,
``.pkl``, ``.ckpt``) are refused, because unpickling an untrusted file can run arbitrary code.
:func:`~kvattn.checkpoint.load_pretrained` verifies the SHA-256 checksum that
:func:`~kvattn.checkpoint.save_pretrained` records in the safetensors metadata, when present.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file

from .._checks import check_device
from ..config import PLDRConfig
from ..pldr import GPT, PLDRLLM
from .published import (
    CHECKSUM_KEY,
    CONFIG_NAME,
    GPT_MARKER_KEY,
    PREFIX_ARCHITECTURE,
    WEIGHTS_NAME,
    _checksum,
    _recorded_dtype,
    from_published,
    read_config,
)
from .saving import finish_interrupted_save

Tensor = torch.Tensor

#: The dtype names :func:`~kvattn.checkpoint.load_pretrained` accepts (those config.json
#: records).
DTYPE_NAMES = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
    "float64": torch.float64,
}
_ARCHITECTURES = {
    PLDRLLM.architecture: PLDRLLM,
    GPT.architecture: GPT,
    PREFIX_ARCHITECTURE: PLDRLLM,
}
_PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".ckpt")


def resolve_checkpoint(path_or_hub_id: str | Path, revision: str | None = None) -> Path:
    """The local folder of a checkpoint: ``path_or_hub_id`` itself, or a hub download.

    A local folder that a kill between the two moves of :func:`replace_directory` left missing
    is first recovered (see :func:`finish_interrupted_save`). A missing path of the form
    ``owner/name`` whose ``owner`` is no folder here is taken for a hub id.

    Raises
    ------
    TypeError
        ``path_or_hub_id`` is not a str or path, or ``revision`` not None or a str.
    ValueError
        A pickle-based file, or a file instead of a folder.
    FileNotFoundError
        No such folder (for a possible hub id: huggingface_hub missing or the download failed,
        said after the missing folder); an interrupted save that cannot be completed.
    """
    if not isinstance(path_or_hub_id, str | os.PathLike):
        raise TypeError(
            "path_or_hub_id must be a str or a path (a checkpoint folder or a hub id such as "
            f"'owner/name'), got {path_or_hub_id!r} ({type(path_or_hub_id).__name__})"
        )
    if revision is not None and not isinstance(revision, str):
        raise TypeError(
            f"revision must be None or a str, got {revision!r} ({type(revision).__name__})"
        )
    path = Path(path_or_hub_id)
    if path.suffix in _PICKLE_SUFFIXES:
        raise ValueError(
            f"{path} is a pickle-based checkpoint; kvattn reads only safetensors and JSON "
            "(unpickling can run arbitrary code). Convert it to model.safetensors first."
        )
    if not path.exists():
        finish_interrupted_save(path)
    if path.exists():
        if not path.is_dir():
            raise ValueError(
                f"expected a checkpoint directory with {CONFIG_NAME} and "
                f"{WEIGHTS_NAME}, got the file {path}"
            )
        return path
    name = str(path_or_hub_id)
    hub_like = name.count("/") == 1 and not name.startswith((".", "/"))
    if not hub_like or (path.parent != Path(".") and path.parent.exists()):  # a local path
        raise FileNotFoundError(f"no checkpoint directory at {path}")
    # A mistyped local path reads as a hub id too: say first that the folder is missing.
    missing = f"no checkpoint directory at {path} (no folder {path.parent} here)"
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise FileNotFoundError(
            f"{missing}; if {name!r} is a Hugging Face hub id, install "
            "huggingface_hub (pip install huggingface_hub) to download it"
        ) from None
    try:
        return Path(
            snapshot_download(
                name,
                revision=revision,
                allow_patterns=[CONFIG_NAME, WEIGHTS_NAME, "tokenizer.model"],
            )
        )
    except (OSError, ValueError) as err:  # the hub's HTTP, cache and repo-id errors
        raise FileNotFoundError(
            f"{missing}, and downloading {name!r} from the Hugging Face hub "
            f"failed: {type(err).__name__}: {err}"
        ) from err


def load_pretrained(
    path_or_hub_id: str | Path,
    *,
    device: str | torch.device | None = None,
    dtype: torch.dtype | str | None = None,
    revision: str | None = None,
) -> PLDRLLM | GPT:
    """Load a model saved by :func:`save_pretrained` or published on the Hugging Face hub.

    ``path_or_hub_id`` is a local directory with ``config.json`` and ``model.safetensors``, or a
    hub id such as ``"fromthesky/PLDR-LLM-v51-SOC-110M-5"`` (downloaded with ``huggingface_hub``
    when online). A local folder that a save killed between its two moves left missing is
    recovered first, when the staged checkpoint verifies (see :func:`finish_interrupted_save`).
    ``device``: None (CPU), a str such as ``"cuda:0"`` or a ``torch.device``. ``dtype``: a
    floating-point ``torch.dtype``, or one of the names config.json records
    (:data:`~kvattn.checkpoint.loading.DTYPE_NAMES`: ``"float32"``, ``"bfloat16"``, ``"float16"``,
    ``"float64"``; other spellings such as ``"half"`` are refused); if None, the dtype
    ``config.json`` records, else float32.

    The model class follows ``architectures`` (default PLDR-LLM), with one exception: a config with
    :data:`~kvattn.checkpoint.published.GPT_MARKER_KEY` (a GPT that :func:`save_pretrained` wrote as
    an identity-G PLDR-LLM) gives a :class:`kvattn.pldr.GPT`, after checking that its G_LM is the
    identity in every layer. Every identity-G checkpoint computes SDPA, but only marked ones load as
    GPT: an unmarked one (published, or a kvattn constant-G model with ``custom_G_type "identity"``)
    loads as before, as the constant-G PLDR-LLM, whose G_LM stays a buffer one can read or replace,
    so that every round trip gives back the class that was saved; its logits are the
    GPT's exactly (q·I = q). Old GPT checkpoints (``architectures ["KvattnGPTForCausalLM"]``, no G
    buffers) load as before.  A ``density="prefix"`` checkpoint (``model_type``
    :data:`~kvattn.checkpoint.published.PREFIX_MODEL_TYPE`) loads here as
    the prefix model; the published ``AutoModelForCausalLM`` refuses its model type, and the
    port's ``PldrllmForCausalLM`` class itself loads it, with a logged warning only, as the
    block-density model, whose logits differ (see :func:`save_pretrained`).

    Raises
    ------
    TypeError
        ``path_or_hub_id``, ``revision``, ``device`` or ``dtype`` of the wrong type (a dtype
        given as the device is named), before any work.
    ValueError
        An unknown ``dtype`` name, a device string given as ``dtype`` (or a dtype name as
        ``device``), an invalid device string, a device this machine lacks (``"cuda"`` without
        CUDA, a GPU index beyond the count), the ``meta`` device (it holds no weights), a
        non-floating dtype, all before any work; pickle-based files; invalid or contradictory
        ``config.json`` (including a non-list ``architectures``, a non-null ``rope_scaling``,
        ``density "prefix"`` without ``model_type``
        :data:`~kvattn.checkpoint.published.PREFIX_MODEL_TYPE`, ``torch_dtype`` and ``dtype`` that
        disagree, a GPT marker without ``custom_G_type "identity"`` or with a G_LM other than I; a
        field that is wrong because of a near-typo key names that key), all before the weights are
        read; missing or unexpected tensors; tensors whose shapes do not match the config; integer
        or non-finite weights (named); a truncated or corrupted
        safetensors file.
    FileNotFoundError
        No such directory (for a path that could be a hub id: and no huggingface_hub, or the
        download failed), or a missing file in it; an interrupted save whose staged checkpoint
        cannot be verified (both leftover folders named).
    FileExistsError
        An interrupted save's old folder holds files the checkpoint moved in lacks (kept, named).
    """
    device = _check_device(device)
    dtype = _check_dtype(dtype)
    directory = resolve_checkpoint(path_or_hub_id, revision)
    raw, config = read_config(directory)
    arch = (raw.get("architectures") or [PLDRLLM.architecture])[0]
    if arch not in _ARCHITECTURES:
        raise ValueError(f"unknown architecture {arch!r}; expected one of {list(_ARCHITECTURES)}")
    marked_gpt = GPT_MARKER_KEY in raw
    if marked_gpt:
        arch = GPT.architecture
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
    if marked_gpt:
        published = _without_identity_g(published, config, weights)
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


def _without_identity_g(
    published: dict[str, Tensor], config: PLDRConfig, weights: Path
) -> dict[str, Tensor]:
    """The tensors of a marked GPT checkpoint without its G buffers, which must hold G_LM = I in
    every layer and be marked as set (what :func:`write_pretrained` writes)."""
    L, H, d_k = config.num_hidden_layers, config.num_attention_heads, config.d_k
    names = ("decoder.past_G_values", "decoder.past_G_values_status")
    missing = [n for n in names if n not in published]
    if missing:
        raise ValueError(
            f"{weights}: a GPT marked with {GPT_MARKER_KEY} must hold the G buffers of "
            f"custom_G_type 'identity'; missing {', '.join(missing)}"
        )
    past, status = (published[n] for n in names)
    if tuple(past.shape) != (L, 3, 1, H, d_k, d_k):
        raise ValueError(
            f"{weights}: decoder.past_G_values has shape {tuple(past.shape)}, config.json "
            f"implies {(L, 3, 1, H, d_k, d_k)}"
        )
    if status.dtype != torch.bool or tuple(status.shape) != (L,) or not bool(status.all()):
        raise ValueError(
            f"{weights}: decoder.past_G_values_status must mark every layer's G as set "
            f"(bool [{L}], all true), got {status.tolist()}"
        )
    eye = torch.eye(d_k, dtype=past.dtype)
    for i in range(L):
        if not torch.equal(past[i, 2, 0], eye.expand(H, d_k, d_k)):
            raise ValueError(
                f"{weights}: config.json marks a GPT ({GPT_MARKER_KEY}), which needs G_LM = I, "
                f"but decoder.past_G_values[{i}, 2] (layer {i}) is not the identity; without "
                "the marker it loads as a constant-G PLDR-LLM"
            )
    return {k: v for k, v in published.items() if k not in names}


def _check_device(device: object) -> torch.device | None:
    """``device`` as a ``torch.device`` (None stays None) that this machine has and that holds
    values (not ``meta``); a dtype passed here is named."""
    if device is None:
        return None
    if isinstance(device, torch.device):
        return _check_usable(device)
    if isinstance(device, torch.dtype):
        raise TypeError(
            f"device got the dtype {device}: did you mean dtype={device}? (device takes a str "
            "such as 'cuda:0' or a torch.device)"
        )
    if not isinstance(device, str):
        raise TypeError(
            "device must be None, a str such as 'cuda:0' or a torch.device, got "
            f"{device!r} ({type(device).__name__})"
        )
    if device in DTYPE_NAMES:
        raise ValueError(f"device {device!r} is a dtype name: did you mean dtype={device!r}?")
    try:
        parsed = torch.device(device)
    except RuntimeError:
        raise ValueError(
            f"device {device!r} is not a device such as 'cpu', 'cuda', 'cuda:1' or 'mps'"
        ) from None
    return _check_usable(parsed)


def _check_usable(device: torch.device) -> torch.device:
    # Loading onto a missing GPU failed only after the files were read; onto meta it returned a
    # model without weights.
    if device.type == "meta":
        raise ValueError(
            "device 'meta' holds no values (only shapes): a model loaded there has no weights; "
            "use 'cpu' or a GPU this machine has"
        )
    return check_device("device", str(device))


def _check_dtype(dtype: object) -> torch.dtype | None:
    """``dtype`` as a floating-point ``torch.dtype`` (None stays None); names are those of
    :data:`~kvattn.checkpoint.loading.DTYPE_NAMES`, and a device passed here is named."""
    if isinstance(dtype, str):
        if dtype in DTYPE_NAMES:
            return DTYPE_NAMES[dtype]
        try:
            torch.device(dtype)
        except RuntimeError:
            raise ValueError(
                f"dtype {dtype!r} is not one of {list(DTYPE_NAMES)} (the names config.json "
                "records) or a torch dtype"
            ) from None
        raise ValueError(f"dtype {dtype!r} is a device: did you mean device={dtype!r}?")
    if dtype is not None and not isinstance(dtype, torch.dtype):
        raise TypeError(
            f"dtype must be None, a torch dtype or one of {list(DTYPE_NAMES)}, got {dtype!r}"
        )
    if dtype is not None and not dtype.is_floating_point:
        raise ValueError(f"dtype must be a floating-point dtype, got {dtype}")
    return dtype
