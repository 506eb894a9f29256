"""What the explorers' live faces share: the redraw wiring, the prompt check and the layer and
head drop-downs of a decoder."""

from __future__ import annotations

import io
from collections.abc import Callable

import ipywidgets as widgets
import matplotlib.pyplot as plt
from IPython.display import Image, display
from PIL import Image as PILImage

from ...config import PLDRConfig
from ..plots.checks import _require_index

#: What an explorer shows when the reader empties its prompt box (there is nothing to run on).
_EMPTY_PROMPT = "Type a prompt: the text box is empty."


def _live(controls: list[widgets.Widget], draw: Callable[[], None]) -> widgets.VBox:
    """Wire ``controls`` to redraw into a fresh Output widget; draw once now."""
    out = widgets.Output()

    def redraw(_change=None) -> None:
        with out:
            out.clear_output(wait=True)
            draw()
            _show_figures()

    for control in controls:
        control.observe(redraw, names="value")
    redraw()
    # The row wraps, so a text box at full width keeps a line of its own: squeezed into one row
    # beside the drop-downs and a slider, a 60 % box was two characters wide.
    return widgets.VBox([widgets.HBox(controls, layout=widgets.Layout(flex_flow="row wrap")), out])


def _show_figures() -> None:
    """Display every open matplotlib figure as a PNG of at most 256 colours, and close it.

    A book page embeds each live face's last drawing in its widget state, and full-colour PNGs
    of heat maps made chapter 4's page weigh over 1 MB; a 256-colour palette (as many as a colour
    map has) makes them about 2.5 times smaller and looks the same.
    """
    for number in plt.get_fignums():
        fig = plt.figure(number)
        raw = io.BytesIO()
        fig.savefig(raw, format="png", bbox_inches="tight")
        plt.close(fig)
        small = io.BytesIO()
        PILImage.open(raw).convert("RGB").quantize(256).save(small, format="png", optimize=True)
        display(Image(small.getvalue()))


def _text_box(value: str, description: str) -> widgets.Textarea:
    """A full-width prompt box that redraws when the reader leaves it (not on every key)."""
    return widgets.Textarea(
        value=value,
        description=description,
        continuous_update=False,
        layout=widgets.Layout(width="100%"),
    )


def _require_prompt(name: str, text: object, tokenizer: object = None) -> None:
    """``text`` is a str that encodes to at least one token (with ``tokenizer``; without one,
    a str with more than white space): a prompt of no token ids (empty, white space, or only
    characters the tokenizer drops, such as a zero-width space or a BOM) has nothing to run on
    (and ``torch.tensor([])`` is a float tensor that the models refuse)."""
    if not isinstance(text, str):
        raise TypeError(f"{name} must be a str, got {type(text).__name__}")
    if not text.strip():
        raise ValueError(f"{name} is empty ({text!r}): type a prompt")
    if tokenizer is not None and not tokenizer.encode(text):
        raise ValueError(f"{name} {text!r} encodes to no tokens: {_NO_TOKENS}; type some text")


#: Why a prompt of only dropped characters gives nothing to run on.
_NO_TOKENS = "the tokenizer drops all its characters (white space, zero-width characters, a BOM)"


def _encode(
    tokenizer, text: str, limit: int, keep: str = "first", why: str = ""
) -> tuple[list[int], str]:
    """The token ids of ``text`` the model sees (at most ``limit``: the ``keep="first"`` or
    ``"last"`` ones) and a line for the reader: empty when the whole prompt fits, else what was
    cut, ``why`` (default: the model's context) and the text the model saw; for a prompt of no
    tokens, no ids and why."""
    if not text.strip():
        return [], _EMPTY_PROMPT
    ids = tokenizer.encode(text)
    if not ids:
        return [], f"The prompt {text!r} encodes to no tokens: {_NO_TOKENS}; type some text."
    if len(ids) <= limit:
        return ids, ""
    kept = ids[:limit] if keep == "first" else ids[-limit:]
    return kept, (
        f"The prompt is {len(ids)} tokens; the model sees only its {keep} {limit} "
        f"({why or f'its context is {limit} tokens'}): {tokenizer.decode(kept)!r}"
    )


def _layer_head_boxes(
    cfg: PLDRConfig, layer: int, head: int
) -> tuple[widgets.Dropdown, widgets.Dropdown]:
    """Drop-downs over a decoder's layers and heads (``cfg`` a :class:`kvattn.PLDRConfig`);
    ValueError for a ``layer`` or ``head`` that the model does not have."""
    _require_index("layer", layer, cfg.num_hidden_layers, "layers")
    _require_index("head", head, cfg.num_attention_heads, "heads")
    layer_box = widgets.Dropdown(
        options=list(range(cfg.num_hidden_layers)), value=layer, description="layer"
    )
    head_box = widgets.Dropdown(
        options=list(range(cfg.num_attention_heads)), value=head, description="head"
    )
    return layer_box, head_box
