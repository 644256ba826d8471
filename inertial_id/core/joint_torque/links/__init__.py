"""Identification of a robot's own links from joint torques (or motor efforts).

Conventions
-----------
- Each moving joint ``i`` of the (reduced) chain carries one rigid **body**: its URDF child link
  plus everything rigidly attached to it (fixed-joint children, locked sub-trees), as pinocchio
  merges them. Its parameters ``pi_i`` are in the package order
  ``[m, mcx, mcy, mcz, Ixx, Ixy, Ixz, Iyy, Iyz, Izz]`` **about the origin of joint i's frame, in
  its axes** (for a URDF that is the child link's frame), SI units. The standard vector stacks
  them in pinocchio's joint order: ``pi = [pi_1; ...; pi_n]`` (10 n entries).
- The **own** parameters of the child link are ``pi_i - a_i``, with ``a_i`` the CAD parameters
  of the rest of the body (:attr:`LinkModel.attachments`); the URDF writer writes them.
- Joint model: ``e_j = s_j (Y_j(q, qd, qdd) pi) + F_j(qd) phi_j`` per joint ``j``, with ``e`` the
  measured effort, ``Y`` the joint-torque regressor (gravity included), ``F`` the friction
  regressor (:class:`FrictionModel`) and ``s_j`` the **effort scale**: effort units per N m
  (N for a prismatic joint). A drive gain ``k_j`` (torque per effort unit) is ``1 / s_j``. With
  efforts that already are torques ``s = 1``. Friction ``phi`` is in effort units.
- Drive gains and the scale ambiguity: ``(s, pi, phi) -> (s / a, a pi, phi)`` leaves every
  effort unchanged, so efforts alone never give the absolute scale of ``pi`` when all gains are
  unknown (Traversaro et al. 2013, Gautier and Briot 2011). Something must anchor it: known
  gains (``s`` fixed), a known payload, an F/T sensor, or a CAD prior. Here
  :meth:`LinkIdentification.fit_cad` fits ``s_j`` per joint against the CAD torques, and the
  prior of the constrained estimators then anchors the scale when gains are refined.
- Base parameters (Gautier's numerical method, used by Bonnet et al. 2016): ``Y = Y_b K`` and
  ``pi_b = K pi``; ``Y_b`` has full column rank.

Contents, one module per concept: :mod:`~inertial_id.core.joint_torque.links.estimate` (the result,
:class:`LinkEstimate`, and the residual's correlation time),
:mod:`~inertial_id.core.joint_torque.links.identification` (:class:`LinkIdentification`: data, WLS
with sigma %, PLS, the CAD baseline with fitted drive terms),
:mod:`~inertial_id.core.joint_torque.links.constrained` (:class:`ConstrainedLinkEstimator`: SDP / QP
with the
CAD prior), :mod:`~inertial_id.core.joint_torque.links.methods` (:func:`identify`, the estimator by
name) and
:mod:`~inertial_id.core.joint_torque.links.documents` (the result as documents:
:func:`estimate_document`,
:func:`link_document`); the names are importable from this package. The workflow the
``identify-links`` command and the solver's ``links`` mode share, with its choices from the
data, is :func:`inertial_id.core.joint_torque.link_selection.identify_links`. The chain model and
base parameters are in :mod:`inertial_id.core.joint_torque.link_model`, friction in
:mod:`inertial_id.core.joint_torque.friction`, writing the URDF in
:mod:`inertial_id.core.joint_torque.link_urdf`.
"""


from inertial_id.core.joint_torque.links.constrained import ConstrainedLinkEstimator
from inertial_id.core.joint_torque.links.documents import estimate_document, link_document
from inertial_id.core.joint_torque.links.estimate import LinkEstimate, correlation_times
from inertial_id.core.joint_torque.links.identification import LinkIdentification
from inertial_id.core.joint_torque.links.methods import METHODS, constrained_solver, identify

__all__ = ["METHODS", "ConstrainedLinkEstimator", "LinkEstimate", "LinkIdentification",
           "constrained_solver", "correlation_times", "estimate_document", "identify",
           "link_document"]
