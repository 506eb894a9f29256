"""Feed-forward layers seen as memories and as bilinear attention over memory slots.

One naming runs through every class (course notation table). A layer has ``n_slots`` = m memory
slots; slot j owns a query ``q_j``, a key ``k_j`` and a value ``v_j``. Tokens x are row vectors;
q_j, k_j, v_j are column vectors stored as rows: row j of ``W_q``, ``W_k`` (shape ``(m, d)``, or
``(m, r, d)`` for rank r) and of ``W_v`` (shape ``(m, d_out)``), so x·q_j = x q_j and q_j k_jᵀ is
a d × d outer product. Inputs: any tensor of shape ``(..., d_model)``, on any device.

* :class:`KeyValueMLP` — σ(x W_kᵀ) W_v (Geva et al. 2021);
* :class:`GatedMLP` — (σ(x W_qᵀ) ⊙ (x W_kᵀ)) W_v (Shazeer 2020);
* :class:`SymmetricRank1Bilinear` — σ((x W_qᵀ) ⊙ (x W_kᵀ)) W_v (Breslow 2026);
* :class:`FullBilinearAttentionMLP` — Σ_j σ(x Q_j K_jᵀ xᵀ) v_j with Q_j, K_j ∈ ℝ^(d×r)
  (Breslow 2026; "form A");
* :class:`GatedRankRMLP` — Σ_j Σ_s σ(x·q_js)(x·k_js) v_j (ours; "form B").

The gated MLP's gate projection (LLaMA ``w1``, TransformerLens ``W_gate``) is ``W_q``, its up
projection (``w3``/``W_in``) is ``W_k`` and its down projection (``w2``/``W_out``) is ``W_v``
transposed. No layer has biases (as in Shazeer's FFN variants), so every symmetry discussed in the
course holds exactly.

Every class exposes ``hidden(x)`` (the m slot activations, shape ``(..., m)``) and
``forward(x) = hidden(x) @ W_v``; :func:`mlp_cost` gives parameters and FLOPs per token.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from ._checks import check_positive_int
from .activations import Activation, resolve

Tensor = torch.Tensor
ActLike = str | Callable[[Tensor], Tensor] | Activation

#: Gated-MLP variants of Shazeer (2020), Table 1, and the activation on their gate.
GATED_VARIANTS = {
    "glu": "sigmoid",
    "bilinear": "identity",
    "reglu": "relu",
    "geglu": "gelu",
    "swiglu": "silu",
}


def check_input(x: object, d_model: int) -> Tensor:
    """Validate a layer input: a floating tensor of shape ``(..., d_model)`` with no NaN/inf.

    Raises
    ------
    TypeError
        ``x`` is not a tensor.
    ValueError
        Integer/bool dtype, wrong last dimension, or non-finite entries.
    """
    if not isinstance(x, Tensor):
        raise TypeError(
            f"expected a torch.Tensor of shape (..., {d_model}), got {type(x).__name__}"
        )
    if not x.is_floating_point():
        raise ValueError(
            f"expected a floating-point tensor of shape (..., {d_model}), got dtype {x.dtype}; "
            "convert it with x.float()"
        )
    if x.ndim == 0 or x.shape[-1] != d_model:
        raise ValueError(f"expected last dimension {d_model}, got shape {tuple(x.shape)}")
    if not torch.isfinite(x).all():
        raise ValueError("input contains NaN or infinite values")
    return x


class SlotMLP(nn.Module):
    """Shared structure of the layers in this module: m slots with values ``W_v`` ∈ ℝ^(m×d_out).

    Subclasses implement :meth:`hidden`. Weights are initialised so that, for x ~ N(0, I), each
    slot score has unit variance and the output has variance of order 1.
    """

    W_v: nn.Parameter

    def __init__(self, d_model: int, n_slots: int, d_out: int | None, act: ActLike):
        super().__init__()
        self.d_model = check_positive_int("d_model", d_model)
        self.n_slots = check_positive_int("n_slots", n_slots)
        self.d_out = self.d_model if d_out is None else check_positive_int("d_out", d_out)
        self.act = resolve(act)
        self.W_v = nn.Parameter(torch.randn(self.n_slots, self.d_out) / math.sqrt(self.n_slots))

    def hidden(self, x: Tensor) -> Tensor:
        """The m slot activations h_j(x), shape ``(..., n_slots)``; the output is h @ W_v."""
        raise NotImplementedError

    def forward(self, x: Tensor) -> Tensor:
        """Output of shape ``(..., d_out)`` for an input of shape ``(..., d_model)``."""
        check_input(x, self.d_model)
        if x.dtype != self.W_v.dtype:
            raise ValueError(
                f"input dtype {x.dtype} differs from the layer's {self.W_v.dtype}; convert one "
                f"(x.to({self.W_v.dtype}) or layer.to({x.dtype}))"
            )
        return self.hidden(x) @ self.W_v

    def flops_per_token(self) -> int:
        """Matrix-multiply FLOPs (2 per multiply-add) for one token; see :func:`mlp_cost`."""
        return mlp_cost(self.form, self.d_model, self.n_slots, self.rank, self.d_out)[1]

    @property
    def form(self) -> str:
        raise NotImplementedError

    @property
    def rank(self) -> int:
        return 1

    def extra_repr(self) -> str:
        rank = f", rank={self.rank}" if self.rank != 1 else ""
        return (
            f"d_model={self.d_model}, n_slots={self.n_slots}{rank}, d_out={self.d_out}, "
            f"act={self.act.label}"
        )


class KeyValueMLP(SlotMLP):
    """The transformer feed-forward layer as a key-value memory: ``y = σ(x W_kᵀ) W_v``.

    Geva et al. (2021): each row k_j of ``W_k`` (the first layer) is a key that detects a pattern
    in the input; the *memory coefficient* σ(x·k_j) weights the value v_j (row j of ``W_v``, the
    second layer). Shapes: ``W_k`` ``(m, d_model)``, ``W_v`` ``(m, d_out)``; input
    ``(..., d_model)``, output ``(..., d_out)``.
    """

    def __init__(self, d_model: int, n_slots: int, d_out: int | None = None, act: ActLike = "relu"):
        super().__init__(d_model, n_slots, d_out, act)
        self.W_k = nn.Parameter(torch.randn(self.n_slots, self.d_model) / math.sqrt(self.d_model))

    @property
    def form(self) -> str:
        return "key_value"

    def hidden(self, x: Tensor) -> Tensor:
        """Memory coefficients σ(x·k_j), shape ``(..., n_slots)``."""
        return self.act(x @ self.W_k.T)


class GatedMLP(SlotMLP):
    """Gated MLP ``y = (σ(x W_qᵀ) ⊙ (x W_kᵀ)) W_v`` (Shazeer 2020, "GLU variants", biases dropped).

    ``variant`` is one of ``"glu"`` (sigmoid), ``"bilinear"`` (identity), ``"reglu"`` (ReLU),
    ``"geglu"`` (GELU) or ``"swiglu"`` (SiLU; pass ``beta`` for Swish-β). The activation sits on the
    query factor only, which is what breaks the q↔k exchange symmetry (Breslow 2026).
    Shapes: ``W_q``, ``W_k`` ``(m, d_model)``, ``W_v`` ``(m, d_out)``.
    """

    def __init__(
        self,
        d_model: int,
        n_slots: int,
        d_out: int | None = None,
        variant: str = "swiglu",
        beta: float | None = None,
    ):
        if variant not in GATED_VARIANTS:
            raise ValueError(f"unknown variant {variant!r}; expected one of {list(GATED_VARIANTS)}")
        super().__init__(d_model, n_slots, d_out, resolve(GATED_VARIANTS[variant], beta))
        self.variant = variant
        scale = 1 / math.sqrt(self.d_model)
        self.W_q = nn.Parameter(torch.randn(self.n_slots, self.d_model) * scale)
        self.W_k = nn.Parameter(torch.randn(self.n_slots, self.d_model) * scale)

    @property
    def form(self) -> str:
        return "gated"

    def hidden(self, x: Tensor) -> Tensor:
        """Slot activations σ(q_j·x)(k_j·x), shape ``(..., n_slots)``."""
        return self.act(x @ self.W_q.T) * (x @ self.W_k.T)

    def extra_repr(self) -> str:
        return f"variant={self.variant}, " + super().extra_repr()


class SymmetricRank1Bilinear(SlotMLP):
    """Rank-1 bilinear attention over memory slots: ``y = σ((x W_qᵀ) ⊙ (x W_kᵀ)) W_v``.

    Each slot scores the token against itself with the rank-1 bilinear form q_j k_jᵀ, then applies
    σ to the product. The output is invariant under q_j ↔ k_j and under (q_j, k_j) → (αq_j, k_j/α)
    for every σ and every α ≠ 0 (Breslow 2026). Shapes as :class:`GatedMLP`.
    """

    def __init__(self, d_model: int, n_slots: int, d_out: int | None = None, act: ActLike = "silu"):
        super().__init__(d_model, n_slots, d_out, act)
        scale = 1 / math.sqrt(self.d_model)
        self.W_q = nn.Parameter(torch.randn(self.n_slots, self.d_model) * scale)
        self.W_k = nn.Parameter(torch.randn(self.n_slots, self.d_model) * scale)

    @property
    def form(self) -> str:
        return "symmetric_rank1"

    def hidden(self, x: Tensor) -> Tensor:
        """Slot activations σ((q_j·x)(k_j·x)), shape ``(..., n_slots)``."""
        return self.act((x @ self.W_q.T) * (x @ self.W_k.T))


class _RankR(SlotMLP):
    """Slots with rank-r query and key factors ``W_q``, ``W_k`` of shape ``(m, r, d_model)``."""

    def __init__(self, d_model: int, n_slots: int, rank: int, d_out: int | None, act: ActLike):
        super().__init__(d_model, n_slots, d_out, act)
        self._rank = check_positive_int("rank", rank)
        # Each slot score sums r products; r^(-1/4) per factor keeps its variance at 1.
        scale = 1 / (math.sqrt(self.d_model) * self._rank**0.25)
        self.W_q = nn.Parameter(torch.randn(self.n_slots, self._rank, self.d_model) * scale)
        self.W_k = nn.Parameter(torch.randn(self.n_slots, self._rank, self.d_model) * scale)

    @property
    def rank(self) -> int:
        return self._rank

    def _factors(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """(x·q_js, x·k_js), each of shape ``(..., m, r)``."""
        m, r, d = self.W_q.shape
        q = (x @ self.W_q.reshape(m * r, d).T).unflatten(-1, (m, r))
        k = (x @ self.W_k.reshape(m * r, d).T).unflatten(-1, (m, r))
        return q, k


class FullBilinearAttentionMLP(_RankR):
    """Bilinear attention over memory slots: ``y = Σ_j σ(x Q_j K_jᵀ xᵀ) v_j`` (form A).

    Slot j holds factors Q_j, K_j ∈ ℝ^(d×r) (``W_q[j]``, ``W_k[j]``, shape ``(r, d)``), so its
    score x Q_j K_jᵀ xᵀ = Σ_s (x·q_js)(x·k_js) is a rank-r quadratic form and σ acts *after* the
    score. ``rank=None`` means r = d_model, the full bilinear form; ``rank=1`` is
    :class:`SymmetricRank1Bilinear`. Invariant under Q_j ↔ K_j and under Q_j → Q_j R,
    K_j → K_j R⁻ᵀ for any invertible r×r matrix R, for every σ.
    """

    def __init__(
        self,
        d_model: int,
        n_slots: int,
        d_out: int | None = None,
        *,
        rank: int | None = None,
        act: ActLike = "silu",
    ):
        super().__init__(d_model, n_slots, d_model if rank is None else rank, d_out, act)

    @property
    def form(self) -> str:
        return "rank_r"

    def hidden(self, x: Tensor) -> Tensor:
        """Slot activations σ(Σ_s (x·q_js)(x·k_js)), shape ``(..., n_slots)``."""
        q, k = self._factors(x)
        return self.act((q * k).sum(-1))


class GatedRankRMLP(_RankR):
    """Symmetry-broken rank-r slots (form B): ``h_j = Σ_s σ(x·q_js)(x·k_js)``, ``y = Σ_j h_j v_j``.

    This is our proposal, not the seed paper's text: a gated MLP with m·r units whose down
    projection is tied within groups of r, so it is no more expressive than an untied gated MLP
    of width m·r. ``rank=1`` is :class:`GatedMLP` with the same σ.
    """

    def __init__(
        self,
        d_model: int,
        n_slots: int,
        d_out: int | None = None,
        *,
        rank: int,
        act: ActLike = "silu",
    ):
        super().__init__(d_model, n_slots, rank, d_out, act)

    @property
    def form(self) -> str:
        return "rank_r"

    def hidden(self, x: Tensor) -> Tensor:
        """Slot activations Σ_s σ(x·q_js)(x·k_js), shape ``(..., n_slots)``."""
        q, k = self._factors(x)
        return (self.act(q) * k).sum(-1)


#: Layer forms known to :func:`mlp_cost`.
COST_FORMS = ("key_value", "gated", "symmetric_rank1", "rank_r", "full_matrix")


def mlp_cost(
    form: str, d_model: int, n_slots: int, rank: int = 1, d_out: int | None = None
) -> tuple[int, int]:
    """Parameters and matrix-multiply FLOPs per token of one layer.

    FLOPs count 2 per multiply-add of the matrix products, which dominate; elementwise work
    (σ, ⊙, the sum over r) is O(m·r) and left out, as PyTorch's ``FlopCounterMode``
    does.

    * ``key_value``: parameters m(d + d_out), FLOPs 2m(d + d_out);
    * ``gated`` and ``symmetric_rank1``: m(2d + d_out), 2m(2d + d_out);
    * ``rank_r``: m(2rd + d_out), 2m(2rd + d_out);
    * ``full_matrix``: m(d² + d_out), 2m(d² + d + d_out).

    ``full_matrix`` stores each slot's bilinear form M_j = Q_j K_jᵀ as one d×d matrix (computing
    x M_j, then its dot product with x); ``rank_r`` with r = d is the same function stored as two
    factors, which costs twice as much.

    Raises
    ------
    ValueError
        Unknown form or non-positive sizes.
    """
    if form not in COST_FORMS:
        raise ValueError(f"unknown form {form!r}; expected one of {COST_FORMS}")
    d = check_positive_int("d_model", d_model)
    m = check_positive_int("n_slots", n_slots)
    r = check_positive_int("rank", rank)
    if r != 1 and form != "rank_r":
        raise ValueError(f"rank applies to the 'rank_r' form, not {form!r}")
    d_out = d if d_out is None else check_positive_int("d_out", d_out)
    if form == "key_value":
        macs = m * (d + d_out)
        return macs, 2 * macs
    if form in ("gated", "symmetric_rank1"):
        macs = m * (2 * d + d_out)
        return macs, 2 * macs
    if form == "rank_r":
        macs = m * (2 * r * d + d_out)
        return macs, 2 * macs
    return m * (d * d + d_out), 2 * m * (d * d + d + d_out)


def matched_slots(
    form: str, d_model: int, params: int, rank: int = 1, d_out: int | None = None
) -> int:
    """The largest number of slots m whose layer has at most ``params`` parameters.

    For d_out = d this is the familiar bookkeeping: at the budget of a key-value MLP with m₁ slots,
    a gated MLP gets 2m₁/3 slots (Shazeer 2020) and a rank-r layer 2m₁/(2r + 1).

    Raises
    ------
    ValueError
        If even one slot exceeds the budget.
    """
    per_slot, _ = mlp_cost(form, d_model, 1, rank, d_out)
    m = params // per_slot
    if m < 1:
        raise ValueError(f"a budget of {params} parameters is below one {form} slot ({per_slot})")
    return m


#: Layer kinds accepted by :func:`make_mlp`.
MLP_KINDS = ("key_value", *GATED_VARIANTS, "symmetric_rank1", "full_bilinear", "gated_rank_r")


def make_mlp(
    kind: str,
    d_model: int,
    n_slots: int,
    d_out: int | None = None,
    *,
    act: ActLike | None = None,
    rank: int = 1,
    beta: float | None = None,
) -> SlotMLP:
    """Build any layer of this module by name (used by experiments that sweep over layer kinds).

    ``kind`` is ``"key_value"`` (σ default ReLU), a gated variant of :data:`GATED_VARIANTS`
    (``beta`` for Swish-β), ``"symmetric_rank1"``, ``"full_bilinear"`` (form A, ``rank``) or
    ``"gated_rank_r"`` (form B, ``rank``); σ defaults to SiLU for the last three.

    Raises
    ------
    ValueError
        Unknown kind, or an ``act`` given to a gated variant (whose σ is fixed by the variant).
    """
    if rank != 1 and kind not in ("full_bilinear", "gated_rank_r"):
        raise ValueError(f"rank applies to 'full_bilinear' and 'gated_rank_r', not {kind!r}")
    if kind in GATED_VARIANTS:
        if act is not None:
            raise ValueError(f"the gated variant {kind!r} fixes its activation; do not pass act")
        return GatedMLP(d_model, n_slots, d_out, variant=kind, beta=beta)
    if kind not in MLP_KINDS:
        raise ValueError(f"unknown kind {kind!r}; expected one of {MLP_KINDS}")
    if kind == "key_value":
        return KeyValueMLP(d_model, n_slots, d_out, act=resolve(act or "relu", beta))
    act = resolve(act or "silu", beta)
    if kind == "symmetric_rank1":
        return SymmetricRank1Bilinear(d_model, n_slots, d_out, act=act)
    if kind == "full_bilinear":
        return FullBilinearAttentionMLP(d_model, n_slots, d_out, rank=rank, act=act)
    return GatedRankRMLP(d_model, n_slots, d_out, rank=rank, act=act)


def slot_matrices(layer: FullBilinearAttentionMLP | SymmetricRank1Bilinear) -> Tensor:
    """Each slot's bilinear form M_j = Q_j K_jᵀ = Σ_s q_js k_jsᵀ, shape ``(n_slots, d, d)``, so that
    the slot score is x M_j xᵀ."""
    W_q, W_k = layer.W_q.detach(), layer.W_k.detach()
    if W_q.ndim == 2:
        W_q, W_k = W_q[:, None], W_k[:, None]
    return torch.einsum("msi,msj->mij", W_q, W_k)


def score_cut(M: Tensor, rank: int) -> tuple[Tensor, Tensor]:
    """Factors ``(Q, K)`` of the best rank-``rank`` slot for the *score* x M xᵀ.

    The score sees only the symmetric part sym(M) = (M + Mᵀ)/2. A sum of r outer products
    Σ_s q_s k_sᵀ has a symmetric part with at most r positive and r negative eigenvalues, since
    sym(q kᵀ) = ¼((q+k)(q+k)ᵀ − (q−k)(q−k)ᵀ); conversely one term carries one positive and one
    negative eigenpair: q = √λ u + √μ w, k = √λ u − √μ w give sym(q kᵀ) = λ u uᵀ − μ w wᵀ. The
    closest such form to sym(M) in Frobenius norm keeps sym(M)'s ``rank`` largest positive and
    ``rank`` most negative eigenvalues (Hoffman–Wielandt: ‖A − B‖ ≥ ‖λ(A) − λ(B)‖ for sorted
    spectra, with equality for common eigenvectors); see chapter 2's theorem and
    ``tests/test_mlp.py``. The antisymmetric part of Q Kᵀ is whatever the pairing leaves, which no
    score sees.

    "Closest" is in the Frobenius norm of the quadratic form. The mean squared score error over
    random inputs x ~ N(0, I) is 2‖D‖² + (tr D)² for the dropped part D (Isserlis), so there the
    trace of D counts as well and another cut can do slightly better for that distribution.

    Parameters
    ----------
    M:
        Slot matrices, shape ``(..., d, d)``, floating point.
    rank:
        r ≥ 1, at most d.

    Returns
    -------
    ``Q`` and ``K`` of shape ``(..., r, d)`` (rows q_s, k_s) with sym(Σ_s q_s k_sᵀ) the cut.

    Raises
    ------
    ValueError
        ``M`` is not a stack of square floating matrices, or ``rank`` is not in 1..d.
    """
    if not (isinstance(M, Tensor) and M.is_floating_point() and M.ndim >= 2):
        raise ValueError(f"M must be a floating tensor of shape (..., d, d), got {M!r:.80}")
    if M.shape[-1] != M.shape[-2]:
        raise ValueError(f"M must hold square matrices (..., d, d), got shape {tuple(M.shape)}")
    rank = check_positive_int("rank", rank)
    d = M.shape[-1]
    if rank > d:
        raise ValueError(f"rank must be at most d={d}, got {rank}")
    lam, V = torch.linalg.eigh((M + M.mT) / 2)  # ascending eigenvalues
    pos = lam.flip(-1)[..., :rank].clamp(min=0).sqrt()  # √λ of the r largest, 0 if not positive
    neg = (-lam[..., :rank]).clamp(min=0).sqrt()  # √μ of the r most negative, 0 if not negative
    u = V.flip(-1)[..., :rank].mT  # (..., r, d): eigenvectors as rows
    w = V[..., :rank].mT
    a, b = pos[..., None] * u, neg[..., None] * w
    return a + b, a - b


def truncate_rank(
    layer: FullBilinearAttentionMLP | SymmetricRank1Bilinear, rank: int, cut: str = "score"
) -> FullBilinearAttentionMLP:
    """Every slot cut to rank ``rank``, as a new layer (the values and σ are kept).

    ``cut="score"`` (default) gives the best rank-r *slot*: the one whose score x M_j xᵀ is
    closest to the original's, i.e. sym(M_j) approximated in Frobenius norm (:func:`score_cut`).
    ``cut="matrix"`` gives the best rank-r *matrix* M_j = U S Vᵀ cut to its r largest singular
    values (Eckart–Young), with factors q_js = √s_s u_s and k_js = √s_s v_s; it spends rank on
    the antisymmetric part of M_j, which no score sees, so its score error is never smaller.
    Either way ``rank=1`` gives a symmetric rank-1 layer σ((x·q_j)(x·k_j)).

    Raises
    ------
    ValueError
        ``rank`` not in 1..d_model, or ``cut`` not "score" or "matrix".
    """
    rank = check_positive_int("rank", rank)
    if rank > layer.d_model:
        raise ValueError(f"rank must be at most d_model={layer.d_model}, got {rank}")
    if cut not in ("score", "matrix"):
        raise ValueError(f"cut must be 'score' or 'matrix', got {cut!r}")
    M = slot_matrices(layer)
    if cut == "score":
        W_q, W_k = score_cut(M, rank)
    else:
        U, S, Vh = torch.linalg.svd(M)
        root = S[:, :rank].sqrt()  # (m, r)
        W_q = (U[:, :, :rank] * root[:, None, :]).transpose(1, 2)
        W_k = Vh[:, :rank, :] * root[:, :, None]
    with torch.random.fork_rng(devices=[]):  # the throw-away initial weights use no global RNG
        new = FullBilinearAttentionMLP(
            layer.d_model, layer.n_slots, layer.d_out, rank=rank, act=layer.act
        )
    new = new.to(device=layer.W_v.device, dtype=layer.W_v.dtype)
    with torch.no_grad():
        new.W_q.copy_(W_q)
        new.W_k.copy_(W_k)
        new.W_v.copy_(layer.W_v)
    return new


def slot_form_report(
    layer: FullBilinearAttentionMLP | SymmetricRank1Bilinear, rank: int = 1
) -> dict[str, Tensor]:
    """How a layer's slots split between what the score sees and what it does not, and how close
    each rank-``rank`` cut of :func:`truncate_rank` comes to the scores (chapter 2, theorem
    "The best rank-r slot"; Breslow 2026).

    For every slot matrix M_j (:func:`slot_matrices`), with sym(M) = (M + Mᵀ)/2 and
    antisym(M) = (M − Mᵀ)/2:

    * ``"top_share"``: s_1² / Σ_i s_i², the share of ‖M_j‖_F² its largest singular value carries;
    * ``"asymmetry"``: ‖antisym(M_j)‖_F / ‖sym(M_j)‖_F, the part no score x M_j xᵀ sees, relative
      to the part it sees (inf for a slot with no symmetric part);
    * ``"score_cut"`` and ``"matrix_cut"``: ‖sym(M_j) − sym(M̂_j)‖_F for the cut M̂_j of
      ``truncate_rank(layer, rank, cut="score")`` and ``cut="matrix"`` (Eckart–Young), the
      distance of the cut slot's score form to the trained one; the score cut is never farther.

    Returns
    -------
    A dict of the four names above, each a float tensor of shape ``(n_slots,)`` on the layer's
    device (dimensionless ratios for the first two, the units of the weights squared for the
    distances).

    Raises
    ------
    TypeError
        ``layer`` is not a :class:`FullBilinearAttentionMLP` or :class:`SymmetricRank1Bilinear`.
    ValueError
        ``rank`` not in 1..d_model.
    """
    if not isinstance(layer, FullBilinearAttentionMLP | SymmetricRank1Bilinear):
        raise TypeError(
            "expected a FullBilinearAttentionMLP or SymmetricRank1Bilinear, "
            f"got {type(layer).__name__}"
        )
    rank = check_positive_int("rank", rank)
    if rank > layer.d_model:
        raise ValueError(f"rank must be at most d_model={layer.d_model}, got {rank}")
    M = slot_matrices(layer)
    S = torch.linalg.svdvals(M)
    sym_part = (M + M.mT) / 2
    report = {
        "top_share": S[:, 0] ** 2 / (S**2).sum(1),
        "asymmetry": ((M - M.mT) / 2).flatten(1).norm(dim=1) / sym_part.flatten(1).norm(dim=1),
    }
    for cut in ("score", "matrix"):
        cut_M = slot_matrices(truncate_rank(layer, rank, cut=cut))
        report[f"{cut}_cut"] = (sym_part - (cut_M + cut_M.mT) / 2).flatten(1).norm(dim=1)
    return report
