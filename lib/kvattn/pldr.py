"""The course's public models, :class:`PLDRLLM` and :class:`GPT`: the decoder of
:mod:`kvattn.plga` with input checks, decoding (:mod:`kvattn.generation`), saving and loading
(:mod:`kvattn.pretrained`) and a view of its activations by name (:meth:`DecoderLM.activations`).

The architecture, with its sources and the two deliberate deviations, is in :mod:`kvattn.plga`.
"""

from __future__ import annotations

import torch

from .config import PLDRConfig
from .generation import GenerationMixin
from .plga import CausalLMOutput, LanguageModel, LayerCache
from .pretrained import PreTrainedModel

Tensor = torch.Tensor


class DecoderLM(PreTrainedModel, GenerationMixin, LanguageModel):
    """Shared body of :class:`PLDRLLM` and :class:`GPT`: the decoder and untied output layer of
    :class:`~kvattn.plga.LanguageModel`, the checked forward pass, decoding
    (:meth:`~kvattn.generation.GenerationMixin.generate`), saving and loading
    (:class:`~kvattn.pretrained.PreTrainedModel`) and :meth:`activations`."""

    kind: str = "plga"
    architecture: str = "PldrllmForCausalLM"

    def __init__(self, config: PLDRConfig):
        if not isinstance(config, PLDRConfig):
            raise TypeError(f"config must be a PLDRConfig, got {type(config).__name__}")
        super().__init__(config, self.kind)

    def _check_inputs(
        self, input_ids: Tensor, attention_mask: Tensor | None, offset: int, new_tokens: int = 0
    ) -> None:
        """Types, shapes and the position limit (no host sync), then the values of the ids and
        the mask together (one host sync). ``offset``: tokens already cached; ``new_tokens``:
        tokens :meth:`generate` will add (the last one is never fed to the model)."""
        if not isinstance(input_ids, Tensor) or input_ids.dtype not in (torch.int64, torch.int32):
            got = input_ids.dtype if isinstance(input_ids, Tensor) else type(input_ids).__name__
            raise TypeError(f"input_ids must be an int64 (or int32) tensor of token ids, got {got}")
        if input_ids.device.type == "meta":
            # the value check below reads the ids; meta tensors have shapes but no values
            device = next(self.parameters()).device
            raise ValueError(
                "input_ids are on the meta device, which holds no values; put them on the "
                f"model's device ({device})"
            )
        if input_ids.ndim != 2 or 0 in input_ids.shape:
            raise ValueError(
                "input_ids must have shape (batch >= 1, sequence >= 1), got "
                f"{tuple(input_ids.shape)}"
            )
        limit, S = self.config.max_position_embeddings, input_ids.shape[1]
        if offset + S > limit:
            raise ValueError(
                f"sequence length {offset + S} exceeds max_position_embeddings = {limit}"
            )
        if new_tokens and S + new_tokens - 1 > limit:
            raise ValueError(
                f"a prompt of {S} tokens with max_new_tokens={new_tokens} feeds positions up to "
                f"{S + new_tokens - 2}, beyond max_position_embeddings = {limit}; at most "
                f"{limit - S + 1} new tokens fit"
            )
        bad = ((input_ids < 0) | (input_ids >= self.config.vocab_size)).any()
        if attention_mask is not None:
            if not isinstance(attention_mask, Tensor) or (
                attention_mask.dtype != torch.bool
                and (attention_mask.is_floating_point() or attention_mask.is_complex())
            ):
                got = (
                    attention_mask.dtype
                    if isinstance(attention_mask, Tensor)
                    else type(attention_mask).__name__
                )
                raise TypeError(f"attention_mask must be a bool or integer tensor, got {got}")
            if attention_mask.shape != input_ids.shape:
                raise ValueError(
                    f"attention_mask must have the shape of input_ids {tuple(input_ids.shape)}, "
                    f"got {tuple(attention_mask.shape)}"
                )
            if attention_mask.device != input_ids.device:
                raise ValueError(
                    f"attention_mask is on {attention_mask.device}, input_ids on {input_ids.device}"
                )
            if attention_mask.dtype != torch.bool:
                bad = bad | ((attention_mask != 0) & (attention_mask != 1)).any()
        # Under torch.compile the value check (a host sync) would split the graph in two; compiled
        # training feeds ids from its own tokenizer, so only the checks above run there.
        if not torch.compiler.is_compiling() and bool(bad):
            lo, hi = int(input_ids.min()), int(input_ids.max())
            if lo < 0 or hi >= self.config.vocab_size:
                raise ValueError(
                    f"token ids must lie in [0, {self.config.vocab_size}), got min {lo}, max {hi}"
                )
            values = sorted(set(attention_mask.unique().tolist()) - {0, 1})
            raise ValueError(f"attention_mask must hold only 0 and 1, got also {values[:5]}")

    def _default_padding(self, input_ids: Tensor, attention_mask: Tensor | None) -> Tensor:
        # True = blocked key. Without a mask the reference's rule: pad_token_id is padding.
        if attention_mask is not None:
            return attention_mask == 0
        return input_ids == self.config.pad_token_id

    def forward(
        self,
        input_ids: Tensor,
        *,
        attention_mask: Tensor | None = None,
        caches: list[LayerCache | None] | None = None,
        cache_mode: str | None = None,
        output_pldr_attentions: bool = False,
    ) -> CausalLMOutput:
        """Logits ``[B, S, V]`` for ``input_ids [B, S]`` (int64 or int32, ids in [0, V)).

        Parameters
        ----------
        attention_mask:
            ``[B, S]``, bool or integer, 1 (True) = attend, 0 = padding: a padded token is never
            attended to as a key (a query whose causal keys are all padding keeps them, so no
            row is empty). ``None`` (default): without ``caches``, tokens equal to
            ``pad_token_id`` (0) are padding, as the native reference's ``create_masks``
            (``token == 0``); with ``caches``, every new token is attended to, as the
            reference's cached decoding steps (mask ``None``). The HF port masks only through
            its ``attention_mask`` [gokden2025kvg]. With ``caches``, the mask covers the
            new tokens; the earlier ones keep the mask they were given.
        caches, cache_mode:
            For incremental decoding (see :meth:`generate`): ``cache_mode`` ``"kv"`` or
            ``"kv+g"`` returns per-layer caches; passing them back processes only new tokens.
        output_pldr_attentions:
            Also return every layer's :class:`~kvattn.plga.DeductiveOutputs`.

        Raises
        ------
        TypeError
            Ids or a mask of the wrong type or dtype; flags that are not bools; ``caches`` that
            are not the list of layer caches a previous forward returned.
        ValueError
            Ids on the meta device; wrong shapes (a batch of 0 included), ids outside [0, V),
            mask values other than 0 and 1, sequences beyond ``max_position_embeddings``.
            Checking the values costs one host sync; :meth:`generate` checks once per call, not
            per step.
        """
        if cache_mode is not None and not isinstance(cache_mode, str):
            raise TypeError(f"cache_mode must be None or a str, got {type(cache_mode).__name__}")
        if cache_mode is not None and cache_mode not in ("kv", "kv+g"):
            raise ValueError(f"cache_mode must be None, 'kv' or 'kv+g', got {cache_mode!r}")
        if cache_mode == "kv+g" and self.kind == "plga" and self.config.density == "prefix":
            raise ValueError("the 'kv+g' cache freezes one G per layer; it needs density='block'")
        if not isinstance(output_pldr_attentions, bool):
            raise TypeError(
                "output_pldr_attentions must be a bool, got "
                f"{type(output_pldr_attentions).__name__}"
            )
        if caches is not None and (
            not isinstance(caches, list)
            or len(caches) != self.config.num_hidden_layers
            or not all(isinstance(c, LayerCache) for c in caches)
        ):
            kinds = ", ".join(sorted({type(c).__name__ for c in caches})) if caches else ""
            got = f"a list of {len(caches)} ({kinds})" if isinstance(caches, list) else None
            raise TypeError(
                f"caches must be None or the list of {self.config.num_hidden_layers} layer "
                f"caches a previous forward returned, got {got or type(caches).__name__}"
            )
        offset = caches[0].length if caches else 0
        self._check_inputs(input_ids, attention_mask, offset)
        if attention_mask is None and caches:
            padding = torch.zeros_like(input_ids, dtype=torch.bool)
        else:
            padding = self._default_padding(input_ids, attention_mask)
        return self.forward_unchecked(
            input_ids, padding, caches, cache_mode, output_pldr_attentions
        )

    @torch.no_grad()
    def activations(
        self, input_ids: Tensor, *, attention_mask: Tensor | None = None
    ) -> dict[str, Tensor]:
        """Every intermediate tensor of one forward pass, by name (TransformerLens's
        ``run_with_cache`` idea), so that no caller reaches into the model's attribute paths.

        Names, for each layer ``i`` (``[B, H, d_k, d_k]`` unless said; the prefix density adds an
        S axis after H):

        * ``embedded`` — the decoder's input to its first layer ``[B, S, d]`` (the embedding
          × √d after its LayerNorm);
        * ``layer.i.A0`` — the density; ``layer.i.unit.j`` — the output of the metric learner's
          residual unit ``j`` (unit 0 follows the LayerNorm of A0); ``layer.i.A`` — the metric
          learner's output; ``layer.i.A_LM``, ``layer.i.A_P``, ``layer.i.G_LM`` (PLGA only;
          a constant-G model gives its fixed ``layer.i.G_LM [H, d_k, d_k]``);
        * ``layer.i.E`` — the attention weights ``[B, H, S, S]``;
        * ``layer.i.attention`` — the attention block's output ``[B, S, d]`` before the residual
          sum, and ``layer.i.output`` — the layer's output ``[B, S, d]``;
        * ``logits`` — ``[B, S, V]``.

        Inputs and errors as :meth:`forward`. Runs without gradients.
        """
        found: dict[str, Tensor] = {}

        def keep(name: str, index: int | None = None):
            def hook(module: torch.nn.Module, args: tuple, output: object) -> None:
                found[name] = output if index is None else output[index]

            return hook

        handles = [self.decoder.layernorm1.register_forward_hook(keep("embedded"))]
        for i, layer in enumerate(self.decoder.dec_layers):
            handles.append(layer.mha1.register_forward_hook(keep(f"layer.{i}.attention", 0)))
            handles.append(layer.register_forward_hook(keep(f"layer.{i}.output", 0)))
            for j, unit in enumerate(getattr(layer.mha1, "reslayerAs", ())):
                handles.append(unit.register_forward_hook(keep(f"layer.{i}.unit.{j}")))
        try:
            out = self(input_ids, attention_mask=attention_mask, output_pldr_attentions=True)
        finally:
            for handle in handles:
                handle.remove()
        for i, outputs in enumerate(out.pldr_attentions):
            for field in ("A0", "A", "A_LM", "A_P", "G_LM", "E"):
                if getattr(outputs, field) is not None:
                    found[f"layer.{i}.{field}"] = getattr(outputs, field)
        found["logits"] = out.logits
        return dict(sorted(found.items(), key=lambda item: _name_order(item[0])))


def per_layer(acts: dict[str, Tensor], name: str) -> list[Tensor]:
    """The tensor ``name`` (``"A_LM"``, ``"G_LM"``, ``"E"``, …) of every layer, in layer order,
    from what :meth:`DecoderLM.activations` returned.

    Raises
    ------
    KeyError
        No layer holds ``name`` (a GPT has no ``"G_LM"``; a unit's output is ``"unit.j"``).
    """
    found = [v for k, v in acts.items() if k.startswith("layer.") and k.split(".", 2)[2] == name]
    if not found:
        raise KeyError(f"no layer.<i>.{name} in these activations")
    return found


def _name_order(name: str) -> tuple:
    # layer by layer, in the order the pass computes them; logits last
    steps = ["A0", "unit", "A", "A_LM", "A_P", "G_LM", "E", "attention", "output"]
    parts = name.split(".")
    if parts[0] != "layer":
        return (-1,) if name == "embedded" else (float("inf"),)
    return (int(parts[1]), steps.index(parts[2]), int(parts[3]) if len(parts) > 3 else 0)


class PLDRLLM(DecoderLM):
    """The PLDR-LLM decoder (PLGA attention), or its constant-G ablation when
    ``config.custom_G_type`` is set. See the module docstring for the architecture."""

    architecture = "PldrllmForCausalLM"

    def __init__(self, config: PLDRConfig):
        if not isinstance(config, PLDRConfig):
            raise TypeError(f"config must be a PLDRConfig, got {type(config).__name__}")
        self.kind = "plga" if config.custom_G_type is None else "constant_g"
        super().__init__(config)

    def G_LM(self) -> list[Tensor]:
        """The constant G_LM of every layer, ``[H, d_k, d_k]`` each (constant-G models only)."""
        if self.kind != "constant_g":
            raise TypeError(
                "G_LM is input-dependent in a PLGA model; use a forward pass with "
                "output_pldr_attentions=True"
            )
        return [layer.mha1.G_LM for layer in self.decoder.dec_layers]


class GPT(DecoderLM):
    """The same decoder with scaled dot-product attention (G_LM = I, no metric learner): the
    baseline of the same size. Takes a :class:`~kvattn.config.PLDRConfig`; PLGA-only fields are
    ignored.

    :func:`kvattn.checkpoint.save_pretrained` writes it as the published format's identity-G
    PLDR-LLM (``custom_G_type "identity"``), which the published loader runs as this model.
    ``architecture`` is the value of the ``config.json`` key that marks a checkpoint as a GPT
    (and the ``architectures`` entry of the GPT checkpoints written before that key)."""

    kind = "sdpa"
    architecture = "KvattnGPTForCausalLM"
