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

A :class:`kvattn.pldr.GPT` is written as the published format's own scaled dot-product attention
model: ``custom_G_type "identity"``, ``architectures ["PldrllmForCausalLM"]`` and the G buffers
above with G_LM = I (A and A_LM zero, as the port's ``G_values_init`` makes them), plus the key
:data:`GPT_MARKER_KEY` that published loaders ignore. The port then builds no metric learner or
PLGA tensors and computes q·I·kᵀ = q·kᵀ: the GPT's logits [gokden2025kvg].

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

from ._checks import check_device
from .config import PLDRConfig
from .pldr import GPT, PLDRLLM
from .pretrained import PreTrainedModel
from .schema import read_json

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
#: config.json key (value ``GPT.architecture``) that marks a GPT written as an identity-G
#: PLDR-LLM; published loaders ignore it, :func:`load_pretrained` builds a GPT from it.
GPT_MARKER_KEY = "kvattn_architecture"
#: The dtype names :func:`load_pretrained` accepts (those config.json records).
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

    The config records ``architectures`` and ``torch_dtype``; the weights use the published
    names. What a published loader (the Hugging Face port ``PldrllmForCausalLM`` of [gokden2025kvg])
    makes of each kind:

    * PLDR-LLM (PLGA, or constant G with ``custom_G_type``): ``PldrllmForCausalLM``, the same
      model.
    * :class:`kvattn.pldr.GPT`: written as the identity-G PLDR-LLM (``custom_G_type
      "identity"``, ``architectures ["PldrllmForCausalLM"]``, ``decoder.past_G_values`` with
      G_LM = I and ``decoder.past_G_values_status`` all true; see the module docstring) and
      marked with :data:`GPT_MARKER_KEY`. The port builds the same SDPA model and reproduces the
      GPT's logits. A GPT ignores ``custom_G_type``, so a GPT config's value of it is not kept:
      it is written as ``"identity"`` and read back as None.
    * ``density="prefix"`` PLDR-LLM: ``model_type`` :data:`PREFIX_MODEL_TYPE`, ``architectures``
      [:data:`PREFIX_ARCHITECTURE`]. ``AutoConfig``/``AutoModelForCausalLM`` refuse the unknown
      model type; the port's class itself (``PldrllmForCausalLM.from_pretrained`` called
      directly) loads it anyway, only logging a warning that the model types differ, as the
      block-density model, whose logits differ from the prefix model's.

    The write is crash-safe: everything goes into the sibling folder ``<directory>.kvattn-staging``
    (other files already in ``directory`` are carried over), which then replaces ``directory``
    through :func:`replace_directory`, so a kill leaves either the old or the new checkpoint,
    never a new ``config.json`` beside old weights. Symbolic links inside ``directory`` are
    carried over as links. When ``directory`` itself is a symbolic link to a folder, that folder
    (the link's target) is replaced and the link is kept. Returns the directory as given.

    Raises
    ------
    TypeError
        ``model`` is not a :class:`kvattn.pldr.PLDRLLM` or :class:`kvattn.pldr.GPT`, or
        ``directory`` is not a str or path; before anything is written.
    ValueError
        ``directory`` is ``"."`` or ends in ``".."``, is the working directory or contains it
        (in any spelling: relative, through ``..`` or a symbolic link), is a symbolic link
        whose target does not exist (and no interrupted save moved it aside), or exists and is
        not a folder; a file or link at a name the swap reserves; all before anything is written.
    FileExistsError
        An interrupted save left an old folder with files ``directory`` lacks (kept, named).
    """
    _check_model(model)
    if not isinstance(directory, str | os.PathLike):
        raise TypeError(f"directory must be a str or Path, got {type(directory).__name__}")
    given = directory = Path(directory)
    if directory.name in ("", ".."):
        # the folder is swapped as a whole, so it must not be the working directory or above
        raise ValueError(f"directory must name a folder such as 'ckpt', got {str(directory)!r}")
    cwd = Path.cwd().resolve()
    if directory.resolve() in (cwd, *cwd.parents):
        raise ValueError(
            f"directory {str(directory)!r} is the working directory {str(cwd)!r} or contains it; "
            "the folder is replaced as a whole, which would leave this process in a deleted "
            "folder: save into a folder such as 'ckpt'"
        )
    if directory.is_symlink():
        # The swap renames the folder; renaming a link would move the link and leave its target
        # with the old weights, so the target is swapped instead and the link keeps pointing at it.
        directory = directory.resolve()
        if not directory.exists() and not _aside_directory(directory).is_dir():  # else recovered
            staged = staging_directory(directory)
            keep = f"rename {staged}, a save interrupted before its move, to {directory.name}"
            raise ValueError(
                f"directory {given} is a symbolic link to {directory}, which does not exist; "
                f"{keep if staged.is_dir() else 'create that folder'} or save elsewhere"
            )
    recover_directory(directory)
    if directory.exists() and not directory.is_dir():
        raise ValueError(f"directory {directory} exists and is not a folder")
    staging = staging_directory(directory)  # recover_directory removed any left there
    if directory.is_dir():
        shutil.copytree(
            directory,
            staging,
            symlinks=True,  # a link to a folder would otherwise become a copy of that folder
            ignore=lambda folder, names: (
                {CONFIG_NAME, WEIGHTS_NAME} if Path(folder) == directory else set()
            ),
            copy_function=_link_or_copy,
        )
    write_pretrained(model, staging)
    replace_directory(directory)
    return given


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


def _swapped(directory: Path) -> Path:
    """The folder a swap renames: ``directory`` itself, or the folder a symbolic link points at
    (renaming the link would move the link and leave its target with the old contents; the
    staging folder must sit beside the real folder, as a rename cannot cross file systems)."""
    directory = Path(directory)
    return directory.resolve() if directory.is_symlink() else directory


def staging_directory(directory: Path) -> Path:
    """The sibling folder ``<directory>.kvattn-staging`` where the new contents of ``directory``
    are written in full before :func:`replace_directory` swaps them in (beside the link's target
    when ``directory`` is a symbolic link)."""
    target = _swapped(directory)
    return target.with_name(target.name + _STAGING)


def _aside_directory(directory: Path) -> Path:
    # where replace_directory keeps the old folder between its two moves
    return (target := _swapped(directory)).with_name(target.name + _ASIDE)


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
    :func:`recover_directory` repairs an interrupted replace. A symbolic link keeps pointing at
    its target, whose contents are replaced."""
    directory = _swapped(directory)
    aside = _aside_directory(directory)
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
    removed. For a symbolic link, its target is what was swapped.

    Raises
    ------
    ValueError
        A file or symbolic link at either sibling name (no leftover of a swap), before any move.
    FileExistsError
        The old folder moved aside holds files ``directory`` lacks (re-made by hand, say): kept.
    """
    directory = _swapped(directory)
    staging, aside = staging_directory(directory), _aside_directory(directory)
    for path in (staging, aside):  # rmtree cannot remove these, and a swap would fail halfway
        if path.is_symlink() or (path.exists() and not path.is_dir()):
            raise ValueError(
                f"{path} is a {'symbolic link' if path.is_symlink() else 'file'}, not a folder "
                f"kvattn made: that name is reserved for replacing {directory}; move it away"
            )
    if not directory.exists() and aside.is_dir():
        (staging if staging.is_dir() else aside).rename(directory)
    # rglob lists links without following them; the aside folder may be gone by now
    kept = [p.relative_to(aside) for p in aside.rglob("*") if not p.is_dir() or p.is_symlink()]
    lost = sorted(str(name) for name in kept if not os.path.lexists(directory / name))
    if lost:
        raise FileExistsError(
            f"{aside} holds {directory.name} as it was before an interrupted save, with files "
            f"{directory} lacks ({', '.join(lost[:8])}): kept; move what you need, then delete it"
            + (f" ({staging} holds the interrupted save)" if staging.is_dir() else "")
        )
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


def finish_interrupted_save(directory: Path) -> None:
    """Recover the checkpoint ``directory`` when a save was killed between the two moves of
    :func:`replace_directory` (``directory`` missing, ``<directory>.kvattn-replaced`` present).

    The folder :func:`recover_directory` would move in (the staging folder, complete by then, or
    else the old one) is verified first: a readable ``config.json`` and a ``model.safetensors``
    whose recorded SHA-256 checksum matches its tensors. If it verifies, :func:`recover_directory`
    completes the move, as the training code's resume does. A save still running in another
    process at that instant would find its staging folder gone and fail; its checkpoint is the
    one moved in. Nothing happens when ``directory`` exists or no save was interrupted.

    Raises
    ------
    FileNotFoundError
        The folder to move in cannot be verified (both leftover folders named, nothing moved),
        or only a staging folder is left (a first save killed before its move: named, not
        moved, because :func:`recover_directory` treats it as incomplete).
    FileExistsError
        The old folder holds files the one moved in lacks (kept; see :func:`recover_directory`).
    """
    directory = Path(directory)
    staging, aside = staging_directory(directory), _aside_directory(directory)
    if directory.exists():
        return
    if aside.is_dir():
        candidate = staging if staging.is_dir() else aside
        problem = _verify_checkpoint(candidate)
        if problem is None:
            recover_directory(directory)
            return
        raise FileNotFoundError(
            f"no checkpoint directory at {directory}: a save was interrupted between its two "
            f"moves, and {candidate}, which would replace it, cannot be verified ({problem}); "
            f"the old checkpoint is in {aside}. Inspect them and rename the right one to "
            f"{directory.name}"
        )
    if staging.is_dir():
        raise FileNotFoundError(
            f"no checkpoint directory at {directory}; {staging} holds a save that was "
            f"interrupted before it was moved into place (the next save there deletes it); if it "
            f"is complete, rename it to {directory.name}"
        )


def _verify_checkpoint(directory: Path) -> str | None:
    """Why ``directory`` is not a complete checkpoint written by kvattn, or None."""
    try:
        # config.json is written before the weights, so verified weights vouch for it
        read_json(directory / CONFIG_NAME, "config")
        weights = directory / WEIGHTS_NAME
        if not weights.exists():
            return f"it has no {WEIGHTS_NAME}"
        tensors = load_file(weights)
        with safe_open(weights, framework="pt") as handle:
            recorded = (handle.metadata() or {}).get(CHECKSUM_KEY)
    except (SafetensorError, OSError, ValueError) as err:
        return str(err)
    if recorded is None:
        return f"its {WEIGHTS_NAME} records no checksum"
    if recorded != _checksum(tensors):
        return f"its {WEIGHTS_NAME} does not match its recorded checksum"
    return None


def read_config(directory: Path) -> tuple[dict, PLDRConfig]:
    """The raw ``config.json`` and the :class:`kvattn.config.PLDRConfig` built from it (for a GPT
    marked with :data:`GPT_MARKER_KEY`, the GPT's config: ``custom_G_type`` None). A key close to
    a field, or another library's name for one, draws a
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
    (:data:`DTYPE_NAMES`: ``"float32"``, ``"bfloat16"``, ``"float16"``, ``"float64"``; other
    spellings such as ``"half"`` are refused); if None, the dtype ``config.json`` records, else
    float32.

    The model class follows ``architectures`` (default PLDR-LLM), with one exception: a config
    with :data:`GPT_MARKER_KEY` (a GPT that :func:`save_pretrained` wrote as an identity-G
    PLDR-LLM) gives a :class:`kvattn.pldr.GPT`, after checking that its G_LM is the identity in
    every layer. Every identity-G checkpoint computes SDPA, but only marked ones load as GPT: an
    unmarked one (published, or a kvattn constant-G model with ``custom_G_type "identity"``)
    loads as before, as the constant-G PLDR-LLM, whose G_LM stays a buffer one can read or
    replace, so that every round trip gives back the class that was saved; its logits are the
    GPT's exactly (q·I = q). Old GPT checkpoints (``architectures ["KvattnGPTForCausalLM"]``, no
    G buffers) load as before.

    A ``density="prefix"`` checkpoint (``model_type`` :data:`PREFIX_MODEL_TYPE`) loads here as
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
        ``density "prefix"`` without ``model_type`` :data:`PREFIX_MODEL_TYPE`, ``torch_dtype``
        and ``dtype`` that disagree, a GPT marker without ``custom_G_type "identity"`` or with
        a G_LM other than I; a field that is wrong because of a near-typo key names that key),
        all before the weights are read; missing or unexpected tensors; tensors whose shapes do
        not match the config; integer or non-finite weights (named); a truncated or corrupted
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
    :data:`DTYPE_NAMES`, and a device passed here is named."""
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


# The models' save_pretrained/from_pretrained methods are these functions (kvattn.pretrained).
PreTrainedModel.use_checkpoint_io(save_pretrained, load_pretrained)
