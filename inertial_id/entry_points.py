"""The console entry points: ``inertial-id`` and the node executables (``inertial_id_solver``,
``ros2 run inertial_id solver``, ...).

Each installs the stop handlers (:mod:`inertial_id.nodes.stopping`) before it imports rclpy,
pinocchio and cvxpy, so a stop while they load is a clean stop too. ``--help`` (``-h``) on a
node executable prints the node's parameters from the table (:mod:`inertial_id.params.table`)
and exits 0 without starting the node.
"""

from __future__ import annotations

import sys
import textwrap
from importlib import import_module

from inertial_id.nodes import stopping

RUN_UNTIL_STOPPED = ("play", "demo", "replay")
"""``inertial-id`` commands that run until stopped: their handlers go in before the imports."""

UNMANAGED = ("simulator", "pipeline", "identify")
"""Node executables without a lifecycle version (``--managed``)."""

PIPELINE = ("gatherer", "kinematics", "solver")
"""The nodes the ``pipeline`` executable runs in one process."""

HELP_FLAGS = ("-h", "--help")
"""Non-ROS arguments of a node executable that print :func:`node_help` instead of starting."""


def node_help(node: str) -> str:
    """The help text of the ``node`` executable: how to start it and its parameters."""
    from inertial_id.params.spec import parameter_help
    from inertial_id.params.table import NODE_PARAMS

    managed = "" if node in UNMANAGED else " [--managed]"
    nodes = PIPELINE if node == "pipeline" else (node,)
    what = ("gatherer, kinematics and solver nodes in one process (one executor; their "
            "batches passed by direct calls). Each node's" if node == "pipeline"
            else f"inertial_id {node} node. Its")
    about = (f"The {what} parameters come from -p or a parameter file's "
             f"/**/{'<node>' if node == 'pipeline' else node}: ros__parameters: section; a "
             "name it does not have stops it with an error. 'live' parameters can be changed "
             "while it runs (ros2 param set), the others need a restart.")
    lines = [f"usage: ros2 run inertial_id {node}{managed} "
             "[--ros-args -p NAME:=VALUE --params-file FILE ...]", "",
             *textwrap.wrap(about, 92)]
    if managed:
        lines += ["", "options:",
                  "  --managed  start the lifecycle node, unconfigured (--managed=true|false)"]
    for name in nodes:
        lines += ["", f"{name} parameters:" if len(nodes) > 1 else "parameters:",
                  parameter_help(NODE_PARAMS[name])]
    return "\n".join(lines)


def main(node: str) -> int:
    """Entry point of the node executables: the stop handlers first (stops bounded in
    time; a stop while the modules load ends the process at once), then the help text
    (:func:`node_help`) or the node module."""
    stopping.install(bounded=True)
    with stopping.ending_at_once():  # a stop while the modules load ends the process then
        from rclpy.utilities import remove_ros_args

        if any(flag in HELP_FLAGS for flag in remove_ros_args(sys.argv)[1:]):
            print(node_help(node))
            return 0
        module = import_module(f"inertial_id.nodes.{node}")
    return module.main()


def cli() -> int:
    """Entry point of ``inertial-id``: for the commands that run until stopped, the handlers
    first (a stop while numpy, pinocchio and rclpy load is then a clean stop, not a kill);
    the others keep Python's Ctrl-C."""
    if len(sys.argv) > 1 and sys.argv[1] in RUN_UNTIL_STOPPED:
        stopping.install()
    from inertial_id.tools.cli import main as cli_main

    return cli_main()


def gatherer() -> int:
    """``inertial_id_gatherer``."""
    return main("gatherer")


def kinematics() -> int:
    """``inertial_id_kinematics``."""
    return main("kinematics")


def solver() -> int:
    """``inertial_id_solver``."""
    return main("solver")


def pipeline() -> int:
    """``inertial_id_pipeline``: gatherer, kinematics and solver in one process."""
    return main("pipeline")


def simulator() -> int:
    """``inertial_id_simulator``."""
    return main("simulator")


def applier() -> int:
    """``inertial_id_applier``."""
    return main("applier")


def identify() -> int:
    """``inertial_id_identify``."""
    return main("identify")
