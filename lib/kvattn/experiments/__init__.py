"""Designed experiments: the contrasts a chapter's claim calls for, with their statistics, in four
modules:

* :mod:`kvattn.experiments.records` — the records: one paired contrast (:class:`Contrast`,
  :func:`paired_contrast`), what each design ran and concluded (:class:`ContrastResult`,
  :class:`DoseResponse`), the shipped files (:func:`load_shipped`, :class:`ShippedExperiment`);
* :mod:`kvattn.experiments.recipe` — what every run of both designs shares (seeds, the matched
  parameter budget, the recipe, the worker processes);
* :mod:`kvattn.experiments.contrast` — the symmetric-vs-gated contrast of chapters 4–5
  (:func:`symmetry_contrast`, its design and the check of it, :func:`check_contrast_design`);
* :mod:`kvattn.experiments.dose` — the Swish-β dose-response of chapter 5
  (:func:`swish_beta_dose_response`, :func:`check_dose_design`).

Statistics use ``scipy.stats`` (Student's t quantiles and tail probabilities). Every public name
is re-exported here, so ``kvattn.experiments.X`` works for all of them.
"""

from .contrast import (
    CONTRASTS,
    REFERENCES,
    check_contrast_design,
    kinds,
    symmetry_contrast,
)
from .dose import BETA_RANGE, check_dose_design, swish_beta_dose_response
from .records import (
    Contrast,
    ContrastResult,
    DoseResponse,
    ShippedExperiment,
    load_shipped,
    paired_contrast,
)

__all__ = [
    "BETA_RANGE",
    "CONTRASTS",
    "REFERENCES",
    "Contrast",
    "ContrastResult",
    "DoseResponse",
    "ShippedExperiment",
    "check_contrast_design",
    "check_dose_design",
    "kinds",
    "load_shipped",
    "paired_contrast",
    "swish_beta_dose_response",
    "symmetry_contrast",
]
