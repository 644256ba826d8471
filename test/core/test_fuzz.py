"""Fuzzing the core pipeline's message inputs with hypothesis.

:class:`~inertial_id.core.gathering.gatherer.Gathering` + :class:`~inertial_id.core.pipeline.
PayloadPipeline` (what the three nodes and offline replay run) are fed random sequences of
joint states and wrenches: stretches of good simulated data interleaved with junk — random
joint names (unknown, missing, duplicated, reordered), random lengths, NaN / inf / huge
values, stamps that repeat, go back a little or a lot, jump ahead, or are not finite.

Properties:

- ``add_joint_state`` / ``add_wrench`` raise nothing but :class:`InertialIdError` subclasses
  (the nodes catch exactly those and keep running);
- ``process()`` raises nothing but :class:`InertialIdError`, ``solve()`` nothing at all (a
  failed solve keeps the last estimate);
- every estimate the pipeline holds or recorded is physically consistent (pseudo-inertia
  positive definite) and finite.
"""

from __future__ import annotations

from contextlib import suppress
from dataclasses import dataclass
from functools import cache

import numpy as np
import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from inertial_id.core.errors import InertialIdError
from inertial_id.core.estimation.online import OnlineConfig, OnlineEstimator
from inertial_id.core.gathering.gatherer import GathererSettings, Gathering
from inertial_id.core.kinematics import SensorKinematics
from inertial_id.core.pipeline import PayloadPipeline
from inertial_id.core.simulation import (
    BUNDLED_HOME,
    BUNDLED_SENSOR_FRAME,
    FourierTrajectory,
    PayloadSimulation,
    bundled_urdf_path,
)

URDF = bundled_urdf_path()
WRENCH_RATE = 1000.0
JOINT_RATE = 500.0
START = 1_700_000_000.0
INT32 = 2**31 - 1

# Junk data make numpy warn (overflow, invalid values) and cvxpy warn (inaccurate solutions):
# expected here; what matters is what is raised and what is estimated.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning",
                                        "ignore:Solution may be inaccurate:UserWarning")


@dataclass(frozen=True)
class Data:
    """3 s of simulated measurements, cycled through by the good stretches."""

    names: list[str]
    kinematics: SensorKinematics
    joint_t: np.ndarray
    position: np.ndarray
    velocity: np.ndarray
    wrench: np.ndarray


@cache
def data() -> Data:
    kinematics = SensorKinematics(URDF, BUNDLED_SENSOR_FRAME)
    sim = PayloadSimulation(kinematics, FourierTrajectory.random(BUNDLED_HOME, seed=1))
    joint_t = np.arange(0.0, 3.0, 1.0 / JOINT_RATE)
    position, velocity = sim.joint_states(joint_t)
    wrench = sim.wrench(np.arange(0.0, 3.0, 1.0 / WRENCH_RATE))
    return Data(list(kinematics.joint_names), kinematics, joint_t, position, velocity, wrench)


# ----------------------------------------------------------------------------------------------
# strategies

SPECIAL = [np.nan, np.inf, -np.inf, 1e30, -1e30, 1e300, 5e-324, 0.0, -0.0]
values = st.one_of(
    st.floats(-4.0, 4.0),
    st.sampled_from(SPECIAL),
    st.floats(allow_nan=True, allow_infinity=True),
)


def joint_names() -> st.SearchStrategy[list[str]]:
    names = data().names
    pool = [*names, "unknown_joint", "gripper_joint", ""]
    return st.one_of(
        st.permutations(names).map(list),                      # reordered
        st.permutations([*names, "unknown_joint"]).map(list),  # with an extra joint
        st.lists(st.sampled_from(pool), max_size=9),           # missing, duplicated, unknown
    )


# A stamp: relative to the stream's clock, or absolute (what a Time message can hold, or not
# even finite).
stamps = st.one_of(
    st.sampled_from(["next", "same", "back_10ms", "back_2s", "ahead_10s"]),
    st.builds(lambda sec, nsec: sec + 1e-9 * nsec,
              st.integers(-(2**31), INT32), st.integers(0, 999_999_999)),
    st.sampled_from([np.nan, np.inf, -np.inf]),
)


@st.composite
def junk_joint_state(draw: st.DrawFn) -> tuple:
    names = draw(joint_names())
    n = draw(st.one_of(st.just(len(names)), st.integers(0, 9)))
    position = draw(st.lists(values, min_size=n, max_size=n))
    velocity = draw(st.one_of(st.just([]), st.lists(values, min_size=n, max_size=n),
                              st.lists(values, max_size=9)))
    return ("joint", draw(stamps), names, position, velocity)


@st.composite
def junk_wrench(draw: st.DrawFn) -> tuple:
    n = draw(st.one_of(st.just(6), st.integers(0, 8)))
    return ("wrench", draw(stamps), draw(st.lists(values, min_size=n, max_size=n)))


good_stretch = st.tuples(st.just("good"), st.integers(0, 2999), st.integers(10, 700))
events = st.lists(
    st.one_of(good_stretch, junk_joint_state(), junk_wrench(), st.just(("process",))),
    max_size=30,
)


# ----------------------------------------------------------------------------------------------
# the driver


class Driver:
    """Feeds the events to a pipeline, checking what may be raised."""

    def __init__(self) -> None:
        d = data()
        self.d = d
        online = OnlineEstimator(OnlineConfig(min_samples=50, training_samples=200))
        # a set filter: the stretches (at most 0.7 s each) never fill the 4 s a choice needs
        options = GathererSettings(window=0.08, delay=0.004)
        self.pipeline = PayloadPipeline(Gathering(URDF, options), d.kinematics, online,
                                        solve_period=0.2)
        self.clock = START

    def stamp(self, how: object) -> float:
        if isinstance(how, float):
            return how
        step = {"next": 5e-4, "same": 0.0, "back_10ms": -0.01, "back_2s": -2.0,
                "ahead_10s": 10.0}[str(how)]
        if step > 0:
            self.clock += step
            return self.clock
        return self.clock + step

    def add(self, method: str, *args: object) -> None:
        try:
            result = getattr(self.pipeline, method)(*args)
        except InertialIdError:
            return
        assert isinstance(result, bool)

    def good(self, offset: int, length: int) -> None:
        """``length`` ms of good data, stamps continuing the clock."""
        d = self.d
        begin = self.clock + 1e-3
        for i in range(length):
            t = begin + i / WRENCH_RATE
            if i % 2 == 0:
                j = (offset // 2 + i // 2) % d.joint_t.size
                self.add("add_joint_state", t, d.names, d.position[j], d.velocity[j])
            self.add("add_wrench", t, d.wrench[(offset + i) % len(d.wrench)])
            if i % 50 == 49:
                self.process()
        self.clock = begin + length / WRENCH_RATE

    def process(self) -> None:
        with suppress(InertialIdError):
            self.pipeline.process()
        self.check()

    def check(self) -> None:
        online = self.pipeline.online
        estimate = online.estimate
        if estimate is not None:
            assert estimate.physically_consistent, estimate.pi
            assert estimate.min_eigenvalue > 0, estimate.min_eigenvalue
            assert np.all(np.isfinite(estimate.pi)) and np.all(np.isfinite(estimate.offset))
        assert all(self.pipeline.history.consistent)

    def run(self, sequence: list[tuple]) -> None:
        for item in sequence:
            kind = item[0]
            if kind == "good":
                self.good(item[1], item[2])
            elif kind == "joint":
                self.add("add_joint_state", self.stamp(item[1]), item[2], item[3], item[4])
            elif kind == "wrench":
                self.add("add_wrench", self.stamp(item[1]), item[2])
            else:
                self.process()
        self.process()
        self.pipeline.solve()  # must not raise: a failed solve keeps the last estimate
        self.check()


@settings(max_examples=50, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(events)
@example([("good", 0, 700), ("good", 700, 700)])  # enough for estimates
@example([("good", 0, 500), ("wrench", "next", [1e300] * 6), ("good", 500, 600)])
@example([("good", 0, 500), ("joint", "next", data().names, [1e300] * 6, []),
          ("good", 500, 600)])
@example([("good", 0, 300), ("joint", 2.0**31 - 1, data().names, [0.0] * 6, []),
          ("good", 300, 300)])
def test_pipeline_inputs_never_crash_it_or_corrupt_the_estimate(sequence: list[tuple]) -> None:
    driver = Driver()
    driver.run(sequence)
    event("estimate" if driver.pipeline.online.estimate is not None else "no estimate")
    if driver.pipeline.solve_failures:
        event("a solve failed")


def test_the_good_data_alone_gives_a_consistent_estimate() -> None:
    """The fuzz driver's good stretches do reach the estimator (the property is not vacuous)."""
    driver = Driver()
    driver.run([("good", 0, 1500)])
    estimate = driver.pipeline.online.estimate
    assert estimate is not None and estimate.physically_consistent
    assert driver.pipeline.history.solve_time
