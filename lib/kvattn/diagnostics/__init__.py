"""Diagnostics of trained PLDR-LLMs, in three modules:

* :mod:`kvattn.diagnostics.measures` — tensor measures (order parameters, rank-1 audit,
  Perron–Frobenius, asymmetry, the NOTEARS function) and the checks the diagnostics share;
* :mod:`kvattn.diagnostics.heads` — RoPE and its commutant, heads as bilinear forms, the
  deductive tensors' profile, the steps of the collapse mechanism;
* :mod:`kvattn.diagnostics.collapse` — inference collapse: its measures, the probe record of
  pre-training and the hunt's criterion.

Every public name is re-exported here, so ``kvattn.diagnostics.X`` works for all of them.
"""

from .collapse import (
    COLLAPSE_LAYER_MEASURES,
    COLLAPSE_MODEL_MEASURES,
    PROBES_FILE,
    CollapseMeasures,
    GSubstitution,
    attention_shift_bound,
    collapse_measures,
    collapsed,
    g_substitution,
    load_probes,
    new_probes,
    row_map_gain,
)
from .heads import (
    DEDUCTIVE,
    DeductiveProfile,
    HeadProfile,
    attention_input,
    commutant_projection,
    commutant_residual,
    deductive_profile,
    deductive_tensors,
    head_bilinear_form,
    head_profile,
    layer_queries,
    rope_planes,
    rope_rotation,
    swap_attention_qk,
    twirl,
)
from .measures import (
    RankAudit,
    asymmetry,
    cpu64,
    notears_h,
    order_parameter,
    perron_frobenius,
    rank_audit,
)

__all__ = [
    "COLLAPSE_LAYER_MEASURES",
    "COLLAPSE_MODEL_MEASURES",
    "DEDUCTIVE",
    "PROBES_FILE",
    "CollapseMeasures",
    "DeductiveProfile",
    "GSubstitution",
    "HeadProfile",
    "RankAudit",
    "asymmetry",
    "attention_input",
    "attention_shift_bound",
    "collapse_measures",
    "collapsed",
    "commutant_projection",
    "commutant_residual",
    "cpu64",
    "deductive_profile",
    "deductive_tensors",
    "g_substitution",
    "head_bilinear_form",
    "head_profile",
    "layer_queries",
    "load_probes",
    "new_probes",
    "notears_h",
    "order_parameter",
    "perron_frobenius",
    "rank_audit",
    "rope_planes",
    "rope_rotation",
    "row_map_gain",
    "swap_attention_qk",
    "twirl",
]
