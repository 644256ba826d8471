"""pipeline: gatherer, kinematics and solver in one process, for robots that save CPU.

The three nodes keep their names, parameters, topics, services and diagnostics (a parameter
file's ``/**/gatherer``, ``/**/kinematics`` and ``/**/solver`` sections apply as they do to
the separate executables), and run on one executor. Their batches go from node to node by a
direct call, decoded (:class:`~inertial_id.nodes.common.BatchLink`): no serialisation and
no DDS hop between them, and ``joint_samples`` and ``sensor_samples`` are published only
while something else subscribes to them. ``ros2 launch inertial_id inertial_id.launch.xml
one_process:=true`` starts it; ``ros2 run inertial_id pipeline`` too. The lifecycle version
(``--managed``) is for the separate executables.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.utilities import remove_ros_args

from inertial_id.nodes.gatherer import Gatherer
from inertial_id.nodes.kinematics import Kinematics
from inertial_id.nodes.runner import run
from inertial_id.nodes.solver import Solver

URDF_FLAG = "--urdf-path"
"""Non-ROS argument ``--urdf-path=PATH``: the gatherer's and the kinematics' ``urdf_path``
(a ``-p urdf_path:=`` would reach the solver too, which has no such parameter); empty:
the parameter file's, or ``robot_description``."""


def link(gatherer: Gatherer, kinematics: Kinematics, solver: Solver) -> None:
    """Hand each node's batches straight to the next one (same process)."""
    gatherer.batches.link(kinematics.take_samples, kinematics.subscription, kinematics)
    kinematics.batches.link(solver.take_samples, solver.subscription, solver)


def pipeline_nodes(overrides: Sequence[Parameter] = (),
                   cli_args: Sequence[str] | None = None) -> list[Node]:
    """The three nodes, linked (``overrides``: parameters of the gatherer and kinematics,
    e.g. ``urdf_path``; ``cli_args``: every node's own ROS arguments, the ``-p`` rules given
    again so that they win over the parameter files, :func:`~inertial_id.nodes.runner.
    parameter_rules`)."""
    args = None if cli_args is None else list(cli_args)
    gatherer = Gatherer(parameter_overrides=list(overrides), cli_args=args)
    kinematics = Kinematics(parameter_overrides=list(overrides), cli_args=args)
    solver = Solver(cli_args=args)
    link(gatherer, kinematics, solver)
    return [gatherer, kinematics, solver]


def main(args: list[str] | None = None) -> int:
    """Run the three nodes in one process (``--urdf-path=PATH``: :data:`URDF_FLAG`)."""
    argv = list(sys.argv if args is None else args)
    paths = [a.split("=", 1)[1] for a in remove_ros_args(argv)[1:]
             if a.startswith(URDF_FLAG + "=")]
    kept = [a for a in argv if not a.startswith(URDF_FLAG + "=")]
    overrides = [Parameter("urdf_path", value=paths[-1])] if paths and paths[-1] else []
    return run(lambda cli_args=None: pipeline_nodes(overrides, cli_args), kept)
