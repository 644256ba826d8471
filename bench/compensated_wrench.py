#!/usr/bin/env python3
"""The gatherer's ``~/compensated_wrench`` live: latency, noise floor and cost.

Starts gatherer, kinematics and solver as three processes with the shipped parameter file
(``config/inertial_id.yaml``) and the simulated arm (1 kHz wrench, 500 Hz joint states, its
default payload, no contact). Once the solver's estimate has
converged, in this order:

- ``off``: ``--phase`` s with nobody subscribed to ``/gatherer/compensated_wrench``, the
  gatherer's CPU (``/proc/<pid>/stat``, 100 % = one core);
- ``on``: ``--phase`` s with a subscriber here, the gatherer's CPU again; and, from the
  gatherer's ``/diagnostics``, the latency from the wrench's callback to the compensated
  wrench's publication (p50, p99; the last 2000), and here, from the wrench's stamp (the
  simulator stamps at publication, system clock) to the compensated wrench's arrival (p50,
  p99; through this Python process's executor, whose own queue is in it; it takes the
  messages serialised and decodes them as the nodes do, with their executor, so that its own
  load on the machine stays small; with ``--raw`` the raw ``/wrench``'s too, which doubles
  this process's load);
- the RMS of each axis of the compensated wrench over the simulated sensor's noise std over
  the ``on`` phase (nothing touches the tool);
- the baseline (unless ``--no-baseline``): through the ``on`` phase, ``bench/republisher.py``
  runs beside the pipeline, a process that only decodes each ``/wrench`` and publishes it
  again (subscribed to here too), and reports the same in-node latency. What the two share is
  the machine's: the middleware's publish and the scheduler on a loaded machine.

``--priority N``: the gatherer with ``realtime_priority:=N`` (every thread of its process
``SCHED_FIFO`` at ``N``) and the republisher with the same; the gatherer's diagnostics say
what it got.

    python bench/compensated_wrench.py                 # 6 s phases
    python bench/compensated_wrench.py --priority 50   # as a real-time controller's thread
    python bench/compensated_wrench.py --phase 5 --json out.json

Run it with the venv's python (``.venv/bin/python``); its ROS traffic stays on this host in a
DDS domain of its own.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script from anywhere: the bench package

from bench.first_estimate import _processes, _stop  # noqa: E402
from bench.pipeline_throughput import cpu_seconds, free_domain, spin_until  # noqa: E402

BIN = Path(sys.executable).parent
FORCE_NOISE, TORQUE_NOISE = 0.08, 0.004


def _stamp(msg: Any) -> float:
    return msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec


class Probe:
    """Estimates, the gatherer's diagnostics, raw and compensated wrenches (arrival times)."""

    def __init__(self, raw: bool) -> None:
        import rclpy
        from diagnostic_msgs.msg import DiagnosticArray
        from geometry_msgs.msg import WrenchStamped
        from rclpy.node import Node

        from inertial_id.io.cdr import CdrDecoder
        from inertial_id.msg import InertialParameters
        from inertial_id.nodes.common import make_executor, sensor_qos
        from inertial_id.nodes.conversions import wrench_from_bytes

        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = Node("compensated_wrench_probe", context=self.context)
        # The nodes' executor and decoder: the probe's own load is part of the machine's.
        self.executor = make_executor(self.context)
        decoder = CdrDecoder()
        self.decode = lambda raw: wrench_from_bytes(raw, decoder)
        self.executor.add_node(self.node)
        self.converged = False
        self.gatherer: dict[str, str] = {}
        self.raw: list[float] = []  # arrival - stamp (s, system clock)
        self.compensated: list[tuple[float, list[float]]] = []  # arrival - stamp, value
        self.first_joint_state: float | None = None
        self.node.create_subscription(InertialParameters, "/solver/parameters",
                                      self._estimate, 10)
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self._diagnostics, 10)
        if raw:
            self.node.create_subscription(WrenchStamped, "/wrench", self._raw, sensor_qos(1000))
        self.qos, self.type = sensor_qos(1000), WrenchStamped
        self.subscription: Any = None
        self.republished = 0

    def _estimate(self, msg: Any) -> None:
        self.last = msg
        self.converged = self.converged or bool(msg.converged)

    def _diagnostics(self, msg: Any) -> None:
        for status in msg.status:
            if status.name.startswith("gatherer"):
                self.gatherer = {kv.key: kv.value for kv in status.values}

    def _raw(self, msg: Any) -> None:
        self.raw.append(time.time() - _stamp(msg))

    def _compensated(self, raw: bytes) -> None:
        msg = self.decode(raw)
        self.compensated.append((time.time() - msg.stamp, msg.wrench.tolist()))

    def subscribe(self, baseline: bool) -> None:
        self.subscription = self.node.create_subscription(
            self.type, "/gatherer/compensated_wrench", self._compensated, self.qos, raw=True)
        if baseline:
            self.node.create_subscription(self.type, "/republished_wrench",
                                          self._republished, self.qos, raw=True)

    def _republished(self, raw: bytes) -> None:
        self.republished += 1

    def spin(self, seconds: float, until: Any = lambda: False) -> bool:
        return spin_until(self.executor, seconds, until)

    def close(self) -> None:
        import rclpy

        self.executor.shutdown(timeout_sec=1.0)
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)


def _cpu(pid: int, probe: Probe, seconds: float) -> float:
    """% of a core ``pid`` used while the probe spins ``seconds``."""
    before, t0 = cpu_seconds(pid), time.monotonic()
    probe.spin(seconds)
    return round(100.0 * (cpu_seconds(pid) - before) / (time.monotonic() - t0), 1)


def _baseline(process: subprocess.Popen[bytes]) -> dict[str, Any]:
    """Stop the republisher; its latencies (module docstring)."""
    _stop(process)
    assert process.stdout is not None
    lines = process.stdout.read().decode().strip().splitlines()
    return json.loads(lines[-1]) if lines else {}


def run(phase: float, env: dict[str, str], raw: bool = False,
        baseline: bool = True, priority: int = 0) -> dict[str, Any]:
    """One run (module docstring)."""
    from inertial_id.core.simulation import bundled_urdf_path

    logdir = Path(tempfile.mkdtemp(prefix="compensated_wrench_"))
    started: dict[str, subprocess.Popen[bytes]] = {}
    probe = Probe(raw)
    try:
        for name, args in _processes("separate", bundled_urdf_path()).items():
            if name == "gatherer":
                args = [*args, "-p", f"realtime_priority:={priority}"]
            started[name] = subprocess.Popen(args, env=env, stdout=open(logdir / name, "wb"),  # noqa: SIM115
                                             stderr=subprocess.STDOUT)
        started["simulator"] = subprocess.Popen(
            [str(BIN / "inertial_id_simulator"), "--ros-args", "-p", "wrench_rate:=1000.0",
             "-p", "joint_state_rate:=500.0", "-p", f"force_noise_std:={FORCE_NOISE}",
             "-p", f"torque_noise_std:={TORQUE_NOISE}"],
            env=env, stdout=open(logdir / "simulator", "wb"), stderr=subprocess.STDOUT)  # noqa: SIM115
        if not probe.spin(90.0, lambda: probe.converged):
            last = getattr(probe, "last", None)
            flags = last and (last.mass_converged, last.com_converged, last.setup_error)
            raise RuntimeError(f"no converged estimate in 90 s (logs in {logdir}); the last "
                               f"(mass, CoM converged, set-up error): {flags}")
        pid = started["gatherer"].pid
        probe.spin(2.0)
        off = _cpu(pid, probe, phase)
        if baseline:  # its first second (the spin below) left out of its latencies
            started["republisher"] = subprocess.Popen(
                [sys.executable, str(ROOT / "bench" / "republisher.py"), "--skip", "1000",
                 "--priority", str(priority)],
                env=env, stdout=subprocess.PIPE, stderr=open(logdir / "republisher", "wb"))  # noqa: SIM115
        probe.subscribe(baseline)
        if baseline and not probe.spin(20.0, lambda: probe.republished > 0):
            raise RuntimeError(f"the republisher sent nothing in 20 s (log in {logdir})")
        probe.spin(1.0)
        probe.compensated.clear()
        probe.raw.clear()
        on = _cpu(pid, probe, phase)
        republished = _baseline(started.pop("republisher")) if baseline else None
        quiet = np.array([v for _, v in probe.compensated])
        delays = {"raw": list(probe.raw), "compensated": [d for d, _ in probe.compensated]}
        probe.spin(1.5)  # the diagnostics after the phase
        diagnostics = dict(probe.gatherer)
    finally:
        probe.close()
        for process in started.values():
            _stop(process)
    ratio = np.sqrt(np.mean(quiet**2, axis=0)) / np.repeat([FORCE_NOISE, TORQUE_NOISE], 3)
    return {"gatherer_cpu_percent": {"off": off, "on": on},
            "in_node_latency_ms": {k: round(float(diagnostics.get(
                f"compensated_wrench_latency_{k}_ms", "nan")), 3) for k in ("p50", "p99")},
            "stamp_to_arrival_here_ms": {
                name: {k: round(1e3 * float(np.percentile(values, q)), 3)
                       for k, q in (("p50", 50), ("p99", 99))}
                for name, values in delays.items() if values},
            "compensated_per_second": round(len(quiet) / phase, 1),
            "baseline_in_node_latency_ms": republished,
            "gatherer_realtime_priority": int(diagnostics.get("realtime_priority", -1)),
            "rms_over_noise": [round(float(r), 3) for r in ratio],
            "load": [round(x, 2) for x in os.getloadavg()]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--phase", type=float, default=6.0,
                        help="s of each phase, without and with a subscriber (6)")
    parser.add_argument("--raw", action="store_true",
                        help="also subscribe to the raw /wrench here, for its stamp-to-arrival "
                        "(doubles this process's load on the machine)")
    parser.add_argument("--no-baseline", action="store_true",
                        help="without the republisher beside the pipeline (module docstring)")
    parser.add_argument("--priority", type=int, default=0,
                        help="SCHED_FIFO priority of the gatherer and the republisher (0: none)")
    parser.add_argument("--json", type=Path, help="write the result here")
    args = parser.parse_args(argv)
    env = dict(os.environ, ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
               ROS_DOMAIN_ID=str(free_domain(60)))
    os.environ.update(env)  # this process's probe too
    result = run(args.phase, env, raw=args.raw, baseline=not args.no_baseline,
                 priority=args.priority)
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
