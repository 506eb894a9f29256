"""Inference collapse measured: what G_LM does, how far the metric learner has gone, and the
measures pre-training takes on fixed probes.

* by what it does: :func:`g_substitution` (the loss when a layer's G_LM is replaced by a donor's
  or by I), :func:`attention_shift_bound` (how far attention can move when G_LM does);
* by the metric learner: the scale of its last LayerNorm
  (:func:`~kvattn.diagnostics.measures.metric_norm`) and its row map
  (:mod:`kvattn.diagnostics.rowmap`: gains per unit and composite, A's row-energy split);
* during training: :func:`collapse_measures` on fixed probes (order parameters, rank-1 audit,
  G substitution and LayerNorm scale per layer), the measures a trajectory records
  (:data:`COLLAPSE_LAYER_MEASURES` and the others); the trajectories themselves are
  :mod:`kvattn.diagnostics.probes`, the criteria that read them
  :mod:`kvattn.diagnostics.criteria`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .._checks import check_finite, check_square
from ..ablations import constant_g_from, generation_mode_logits
from ..losses import lm_cross_entropy
from ..pldr import PLDRLLM
from .heads import _last_position, deductive_profile, deductive_tensors
from .measures import (
    MetricNorm,
    _check_blocks,
    _check_pldrllm,
    _check_probes,
    cpu64,
    metric_norm,
    rank_audit,
)
from .rowmap import RowEnergySplit, UnitGains, row_energy_split, unit_gains

Tensor = torch.Tensor


def attention_shift_bound(q: Tensor, k: Tensor, v: Tensor, delta: Tensor) -> Tensor:
    """Upper bound on how far each query's attention output moves when the head's bilinear form
    changes from G to G + Δ (near-invariance theorem, chapter 9; ours).

    With scores s_ij = q_i G k_jᵀ / √d_k, E = softmax over j and o_i = Σ_j E_ij v_j,

        ‖o_i(G + Δ) − o_i(G)‖ ≤ (‖q_i‖ ‖Δ‖₂ / √d_k) · 2 max_j ‖k_j‖ · max_j ‖v_j‖,

    because (1) the score change of query i is at most ‖q_i‖ ‖Δ‖₂ ‖k_j‖ / √d_k in size; (2) the
    softmax moves by at most the oscillation of the score change in ℓ¹ (its Jacobian
    diag(p) − p pᵀ maps δ to a vector of ℓ¹ norm Σ p_i·abs(δ_i − p·δ), at most max δ − min δ);
    (3) a change of weights summing to 0 moves a weighted mean of the v_j by at most its ℓ¹
    norm times max ‖v_j‖. The bound holds for every G, so if G_LM(x) stays within ε of one
    constant (spectral norm), every head output stays within this bound, with ‖Δ‖₂ = ε, of the
    constant-G model's.

    Parameters
    ----------
    q, k, v:
        Queries ``[..., S_q, d_k]``, keys ``[..., S_k, d_k]``, values ``[..., S_k, d_v]`` (as
        attention sees them, after RoPE); any device.
    delta:
        The change of G, ``[..., d_k, d_k]`` (broadcast over the leading axes).

    Returns
    -------
    The bound per query, ``[..., S_q]``, CPU float64.

    Raises
    ------
    TypeError
        If an argument is not a real (floating-point or integer) tensor.
    ValueError
        For shapes that do not fit together (leading axes that do not broadcast included), no
        keys (S_k = 0: the maximum over keys is undefined), or non-finite entries.
    """
    q, k, v, delta = (
        cpu64(t, name) for t, name in ((q, "q"), (k, "k"), (v, "v"), (delta, "delta"))
    )
    for name, t in (("q", q), ("k", k), ("v", v), ("delta", delta)):
        check_finite(t, name)
    check_square(delta, "delta")
    try:
        torch.broadcast_shapes(*(t.shape[:-2] for t in (q, k, v, delta)))
        fits = min(q.ndim, k.ndim, v.ndim) >= 2
    except RuntimeError:
        fits = False
    if not (fits and q.shape[-1] == k.shape[-1] == delta.shape[-1] and k.shape[-2] == v.shape[-2]):
        raise ValueError(
            f"shapes do not fit: q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}, "
            f"delta {tuple(delta.shape)} (need q, k [..., S, d_k], v [..., S_k, d_v], "
            "delta [..., d_k, d_k])"
        )
    if k.shape[-2] == 0:
        raise ValueError(f"k and v have no positions (S_k = 0): k {tuple(k.shape)}")
    d_k = q.shape[-1]
    spectral = torch.linalg.matrix_norm(delta, ord=2)[..., None]
    k_max = k.norm(dim=-1).amax(-1, keepdim=True)
    v_max = v.norm(dim=-1).amax(-1, keepdim=True)
    return q.norm(dim=-1) * spectral / math.sqrt(d_k) * 2 * k_max * v_max


@dataclass(frozen=True)
class GSubstitution:
    """What freezing G_LM at other inputs' values does to a model's predictions.

    ``delta_loss[d]``: mean next-token loss of the constant-G model built from donor d's G_LM
    minus the model's own (nats/token, on the same blocks, each position seeing its prefix);
    ``agreement[d]``: the share of positions whose greedy next token is unchanged;
    ``identity_delta``: the same loss difference with G_LM = I in every head (the G = I
    substitution: SDPA's form with the PLDR weights, not a trained SDPA model), the scale
    against which ``delta_loss`` is small or large; ``loss``: the model's own loss.
    """

    loss: float
    delta_loss: Tensor
    agreement: Tensor
    identity_delta: float

    @property
    def share_of_g_effect(self) -> float:
        """Mean ``delta_loss`` as a share of ``identity_delta``: 0 when any input's G_LM does as
        well as the input's own (collapse, functionally), 1 when a frozen G_LM is no better
        than none; ``nan`` when ``identity_delta`` is exactly 0 (G_LM = I changes nothing, so
        there is no scale: a model whose G_LM is the identity)."""
        if not self.identity_delta:
            return math.nan
        return float(self.delta_loss.mean()) / self.identity_delta


@torch.no_grad()
def g_substitution(model: PLDRLLM, ids: Tensor, donors: list[Tensor]) -> GSubstitution:
    """The functional measure of collapse: replace every layer's G_LM by the value it takes on a
    donor input (the G ablation of the PLDR-LLM papers, :func:`kvattn.ablations.constant_g_from`)
    and measure the loss and the greedy tokens on ``ids``, for each donor (for the prefix density,
    its G_LM at the donor's last position, which sums over the whole donor).

    ``model``: a :class:`kvattn.pldr.PLDRLLM` (PLGA or constant-G); ``ids``: evaluation blocks,
    int64 ``[B, S + 1]`` (inputs are ``ids[:, :-1]``, targets ``ids[:, 1:]``, pad targets left
    out of the loss); ``donors``: a list of token-id tensors ``[1, S_d]``, one sequence each
    (all on the model's device). The model's own loss and greedy tokens are those of generation
    (:func:`kvattn.ablations.generation_mode_logits`), since a full pass with the published block
    density sees later tokens while a constant-G model does not.
    Unlike an order parameter, the result does not depend on how large the mean of G_LM is, only
    on what changing it does.

    Raises
    ------
    TypeError
        ``model`` is not a PLDRLLM (a GPT has no G_LM); ``ids`` is not an int64 tensor;
        ``donors`` is not a list or tuple (one tensor of several donors included), or a donor is
        not an int64 (or int32) tensor.
    ValueError
        No donors, a donor not of shape ``[1, S_d]`` with S_d ≥ 1, ``ids`` not of shape
        ``[B, S + 1]`` with B, S ≥ 1, ids or a donor on the meta device (no values), or every
        target ``ids[:, 1:]`` is ``pad_token_id`` (the loss would average over nothing).
    """
    _check_pldrllm(model)
    _check_probes(donors, 1, "need at least one donor input", "donors")
    _check_blocks(ids, "ids", model.config.pad_token_id)
    inputs, targets = ids[:, :-1], ids[:, 1:]
    pad = model.config.pad_token_id

    def run(m, logits=None) -> tuple[float, Tensor]:
        logits = m(inputs).logits if logits is None else logits
        return lm_cross_entropy(logits, targets, pad).item(), logits.argmax(-1)

    # the model's own predictions as a decoder makes them: with a generated G_LM and the block
    # density a full pass sees later tokens; a constant-G or prefix-density model is causal, and
    # its full pass is computed exactly as the constant-G models' below
    cfg = model.config
    leaks = cfg.custom_G_type is None and cfg.density == "block"
    loss, greedy = run(model, generation_mode_logits(model, ids) if leaks else None)
    deltas, agreements = [], []
    for donor in donors:
        outs = model(donor, output_pldr_attentions=True).pldr_attentions
        # a generated G_LM is [1, H, d_k, d_k] ([1, H, S_d, d_k, d_k] for the prefix density:
        # the last position's sums over the whole donor); a constant-G model reports [H, d_k, d_k]
        G = [_last_position(o).G_LM[0] if o.G_LM.ndim >= 4 else o.G_LM for o in outs]
        donor_loss, donor_greedy = run(constant_g_from(model, G))
        deltas.append(donor_loss - loss)
        agreements.append((donor_greedy == greedy).float().mean().item())  # MPS: no float64
    eye = torch.eye(model.config.d_k, device=G[0].device, dtype=G[0].dtype)
    identity_loss, _ = run(constant_g_from(model, [eye.expand_as(g) for g in G]))
    return GSubstitution(
        loss,
        torch.tensor(deltas, dtype=torch.float64),
        torch.tensor(agreements, dtype=torch.float64),
        identity_loss - loss,
    )


#: Per-layer measures of :func:`collapse_measures`, each kept per head (``[L, H]``).
COLLAPSE_LAYER_MEASURES = (
    "G_order_mean",
    "G_order_rms",
    "G_spread",
    "A_sigma_ratio",
    "A_row_spread",
)


#: Whole-model measures of :func:`collapse_measures` (the G substitution of every layer at once).
COLLAPSE_MODEL_MEASURES = ("loss", "delta_loss", "agreement", "identity_delta", "share_of_g_effect")

#: Per-layer measures of the metric learner's last LayerNorm (mean ``|γ|``, mean ``|β|``:
#: :func:`~kvattn.diagnostics.measures.metric_norm`), one number per layer. Optional in a
#: trajectory: those recorded before they were added lack them (see
#: :func:`~kvattn.diagnostics.probes.load_probes`).
COLLAPSE_NORM_MEASURES = ("metric_norm_scale", "metric_norm_shift")

#: Per-layer measures of the metric learner's row map (:mod:`kvattn.diagnostics.rowmap`):
#: ``unit_gain`` (per layer, one gain per residual unit), ``composite_gain``, ``A_row_energy``
#: and ``shape_row_energy`` (one number per layer: :class:`~kvattn.diagnostics.rowmap.UnitGains`
#: and :class:`~kvattn.diagnostics.rowmap.RowEnergySplit`). Optional in a trajectory, as the
#: LayerNorm measures are: those recorded before they were added lack them.
COLLAPSE_ROW_MAP_MEASURES = ("unit_gain", "composite_gain", "A_row_energy", "shape_row_energy")


@dataclass(frozen=True)
class CollapseMeasures:
    """How close a PLDR-LLM is to inference collapse, on fixed probe inputs.

    ``heads[name]``: for every name in :data:`~kvattn.diagnostics.collapse.COLLAPSE_LAYER_MEASURES`,
    a CPU float64 tensor ``[L, H]`` (layer, head), all dimensionless:

    * ``G_order_mean``, ``G_order_rms``: the entrywise order parameter of G_LM between the first
      probe and each other probe, averaged over the others
      (:func:`~kvattn.diagnostics.measures.order_parameter`, by the magnitude of the mean, as the
      SOC paper, and by the RMS, as the audit); ``nan`` where the normalisation by the mean is
      undefined (see :class:`~kvattn.diagnostics.heads.DeductiveProfile`);
    * ``G_spread``: the entrywise standard deviation of G_LM across the probes, rms over the
      entries, over the rms of the first probe's G_LM
      (:meth:`~kvattn.diagnostics.heads.DeductiveProfile.relative_spread`);
    * ``A_sigma_ratio``, ``A_row_spread``: σ2/σ1 of the metric learner output A and its row spread
      (:func:`~kvattn.diagnostics.measures.rank_audit`), averaged over the probes; ``nan`` for a
      model that computes no A (a constant-G model).

    The whole-model fields come from :func:`g_substitution` with the probes as donors:
    ``loss`` (the model's own loss on the evaluation blocks, nats/token), ``delta_loss`` and
    ``agreement`` (averaged over the donors), ``identity_delta`` (G_LM = I) and
    ``share_of_g_effect`` (mean ``delta_loss`` over ``identity_delta``; ``nan`` when
    ``identity_delta`` is exactly 0). ``norm``: the metric learner's last LayerNorm per layer
    (:func:`~kvattn.diagnostics.measures.metric_norm`), recorded as ``metric_norm_scale`` and
    ``metric_norm_shift``.
    """

    heads: dict[str, Tensor]
    loss: float
    delta_loss: float
    agreement: float
    identity_delta: float
    share_of_g_effect: float
    norm: MetricNorm
    gains: UnitGains | None = None
    energy: RowEnergySplit | None = None

    def layers(self, name: str) -> Tensor:
        """``heads[name]`` averaged over heads, ``[L]`` (CPU float64)."""
        return self.heads[name].mean(-1)

    def as_record(self) -> dict:
        """Plain JSON-ready values: ``name`` → one float per layer and ``name + "_heads"`` → one
        list per layer of one float per head for the per-layer measures, a float for each
        whole-model measure, one float per layer for ``metric_norm_scale`` and
        ``metric_norm_shift``; ``None`` stands for ``nan`` (JSON has no NaN)."""

        def plain(x: float) -> float | None:
            return x if math.isfinite(x) else None

        record: dict = {}
        for name in COLLAPSE_LAYER_MEASURES:
            record[name] = [plain(float(v)) for v in self.layers(name)]
            record[f"{name}_heads"] = [[plain(float(v)) for v in row] for row in self.heads[name]]
        for name in COLLAPSE_MODEL_MEASURES:
            record[name] = plain(float(getattr(self, name)))
        for name, values in zip(
            COLLAPSE_NORM_MEASURES, (self.norm.scale, self.norm.shift), strict=True
        ):
            record[name] = [plain(float(v)) for v in values]
        gains, energy = self.gains, self.energy
        record["unit_gain"] = gains and [[plain(float(v)) for v in row] for row in gains.unit]
        record["composite_gain"] = gains and [plain(float(v)) for v in gains.composite]
        record["A_row_energy"] = energy and [plain(float(v)) for v in energy.A_energy]
        record["shape_row_energy"] = energy and [plain(float(v)) for v in energy.shape_total]
        return record


@torch.no_grad()
def collapse_measures(model: PLDRLLM, probes: list[Tensor], eval_ids: Tensor) -> CollapseMeasures:
    """Order parameters, rank-1 audit and functional measure of collapse of ``model`` on fixed
    probes: the quantities a pre-training run records as trajectories (``probe_every`` of
    :class:`kvattn.pretrain.PretrainConfig`).

    Parameters
    ----------
    model:
        A :class:`kvattn.pldr.PLDRLLM` (PLGA or constant-G) on any device. It runs in eval mode
        and gets its mode back; the global random stream is left as it was (building the
        constant-G models of the substitution draws initial weights from it).
    probes:
        Two or more token-id tensors ``[1, S_p]``, any device: the inputs between which G_LM is
        compared, and the donors of the substitution. For the prefix density, each probe's
        tensors are taken at its last position.
    eval_ids:
        Blocks ``[B, S + 1]`` (any device) on which the substitution is scored
        (:func:`g_substitution`); best distinct from the probes.

    Returns
    -------
    :class:`CollapseMeasures`, CPU float64. A constant-G model gives exactly 0 for the order
    parameters, the spread and ``delta_loss`` (and ``nan`` for A and the LayerNorm, which it
    lacks); a model with input-dependent G_LM gives positive values.

    Source: the order parameter of [gokden2026soc] (§3) and of the numerical audit of
    [gokden2026mathfoundations], its rank-1 audit of A, the G ablation of [gokden2025kvg] as a
    loss difference (chapter 9); the combination and the fixed probes are ours (bracketed keys
    cite ``book/references.bib``).

    Raises
    ------
    TypeError
        ``model`` is not a PLDRLLM (a GPT has no G_LM), ``probes`` is not a list or tuple, a
        probe is not an int64 (or int32) tensor, or ``eval_ids`` is not an int64 tensor.
    ValueError
        Fewer than two probes, a probe not of shape ``[1, S]`` with S ≥ 1, two probes with the
        same ids (a probe compared with itself reads as collapse), ``eval_ids`` not
        ``[B, S + 1]`` with B, S ≥ 1, probes or ``eval_ids`` on the meta device, or every target
        ``eval_ids[:, 1:]`` is ``pad_token_id``.
    """
    _check_pldrllm(model)
    _check_probes(
        probes,
        2,
        "need a list of at least two probes to compare G_LM between inputs",
        distinct=True,
    )
    _check_blocks(eval_ids, "eval_ids", model.config.pad_token_id)
    device = next(model.parameters()).device
    probes = [p.to(device) for p in probes]
    was_training = model.training
    model.eval()
    # Only the CPU stream is forked: constant_g_from builds its models on the CPU, then moves them.
    with torch.random.fork_rng(devices=[]):
        try:
            outputs = [[_last_position(o) for o in out] for out in deductive_tensors(model, probes)]
            sub = g_substitution(model, eval_ids.to(device), probes)
        finally:
            model.train(was_training)
    L = len(outputs[0])
    H = model.config.num_attention_heads
    heads = {
        name: torch.full((L, H), math.nan, dtype=torch.float64) for name in COLLAPSE_LAYER_MEASURES
    }
    for layer in range(L):
        for head in range(H):
            profile = deductive_profile(outputs, layer, head)
            heads["G_order_mean"][layer, head] = profile.order["G_LM"]
            heads["G_order_rms"][layer, head] = profile.order_rms["G_LM"]
            heads["G_spread"][layer, head] = profile.relative_spread("G_LM")
        if outputs[0][layer].A is not None:
            audit = rank_audit(torch.cat([o[layer].A for o in outputs]), head_dim=1)
            heads["A_sigma_ratio"][layer] = audit.sigma_ratio.mean(0)
            heads["A_row_spread"][layer] = audit.row_spread.mean(0)
    delta = float(sub.delta_loss.mean())
    return CollapseMeasures(
        heads=heads,
        loss=sub.loss,
        delta_loss=delta,
        agreement=float(sub.agreement.mean()),
        identity_delta=sub.identity_delta,
        share_of_g_effect=delta / sub.identity_delta + 0.0 if sub.identity_delta else math.nan,
        norm=metric_norm(model),
        gains=unit_gains(model, probes) if model.kind == "plga" else None,
        energy=row_energy_split(model, probes) if model.kind == "plga" else None,
    )
