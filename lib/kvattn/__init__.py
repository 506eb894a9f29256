"""kvattn: the library behind the course *Bilinear Transformers — from key-value memories to
power-law graph attention*.

Modules, in the order data flows through them:

* :mod:`kvattn.env` — device, seeding, fast mode, plotly renderer (``setup()``);
* :mod:`kvattn.activations` — σ and its gate g(z) = σ(z)/z;
* :mod:`kvattn.mlp` — key-value, gated, bilinear-attention and rank-r feed-forward layers;
* :mod:`kvattn.lm` — a small language model with any of those layers as its FFN;
* :mod:`kvattn.data` — corpora, tokenizer, synthetic tasks;
* :mod:`kvattn.pldr` — Power Law Graph Attention, the PLDR-LLM decoder, a same-size GPT;
* :mod:`kvattn.checkpoint` — published-format checkpoints (safetensors + config.json);
* :mod:`kvattn.train` — the training loop, losses, PLDR-LLM pre-training (CLI);
* :mod:`kvattn.generate` — text generation from a checkpoint (CLI);
* :mod:`kvattn.symmetry` — exchange/scale violations, transforms, conserved quantities;
* :mod:`kvattn.interaction` — interaction tensors and their eigen-decomposition;
* :mod:`kvattn.memories` — reading keys and values of a trained LM;
* :mod:`kvattn.diagnostics` — DAG losses, order parameters, rank-1 audit, PF, RoPE commutant;
* :mod:`kvattn.exercises` — checkers for the chapters' exercises (``check(name, fn)``);
* :mod:`kvattn.figures`, :mod:`kvattn.widgets` — plotly (static book) and ipywidgets (live) faces.
"""

from .activations import Activation, resolve
from .checkpoint import load_pretrained, save_pretrained
from .config import PLDRConfig
from .env import fast_mode, pick, setup
from .mlp import (
    FullBilinearAttentionMLP,
    GatedMLP,
    GatedRankRMLP,
    KeyValueMLP,
    SymmetricRank1Bilinear,
    make_mlp,
    matched_slots,
    mlp_cost,
)
from .pldr import GPT, PLDRLLM

__version__ = "0.1.0"

__all__ = [
    "GPT",
    "PLDRLLM",
    "Activation",
    "FullBilinearAttentionMLP",
    "GatedMLP",
    "GatedRankRMLP",
    "KeyValueMLP",
    "PLDRConfig",
    "SymmetricRank1Bilinear",
    "fast_mode",
    "load_pretrained",
    "make_mlp",
    "matched_slots",
    "mlp_cost",
    "pick",
    "resolve",
    "save_pretrained",
    "setup",
]
