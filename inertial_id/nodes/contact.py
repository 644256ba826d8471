"""Publishing the contact monitor's output: ``~/contact`` (inertial_id/ContactAnomaly) and
``~/external_wrench`` (geometry_msgs/WrenchStamped), every ``decimation``-th sample and at
every contact change, each built only while someone subscribes to it. Shared by the F/T
payload mode and ``payload_from_torques``."""

from __future__ import annotations

import numpy as np
from geometry_msgs.msg import WrenchStamped
from numpy.typing import NDArray
from rclpy.node import Node
from std_msgs.msg import Header

from inertial_id.msg import ContactAnomaly
from inertial_id.nodes.common import FiniteGuard, to_stamp
from inertial_id.nodes.conversions import array_to_wrench


class ContactPublisher:
    """Decimated ContactAnomaly and external wrench messages of a node (see module doc)."""

    def __init__(self, node: Node, decimation: int) -> None:
        self.decimation = max(1, int(decimation))
        self._since = 0
        self._was_in_contact = False
        self.guard = FiniteGuard()  # a non-finite T^2 or residual is withheld and counted
        self.contact_pub = node.create_publisher(ContactAnomaly, "~/contact", 100)
        self.external_pub = node.create_publisher(WrenchStamped, "~/external_wrench", 100)

    def publish(self, frame_id: str, times: NDArray[np.float64], wrench: NDArray[np.float64],
                t2: NDArray[np.float64], contact: NDArray[np.bool_], threshold: float,
                confidence: float) -> None:
        """One batch of N samples: stamps (N,), the external wrench (N, 6) in ``frame_id``,
        ``T^2`` and contact flags (N,), the threshold (inf or NaN while training)."""
        changes = np.flatnonzero(np.diff(np.concatenate(([self._was_in_contact], contact))))
        due = set(changes.tolist())
        n = times.size
        first = (self.decimation - 1 - self._since) % self.decimation
        due.update(range(first, n, self.decimation))
        self._since = (self._since + n) % self.decimation
        self._was_in_contact = bool(contact[-1])
        contact_read = self.contact_pub.get_subscription_count() > 0
        external_read = self.external_pub.get_subscription_count() > 0
        if not (contact_read or external_read):
            return
        trained = bool(np.isfinite(threshold))
        for k in sorted(due):
            header = Header(stamp=to_stamp(float(times[k])), frame_id=frame_id)
            residual = array_to_wrench(wrench[k])
            if contact_read:
                self.guard.publish(self.contact_pub, ContactAnomaly(
                    header=header, monitor_trained=trained, t2=float(t2[k]),
                    threshold=float(threshold) if trained else 0.0, confidence=confidence,
                    contact=bool(contact[k]), residual=residual))
            if external_read:
                self.guard.publish(self.external_pub,
                                   WrenchStamped(header=header, wrench=residual))
