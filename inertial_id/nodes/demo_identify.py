"""``inertial-id demo --identify``: identification on demand on the simulated arm.

The simulator stands at a start pose drawn by the seed and serves a joint trajectory
controller; the three pipeline nodes and the identify node run beside it in one process. A
client sends one Identify goal once the first estimate is out, prints the result against the
ground truth, writes it (replay's output contract plus ``motion:``) and records the run's
joint states and wrenches in a bag.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from geometry_msgs.msg import WrenchStamped
from rclpy.action import ActionClient
from rclpy.node import Node
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState

from inertial_id.action import Identify as IdentifyAction
from inertial_id.core.errors import InertialIdError
from inertial_id.core.joint_torque.excitation import JointLimits
from inertial_id.core.kinematics import SensorKinematics
from inertial_id.core.on_demand.tracking import random_start
from inertial_id.core.simulation import BUNDLED_HOME, bundled_urdf_path
from inertial_id.io.bags import JOINT_STATE, WRENCH, write_bag
from inertial_id.msg import InertialParameters
from inertial_id.nodes import stopping
from inertial_id.nodes.common import init, make_executor, sensor_qos, shut_down, spin
from inertial_id.nodes.demo import DemoOptions, Monitor
from inertial_id.nodes.gatherer import Gatherer
from inertial_id.nodes.identify import Identify
from inertial_id.nodes.kinematics import Kinematics
from inertial_id.nodes.requests import service_type
from inertial_id.nodes.simulator import Simulator
from inertial_id.nodes.solver import Solver
from inertial_id.nodes.trajectory_server import FOLLOW_JOINT_TRAJECTORY

TIMEOUT = 90.0
"""s the demo waits for the identification at most."""


@dataclass
class IdentifyDemoOptions:
    """The payload (``DemoOptions``' fields), where to write the result and the bag."""

    demo: DemoOptions
    output: Path | None = None
    record: Path | None = None


class Client(Node):
    """Sends one Identify goal once an estimate is out, records the raw joint states and
    wrenches (CDR bytes, reception time)."""

    def __init__(self, monitor: Monitor) -> None:
        super().__init__("demo_identify_client")
        self.monitor = monitor
        self.client = ActionClient(self, IdentifyAction, "/identify/identify")
        self.records: list[tuple[str, str, float, bytes]] = []
        self.result: Any = None
        self.sent = False
        for topic, kind, name in (("/joint_states", JointState, JOINT_STATE),
                                  ("/wrench", WrenchStamped, WRENCH)):
            self.create_subscription(kind, topic, self._recorder(topic, name),
                                     sensor_qos(1000), raw=True)

    def _recorder(self, topic: str, name: str) -> Callable[[bytes], None]:
        return lambda raw: self.records.append((topic, name, time.time(), raw))

    def step(self) -> None:
        """Send the goal when the estimate and the action server are there."""
        if self.sent or self.monitor.latest is None or not self.client.server_is_ready():
            return
        self.sent = True
        self.client.send_goal_async(IdentifyAction.Goal()).add_done_callback(self._accepted)

    def _accepted(self, future: Any) -> None:
        handle = future.result()
        if not handle.accepted:
            self.result = IdentifyAction.Result(stopped_because="rejected")
            return
        handle.get_result_async().add_done_callback(
            lambda done: setattr(self, "result", done.result().result))


def result_document(result: Any) -> dict[str, Any]:
    """Replay's output contract from the result's estimate, plus ``motion:``."""
    e: InertialParameters = result.estimate
    floats = lambda values: [float(v) for v in values]  # noqa: E731
    return {
        "estimate": {
            "frame": e.header.frame_id, "mass": float(e.mass),
            "com": [e.com.x, e.com.y, e.com.z], "inertia_com": floats(e.inertia_com),
            "pi": floats(e.pi), "std": floats(e.std), "com_std": floats(e.com_std),
            "inertia_com_std": floats(e.inertia_com_std), "covariance_type": e.covariance_type,
            "wrench_offset": floats(e.wrench_offset),
            "wrench_offset_std": floats(e.wrench_offset_std),
            "physically_consistent": bool(e.physically_consistent),
        },
        "contacts": [],
        "samples_used": int(e.samples_used),
        "motion": {
            "duration": float(result.duration), "executed": float(result.executed),
            "start": floats(result.start), "joints": list(result.joint_names),
            "max_excursion": floats(result.max_excursion),
            "velocity_scale": float(result.velocity_scale),
            "acceleration_scale": float(result.acceleration_scale),
            "condition_number": float(result.condition_number),
            "stopped_because": result.stopped_because,
        },
    }


def run_identify_demo(options: IdentifyDemoOptions, print_line: Callable[[str], None] = print
                      ) -> int:
    """Run it; 0 when the identification succeeded (converged), 1 otherwise, 2 without
    control_msgs."""
    d = options.demo
    try:
        service_type(FOLLOW_JOINT_TRAJECTORY)
    except InertialIdError as exc:
        print_line(f"{exc} (the test copy: python test/interface_packages.py --env)")
        return 2
    limits = JointLimits.from_model(SensorKinematics(bundled_urdf_path(), "ft_sensor").model)
    start = random_start(BUNDLED_HOME, limits.lower, limits.upper, d.seed)
    sim = [Parameter("follow_trajectory", value=True), Parameter("home", value=start.tolist()),
           Parameter("seed", value=int(d.seed)),
           Parameter("wrench_rate", value=float(d.wrench_rate)),
           Parameter("joint_state_rate", value=float(d.joint_state_rate))]
    sim += [Parameter(name, value=value) for name, value in (
        ("payload_mass", d.mass), ("payload_com", d.com), ("payload_inertia", d.inertia))
        if value is not None]
    print_line("start pose [" + ", ".join(f"{v:.3f}" for v in start) + "] rad")
    init()
    nodes: list[Node] = []
    executor = None
    try:
        urdf = [Parameter("urdf_path", value=bundled_urdf_path())]
        nodes = [Simulator(parameter_overrides=sim), Gatherer(parameter_overrides=urdf),
                 Kinematics(parameter_overrides=urdf), Solver(),
                 Identify(parameter_overrides=urdf)]
        monitor = Monitor(print_line)
        client = Client(monitor)
        nodes += [monitor, client]
        executor = make_executor()
        for node in nodes:
            executor.add_node(node)
        begin = time.monotonic()
        client.create_timer(0.1, client.step)
        monitor.create_timer(d.print_period,
                             lambda: monitor.report(time.monotonic() - begin))
        spin(executor, until=lambda: stopping.requested() or client.result is not None
             or time.monotonic() > begin + TIMEOUT)
        return _finish(client, monitor, options, print_line)
    finally:
        shut_down(executor, nodes)


def _finish(client: Client, monitor: Monitor, options: IdentifyDemoOptions,
            print_line: Callable[[str], None]) -> int:
    result = client.result
    if options.record is not None:
        write_bag(options.record, client.records)
        print_line(f"recorded {len(client.records)} messages in {options.record}")
    if result is None:
        print_line("no identification result (stopped, or it timed out)")
        return 1
    print_line(f"identification: {result.stopped_because}: {result.message}")
    print_line(f"motion {result.executed:.2f} s of {result.duration:.2f} s planned, "
               f"condition number {result.condition_number:.3g} "
               f"(random {result.random_condition_number:.3g})")
    monitor.latest = result.estimate
    errors = monitor.errors()
    if errors is not None:
        e = result.estimate
        print_line(f"mass {e.mass:.4f} kg ({errors.mass_pct:.2f} %), CoM error "
                   f"{errors.com_mm:.2f} mm, inertia error {errors.inertia_pct:.1f} %, converged: "
                   f"mass {e.mass_converged} CoM {e.com_converged} inertia "
                   f"{e.inertia_converged}")
    if options.output is not None:
        options.output.parent.mkdir(parents=True, exist_ok=True)
        options.output.write_text(yaml.safe_dump(result_document(result), sort_keys=False))
        print_line(f"wrote {options.output}")
    return 0 if result.success else 1
