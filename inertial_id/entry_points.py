"""The console entry points: ``inertial-id`` and the node executables (``inertial_id_solver``,
``ros2 run inertial_id solver``, ...).

Each installs the stop handlers (:mod:`inertial_id.nodes.stopping`) before it imports rclpy,
pinocchio and cvxpy, so a stop while they load is a clean stop too.
"""

from __future__ import annotations

import sys
from importlib import import_module

from inertial_id.nodes import stopping

RUN_UNTIL_STOPPED = ("play", "demo", "replay")
"""``inertial-id`` commands that run until stopped: their handlers go in before the imports."""


def main(node: str) -> int:
    """Entry point of the node executables: handlers first (stops bounded in time), then the
    node module."""
    stopping.install(bounded=True)
    return import_module(f"inertial_id.nodes.{node}").main()


def cli() -> int:
    """Entry point of ``inertial-id``: for the commands that run until stopped, the handlers
    first (a stop while numpy, pinocchio and rclpy load is then a clean stop, not a kill);
    the others keep Python's Ctrl-C."""
    if len(sys.argv) > 1 and sys.argv[1] in RUN_UNTIL_STOPPED:
        stopping.install()
    from inertial_id.cli import main as cli_main

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


def simulator() -> int:
    """``inertial_id_simulator``."""
    return main("simulator")


def applier() -> int:
    """``inertial_id_applier``."""
    return main("applier")
