"""Text generation from a checkpoint: ``python -m kvattn.generate --checkpoint DIR --prompt TEXT``.

The checkpoint folder (or hub id) holds ``config.json``, ``model.safetensors`` and the
SentencePiece ``tokenizer.model``, as written by ``python -m kvattn.train`` and as published
PLDR-LLM repositories ship them. Prompts are encoded as the reference does for generation: no
[START], and no [END] after the prompt.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import sentencepiece as spm
import torch

from .checkpoint import load_pretrained, resolve_checkpoint
from .pldr import CACHE_MODES


def load_tokenizer(directory: str | Path) -> spm.SentencePieceProcessor:
    """The SentencePiece tokenizer saved beside a checkpoint (``tokenizer.model``)."""
    path = Path(directory) / "tokenizer.model"
    if not path.exists():
        raise FileNotFoundError(f"{directory} has no tokenizer.model")
    return spm.SentencePieceProcessor(model_proto=path.read_bytes())


def generate_text(
    checkpoint: str | Path,
    prompt: str,
    *,
    max_new_tokens: int = 64,
    cache: str = "kv",
    temperature: float = 0.0,
    top_p: float = 1.0,
    seed: int = 0,
    device: str | None = None,
) -> str:
    """Load ``checkpoint`` and continue ``prompt``; returns the prompt and its continuation.

    ``cache`` is a decoding mode of :meth:`kvattn.pldr.DecoderLM.generate` (``"none"``, ``"kv"``,
    ``"kv+g"``). Raises ``ValueError`` for an empty prompt.
    """
    if not prompt:
        raise ValueError("the prompt is empty; give at least one character of text")
    directory = resolve_checkpoint(checkpoint)
    model = load_pretrained(directory, device=device)
    tokenizer = load_tokenizer(directory)
    ids = torch.tensor([tokenizer.encode(prompt)], device=next(model.parameters()).device)
    generator = torch.Generator(device=ids.device).manual_seed(seed)
    out = model.generate(
        ids,
        max_new_tokens,
        cache=cache,
        temperature=temperature,
        top_p=top_p,
        generator=generator,
        stop_at_eos=True,
    )
    return tokenizer.decode(out[0].tolist())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kvattn.generate", description=__doc__)
    parser.add_argument("--checkpoint", required=True, help="checkpoint folder or hub id")
    parser.add_argument("--prompt", required=True)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--cache", choices=CACHE_MODES, default="kv")
    parser.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default=None)
    args = parser.parse_args(argv)
    print(
        generate_text(
            args.checkpoint,
            args.prompt,
            max_new_tokens=args.max_new_tokens,
            cache=args.cache,
            temperature=args.temperature,
            top_p=args.top_p,
            seed=args.seed,
            device=args.device,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
