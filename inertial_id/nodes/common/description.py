"""The robot's URDF for a node, from a parameter or the latched ``robot_description`` topic
(:class:`RobotDescription`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rclpy.node import Node
from std_msgs.msg import String

from inertial_id.core.errors import InertialIdError
from inertial_id.nodes.common.qos import latched_qos


class RobotDescription:
    """Gets the URDF for a node: the ``urdf_path`` parameter, else the ``robot_description``
    parameter, else the latched ``robot_description`` topic (calls ``on_ready`` once)."""

    def __init__(self, node: Node, values: dict[str, Any],
                 on_ready: Callable[[str], None]) -> None:
        self._node = node
        self._on_ready = on_ready
        self._subscription = None
        path, text = values["urdf_path"], values["robot_description"]
        if path or text:
            on_ready(path or text)
        else:
            node.get_logger().info("waiting for the URDF on the robot_description topic")
            self._subscription = node.create_subscription(
                String, "robot_description", self._received, latched_qos()
            )

    def _received(self, msg: String) -> None:
        if self._subscription is None:
            return
        try:
            self._on_ready(msg.data)
        except InertialIdError as exc:
            self._node.get_logger().error(f"robot_description rejected: {exc}")
            return
        self._node.destroy_subscription(self._subscription)
        self._subscription = None
