#!/usr/bin/env python3
"""Time from motion start to a usable estimate, and the CPU of the live pipeline, as a robot
starts it: gatherer, kinematics and solver with the shipped parameter file
(``config/inertial_id.yaml``, the filter chosen from the data), either as three processes
(the node executables) or as one (``inertial_id_pipeline``, ``one_process:=true``).

Each run starts the pipeline, waits until the solver reports on ``/diagnostics``, then starts
the simulated arm (``inertial_id_simulator`` with ``config/demo.yaml``: 1 kHz wrench, 500 Hz
joint states, 1.5 kg; a contact at 20 s) and times, from the arm's first sample (the stamp of
its ground truth, the system clock as the estimates' arrival):

- ``first``: the first ``/solver/parameters``;
- ``mass_com``: the first estimate from which on every estimate says mass and CoM converged
  and is within 1 % of the true mass and 2 mm of the true CoM;
- ``inertia``: the first from which on every estimate says the inertia converged and is within
  10 % (largest entry of the inertia about the CoM, relative to its largest principal
  moment);

over ``--duration`` s of motion (the contact comes later). Then the CPU of each process over
the motion (``/proc/<pid>/stat``, 100 % = one core), the solver's latency p50 and p99 (its
diagnostics: node clock when a sample is used minus the sample's stamp, the last 20000
samples), the samples lost between the nodes and the machine's load. Modes alternate
over ``--repeat`` rounds so that whatever else loads the machine hits both.

    python bench/first_estimate.py                      # both modes, 3 rounds, 12 s each
    python bench/first_estimate.py --modes one_process --repeat 5 --json out.json

Run it with the venv's python (``.venv/bin/python``); its ROS traffic stays on this host in a
DDS domain of its own.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script from anywhere: the bench package

from bench.pipeline_throughput import cpu_seconds, spin_until  # noqa: E402

BIN = Path(sys.executable).parent
MODES = ("separate", "one_process")
MASS_TOLERANCE, COM_TOLERANCE, INERTIA_TOLERANCE = 0.01, 0.002, 0.10


def _processes(mode: str, urdf: str) -> dict[str, list[str]]:
    """The pipeline's command lines in ``mode``, with the shipped parameter file."""
    files = ["--params-file", str(ROOT / "config" / "inertial_id.yaml")]
    if mode == "one_process":
        return {"pipeline": [str(BIN / "inertial_id_pipeline"), f"--urdf-path={urdf}",
                             "--ros-args", *files]}
    out = {}
    for name in ("gatherer", "kinematics", "solver"):
        given = [] if name == "solver" else ["-p", f"urdf_path:={urdf}"]
        out[name] = [str(BIN / f"inertial_id_{name}"), "--ros-args", *files, *given]
    return out


def _held_from(times: list[float], good: list[bool]) -> float | None:
    """The first time from which on every ``good`` holds (None: never)."""
    start = None
    for t, ok in zip(times, good, strict=True):
        if ok and start is None:
            start = t
        elif not ok:
            start = None
    return start


class Probe:
    """First joint state, every estimate and the true payload."""

    def __init__(self) -> None:
        import rclpy
        from diagnostic_msgs.msg import DiagnosticArray
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.node import Node

        from inertial_id.msg import InertialParameters
        from inertial_id.nodes.common import latched_qos

        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = Node("first_estimate_probe", context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.estimates: list[tuple[float, Any]] = []  # system clock s at arrival, message
        self.truth: Any = None
        self.solver_seen = False
        self.solver_values: dict[str, str] = {}
        self.node.create_subscription(InertialParameters, "/solver/parameters",
                                      lambda m: self.estimates.append((time.time(), m)), 100)
        self.node.create_subscription(InertialParameters, "/simulator/ground_truth",
                                      lambda m: setattr(self, "truth", m), latched_qos())
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self._diagnostics, 10)

    @property
    def motion_start(self) -> float | None:
        """System clock s of the arm's first sample (its ground truth's stamp)."""
        if self.truth is None:
            return None
        return self.truth.header.stamp.sec + 1e-9 * self.truth.header.stamp.nanosec

    def _diagnostics(self, msg: Any) -> None:
        for status in msg.status:
            if status.name.startswith("solver"):
                self.solver_seen = True
                self.solver_values = {kv.key: kv.value for kv in status.values}

    def spin(self, seconds: float, until: Any = lambda: False) -> bool:
        return spin_until(self.executor, seconds, until)

    def close(self) -> None:
        import rclpy

        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)

    def times(self) -> dict[str, float | None]:
        """Seconds from motion start to each milestone (module docstring)."""
        from inertial_id.core.parameters import symmetric_from_vector

        truth, start = self.truth, self.motion_start
        if truth is None or start is None or not self.estimates:
            return {"first": None, "mass_com": None, "inertia": None}  # nothing came
        com = np.array([truth.com.x, truth.com.y, truth.com.z])
        inertia = symmetric_from_vector(np.asarray(truth.inertia_com))
        scale = np.linalg.eigvalsh(inertia).max()
        t = [at - start for at, _ in self.estimates]
        msgs = [m for _, m in self.estimates]
        mass_com = [bool(m.mass_converged and m.com_converged
                         and abs(m.mass - truth.mass) <= MASS_TOLERANCE * truth.mass
                         and np.linalg.norm([m.com.x, m.com.y, m.com.z] - com) <= COM_TOLERANCE)
                    for m in msgs]
        inertia_ok = [bool(m.inertia_converged and np.abs(
            symmetric_from_vector(np.asarray(m.inertia_com)) - inertia).max()
            <= INERTIA_TOLERANCE * scale) for m in msgs]
        last = msgs[-1]
        return {"first": round(t[0], 3), "mass_com": _round(_held_from(t, mass_com)),
                "inertia": _round(_held_from(t, inertia_ok)),
                "final_mass_error_percent": round(100 * abs(last.mass / truth.mass - 1), 3),
                "final_com_error_mm": round(1e3 * float(np.linalg.norm(
                    [last.com.x, last.com.y, last.com.z] - com)), 3),
                "final_converged": [bool(last.mass_converged), bool(last.com_converged),
                                    bool(last.inertia_converged)]}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def run_once(mode: str, duration: float, env: dict[str, str]) -> dict[str, Any]:
    """One run of ``mode`` (module docstring)."""
    from inertial_id.core.simulation import bundled_urdf_path

    urdf = bundled_urdf_path()
    logdir = Path(tempfile.mkdtemp(prefix="first_estimate_"))
    started: dict[str, subprocess.Popen[bytes]] = {}
    probe = Probe()
    try:
        for name, args in _processes(mode, urdf).items():
            started[name] = subprocess.Popen(args, env=env, stdout=open(logdir / name, "wb"),  # noqa: SIM115
                                             stderr=subprocess.STDOUT)
        if not probe.spin(90.0, lambda: probe.solver_seen):
            raise RuntimeError(f"the solver did not report in 90 s (logs in {logdir})")
        started["simulator"] = subprocess.Popen(
            [str(BIN / "inertial_id_simulator"), "--ros-args", "--params-file",
             str(ROOT / "config" / "demo.yaml")], env=env,
            stdout=open(logdir / "simulator", "wb"), stderr=subprocess.STDOUT)  # noqa: SIM115
        if not probe.spin(60.0, lambda: probe.motion_start is not None):
            raise RuntimeError(f"no ground truth in 60 s (logs in {logdir})")
        pids = {n: p.pid for n, p in started.items() if n != "simulator"}
        cpu0 = {n: cpu_seconds(pid) for n, pid in pids.items()}
        t0 = time.monotonic()
        probe.spin(duration)
        elapsed = time.monotonic() - t0
        cpu = {n: round(100.0 * (cpu_seconds(pid) - cpu0[n]) / elapsed, 1)
               for n, pid in pids.items()}
        probe.spin(1.5)  # the solver's diagnostics after the measured span
        latency = {k: round(float(probe.solver_values[k]), 2)
                   for k in ("latency_p50_ms", "latency_p99_ms") if k in probe.solver_values}
        lost = int(float(probe.solver_values.get("samples_lost_upstream", "0")))
        return {"mode": mode, **probe.times(), "cpu_percent": cpu, **latency,
                "samples_lost_upstream": lost,
                "pipeline_cpu_percent": round(sum(cpu.values()), 1),
                "estimates": len(probe.estimates), "load_average": os.getloadavg()[0]}
    finally:
        for process in reversed(list(started.values())):
            _stop(process)
        probe.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--modes", default=",".join(MODES),
                        help="comma separated: separate, one_process (default: both)")
    parser.add_argument("--repeat", type=int, default=3, help="rounds (default 3)")
    parser.add_argument("--duration", type=float, default=12.0,
                        help="seconds of motion per run (default 12)")
    parser.add_argument("--json", type=Path, help="write the runs to this JSON file")
    args = parser.parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",")]
    if set(modes) - set(MODES):
        parser.error(f"--modes takes {', '.join(MODES)}")
    env = dict(os.environ)
    env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    env.setdefault("ROS_DOMAIN_ID", str(os.getpid() % 100 + 1))
    os.environ.update(env)
    runs = []
    print(f"{'mode':12} {'first s':>8} {'mass+CoM s':>10} {'inertia s':>9} "
          f"{'pipeline CPU %':>14} {'p50 ms':>7} {'p99 ms':>7} {'lost':>5}  per process, load")
    for _ in range(args.repeat):
        for mode in modes:
            run = run_once(mode, args.duration, env)
            runs.append(run)
            print(f"{mode:12} {run['first']!s:>8} {run['mass_com']!s:>10} "
                  f"{run['inertia']!s:>9} {run['pipeline_cpu_percent']:>14} "
                  f"{run.get('latency_p50_ms')!s:>7} {run.get('latency_p99_ms')!s:>7} "
                  f"{run['samples_lost_upstream']:>5}  "
                  f"{run['cpu_percent']}, {run['load_average']:.2f}; final: mass "
                  f"{run.get('final_mass_error_percent')} %, CoM {run.get('final_com_error_mm')}"
                  f" mm, converged {run.get('final_converged')}", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"runs": runs}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
