"""kvattn: the library behind the course *Bilinear Transformers — from key-value memories to
power-law graph attention*.

Modules, in the order data flows through them:

* :mod:`kvattn.env` — device, seeding, fast mode, plotly renderer (``setup()``);
* :mod:`kvattn.activations` — σ and its gate g(z) = σ(z)/z;
* :mod:`kvattn.mlp` — key-value, gated, bilinear-attention and rank-r feed-forward layers;
* :mod:`kvattn.lm` — a small language model with any of those layers as its FFN;
* :mod:`kvattn.data` — corpora, tokenizer, synthetic tasks;
* :mod:`kvattn.train` — the training loop and losses;
* :mod:`kvattn.symmetry` — exchange/scale violations, transforms, conserved quantities;
* :mod:`kvattn.interaction` — interaction tensors and their eigen-decomposition;
* :mod:`kvattn.memories` — reading keys and values of a trained LM;
* :mod:`kvattn.figures`, :mod:`kvattn.widgets` — plotly (static book) and ipywidgets (live) faces.
"""

from .activations import Activation, resolve
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

__version__ = "0.1.0"

__all__ = [
    "Activation",
    "FullBilinearAttentionMLP",
    "GatedMLP",
    "GatedRankRMLP",
    "KeyValueMLP",
    "SymmetricRank1Bilinear",
    "fast_mode",
    "make_mlp",
    "matched_slots",
    "mlp_cost",
    "pick",
    "resolve",
    "setup",
]
