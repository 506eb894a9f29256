"""Text generation from a checkpoint: ``python -m kvattn.generate --checkpoint DIR --prompt TEXT``
(or ``--prompt-file FILE``, a UTF-8 text file).

The checkpoint folder (or hub id) holds ``config.json``, ``model.safetensors`` and the
SentencePiece ``tokenizer.model``, as written by ``python -m kvattn.pretrain`` and as published
PLDR-LLM repositories ship them. Prompts are encoded as the reference does for generation: no
[START], and no [END] after the prompt. The command exits with status 1 and a one-line message
for bad input (an empty prompt, a tokenizer from another run, a file that is not UTF-8, a device
this machine lacks, a seed outside [0, 2**64)) and for a model that produces NaN or infinite
logits.
"""

from __future__ import annotations

import argparse
import numbers
from pathlib import Path

import torch

from .checkpoint import load_pretrained, read_config, resolve_checkpoint
from .checkpoint.loading import _check_device
from .config import CACHE_MODES
from .data import check_tokenizer, load_text, load_tokenizer
from .sampling import check_decoding_args


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
    ``"kv+g"``); decoding stops early when the model emits [END]. Every argument is checked
    before anything is loaded.

    Raises
    ------
    TypeError
        An argument of the wrong type (numbers given as strings, bools as numbers, a prompt
        that is not a str).
    ValueError
        An empty or whitespace-only prompt, or one that encodes to no tokens; a prompt that is
        not valid Unicode (undecodable bytes); a seed outside [0, 2**64); a device that is not
        one, that this machine lacks (``"cuda"`` without CUDA) or ``"meta"``; decoding
        arguments out of range (see :func:`kvattn.sampling.check_decoding_args`); a tokenizer
        whose vocabulary does not match the model's ``vocab_size``; NaN or infinite logits.
    FileNotFoundError
        No checkpoint or no ``tokenizer.model``.
    """
    if not isinstance(checkpoint, str | Path):
        raise TypeError(f"checkpoint must be a str or Path, got {type(checkpoint).__name__}")
    if not isinstance(prompt, str):
        raise TypeError(f"prompt must be a str, got {type(prompt).__name__}")
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"seed must be an int, got {seed!r}")
    if not 0 <= seed < 2**64:
        # torch.Generator takes seeds below 2**64 and folds negative ones onto large ones
        raise ValueError(f"seed must lie in [0, 2**64), got {seed}")
    if device is not None and not isinstance(device, str):
        raise TypeError(f"device must be None or a str such as 'cpu', got {device!r}")
    # load_pretrained's check, here before the checkpoint and tokenizer are read
    _check_device(device)
    check_decoding_args(max_new_tokens, cache, temperature, top_p)
    if not prompt.strip():
        raise ValueError(f"the prompt is empty or only whitespace ({prompt!r}); give some text")
    try:
        prompt.encode("utf-8")
    except UnicodeEncodeError as err:
        raise ValueError(
            f"the prompt is not valid text ({err.reason} at character {err.start}): it holds "
            "bytes that were not UTF-8"
        ) from None
    directory = resolve_checkpoint(checkpoint)
    _, config = read_config(directory)
    tokenizer = load_tokenizer(directory)
    check_tokenizer(tokenizer, config.vocab_size, directory)
    ids = tokenizer.encode(prompt)
    if not ids:
        raise ValueError(f"the prompt {prompt!r} encodes to no tokens")
    model = load_pretrained(directory, device=device)
    input_ids = torch.tensor([ids], device=next(model.parameters()).device)
    generator = torch.Generator(device=input_ids.device).manual_seed(seed)
    out = model.generate(
        input_ids,
        max_new_tokens,
        cache=cache,
        temperature=temperature,
        top_p=top_p,
        generator=generator,
        stop_at_eos=True,
    )
    return tokenizer.decode(out[0].tolist())


def main(argv: list[str] | None = None) -> int:
    """The command line; returns the exit status (1 with a message on bad input)."""
    parser = argparse.ArgumentParser(prog="python -m kvattn.generate", description=__doc__)
    parser.add_argument("--checkpoint", required=True, help="checkpoint folder or hub id")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--prompt")
    source.add_argument("--prompt-file", type=Path, help="read the prompt from a UTF-8 file")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--cache", choices=CACHE_MODES, default="kv")
    parser.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default=None)
    args = parser.parse_args(argv)
    try:
        prompt = args.prompt if args.prompt_file is None else load_text(args.prompt_file)
        text = generate_text(
            args.checkpoint,
            prompt,
            max_new_tokens=args.max_new_tokens,
            cache=args.cache,
            temperature=args.temperature,
            top_p=args.top_p,
            seed=args.seed,
            device=args.device,
        )
    except (ValueError, FileNotFoundError) as err:
        parser.exit(1, f"{parser.prog}: error: {err}\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
