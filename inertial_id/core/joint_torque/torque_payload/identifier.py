"""The payload from a recording of the loaded arm (:class:`TorquePayloadIdentifier`): rows
``s_j [J_f^T Y(v_f, a_f)]_j`` at the payload frame ``f``, targets ``e - e_links``, weighted by
``1 / sigma_j^2`` into the payload's sufficient statistics (F/T offset columns fixed at zero),
solved with ``J(pi) >= epsilon``.

``pi`` is about the origin of the payload frame, in its axes (SI units); rows and targets in
effort units; samples (N, nv) in the link model's joint order and in time order.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from inertial_id.core.errors import ModelError, SampleError
from inertial_id.core.estimate import N_UNKNOWNS, Estimate
from inertial_id.core.estimation.estimators import ConsistentEstimator
from inertial_id.core.joint_torque.link_model import N_PI
from inertial_id.core.joint_torque.torque_payload.model import LinkTorqueModel
from inertial_id.core.kinematics import SensorKinematics
from inertial_id.core.regressor import regressor
from inertial_id.core.statistics import SufficientStatistics

N_OFFSET = N_UNKNOWNS - N_PI


class TorquePayloadIdentifier:
    """Accumulates joint samples of the loaded arm and estimates the payload (see the module
    docstring). ``frame``: the payload frame (a URDF frame after the last moving joint; None:
    the last moving joint's child link, so ``pi`` is the change of the last link's parameters);
    ``epsilon``, ``prior``, ``prior_weight``, ``dedicated`` (the compiled SDP solver, else
    cvxpy): the payload estimator's options; ``score_block``: samples per block of the
    block-robust covariance."""

    def __init__(self, links: LinkTorqueModel, frame: str | None = None, epsilon: float = 1e-8,
                 prior: ArrayLike | None = None, prior_weight: float = 1e-9,
                 score_block: int = 250, dedicated: bool = True) -> None:
        self.links = links
        frame = frame or links.model.link_names[-1]
        self.kinematics = SensorKinematics(links.model.urdf, frame,
                                           locked_joints=links.model.locked)
        if self.kinematics.joint_names != links.model.joint_names:
            raise ModelError(f"the payload frame's chain {self.kinematics.joint_names} is not "
                             f"the link model's {links.model.joint_names}")
        self.frame = frame
        self.score_block = int(score_block)
        self.estimator = ConsistentEstimator(epsilon=epsilon, prior=prior,
                                             prior_weight=prior_weight,
                                             known_offset=np.zeros(N_OFFSET),
                                             dedicated=dedicated)
        self.reset()

    def reset(self) -> None:
        """Forget the accumulated statistics (a new payload)."""
        self.statistics = SufficientStatistics(N_UNKNOWNS, score_block=self.score_block)

    def rows(self, q: ArrayLike, qd: ArrayLike, qdd: ArrayLike) -> NDArray[np.float64]:
        """``s_j [J_f^T Y(v_f, a_f)]_j``: (N, nv, 10), effort units per unit of ``pi``."""
        return self._jacobians_and_rows(q, qd, qdd)[1]

    def _jacobians_and_rows(self, q: ArrayLike, qd: ArrayLike, qdd: ArrayLike
                            ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        twist, proper = self.kinematics.compute(q, qd, qdd)
        jacobians = self.kinematics.jacobians(q)
        torque = np.einsum("nki,nkp->nip", jacobians,
                           regressor(np.atleast_2d(twist), np.atleast_2d(proper)))
        return jacobians, self.links.effort_scale[None, :, None] * torque

    def terms(self, q: ArrayLike, qd: ArrayLike, qdd: ArrayLike, effort: ArrayLike,
              initial: ArrayLike | None = None) -> tuple[NDArray[np.float64], ...]:
        """For (N, nv) samples (model joint order, time order): the payload frame's Jacobians
        (N, 6, nv), the rows (:meth:`rows`) and the targets ``e - e_links`` (N, nv), the arm
        computed once for all three; ``initial``: the link friction's direction-memory state
        before the first row (:meth:`LinkTorqueModel.efforts`)."""
        q, qd, qdd, effort = self.links.model.batch(q, qd, qdd, effort)
        if not all(np.all(np.isfinite(a)) for a in (q, qd, qdd, effort)):
            raise SampleError("joint data contain NaN or inf")
        jacobians, rows = self._jacobians_and_rows(q, qd, qdd)
        return jacobians, rows, effort - self.links.efforts(q, qd, qdd, initial)

    def add(self, q: ArrayLike, qd: ArrayLike, qdd: ArrayLike, effort: ArrayLike,
            initial: ArrayLike | None = None) -> None:
        """Accumulate (N, nv) samples in time order (model joint order; ``initial``: see
        :meth:`terms`)."""
        _, rows, target = self.terms(q, qd, qdd, effort, initial)
        self.add_rows(rows, target)

    def add_rows(self, rows: NDArray[np.float64], target: NDArray[np.float64]) -> None:
        """Accumulate rows and targets of :meth:`terms` (time order), in blocks of
        ``score_block`` samples."""
        n, nv = target.shape
        weights = np.tile(self.links.joint_sigma ** -2.0, n)
        padded = np.concatenate((rows, np.zeros(rows.shape[:2] + (N_OFFSET,))), axis=-1)
        step = self.score_block if self.score_block > 0 else n
        for start in range(0, n, step):
            chunk = slice(start, start + step)
            count = padded[chunk].shape[0]
            self.statistics.add(padded[chunk].reshape(-1, N_UNKNOWNS),
                                target[chunk].reshape(-1), weights[:count * nv], count)

    def solve(self) -> Estimate:
        """The consistent payload estimate (offset fixed at zero) with its covariance."""
        return self.estimator.solve(self.statistics)

    def residual(self, q: ArrayLike, qd: ArrayLike, qdd: ArrayLike, effort: ArrayLike,
                 pi: ArrayLike) -> NDArray[np.float64]:
        """Measured minus predicted efforts (N, nv) with the payload ``pi``."""
        _, rows, target = self.terms(q, qd, qdd, effort)
        return target - rows @ np.asarray(pi, dtype=float)
