"""The generation explorer (chapters 8 and 11): a model's continuation of a prompt under each
decoding mode and temperature.

Compute function: :meth:`kvattn.pldr.DecoderLM.generate`. Live face only (:func:`widget`): a
continuation of any prompt has no frames to precompute.
"""

from __future__ import annotations

import html
from collections.abc import Mapping

import ipywidgets as widgets
import sentencepiece as spm
import torch
from IPython.display import display

from ..config import CACHE_MODES
from ..pldr import DecoderLM
from ..plots.checks import _require_items
from ._live import _EMPTY_PROMPT, _live, _require_prompt, _text_box


def widget(
    models: Mapping[str, DecoderLM], tokenizer: spm.SentencePieceProcessor, prompt: str
) -> widgets.VBox:
    """Pick a model, a decoding mode and a temperature, edit the prompt, and read the continuation
    (chapter 8). ``models`` maps labels to :class:`kvattn.pldr.DecoderLM` models.

    Raises ValueError when ``models`` is empty or ``prompt`` is empty or white space, TypeError
    when ``prompt`` is no str.
    """
    _require_items("models", models, container=Mapping)
    _require_prompt("prompt", prompt)

    text_box = _text_box(prompt, "prompt")
    model_box = widgets.Dropdown(options=list(models), description="model")
    cache_box = widgets.Dropdown(options=list(CACHE_MODES), value="kv", description="cache")
    temp_box = widgets.FloatSlider(
        value=0.0, min=0.0, max=1.5, step=0.1, description="temperature", continuous_update=False
    )
    output = widgets.HTML()

    def draw() -> None:
        model = models[model_box.value]
        cfg = model.config
        ids = tokenizer.encode(text_box.value)[: cfg.max_position_embeddings - 1]
        if not ids:
            print(_EMPTY_PROMPT)
            return
        device = next(model.parameters()).device
        n_new = min(48, cfg.max_position_embeddings - len(ids))
        gen = torch.Generator(device=device).manual_seed(0)
        out = model.generate(
            torch.tensor([ids], device=device),
            n_new,
            cache=cache_box.value,
            temperature=temp_box.value,
            generator=gen,
        )
        new = tokenizer.decode(out[0, len(ids) :].tolist())
        output.value = (
            f"<pre style='white-space: pre-wrap'>{html.escape(text_box.value)}"
            f"<b>{html.escape(new)}</b></pre>"
        )
        display(output)

    return _live([text_box, model_box, cache_box, temp_box], draw)
