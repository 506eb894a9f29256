"""Diagnostics of trained PLDR-LLMs, in four modules:

* :mod:`kvattn.diagnostics.measures` — tensor measures (order parameters, rank-1 audit,
  Perron–Frobenius, asymmetry, the NOTEARS function) and the checks the diagnostics share;
* :mod:`kvattn.diagnostics.heads` — RoPE and its commutant, heads as bilinear forms, the
  deductive tensors' profile, the steps of the collapse mechanism;
* :mod:`kvattn.diagnostics.rowmap` — the metric learner's row map: gains per unit and
  composite, A's row-energy split through the last LayerNorm;
* :mod:`kvattn.diagnostics.collapse` — inference collapse: its measures, the probe record of
  pre-training and the collapse criteria, defined once.

Every public name is re-exported here, so ``kvattn.diagnostics.X`` works for all of them.
"""

from .collapse import (
    COLLAPSE_CRITERIA,
    COLLAPSE_LAYER_MEASURES,
    COLLAPSE_MODEL_MEASURES,
    COLLAPSE_NORM_MEASURES,
    COLLAPSE_ROW_MAP_MEASURES,
    PROBES_FILE,
    CollapseCriterion,
    CollapseMeasures,
    CriterionReading,
    GSubstitution,
    append_probe,
    attention_shift_bound,
    collapse_criteria,
    collapse_measures,
    collapse_reading,
    collapsed,
    g_substitution,
    load_probes,
    new_probes,
    probe_reading,
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
    MetricNorm,
    RankAudit,
    asymmetry,
    cpu64,
    metric_norm,
    notears_h,
    order_parameter,
    perron_frobenius,
    rank_audit,
)
from .rowmap import RowEnergySplit, UnitGains, row_energy_split, row_map_gain, unit_gains

__all__ = [
    "COLLAPSE_CRITERIA",
    "COLLAPSE_LAYER_MEASURES",
    "COLLAPSE_MODEL_MEASURES",
    "COLLAPSE_NORM_MEASURES",
    "COLLAPSE_ROW_MAP_MEASURES",
    "DEDUCTIVE",
    "PROBES_FILE",
    "CollapseCriterion",
    "CollapseMeasures",
    "CriterionReading",
    "DeductiveProfile",
    "GSubstitution",
    "HeadProfile",
    "MetricNorm",
    "RankAudit",
    "RowEnergySplit",
    "UnitGains",
    "append_probe",
    "asymmetry",
    "attention_input",
    "attention_shift_bound",
    "collapse_criteria",
    "collapse_measures",
    "collapse_reading",
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
    "metric_norm",
    "new_probes",
    "notears_h",
    "order_parameter",
    "perron_frobenius",
    "probe_reading",
    "rank_audit",
    "rope_planes",
    "rope_rotation",
    "row_energy_split",
    "row_map_gain",
    "swap_attention_qk",
    "twirl",
    "unit_gains",
]
