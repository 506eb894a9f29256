"""Exchange and inverse-scale symmetries of bilinear and gated layers: metrics, transforms,
conserved quantities and an effective-parameter count, in five modules.

The two symmetries of one slot's score (q·x)(k·x) (Breslow 2026):

* exchange  q ↔ k;
* inverse scale  (q, k) → (αq, k/α), α ≠ 0.

The rank-1 symmetric form σ((q·x)(k·x)) keeps both for every σ; the gated form σ(q·x)(k·x) breaks
them unless σ is linear (or, for scale with α > 0, positively homogeneous).

* :mod:`kvattn.symmetry.gaussian` — expectations over Gaussian inputs
  (:func:`gaussian_expectation`, :func:`pair_expectation`, :func:`input_contour`);
* :mod:`kvattn.symmetry.violation` — how far σ breaks each symmetry for Gaussian inputs
  (:func:`exchange_violation`, :func:`scale_violation`, :func:`scale_violation_coefficient`)
  and pointwise (:func:`exchange_violation_map`, :func:`scale_violation_map`);
* :mod:`kvattn.symmetry.trained` — a trained layer's exchange violation on the inputs it sees
  (:func:`trained_exchange_violation`, :func:`slot_inputs`);
* :mod:`kvattn.symmetry.transforms` — transforms of a layer (:func:`swap_qk`, :func:`rescale`)
  and what they leave: :func:`conserved_quantities`, :func:`jacobian_rank`;
* :mod:`kvattn.symmetry.profile` — the symmetry explorer's compute function
  (:func:`symmetry_profile`).

Every public name is re-exported here, so ``kvattn.symmetry.X`` works for all of them.
"""

from .gaussian import gaussian_expectation, input_contour, pair_expectation
from .profile import SymmetryProfile, symmetry_profile
from .trained import SlotInputs, slot_inputs, trained_exchange_violation
from .transforms import (
    JacobianRank,
    conserved_quantities,
    jacobian_rank,
    rescale,
    swap_qk,
)
from .violation import (
    exchange_violation,
    exchange_violation_map,
    scale_violation,
    scale_violation_coefficient,
    scale_violation_map,
)

__all__ = [
    "JacobianRank",
    "SlotInputs",
    "SymmetryProfile",
    "conserved_quantities",
    "exchange_violation",
    "exchange_violation_map",
    "gaussian_expectation",
    "input_contour",
    "jacobian_rank",
    "pair_expectation",
    "rescale",
    "scale_violation",
    "scale_violation_coefficient",
    "scale_violation_map",
    "slot_inputs",
    "swap_qk",
    "symmetry_profile",
    "trained_exchange_violation",
]
