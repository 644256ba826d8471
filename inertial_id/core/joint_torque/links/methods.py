"""The link estimators by name (:data:`METHODS`): :func:`identify` runs one (wls, pls, sdp or
qp), optionally refining the drive terms ``s_j`` jointly with ``pi``;
:func:`constrained_solver` builds the sdp/qp solver with its per-joint weights (effort units).
"""


from __future__ import annotations

from dataclasses import replace

import numpy as np
from numpy.typing import ArrayLike, NDArray

from inertial_id.core.errors import SolverError
from inertial_id.core.joint_torque.link_model import N_PI
from inertial_id.core.joint_torque.links.constrained import ConstrainedLinkEstimator, body_units
from inertial_id.core.joint_torque.links.estimate import LinkEstimate
from inertial_id.core.joint_torque.links.identification import LinkIdentification

METHODS = ("wls", "pls", "sdp", "qp")


def constrained_solver(
    problem: LinkIdentification,
    method: str = "sdp",
    prior_weight: float = 1e-3,
    consistency: str = "link",
    com_margin: float | None = None,
    epsilon: float = 1e-6,
    max_relative_std: float | None = None,
    joint_sigma: ArrayLike | None = None,
) -> tuple[ConstrainedLinkEstimator, NDArray[np.float64]]:
    """The :class:`ConstrainedLinkEstimator` (sdp or qp) of :func:`identify` for ``problem``
    and its per-joint weights' sigma (effort units): ``joint_sigma``, default the WLS residual
    std per joint; with ``max_relative_std`` (percent) the base parameters of WLS sigma %
    above it are held at CAD (Bonnet). Solve it at other prior weights with
    :meth:`ConstrainedLinkEstimator.set_prior_weight` (no recompilation)."""
    hold = None
    if joint_sigma is None or max_relative_std is not None:
        wls = problem.weighted_least_squares()
        if max_relative_std is not None:
            hold = ~(wls.relative_std[:problem.base.count] <= max_relative_std)
        if joint_sigma is None:
            joint_sigma = wls.joint_sigma
    solver = ConstrainedLinkEstimator(problem.model, problem.base, problem.f.shape[-1],
                                      method, prior_weight=prior_weight,
                                      consistency=consistency, com_margin=com_margin,
                                      epsilon=epsilon, hold=hold)
    return solver, np.asarray(joint_sigma, dtype=float)


def identify(
    problem: LinkIdentification,
    method: str = "sdp",
    prior_weight: float = 1e-3,
    consistency: str = "link",
    com_margin: float | None = None,
    refine_scale: int = 0,
    epsilon: float = 1e-6,
    max_relative_std: float | None = None,
    joint_sigma: ArrayLike | None = None,
    refine_joints: bool | ArrayLike = True,
    tolerance: float = 1e-5,
) -> LinkEstimate:
    """Identify with ``method`` (wls, pls, sdp or qp); returns the estimate.

    wls/pls give base parameters; their standard parameters are the CAD-nearest ones with
    ``K pi = pi_b`` (in CAD units), not necessarily consistent. sdp/qp solve
    :class:`ConstrainedLinkEstimator` (``prior_weight``, ``consistency``, ``com_margin``,
    ``epsilon`` are its options) with the per-joint weights ``1 / joint_sigma^2`` (default:
    the WLS residual std per joint). With ``max_relative_std`` (percent) the base parameters
    whose WLS sigma % exceeds it keep their CAD values (Bonnet et al. 2016: unreliable base
    parameters leave the QP).

    ``refine_scale`` > 0 fits the effort scales of ``refine_joints`` (``True``: all not
    known; or a bool per joint) jointly with ``pi``: effort = ``s_j Y_j pi + F_j phi_j`` is
    bilinear, so it alternates the per-joint least squares of ``(s, phi)`` at fixed ``pi``
    and the constrained fit of ``(pi, phi)`` at fixed ``s``, at most ``refine_scale`` times,
    until an alternation lowers the objective by less than ``tolerance`` (relative). The
    weights stay fixed, so every step lowers the same objective; the prior (or the scales not
    refined) anchors the common scale of ``pi``, see the module docstring. The problem's
    ``effort_scale`` is updated.
    """
    if method not in METHODS:
        raise SolverError(f"unknown method {method!r}: {', '.join(METHODS)}")
    model = problem.model
    if method in ("wls", "pls"):
        est = (problem.weighted_least_squares() if method == "wls"
               else problem.partial_least_squares())
        standard = problem.base.standard_closest(est.base, model.cad.ravel(),
                                                 body_units(model.cad).ravel())
        return replace(est, standard=standard.reshape(model.n, N_PI))
    solver, joint_sigma = constrained_solver(problem, method, prior_weight, consistency,
                                             com_margin, epsilon, max_relative_std,
                                             joint_sigma)
    est = solver.solve(problem, joint_sigma)
    for _ in range(refine_scale):
        before = solver.objective
        problem.effort_scale = problem.fit_cad(est.standard, fit_scale=refine_joints).effort_scale
        est = solver.solve(problem, joint_sigma)
        if before - solver.objective <= tolerance * before:
            break
    return est
