"""The embedded demo: simulator and the three pipeline nodes in one process, one executor.

A monitor node compares ``/solver/parameters`` with ``/simulator/ground_truth`` and prints
the errors as the estimate converges, then a summary. With ``apply="ur"`` the simulator also
stands in for a UR driver and an applier sends it the payload (:mod:`inertial_id.nodes.
demo_apply`): apply, compensated wrench, a second payload identified and applied.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rclpy.node import Node
from rclpy.parameter import Parameter

from inertial_id.core.metrics import ParameterErrors, parameter_errors
from inertial_id.core.simulation import bundled_urdf_path
from inertial_id.msg import InertialParameters
from inertial_id.nodes import stopping
from inertial_id.nodes.common import init, latched_qos, make_executor, shut_down, spin
from inertial_id.nodes.demo_apply import ApplyLoop, applier, missing_interface
from inertial_id.nodes.pipeline import pipeline_nodes
from inertial_id.nodes.simulator import Simulator


@dataclass
class DemoOptions:
    """Payload and timing of the demo (SI units, sensor frame)."""

    duration: float = 20.0
    mass: float | None = None
    com: list[float] | None = None
    inertia: list[float] | None = None
    wrench_rate: float = 1000.0
    joint_state_rate: float = 500.0
    seed: int = 0
    print_period: float = 1.0
    apply: str = ""
    """``ur``: the apply loop (:mod:`inertial_id.nodes.demo_apply`); it ends the demo early
    once the second payload is applied."""


class Monitor(Node):
    """Prints the estimate's errors against the simulator's ground truth."""

    def __init__(self, print_line: Callable[[str], None]) -> None:
        super().__init__("demo_monitor")
        self.print_line = print_line
        self.truth: InertialParameters | None = None
        self.latest: InertialParameters | None = None
        self.create_subscription(InertialParameters, "/simulator/ground_truth",
                                 self.on_truth, latched_qos())
        self.create_subscription(InertialParameters, "/solver/parameters", self.on_estimate, 10)

    def on_truth(self, msg: InertialParameters) -> None:
        self.truth = msg

    def on_estimate(self, msg: InertialParameters) -> None:
        self.latest = msg

    def errors(self) -> ParameterErrors | None:
        if self.truth is None or self.latest is None:
            return None
        return parameter_errors(self.latest.pi, self.truth.pi)

    def report(self, elapsed: float, suffix: str = "") -> None:
        errors = self.errors()
        if errors is None or self.latest is None:
            self.print_line(f"{elapsed:6.1f} s  waiting for the first estimate")
            return
        e = self.latest
        self.print_line(
            f"{elapsed:6.1f} s  samples {e.samples_used:7d}  mass {e.mass:7.4f} kg "
            f"({errors.mass_pct:5.2f} %, sigma {e.std[0]:.1e})  CoM err {errors.com_mm:5.2f} mm  "
            f"inertia err {errors.inertia_pct:6.1f} %  consistent {e.physically_consistent}  "
            f"converged: mass {_yes(e.mass_converged)} CoM {_yes(e.com_converged)} "
            f"inertia {_yes(e.inertia_converged)}"
            + (f"  SET-UP ERROR: {e.setup_error}" if e.setup_error else "") + suffix
        )


def _yes(flag: bool) -> str:
    return "yes" if flag else "no "


def run_demo(options: DemoOptions, print_line: Callable[[str], None] = print) -> int:
    """Run the demo for ``options.duration`` seconds; 0 when a consistent estimate arrived
    (with ``apply``: when both payloads were applied and the last estimate is within 1 % and
    5 mm of the truth); 2 when ``apply`` cannot run (one line says why)."""
    if options.apply and options.apply != "ur":
        print_line(f"demo --apply takes ur, got {options.apply!r}")
        return 2
    missing = missing_interface() if options.apply else ""
    if missing:
        print_line(missing)
        return 2
    sim_params = [
        Parameter("wrench_rate", value=float(options.wrench_rate)),
        Parameter("joint_state_rate", value=float(options.joint_state_rate)),
        Parameter("seed", value=int(options.seed)),
        Parameter("driver", value=options.apply),
    ]
    for name, value in (("payload_mass", options.mass), ("payload_com", options.com),
                        ("payload_inertia", options.inertia)):
        if value is not None:
            sim_params.append(Parameter(name, value=value))
    init()
    nodes: list[Node] = []
    executor = None
    try:
        simulator = Simulator(parameter_overrides=sim_params)
        urdf = [Parameter("urdf_path", value=bundled_urdf_path())]
        nodes = [simulator, *pipeline_nodes(urdf)]
        solver = nodes[-1]
        monitor = Monitor(print_line)
        nodes.append(monitor)
        loop = None
        if options.apply:
            directory = Path(tempfile.mkdtemp(prefix="inertial_id_demo_"))
            nodes.append(applier(directory))
            loop = ApplyLoop(simulator, nodes[-1], solver, print_line)
            print_line(f"applying to the simulated UR driver; what is applied is saved in "
                       f"{directory / 'applied.yaml'}")
        executor = make_executor()
        for node in nodes:
            executor.add_node(node)
        start = time.monotonic()
        deadline = start + options.duration

        def tick() -> None:
            monitor.report(time.monotonic() - start, loop.status() if loop else "")
            if loop is not None:
                loop.step(monitor.latest)

        monitor.create_timer(options.print_period, tick)
        spin(executor, until=lambda: stopping.requested() or time.monotonic() >= deadline
             or bool(loop and loop.done))
        if stopping.requested():
            print_line("stopped")
        code = _summary(monitor, print_line)
        if loop is None:
            return code
        return _apply_summary(monitor, loop, print_line)
    finally:
        shut_down(executor, nodes)


def _summary(monitor: Monitor, print_line: Callable[[str], None]) -> int:
    errors = monitor.errors()
    if errors is None or monitor.latest is None or monitor.truth is None:
        print_line("no estimate was published: see the warnings above")
        return 1
    e, t = monitor.latest, monitor.truth
    print_line("")
    print_line(f"payload mass  {e.mass:.4f} kg (true {t.mass:.4f}, error {errors.mass_pct:.2f} %)")
    print_line(f"CoM           [{e.com.x:.4f}, {e.com.y:.4f}, {e.com.z:.4f}] m (true "
               f"[{t.com.x:.4f}, {t.com.y:.4f}, {t.com.z:.4f}], error {errors.com_mm:.2f} mm)")
    print_line(f"inertia (CoM) error {errors.inertia_pct:.1f} %")
    print_line("F/T bias      [" + ", ".join(f"{v:.3f}" for v in e.wrench_offset)
               + "] (true [" + ", ".join(f"{v:.3f}" for v in t.wrench_offset) + "])")
    print_line(f"physically consistent {e.physically_consistent} "
               f"(min eig J {e.min_pseudo_inertia_eigenvalue:.2e}), samples {e.samples_used}, "
               f"condition number {e.condition_number:.1f}")
    return 0 if e.physically_consistent else 1


def _apply_summary(monitor: Monitor, loop: ApplyLoop, print_line: Callable[[str], None]) -> int:
    """The apply loop's outcome: 0 when both payloads were applied and the last estimate
    matches the payload mounted (1 %, 5 mm)."""
    errors = monitor.errors()
    received = loop.simulator.driver.received if loop.simulator.driver else []
    print_line(f"apply loop: {len(received)} payload(s) applied to the UR driver: "
               + ", ".join(f"{b.mass:.4f} kg" for b, _ in received)
               + f"; payload B mounted: {'yes' if loop.mounted_at else 'no'}")
    good = errors is not None and errors.mass_pct < 1.0 and errors.com_mm < 5.0
    return 0 if loop.b_applied_at is not None and good else 1
