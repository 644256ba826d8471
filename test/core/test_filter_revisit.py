"""Revisiting the gatherer's filter when the motion changes
(inertial_id.core.gathering.filter_revisit):
an arm idle at the start gets the no-motion default, then the window its motion asks for; a
motion from the start keeps its first choice; the estimate and the contact monitor go on
across the switch."""

from __future__ import annotations

import numpy as np
import pytest

from inertial_id.core.gathering.filter_revisit import REVISIT_EVERY
from inertial_id.core.kinematics import SensorKinematics
from inertial_id.core.metrics import parameter_errors
from inertial_id.core.parameters import BodyParameters
from inertial_id.core.simulation import (
    BUNDLED_HOME,
    BUNDLED_SENSOR_FRAME,
    Contact,
    FourierTrajectory,
    PayloadSimulation,
    bundled_urdf_path,
)
from inertial_id.tools.feeding import PROCESS_PERIOD, feed
from inertial_id.tools.replay import build_pipeline

START = 1_700_000_000.0
PUSH = Contact(22.0, 0.8, (15.0, 0.0, 0.0), (0.0, 0.0, 0.2))


class StartAfter:
    """A trajectory that stands still at ``motion(0)`` until ``idle`` s, then blends into
    ``motion`` over ``blend`` s with a quintic smooth step (continuous acceleration)."""

    def __init__(self, motion: FourierTrajectory, idle: float, blend: float = 2.0) -> None:
        self.motion, self.idle, self.blend = motion, idle, blend

    def __call__(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        t = np.atleast_1d(np.asarray(t, dtype=float))
        q0 = self.motion(np.zeros(1))[0]
        q, qd, qdd = self.motion(t)
        x = np.clip((t - self.idle) / self.blend, 0.0, 1.0)[:, None]
        inside = ((t > self.idle) & (t < self.idle + self.blend))[:, None]
        s = x**3 * (10 - 15 * x + 6 * x**2)
        ds = inside * 30 * x**2 * (1 - x) ** 2 / self.blend
        dds = inside * 60 * x * (1 - x) * (1 - 2 * x) / self.blend**2
        dq = q - q0
        return (q0 + s * dq, ds * dq + s * qd, dds * dq + 2 * ds * qd + s * qdd)


def run(idle: float, duration: float = 30.0) -> tuple[object, BodyParameters]:
    """Replay's pipeline over a simulated recording whose joints all stand still for the first
    ``idle`` seconds, then start a fast trajectory smoothly; one push."""
    model = SensorKinematics(bundled_urdf_path(), BUNDLED_SENSOR_FRAME)
    trajectory = FourierTrajectory.random(BUNDLED_HOME, amplitude=0.6, max_velocity=1.5,
                                          period=4.0, seed=5)
    if idle > 0.0:
        trajectory = StartAfter(trajectory, idle)
    body = BodyParameters.from_mass_com_inertia(2.0, [0.01, -0.02, 0.15],
                                                np.diag([0.02, 0.025, 0.01]))
    sim = PayloadSimulation(model, trajectory, payload=body, joint_noise_std=1e-5,
                            contacts=(PUSH,), seed=5)
    messages = sim.driver_messages(duration, 500.0, 1000.0, START, BUNDLED_SENSOR_FRAME, 0.0)
    pipeline = build_pipeline({"gatherer": {}, "kinematics": {}, "solver": {}},
                              bundled_urdf_path())
    feed(messages, pipeline, PROCESS_PERIOD)
    pipeline.finish()
    return pipeline, body


def false_contact_time(contacts: list) -> float:
    """s flagged outside the push (0.1 s before to 0.3 s after it)."""
    lo, hi = START + PUSH.start - 0.1, START + PUSH.start + PUSH.duration + 0.3
    return sum(max(0.0, c.end - c.start) - max(0.0, min(c.end, hi) - max(c.start, lo))
               for c in contacts)


def test_an_arm_idle_at_the_start_gets_the_window_its_motion_asks_for() -> None:
    pipeline, body = run(idle=6.0)
    gathering = pipeline.gathering
    choice = gathering.choice
    assert choice is not None and choice.source == "data"  # no longer the no-motion default
    assert gathering.watch.switches == 1
    assert pipeline.online.monitor_relearned == 1
    # the same window as the motion gets when it moves from the start
    moving, _ = run(idle=0.0)
    assert moving.gathering.choice.source == "data" and moving.gathering.watch.switches == 0
    assert choice.window == pytest.approx(moving.gathering.choice.window, rel=0.25)
    # the wrenches in the buffers at the switch are counted, not lost silently
    assert 0 < gathering.synchronizer.counters["wrench_filter_change"] < 500
    estimate = pipeline.online.estimate
    errors = parameter_errors(estimate.pi, body.pi)
    assert errors.mass_pct < 0.1 and errors.com_mm < 0.5
    found = [c for c in pipeline.online.contacts if c.start - START < PUSH.start + 0.1
             and c.end - START > PUSH.start]
    assert found, "the push after the switch was not found"
    assert false_contact_time(pipeline.online.contacts) < 0.005 * 30.0


def test_a_motion_from_the_start_keeps_its_first_filter() -> None:
    """A filter chosen from moving joint states is kept over the whole run (30 s, longer than
    two looks): nothing is switched, the monitor is not relearnt, no wrench is dropped."""
    assert 2 * REVISIT_EVERY < 30.0
    pipeline, _ = run(idle=0.0)
    assert pipeline.gathering.watch.switches == 0
    assert pipeline.online.monitor_relearned == 0
    assert pipeline.gathering.synchronizer.counters["wrench_filter_change"] == 0
