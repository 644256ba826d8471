"""The ``main`` of every node executable: start one node, spin it until stopped, shut down.

It sits above :mod:`inertial_id.nodes.common` and :mod:`inertial_id.nodes.managed` (which
builds on ``common``): a node module imports :func:`run` from here, so neither of the two
imports the other back.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

import rclpy
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node
from rclpy.utilities import remove_ros_args

from inertial_id.core.errors import InertialIdError
from inertial_id.nodes import stopping
from inertial_id.nodes.common import PipelineNode, init, make_executor, spin
from inertial_id.nodes.managed import managed, managed_requested


def run(node_factory: Callable[[], Node], args: Sequence[str] | None = None) -> int:
    """Standard ``main``: init, spin one node until SIGINT/SIGTERM, shut down; exit code 0
    for a stop at any moment, 1 on a start-up error (one line). ``--managed`` (or
    ``--managed=true``) among the non-ROS arguments starts a pipeline node's lifecycle version
    (:mod:`inertial_id.nodes.managed`)."""
    try:
        wanted = managed_requested(remove_ros_args(list(sys.argv if args is None else args))[1:])
        if wanted and not (isinstance(node_factory, type)
                           and issubclass(node_factory, PipelineNode)):
            raise InertialIdError("--managed is for gatherer, kinematics and solver")
    except InertialIdError as exc:
        print(f"inertial_id: {exc}", flush=True)
        return 1
    if wanted:
        node_factory = managed(node_factory)
    init(args)
    node = executor = None
    try:
        if stopping.requested():
            return 0
        node = node_factory()
        executor = make_executor()
        executor.add_node(node)
        spin(executor)
    except InertialIdError as exc:
        if stopping.requested():  # a stop during start-up, e.g. while waiting for a file
            return 0
        print(f"inertial_id: {exc}", flush=True)
        return 1
    except (KeyboardInterrupt, ExternalShutdownException):
        pass  # a second signal, or the context shut down by someone else
    finally:
        if executor is not None:
            executor.shutdown(timeout_sec=1.0)
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
    return 0
