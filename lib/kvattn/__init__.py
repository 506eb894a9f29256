"""kvattn: the library behind the course *Bilinear Transformers — from key-value memories to
power-law graph attention*. Its modules, their layers and the import rule: the map in
CONTRIBUTING.md ("Map of lib/kvattn/").
"""

from .activations import Activation, resolve
from .checkpoint import load_pretrained, save_pretrained
from .config import PLDRConfig
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
    "load_pretrained",
    "make_mlp",
    "matched_slots",
    "mlp_cost",
    "resolve",
    "save_pretrained",
]
