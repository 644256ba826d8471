"""The live apply loop against a UR driver that compensates its wrench, over real topics.

Five processes: the simulator standing in for a UR driver (``driver:=ur``: it serves
``ur_msgs/srv/SetPayload``, the test-only copy of :mod:`interface_packages`, and from each
payload set on publishes the wrench less that payload's), the gatherer, kinematics and solver,
and the applier (``target:=ur``, automatic). The probe here checks, against the simulated
truth: payload A identified and applied; the wrench then drops to the residual while the
published estimate stays A; payload B mounted (the simulator's ``~/change_payload``) is
identified as B, not B - A, and applied in turn. After the mount the solver is reset
(``~/reset``, as after a tool change): its own detection of a new payload is tested in
``test_compensation`` (core) and is not what this test is about.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import rclpy
from geometry_msgs.msg import WrenchStamped
from interface_packages import build
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data
from std_srvs.srv import Trigger

from inertial_id.core.estimation.compensation import SETTLED
from inertial_id.core.simulation import DEFAULT_OFFSET, bundled_urdf_path, default_payload
from inertial_id.msg import InertialParameters
from inertial_id.nodes.compensation import history_qos

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
A = default_payload()  # the simulator's payload_* defaults
B_MASS, B_COM = 0.8, np.array([0.0, 0.03, 0.09])  # its payload_change_* defaults
TIMEOUT = 120.0  # s per step: five processes start on a loaded machine


def _stamp(msg: InertialParameters | WrenchStamped) -> float:
    return msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9


def _commands(tmp_path: Path) -> dict[str, list[str]]:
    urdf = ["-p", f"urdf_path:={bundled_urdf_path()}"]
    pipeline = ["--params-file", str(ROOT / "config" / "inertial_id.yaml")]
    return {
        "simulator": ["--params-file", str(ROOT / "config" / "demo.yaml"), "-p", "driver:=ur",
                      "-p", "contacts:=[]", "-p", "wrench_rate:=500.0",
                      "-p", "joint_state_rate:=250.0"],
        # A set filter: no 4 s wait for the data-chosen one.
        "gatherer": pipeline + urdf + ["-p", "filter_window:=0.06",
                                       "-p", "estimate_wrench_delay:=false"],
        "kinematics": pipeline + urdf,
        "solver": pipeline + ["-p", "min_samples:=300", "-p", "publish_rate:=10.0"],
        "applier": pipeline + urdf + [
            "-p", "target:=ur", "-p", "auto_apply:=true", "-p", "stable_s:=1.0",
            "-p", "min_interval:=1.0", "-p", f"applied_file:={tmp_path / 'applied.yaml'}"],
    }


class Probe:
    """Subscribes to what the test checks; keeps the latest of each."""

    def __init__(self, node: Node) -> None:
        self.estimates: list[InertialParameters] = []
        self.compensations: list[InertialParameters] = []
        self.wrenches: list[tuple[float, float]] = []  # stamp, |force - bias| (N)
        node.create_subscription(InertialParameters, "/solver/parameters",
                                 self.estimates.append, 10)
        node.create_subscription(InertialParameters, "/applier/compensation",
                                 self.compensations.append, history_qos())
        node.create_subscription(WrenchStamped, "/wrench", self.on_wrench,
                                 qos_profile_sensor_data)

    def on_wrench(self, msg: WrenchStamped) -> None:
        f = msg.wrench.force
        self.wrenches.append((_stamp(msg), float(np.linalg.norm(
            np.array([f.x, f.y, f.z]) - DEFAULT_OFFSET[:3]))))

    def applied(self, mass: float) -> InertialParameters | None:
        """The settled compensation of ``mass`` (1 %), if the applier announced it."""
        return next((m for m in self.compensations
                     if m.method == SETTLED and abs(m.mass - mass) < 0.01 * mass), None)

    def used(self) -> int:
        """Samples in the latest estimate."""
        return self.estimates[-1].samples_used if self.estimates else 0

    def estimate_after(self, stamp: float, used: int) -> InertialParameters | None:
        """The latest converged estimate from samples stamped 1 s past ``stamp`` with 300
        more samples in it than ``used``: the compensated ones went in (an estimate held
        through a contact would not have them)."""
        latest = self.estimates[-1] if self.estimates else None
        return latest if (latest and latest.converged and _stamp(latest) > stamp + 1.0
                          and latest.samples_used >= used + 300) else None


def _check(msg: InertialParameters, mass: float, com: np.ndarray) -> None:
    com_error = np.linalg.norm([msg.com.x - com[0], msg.com.y - com[1], msg.com.z - com[2]])
    assert abs(msg.mass - mass) < 0.01 * mass, f"{msg.mass} kg for {mass} kg"
    assert com_error < 0.003, f"CoM {com_error * 1e3:.2f} mm off"


def test_identify_apply_compensated_wrench_tool_change_reidentified_and_reapplied(
        tmp_path: Path, ros_env: dict[str, str],
        stop_processes: Callable[[list[subprocess.Popen]], list[str]]) -> None:
    env = build().environment(ros_env)
    processes = [subprocess.Popen([str(BIN / f"inertial_id_{name}"), "--ros-args", *args],
                                  env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True)
                 for name, args in _commands(tmp_path).items()]
    context = rclpy.Context()
    rclpy.init(context=context)
    node = Node("compensation_probe", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    probe = Probe(node)

    def wait(what: str, done: Callable[[], object]) -> None:
        end = time.monotonic() + TIMEOUT
        while not done() and time.monotonic() < end:
            executor.spin_once(timeout_sec=0.05)
        assert done(), f"timed out waiting for {what}"

    failure: AssertionError | None = None
    try:
        wait("A applied", lambda: probe.applied(A.mass))
        applied_a, used = _stamp(probe.applied(A.mass)), probe.used()
        wait("an estimate from compensated samples",
             lambda: probe.estimate_after(applied_a, used))
        _check(probe.estimate_after(applied_a, used), A.mass, A.com)  # A, not ~0 kg
        before = [n for t, n in probe.wrenches if t < applied_a - 0.1]
        after = [n for t, n in probe.wrenches if t > applied_a + 0.1]
        assert np.median(before) > 10.0 and np.median(after) < 0.5, (
            np.median(before), np.median(after))  # N: the weight, then only noise
        client = node.create_client(Trigger, "/simulator/change_payload")
        assert client.wait_for_service(timeout_sec=30.0)
        future = client.call_async(Trigger.Request())
        executor.spin_until_future_complete(future, timeout_sec=30.0)
        assert future.result() is not None and future.result().success
        mounted = node.get_clock().now().nanoseconds * 1e-9
        # Reset once B's wrench has come for longer than the filter's window (60 ms).
        wait("B's wrench", lambda: probe.wrenches and probe.wrenches[-1][0] > mounted + 0.3)
        reset = node.create_client(Trigger, "/solver/reset")
        assert reset.wait_for_service(timeout_sec=30.0)
        future = reset.call_async(Trigger.Request())
        executor.spin_until_future_complete(future, timeout_sec=30.0)
        assert future.result() is not None and future.result().success
        wait("B applied", lambda: probe.applied(B_MASS))
        applied_b, used = _stamp(probe.applied(B_MASS)), probe.used()
        assert applied_b > mounted
        wait("an estimate after B's apply", lambda: probe.estimate_after(applied_b, used))
        _check(probe.estimate_after(applied_b, used), B_MASS, B_COM)  # B, not B - A
    except AssertionError as exc:
        failure = exc
    finally:
        outputs = stop_processes(processes)
        node.destroy_node()
        rclpy.shutdown(context=context)
    logs = dict(zip(_commands(tmp_path), outputs, strict=True))
    if failure is not None:
        raise AssertionError(f"{failure}\nsolver:\n{logs['solver'][-4000:]}\napplier:\n"
                             f"{logs['applier'][-3000:]}") from failure
    for process, output in zip(processes, outputs, strict=True):
        assert process.returncode == 0 and "Traceback" not in output, output
    assert logs["simulator"].count("set_payload: ") >= 2, logs["simulator"]
    # The apply was not taken for a tool change (one may be seen at B's mount).
    changes = [float(t) for t in re.findall(r"payload_change at t = (\S+) s", logs["solver"])]
    assert all(t > mounted - 0.1 for t in changes), logs["solver"]

