"""The pipeline's batches between its own nodes (``joint_samples``, ``sensor_samples``):
published on their topic, and handed straight to the next node, as the values its decoder
would give, when both run in one process (:class:`BatchLink`,
:mod:`inertial_id.nodes.pipeline`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rclpy.node import Node
from rclpy.subscription import Subscription

from inertial_id.nodes.common.qos import pipeline_qos

Receiver = Callable[[Any], None]
"""A linked node's callback for a decoded batch (what its subscription's decoder gives)."""


class BatchLink:
    """A batch topic's publishing side (reliable, :func:`pipeline_qos`).

    Unlinked, :meth:`publish` publishes every batch. Once :meth:`link` gave it the next node's
    callback (that node's own subscription to the topic removed), a batch goes to that
    callback directly, decoded, with no serialisation round trip or DDS hop, and is
    serialised for the topic only while something else subscribes to it (a probe, ``ros2
    topic echo``, a recorder)."""

    def __init__(self, node: Node, msg_type: type, topic: str) -> None:
        self.publisher = node.create_publisher(msg_type, topic, pipeline_qos())
        self.receivers: list[Receiver] = []

    def link(self, receiver: Receiver, subscription: Subscription, owner: Node) -> None:
        """Hand batches to ``receiver`` directly, and drop ``owner``'s ``subscription`` to
        the topic (it would receive each batch a second time)."""
        owner.destroy_subscription(subscription)
        self.receivers.append(receiver)

    def publish(self, encode: Callable[[], bytes], decoded: Any) -> None:
        """One batch: ``decoded`` (the values the receiver's decoder gives for the bytes
        ``encode()`` returns) to the linked callbacks and, serialised, to the topic when
        anyone subscribes to it."""
        if not self.receivers or self.publisher.get_subscription_count():
            self.publisher.publish(encode())
        for receiver in self.receivers:
            receiver(decoded)
