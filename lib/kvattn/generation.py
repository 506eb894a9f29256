"""Decoding: ``generate`` for the course's models, with the three cache modes.

:class:`GenerationMixin` is a base class of :class:`kvattn.pldr.DecoderLM` (as transformers'
``GenerationMixin`` is of its models). It relies on the host's ``forward_unchecked``
(:class:`kvattn.plga.LanguageModel`), its input checks and its ``config``; the caches it carries
are :class:`kvattn.plga.LayerCache`, which the attention layers fill.
"""

from __future__ import annotations

import torch

from .sampling import check_decoding_args, decoding_mode, sample_next

Tensor = torch.Tensor


class GenerationMixin:
    """``generate`` for a :class:`kvattn.pldr.DecoderLM`: no cache, the exact KV cache, or the
    published KV + G cache."""

    @torch.no_grad()
    def generate(
        self,
        input_ids: Tensor,
        max_new_tokens: int,
        *,
        attention_mask: Tensor | None = None,
        use_cache: bool | None = None,
        cache: str | None = None,
        temperature: float = 0.0,
        top_p: float = 1.0,
        generator: torch.Generator | None = None,
        stop_at_eos: bool = False,
    ) -> Tensor:
        """Continue ``input_ids [B, S]`` by ``max_new_tokens`` tokens; returns ``[B, S + n]``.

        Decoding modes (``cache``; ``use_cache=True`` means ``"kv"``, False means ``"none"``):

        * ``"none"`` — no cache: every step recomputes the whole sequence, the density over
          all tokens included;
        * ``"kv"`` — KV cache: keys, values and the running density Σ_s q_sᵀ q_s are cached;
          every step adds the new token's density and reruns the metric learner. The new
          token's attention is then exactly that of a full pass; positions already decoded keep
          the states they were computed with, so with the published block density and more
          than one layer, logits can differ from ``"none"`` (which recomputes every position
          with the newest density) — exact for one layer and for ``density="prefix"``;
        * ``"kv+g"`` — the published KV + G cache: the prompt's pass fixes A, A_LM, A_P and G_LM
          per layer and later tokens skip the metric learner. It equals ``"none"`` only when G_LM
          does not depend on the input (the inference-collapse condition).

        ``attention_mask [B, S]`` (1 = attend, 0 = padding) masks prompt keys; without it, prompt
        tokens equal to ``pad_token_id`` are padding (the native reference's rule, see
        :meth:`kvattn.pldr.DecoderLM.forward`). Generated tokens are never masked, whatever their
        id: the reference's cached steps pass no mask and the HF port extends the mask with ones
        [gokden2025kvg].

        ``temperature = 0`` is greedy; otherwise sampling with nucleus ``top_p`` from
        softmax(logits / temperature), which needs temperature >= the smallest normal float32
        (about 1.2e-38). The last fed position is S + n − 2 (the last token is only
        predicted), so S + n − 1 <= ``max_position_embeddings``. ``stop_at_eos`` stops once
        every row emits ``eos_token_id`` at the same step (one host sync per step).

        Host syncs: one to check the prompt's ids and mask, one for the finiteness of the
        prompt pass's logits and one at the end, whatever n (plus the ``stop_at_eos`` checks).

        Raises ``TypeError``/``ValueError`` for bad arguments (see
        :meth:`kvattn.pldr.DecoderLM.forward` and :func:`kvattn.sampling.decoding_mode`:
        ``use_cache`` and ``cache`` that disagree), and
        ``ValueError`` when the model produces NaN or infinite logits (e.g. NaN weights).
        """
        check_decoding_args(max_new_tokens, cache, temperature, top_p)
        cache = decoding_mode(cache, use_cache)
        if not isinstance(stop_at_eos, bool):
            raise TypeError(f"stop_at_eos must be a bool, got {type(stop_at_eos).__name__}")
        if generator is not None and not isinstance(generator, torch.Generator):
            raise TypeError(
                f"generator must be a torch.Generator or None, got {type(generator).__name__}"
            )
        self._check_inputs(input_ids, attention_mask, 0, max_new_tokens)
        if cache == "kv+g" and self.kind == "plga" and self.config.density == "prefix":
            raise ValueError("the 'kv+g' cache freezes one G per layer; it needs density='block'")
        padding = self._default_padding(input_ids, attention_mask)
        was_training = self.training
        self.eval()
        try:
            return self._decode(
                input_ids,
                padding,
                max_new_tokens,
                cache,
                temperature,
                top_p,
                generator,
                stop_at_eos,
            )
        finally:
            self.train(was_training)

    def _decode(
        self, ids, padding, max_new_tokens, cache, temperature, top_p, generator, stop_at_eos
    ) -> Tensor:
        caches = None
        unpadded = torch.zeros_like(padding[:, :1])  # a generated token is never padding
        finite = []  # per step, a 0-d bool tensor: no host sync until the end
        for step in range(max_new_tokens):
            if cache == "none":
                logits = self.forward_unchecked(ids, padding, None, None, False).logits[:, -1]
                padding = torch.cat([padding, unpadded], dim=1)
            elif caches is None:
                out = self.forward_unchecked(ids, padding, None, cache, False)
                logits, caches = out.logits[:, -1], out.caches
            else:
                out = self.forward_unchecked(ids[:, -1:], unpadded, caches, cache, False)
                logits, caches = out.logits[:, -1], out.caches
            finite.append(logits.isfinite().all())
            if step == 0:
                # the prompt pass shows broken weights at once, before any more work
                self._check_finite(finite)
            nxt = sample_next(logits, temperature, top_p, generator)
            ids = torch.cat([ids, nxt], dim=1)
            if stop_at_eos and bool((nxt == self.config.eos_token_id).all()):
                break
        self._check_finite(finite)
        return ids

    def _check_finite(self, finite: list[Tensor]) -> None:
        if not finite or bool(torch.stack(finite).all()):
            return
        step = int((~torch.stack(finite)).nonzero()[0, 0])
        broken = sum(int((~p.isfinite()).sum()) for p in self.parameters())
        raise ValueError(
            f"the model produced NaN or infinite logits at decoding step {step} "
            f"({broken} of its {self.num_parameters()} parameters are not finite); "
            "check the checkpoint"
        )
