"""Identification on demand between processes: the simulator (serving the test copy of
control_msgs' FollowJointTrajectory), gatherer, kinematics, solver and the identify node, each
its own process; this test is the Identify action's client.

A plan that would leave its box is refused before anything reaches the controller (its
action's status topic never lists a goal and the arm stays where it stands); a dry run stops
after ``~/planned_path``; a push on the payload during the motion makes the identify node
cancel the controller's goal (the push comes 8 s after the motion began, the solver's
inertia convergence bound is set out of reach, so only the push, or a set-up error, can stop
the motion early).
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rclpy
from action_msgs.msg import GoalStatus, GoalStatusArray
from interface_packages import build
from rclpy.action import ActionClient
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from sensor_msgs.msg import JointState
from visualization_msgs.msg import Marker

from inertial_id.action import Identify
from inertial_id.core.simulation import BUNDLED_HOME, bundled_urdf_path
from inertial_id.msg import InertialParameters
from inertial_id.nodes.common import latched_qos, sensor_qos

BIN = Path(sys.executable).parent
CONTACT = (8.0, 1.5, 0.0, 20.0, 0.0)  # s after the motion began, s, N along y (sensor frame)
STATUS = "/joint_trajectory_controller/follow_joint_trajectory/_action/status"


def _start(executable: str, env: dict[str, str], *params: str) -> subprocess.Popen[bytes]:
    args = [str(BIN / f"inertial_id_{executable}"), "--ros-args"]
    for p in params:
        args += ["-p", p]
    return subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


@pytest.fixture(scope="module")
def processes(ros_env: dict[str, str]) -> Iterator[list[subprocess.Popen[bytes]]]:
    env = build().environment(ros_env)
    urdf = f"urdf_path:={bundled_urdf_path()}"
    started = [
        _start("simulator", env, "follow_trajectory:=true", "contacts_from_motion:=true",
               f"contacts:=[{', '.join(str(float(v)) for v in CONTACT)}]"),
        _start("gatherer", env, urdf),
        _start("kinematics", env, urdf),
        _start("solver", env, "converged_inertia_std:=1e-12"),
        _start("identify", env, urdf, "budget:=60"),
    ]
    yield started
    for process in started:
        process.terminate()
    for process in started:
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class Client(Node):
    """The Identify client; records the controller's goal statuses, joint states, the
    planned path and estimates."""

    def __init__(self, context: rclpy.Context) -> None:
        super().__init__("identify_probe", context=context)
        self.client = ActionClient(self, Identify, "/identify/identify")
        self.statuses: dict[bytes, int] = {}
        self.positions: list[np.ndarray] = []
        self.markers: list[Marker] = []
        self.estimates: list[InertialParameters] = []
        self.create_subscription(GoalStatusArray, STATUS, self._status, 100)
        self.create_subscription(JointState, "/joint_states",
                                 lambda m: self.positions.append(np.array(m.position)),
                                 sensor_qos(100))
        self.create_subscription(Marker, "/identify/planned_path", self.markers.append,
                                 latched_qos())
        self.create_subscription(InertialParameters, "/solver/parameters",
                                 self.estimates.append, 10)

    def _status(self, msg: GoalStatusArray) -> None:
        for status in msg.status_list:
            self.statuses[bytes(status.goal_info.goal_id.uuid)] = status.status


@pytest.fixture(scope="module")
def client(processes: list[subprocess.Popen[bytes]]) -> Iterator[tuple[Client, Any]]:
    context = rclpy.Context()
    rclpy.init(context=context)
    node = Client(context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    try:
        _spin_until(executor, lambda: bool(node.estimates) and bool(node.positions)
                    and node.client.server_is_ready(), 120.0, processes,
                    "no estimate, no joint state here or no identify server")
        yield node, executor
    finally:
        node.destroy_node()
        rclpy.shutdown(context=context)


def _spin_until(executor: SingleThreadedExecutor, done: Any, timeout: float,
                processes: list[subprocess.Popen[bytes]], what: str) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline or any(p.poll() is not None for p in processes):
            outputs = [p.stdout.read1(20000).decode(errors="replace") if p.poll() is not None
                       and p.stdout else "" for p in processes]
            pytest.fail(f"{what}; exited: {[p.poll() for p in processes]} {outputs}")
        executor.spin_once(timeout_sec=0.05)


def _identify(client: tuple[Client, Any], goal: Identify.Goal, timeout: float,
              processes: list[subprocess.Popen[bytes]]) -> Identify.Result:
    node, executor = client
    sent = node.client.send_goal_async(goal)
    _spin_until(executor, sent.done, 10.0, processes, "the goal was not answered")
    assert sent.result().accepted
    result = sent.result().get_result_async()
    _spin_until(executor, result.done, timeout, processes, "no Identify result")
    return result.result().result


def test_a_plan_that_leaves_its_box_is_refused_before_anything_is_sent(
        client: tuple[Client, Any], processes: list[subprocess.Popen[bytes]]) -> None:
    node, _ = client
    goal = Identify.Goal(use_box=True, box_min=[-0.2, -0.2, -0.2], box_max=[0.2, 0.2, 0.2])
    result = _identify(client, goal, 60.0, processes)
    assert result.stopped_because == "refused" and not result.success
    assert "leaves the box" in result.message
    assert node.markers and node.markers[-1].color.r > 0.5  # the refused path, in red
    dry = _identify(client, Identify.Goal(dry_run=True, max_duration=6.0), 60.0, processes)
    assert dry.success and dry.stopped_because == "dry_run", dry.message
    assert dry.duration == pytest.approx(6.0) and len(dry.motion.points) > 100
    assert 1.0 < dry.condition_number < dry.random_condition_number
    assert not node.statuses  # the controller never got a goal
    np.testing.assert_allclose(node.positions[-1], BUNDLED_HOME, atol=1e-3)  # never moved


def test_a_contact_or_set_up_error_during_the_motion_cancels_the_controllers_goal(
        client: tuple[Client, Any], processes: list[subprocess.Popen[bytes]]) -> None:
    node, _ = client
    result = _identify(client, Identify.Goal(stay=True), 60.0, processes)
    # The push is flagged by the T^2 monitor (contact) or, when the set-up check sees the
    # unexplained wrench first, as a set-up error naming it; between loaded processes the set-up
    # check has also named a wrench time offset of 7-21 ms early in the motion (not seen in
    # one process). Seen in 6 runs: 1 contact, 2 pushes as set-up errors, 2 time offsets.
    # Each must cancel the controller's goal while the arm moves and keep every node up.
    assert result.stopped_because in ("contact", "setup_error"), (
        result.stopped_because, result.message, result.executed)
    if result.stopped_because == "contact":
        assert result.executed > CONTACT[0] - 0.5  # not before the push
    assert 0.0 < result.executed < result.duration
    _spin_until(client[1], lambda: GoalStatus.STATUS_CANCELED in node.statuses.values(), 10.0,
                processes, "the controller's goal was not cancelled")  # status after result
    assert list(node.statuses.values()) == [GoalStatus.STATUS_CANCELED]
    moved = np.ptp(np.array(node.positions), axis=0)
    assert np.all(moved > 0.01)  # the arm did move before the push stopped it
    assert all(p.poll() is None for p in processes)
