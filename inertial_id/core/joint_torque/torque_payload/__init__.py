"""The payload from joint torques, for arms that measure joint torques (or motor currents) but
carry no wrist F/T sensor.

Model, per sample and joint ``j`` (model joint order):

    e_j = s_j (tau_links,j(q, qd, qdd) + [J_f(q)^T Y(v_f, a_f) pi]_j) + F_j(qd) phi_j + noise

- ``tau_links`` and the friction ``F phi`` are the arm's own torques, from a **known** link
  model (:class:`LinkTorqueModel`: the URDF's inertials, or those ``inertial-id
  identify-links`` wrote, with its friction, offsets and effort scales ``s``);
- ``pi`` are the payload's 10 parameters in the package order, about the origin of the
  **payload frame** ``f`` (a URDF frame rigidly attached to the last link: the flange, a tool
  frame) in its axes, the same convention as the F/T path; ``Y(v_f, a_f)`` is the Newton-Euler
  regressor at that frame (its twist and proper acceleration) and ``J_f`` its Jacobian in its
  own axes, so ``J_f^T Y pi`` is the torque needed to move the payload. Adding ``pi`` to the
  last body's parameters (moved to its joint frame) gives the same torques; the test checks
  this against pinocchio's RNEA;
- the rows ``s_j [J_f^T Y]_j`` are weighted by ``1 / sigma_j^2`` (the link model's per-joint
  residual std) and accumulated in the payload's :class:`SufficientStatistics` with the F/T
  offset columns fixed at zero; the estimate is the payload estimator's
  (:class:`ConsistentEstimator`, ``J(pi) >= epsilon``), its covariance the block-robust one
  (``score_block`` consecutive samples per block), so the std stays honest with coloured
  torque residuals.

A loaded recording alone trusts the link model's friction and offsets. With an unloaded
recording of the same trajectory, :func:`paired_difference` aligns the two in time
(:func:`time_shift`, cross-correlation of the joint velocities) and subtracts them sample by
sample, so the arm's own torques **and the link model's error of them** cancel;
:func:`identify_paired_payload` fits the payload to that difference with each run's own
friction and offsets (their change fitted alongside). The older way,
:meth:`LinkTorqueModel.refit_drive_terms` (friction and offsets re-fitted on the unloaded run,
the rigid bodies kept), leaves the rigid-body model's error in the loaded run, where the
payload fit turns it into a phantom mass.

Contents, one module per concept: :mod:`~inertial_id.core.joint_torque.torque_payload.model` (the
arm's own
efforts, :class:`LinkTorqueModel`), :mod:`~inertial_id.core.joint_torque.torque_payload.identifier`
(the batch estimate, :class:`TorquePayloadIdentifier`),
:mod:`~inertial_id.core.joint_torque.torque_payload.paired` (loaded minus unloaded runs),
:mod:`~inertial_id.core.joint_torque.torque_payload.stream` (live accumulation,
:class:`TorquePayloadStream`) and :mod:`~inertial_id.core.joint_torque.torque_payload.online`
(contact monitoring, :class:`TorquePayloadOnline`); the names are importable from this package.
"""

from inertial_id.core.joint_torque.torque_payload.identifier import TorquePayloadIdentifier
from inertial_id.core.joint_torque.torque_payload.model import LinkTorqueModel
from inertial_id.core.joint_torque.torque_payload.online import (
    GATE,
    HOLD,
    MIN_CONTACT,
    TorquePayloadOnline,
)
from inertial_id.core.joint_torque.torque_payload.paired import (
    PairedDifference,
    identify_paired_payload,
    paired_difference,
    time_shift,
)
from inertial_id.core.joint_torque.torque_payload.stream import TorquePayloadStream

__all__ = ["GATE", "HOLD", "MIN_CONTACT", "LinkTorqueModel", "PairedDifference",
           "TorquePayloadIdentifier", "TorquePayloadOnline", "TorquePayloadStream",
           "identify_paired_payload", "paired_difference", "time_shift"]
