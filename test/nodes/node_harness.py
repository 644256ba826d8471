"""The in-process pipeline the node robustness tests drive: the three pipeline nodes in their
own rclpy Context and one SingleThreadedExecutor, fed by a test node that publishes crafted
``joint_states`` and ``wrench`` messages (:class:`Harness`), with a probe on what they publish
and their diagnostics (:class:`Status`)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import rclpy
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import WrenchStamped
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from recordings import FRAME, START, URDF, Recording
from sensor_msgs.msg import JointState
from std_msgs.msg import Header, String

from inertial_id.core.simulation import (
    default_payload,
)
from inertial_id.msg import InertialParameters, JointSamples, SensorSamples
from inertial_id.nodes.common import (
    latched_qos,
    pipeline_qos,
    sensor_qos,
    to_stamp,
)
from inertial_id.nodes.conversions import array_to_wrench
from inertial_id.nodes.gatherer import Gatherer
from inertial_id.nodes.kinematics import Kinematics
from inertial_id.nodes.solver import Solver

BIN = Path(sys.executable).parent
TRUE_MASS = default_payload().mass
OK, WARN, ERROR = (level[0] for level in (DiagnosticStatus.OK, DiagnosticStatus.WARN,
                                          DiagnosticStatus.ERROR))
CHUNK = 0.2  # s of data published before the executor runs the callbacks

# Solver settings for short tests: an estimate after 300 samples (1.2 s of data), often.
SOLVER = {"min_samples": 300, "publish_rate": 10.0}
# The former default filter at these 125 Hz joint states (41 samples, lag 2): runs of 2-3 s
# leave no time to choose one.
GATHERER = {"publish_rate": 100.0, "filter_window": 0.32, "filter_delay": 0.016}


# ----------------------------------------------------------------------------------------------
# simulated data and the in-process pipeline


def sensor_batches(data: Recording, batch: int = 50) -> Iterator[SensorSamples]:
    """The exact sensor-frame samples (no filter) as SensorSamples message objects, which
    rclpy serialises itself (the nodes publish bytes of their own encoder)."""
    q, qd, qdd = data.trajectory(data.wrench_t)
    twist, proper = data.kinematics.compute(q, qd, qdd)
    for k in range(0, data.wrench_t.size, batch):
        s = slice(k, k + batch)
        times = START + data.wrench_t[s]
        yield SensorSamples(
            header=Header(stamp=to_stamp(float(times[-1])), frame_id=FRAME),
            stamps=[to_stamp(float(t)) for t in times],
            twist=twist[s].ravel().tolist(), proper_acceleration=proper[s].ravel().tolist(),
            wrench=data.wrench[s].ravel().tolist(),
            wrench_raw=data.wrench[s].ravel().tolist())


def is_consistent(msg: InertialParameters) -> bool:
    return bool(msg.physically_consistent and msg.min_pseudo_inertia_eigenvalue > 0
                and np.all(np.isfinite(msg.pi)))


@dataclass
class Status:
    level: int
    message: str
    values: dict[str, str]
    received: float  # monotonic


@dataclass
class Probe:
    """What the test node received."""

    diagnostics: dict[str, list[Status]] = field(default_factory=dict)
    parameters: list[InertialParameters] = field(default_factory=list)
    joint_samples: list[JointSamples] = field(default_factory=list)
    sensor_samples: list[SensorSamples] = field(default_factory=list)

    def on_diagnostics(self, msg: DiagnosticArray) -> None:
        for s in msg.status:
            level = s.level[0] if isinstance(s.level, bytes) else int(s.level)
            status = Status(level, s.message, {kv.key: kv.value for kv in s.values},
                            time.monotonic())
            self.diagnostics.setdefault(s.name.split(":")[0], []).append(status)

    def last(self, node: str) -> Status:
        assert self.diagnostics.get(node), f"no diagnostics from {node}"
        return self.diagnostics[node][-1]


class Harness:
    """Gatherer, kinematics and solver (any subset) in one executor, plus a test node."""

    def __init__(self, nodes: Sequence[str] = ("gatherer", "kinematics", "solver"),
                 gatherer: dict | None = None, kinematics: dict | None = None,
                 solver: dict | None = None) -> None:
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        urdf = {"urdf_path": URDF}
        params = {"gatherer": {**urdf, **GATHERER, **(gatherer or {})},
                  "kinematics": {**urdf, **(kinematics or {})},
                  "solver": {**SOLVER, **(solver or {})}}
        classes = {"gatherer": Gatherer, "kinematics": Kinematics, "solver": Solver}
        self.nodes: dict[str, Node] = {}
        for name in nodes:
            overrides = [Parameter(k, value=v) for k, v in params[name].items()]
            self.nodes[name] = classes[name](context=self.context,
                                             parameter_overrides=overrides)
        self.node = Node("robustness_probe", context=self.context)
        self.probe = Probe()
        self.joint_pub = self.node.create_publisher(JointState, "joint_states", sensor_qos(500))
        self.wrench_pub = self.node.create_publisher(WrenchStamped, "wrench", sensor_qos(500))
        self.sensor_pub = self.node.create_publisher(SensorSamples, "sensor_samples",
                                                     pipeline_qos())
        self.description_pub = self.node.create_publisher(String, "robot_description",
                                                          latched_qos())
        self.node.create_subscription(DiagnosticArray, "/diagnostics",
                                      self.probe.on_diagnostics, 100)
        self.node.create_subscription(InertialParameters, "/solver/parameters",
                                      self.probe.parameters.append, 100)
        self.node.create_subscription(JointSamples, "joint_samples",
                                      self.probe.joint_samples.append, pipeline_qos(1000))
        self.node.create_subscription(SensorSamples, "sensor_samples",
                                      self.probe.sensor_samples.append, pipeline_qos(1000))
        for node in [*self.nodes.values(), self.node]:
            self.executor.add_node(node)
        self.sent = {"joint": 0, "wrench": 0}
        self.spin(0.3)  # discovery

    def close(self) -> None:
        for node in [*self.nodes.values(), self.node]:
            node.destroy_node()
        rclpy.try_shutdown(context=self.context)

    # publishing ------------------------------------------------------------------------------

    def joint_state(self, t: float, names: Sequence[str], position: Sequence[float],
                    velocity: Sequence[float] = ()) -> None:
        msg = JointState(name=list(names), position=[float(x) for x in position],
                         velocity=[float(x) for x in velocity])
        msg.header.stamp = to_stamp(t)
        self.joint_pub.publish(msg)
        self.sent["joint"] += 1

    def wrench(self, t: float, values: Sequence[float], frame: str = FRAME) -> None:
        msg = WrenchStamped(wrench=array_to_wrench(np.asarray(values, dtype=float)))
        msg.header.stamp = to_stamp(t)
        msg.header.frame_id = frame
        self.wrench_pub.publish(msg)
        self.sent["wrench"] += 1

    def stream(self, data: Recording, begin: float, end: float,
               joint: Callable[[int], tuple[list[str], np.ndarray, np.ndarray]] | None = None,
               offset: float = 0.0, only: str | None = None,
               wrench: Callable[[int], np.ndarray] | None = None) -> None:
        """Publish ``data`` between ``begin`` and ``end`` s (stamps ``START + offset + t``).

        ``joint(k)`` may rewrite the k-th joint state (names, positions, velocities),
        ``wrench(k)`` the k-th wrench; ``only`` publishes one kind. After each chunk the
        executor runs until the gatherer has them.
        """
        chunk_end = begin
        events = list(data.events(begin, end))
        for kind, k in events:
            if only is not None and kind != only:
                continue
            t = (data.joint_t if kind == "joint" else data.wrench_t)[k]
            if t >= chunk_end:
                self.drain()
                chunk_end = t + CHUNK
            if kind == "joint":
                names, q, v = (data.joint_names, data.position[k], data.velocity[k])
                if joint is not None:
                    names, q, v = joint(k)
                self.joint_state(START + offset + t, names, q, v)
            else:
                self.wrench(START + offset + t,
                            data.wrench[k] if wrench is None else wrench(k))
        self.drain()

    # spinning --------------------------------------------------------------------------------

    def spin(self, seconds: float, until: Callable[[], bool] = lambda: False) -> bool:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.executor.spin_once(timeout_sec=0.01)
            if until():
                return True
        return False

    def drain(self, timeout: float = 20.0) -> None:
        """Run callbacks until the gatherer received all that was sent (its queue is free)."""
        gatherer = self.nodes.get("gatherer")
        if gatherer is not None:
            assert self.spin(timeout, lambda: gatherer.joint_input.count >= self.sent["joint"]
                             and gatherer.wrench_input.count >= self.sent["wrench"]), (
                "the gatherer did not receive what was published")

    def settle(self, timeout: float = 20.0) -> None:
        """Run until the batches the gatherer published went through kinematics and solver."""
        self.spin(0.1)  # the gatherer's batch timer
        g, k, s = (self.nodes.get(n) for n in ("gatherer", "kinematics", "solver"))

        def through() -> bool:
            return ((g is None or k is None or k.samples_in >= g.published)
                    and (k is None or s is None or s.stage.received >= k.samples_out))

        assert self.spin(timeout, through), "samples stuck between the nodes"

    def fresh_diagnostics(self, nodes: Sequence[str] | None = None,
                          timeout: float = 10.0) -> dict[str, Status]:
        """Wait for a diagnostics message from each node newer than now (it is alive)."""
        nodes = list(nodes or self.nodes)
        since = time.monotonic()

        def fresh() -> bool:
            return all(self.probe.diagnostics.get(n) and
                       self.probe.diagnostics[n][-1].received > since for n in nodes)

        assert self.spin(timeout, fresh), (
            f"no fresh diagnostics from {[n for n in nodes if not self.probe.diagnostics.get(n)]}"
            f" within {timeout} s: a node stopped")
        return {n: self.probe.last(n) for n in nodes}

    def wait_for_estimate(self, timeout: float = 20.0) -> InertialParameters:
        assert self.spin(timeout, lambda: bool(self.probe.parameters)), "no estimate published"
        return self.probe.parameters[-1]

    # checks ----------------------------------------------------------------------------------

    def assert_nothing_inconsistent(self) -> None:
        bad = [m for m in self.probe.parameters if not is_consistent(m)]
        assert not bad, f"{len(bad)} inconsistent estimates published, e.g. {bad[0]}"

    def assert_samples_finite(self) -> None:
        for msg in self.probe.joint_samples:
            for name in ("position", "velocity", "acceleration", "wrench", "wrench_raw"):
                assert np.all(np.isfinite(getattr(msg, name))), f"non-finite {name} published"
        for msg in self.probe.sensor_samples:
            for name in ("twist", "proper_acceleration", "wrench"):
                assert np.all(np.isfinite(getattr(msg, name))), f"non-finite {name} published"


@contextmanager
def harness(**kwargs: object) -> Iterator[Harness]:
    h = Harness(**kwargs)  # type: ignore[arg-type]
    try:
        yield h
    finally:
        h.close()


def dropped(status: Status, reason: str) -> int:
    return int(status.values.get(f"dropped_{reason}", "0"))


def published(status: Status) -> int:
    return int(status.values["samples_published"])
