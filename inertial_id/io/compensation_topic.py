"""The applier's ``~/compensation`` topic in bags (inertial_id/msg/InertialParameters).

A bag recorded after a payload was applied to a driver that compensates its wrench (a UR)
holds the residual wrench; the applier's announcements on ``~/compensation`` say what the
driver subtracted and from when. :func:`read_announcements` reads them so that replay adds
that payload back, as the solver node does live
(:class:`~inertial_id.core.estimation.compensation.DriverCompensation`).
:func:`compensation_message` writes one (``inertial-id simulate --driver-payload``).

The message's definition comes from the package's ``msg/`` folder (the source tree, or
``share/inertial_id/msg`` of an installed package); a bag recorded by ROS carries its own.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from rosbags.highlevel import AnyReader
from rosbags.typesys import get_types_from_msg
from rosbags.typesys.store import Typestore

from inertial_id.core.estimation.compensation import Announcement
from inertial_id.io.cdr import stamp_parts

COMPENSATION = "inertial_id/msg/InertialParameters"
"""The ``~/compensation`` topic's type."""
TOPIC_SUFFIX = "compensation"
"""Topics of that type whose name ends so are announcements (``/applier/compensation``)."""


def _definition() -> str:
    """The text of ``InertialParameters.msg``: beside the package in a source tree, else in
    ``share/inertial_id/msg`` under a prefix of ``AMENT_PREFIX_PATH`` or this Python's."""
    name = Path("msg") / "InertialParameters.msg"
    places = [Path(__file__).resolve().parents[2] / name]
    prefixes = [p for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    prefixes.append(sys.prefix)
    places += [Path(p) / "share" / "inertial_id" / name for p in prefixes]
    for place in places:
        if place.is_file():
            return place.read_text()
    raise FileNotFoundError(f"{name} not found in {', '.join(map(str, places))}")


def register(typestore: Typestore) -> None:
    """Teach ``typestore`` the ``~/compensation`` message (once)."""
    if COMPENSATION not in typestore.types:
        typestore.register(get_types_from_msg(_definition(), COMPENSATION))


def compensation_message(typestore: Typestore, stamp: float, frame: str, method: str,
                         pi: NDArray[np.float64]) -> Any:
    """A rosbags ``inertial_id/msg/InertialParameters`` announcing ``method`` with ``pi``
    (10, in ``frame``) from ``stamp`` (s); the other fields zero."""
    register(typestore)
    t = typestore.types
    sec, nanosec = stamp_parts(stamp)
    header = t["std_msgs/msg/Header"](
        stamp=t["builtin_interfaces/msg/Time"](sec=sec, nanosec=nanosec), frame_id=frame)
    pi = np.asarray(pi, dtype=float)
    zeros = {6: np.zeros(6), 10: np.zeros(10), 3: np.zeros(3)}
    return t[COMPENSATION](
        header=header, mass=float(pi[0]),
        com=t["geometry_msgs/msg/Vector3"](x=0.0, y=0.0, z=0.0),
        inertia_com=zeros[6], pi=pi, std=zeros[10], wrench_offset=zeros[6],
        physically_consistent=True, min_pseudo_inertia_eigenvalue=0.0, samples_used=0,
        condition_number=0.0, method=method, converged=False, mass_converged=False,
        com_converged=False, inertia_converged=False, com_std=zeros[3],
        inertia_com_std=zeros[6], wrench_offset_std=zeros[6], covariance_type="",
        setup_error="")


def read_announcements(reader: AnyReader) -> list[Announcement]:
    """Every announcement on the bag's ``*compensation`` topics of type
    :data:`COMPENSATION`, in log-time order (few: one or two per apply)."""
    connections = [c for c in reader.connections
                   if c.msgtype == COMPENSATION and c.topic.endswith(TOPIC_SUFFIX)]
    if not connections:
        return []
    out = []
    for connection, _, raw in reader.messages(connections=connections):
        msg = reader.deserialize(raw, connection.msgtype)
        stamp = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
        out.append(Announcement(stamp, str(msg.method), str(msg.header.frame_id),
                                np.asarray(msg.pi, dtype=float)))
    return out
