"""The base class of the course's models: saving and loading the way the ecosystem does it,
``model.save_pretrained(dir)`` and ``PLDRLLM.from_pretrained(dir)`` (Hugging Face transformers'
``PreTrainedModel`` idea), with the checkpoint code as the one code path.

The file format lives in :mod:`kvattn.checkpoint`, which sits above the models (it builds them).
So that this class can sit below them without an import cycle, the checkpoint module hands its
two functions to :meth:`PreTrainedModel.use_checkpoint_io` when it is imported, and
``import kvattn`` imports it: the methods are the functions
:func:`kvattn.checkpoint.save_pretrained` and :func:`kvattn.checkpoint.load_pretrained`, not
copies of them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from torch import nn


class PreTrainedModel(nn.Module):
    """An ``nn.Module`` that saves itself and loads its class's checkpoints
    (:class:`kvattn.pldr.PLDRLLM`, :class:`kvattn.pldr.GPT`)."""

    _save: Callable[..., Path] | None = None
    _load: Callable[..., nn.Module] | None = None

    @staticmethod
    def use_checkpoint_io(save: Callable[..., Path], load: Callable[..., nn.Module]) -> None:
        """Install the checkpoint module's ``save_pretrained`` and ``load_pretrained`` (called
        once, by :mod:`kvattn.checkpoint` when it is imported)."""
        PreTrainedModel._save, PreTrainedModel._load = save, load

    @staticmethod
    def _io() -> tuple[Callable[..., Path], Callable[..., nn.Module]]:
        if PreTrainedModel._save is None or PreTrainedModel._load is None:
            raise RuntimeError(
                "no checkpoint code installed: import kvattn (or kvattn.checkpoint) first"
            )
        return PreTrainedModel._save, PreTrainedModel._load

    def save_pretrained(self, directory: str | Path) -> Path:
        """Write ``config.json`` and ``model.safetensors`` into ``directory``: exactly
        :func:`kvattn.checkpoint.save_pretrained` ``(self, directory)``, whose docstring gives
        the format and the errors. Returns the directory."""
        save, _ = self._io()
        return save(self, directory)

    @classmethod
    def from_pretrained(cls, path_or_hub_id: str | Path, **kwargs: Any) -> PreTrainedModel:
        """Load a checkpoint of this class: :func:`kvattn.checkpoint.load_pretrained` (same
        arguments: ``device``, ``dtype``, ``revision``), which picks the class from
        ``config.json``; called on a subclass, the checkpoint must be of that class.

        Raises
        ------
        TypeError
            The checkpoint holds another class (a GPT asked of ``PLDRLLM`` or the reverse);
            otherwise as :func:`kvattn.checkpoint.load_pretrained`.
        """
        _, load = cls._io()
        model = load(path_or_hub_id, **kwargs)
        if not isinstance(model, cls):
            raise TypeError(
                f"{path_or_hub_id} holds a {type(model).__name__}, not a {cls.__name__}; "
                f"load it with {type(model).__name__}.from_pretrained or kvattn.load_pretrained"
            )
        return model
