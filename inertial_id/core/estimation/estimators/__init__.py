"""Estimators of ``x = [pi (10); offset (6)]`` from sufficient statistics.

Every estimator takes :class:`~inertial_id.core.statistics.SufficientStatistics` of the
weighted problem ``min ||A x - b||^2_W`` and returns an :class:`Estimate`. The constrained
estimator solves the convex SDP of Wensing et al. (2017)

    min ||A x - b||^2_W + w ||pi - pi_prior||^2   s.t.   J(pi) >= eps I,

so its result is fully physically consistent by construction.

Contents, one module per concept: :mod:`~inertial_id.core.estimate` (the
estimate
and its covariance), :mod:`~inertial_id.core.estimation.estimators.least_squares` (unconstrained
least squares, the problem's square root), :mod:`~inertial_id.core.estimation.estimators.consistent`
(:class:`ConsistentEstimator` and its :class:`Constraints`); the public names are importable
from this package.
"""

from inertial_id.core.estimate import (
    N_OFFSET,
    N_PI,
    N_UNKNOWNS,
    BiasDrift,
    Estimate,
    covariance_factor,
    identifiability,
    make_estimate,
    scaled_condition_number,
)
from inertial_id.core.estimation.estimators.consistent import (
    REGULARIZATIONS,
    ConsistentEstimator,
    Constraints,
    pseudo_inertia_expression,
)
from inertial_id.core.estimation.estimators.least_squares import least_squares, square_root
from inertial_id.core.estimation.sdp import (
    prior_scale,  # the uncompiled function (numba wraps a copy)
)

__all__ = ["N_OFFSET", "N_PI", "N_UNKNOWNS", "REGULARIZATIONS", "BiasDrift", "ConsistentEstimator",
           "Constraints", "Estimate", "covariance_factor", "identifiability", "least_squares",
           "make_estimate", "prior_scale", "pseudo_inertia_expression",
           "scaled_condition_number", "square_root"]
