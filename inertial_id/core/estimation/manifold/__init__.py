"""Fully physically consistent estimation on a manifold (Traversaro et al. 2016).

A rigid body is parametrized by ``theta = (m, c, Q, L)`` in ``R>=0 x R^3 x SO(3) x R^3>=0``:
mass ``m`` (kg), centre of mass ``c`` (m, sensor frame), the rotation ``Q`` from the principal
axes at the CoM to the sensor axes, and the central second moments of mass ``L`` (kg m^2) along
those axes. With ``P = [[0, 1, 1], [1, 0, 1], [1, 1, 0]]``

    I_C = Q diag(P L) Q^T,    I_O = I_C - m [c]x [c]x,    pi = [m, m c, vech(I_O)]

in the package order ``[m, mcx, mcy, mcz, Ixx, Ixy, Ixz, Iyy, Iyz, Izz]`` about the sensor
origin. Equivalently the pseudo-inertia is ``J(pi) = T diag(Q diag(L) Q^T, m) T^T`` with
``T = [[1, c], [0, 1]]``, so ``J`` is positive definite exactly when ``m > 0`` and ``L > 0``:
every such point is fully physically consistent (triangle inequalities included).

:class:`ManifoldEstimator` minimises ``||A x - b||^2_W`` (plus an optional prior) over this
manifold by Levenberg-Marquardt in a local chart re-centred after every accepted step:

    m = m0 (1 + s_m),  h = m c = m0 (c0 + s_c),  Q = Q0 expm([s_Q]x),  L = L0 (1 + s_L)

- Consistency (J positive definite at every iterate): the steps of ``m`` and ``L`` are
  projected onto ``[floor, inf)`` with ``floor = 1e-12 tr J``, so ``m > 0`` and ``L > 0`` hold
  with a margin that survives rounding. ``pi`` is linear in ``m``, ``h`` and ``L``, so the
  projected step is exactly what the model predicted for it; a moment that should vanish
  reaches the floor in one step (a log parametrization would only shrink it by a factor per
  step, and could not grow it back from the floor quickly).
- Offset: it enters linearly and is eliminated by variable projection (a Schur complement of
  ``A^T W A``), leaving a problem in ``pi`` alone whose square-root form ``||R pi - z||^2``
  costs a 10 x 10 product to evaluate.
- Model: analytic Jacobian plus the positive part of the parametrization's own curvature
  (rotation of the principal axes, parallel-axis term). Gauss-Newton alone zigzags at a
  boundary optimum (some ``L_k = 0``, where the residual is not zero), which is where an
  inconsistent least-squares solution sends the estimate. Principal axes of equal moments are
  turned to diagonalise the gradient, so a point mass can become a rod or a disc.

Contents, one module per concept: :mod:`~inertial_id.core.estimation.manifold.chart` (the manifold
and
its chart), :mod:`~inertial_id.core.estimation.manifold.steps` (the reduced problem and the pieces
of a step), :mod:`~inertial_id.core.estimation.manifold.estimator` (:class:`ManifoldEstimator`); the
public names are importable from this package.
"""

from inertial_id.core.estimation.manifold.chart import (
    ManifoldPoint,
    manifold_curvature,
    manifold_from_pi,
    manifold_jacobian,
    pi_from_manifold,
    pseudo_inertia_trace,
    retract,
    rotation_exp,
)
from inertial_id.core.estimation.manifold.estimator import ManifoldEstimator

__all__ = ["ManifoldEstimator", "ManifoldPoint", "manifold_curvature", "manifold_from_pi",
           "manifold_jacobian", "pi_from_manifold", "pseudo_inertia_trace", "retract",
           "rotation_exp"]
