"""Diagnostics of trained PLDR-LLMs, in six modules:

* :mod:`kvattn.diagnostics.measures` — tensor measures (order parameters, rank-1 audit,
  Perron–Frobenius, asymmetry, the NOTEARS function) and the checks the diagnostics share;
* :mod:`kvattn.diagnostics.heads` — RoPE and its commutant, heads as bilinear forms, the
  deductive tensors' profile, the steps of the collapse mechanism;
* :mod:`kvattn.diagnostics.rowmap` — the metric learner's row map: gains per unit and
  composite, A's row-energy split through the last LayerNorm;
* :mod:`kvattn.diagnostics.collapse` — inference collapse measured: G substitution, the
  attention-shift bound, the measures pre-training takes on fixed probes;
* :mod:`kvattn.diagnostics.probes` — the probe record: the trajectories of those measures that
  pre-training saves (``probes.json``);
* :mod:`kvattn.diagnostics.criteria` — the collapse criteria, defined once, and the reading of a
  model or a probe against them.

Every public name is re-exported here, so ``kvattn.diagnostics.X`` works for all of them.
"""

from .collapse import (
    COLLAPSE_LAYER_MEASURES,
    COLLAPSE_MODEL_MEASURES,
    COLLAPSE_NORM_MEASURES,
    COLLAPSE_ROW_MAP_MEASURES,
    CollapseMeasures,
    GSubstitution,
    attention_shift_bound,
    collapse_measures,
    g_substitution,
)
from .criteria import (
    COLLAPSE_CRITERIA,
    CollapseCriterion,
    CriterionReading,
    collapse_criteria,
    collapse_reading,
    collapsed,
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
from .probes import PROBES_FILE, append_probe, load_probes, new_probes
from .rowmap import (
    RowEnergySplit,
    UnitGains,
    identical_rows,
    row_energy_split,
    row_map_gain,
    unit_gains,
)

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
    "identical_rows",
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
