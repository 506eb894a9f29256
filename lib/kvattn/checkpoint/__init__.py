"""Checkpoints in the published PLDR-LLM format (``config.json`` + ``model.safetensors``), in three
modules, each importing only from those listed before it:

* :mod:`kvattn.checkpoint.published` — the format: file names, the renaming of the PLGA tensors
  to the published keys and back (:func:`~kvattn.checkpoint.to_published`,
  :func:`~kvattn.checkpoint.from_published`), how a constant-G model, a GPT and a prefix-density
  model are written, the tensors' checksum, ``config.json`` written and read
  (:func:`~kvattn.checkpoint.write_pretrained`, :func:`~kvattn.checkpoint.read_config`);
* :mod:`kvattn.checkpoint.saving` — saving crash-safely
  (:func:`~kvattn.checkpoint.save_pretrained`): a staged folder swapped in
  (:func:`~kvattn.checkpoint.replace_directory`), an interrupted swap finished or undone
  (:func:`~kvattn.checkpoint.recover_directory`,
  :func:`~kvattn.checkpoint.finish_interrupted_save`);
* :mod:`kvattn.checkpoint.loading` — loading (:func:`~kvattn.checkpoint.load_pretrained`): a
  folder or a hub download (:func:`~kvattn.checkpoint.resolve_checkpoint`), pickle refused,
  config and tensors validated, the checksum verified, the model class its ``architectures``
  name (the architecture registry).

Every public name is re-exported here, so ``kvattn.checkpoint.X`` works for all of them.
"""

from ..pretrained import PreTrainedModel
from .loading import DTYPE_NAMES, load_pretrained, resolve_checkpoint
from .published import (
    CHECKSUM_KEY,
    CONFIG_NAME,
    GPT_MARKER_KEY,
    PREFIX_ARCHITECTURE,
    PREFIX_MODEL_TYPE,
    WEIGHTS_NAME,
    from_published,
    read_config,
    to_published,
    write_pretrained,
)
from .saving import (
    finish_interrupted_save,
    recover_directory,
    replace_directory,
    save_pretrained,
    staging_directory,
)

__all__ = [
    "CHECKSUM_KEY",
    "CONFIG_NAME",
    "DTYPE_NAMES",
    "GPT_MARKER_KEY",
    "PREFIX_ARCHITECTURE",
    "PREFIX_MODEL_TYPE",
    "WEIGHTS_NAME",
    "finish_interrupted_save",
    "from_published",
    "load_pretrained",
    "read_config",
    "recover_directory",
    "replace_directory",
    "resolve_checkpoint",
    "save_pretrained",
    "staging_directory",
    "to_published",
    "write_pretrained",
]

# The models' save_pretrained/from_pretrained methods are these functions (kvattn.pretrained).
PreTrainedModel.use_checkpoint_io(save_pretrained, load_pretrained)
