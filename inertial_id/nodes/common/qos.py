"""The QoS profiles of the nodes' topics: sensor data, the pipeline's own batches, latched
topics.
"""

from __future__ import annotations

from rclpy.qos import (
    DurabilityPolicy,
    HistoryPolicy,
    QoSProfile,
    ReliabilityPolicy,
)


def sensor_qos(depth: int) -> QoSProfile:
    """Sensor-data QoS (best effort, volatile) with a queue deep enough for 1 kHz bursts."""
    return QoSProfile(
        history=HistoryPolicy.KEEP_LAST,
        depth=depth,
        reliability=ReliabilityPolicy.BEST_EFFORT,
        durability=DurabilityPolicy.VOLATILE,
    )


def pipeline_qos(depth: int = 100) -> QoSProfile:
    """Reliable QoS for the batches passed between the pipeline's own nodes."""
    return QoSProfile(
        history=HistoryPolicy.KEEP_LAST, depth=depth, reliability=ReliabilityPolicy.RELIABLE
    )


def latched_qos() -> QoSProfile:
    """Transient-local QoS, as robot_state_publisher uses for ``robot_description``."""
    return QoSProfile(
        history=HistoryPolicy.KEEP_LAST,
        depth=1,
        reliability=ReliabilityPolicy.RELIABLE,
        durability=DurabilityPolicy.TRANSIENT_LOCAL,
    )
