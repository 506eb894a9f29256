"""The G_LM invariance explorer (chapters 7 and 9): a head's deductive tensors A, A_LM, A_P and
G_LM on one prompt, their spread across prompts, and their order parameters.

Compute functions: :func:`kvattn.diagnostics.heads.deductive_tensors` and
:func:`kvattn.diagnostics.heads.deductive_profile`. :func:`figure` is the static face (a slider
over precomputed (model, layer, head) profiles); :func:`widget` the live face (any prompts, layer
and head).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

import ipywidgets as widgets
import plotly.graph_objects as go
import sentencepiece as spm
import torch
from matplotlib.ticker import FuncFormatter, MaxNLocator
from plotly.subplots import make_subplots

from ...diagnostics import DEDUCTIVE, DeductiveProfile, deductive_profile, deductive_tensors
from ...pldr import DecoderLM
from ..plots.checks import _require_array, _require_items
from ..plots.style import LAYOUT, round_significant, slider, widget_axes
from ._live import _NO_TOKENS, _layer_head_boxes, _live, _text_box


def figure(profiles: Sequence[DeductiveProfile]) -> go.Figure:
    """The static face of the G_LM invariance explorer: a slider over (model, layer, head).

    Top row: A, A_LM, A_P and G_LM on the first prompt, each with its own colour scale
    (sequential over its range for a positive tensor, symmetric about 0 otherwise);
    bottom row: their entry-wise standard deviation across the prompts, each on its own scale
    (so a small spread is still visible; the colour bars give its size), every panel with its
    colour bar. The title gives, per tensor, both order parameters (by the magnitude of the mean
    and by the RMS) and the relative spread (rms of the spread over rms of the tensor), with the
    ratio of relative spreads from one stage to the next (below 1: that stage made the prompts'
    tensors more alike). Profiles labelled with their model (``DeductiveProfile.label``) let the
    slider compare e.g. an initial, a trained and a constant-G model; a tensor a model does not
    compute (a constant-G model's A) is drawn blank and marked "not computed".

    Raises ValueError when ``profiles`` is empty, or a profile holds a tensor that is not a finite
    square matrix (a spread also ≥ 0), names a tensor that is none of
    :data:`~kvattn.diagnostics.heads.DEDUCTIVE`, lacks the spread or order parameter of one of
    its tensors, or has a spread of another shape (the message names the profile, the tensor and
    the first bad value); TypeError when an item is no
    :class:`~kvattn.diagnostics.heads.DeductiveProfile` or a tensor no torch.Tensor.
    """
    _require_items("profiles", profiles, DeductiveProfile)
    names = list(DEDUCTIVE)
    for i, p in enumerate(profiles):
        _require_tensors(f"profiles[{i}]", p)
    fig = make_subplots(
        rows=2,
        cols=4,
        vertical_spacing=0.1,
        # a panel's colour bar and its labels sit in the gap before the next panel: about 60 px
        # for labels like "-1.2e-05" at 9 px (at 0.07, 43 px, they ran over it: chapters 7, 9)
        horizontal_spacing=0.11,
        subplot_titles=[f"{n}, first prompt" for n in names] + [f"spread of {n}" for n in names],
    )
    bars = []
    for i in range(8):
        suffix = "" if i == 0 else str(i + 1)
        xd, yd = fig.layout[f"xaxis{suffix}"].domain, fig.layout[f"yaxis{suffix}"].domain
        bars.append(
            dict(
                x=xd[1] + 0.004, y=(yd[0] + yd[1]) / 2, len=yd[1] - yd[0], thickness=8,
                xpad=2, xanchor="left", tickfont=dict(size=9), exponentformat="e",
            )
        )  # fmt: skip

    def traces(p: DeductiveProfile) -> list:
        out = []
        for r, row in enumerate(("first", "spread")):
            for c, n in enumerate(names):
                bar = bars[4 * r + c]
                if n not in p.first:
                    out.append(go.Heatmap(z=[[0.0]], colorscale="Greys", zmin=0, zmax=1,
                                          showscale=False))  # fmt: skip
                    continue
                z = getattr(p, row)[n]
                top = float(z.abs().max())
                if row == "first":
                    colours, low, high = _colour_scale(z)
                    kwargs = dict(colorscale=colours, zmin=low, zmax=high)
                else:
                    kwargs = dict(colorscale="Viridis", zmin=0, zmax=top or 1.0)
                # two significant digits of the panel's largest entry: as fine as the colour
                # scale, and the 16 frames of chapter 9 stay under the page limit
                out.append(go.Heatmap(z=round_significant(z, 2), colorbar=bar, **kwargs))
        return out

    def title(p: DeductiveProfile) -> str:
        who = f"{p.label}: " if p.label else ""
        parts = []
        for n in names:
            if n not in p.first:
                parts.append(f"{n} not computed")
                continue
            parts.append(
                f"{n} {p.order[n]:.2g} | {p.order_rms.get(n, float('nan')):.2g} | "
                f"{p.relative_spread(n):.2g}"
            )
        steps = _stage_ratios(p)
        return (
            f"{who}layer {p.layer}, head {p.head}; order parameter by |mean| | by RMS | relative "
            "spread:<br>"
            + "; ".join(parts)
            + ("<br>stage ratios of the relative spread: " + ", ".join(steps) if steps else "")
        )

    for i, trace in enumerate(traces(profiles[0])):
        fig.add_trace(trace, i // 4 + 1, i % 4 + 1)
    keys = [f"{i}: {p.label} L{p.layer} H{p.head}" for i, p in enumerate(profiles)]
    fig.frames = [
        go.Frame(name=key, data=traces(p), traces=list(range(8)), layout=dict(title_text=title(p)))
        for key, p in zip(keys, profiles, strict=True)
    ]
    fig.update_xaxes(showticklabels=False)
    fig.update_yaxes(showticklabels=False, autorange="reversed")
    fig.update_layout(
        title=dict(text=title(profiles[0]), font=dict(size=11)),
        height=620,
        sliders=[
            slider(
                keys,
                [f"{p.label + ' ' if p.label else ''}L{p.layer} H{p.head}" for p in profiles],
                "",
            )
        ],
        # the right margin holds the last column's colour bar and its labels
        **{**LAYOUT, "margin": dict(l=30, r=60, t=120, b=50)},
    )
    return fig


def _stage_ratios(p: DeductiveProfile) -> list[str]:
    """ "A→A_LM 0.75", …: the ratio of relative spreads from each computed stage to the next
    (below 1: that stage made the prompts' tensors more alike), both faces' last line."""
    present = [n for n in DEDUCTIVE if n in p.first]
    return [
        f"{a}→{b} {p.relative_spread(b) / p.relative_spread(a):.2f}"
        for a, b in pairwise(present)
        if p.relative_spread(a) > 0
    ]


def _colour_scale(z: torch.Tensor) -> tuple[str, float, float]:
    """(colour map, low, high) for a tensor's panel: a positive tensor (A_LM and A_P always are)
    on a sequential map over its own range, where a scale centred at 0 would spend half its
    colours on values that never occur and wash the panel out; any other on a diverging map
    symmetric about 0."""
    low, high = float(z.min()), float(z.max())
    if low > 0:
        return "viridis", low, high if high > low else low * (1 + 1e-6)
    scale = max(-low, high) or 1.0
    return "RdBu_r", -scale, scale


def _require_tensors(where: str, p: DeductiveProfile) -> None:
    """``p`` holds what :func:`figure` draws: a finite square matrix for each tensor it computes,
    its spread (finite, ≥ 0, same shape) and its order parameter. Plotly draws a NaN panel blank,
    and an infinite one failed deep in the colour scale's rounding."""
    who = f"{where} ({p.label + ', ' if p.label else ''}layer {p.layer}, head {p.head})"
    unknown = [n for n in p.first if n not in DEDUCTIVE]
    if unknown:
        raise ValueError(f"{who}: first has tensors {unknown} that are none of {list(DEDUCTIVE)}")
    if sorted(p.spread) != sorted(p.first):
        raise ValueError(
            f"{who}: spread has tensors {sorted(p.spread)}, expected {sorted(p.first)} (those of "
            "first)"
        )
    missing = [n for n in p.first if n not in p.order]
    if missing:
        raise ValueError(f"{who}: order lacks {missing}, which first holds")
    for n in p.first:
        for row in ("first", "spread"):
            tensor = getattr(p, row)[n]
            if not isinstance(tensor, torch.Tensor):
                raise TypeError(
                    f"{who}: {row}[{n!r}] must be a torch.Tensor, got {type(tensor).__name__}"
                )
        shape = _require_array(f"{who}: first[{n!r}]", p.first[n], 2, square=True).shape
        _require_array(
            f"{who}: spread[{n!r}]", p.spread[n], shape, "the shape of first", nonnegative=True
        )


def _colour_bar(fig: object, image: object, ax: object) -> None:
    """A narrow colour bar beside ``ax`` with at most three 9 pt labels in short notation: four
    panels share a row of a book column, and default bars pushed their labels into the next
    panel."""
    bar = fig.colorbar(image, ax=ax, shrink=0.8, fraction=0.08, pad=0.04)
    bar.locator = MaxNLocator(3)
    bar.formatter = FuncFormatter(lambda v, _: f"{v:.2g}")
    bar.ax.tick_params(labelsize=9)
    bar.update_ticks()


def widget(
    model: DecoderLM,
    tokenizer: spm.SentencePieceProcessor,
    prompts: Sequence[str],
    layer: int = 0,
    head: int = 0,
) -> widgets.VBox:
    """Edit the prompts (one box each) and pick a layer and head: A, A_LM, A_P, G_LM on the first
    prompt, their spread across the prompts (each on its own colour scale, with colour bars), in
    an image a book column wide (:func:`~kvattn.course.plots.style.widget_axes`), and above it a
    printed table of each tensor's order parameter by the magnitude of the mean and by the RMS and
    its relative spread, with the stage ratios of the relative spread (the static face's title).

    A prompt is read by what the tokenizer makes of it: a box whose text encodes to no tokens
    (white space, zero-width characters, a BOM) is left out and named, and a prompt longer than
    the model's context is cut to its first tokens, which the page says.

    Raises ValueError with fewer than two ``prompts`` that encode to tokens (the spread is taken
    across prompts) or a ``layer`` or ``head`` that the model does not have; TypeError when
    ``model`` is not a :class:`kvattn.pldr.DecoderLM` or ``prompts`` is not a sequence of str (a
    single str would be split into its characters).
    """
    if not isinstance(model, DecoderLM):
        raise TypeError(f"model must be a kvattn DecoderLM, got {type(model).__name__}")
    _require_items("prompts", prompts, str)
    if len([t for t in prompts if tokenizer.encode(t)]) < 2:
        raise ValueError(
            "prompts must hold at least two prompts that encode to tokens (the spread is across "
            f"prompts; white space, zero-width characters and a BOM encode to none), got "
            f"{prompts!r}"
        )

    cfg = model.config
    # One box per prompt: a prompt may hold line breaks (chapter 7's do), so splitting one box
    # into lines made five prompts twelve fragments, and the live face disagreed with the static.
    text_boxes = [_text_box(t, f"prompt {i + 1}") for i, t in enumerate(prompts)]
    layer_box, head_box = _layer_head_boxes(cfg, layer, head)

    def draw() -> None:
        device = next(model.parameters()).device
        encoded = {i + 1: tokenizer.encode(box.value) for i, box in enumerate(text_boxes)}
        dropped = [i for i, ids in encoded.items() if not ids and text_boxes[i - 1].value.strip()]
        if dropped:
            print(f"Prompt boxes {dropped} encode to no tokens ({_NO_TOKENS}): left out.")
        tokens = [ids for ids in encoded.values() if ids]
        if len(tokens) < 2:  # one prompt copied would show a spread of 0: a false invariance
            print("Fill in at least two prompt boxes: the spread is taken across prompts.")
            return
        context = cfg.max_position_embeddings
        cut = [i for i, ids in encoded.items() if len(ids) > context]
        if cut:
            print(
                f"Prompts {cut} are longer than the context: the model sees their first "
                f"{context} tokens."
            )
        tokens = [ids[:context] for ids in tokens]
        repeats = [i + 1 for i, t in enumerate(tokens) if t in tokens[:i]]
        if repeats:  # a repeated prompt adds a spread of 0: a false invariance
            print(f"Prompts {repeats} repeat an earlier one (after truncation): change them.")
            return
        ids = [torch.tensor([t], device=device) for t in tokens]
        p = deductive_profile(deductive_tensors(model, ids), layer_box.value, head_box.value)
        # the static face's numbers as a printed table: as panel titles they were 6.5 px
        print(f"{'tensor':<8}{'order by |mean|':>17}{'order by RMS':>14}{'relative spread':>17}")
        for name in DEDUCTIVE:
            if name in p.first:
                print(
                    f"{name:<8}{p.order[name]:>17.2e}{p.order_rms[name]:>14.3f}"
                    f"{p.relative_spread(name):>17.3f}"
                )
            else:  # a constant-G model computes G_LM only
                print(f"{name:<8}{'not computed':>17}")
        steps = _stage_ratios(p)
        if steps:
            print("stage ratios of the relative spread: " + ", ".join(steps))
        fig, axes = widget_axes(8, cols=4, panel_height=2.0)
        for col, name in enumerate(DEDUCTIVE):
            top_ax, spread_ax = axes[col], axes[4 + col]
            for ax in (top_ax, spread_ax):
                ax.set_xticks([])
                ax.set_yticks([])
            top_ax.set_title(name)
            if name not in p.first:  # a constant-G model computes G_LM only
                for ax in (top_ax, spread_ax):
                    ax.text(0.5, 0.5, "not computed", ha="center", va="center", fontsize=9,
                            transform=ax.transAxes)  # fmt: skip
                continue
            colours, low, high = _colour_scale(p.first[name])
            im = top_ax.imshow(p.first[name].numpy(), cmap=colours, vmin=low, vmax=high)
            _colour_bar(fig, im, top_ax)
            top = float(p.spread[name].max()) or 1.0  # its own scale: a small spread stays visible
            im = spread_ax.imshow(p.spread[name].numpy(), cmap="viridis", vmin=0, vmax=top)
            _colour_bar(fig, im, spread_ax)
        axes[0].set_ylabel("first prompt")
        axes[4].set_ylabel("spread across prompts")
        fig.suptitle(f"layer {p.layer}, head {p.head}")
        fig.tight_layout()

    return _live([*text_boxes, layer_box, head_box], draw)
