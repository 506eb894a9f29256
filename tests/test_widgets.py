"""The live explorers on tiny models: what a reader sees when a text box is emptied (outside
IPython, the Output widget captures nothing, so what a redraw prints or raises reaches the test)."""

from __future__ import annotations

import io
import re

import matplotlib
import matplotlib.pyplot as plt
import pytest
import torch

from kvattn.config import PLDRConfig
from kvattn.course import explorers
from kvattn.pldr import GPT, PLDRLLM

CONFIG = PLDRConfig(
    vocab_size=16,
    hidden_size=16,
    num_attention_heads=2,
    num_hidden_layers=2,
    num_reslayerA=1,
    A_dff=8,
    max_position_embeddings=32,
)


class Chars:
    """A stand-in for a SentencePiece processor: one token per visible character; white space
    and zero-width characters give no token, as SentencePiece drops them."""

    def encode(self, text: str) -> list[int]:
        return [ord(c) % 16 for c in text if c.isprintable() and not c.isspace()]

    def id_to_piece(self, i: int) -> str:
        return chr(ord("a") + i)

    def decode(self, ids: list[int]) -> str:
        return "".join(map(self.id_to_piece, ids))


@pytest.fixture
def models(monkeypatch):
    """A GPT, a PLDR-LLM, and the list of what the explorers display (a continuation's HTML)."""
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = []
    monkeypatch.setattr(explorers.generation, "display", shown.append)
    torch.manual_seed(0)
    yield GPT(CONFIG).eval(), PLDRLLM(CONFIG).eval(), shown
    plt.close("all")


def test_an_emptied_prompt_box_asks_for_a_prompt(models, capsys, monkeypatch):
    """Clearing the prompt of chapter 6's, 8's or 11's explorer showed a traceback in the widget
    (torch.tensor([]) is float32: "ids must be a tensor of int64 ...")."""

    gpt, pldr, shown = models
    images = []
    monkeypatch.setattr(explorers._live, "display", images.append)
    attention = explorers.attention.widget(gpt, Chars(), "a cat")
    generation = explorers.generation.widget({"gpt": gpt, "pldr": pldr}, Chars(), "a cat")
    for live in (attention, generation):
        text_box = live.children[0].children[0]
        for emptied in ("", "  \n"):
            capsys.readouterr()
            text_box.value = emptied
            # (outside IPython, clearing the Output widget prints a terminal's clear-line code)
            assert capsys.readouterr().out.endswith("\rType a prompt: the text box is empty.\n")
        # a box of characters the tokenizer drops is not empty: it is said to encode to nothing
        text_box.value = "\u200b"
        assert "'\\u200b' encodes to no tokens" in capsys.readouterr().out
    # a prompt again: each explorer runs again
    n_images = len(images)
    attention.children[0].children[0].value = "a dog"
    assert len(images) == n_images + 1 and not plt.get_fignums()
    generation.children[0].children[0].value = "a dog"
    assert shown[-1].value.startswith("<pre style='white-space: pre-wrap'>a dog<b>")


def test_an_empty_prompt_is_refused_before_anything_runs(models):
    """They raised TypeError about a float32 input_ids, or, for the twirl explorer, ipywidgets'
    bare TraitError ("setting max < min")."""
    gpt, pldr, _ = models
    for text in ("", " \t\n"):
        shown = re.escape(repr(text))
        with pytest.raises(ValueError, match=rf"^text is empty \({shown}\): type a prompt$"):
            explorers.attention.widget(gpt, Chars(), text)
        with pytest.raises(ValueError, match=rf"^prompt is empty \({shown}\): type a prompt$"):
            explorers.generation.widget({"gpt": gpt}, Chars(), text)
        with pytest.raises(ValueError, match=rf"^text is empty \({shown}\): type a prompt$"):
            explorers.twirl.widget(pldr, Chars(), text)
    with pytest.raises(ValueError, match=r"^text '\\u200b' encodes to no tokens: type a prompt$"):
        explorers.twirl.widget(pldr, Chars(), "\u200b")
    with pytest.raises(TypeError, match=r"^text must be a str, got NoneType$"):
        explorers.attention.widget(gpt, Chars(), None)
    with pytest.raises(TypeError, match=r"^prompts must be a sequence, got str$"):
        explorers.deductive.widget(pldr, Chars(), "one\ntwo")  # not split into characters
    twirl = explorers.twirl.widget(pldr, Chars(), "ab")  # a prompt of two tokens still draws
    assert twirl.children[0].children[2].max == 2


def test_a_repeated_prompt_is_named_instead_of_a_traceback(models, capsys):
    """Two identical prompts: the deductive tensors refuse repeated probes (a spread of 0
    would read as invariance), and the live explorer said so with a traceback."""
    _, pldr, _ = models
    live = explorers.deductive.widget(pldr, Chars(), ["a cat", "a dog", "a cow"])
    capsys.readouterr()
    live.children[0].children[2].value = "a cat"
    assert capsys.readouterr().out.endswith(
        "\rPrompts [3] repeat an earlier one (after truncation): change them.\n"
    )
    live.children[0].children[1].value = " "
    live.children[0].children[2].value = ""
    assert capsys.readouterr().out.endswith(
        "\rFill in at least two prompt boxes: the spread is taken across prompts.\n"
    )


def test_a_prompt_with_line_breaks_stays_one_prompt(models):
    """Issue 31: the deductive explorer split its one text box on line breaks, so chapter 7's
    five prompts became twelve fragments and the live face disagreed with the static one."""
    _, pldr, _ = models
    prompts = ["def f(x):\n    return x", "a cat\n\nsat", "a dog"]
    live = explorers.deductive.widget(pldr, Chars(), prompts)
    boxes = live.children[0].children[:3]
    assert [b.value for b in boxes] == prompts
    assert [b.description for b in boxes] == ["prompt 1", "prompt 2", "prompt 3"]


def test_prompt_boxes_take_the_full_width(models):
    """Issue 31: in one row beside drop-downs and a slider, chapter 8's and 11's 60 % prompt box
    was about two characters wide; the row now wraps and each box takes a line of its own."""
    gpt, pldr, _ = models
    lives = [
        explorers.generation.widget({"gpt": gpt}, Chars(), "a cat"),
        explorers.attention.widget(gpt, Chars(), "a cat"),
        explorers.deductive.widget(pldr, Chars(), ["a cat", "a dog"]),
    ]
    for live in lives:
        row = live.children[0]
        assert row.layout.flex_flow == "row wrap"
        assert row.children[0].layout.width == "100%"


def test_a_live_drawing_is_shown_as_a_256_colour_png(models, monkeypatch):
    """A page embeds each live face's last drawing: full-colour PNGs of heat maps made chapter
    4's page weigh over 1 MB. Each figure is shown as a palette PNG, then closed."""
    from PIL import Image as PILImage

    gpt, _, _ = models
    images = []
    monkeypatch.setattr(explorers._live, "display", images.append)
    explorers.attention.widget(gpt, Chars(), "a cat")
    assert len(images) == 1 and not plt.get_fignums()
    png = PILImage.open(io.BytesIO(images[0].data))
    assert png.format == "PNG" and png.mode == "P"
    assert len(png.getcolors(256)) <= 256


def test_the_interaction_explorer_takes_names_as_lists_of_str():
    """NX34 (live face): feature_names='abcd' was read as four one-letter names."""
    from kvattn.mlp import GatedMLP

    layer = GatedMLP(4, 6, 3)
    with pytest.raises(TypeError, match=r"^feature_names must be a sequence, got str$"):
        explorers.interaction.widget(layer, "abcd", ["x", "y", "z"], torch.zeros(2, 4))
    with pytest.raises(TypeError, match=r"^output_names must be a sequence, got str$"):
        explorers.interaction.widget(layer, list("abcd"), "xyz", torch.zeros(2, 4))
