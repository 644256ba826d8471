"""Conversions between inertial_id messages and core objects (no logic beyond packing)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import (
    Inertia,
    InertiaStamped,
    Point,
    Quaternion,
    Vector3,
    Wrench,
    WrenchStamped,
)
from numpy.typing import NDArray
from rclpy.serialization import deserialize_message
from scipy.spatial.transform import Rotation
from sensor_msgs.msg import JointState
from std_msgs.msg import ColorRGBA, Header
from visualization_msgs.msg import Marker, MarkerArray

from inertial_id.core.errors import InertialIdError
from inertial_id.core.estimate import Estimate
from inertial_id.core.estimation.online_types import Verdicts
from inertial_id.core.parameters import BodyParameters, vector_from_symmetric
from inertial_id.core.samples import JointStateSample, SyncedSamples, WrenchSample
from inertial_id.core.shape import equivalent_box
from inertial_id.io.cdr import SENSOR_FIELDS, CdrDecoder, unpack_noise
from inertial_id.msg import InertialParameters, JointSamples, SensorSamples
from inertial_id.nodes.common import to_seconds

P = ParamSpec("P")
T = TypeVar("T")


class UndecodableError(InertialIdError):
    """Bytes that are no message of the expected type (any decoder's error, one type)."""

    drop_reason = "undecodable"


def _decoder(decode: Callable[P, T]) -> Callable[P, T]:
    """Turn whatever a decoder raises on bad bytes (``ValueError``, ``struct.error``,
    rclpy's ``RMWError``, ...) into :class:`UndecodableError`, so a subscription callback
    catches one type and no bytes can end a node."""

    @functools.wraps(decode)
    def wrapped(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return decode(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - any failure to decode is the same drop
            raise UndecodableError(f"undecodable message: {type(exc).__name__}: {exc}") from exc

    return wrapped


def _rows(values: object, width: int) -> NDArray[np.float64]:
    return np.asarray(values, dtype=float).reshape(-1, width)


def _times(stamps: list[Time]) -> NDArray[np.float64]:
    return np.array([to_seconds(s) for s in stamps])


@_decoder
def joint_state_from_bytes(raw: bytes, decoder: CdrDecoder) -> JointStateSample:
    """A serialised ``sensor_msgs/JointState`` (efforts included). Plain little-endian CDR is
    read by ``decoder``; any other encoding goes through rclpy. Bytes that are no JointState
    raise :class:`UndecodableError`."""
    if CdrDecoder.little_endian_cdr(raw):
        return decoder.joint_state(raw)
    msg = deserialize_message(raw, JointState)
    return JointStateSample(to_seconds(msg.header.stamp), tuple(msg.name),
                            np.asarray(msg.position, dtype=float),
                            np.asarray(msg.velocity, dtype=float),
                            np.asarray(msg.effort, dtype=float))


@_decoder
def wrench_from_bytes(raw: bytes, decoder: CdrDecoder) -> WrenchSample:
    """A serialised ``geometry_msgs/WrenchStamped``, decoded as
    :func:`joint_state_from_bytes` does."""
    if CdrDecoder.little_endian_cdr(raw):
        return decoder.wrench(raw)
    msg = deserialize_message(raw, WrenchStamped)
    return WrenchSample(to_seconds(msg.header.stamp), msg.header.frame_id,
                        wrench_to_array(msg.wrench))


@_decoder
def joint_samples_from_bytes(raw: bytes, decoder: CdrDecoder
                             ) -> tuple[SyncedSamples, tuple[str, ...], str, int, float, bool]:
    """A serialised :class:`JointSamples`: the batch (joints in the message's order), the joint
    names, the frame id, ``samples_before``, ``filter_span`` (s) and ``provisional``; decoded as
    :func:`joint_state_from_bytes` does."""
    if CdrDecoder.little_endian_cdr(raw):
        return decoder.joint_samples(raw)
    msg = deserialize_message(raw, JointSamples)
    n = len(msg.joint_names)
    batch = SyncedSamples(
        times=_times(msg.stamps),
        position=_rows(msg.position, n),
        velocity=_rows(msg.velocity, n),
        acceleration=_rows(msg.acceleration, n),
        wrench=_rows(msg.wrench, 6),
        wrench_raw=_rows(msg.wrench_raw, 6),
        twist=_rows(msg.twist, 6) if len(msg.twist) else None,
        proper_acceleration=(_rows(msg.proper_acceleration, 6)
                             if len(msg.proper_acceleration) else None),
        acceleration_noise=unpack_noise(msg.acceleration_noise, len(msg.stamps)),
        angular_products=(_rows(msg.angular_products, 6) if len(msg.angular_products)
                          else None),
    )
    return (batch, tuple(msg.joint_names), msg.header.frame_id, int(msg.samples_before),
            float(msg.filter_span), bool(msg.provisional))


@_decoder
def sensor_samples_from_bytes(raw: bytes, decoder: CdrDecoder
                              ) -> tuple[dict[str, NDArray[np.float64] | float | None], str, int,
                                         bool]:
    """A serialised :class:`SensorSamples`: ``times`` (N,), the (N, 6) arrays named in
    :data:`~inertial_id.io.cdr.SENSOR_FIELDS`, ``acceleration_noise`` and ``filter_span`` (the
    keyword arguments of :meth:`OnlineEstimator.add`), the frame id, ``samples_before`` and
    ``provisional``;
    decoded as :func:`joint_samples_from_bytes` does."""
    if CdrDecoder.little_endian_cdr(raw):
        return decoder.sensor_samples(raw)
    msg = deserialize_message(raw, SensorSamples)
    samples: dict[str, NDArray[np.float64] | None] = {"times": _times(msg.stamps)}
    samples.update({name: _rows(getattr(msg, name), 6) for name in SENSOR_FIELDS})
    samples["acceleration_noise"] = unpack_noise(msg.acceleration_noise, len(msg.stamps))
    samples["angular_products"] = (_rows(msg.angular_products, 6)
                                   if len(msg.angular_products) else None)
    samples["filter_span"] = float(msg.filter_span)
    return samples, msg.header.frame_id, int(msg.samples_before), bool(msg.provisional)


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


UNKNOWN = -1.0
"""A std or condition number that is not known (a saved payload's, a direction the data do not
determine: inf or NaN in the estimate) as published: no message field is ever non-finite."""


def _known(values: NDArray[np.float64]) -> list[float]:
    """``values`` with every non-finite entry :data:`UNKNOWN`."""
    return np.where(np.isfinite(values), values, UNKNOWN).tolist()


def estimate_to_msg(estimate: Estimate, header: Header, verdicts: Verdicts,
                    setup_error: str = "") -> InertialParameters:
    """An :class:`InertialParameters` message of an estimate, its std and verdicts; with a
    ``setup_error`` nothing is marked converged. A std or the condition number that is not
    known is :data:`UNKNOWN`."""
    msg = body_to_msg(estimate.body, header)
    msg.std = _known(estimate.std)
    msg.com_std = _known(estimate.com_std)
    msg.inertia_com_std = _known(estimate.inertia_com_std)
    msg.wrench_offset = estimate.offset.tolist()
    msg.wrench_offset_std = _known(estimate.offset_std)
    msg.covariance_type = estimate.covariance_type
    msg.samples_used = int(round(estimate.samples))
    msg.condition_number = _known(np.array([estimate.condition_number]))[0]
    msg.method = estimate.method
    ok = not setup_error
    msg.converged = ok and verdicts.payload
    msg.mass_converged = ok and verdicts.mass
    msg.com_converged = ok and verdicts.com
    msg.inertia_converged = ok and verdicts.inertia
    msg.setup_error = setup_error
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


MARKER_NAMESPACE = "payload"
SHOWN_COLOURS = {"com": (0.9, 0.1, 0.1, 0.9), "box": (1.0, 0.55, 0.0, 0.5),
                 "text": (1.0, 1.0, 1.0, 1.0)}
GREYED = (0.5, 0.5, 0.5, 0.25)
MIN_COM_DIAMETER = 0.01  # m


def _marker(header: Header, marker_id: int, kind: int, colour: tuple[float, ...]) -> Marker:
    marker = Marker(header=header, ns=MARKER_NAMESPACE, id=marker_id, type=kind,
                    action=Marker.ADD)
    marker.color = ColorRGBA(r=colour[0], g=colour[1], b=colour[2], a=colour[3])
    marker.pose.orientation.w = 1.0
    return marker


def estimate_to_markers(estimate: Estimate, header: Header, shown: bool) -> MarkerArray:
    """RViz markers of a payload estimate, in the sensor frame of ``header``.

    id 0: the CoM as a sphere of diameter 4 std of the CoM (its 2-std radius; 1 cm at least);
    id 1: the equivalent box (:func:`~inertial_id.core.shape.equivalent_box`: the uniform box
    with the estimate's mass and inertia about the CoM), centred on the CoM along the
    principal axes; id 2: a text ``mass ± std kg`` above the CoM. In colour when ``shown``
    (converged and no contact), else grey and translucent.
    """
    body = estimate.body
    centre = Point(x=float(body.com[0]), y=float(body.com[1]), z=float(body.com[2]))
    colours = SHOWN_COLOURS if shown else dict.fromkeys(SHOWN_COLOURS, GREYED)
    com = _marker(header, 0, Marker.SPHERE, colours["com"])
    com.pose.position = centre
    diameter = max(MIN_COM_DIAMETER, 4.0 * float(np.max(estimate.com_std)))
    com.scale = Vector3(x=diameter, y=diameter, z=diameter)
    box = _marker(header, 1, Marker.CUBE, colours["box"])
    shape = equivalent_box(body.mass, body.inertia_com)
    x, y, z, w = Rotation.from_matrix(shape.rotation).as_quat()
    box.pose.position = centre
    box.pose.orientation = Quaternion(x=float(x), y=float(y), z=float(z), w=float(w))
    box.scale = Vector3(x=float(shape.size[0]), y=float(shape.size[1]),
                        z=float(shape.size[2]))
    text = _marker(header, 2, Marker.TEXT_VIEW_FACING, colours["text"])
    text.pose.position = Point(x=centre.x, y=centre.y,
                               z=centre.z + 0.6 * float(shape.size.max()) + 0.02)
    text.scale.z = 0.03
    text.text = f"{body.mass:.3f} ± {estimate.std[0]:.3f} kg"
    return MarkerArray(markers=[com, box, text])


def clear_markers(header: Header) -> MarkerArray:
    """Removes every marker :func:`estimate_to_markers` drew (no estimate any more)."""
    return MarkerArray(markers=[Marker(header=header, ns=MARKER_NAMESPACE,
                                       action=Marker.DELETEALL)])


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
