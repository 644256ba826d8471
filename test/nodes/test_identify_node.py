"""The identify node in this process: a goal waits ``joint_state_wait`` for the arm's joint
state (a goal sent as the nodes start can come before the node has found the publisher), plans
from the first one that comes, and stops with ``no_joint_state`` when none does."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import rclpy
from rclpy.action import ActionClient
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState

from inertial_id.action import Identify as IdentifyAction
from inertial_id.core.kinematics import SensorKinematics
from inertial_id.core.simulation import BUNDLED_HOME, BUNDLED_SENSOR_FRAME, bundled_urdf_path
from inertial_id.nodes.common import sensor_qos
from inertial_id.nodes.identify import Identify

WAIT = 3.0  # s: joint_state_wait


@pytest.fixture
def world() -> Iterator[tuple[Node, SingleThreadedExecutor]]:
    context = rclpy.Context()
    rclpy.init(context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(Identify(context=context, namespace="/identify_wait", parameter_overrides=[
        Parameter("urdf_path", value=bundled_urdf_path()),
        Parameter("joint_state_wait", value=WAIT), Parameter("budget", value=20)]))
    probe = Node("identify_wait_probe", namespace="/identify_wait", context=context)
    executor.add_node(probe)
    try:
        yield probe, executor
    finally:
        executor.shutdown()
        rclpy.shutdown(context=context)


def _goal(probe: Node, executor: SingleThreadedExecutor, publish_after: float | None,
          cancel_after: float | None = None) -> tuple[IdentifyAction.Result, float]:
    """A dry-run goal; joint states at the bundled home pose from ``publish_after`` s after it
    was sent (None: never), the goal cancelled ``cancel_after`` s after it was sent (None:
    not). The result and the s it took."""
    client = ActionClient(probe, IdentifyAction, "identify/identify")
    joints = probe.create_publisher(JointState, "joint_states", sensor_qos(10))
    names = SensorKinematics(bundled_urdf_path(), BUNDLED_SENSOR_FRAME).joint_names
    deadline = time.monotonic() + 10.0
    while not client.server_is_ready() and time.monotonic() < deadline:
        executor.spin_once(timeout_sec=0.05)
    start = time.monotonic()
    sent = client.send_goal_async(IdentifyAction.Goal(dry_run=True, max_duration=4.0))
    result = cancelled = None
    while time.monotonic() - start < WAIT + 30.0:
        executor.spin_once(timeout_sec=0.01)
        if publish_after is not None and time.monotonic() - start > publish_after:
            joints.publish(JointState(name=list(names), position=list(BUNDLED_HOME)))
        if result is None and sent.done():
            result = sent.result().get_result_async()
        if (cancel_after is not None and cancelled is None and sent.done()
                and time.monotonic() - start > cancel_after):
            cancelled = sent.result().cancel_goal_async()
        if result is not None and result.done():
            return result.result().result, time.monotonic() - start
    pytest.fail("no Identify result")


def test_a_goal_waits_for_the_first_joint_state_and_plans_from_it(world) -> None:
    result, took = _goal(*world, publish_after=1.0)
    assert result.stopped_because == "dry_run" and result.success, result.message
    assert took > 1.0
    assert result.start == pytest.approx(list(BUNDLED_HOME))


def test_without_a_joint_state_a_goal_stops_with_no_joint_state(world) -> None:
    result, took = _goal(*world, publish_after=None)
    assert result.stopped_because == "no_joint_state" and not result.success
    assert result.message == f"no joint state of every model joint in the last {WAIT:g} s"
    assert took >= WAIT


def test_a_goal_cancelled_while_it_waits_ends_there_and_sends_nothing(world) -> None:
    """Cancelled while waiting, it ends at once, even though joint states come after."""
    result, took = _goal(*world, publish_after=1.0, cancel_after=0.5)
    assert result.stopped_because == "canceled" and not result.success, result.message
    assert not result.motion.points  # never planned
    assert took < WAIT
