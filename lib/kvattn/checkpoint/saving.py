"""Saving a checkpoint crash-safely: the new folder is staged whole, then swapped in, and an
interrupted swap is finished or undone.

:func:`~kvattn.checkpoint.save_pretrained` replaces a folder crash-safely: it writes a complete
sibling folder, moves the old one aside, moves the new one in and only then deletes the old one
(see :func:`~kvattn.checkpoint.replace_directory`; :func:`~kvattn.checkpoint.recover_directory`
finishes or undoes an interrupted replace, :func:`~kvattn.checkpoint.finish_interrupted_save`
first verifies the folder it would move in).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file

from ..pldr import GPT, PLDRLLM
from ..schema import read_json
from .published import (
    CHECKSUM_KEY,
    CONFIG_NAME,
    WEIGHTS_NAME,
    _check_model,
    _checksum,
    write_pretrained,
)

#: Suffixes of the sibling folders of a crash-safe replace (new contents; the old folder).
_STAGING, _ASIDE = ".kvattn-staging", ".kvattn-replaced"


def save_pretrained(model: PLDRLLM | GPT, directory: str | Path) -> Path:
    """Write ``config.json`` and ``model.safetensors`` for ``model`` into ``directory``.

    The config records ``architectures`` and ``torch_dtype``; the weights use the published
    names. What a published loader (the Hugging Face port ``PldrllmForCausalLM`` of [gokden2025kvg])
    makes of each kind:

    * PLDR-LLM (PLGA, or constant G with ``custom_G_type``): ``PldrllmForCausalLM``, the same
      model.
    * :class:`kvattn.pldr.GPT`: written as the identity-G PLDR-LLM (``custom_G_type "identity"``,
      ``architectures ["PldrllmForCausalLM"]``, ``decoder.past_G_values`` with G_LM = I and
      ``decoder.past_G_values_status`` all true; see :mod:`kvattn.checkpoint.published`) and marked
      with :data:`~kvattn.checkpoint.published.GPT_MARKER_KEY`. The port builds the same SDPA model
      and reproduces the GPT's logits. A GPT ignores ``custom_G_type``, so a GPT config's value of
      it is not kept: it is written as ``"identity"`` and read back as None.
    * ``density="prefix"`` PLDR-LLM: ``model_type``
      :data:`~kvattn.checkpoint.published.PREFIX_MODEL_TYPE`, ``architectures``
      [:data:`~kvattn.checkpoint.published.PREFIX_ARCHITECTURE`].
      ``AutoConfig``/``AutoModelForCausalLM`` refuse the unknown model type; the port's class itself
      (``PldrllmForCausalLM.from_pretrained`` called directly) loads it anyway, only logging a
      warning that the model types differ, as the block-density model, whose logits differ from the
      prefix model's.

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
