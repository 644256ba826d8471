"""The ``main`` of every node executable: start one node, spin it until stopped, shut down.

It sits above :mod:`inertial_id.nodes.common` and :mod:`inertial_id.nodes.managed` (which
builds on ``common``): a node module imports :func:`run` from here, so neither of the two
imports the other back.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

from rclpy.executors import ExternalShutdownException
from rclpy.node import Node
from rclpy.utilities import remove_ros_args

from inertial_id.core.errors import InertialIdError
from inertial_id.nodes import stopping
from inertial_id.nodes.common import PipelineNode, init, make_executor, shut_down, spin
from inertial_id.nodes.managed import managed, managed_requested

ROS_VALUE_FLAGS = frozenset({"-r", "--remap", "--params-file", "--log-level", "--log-config-file",
                             "--log-file-name", "-e", "--enclave"})
"""ROS arguments that take the next argument as their value (not a flag of its own)."""
PARAMETER_FLAGS = ("-p", "--param")

SENSOR_FRAME_FLAG = "--sensor-frame"
"""Non-ROS argument ``--sensor-frame=FRAME``: the launch file's ``sensor_frame`` argument."""


def with_sensor_frame(argv: Sequence[str]) -> list[str]:
    """``argv`` with a non-empty ``--sensor-frame=FRAME`` among its non-ROS arguments turned
    into ``--ros-args -p sensor_frame:=FRAME`` at the end, which overrides the parameter
    files' value; an empty one (the launch file's default) leaves the files' value alone."""
    frames = [a.split("=", 1)[1] for a in remove_ros_args(list(argv))[1:]
              if a.startswith(SENSOR_FRAME_FLAG + "=")]
    kept = [a for a in argv if not a.startswith(SENSOR_FRAME_FLAG + "=")]
    if frames and frames[-1]:
        kept += ["--ros-args", "-p", f"sensor_frame:={frames[-1]}"]
    return kept


def parameter_rules(argv: Sequence[str]) -> list[str]:
    """The ``-p``/``--param`` rules among ``argv``'s ROS arguments, in their order, as a node's
    own arguments (``["--ros-args", "-p", "name:=value", ...]``; empty without any). rcl merges a
    ``-p`` value into the ``/**`` section of the parameter files, wherever that section first
    appeared, so a later file's ``/**/<node>`` section overrode it; a node's own arguments are
    applied after all the global ones (files included), so given again there a ``-p`` value
    wins over every file, whatever their order and sections. rcl parses the values, as it
    parses the global ones."""
    rules: list[str] = []
    in_ros = False
    items = iter(argv)
    for argument in items:
        if argument == "--ros-args":
            in_ros = True
        elif argument == "--":
            in_ros = False
        elif in_ros and argument in PARAMETER_FLAGS:
            value = next(items, None)
            if value is not None:
                rules += ["-p", value]
        elif in_ros and argument in ROS_VALUE_FLAGS:
            next(items, None)
    return ["--ros-args", *rules] if rules else []


def run(node_factory: Callable[..., Node | list[Node]],
        args: Sequence[str] | None = None) -> int:
    """Standard ``main``: init, spin one node (or the nodes ``node_factory`` gives, on one
    executor) until SIGINT/SIGTERM, shut down; exit code 0
    for a stop at any moment, 1 on a start-up error (one line). ``--managed`` (or
    ``--managed=true``) among the non-ROS arguments starts a pipeline node's lifecycle version
    (:mod:`inertial_id.nodes.managed`); ``--sensor-frame=FRAME`` sets ``sensor_frame``
    (:func:`with_sensor_frame`); ``-p`` values win over the parameter files
    (:func:`parameter_rules`)."""
    args = with_sensor_frame(sys.argv if args is None else args)
    try:
        wanted = managed_requested(remove_ros_args(args)[1:])
        if wanted and not (isinstance(node_factory, type)
                           and issubclass(node_factory, PipelineNode)):
            raise InertialIdError("--managed is for gatherer, kinematics and solver")
    except InertialIdError as exc:
        print(f"inertial_id: {exc}", flush=True)
        return 1
    if wanted:
        node_factory = managed(node_factory)
    init(args)
    nodes: list[Node] = []
    executor = None
    try:
        if stopping.requested():
            return 0
        rules = parameter_rules(args)
        made = node_factory(cli_args=rules) if rules else node_factory()
        nodes = made if isinstance(made, list) else [made]
        executor = make_executor()
        for node in nodes:
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
        try:
            shut_down(executor, nodes)
        finally:
            stopping.finished()
    return 0
