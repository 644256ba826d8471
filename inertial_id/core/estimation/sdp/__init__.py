"""A dedicated solver for the payload's LMI-constrained least squares.

The problem the payload estimate solves once the F/T offset is eliminated (or known) is

    minimise   1/2 pi^T H pi - g^T pi      subject to   J(pi) - M >= 0,

``H`` (10 x 10, positive definite) and ``g`` from the sufficient statistics (plus the prior),
``J`` the pseudo-inertia (4 x 4, linear in ``pi``; :func:`~inertial_id.core.parameters.
pseudo_inertia`) and ``M`` the margin (``epsilon I``). A general conic solver reached
through cvxpy spends most of its milliseconds on the way in and out; this module solves
exactly this problem, from the sufficient statistics in one compiled call
(:func:`solve_statistics`):

- the unconstrained minimiser when it is unique and strictly feasible;
- else, from the previous optimum and its dual, Newton's method on the active face of the
  LMI with a certificate of optimality (:func:`active_newton`); a live solver re-solving
  after each batch of samples mostly ends here, in a few steps;
- else a primal-dual interior-point method keeping ``S = J(pi) - M`` strictly positive definite
  (the feasible set does not depend on the data, so a start is easy to find: the previous
  optimum moved slightly towards a body with ``J = tau I``), with a dual ``Z > 0``;
- Nesterov-Todd scaling (Vandenberghe, "The CVXOPT linear and quadratic cone program
  solvers", 2010, sec. 4): ``W`` with ``W^-1 S W^-T = W^T Z W = Lambda`` diagonal, from the
  Cholesky factors of ``S`` and ``Z`` and one 4 x 4 SVD (one-sided Jacobi);
- Mehrotra's predictor-corrector: an affine step, the centring ``sigma = (mu_aff / mu)^3``
  and the second-order correction;
- the Newton system reduced to 10 x 10: ``(H + G) dpi = -r_d + <F~, D>`` with
  ``G_ij = <F~_i, F~_j>``, ``F~_i = W^-1 F_i W^-T`` the scaled basis of ``J``.

The variables are scaled so that ``H`` has a unit diagonal. ``gap`` is ``<S, Z>`` (the
duality gap, objective units); a solve ends when it and the dual residual are below
``tolerance`` relative to the objective's scale. numba compiles it (:func:`warm_up`; a node
prepares it in the background: :func:`prepare_in_background`); every small factorisation is
a loop here, since a BLAS or LAPACK call on a 4 x 4 matrix costs more than its arithmetic.
"""


from inertial_id.core.estimation.sdp.linalg import BASIS, CENTRE, N_PI
from inertial_id.core.estimation.sdp.problem import SdpResult, prior_scale
from inertial_id.core.estimation.sdp.runtime import (
    available,
    compiled,
    prepare_in_background,
    solve_lmi_qp,
    solve_statistics,
    warm_up,
)

__all__ = ["BASIS", "CENTRE", "N_PI", "SdpResult", "available", "compiled", "prepare_in_background",
           "prior_scale", "solve_lmi_qp", "solve_statistics", "warm_up"]
