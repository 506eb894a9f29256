"""The PLDR-LLM model configuration, in the field names of the published ``config.json``.

:class:`PLDRConfig` is what every model of :mod:`kvattn.pldr` is built from and what
:mod:`kvattn.checkpoint` reads and writes; it checks every field at construction. Beside it: the
constants the models share (:data:`EPSILON_A`, :data:`MASK_VALUE`, :data:`CACHE_MODES`,
:data:`MAX_POSITIONS`), the published 110M sizes (:func:`published_110m_config`), and
:func:`reject_unknown_keys`, the check every JSON config of the package (model and pre-training)
runs, which names the closest known key of a typo. The architecture and its field names follow
the published PLDR-LLM v51 reference code [gokden2025kvg]; bracketed keys cite
``book/references.bib``.
"""

from __future__ import annotations

import difflib
import math
import warnings
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields

from ._checks import check_choice, check_positive_int

#: ε added after iSwiGLU so that A_LM > 0 elementwise (reference ``epsilonAdj``).
EPSILON_A = 1e-9


#: Additive mask value of the reference implementation for blocked positions.
MASK_VALUE = -1e9


#: Decoding modes of :meth:`kvattn.pldr.DecoderLM.generate`.
CACHE_MODES = ("none", "kv", "kv+g")


#: The largest ``max_position_embeddings`` a :class:`PLDRConfig` accepts (2**20 = 1,048,576).
MAX_POSITIONS = 2**20


#: Keys that a published ``config.json`` carries beside :class:`PLDRConfig`'s fields (the
#: published checkpoints of [gokden2025kvg] and transformers' ``PretrainedConfig``); kept in
#: ``extra`` without a typo warning.
PUBLISHED_EXTRA_KEYS = frozenset(
    {
        "architectures",
        "attention_dropout",
        "auto_map",
        "dtype",
        "initializer_range",
        "output_pldr_attentions",
        "rope_scaling",
        "torch_dtype",
        "transformers_version",
        "use_cache",
    }
)


#: Other codes' names for :class:`PLDRConfig`'s fields (the native PLDR-LLM code, GPT-2, LLaMA,
#: GPT-NeoX, T5 ...), each with the published field it most likely means: such a key in a
#: config is not read, so :meth:`PLDRConfig.from_dict` warns, naming the field.
FIELD_ALIASES = {
    **dict.fromkeys(
        ("num_layers", "n_layer", "n_layers", "num_decoder_layers"), "num_hidden_layers"
    ),
    **dict.fromkeys(("num_heads", "n_head", "n_heads"), "num_attention_heads"),
    **dict.fromkeys(("d_model", "n_embd", "hidden_dim", "dim", "embed_dim"), "hidden_size"),
    **dict.fromkeys(
        ("dff", "d_ff", "ffn_dim", "ffn_hidden_size", "n_inner", "intermediate_dim"),
        "intermediate_size",
    ),
    **dict.fromkeys(("head_size", "d_head", "d_k", "kv_channels"), "head_dim"),
    **dict.fromkeys(("input_vocab_size", "n_vocab", "vocabulary_size"), "vocab_size"),
    **dict.fromkeys(
        ("max_seq_len", "max_seq_length", "max_sequence_length", "n_positions", "n_ctx"),
        "max_position_embeddings",
    ),
    **dict.fromkeys(
        ("rotary_emb_base", "rope_base", "rotary_base", "rope_freq_base"), "rope_theta"
    ),
    **dict.fromkeys(
        ("layer_norm_epsilon", "layernorm_epsilon", "norm_eps", "rms_norm_eps"), "layer_norm_eps"
    ),
    **dict.fromkeys(("activation_function", "hidden_activation"), "hidden_act"),
    "tie_embeddings": "tie_word_embeddings",
    "pad_id": "pad_token_id",
    "bos_id": "bos_token_id",
    "eos_id": "eos_token_id",
}


class ConfigKeyWarning(UserWarning):
    """A config key that is not a field but lies close to one (probably a typo) or is another
    code's name for one: its value is not used (see :meth:`PLDRConfig.from_dict`)."""


@dataclass
class PLDRConfig:
    """Configuration with the field names of the published ``config.json`` (HF ``PldrllmConfig``).

    ``head_dim`` defaults to hidden_size / num_attention_heads, ``intermediate_size`` to
    floor(8·hidden_size/3) and ``A_dff`` to floor(8·head_dim/3) (170 for d_k = 64), as the
    reference. The fields after ``custom_G_type`` are this library's additions; a published
    loader ignores them.

    ``custom_G_type``: ``None`` for PLGA; ``"identity"``, ``"random"`` or ``"external"`` for the
    constant-G model (G_LM initialised to I, to U[0, 1), or loaded from a checkpoint).
    ``density``: ``"block"`` (published) or ``"prefix"`` (prefix-consistent; a deviation).
    ``plga_init``: ``"xavier_normal"`` (the native training code) or ``"xavier_uniform"`` (the HF
    port) for W, P and a. ``cache_first_G``: with the ``"kv+g"`` cache, every batch row reuses
    the G_LM of row 0 (as the HF port's option of that name).

    Every field is checked at construction (type and range; ``pad_token_id``, ``bos_token_id``
    and ``eos_token_id`` must lie in [0, vocab_size); ``max_position_embeddings`` at most
    :data:`MAX_POSITIONS` = 2**20, a thousand times the published 1,024: every layer keeps RoPE
    tables of 16 · max_position_embeddings · head_dim / 2 bytes (512 MiB per layer at 2**20 and
    head_dim 64), so a larger value is a typo long before it is a context length, and is refused
    before anything is allocated). ``extra`` holds the published fields this
    library does not use (``transformers_version``, ``use_cache`` ...); a non-null
    ``rope_scaling`` among them is refused, because the reference RoPE (torchtune's, which
    ``reference_rope=True`` selects) has no scaling and silently ignoring it would compute a
    different model.

    Raises
    ------
    ValueError
        A field of the wrong type or out of range, naming the field, the value and what is
        allowed; unknown keys in :meth:`from_dict` with ``strict=True``.
    """

    vocab_size: int = 32000
    hidden_size: int = 896
    num_attention_heads: int = 14
    num_hidden_layers: int = 5
    head_dim: int | None = None
    intermediate_size: int | None = None
    A_dff: int | None = None
    num_reslayerA: int = 8
    num_denseA: int = 2
    max_position_embeddings: int = 1024
    rope_theta: float = 10000.0
    reference_rope: bool = True
    layer_norm_eps: float = 1e-6
    attention_bias: bool = True
    glu_bias: bool = True
    final_bias: bool = True
    tie_word_embeddings: bool = False
    hidden_act: str = "silu"
    pad_token_id: int = 0
    bos_token_id: int = 2
    eos_token_id: int = 3
    custom_G_type: str | None = None
    cache_first_G: bool = False
    model_type: str = "pldrllm"
    density: str = "block"
    plga_init: str = "xavier_normal"
    extra: dict = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        for name in (
            "vocab_size",
            "hidden_size",
            "num_attention_heads",
            "num_hidden_layers",
            "num_reslayerA",
            "num_denseA",
            "max_position_embeddings",
        ):
            check_positive_int(name, getattr(self, name))
        if self.max_position_embeddings > MAX_POSITIONS:
            raise ValueError(
                f"max_position_embeddings must be at most 2**20 = {MAX_POSITIONS}, got "
                f"{self.max_position_embeddings} (every layer's RoPE tables take 8·head_dim "
                "bytes per position)"
            )
        if self.head_dim is not None:
            check_positive_int("head_dim", self.head_dim)
        else:
            if self.hidden_size % self.num_attention_heads:
                raise ValueError(
                    f"hidden_size={self.hidden_size} is not divisible by "
                    f"num_attention_heads={self.num_attention_heads}; set head_dim"
                )
            self.head_dim = self.hidden_size // self.num_attention_heads
        if self.head_dim * self.num_attention_heads != self.hidden_size:
            raise ValueError(
                f"head_dim·num_attention_heads = {self.head_dim}·{self.num_attention_heads} must "
                f"equal hidden_size = {self.hidden_size}"
            )
        if self.head_dim % 2:
            raise ValueError(f"RoPE needs an even head_dim, got {self.head_dim}")
        if self.intermediate_size is None:
            self.intermediate_size = (8 * self.hidden_size) // 3
        if self.A_dff is None:
            self.A_dff = (8 * self.head_dim) // 3
        for name in ("rope_theta", "layer_norm_eps"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not (math.isfinite(value) and value > 0)
            ):
                raise ValueError(f"{name} must be a positive number, got {value!r}")
        check_positive_int("intermediate_size", self.intermediate_size)
        check_positive_int("A_dff", self.A_dff)
        if self.hidden_act != "silu":
            raise ValueError(f"hidden_act must be 'silu' (SwiGLU), got {self.hidden_act!r}")
        check_choice("custom_G_type", self.custom_G_type, (None, "identity", "random", "external"))
        check_choice("density", self.density, ("block", "prefix"))
        check_choice("plga_init", self.plga_init, ("xavier_normal", "xavier_uniform"))
        for name in (
            "reference_rope",
            "attention_bias",
            "glu_bias",
            "final_bias",
            "tie_word_embeddings",
            "cache_first_G",
        ):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be true or false, got {getattr(self, name)!r}")
        if self.tie_word_embeddings:
            raise ValueError("tie_word_embeddings=True is not supported (PLDR-LLM is untied)")
        for name in ("pad_token_id", "bos_token_id", "eos_token_id"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{name} must be an int token id, got {value!r}")
            if not 0 <= value < self.vocab_size:
                raise ValueError(
                    f"{name} must lie in [0, vocab_size) = [0, {self.vocab_size}), got {value}"
                )
        if self.model_type != "pldrllm":
            raise ValueError(f"model_type must be 'pldrllm', got {self.model_type!r}")
        if not isinstance(self.extra, dict):
            raise ValueError(f"extra must be a dict of published fields, got {self.extra!r}")
        if self.extra.get("rope_scaling") is not None:
            raise ValueError(
                f"rope_scaling={self.extra['rope_scaling']!r} is not supported: the reference "
                "RoPE has no scaling; only rope_scaling null (or absent) can be loaded"
            )

    @property
    def d_k(self) -> int:
        """Head dimension (the papers' d_k)."""
        return self.head_dim

    def to_dict(self) -> dict:
        """The config as ``config.json`` stores it (``extra`` fields merged back in)."""
        out = {k: v for k, v in asdict(self).items() if k != "extra"}
        return {**self.extra, **out}

    @classmethod
    def from_dict(cls, values: dict, *, strict: bool = False) -> PLDRConfig:
        """Build from a ``config.json`` dictionary. Unknown keys are kept in ``extra`` (a published
        ``config.json`` carries fields this library does not use) or, with ``strict=True`` (a
        config written by hand, where an unknown key is a typo), refused with a ValueError that
        names them and the closest field names.

        Without ``strict``, an unknown key within one edit (insertion, deletion, substitution,
        or a change of case) of a field, or one that ``difflib.get_close_matches`` finds
        at cutoff 0.85 (a transposition), or another code's name for a field
        (:data:`FIELD_ALIASES`: ``num_layers``, ``rotary_emb_base`` ...), draws a
        :class:`ConfigKeyWarning` naming the key and the field, because its value is not used:
        ``"rope_thet": 500000.0`` would otherwise load silently with rope_theta = 10000. Keys in
        :data:`PUBLISHED_EXTRA_KEYS` never warn.

        Raises
        ------
        ValueError
            ``values`` is not a dict; unknown keys with ``strict`` (an alias named with its
            field); a field that :class:`PLDRConfig` refuses; when such a key stands near a
            field, the message names the key and what the field took instead (its default, as a
            rule: the value the error quotes).
        """
        if not isinstance(values, dict):
            raise ValueError(f"a model config must be a dict, got {type(values).__name__}")
        known = {f.name for f in fields(cls)} - {"extra"}
        extra = {k: v for k, v in values.items() if k not in known}
        near = {k: hint for k in extra if (hint := _near_field(k, known)) is not None}
        if strict:
            reject_unknown_keys("model config", extra, known, {k: f for k, (f, _) in near.items()})
        kwargs = {k: v for k, v in values.items() if k in known}
        try:
            config = cls(**kwargs, extra=extra)
        except ValueError as err:
            if not near:
                raise
            # The field's default is what the error quotes; without the key behind it, the
            # error blames a value the config never gave.
            defaults = {f.name: f.default for f in fields(cls)}
            notes = "; ".join(
                f"config key {key!r} is not a field; {why} {name!r}, so {name} took "
                + (
                    f"the value {values[name]!r} given for it"
                    if name in values
                    else f"its default {defaults[name]!r}"
                )
                for key, (name, why) in near.items()
            )
            raise ValueError(f"{err} ({notes})") from None
        for key, (name, why) in near.items():
            warnings.warn(
                f"config key {key!r} is not a field; {why} {name!r}, so its value is not used "
                f"({name} = {getattr(config, name)!r} is) and it is kept as an extra key; rename "
                f"it to {name!r} if that is what it means",
                ConfigKeyWarning,
                stacklevel=2,
            )
        return config


def _near_field(key: object, known: set[str]) -> tuple[str, str] | None:
    """The field that ``key`` probably means and why (the words before the field's name in a
    message), or None (see :meth:`PLDRConfig.from_dict`)."""
    if not isinstance(key, str) or key in PUBLISHED_EXTRA_KEYS:
        return None
    if key.lower() in FIELD_ALIASES:
        return FIELD_ALIASES[key.lower()], "it is another library's name for"
    for name in sorted(known):
        if _within_one_edit(key.lower(), name.lower()):
            return name, "it looks like a typo of"
    close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.85)
    return (close[0], "it looks like a typo of") if close else None


def _within_one_edit(a: str, b: str) -> bool:
    """Whether one insertion, deletion or substitution (or none) turns ``a`` into ``b``."""
    if len(a) > len(b):
        a, b = b, a
    if len(b) - len(a) > 1:
        return False
    i = 0
    while i < len(a) and a[i] == b[i]:
        i += 1
    # after the first difference the rest must agree, shifted by one for an insertion
    return a[i + (len(a) == len(b)) :] == b[i + 1 :]


def reject_unknown_keys(
    where: str, given: object, known: set[str], meant: Mapping[str, str] | None = None
) -> None:
    """Raise a ValueError naming the keys of ``given`` that are not in ``known`` (with the closest
    known name for each, so that a typo is obvious, or the name ``meant`` gives for it) and
    listing the allowed keys."""
    unknown = sorted(set(given) - known)
    if not unknown:
        return
    hints = []
    for key in unknown:
        close = difflib.get_close_matches(str(key), sorted(known), n=1)
        if meant and key in meant:
            close = [meant[key]]  # difflib takes 'num_layers' for 'num_reslayerA'
        hints.append(f"{key!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    raise ValueError(
        f"unknown keys in {where}: {', '.join(hints)}; allowed keys are {sorted(known)}"
    )


#: The sizes of the published PLDR-LLM-v51-110M models (the other fields are PLDRConfig's defaults).
PUBLISHED_110M = dict(
    vocab_size=32000,
    hidden_size=896,
    num_attention_heads=14,
    num_hidden_layers=5,
    intermediate_size=2389,
    A_dff=170,
    num_reslayerA=8,
    num_denseA=2,
    max_position_embeddings=1024,
)


def published_110m_config(**overrides) -> PLDRConfig:
    """The published PLDR-LLM-v51-110M configuration (5 layers, 14 heads, d = 896, V = 32,000)."""
    return PLDRConfig(**{**PUBLISHED_110M, **overrides})
