"""identify: the payload identified on demand (``~/identify``, inertial_id/action/Identify).

On a goal: plan an exciting motion from the current joint state inside the goal's bounds
(:mod:`inertial_id.core.on_demand.planning`), check it (:mod:`~inertial_id.core.on_demand.
checks`), publish it on ``~/planned_path`` (visualization_msgs/Marker, the flange frame's
origin in the base frame) and ``~/planned_trajectory``, and unless a dry run: reset the
solver, send it to ``<controller>/follow_joint_trajectory``
(control_msgs/action/FollowJointTrajectory), watch ``solver/parameters``, ``solver/contact``
and ``joint_states``, cancel the controller's goal on the first stop reason
(:func:`~inertial_id.core.on_demand.checks.stop_reason`), move back to the start after a
convergence, a completed motion or a set-up error (unless the goal says ``stay``), and return
the estimate. One goal at a time; a missing controller or joint state is a failed goal, never
a dead node.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from action_msgs.msg import GoalStatus
from rclpy.action import ActionClient, ActionServer, CancelResponse, GoalResponse
from rclpy.node import Node
from rclpy.task import Future
from sensor_msgs.msg import JointState
from std_msgs.msg import Header
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory
from visualization_msgs.msg import Marker

from inertial_id.action import Identify as IdentifyAction
from inertial_id.core.errors import InertialIdError
from inertial_id.core.kinematics import SensorKinematics
from inertial_id.core.on_demand.checks import (
    BoundGuard,
    Limits,
    Watch,
    check_path,
    flange_positions,
    stop_reason,
)
from inertial_id.core.on_demand.path import move, move_duration
from inertial_id.core.on_demand.planning import MotionPlan, plan_motion
from inertial_id.msg import ContactAnomaly, InertialParameters
from inertial_id.nodes.common import RobotDescription, declare_all, latched_qos, sensor_qos
from inertial_id.nodes.identify_msgs import (
    bounds_from_goal,
    group_std,
    path_marker,
    trajectory_msg,
)
from inertial_id.nodes.requests import service_type
from inertial_id.nodes.runner import run
from inertial_id.nodes.trajectory_server import FOLLOW_JOINT_TRAJECTORY
from inertial_id.params.table import IDENTIFY_PARAMS

WATCH_PERIOD = 0.05
"""s between two looks at the running motion."""


class Identify(Node):
    """See the module docstring."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__("identify", **kwargs)
        self.values = declare_all(self, IDENTIFY_PARAMS, self._changed)
        self.kinematics: SensorKinematics | None = None
        self.joints: tuple[float, np.ndarray, np.ndarray] | None = None  # time, q, qd
        self.estimate: InertialParameters | None = None
        self.watch = Watch()
        self.t2 = 0.0
        self.busy = False
        self.follow: Any = None
        self.unavailable = ""
        try:
            self.follow = service_type(FOLLOW_JOINT_TRAJECTORY)
            self.client = ActionClient(self, self.follow, f"{self.values['controller']}"
                                       "/follow_joint_trajectory")
        except InertialIdError as exc:
            self.unavailable = str(exc)
            self.get_logger().warning(f"{exc}: goals will fail (no_controller)")
        self.reset = self.create_client(Trigger, "solver/reset")
        self.applier = self.create_client(Trigger, "applier/apply")
        self.path_pub = self.create_publisher(Marker, "~/planned_path", latched_qos())
        self.trajectory_pub = self.create_publisher(JointTrajectory, "~/planned_trajectory",
                                                    latched_qos())
        self.create_subscription(JointState, "joint_states", self.on_joints, sensor_qos(50))
        self.create_subscription(InertialParameters, "solver/parameters", self.on_estimate, 10)
        self.create_subscription(ContactAnomaly, "solver/contact", self.on_contact, 100)
        self._description = RobotDescription(self, self.values, self._urdf_ready)
        self.server = ActionServer(self, IdentifyAction, "~/identify", self._execute,
                                   goal_callback=self._goal,
                                   cancel_callback=lambda _: CancelResponse.ACCEPT)

    def _changed(self, values: dict[str, Any], _: set[str]) -> None:
        self.values = dict(values)

    def _urdf_ready(self, urdf: str) -> None:
        locked = dict(zip(self.values["locked_joint_names"],
                          self.values["locked_joint_positions"], strict=True))
        self.kinematics = SensorKinematics(urdf, self.values["sensor_frame"],
                                           self.values["gravity"], locked)

    # ------------------------------------------------------------------------ inputs

    def on_joints(self, msg: JointState) -> None:
        """The latest joint positions and velocities, in the model's order."""
        if self.kinematics is None:
            return
        index = {n: i for i, n in enumerate(msg.name)}
        names = self.kinematics.joint_names
        if not all(n in index and index[n] < len(msg.position) for n in names):
            return
        q = np.array([msg.position[index[n]] for n in names])
        qd = (np.array([msg.velocity[index[n]] for n in names])
              if len(msg.velocity) == len(msg.position) else np.zeros_like(q))
        if np.all(np.isfinite(q)) and np.all(np.isfinite(qd)):
            self.joints = (time.monotonic(), q, qd)

    def on_estimate(self, msg: InertialParameters) -> None:
        self.estimate = msg
        self.watch = Watch(msg.mass_converged and msg.com_converged and msg.inertia_converged,
                           self.watch.contact, msg.setup_error)

    def on_contact(self, msg: ContactAnomaly) -> None:
        self.t2 = msg.t2
        if msg.contact:
            self.watch = Watch(self.watch.converged, True, self.watch.setup_error)

    # ------------------------------------------------------------------------ the action

    def _goal(self, _: Any) -> GoalResponse:
        return GoalResponse.REJECT if self.busy else GoalResponse.ACCEPT

    async def _execute(self, goal: Any) -> Any:
        self.busy = True
        result = IdentifyAction.Result()
        try:
            await self._identify(goal, result)
        except InertialIdError as exc:
            result.stopped_because, result.message = "refused", str(exc)
        finally:
            self.busy = False
        if self.estimate is not None:
            result.estimate = self.estimate
        self.get_logger().info(f"identify: {result.stopped_because}: {result.message}")
        if goal.is_cancel_requested:
            goal.canceled()
        elif result.success:
            goal.succeed()
        else:
            goal.abort()
        return result

    async def _pause(self, seconds: float) -> None:
        done = Future()
        timer = self.create_timer(seconds, lambda: done.done() or done.set_result(True))
        await done
        self.destroy_timer(timer)

    def _start(self) -> np.ndarray:
        """Where the arm stands (its joint state is fresh: :meth:`_identify`)."""
        if self.kinematics is None:
            raise InertialIdError("no robot model yet (urdf_path or robot_description)")
        if self.joints is None:
            raise InertialIdError("no joint state of every model joint")
        return self.joints[1].copy()

    def _plan(self, goal: Any, result: Any) -> tuple[MotionPlan, list[str]]:
        """Plan and check; the result's motion fields and ~/planned_path filled in."""
        kinematics, values = self.kinematics, self.values
        bounds = bounds_from_goal(goal.request, values)
        start = self._start()
        plan = plan_motion(kinematics, start, bounds, values["acceleration_limits"],
                           values["harmonics"], values["budget"])
        path = plan.path(values["point_rate"])
        limits = Limits.of(kinematics, values["acceleration_limits"], bounds, start)
        problems = check_path(kinematics, path, limits, values["flange_frame"])
        result.motion = trajectory_msg(path, plan.joint_names)
        result.joint_names, result.start = plan.joint_names, start.tolist()
        result.max_excursion = bounds.excursion(plan.joint_names).tolist()
        result.velocity_scale = bounds.velocity_fraction
        result.acceleration_scale = bounds.acceleration_fraction
        result.duration = path.duration
        result.condition_number = plan.condition_number
        result.random_condition_number = plan.random_condition_number
        header = Header(stamp=self.get_clock().now().to_msg(),
                        frame_id=kinematics.model.frames[1].name)
        points = flange_positions(kinematics, values["flange_frame"],
                                  path(np.linspace(0, path.duration, 200))[0])
        self.path_pub.publish(path_marker(points, header, bool(problems)))
        self.trajectory_pub.publish(result.motion)
        return plan, problems

    def _fresh_joints(self) -> bool:
        return self.joints is not None and (time.monotonic() - self.joints[0]
                                            <= self.values["joint_state_timeout"])

    async def _await_joints(self, goal: Any) -> None:
        """Wait up to ``joint_state_wait`` s for a fresh joint state (a goal sent as the
        nodes start may come before this node has found the joint states' publisher); not
        without a robot model (the goal is refused at once) nor once a cancel is asked."""
        deadline = time.monotonic() + self.values["joint_state_wait"]
        if self.kinematics is None or self._fresh_joints():
            return
        goal.publish_feedback(IdentifyAction.Feedback(state="waiting for joint states"))
        while (not self._fresh_joints() and not goal.is_cancel_requested
               and time.monotonic() < deadline):
            await self._pause(0.05)

    async def _identify(self, goal: Any, result: Any) -> None:
        await self._await_joints(goal)
        if goal.is_cancel_requested:
            result.stopped_because, result.message = "canceled", "canceled before the plan"
            return
        if self.kinematics is not None and not self._fresh_joints():
            result.stopped_because = "no_joint_state"
            result.message = ("no joint state of every model joint in the last "
                              f"{self.values['joint_state_wait']:g} s")
            return
        goal.publish_feedback(IdentifyAction.Feedback(state="planning"))
        plan, problems = self._plan(goal, result)
        if problems:
            result.stopped_because = "refused"
            result.message = "; ".join(problems)
            return
        if goal.request.dry_run:
            result.success, result.stopped_because = True, "dry_run"
            result.message = (f"plan of {plan.duration:.1f} s passed its checks (condition "
                              f"number {plan.condition_number:.3g})")
            return
        if not await self._ready():
            result.stopped_because, result.message = "no_controller", self.unavailable
            return
        if goal.is_cancel_requested:  # asked while planning: nothing was sent
            result.stopped_because, result.message = "canceled", "canceled before the motion"
            return
        if not goal.request.keep_estimate:
            await self._reset_solver()
        reason, line, executed = await self._run(goal, result.motion, plan)
        result.stopped_because, result.message, result.executed = reason, line, executed
        result.success = reason in ("converged", "completed") and self.watch.converged
        if reason in ("converged", "completed", "setup_error") and not goal.request.stay:
            await self._return(plan.start)
        if result.success and goal.request.apply:
            result.message += "; " + await self._apply()

    async def _ready(self) -> bool:
        """Whether the controller's action server answers within server_timeout."""
        if self.follow is None:
            return False
        deadline = time.monotonic() + self.values["server_timeout"]
        while not self.client.server_is_ready():
            if time.monotonic() > deadline:
                self.unavailable = (f"{self.values['controller']}/follow_joint_trajectory "
                                    "does not answer")
                return False
            await self._pause(0.1)
        return True

    async def _reset_solver(self) -> None:
        if self.reset.service_is_ready():
            await self.reset.call_async(Trigger.Request())
        else:
            self.get_logger().warning("solver/reset does not answer: the estimate keeps "
                                      "what it had before the motion")
        self.estimate, self.watch = None, Watch()

    async def _send(self, trajectory: JointTrajectory) -> tuple[Any, Future] | None:
        request = self.follow.Goal(trajectory=trajectory)
        handle = await self.client.send_goal_async(request)
        if not handle.accepted:
            return None
        return handle, handle.get_result_async()

    async def _run(self, goal: Any, trajectory: JointTrajectory, plan: MotionPlan
                   ) -> tuple[str, str, float]:
        """Send the motion and watch it until a stop reason; cancel the controller's goal
        unless it ended by itself. Returns the reason, its line and the s of motion run."""
        sent = await self._send(trajectory)
        if sent is None:
            return "controller_failed", "the controller rejected the motion", 0.0
        handle, outcome = sent
        guard = BoundGuard(Limits.of(self.kinematics, self.values["acceleration_limits"],
                                     plan.bounds, plan.start))
        begin = time.monotonic()
        while True:
            await self._pause(WATCH_PERIOD)
            elapsed = time.monotonic() - begin
            self.watch = Watch(self.watch.converged, self.watch.contact,
                               self.watch.setup_error,
                               guard.check(*self.joints[1:]) if self.joints else "",
                               _controller(outcome), goal.is_cancel_requested)
            reason, line = stop_reason(self.watch)
            self._feedback(goal, min(elapsed / plan.duration, 1.0))
            if reason:
                break
        if not outcome.done():
            await handle.cancel_goal_async()
        return reason, line, min(elapsed, plan.duration)

    def _feedback(self, goal: Any, progress: float) -> None:
        feedback = IdentifyAction.Feedback(state="moving", progress=progress,
                                           t2=float(self.t2))
        if self.estimate is not None:
            e = self.estimate
            feedback.mass_std, feedback.com_std, feedback.inertia_std = group_std(e)
            feedback.mass_converged, feedback.com_converged = e.mass_converged, e.com_converged
            feedback.inertia_converged = e.inertia_converged
        goal.publish_feedback(feedback)

    async def _return(self, start: np.ndarray) -> None:
        """Back to ``start`` at rest, at the default velocity and acceleration fractions."""
        await self._pause(0.4)  # the arm comes to rest after a cancel
        if self.joints is None:
            return
        here = self.joints[1]
        speed = self.values["velocity_fraction"] * self.kinematics.model.velocityLimit
        acceleration = self.values["acceleration_fraction"] * np.broadcast_to(
            self.values["acceleration_limits"], here.shape)
        path = move(here, start, move_duration(start - here, speed, acceleration))
        sent = await self._send(trajectory_msg(path, list(self.kinematics.joint_names)))
        if sent is not None:
            await sent[1]

    async def _apply(self) -> str:
        if not self.applier.service_is_ready():
            return "not applied: applier/apply does not answer (launch with apply:=true)"
        response = await self.applier.call_async(Trigger.Request())
        return f"applier: {response.message}"


def _controller(outcome: Future) -> str:
    """The controller's goal: "" while it runs, "succeeded", or why it failed."""
    if not outcome.done():
        return ""
    answer = outcome.result()
    if answer.status == GoalStatus.STATUS_SUCCEEDED:
        return "succeeded"
    return (f"goal status {answer.status}, error {answer.result.error_code} "
            f"{answer.result.error_string}").strip()


def main(args: list[str] | None = None) -> int:
    """Run the identify node."""
    return run(Identify, args)
