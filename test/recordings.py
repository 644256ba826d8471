"""Simulated recording of the bundled arm shared by the fault tests of the core
(``test/core/test_fault_handling.py``) and of the nodes (``test/nodes/test_robustness.py``):
250 Hz wrenches and 125 Hz joint states, times in s from 0 (the tests add :data:`START`)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from inertial_id.core.kinematics import SensorKinematics
from inertial_id.core.simulation import (
    BUNDLED_HOME,
    BUNDLED_SENSOR_FRAME,
    FourierTrajectory,
    PayloadSimulation,
    bundled_urdf_path,
)

URDF = bundled_urdf_path()
FRAME = BUNDLED_SENSOR_FRAME
WRENCH_RATE = 250.0
JOINT_RATE = 125.0
START = 1000.0  # s, stamp of the first sample


@dataclass
class Recording:
    """Simulated joint states and wrenches of the bundled arm with the default payload."""

    seconds: float
    seed: int = 0

    def __post_init__(self) -> None:
        kinematics = SensorKinematics(URDF, FRAME)
        self.joint_names = list(kinematics.joint_names)
        self.trajectory = FourierTrajectory.random(BUNDLED_HOME, seed=1)
        sim = PayloadSimulation(kinematics, self.trajectory, seed=self.seed)
        self.joint_t = np.arange(0.0, self.seconds, 1.0 / JOINT_RATE)
        self.wrench_t = np.arange(0.0, self.seconds, 1.0 / WRENCH_RATE)
        self.position, self.velocity = sim.joint_states(self.joint_t)
        self.wrench = sim.wrench(self.wrench_t)
        self.kinematics = kinematics

    def events(self, begin: float, end: float) -> Iterator[tuple[str, int]]:
        """``("joint", k)`` and ``("wrench", k)`` with data time in [begin, end), in order."""
        joints = [(t, "joint", k) for k, t in enumerate(self.joint_t) if begin <= t < end]
        wrenches = [(t, "wrench", k) for k, t in enumerate(self.wrench_t) if begin <= t < end]
        for _, kind, k in sorted(joints + wrenches):
            yield kind, k
