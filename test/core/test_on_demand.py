"""Identification on demand, the maths: joint paths, the anchored excitation, the checks
before sending, the guard while running, the stop rule and the simulated tracking arm."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inertial_id.core.errors import InertialIdError
from inertial_id.core.joint_torque.excitation import JointLimits
from inertial_id.core.kinematics import SensorKinematics
from inertial_id.core.on_demand.checks import (
    STOP_REASONS,
    BoundGuard,
    Limits,
    Watch,
    check_path,
    flange_positions,
    stop_reason,
)
from inertial_id.core.on_demand.path import JointPath, move, move_duration
from inertial_id.core.on_demand.planning import Box, MotionBounds, plan_motion
from inertial_id.core.on_demand.tracking import STOP_TIME, TrackedArm
from inertial_id.core.simulation import BUNDLED_HOME, bundled_urdf_path

ACCELERATION = 10.0


@pytest.fixture(scope="module")
def kinematics() -> SensorKinematics:
    return SensorKinematics(bundled_urdf_path(), "ft_sensor")


@pytest.fixture(scope="module")
def plan(kinematics: SensorKinematics):
    bounds = MotionBounds(max_excursion=(0.4,), duration=8.0)
    return plan_motion(kinematics, np.array(BUNDLED_HOME), bounds, ACCELERATION, budget=120)


finite = st.floats(-2.0, 2.0)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(finite, finite, finite, finite), min_size=2, max_size=2),
       st.floats(0.1, 3.0))
def test_a_path_meets_each_point_with_its_position_velocity_and_acceleration(
        ends: list[tuple[float, float, float, float]], h: float) -> None:
    (p0, v0, a0, _), (p1, v1, a1, _) = ends
    path = JointPath(np.array([0.0, h]), np.array([[p0], [p1]]), np.array([[v0], [v1]]),
                     np.array([[a0], [a1]]))
    q, qd, qdd = path(np.array([0.0, h]))
    np.testing.assert_allclose(q[:, 0], [p0, p1], atol=1e-9)
    np.testing.assert_allclose(qd[:, 0], [v0, v1], atol=1e-9)
    np.testing.assert_allclose(qdd[:, 0], [a0, a1], atol=1e-8)
    t = np.linspace(0.2 * h, 0.8 * h, 7)  # derivatives agree with differences of positions
    dt = 1e-6
    np.testing.assert_allclose(path(t)[1], (path(t + dt)[0] - path(t - dt)[0]) / (2 * dt),
                               atol=1e-5 * (1 + abs(v0) + abs(v1) + abs(p1 - p0) / h))


def test_a_move_stays_within_the_speed_and_acceleration_it_was_timed_for() -> None:
    start, goal = np.array([0.0, 1.0]), np.array([0.8, -0.2])
    speed, acceleration = np.array([0.5, 0.5]), np.array([2.0, 2.0])
    path = move(start, goal, move_duration(goal - start, speed, acceleration))
    _, qd, qdd = path(np.linspace(0, path.duration, 2001))
    assert np.all(np.abs(qd) <= speed * 1.001) and np.all(np.abs(qdd) <= acceleration * 1.001)
    assert np.max(np.abs(qd) / speed) > 0.95 or np.max(np.abs(qdd) / acceleration) > 0.95
    np.testing.assert_allclose(path(np.array([path.duration + 1]))[0][0], goal)


def test_the_plan_starts_and_ends_at_rest_where_the_arm_stands_inside_its_bounds(
        kinematics: SensorKinematics, plan) -> None:
    path = plan.path(25.0)
    q, qd, qdd = path(np.array([0.0, path.duration]))
    np.testing.assert_allclose(q, np.vstack([BUNDLED_HOME] * 2), atol=1e-9)
    np.testing.assert_allclose(np.vstack((qd, qdd)), 0.0, atol=1e-9)
    limits = Limits.of(kinematics, ACCELERATION, plan.bounds, plan.start)
    assert check_path(kinematics, path, limits, "tool0") == []
    t = np.linspace(0, path.duration, 4001)
    q, qd, qdd = plan.trajectory(t)
    assert np.max(np.abs(q - plan.start)) <= 0.4 + 1e-9
    assert np.max(np.abs(qd) / (0.4 * JointLimits.from_model(kinematics.model).velocity)) \
        <= 1.0 + 1e-9
    assert np.max(np.abs(qdd)) <= 0.3 * ACCELERATION + 1e-9
    # excites: much better conditioned than a random motion of the same form, every joint moves
    assert plan.condition_number < plan.random_condition_number
    assert np.all(np.ptp(q, axis=0) > 0.05)


@settings(max_examples=8, deadline=None)
@given(st.floats(2.0, 10.0), st.integers(0, 1000), st.sampled_from([1, 2, 3, 4]))
def test_every_plan_passes_its_own_checks(kinematics: SensorKinematics, duration: float,
                                          seed: int, harmonics: int) -> None:
    """Peaks found on the design's grid, then sent as points the controller interpolates:
    the check between the points must still find none over its bounds (a 4 s plan of 3
    harmonics was once refused for an acceleration 0.1 % over)."""
    bounds = MotionBounds(max_excursion=(0.4,), duration=duration)
    plan = plan_motion(kinematics, np.array(BUNDLED_HOME), bounds, ACCELERATION, harmonics,
                       budget=20, seed=seed)
    limits = Limits.of(kinematics, ACCELERATION, plan.bounds, plan.start)
    assert check_path(kinematics, plan.path(25.0), limits, "tool0") == []


def test_joints_not_allowed_to_move_stay(kinematics: SensorKinematics) -> None:
    bounds = MotionBounds(joints=("wrist_1_joint", "wrist_2_joint", "wrist_3_joint"),
                          duration=6.0)
    plan = plan_motion(kinematics, np.array(BUNDLED_HOME), bounds, ACCELERATION, budget=40)
    q, _, _ = plan.trajectory(np.linspace(0, 6.0, 500))
    np.testing.assert_allclose(q[:, :3], np.broadcast_to(BUNDLED_HOME[:3], (500, 3)),
                               atol=1e-12)
    assert np.all(np.ptp(q[:, 3:], axis=0) > 0.05)


def test_each_bound_a_path_leaves_is_named(kinematics: SensorKinematics, plan) -> None:
    path = plan.path(25.0)
    points = flange_positions(kinematics, "tool0", path.positions)
    lower, upper = points.min(axis=0), points.max(axis=0)
    tight = MotionBounds(max_excursion=(0.2,), duration=5.0, velocity_fraction=0.1,
                         acceleration_fraction=0.05,
                         box=Box(lower + 0.01, upper + 0.1), floor=lower[2] + 0.01)
    problems = check_path(kinematics, path, Limits.of(kinematics, ACCELERATION, tight,
                                                      plan.start), "tool0")
    text = "\n".join(problems)
    for words in ("duration", "beyond its excursion", "velocity bound",
                  "acceleration bound", "leaves the box", "below the floor"):
        assert words in text, words
    elsewhere = Limits.of(kinematics, ACCELERATION, plan.bounds, plan.start + 0.1)
    assert "does not begin where the arm stands" in "".join(
        check_path(kinematics, path, elsewhere, "tool0"))


def test_bad_bounds_are_refused_with_one_line(kinematics: SensorKinematics) -> None:
    with pytest.raises(InertialIdError, match="velocity_fraction"):
        plan_motion(kinematics, np.array(BUNDLED_HOME), MotionBounds(velocity_fraction=1.5),
                    ACCELERATION)
    with pytest.raises(InertialIdError, match="not in the robot model"):
        plan_motion(kinematics, np.array(BUNDLED_HOME), MotionBounds(joints=("elbow",)),
                    ACCELERATION)
    with pytest.raises(InertialIdError, match="max_excursion"):
        MotionBounds(max_excursion=(0.1, 0.2)).excursion(kinematics.joint_names)


def test_the_guard_names_a_joint_about_to_leave_its_excursion(
        kinematics: SensorKinematics) -> None:
    start = np.array(BUNDLED_HOME)
    guard = BoundGuard(Limits.of(kinematics, ACCELERATION, MotionBounds(max_excursion=(0.3,)),
                                 start), slack=0.02, lookahead=0.1)
    assert guard.check(start + 0.3, np.zeros(6)) == ""
    speed = np.zeros(6)
    speed[2] = 1.0  # 0.1 s ahead: 0.1 rad further
    assert "elbow_joint about to leave its excursion" in guard.check(start + 0.3, speed)
    assert guard.check(start + 0.3, -speed) == ""


def test_the_stop_rule_puts_safety_before_convergence() -> None:
    assert stop_reason(Watch()) == ("", "")
    everything = Watch(True, True, "wrench sign", "elbow about to leave", "aborted", True)
    assert stop_reason(everything)[0] == "canceled"
    assert stop_reason(Watch(converged=True, contact=True))[0] == "contact"
    assert stop_reason(Watch(converged=True, bound="x"))[0] == "bound"
    assert stop_reason(Watch(converged=True, controller="succeeded"))[0] == "converged"
    assert stop_reason(Watch(controller="succeeded"))[0] == "completed"
    assert stop_reason(Watch(controller="status 6"))[0] == "controller_failed"
    assert len(set(STOP_REASONS)) == 7


def test_the_tracked_arm_follows_its_set_point_late_and_stops_smoothly(plan) -> None:
    arm = TrackedArm(plan.start, lag=0.05)
    np.testing.assert_allclose(arm(np.array([0.0, 3.0]))[0], np.vstack([plan.start] * 2))
    path = plan.path(25.0)
    end = arm.command(1.0, path)
    assert end == pytest.approx(1.0 + path.duration)
    t = np.linspace(1.0, 1.0 + path.duration, 300)
    np.testing.assert_allclose(arm(t + 0.05)[0], plan.trajectory(t - 1.0)[0], atol=2e-4)
    stop = 1.0 + 0.4 * path.duration
    rest = arm.stop(stop)
    assert rest == pytest.approx(stop + STOP_TIME)
    q, qd, qdd = arm.commanded(np.linspace(stop - 0.01, rest + 0.5, 400))
    assert np.all(np.isfinite(qdd))
    np.testing.assert_allclose(qd[-50:], 0.0, atol=1e-12)
    assert np.max(np.abs(np.diff(q, axis=0))) < 0.01  # continuous through the stop
    with pytest.raises(InertialIdError, match="joints"):
        arm.command(2.0, move(np.zeros(2), np.ones(2), 1.0))
