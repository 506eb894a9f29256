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

from ...config import CACHE_MODES
from ...pldr import DecoderLM
from ..plots.checks import _require_items
from ._live import _encode, _live, _require_prompt, _text_box

#: New tokens a continuation asks for (fewer when the prompt leaves less of the context).
NEW_TOKENS = 48


def widget(
    models: Mapping[str, DecoderLM], tokenizer: spm.SentencePieceProcessor, prompt: str
) -> widgets.VBox:
    """Pick a model, a decoding mode and a temperature, edit the prompt, and read the continuation
    (chapter 8). ``models`` maps labels to :class:`kvattn.pldr.DecoderLM` models.

    A prompt longer than the model's context leaves room for the new tokens: the model sees its
    last ``max(context − NEW_TOKENS, context // 2)`` tokens, and the page says so and shows the
    text it saw; a
    prompt that encodes to no tokens is refused in words.

    Raises ValueError when ``models`` is empty or ``prompt`` encodes to no tokens (empty, white
    space, only characters the tokenizer drops), TypeError when ``prompt`` is no str or a model
    is not a :class:`kvattn.pldr.DecoderLM`.
    """
    _require_items("models", models, container=Mapping)
    _require_prompt("prompt", prompt, tokenizer)
    wrong = [k for k, m in models.items() if not isinstance(m, DecoderLM)]
    if wrong:
        raise TypeError(f"models {wrong} are not kvattn DecoderLM models (PLDRLLM or GPT)")

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
        context = cfg.max_position_embeddings
        # the prompt leaves room for the new tokens (half the context for a small model)
        room = max(context - NEW_TOKENS, context // 2, 1)
        why = f"its context is {context} tokens, {context - room} of them kept for new ones"
        ids, note = _encode(tokenizer, text_box.value, room, keep="last", why=why)
        if not ids:
            output.value = ""
            print(note)
            return
        if note:
            print(note)
        device = next(model.parameters()).device
        n_new = min(NEW_TOKENS, context - len(ids))
        gen = torch.Generator(device=device).manual_seed(0)
        out = model.generate(
            torch.tensor([ids], device=device),
            n_new,
            cache=cache_box.value,
            temperature=temp_box.value,
            generator=gen,
        )
        new = tokenizer.decode(out[0, len(ids) :].tolist())
        if not new.strip():
            print(f"The {out.shape[1] - len(ids)} new tokens decode to no visible text.")
        seen = text_box.value if not note else tokenizer.decode(ids)  # what the model saw
        output.value = (
            f"<pre style='white-space: pre-wrap'>{html.escape(seen)}<b>{html.escape(new)}</b></pre>"
        )
        display(output)

    return _live([text_box, model_box, cache_box, temp_box], draw)
