"""Conversions between inertial_id messages and core objects (no logic beyond packing)."""

from __future__ import annotations

import numpy as np
from geometry_msgs.msg import Inertia, InertiaStamped, Vector3, Wrench
from numpy.typing import NDArray
from std_msgs.msg import Header

from inertial_id.core.estimators import Estimate
from inertial_id.core.parameters import BodyParameters, vector_from_symmetric
from inertial_id.core.synchronizer import SyncedSamples
from inertial_id.msg import InertialParameters, JointSamples, SensorSamples
from inertial_id.nodes.common import to_seconds, to_stamp


def _rows(values: object, width: int) -> NDArray[np.float64]:
    return np.asarray(values, dtype=float).reshape(-1, width)


def joint_samples_to_msg(
    batch: SyncedSamples, joint_names: list[str], frame_id: str
) -> JointSamples:
    """Pack a synchronised batch; the header stamp is the last sample's."""
    msg = JointSamples()
    msg.header = Header(stamp=to_stamp(float(batch.times[-1])), frame_id=frame_id)
    msg.joint_names = list(joint_names)
    msg.stamps = [to_stamp(float(t)) for t in batch.times]
    msg.position = batch.position.ravel().tolist()
    msg.velocity = batch.velocity.ravel().tolist()
    msg.acceleration = batch.acceleration.ravel().tolist()
    msg.wrench = batch.wrench.ravel().tolist()
    msg.wrench_raw = batch.wrench_raw.ravel().tolist()
    return msg


def joint_samples_from_msg(msg: JointSamples) -> SyncedSamples:
    """Unpack a :class:`JointSamples` batch (joints in the message's order)."""
    n = len(msg.joint_names)
    return SyncedSamples(
        times=np.array([to_seconds(s) for s in msg.stamps]),
        position=_rows(msg.position, n),
        velocity=_rows(msg.velocity, n),
        acceleration=_rows(msg.acceleration, n),
        wrench=_rows(msg.wrench, 6),
        wrench_raw=_rows(msg.wrench_raw, 6),
    )


def sensor_samples_to_msg(
    batch: SyncedSamples,
    twist: NDArray[np.float64],
    proper_acceleration: NDArray[np.float64],
    frame_id: str,
) -> SensorSamples:
    """Pack sensor-frame samples of a batch; the header stamp is the last sample's."""
    msg = SensorSamples()
    msg.header = Header(stamp=to_stamp(float(batch.times[-1])), frame_id=frame_id)
    msg.stamps = [to_stamp(float(t)) for t in batch.times]
    msg.twist = twist.ravel().tolist()
    msg.proper_acceleration = proper_acceleration.ravel().tolist()
    msg.wrench = batch.wrench.ravel().tolist()
    msg.wrench_raw = batch.wrench_raw.ravel().tolist()
    return msg


def sensor_samples_from_msg(msg: SensorSamples) -> dict[str, NDArray[np.float64]]:
    """``times`` (N,) and ``twist``, ``proper_acceleration``, ``wrench``, ``wrench_raw``
    (N, 6): the keyword arguments of :meth:`OnlineEstimator.add`."""
    return {
        "times": np.array([to_seconds(s) for s in msg.stamps]),
        "twist": _rows(msg.twist, 6),
        "proper_acceleration": _rows(msg.proper_acceleration, 6),
        "wrench": _rows(msg.wrench, 6),
        "wrench_raw": _rows(msg.wrench_raw, 6),
    }


def body_to_msg(body: BodyParameters, header: Header) -> InertialParameters:
    """The parameter fields of :class:`InertialParameters` from a body (no uncertainty)."""
    msg = InertialParameters(header=header)
    msg.mass = body.mass
    c = body.com
    msg.com = Vector3(x=float(c[0]), y=float(c[1]), z=float(c[2]))
    msg.inertia_com = vector_from_symmetric(body.inertia_com).tolist()
    msg.pi = body.pi.tolist()
    msg.physically_consistent = body.is_physically_consistent()
    msg.min_pseudo_inertia_eigenvalue = body.min_pseudo_inertia_eigenvalue
    return msg


def estimate_to_msg(estimate: Estimate, header: Header, converged: bool) -> InertialParameters:
    """An :class:`InertialParameters` message of an estimate."""
    msg = body_to_msg(estimate.body, header)
    msg.std = estimate.std.tolist()
    msg.wrench_offset = estimate.offset.tolist()
    msg.samples_used = int(round(estimate.samples))
    msg.condition_number = float(estimate.condition_number)
    msg.method = estimate.method
    msg.converged = converged
    return msg


def body_to_inertia_stamped(body: BodyParameters, header: Header) -> InertiaStamped:
    """``geometry_msgs/InertiaStamped``: mass, CoM and the tensor about the CoM."""
    c = body.com
    i = body.inertia_com
    inertia = Inertia(
        m=body.mass, com=Vector3(x=float(c[0]), y=float(c[1]), z=float(c[2])),
        ixx=float(i[0, 0]), ixy=float(i[0, 1]), ixz=float(i[0, 2]),
        iyy=float(i[1, 1]), iyz=float(i[1, 2]), izz=float(i[2, 2]),
    )
    return InertiaStamped(header=header, inertia=inertia)


def wrench_to_array(wrench: Wrench) -> NDArray[np.float64]:
    """``[fx, fy, fz, tx, ty, tz]`` of a ``geometry_msgs/Wrench``."""
    f, t = wrench.force, wrench.torque
    return np.array([f.x, f.y, f.z, t.x, t.y, t.z])


def array_to_wrench(values: NDArray[np.float64]) -> Wrench:
    """A ``geometry_msgs/Wrench`` from ``[fx, fy, fz, tx, ty, tz]``."""
    w = Wrench()
    w.force.x, w.force.y, w.force.z = (float(v) for v in values[:3])
    w.torque.x, w.torque.y, w.torque.z = (float(v) for v in values[3:])
    return w
