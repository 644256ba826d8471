"""A bag played into the running nodes gives the same estimate and contacts as offline replay."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import rclpy
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node

from inertial_id.core.simulation import Contact
from inertial_id.msg import ContactAnomaly, InertialParameters
from inertial_id.tools.replay import ReplayOptions, replay
from inertial_id.tools.synthetic import SimulateOptions, simulate_bag

BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parents[2]
DURATION = 14.0
PLAY_RATE = 0.5


@pytest.fixture(scope="module")
def bag(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("play") / "bag"
    return simulate_bag(path, SimulateOptions(
        duration=DURATION, contacts=(Contact(9.0, 0.5, (0.0, 5.0, 0.0)),), seed=4))


def _node(executable: str, env: dict[str, str], *params: str) -> subprocess.Popen[bytes]:
    args = [str(BIN / executable), "--ros-args", "-p", "use_sim_time:=true",
            "--params-file", str(ROOT / "config" / "inertial_id.yaml")]
    for p in params:
        args += ["-p", p]
    return subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)


def test_played_bag_matches_replay(bag: Path, ros_env: dict[str, str]) -> None:
    # No urdf_path: the nodes take the URDF from the bag's latched robot_description.
    nodes = [_node("inertial_id_gatherer", ros_env), _node("inertial_id_kinematics", ros_env),
             _node("inertial_id_solver", ros_env, "contact_decimation:=5")]
    context = rclpy.Context()
    rclpy.init(context=context)
    estimates: list[InertialParameters] = []
    contact_stamps: list[float] = []
    diagnostics: list[dict[str, str]] = []
    try:
        probe = Node("equivalence_probe", context=context)
        probe.create_subscription(InertialParameters, "/solver/parameters", estimates.append, 10)
        probe.create_subscription(
            ContactAnomaly, "/solver/contact",
            lambda m: contact_stamps.append(m.header.stamp.sec + 1e-9 * m.header.stamp.nanosec)
            if m.contact else None, 1000)
        probe.create_subscription(
            DiagnosticArray, "/diagnostics",
            lambda m: diagnostics.extend({v.key: v.value for v in s.values} for s in m.status
                                         if s.name.startswith("solver")), 10)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(probe)
        end = time.monotonic() + 6.0  # let the nodes start and discover each other
        while time.monotonic() < end:
            executor.spin_once(timeout_sec=0.1)
        # Half speed: the solver solves at most every 0.1 s of wall time while its dedicated
        # solver is loading, so at full speed under load the live estimate converged too late
        # for the contact monitor to train before the push (replay solves by bag time).
        player = subprocess.Popen([str(BIN / "inertial-id"), "play", str(bag), "--rate",
                                   str(PLAY_RATE)], env=ros_env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + DURATION / PLAY_RATE + 40.0
        while player.poll() is None and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.05)
        assert player.returncode == 0
        end = time.monotonic() + 3.0  # the last solve after the end of the bag
        while time.monotonic() < end:
            executor.spin_once(timeout_sec=0.05)
    finally:
        for process in nodes:
            process.terminate()
        for process in nodes:
            process.wait(timeout=10)
        rclpy.shutdown(context=context)

    offline = replay(ReplayOptions(bag, params=ROOT / "config" / "inertial_id.yaml",
                                   progress=False))
    assert estimates, "the nodes published no estimate"
    live = estimates[-1]
    e = offline.estimate
    assert e is not None
    assert live.mass == pytest.approx(e.body.mass, rel=2e-3)
    com = np.array([live.com.x, live.com.y, live.com.z])
    assert np.linalg.norm(com - e.body.com) < 1e-3
    np.testing.assert_allclose(live.wrench_offset, e.offset, atol=0.02)
    # The same contact, at the same bag time.
    assert len(offline.contacts) == 1
    start = offline.start_time + offline.contacts[0][0]
    assert contact_stamps, "the nodes flagged no contact"
    assert abs(min(contact_stamps) - start) < 0.03  # ~message spacing at decimation 5
    assert diagnostics and int(diagnostics[-1]["contacts"]) == len(offline.contacts), (
        diagnostics[-1], [s - offline.start_time for s in contact_stamps])
    # Every diagnostics value is one number a plotting tool can read, the estimate's included.
    numbers = [{k: float(v) for k, v in d.items()} for d in diagnostics]
    assert numbers[-1]["mass_kg"] == pytest.approx(live.mass, rel=1e-4)
    assert numbers[-1]["com_z_m"] == pytest.approx(live.com.z, abs=1e-5)
    assert numbers[-1]["converged"] == float(live.converged)
