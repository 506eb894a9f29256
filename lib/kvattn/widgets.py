"""Live ipywidgets faces of the course's explorers (Jupyter, Colab).

Each explorer calls the same compute function as its plotly face in :mod:`kvattn.figures`, and
draws with matplotlib into an ``Output`` widget. In the static book these widgets show the state
they were executed with; moving them needs a running kernel, so every chapter also shows the
plotly face, whose sliders work anywhere.

Arguments are checked before any widget is built, with the helpers of :mod:`kvattn.figures`: a
value outside a slider's range, a choice that is not offered, an index past the last layer,
head or slot, or an empty prompt raises ValueError naming the argument, the value and what is
allowed (ipywidgets would clamp it silently or raise a bare TraitError). A text box that the
reader empties shows a line asking for a prompt instead of a traceback.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch
from IPython.display import display
from torch import Tensor

from .config import CACHE_MODES
from .data import TokenData
from .diagnostics import (
    DEDUCTIVE,
    commutant_projection,
    commutant_residual,
    deductive_profile,
    deductive_tensors,
    head_profile,
    twirl,
)
from .figures import (
    COLORS,
    _require_array,
    _require_choice,
    _require_cloud,
    _require_index,
    _require_items,
    _require_length,
    _require_number,
)
from .interaction import eigendecompose, gated_interaction, interaction_tensor, symmetrise
from .memories import Triggers, lift_labels, slot_report
from .mlp import SlotMLP, mlp_cost
from .symmetry import input_contour, symmetry_profile
from .train import SeedRuns

#: What an explorer shows when the reader empties its prompt box (there is nothing to run on).
_EMPTY_PROMPT = "Type a prompt: the text box is empty."


def _live(controls: list[widgets.Widget], draw: Callable[[], None]) -> widgets.VBox:
    """Wire ``controls`` to redraw into a fresh Output widget; draw once now."""
    out = widgets.Output()

    def redraw(_change=None) -> None:
        with out:
            out.clear_output(wait=True)
            draw()
            plt.show()

    for control in controls:
        control.observe(redraw, names="value")
    redraw()
    return widgets.VBox([widgets.HBox(controls), out])


def _require_prompt(name: str, text: object) -> None:
    """``text`` is a str with more than white space: an empty prompt encodes to no token ids
    (and ``torch.tensor([])`` is a float tensor that the models refuse)."""
    if not isinstance(text, str):
        raise TypeError(f"{name} must be a str, got {type(text).__name__}")
    if not text.strip():
        raise ValueError(f"{name} is empty ({text!r}): type a prompt")


#: The activations the symmetry explorer offers (label, name).
ACTIVATIONS = (
    ("identity (bilinear)", "identity"),
    ("ReLU", "relu"),
    ("Swish-β", "swish"),
    ("GELU", "gelu"),
    ("sigmoid (GLU)", "sigmoid"),
)

#: The β slider's range as powers of ten (β from about 0.05 to 20).
BETA_LOG10 = (-1.3, 1.3)
#: The model widths d the cost explorer offers.
COST_WIDTHS = (64, 128, 256, 512, 768, 1024, 2048, 4096, 8192)
#: The largest rank r the cost explorer offers.
COST_MAX_RANK = 64
#: The largest m/d the cost explorer offers.
COST_MAX_WIDTH_FACTOR = 8


#: The ρ slider's range (correlation of the two factors a, b).
RHO_RANGE = (-0.9, 0.9)
#: The mean slider's range (common mean of a and b).
MEAN_RANGE = (-2.0, 2.0)


def symmetry_explorer(
    act: str = "swish",
    beta: float = 1.0,
    rho: float = 0.0,
    mean: float = 0.0,
    *,
    cloud: tuple[Tensor, Tensor, str] | None = None,
    transforms: Mapping[str, Mapping[str, object]] | None = None,
) -> widgets.VBox:
    """Pick an activation (and β for Swish-β) and the inputs' correlation ρ and common mean: see
    σ(a)b − σ(b)a with the inputs' 1σ and 2σ contours, the gate g(z) and E_sc(α); the title gives
    E_ex for those inputs (:func:`kvattn.symmetry.exchange_violation` with ``rho``, ``mean``).

    ``cloud`` = (a, b, name) adds points to the first panel (e.g. a trained unit's standardised
    pre-activations). ``transforms`` adds a fourth panel, a trained layer per name with keys
    ``"alphas"`` (positive α), ``"scaled"`` (its loss after (q, k) → (αq, k/α) at each α) and
    ``"swap"`` (its loss after q ↔ k), as chapter 4 measures them.

    ``act`` is a name of :data:`ACTIVATIONS`; ``beta`` lies in [10^−1.3, 10^1.3]
    (:data:`BETA_LOG10`), ``rho`` in :data:`RHO_RANGE`, ``mean`` in :data:`MEAN_RANGE`; anything
    else, a cloud whose a and b differ in length, or a transform entry without those keys, with
    a ``"scaled"`` loss per α that is not positive and finite (it is drawn on a logarithmic
    axis) or a ``"swap"`` loss that is not a finite number raises ValueError (TypeError for a
    cloud that is not (a, b, name)).
    """
    _require_choice("act", act, [name for _, name in ACTIVATIONS])
    _require_number("beta", beta, 10 ** BETA_LOG10[0], 10 ** BETA_LOG10[1])
    _require_number("rho", rho, *RHO_RANGE)
    _require_number("mean", mean, *MEAN_RANGE)
    if cloud is not None:
        cloud_a, cloud_b = _require_cloud(cloud)
    for name, entry in (transforms or {}).items():
        missing = {"alphas", "scaled", "swap"} - set(entry)
        if missing:
            raise ValueError(f"transforms[{name!r}] lacks {sorted(missing)}")
        alphas = _require_array(
            f"transforms[{name!r}]['alphas']", entry["alphas"], 1, positive=True
        )
        _require_array(
            f"transforms[{name!r}]['scaled']", entry["scaled"], alphas.shape, "one per α",
            positive=True,
        )  # fmt: skip
        _require_array(f"transforms[{name!r}]['swap']", entry["swap"], 0)
    act_box = widgets.Dropdown(options=list(ACTIVATIONS), value=act, description="σ")
    beta_box = widgets.FloatLogSlider(
        value=beta, base=10, min=BETA_LOG10[0], max=BETA_LOG10[1], step=0.05, description="β",
        continuous_update=False,
    )  # fmt: skip
    rho_box = widgets.FloatSlider(
        value=rho, min=RHO_RANGE[0], max=RHO_RANGE[1], step=0.1, description="ρ",
        continuous_update=False,
    )  # fmt: skip
    mean_box = widgets.FloatSlider(
        value=mean, min=MEAN_RANGE[0], max=MEAN_RANGE[1], step=0.25, description="mean",
        continuous_update=False,
    )  # fmt: skip

    def draw() -> None:
        beta_box.disabled = act_box.value != "swish"
        p = symmetry_profile(
            act_box.value,
            beta_box.value if act_box.value == "swish" else None,
            rho=rho_box.value,
            mean=mean_box.value,
        )
        n_panels = 4 if transforms else 3
        fig, axes = plt.subplots(1, n_panels, figsize=(3.7 * n_panels, 3.4), dpi=72)
        lim = float(p.violation.abs().max()) or 1.0
        g = p.grid.numpy()
        im = axes[0].imshow(
            p.violation.numpy(),
            origin="lower",
            cmap="RdBu_r",
            vmin=-lim,
            vmax=lim,
            extent=(g[0], g[-1], g[0], g[-1]),
        )
        fig.colorbar(im, ax=axes[0], shrink=0.8)
        for radius in (1.0, 2.0):
            a, b = input_contour(p.rho, p.mean, radius)
            axes[0].plot(b, a, "k:", lw=1)
        if cloud is not None:
            axes[0].scatter(cloud_b, cloud_a, s=3, alpha=0.4, color="#009E73", label=cloud[2])
            axes[0].legend(loc="lower right", fontsize=8)
        axes[0].set(xlim=(g[0], g[-1]), ylim=(g[0], g[-1]))
        axes[0].set(xlabel="b", ylabel="a", title="σ(a)b − σ(b)a; inputs 1σ, 2σ")
        if p.gate is None:
            axes[1].text(0.5, 0.5, "no gate: σ(0) ≠ 0", ha="center", va="center")
        else:
            axes[1].plot(g, p.gate.numpy(), color=COLORS["swiglu"])
        axes[1].set(xlabel="z", title="gate g(z) = σ(z)/z")
        pos = p.alphas > 0
        axes[2].semilogx(
            p.alphas[pos].numpy(), p.scale[pos].numpy(), "o-", label="α > 0", color=COLORS["swiglu"]
        )
        axes[2].semilogx(
            -p.alphas[~pos].numpy(),
            p.scale[~pos].numpy(),
            "s-",
            label="α < 0",
            color=COLORS["bilinear"],
        )
        axes[2].set(xlabel="|α|", title="scale violation E_sc(α)")
        axes[2].legend()
        if transforms:
            for name, entry in transforms.items():
                axes[3].loglog(
                    entry["alphas"], entry["scaled"], "o-", ms=3, color=COLORS.get(name),
                    label=f"{name} (swap: {float(entry['swap']):.3g})",
                )  # fmt: skip
            axes[3].set(xlabel="α > 0", title="trained: loss after (αq, k/α)")
            axes[3].legend(fontsize=7)
        inputs = f", inputs ρ = {p.rho:g}, mean {p.mean:g}" if p.rho or p.mean else ""
        fig.suptitle(f"{p.label}: exchange violation E_ex = {p.exchange:.3f}{inputs}")
        fig.tight_layout()

    return _live([act_box, beta_box, rho_box, mean_box], draw)


def slot_explorer(
    data: TokenData, triggers: Triggers, values: Tensor, layer: int, slot: int = 0
) -> widgets.VBox:
    """Type or step through slot numbers of one layer: its trigger examples and value tokens.

    ``values`` is the layer's ``(m, vocab)`` value distributions; ``slot`` must be in 0 … m − 1
    and ``layer`` ≥ 0 (else ValueError).
    """
    _require_array("values", values, 2)
    _require_number("layer", layer, 0, integer=True)
    _require_index("slot", slot, values.shape[0], "slots")
    slot_box = widgets.BoundedIntText(
        value=slot, min=0, max=values.shape[0] - 1, description="slot"
    )
    table = widgets.HTML()

    def draw() -> None:
        r = slot_report(data, triggers, values, layer, slot_box.value)
        rows = "".join(
            f"<tr><td style='text-align:right'>{html.escape(c[-40:])}</td>"
            f"<td><b>{html.escape(last)}</b></td><td>→ {html.escape(nxt)}</td>"
            f"<td>{coef:.2f}</td></tr>"
            for c, last, nxt, coef in r.triggers
        )
        table.value = (
            f"<b>Layer {layer}, slot {r.slot}: top trigger examples</b><table>{rows}</table>"
        )
        display(table)
        fig, ax = plt.subplots(figsize=(5, 2.6), dpi=72)
        tokens = [t for t, _ in r.value_tokens][::-1]
        lifts = [p for _, p in r.value_tokens][::-1]
        bars = ax.barh(range(len(tokens)), lifts)
        ax.bar_label(bars, lift_labels(lifts), padding=2, fontsize=8)
        # from the uniform level (×1), where a small model's nearly equal lifts differ
        ax.set_xlim(min(1.0, 0.98 * min(lifts)), 1.08 * max(lifts))
        ax.set_yticks(range(len(tokens)), tokens)
        ax.set(xlabel="probability ÷ uniform", title="value: most raised next tokens")
        fig.tight_layout()

    return _live([slot_box], draw)


def cost_explorer(d_model: int = 768, rank: int = 4, width_factor: int = 4) -> widgets.VBox:
    """Pick the model width d, the rank r and the slots per d: parameters and FLOPs per token
    of one feed-forward layer of each form (:func:`kvattn.mlp.mlp_cost`), with m = factor·d.

    ``d_model`` is one of :data:`COST_WIDTHS`, ``rank`` in 1 … :data:`COST_MAX_RANK`,
    ``width_factor`` in 1 … :data:`COST_MAX_WIDTH_FACTOR` (else ValueError).
    """
    _require_choice("d_model", d_model, COST_WIDTHS)
    _require_number("rank", rank, 1, COST_MAX_RANK, integer=True)
    _require_number("width_factor", width_factor, 1, COST_MAX_WIDTH_FACTOR, integer=True)
    d_box = widgets.Dropdown(options=list(COST_WIDTHS), value=d_model, description="d")
    r_box = widgets.IntSlider(
        value=rank, min=1, max=COST_MAX_RANK, description="rank r", continuous_update=False
    )
    f_box = widgets.IntSlider(
        value=width_factor,
        min=1,
        max=COST_MAX_WIDTH_FACTOR,
        description="m / d",
        continuous_update=False,
    )

    def draw() -> None:
        d, r, m = d_box.value, r_box.value, f_box.value * d_box.value
        forms = [
            ("key-value σ(x·k)", "key_value", 1),
            ("gated / rank-1", "gated", 1),
            (f"rank-{r} (factors)", "rank_r", r),
            ("full, d×d matrices", "full_matrix", 1),
        ]
        costs = [(label, *mlp_cost(form, d, m, rank)) for label, form, rank in forms]
        fig, ax = plt.subplots(figsize=(7, 2.8), dpi=72)
        ax.barh([c[0] for c in costs][::-1], [c[2] for c in costs][::-1])
        ax.set_xscale("log")
        ax.set(xlabel="FLOPs per token (matrix products)", title=f"d = {d}, m = {m} slots")
        for i, (_, params, flops) in enumerate(costs[::-1]):
            ax.text(flops, i, f"  {flops:.2e} FLOPs, {params:.2e} params", va="center")
        ax.set_xlim(right=max(c[2] for c in costs) * 1e3)
        fig.tight_layout()

    return _live([d_box, r_box, f_box], draw)


def interaction_explorer(
    module: SlotMLP,
    feature_names: list[str],
    output_names: list[str],
    inputs: Tensor | None = None,
) -> widgets.VBox:
    """Pick an output o: its interaction matrix and eigenvalues. For a gated layer, also pick an
    input (index into ``inputs``) to see the input-dependent B_o(x) of
    :func:`kvattn.interaction.gated_interaction`; otherwise B_o is fixed.

    Raises ValueError when ``feature_names`` does not have ``module.d_model`` entries,
    ``output_names`` does not have ``module.d_out``, or a gated layer gets no ``inputs`` (or an
    empty or non-finite ``(n, d_model)`` tensor).
    """
    _require_length("feature_names", feature_names, module.d_model, "input feature")
    _require_length("output_names", output_names, module.d_out, "output")
    gated = getattr(module, "form", None) == "gated" and module.variant != "bilinear"
    out_box = widgets.Dropdown(
        options=[(name, i) for i, name in enumerate(output_names)], value=0, description="output"
    )
    sym_box = widgets.Checkbox(value=True, description="symmetrise")
    controls = [out_box, sym_box]
    if gated:
        if inputs is None:
            raise ValueError("a gated layer's interaction matrix depends on x: pass inputs")
        shape = _require_array("inputs", inputs, 2).shape
        if shape[0] == 0 or shape[1] != module.d_model:
            raise ValueError(f"inputs must have shape (n ≥ 1, {module.d_model}), got {shape}")
        x_box = widgets.IntSlider(
            value=0, min=0, max=len(inputs) - 1, description="input x", continuous_update=False
        )
        controls.append(x_box)

    def draw() -> None:
        o = out_box.value
        if gated:
            B = gated_interaction(module, inputs[x_box.value])[o]
        else:
            B = interaction_tensor(module)[o]
        B = B.detach().cpu().double()
        M = symmetrise(B) if sym_box.value else B
        lim = float(M.abs().max()) or 1.0
        fig, axes = plt.subplots(1, 2, figsize=(9, 3.4), dpi=72)
        im = axes[0].imshow(M.numpy(), cmap="RdBu_r", vmin=-lim, vmax=lim)
        axes[0].set_xticks(range(len(feature_names)), feature_names, rotation=90)
        axes[0].set_yticks(range(len(feature_names)), feature_names)
        fig.colorbar(im, ax=axes[0], shrink=0.8)
        axes[0].set_title(("sym(B_o)" if sym_box.value else "B_o") + (" at x" if gated else ""))
        lam, _ = eigendecompose(B)
        axes[1].bar(range(1, len(lam) + 1), lam.flip(0).numpy())
        axes[1].set(title="eigenvalues of sym(B_o)", xlabel="index (descending)")
        fig.suptitle(output_names[o])
        fig.tight_layout()

    return _live(controls, draw)


def paired_comparison(runs: dict[str, SeedRuns], first: str, second: str) -> widgets.VBox:
    """Pick two configurations of a multi-seed experiment: their per-seed final validation losses
    and the paired differences (same seed = same batches), with the mean difference.

    Raises ValueError when ``first`` or ``second`` is not a key of ``runs``, a run has no seeds,
    a seed has no validation loss or a final one that is not finite, or the runs were not made
    with the same seeds (then there is nothing to pair); TypeError when a run is no
    :class:`~kvattn.train.SeedRuns`.
    """
    names = _require_items("runs", runs, container=Mapping)
    _require_choice("first", first, names)
    _require_choice("second", second, names)
    for name, run in runs.items():
        if not isinstance(run, SeedRuns):
            raise TypeError(f"runs[{name!r}] must be a SeedRuns, got {type(run).__name__}")
        _require_items(f"runs[{name!r}].seeds", run.seeds)
        if not all(run.evals):
            raise ValueError(f"runs[{name!r}] has a seed without validation losses (empty evals)")
        _require_array(
            f"final losses of runs[{name!r}]", run.final, (len(run.seeds),), "one per seed"
        )
    for name in names:
        if runs[name].seeds != runs[first].seeds:
            raise ValueError(
                f"runs {first!r} and {name!r} used different seeds ({runs[first].seeds} and "
                f"{runs[name].seeds}): a paired comparison needs the same seeds"
            )
    a_box = widgets.Dropdown(options=names, value=first, description="model A")
    b_box = widgets.Dropdown(options=names, value=second, description="model B")

    def draw() -> None:
        a, b = runs[a_box.value], runs[b_box.value]
        diffs = [x - y for x, y in zip(a.final, b.final, strict=True)]
        fig, axes = plt.subplots(1, 2, figsize=(9, 3), dpi=72)
        seeds = [str(s) for s in a.seeds]
        width = 0.4
        axes[0].bar([i - width / 2 for i in range(len(seeds))], a.final, width, label=a_box.value)
        axes[0].bar([i + width / 2 for i in range(len(seeds))], b.final, width, label=b_box.value)
        axes[0].set_xticks(range(len(seeds)), seeds)
        lo = min(a.final + b.final)
        axes[0].set(xlabel="seed", ylabel="final validation loss", ylim=(lo - 0.1, None))
        axes[0].legend()
        axes[1].bar(seeds, diffs, color=["#D55E00" if x > 0 else "#0072B2" for x in diffs])
        axes[1].axhline(0, color="black", lw=0.8)
        mean = sum(diffs) / len(diffs)
        axes[1].set(xlabel="seed", title=f"A − B per seed (mean {mean:+.3f})")
        fig.tight_layout()

    return _live([a_box, b_box], draw)


def _layer_head_boxes(cfg, layer: int, head: int) -> tuple[widgets.Dropdown, widgets.Dropdown]:
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


def attention_explorer(model, tokenizer, text: str, layer: int = 0, head: int = 0) -> widgets.VBox:
    """Type a prompt and pick a layer and head: the head's attention weights on the prompt and
    the asymmetry of its bilinear form (chapter 6). ``tokenizer`` is a SentencePiece processor.

    Raises TypeError when ``text`` is no str, ValueError when it is empty or white space, or
    ``layer`` or ``head`` is one that the model does not have.
    """
    _require_prompt("text", text)

    cfg = model.config
    text_box = widgets.Text(
        value=text,
        description="prompt",
        continuous_update=False,
        layout=widgets.Layout(width="60%"),
    )
    layer_box, head_box = _layer_head_boxes(cfg, layer, head)

    def draw() -> None:
        ids = tokenizer.encode(text_box.value)[: cfg.max_position_embeddings]
        if not ids:
            print(_EMPTY_PROMPT)
            return
        device = next(model.parameters()).device
        p = head_profile(model, torch.tensor([ids], device=device), layer_box.value, head_box.value)
        pieces = [tokenizer.id_to_piece(i) for i in ids]
        fig, axes = plt.subplots(
            1, 2, figsize=(10, 4), dpi=72, gridspec_kw={"width_ratios": [3, 2]}
        )
        axes[0].imshow(p.E.numpy(), cmap="Blues", vmin=0, vmax=1)
        axes[0].set_yticks(range(len(pieces)), pieces, fontsize=7)
        axes[0].set_xticks([])
        axes[0].set_title("attention weights E (rows: queries)")
        axes[1].plot(p.asym.numpy(), "o-", color=COLORS["bilinear"])
        axes[1].set(xlabel="distance δ", ylim=(0, 2.05), title="asymmetry of M_h(δ)")
        fig.suptitle(f"layer {p.layer}, head {p.head}")
        fig.tight_layout()

    return _live([text_box, layer_box, head_box], draw)


def deductive_explorer(
    model, tokenizer, prompts: list[str], layer: int = 0, head: int = 0
) -> widgets.VBox:
    """Edit the prompts (one per line) and pick a layer and head: A, A_LM, A_P, G_LM on the first
    prompt, their spread across the prompts (each on its own colour scale, with colour bars), and
    each tensor's order parameter by the magnitude of the mean and by the RMS.

    Raises ValueError with fewer than two non-blank ``prompts`` (the spread is taken across
    prompts) or a ``layer`` or ``head`` that the model does not have; TypeError when ``prompts``
    is not a sequence of str (a single str would be split into its characters).
    """
    _require_items("prompts", prompts, str)
    if len([t for t in prompts if t.strip()]) < 2:
        raise ValueError(
            f"prompts must hold at least two non-blank prompts (the spread is across prompts), "
            f"got {prompts!r}"
        )

    cfg = model.config
    text_box = widgets.Textarea(
        value="\n".join(prompts),
        description="prompts",
        continuous_update=False,
        layout=widgets.Layout(width="60%"),
    )
    layer_box, head_box = _layer_head_boxes(cfg, layer, head)

    def draw() -> None:
        device = next(model.parameters()).device
        lines = [t for t in text_box.value.splitlines() if t.strip()]
        if len(lines) < 2:  # one prompt copied would show a spread of 0: a false invariance
            print("Enter at least two prompts, one per line: the spread is taken across prompts.")
            return
        ids = [
            torch.tensor([tokenizer.encode(t)[: cfg.max_position_embeddings]], device=device)
            for t in lines
        ]
        p = deductive_profile(deductive_tensors(model, ids), layer_box.value, head_box.value)
        fig, axes = plt.subplots(2, 4, figsize=(12, 5.4), dpi=72)
        for col, name in enumerate(DEDUCTIVE):
            for row in range(2):
                axes[row, col].set_xticks([])
                axes[row, col].set_yticks([])
            if name not in p.first:  # a constant-G model computes G_LM only
                axes[0, col].set_title(f"{name}: not computed", fontsize=9)
                continue
            scale = float(p.first[name].abs().max()) or 1.0
            im = axes[0, col].imshow(p.first[name].numpy(), cmap="RdBu_r", vmin=-scale, vmax=scale)
            fig.colorbar(im, ax=axes[0, col], shrink=0.8)
            axes[0, col].set_title(name)
            top = float(p.spread[name].max()) or 1.0  # its own scale: a small spread stays visible
            im = axes[1, col].imshow(p.spread[name].numpy(), cmap="viridis", vmin=0, vmax=top)
            fig.colorbar(im, ax=axes[1, col], shrink=0.8)
            axes[1, col].set_title(
                f"order {p.order[name]:.1e} (|mean|), {p.order_rms[name]:.2f} (RMS)", fontsize=8
            )
        fig.suptitle(
            f"layer {p.layer}, head {p.head}: first prompt (top), spread across prompts (bottom)"
        )
        fig.tight_layout()

    return _live([text_box, layer_box, head_box], draw)


def generation_explorer(models: dict, tokenizer, prompt: str) -> widgets.VBox:
    """Pick a model, a decoding mode and a temperature, edit the prompt, and read the continuation
    (chapter 8). ``models`` maps labels to :class:`kvattn.pldr.DecoderLM` models.

    Raises ValueError when ``models`` is empty or ``prompt`` is empty or white space, TypeError
    when ``prompt`` is no str.
    """
    _require_items("models", models, container=Mapping)
    _require_prompt("prompt", prompt)

    text_box = widgets.Textarea(
        value=prompt,
        description="prompt",
        continuous_update=False,
        layout=widgets.Layout(width="60%"),
    )
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


def twirl_explorer(model, tokenizer, text: str, layer: int = 0, head: int = 0) -> widgets.VBox:
    """Pick a layer, a head and a length S: the head's normalised density over the first S tokens
    of ``text`` beside its projection onto the RoPE commutant (chapter 10).

    Raises TypeError when ``text`` is no str, ValueError when it is empty or white space (or
    encodes to no tokens), or ``layer`` or ``head`` is one that the model does not have.
    """
    _require_prompt("text", text)

    cfg = model.config
    device = next(model.parameters()).device
    tokens = tokenizer.encode(text)[: cfg.max_position_embeddings]
    if not tokens:  # text that the tokenizer drops entirely, such as a zero-width space
        raise ValueError(f"text {text!r} encodes to no tokens: type a prompt")
    ids = torch.tensor([tokens], device=device)
    layer_box, head_box = _layer_head_boxes(cfg, layer, head)
    length_box = widgets.IntSlider(
        value=min(16, ids.shape[1]),
        min=1,
        max=ids.shape[1],
        description="S",
        continuous_update=False,
    )

    def draw() -> None:
        S = length_box.value
        A = twirl(model, ids, layer_box.value, head_box.value, [S])[S]
        P = commutant_projection(A, cfg.reference_rope)
        lim = float(A.abs().max()) or 1.0
        fig, axes = plt.subplots(1, 2, figsize=(8, 3.8), dpi=72)
        for ax, M, name in zip(axes, (A, P), ("A0 / S", "commutant projection"), strict=True):
            ax.imshow(M.numpy(), cmap="RdBu_r", vmin=-lim, vmax=lim)
            ax.set(title=name, xticks=[], yticks=[])
        fig.suptitle(
            f"S = {S}: commutant residual {float(commutant_residual(A, cfg.reference_rope)):.2f}"
        )
        fig.tight_layout()

    return _live([layer_box, head_box, length_box], draw)
