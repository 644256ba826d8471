"""The simulator's trajectory controller: serves ``control_msgs/action/FollowJointTrajectory``
(the interface of ros2_control's joint_trajectory_controller) and makes the simulated arm
(:class:`~inertial_id.core.on_demand.tracking.TrackedArm`) follow each goal's points.

A goal must name every joint of the arm (in any order). A new goal replaces the running one
(which aborts), a cancel stops the arm within ``STOP_TIME`` s; a goal succeeds once the arm has
reached its last point. ``goals`` counts what was received, by outcome.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.node import Node
from rclpy.task import Future

from inertial_id.core.errors import InertialIdError
from inertial_id.core.on_demand.path import JointPath
from inertial_id.core.on_demand.tracking import TrackedArm
from inertial_id.nodes.requests import service_type

FOLLOW_JOINT_TRAJECTORY = "control_msgs/action/FollowJointTrajectory"


def path_from_msg(trajectory: Any, joint_names: list[str]) -> JointPath:
    """A ``trajectory_msgs/JointTrajectory`` as a :class:`JointPath` in ``joint_names``'
    order; missing velocities and accelerations are zeros."""
    given = list(trajectory.joint_names)
    if sorted(given) != sorted(joint_names):
        raise InertialIdError(f"the goal's joints {given} are not the arm's {joint_names}")
    order = [given.index(n) for n in joint_names]
    if not trajectory.points:
        raise InertialIdError("the goal has no points")
    times = np.array([p.time_from_start.sec + 1e-9 * p.time_from_start.nanosec
                      for p in trajectory.points])

    def column(field: str) -> np.ndarray:
        rows = [np.asarray(getattr(p, field), dtype=float) for p in trajectory.points]
        if all(r.size == 0 for r in rows) and field != "positions":
            return np.zeros((len(rows), len(order)))
        if any(r.size != len(given) for r in rows):
            raise InertialIdError(f"every point needs {len(given)} {field}")
        return np.vstack(rows)[:, order]

    return JointPath(times, column("positions"), column("velocities"),
                     column("accelerations"))


class TrajectoryServer:
    """See the module docstring. ``now()`` is the simulation time (s)."""

    def __init__(self, node: Node, arm: TrackedArm, joint_names: list[str], controller: str,
                 now: Callable[[], float]) -> None:
        self.action = service_type(FOLLOW_JOINT_TRAJECTORY)
        self.node, self.arm, self.joint_names, self.now = node, arm, joint_names, now
        self.active: tuple[Any, Future, float] | None = None  # goal, wake-up, end time
        self.first_start: float | None = None  # s, when the first goal's motion began
        self.goals = {"received": 0, "succeeded": 0, "canceled": 0, "aborted": 0,
                      "rejected": 0}
        self.server = ActionServer(node, self.action, f"{controller}/follow_joint_trajectory",
                                   execute_callback=self._execute,
                                   goal_callback=self._goal, cancel_callback=self._cancel)

    def _goal(self, request: Any) -> GoalResponse:
        self.goals["received"] += 1
        try:
            path_from_msg(request.trajectory, self.joint_names)
        except InertialIdError as exc:
            self.node.get_logger().warning(f"trajectory goal rejected: {exc}")
            self.goals["rejected"] += 1
            return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    @staticmethod
    def _cancel(_: Any) -> CancelResponse:
        return CancelResponse.ACCEPT

    async def _execute(self, goal: Any) -> Any:
        if self.active is not None:  # preempted: the running goal aborts
            self.active[1].set_result("preempted")
        path = path_from_msg(goal.request.trajectory, self.joint_names)
        wake = Future()
        if self.first_start is None:
            self.first_start = self.now()
        self.active = (goal, wake, self.arm.command(self.now(), path) + self.arm.lag)
        outcome = await wake
        if self.active is not None and self.active[0] is goal:
            self.active = None
        result = self.action.Result()
        if outcome == "canceled":
            goal.canceled()
        elif outcome == "succeeded":
            goal.succeed()
        else:
            result.error_code = self.action.Result.PATH_TOLERANCE_VIOLATED
            result.error_string = "preempted by a new goal"
            goal.abort()
        self.goals[{"preempted": "aborted"}.get(outcome, outcome)] += 1
        return result

    def tick(self) -> None:
        """Called by the simulator's timer: ends the running goal when the arm is there, or
        stops the arm when its cancel was requested."""
        if self.active is None or self.active[1].done():
            return
        goal, wake, end = self.active
        if goal.is_cancel_requested:
            self.arm.stop(self.now())
            wake.set_result("canceled")
        elif self.now() >= end:
            wake.set_result("succeeded")
