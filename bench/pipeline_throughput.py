#!/usr/bin/env python3
"""Throughput, drops, latency and CPU of the live pipeline; per-sample cost of the core.

The simulator publishes 1 kHz wrenches and 500 Hz joint states; gatherer, kinematics and solver
run as separate processes (the node executables, as ``ros2 run`` starts them), in the
shipped one-process mode (the ``pipeline`` executable, ``one_process:=true``: the three nodes
linked in one process, the simulator in its own), or all four in one process with one
executor, unlinked (``--composed``). For each gatherer setting
(``window`` joint samples of the fixed-lag filter and its ``lag``, batch ``publish_rate``)
it reports:

- samples at each stage, from the nodes' own ``/diagnostics`` counters read by a probe node:
  simulator published (counted inside the simulator's process; ``duration x rate`` is printed
  beside it) -> gatherer received -> gatherer published -> kinematics received / published ->
  solver received, and so what was lost where;
- latency p50 / p99 from the solver's diagnostics (node clock when a sample is used minus its
  wrench stamp; the solver keeps the last 20000 samples, i.e. the last 20 s at 1 kHz), and a
  breakdown measured by the probe at the gatherer's and the kinematics' outputs, next to the
  parts fixed by design: the simulator's publishing tick, the filter's lag (``lag`` joint
  samples) and the gatherer's batching period;
- CPU of each process (``/proc/<pid>/stat`` utime + stime over the run; 100 % = one core), and
  again from :data:`STEADY_AFTER` s into the run to its end (``steady``: without the first
  seconds' work, the filter's start and the solves that come every batch or two while the
  data are few; what a robot that leaves the pipeline running pays).

The probe also subscribes to ``/solver/parameters``, as a controller taking the payload would:
the solver builds each output only while someone reads it.

Then, in this process and without ROS, the core's cost per sample on 1 kHz data in 20-sample
batches (the gatherer's default 50 Hz): ``Gathering`` add + pop, ``SensorKinematics.compute``,
``OnlineEstimator.add`` (regressor, accumulation, contact gating) and one SDP solve.

Targets: latency p99 <= 15 ms; the pipeline's processes (not the simulator, not the probe)
together <= 30 % of a core, steady; kinematics + regressor + accumulate <= 50 us per sample.
Timings depend on the machine and on whatever else runs on it: on a shared 2-core machine
expect +-30 % between runs, and read the load average printed with the results. On a virtual
machine also read the ``steal`` column: the share of CPU time the host gave to others while
the run wanted it (from ``/proc/stat``); a p99 taken with more than a few % steal measures
the host, not the pipeline.

    python bench/pipeline_throughput.py                        # both phases, 60 s per run
    python bench/pipeline_throughput.py --duration 20 --json out.json
    python bench/pipeline_throughput.py --composed --settings 7:200 --tick 0.001
    python bench/pipeline_throughput.py --core-only
    python bench/pipeline_throughput.py --distro kilted,jazzy --repeat 3 --separate \
        --no-stage-latency --settings 41:2:200 --json both.json

``--distro`` runs this script once per ROS 2 distribution with that development environment's
python (``.venv`` Kilted, ``.venv-jazzy`` Jazzy: ``make venv ROS_DISTRO=jazzy``), alternating
them ``--repeat`` times so that whatever else loads the machine hits both, and prints their
runs side by side with each run's CPU steal.

Run it with the venv's python. Its ROS traffic stays on this host
(``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``) in a DDS domain of its own (``ROS_DOMAIN_ID``,
from the process id unless set).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: `bench` as a package

from bench._options import add_solver_option, solver_values  # noqa: E402

WRENCH_RATE = 1000.0
JOINT_STATE_RATE = 500.0
SOLVER_WINDOW = 20000  # samples the solver's latency percentiles cover
STEADY_AFTER = 10.0
"""s into a run (at most half of it) from which the steady CPU is measured."""
LATENCY_TARGET_MS = 15.0
CPU_TARGET_PERCENT = 30.0
PIPELINE = ("gatherer", "kinematics", "solver", "pipeline", "composed")
"""The processes whose CPU counts against :data:`CPU_TARGET_PERCENT` (``composed`` holds the
simulator too)."""
CORE_TARGET_US = 50.0
RESULT_MARK = "PIPELINE_THROUGHPUT_RESULT "
BIN = Path(sys.executable).parent
NODES = ("gatherer", "kinematics", "solver")


# ----------------------------------------------------------------------------------------------
# settings


@dataclass(frozen=True)
class Setting:
    """Gatherer ``window`` and ``lag`` (joint samples; lag < 0: half the window) and
    ``publish_rate`` (Hz), simulator ``tick`` (s)."""

    window: int
    lag: int
    publish_rate: float
    tick: float

    @property
    def label(self) -> str:
        return (f"window={self.window} lag={self.lag_samples} "
                f"publish_rate={self.publish_rate:g} tick={self.tick:g}")

    @property
    def lag_samples(self) -> int:
        """The filter's lag in joint samples."""
        return self.window // 2 if self.lag < 0 else self.lag

    @property
    def spec(self) -> str:
        """The setting as ``--settings`` takes it."""
        return f"{self.window}:{self.lag}:{self.publish_rate}:{self.tick}"

    def gatherer_parameters(self) -> dict[str, Any]:
        """The gatherer's parameter values for this setting."""
        return {"filter_window": (self.window - 1) / JOINT_STATE_RATE,
                "filter_delay": (self.lag / JOINT_STATE_RATE if self.lag >= 0 else -1.0),
                "publish_rate": float(self.publish_rate)}

    def design_latency_ms(self) -> dict[str, float]:
        """The parts of the latency fixed by design (means; the maxima are twice these)."""
        lag = self.lag_samples / JOINT_STATE_RATE * 1e3
        return {"filter_lag": lag, "batching_mean": 0.5e3 / self.publish_rate,
                "simulator_tick_mean": 0.5e3 * self.tick,
                "sum_of_means": lag + 0.5e3 / self.publish_rate + 0.5e3 * self.tick,
                "sum_of_maxima": lag + 1e3 / self.publish_rate + 1e3 * self.tick}


def parse_settings(text: str, tick: float) -> list[Setting]:
    """``"31:4:200,15:-1:50"`` (window:lag:publish_rate[:tick], comma separated)."""
    out = []
    for item in text.split(","):
        parts = item.strip().split(":")
        if len(parts) not in (3, 4):
            raise argparse.ArgumentTypeError(
                f"setting {item!r}: use window:lag:publish_rate[:tick]")
        out.append(Setting(int(parts[0]), int(parts[1]), float(parts[2]),
                           float(parts[3]) if len(parts) == 4 else tick))
    return out


# ----------------------------------------------------------------------------------------------
# child processes: the simulator alone, or all four nodes in one executor


def _make_executor(name: str, context: Any = None) -> Any:
    from rclpy.executors import SingleThreadedExecutor

    from inertial_id.nodes.compat import make_executor

    if name == "events":
        return make_executor(context)
    return SingleThreadedExecutor(context=context)


def _child(kind: str, setting: Setting, executor_name: str) -> int:
    """Run the simulator, one pipeline node, or all four nodes (``kind == "composed"``).

    The simulator starts publishing once the gatherer's subscriptions are discovered, so
    discovery does not count as loss. The first SIGINT/SIGTERM stops the simulator (its counts
    are printed); other nodes keep running, to drain, until the second (the first when there
    is no simulator).
    """
    import rclpy
    from rclpy.parameter import Parameter
    from rclpy.signals import SignalHandlerOptions

    from inertial_id.core.simulation import bundled_urdf_path
    from inertial_id.nodes.gatherer import Gatherer
    from inertial_id.nodes.kinematics import Kinematics
    from inertial_id.nodes.simulator import Simulator
    from inertial_id.nodes.solver import Solver

    signals: list[float] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: signals.append(time.monotonic()))
    rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
    try:
        executor = _make_executor(executor_name)
        urdf = Parameter("urdf_path", value=bundled_urdf_path())
        factories = {
            "gatherer": lambda: Gatherer(parameter_overrides=[urdf, *(
                Parameter(k, value=v) for k, v in setting.gatherer_parameters().items())]),
            "kinematics": lambda: Kinematics(parameter_overrides=[urdf]),
            "solver": Solver,
        }
        names = list(NODES) if kind == "composed" else [kind] if kind in NODES else []
        nodes = [factories[name]() for name in names]
        for node in nodes:
            executor.add_node(node)
        simulator = None
        if kind in ("simulator", "composed"):
            simulator = Simulator(parameter_overrides=[
                Parameter("wrench_rate", value=WRENCH_RATE),
                Parameter("joint_state_rate", value=JOINT_STATE_RATE),
                Parameter("tick", value=setting.tick)])
            deadline = time.monotonic() + 60.0
            while time.monotonic() < deadline and not signals and not (
                    simulator.wrench_pub.get_subscription_count()
                    and simulator.joint_pub.get_subscription_count()):
                executor.spin_once(timeout_sec=0.05)
            end = time.monotonic() + 0.5  # let the readers match the writers
            while time.monotonic() < end:
                executor.spin_once(timeout_sec=0.05)
            executor.add_node(simulator)
        print("started", flush=True)
        while not signals:
            executor.spin_once(timeout_sec=0.05)
        if simulator is not None:
            for timer in list(simulator.timers):
                timer.cancel()
            result = {"sent": dict(simulator.sent), "start": simulator.start,
                      "stop": simulator.get_clock().now().nanoseconds * 1e-9}
            print(RESULT_MARK + json.dumps(result), flush=True)
            while len(signals) < 2 and nodes:
                executor.spin_once(timeout_sec=0.05)
    finally:
        rclpy.try_shutdown()
    return 0


# ----------------------------------------------------------------------------------------------
# the probe


def spin_until(executor: Any, seconds: float, until: Callable[[], bool] = lambda: False
               ) -> bool:
    """Spin ``executor`` for ``seconds`` at most, until ``until()``; whether it came true."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        executor.spin_once(timeout_sec=0.05)
        if until():
            return True
    return False


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, s (``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_steal() -> tuple[int, int]:
    """Steal and total jiffies of all CPUs (``/proc/stat``): the time a virtual machine's
    CPUs were ready but the host ran something else."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    return fields[7], sum(fields)


@dataclass
class Process:
    name: str
    popen: subprocess.Popen[bytes]
    log: IO[bytes]

    def output(self) -> str:
        self.log.flush()
        self.log.seek(0)
        return self.log.read().decode(errors="replace")


@dataclass
class Run:
    """What one run measured."""

    mode: str
    setting: Setting
    executor: str = "single"
    duration: float = 0.0
    counts: dict[str, Any] = field(default_factory=dict)
    latency: dict[str, Any] = field(default_factory=dict)
    cpu_percent: dict[str, float] = field(default_factory=dict)
    cpu_steady_percent: dict[str, float] = field(default_factory=dict)
    steal_percent: float = float("nan")
    notes: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        c = self.counts
        p99 = self.latency.get("latency_p99_ms")
        return {
            "mode": self.mode, "executor": self.executor, "window": self.setting.window,
            "lag": self.setting.lag_samples,
            "publish_rate": self.setting.publish_rate, "tick": self.setting.tick,
            "duration_s": round(self.duration, 2), "dropped": c.get("dropped"),
            "latency_p50_ms": self.latency.get("latency_p50_ms"), "latency_p99_ms": p99,
            "meets_latency_target": p99 is not None and p99 <= LATENCY_TARGET_MS,
            "cpu_percent": self.cpu_percent, "cpu_steady_percent": self.cpu_steady_percent,
            "steal_percent": self.steal_percent, "counts": c, "latency": self.latency,
            "notes": self.notes,
        }


def _start(name: str, args: list[str], env: dict[str, str], logdir: Path) -> Process:
    log = open(logdir / f"{name}.log", "w+b")  # noqa: SIM115 (closed by the caller)
    popen = subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT)
    return Process(name, popen, log)


def _stop(process: Process, sig: int = signal.SIGINT, timeout: float = 15.0) -> None:
    if process.popen.poll() is None:
        process.popen.send_signal(sig)
        try:
            process.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.popen.kill()
            process.popen.wait()


def _result(process: Process) -> dict[str, Any]:
    for line in process.output().splitlines():
        if line.startswith(RESULT_MARK):
            return json.loads(line[len(RESULT_MARK):])
    raise RuntimeError(f"{process.name} printed no result:\n{process.output()[-3000:]}")


class Probe:
    """Reads ``/diagnostics`` and the stamps of the batches between the nodes, and reads the
    solver's estimates as a controller taking the payload would (serialised, counted only:
    the solver builds what it publishes only while someone reads it)."""

    def __init__(self, stage_latency: bool, domain_id: int) -> None:
        import rclpy
        from diagnostic_msgs.msg import DiagnosticArray
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.node import Node

        from inertial_id.nodes.common import pipeline_qos

        self.context = rclpy.Context()
        rclpy.init(context=self.context, domain_id=domain_id)
        self.node = Node("throughput_probe", context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.status: dict[str, dict[str, str]] = {}
        self.history: list[tuple[float, dict[str, str]]] = []  # solver snapshots
        self.stage: dict[str, deque[float]] = {"gatherer_output": deque(maxlen=SOLVER_WINDOW),
                                               "kinematics_output": deque(maxlen=SOLVER_WINDOW)}
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self._diagnostics, 100)
        from inertial_id.msg import InertialParameters

        self.estimates = 0
        self.node.create_subscription(InertialParameters, "/solver/parameters",
                                      self._estimate, 10, raw=True)
        if stage_latency:
            from inertial_id.msg import JointSamples, SensorSamples

            self.node.create_subscription(JointSamples, "joint_samples",
                                          self._stamps("gatherer_output"), pipeline_qos())
            self.node.create_subscription(SensorSamples, "sensor_samples",
                                          self._stamps("kinematics_output"), pipeline_qos())

    def _estimate(self, raw: bytes) -> None:
        self.estimates += 1

    def _diagnostics(self, msg: Any) -> None:
        for status in msg.status:
            node = status.name.split(":")[0]
            values = {kv.key: kv.value for kv in status.values}
            values["_level"] = str(int.from_bytes(status.level, "little")
                                   if isinstance(status.level, bytes) else status.level)
            values["_message"] = status.message
            self.status[node] = values
            if node == "solver":
                self.history.append((time.monotonic(), values))

    def _stamps(self, stage: str) -> Callable[[Any], None]:
        def record(msg: Any) -> None:
            # The header carries the last sample's stamp; the batch's samples are one wrench
            # period apart (reading every stamp would cost the probe more CPU than a node).
            now = self.node.get_clock().now().nanoseconds * 1e-9
            last = now - (msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec)
            n = len(msg.stamps)
            self.stage[stage].extend(last + np.arange(n - 1, -1, -1) / WRENCH_RATE)

        return record

    def spin(self, seconds: float, until: Callable[[], bool] = lambda: False) -> bool:
        return spin_until(self.executor, seconds, until)

    def count(self, node: str, key: str) -> int:
        return int(float(self.status.get(node, {}).get(key, "0")))

    def close(self) -> None:
        import rclpy

        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)


def _percentiles(values: Sequence[float]) -> dict[str, float]:
    if not values:
        return {}
    p50, p99 = np.percentile(np.asarray(values), [50, 99]) * 1e3
    return {"p50_ms": round(float(p50), 2), "p99_ms": round(float(p99), 2)}


def run_pipeline(mode: str, setting: Setting, duration: float, env: dict[str, str],
                 executor: str, stage_latency: bool,
                 solver: dict[str, Any] | None = None) -> Run:
    """One run: start, measure ``duration`` s, stop the simulator, drain, read the counters.

    ``executor``: ``single`` runs the node executables as shipped in separate processes
    (they spin rclpy's EventsExecutor where the distribution has it:
    :func:`inertial_id.nodes.compat.make_executor`) and a SingleThreadedExecutor in the
    composed process; ``events`` runs the same node classes under rclpy's EventsExecutor
    through this script, in both modes. ``solver``: solver parameter values (the separate
    node executables only).
    """
    from inertial_id.core.simulation import bundled_urdf_path

    run = Run(mode, setting, executor)
    probe = Probe(stage_latency, int(env["ROS_DOMAIN_ID"]))
    logdir = Path(tempfile.mkdtemp(prefix="throughput_"))
    spec = setting.spec
    child = [sys.executable, str(Path(__file__).resolve()), "--executor", executor, "--child"]
    processes: dict[str, Process] = {}
    try:
        if mode == "separate":
            urdf = f"urdf_path:={bundled_urdf_path()}"
            params = {"gatherer": [urdf, *(f"{k}:={v}" for k, v in
                                           setting.gatherer_parameters().items())],
                      "kinematics": [urdf],
                      "solver": [f"{k}:={v}" for k, v in (solver or {}).items()]}
            for name in NODES:
                args = [str(BIN / f"inertial_id_{name}"), "--ros-args"]
                for p in params[name]:
                    args += ["-p", p]
                if executor != "single":
                    args = [*child, name, spec]
                processes[name] = _start(name, args, env, logdir)
            if not probe.spin(60.0, lambda: all(n in probe.status for n in NODES)):
                raise RuntimeError("the nodes published no diagnostics in 60 s")
            processes["simulator"] = _start("simulator", [*child, "simulator", spec], env,
                                            logdir)
            source = processes["simulator"]
        elif mode == "one_process":
            config = logdir / "one_process.yaml"
            config.write_text(yaml.safe_dump({
                "/**/gatherer": {"ros__parameters": setting.gatherer_parameters()},
                "/**/solver": {"ros__parameters": dict(solver or {})}}))
            processes["pipeline"] = _start("pipeline", [
                str(BIN / "inertial_id_pipeline"), f"--urdf-path={bundled_urdf_path()}",
                "--ros-args", "--params-file", str(config)], env, logdir)
            if not probe.spin(60.0, lambda: all(n in probe.status for n in NODES)):
                raise RuntimeError("the pipeline published no diagnostics in 60 s")
            processes["simulator"] = _start("simulator", [*child, "simulator", spec], env,
                                            logdir)
            source = processes["simulator"]
        else:
            processes["composed"] = _start("composed", [*child, "composed", spec], env, logdir)
            source = processes["composed"]
        if not probe.spin(90.0, lambda: probe.count("gatherer", "wrenches_received") > 0):
            raise RuntimeError("no wrench reached the gatherer in 90 s:\n"
                               + source.output()[-3000:])
        pids = {name: p.popen.pid for name, p in processes.items()}
        pids["probe"] = os.getpid()
        cpu0 = {name: cpu_seconds(pid) for name, pid in pids.items()}
        steal0 = cpu_steal()
        t0 = time.monotonic()
        probe.spin(min(STEADY_AFTER, 0.5 * duration))
        t_steady, cpu_steady = time.monotonic(), {name: cpu_seconds(p) for name, p in pids.items()}
        probe.spin(max(0.0, t0 + duration - t_steady))
        t1 = time.monotonic()
        run.duration = t1 - t0
        cpu1 = {name: cpu_seconds(pid) for name, pid in pids.items()}
        run.cpu_percent = {name: round(100.0 * (cpu1[name] - cpu0[name]) / run.duration, 1)
                           for name in pids}
        run.cpu_steady_percent = {
            name: round(100.0 * (cpu1[name] - cpu_steady[name]) / (t1 - t_steady), 1)
            for name in pids}
        steal1 = cpu_steal()
        run.steal_percent = round(100.0 * (steal1[0] - steal0[0])
                                  / max(1, steal1[1] - steal0[1]), 1)
        solver_final = dict(probe.status.get("solver", {}))
        stage = {k: list(v) for k, v in probe.stage.items()}
        # Stop the simulator; the rest drains until the counters stop moving.
        source.popen.send_signal(signal.SIGINT)
        if mode != "composed":
            source.popen.wait(timeout=30)
        deadline = time.monotonic() + 30.0
        while time.monotonic() < deadline:
            before = [probe.count(n, k) for n, k in (("gatherer", "samples_published"),
                                                     ("kinematics", "samples_published"),
                                                     ("solver", "samples_received"))]
            probe.spin(2.5)
            after = [probe.count(n, k) for n, k in (("gatherer", "samples_published"),
                                                    ("kinematics", "samples_published"),
                                                    ("solver", "samples_received"))]
            if before == after:
                break
        else:
            run.notes.append("the counters were still moving 30 s after the simulator stopped")
        if mode == "composed":
            source.popen.send_signal(signal.SIGINT)
            source.popen.wait(timeout=30)
        sim = _result(source)
        run.counts = _counts(probe, sim, setting)
        run.latency = _latency(probe, solver_final, stage, setting, t0)
        for name, process in processes.items():
            if process.popen.poll() not in (None, 0):
                run.notes.append(f"{name} exited with {process.popen.returncode}")
    except BaseException:
        print(f"the processes' logs are in {logdir}", file=sys.stderr)
        raise
    else:
        shutil.rmtree(logdir, ignore_errors=True)
    finally:
        for name in ("simulator", "composed", "pipeline", *NODES):
            if name in processes:
                _stop(processes[name])
                processes[name].log.close()
        probe.close()
    return run


def _counts(probe: Probe, sim: dict[str, Any], setting: Setting) -> dict[str, Any]:
    g, k, s = (probe.status.get(n, {}) for n in NODES)
    sent_w, sent_j = int(sim["sent"]["wrench"]), int(sim["sent"]["joint"])
    elapsed = float(sim["stop"]) - float(sim["start"] or sim["stop"])
    g_w, g_j = probe.count("gatherer", "wrenches_received"), probe.count(
        "gatherer", "joint_states_received")
    g_out = probe.count("gatherer", "samples_published")
    k_in, k_out = probe.count("kinematics", "samples_received"), probe.count(
        "kinematics", "samples_published")
    s_in = probe.count("solver", "samples_received")
    gatherer_dropped = {key[len("dropped_"):]: int(v) for key, v in g.items()
                        if key.startswith("dropped_")}
    # Wrenches the gatherer still holds when the stream ends: the last half window, by design.
    dropped_wrenches = sum(v for key, v in gatherer_dropped.items()
                           if key.startswith("wrench") or key == "resets")
    held = g_w - g_out - dropped_wrenches
    stages = {
        "simulator_to_gatherer_wrench": sent_w - g_w,
        "simulator_to_gatherer_joint_state": sent_j - g_j,
        "gatherer_internal": dropped_wrenches,
        "gatherer_to_kinematics": g_out - k_in,
        "kinematics_internal": k_in - k_out,
        "kinematics_to_solver": k_out - s_in,
    }
    return {
        "simulator_published": {"wrench": sent_w, "joint_state": sent_j,
                                "duration_x_rate_wrench": round(elapsed * WRENCH_RATE),
                                "duration_x_rate_joint_state": round(elapsed * JOINT_STATE_RATE)},
        "gatherer_received": {"wrench": g_w, "joint_state": g_j},
        "gatherer_published": g_out,
        "gatherer_dropped_by_reason": gatherer_dropped,
        "gatherer_held_at_end": held,
        "kinematics_received": k_in,
        "kinematics_published": k_out,
        "solver_received": s_in,
        "solver_used": int(float(s.get("samples_used", "0"))),
        "dropped_per_stage": stages,
        # Every wrench sample lost between the simulator and the solver (not counting the
        # last half window the gatherer holds when the stream stops).
        "dropped": sent_w - s_in - held,
        "solver_status": s.get("_message", ""),
        "gatherer_status": g.get("_message", ""),
        "kinematics_status": k.get("_message", ""),
    }


def _latency(probe: Probe, final: dict[str, str], stage: dict[str, list[float]],
             setting: Setting, t0: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "latency_p99_ms" in final:
        out["latency_p50_ms"] = float(final["latency_p50_ms"])
        out["latency_p99_ms"] = float(final["latency_p99_ms"])
    # Each snapshot covers the last SOLVER_WINDOW samples; once the start-up (first SDP solve,
    # cvxpy compilation) has left that window, the worst snapshot is the worst 20 s stretch.
    steady = [float(v["latency_p99_ms"]) for t, v in probe.history
              if "latency_p99_ms" in v and t - t0 > SOLVER_WINDOW / WRENCH_RATE + 2.0]
    if steady:
        out["latency_p99_worst_window_ms"] = max(steady)
    out["stages_ms"] = {name: _percentiles(values) for name, values in stage.items()}
    out["design_ms"] = {k: round(v, 2) for k, v in setting.design_latency_ms().items()}
    return out


# ----------------------------------------------------------------------------------------------
# the core, without ROS


def core_cost(seconds: float = 20.0, batch: int = 20, repeats: int = 3) -> dict[str, float]:
    """Microseconds per sample of each core stage on simulated 1 kHz / 500 Hz data."""
    from inertial_id.core.estimation.online import OnlineEstimator
    from inertial_id.core.estimation.payload import PayloadIdentifier
    from inertial_id.core.gathering.gatherer import Gathering
    from inertial_id.core.kinematics import SensorKinematics
    from inertial_id.core.simulation import (
        BUNDLED_HOME,
        BUNDLED_SENSOR_FRAME,
        FourierTrajectory,
        PayloadSimulation,
        bundled_urdf_path,
    )

    urdf = bundled_urdf_path()
    kinematics = SensorKinematics(urdf, BUNDLED_SENSOR_FRAME)
    sim = PayloadSimulation(kinematics, FourierTrajectory.random(BUNDLED_HOME, seed=1))
    joint_t = np.arange(0.0, seconds, 1.0 / JOINT_STATE_RATE)
    wrench_t = np.arange(0.0, seconds, 1.0 / WRENCH_RATE)
    q, qd = sim.joint_states(joint_t)
    wrenches = sim.wrench(wrench_t)
    names = kinematics.joint_names
    best: dict[str, list[float]] = {}

    def note(key: str, value: float) -> None:
        best.setdefault(key, []).append(value)

    for _ in range(repeats):
        gathering = Gathering(urdf)
        batches = []
        j = 0
        start = time.perf_counter()
        for k, t in enumerate(wrench_t):
            while j < joint_t.size and joint_t[j] <= t:
                gathering.add_joint_state(joint_t[j], names, q[j], qd[j])
                j += 1
            gathering.add_wrench(t, wrenches[k])
            if k % batch == batch - 1:
                ready = gathering.pop_ready()
                if len(ready):
                    batches.append(ready)
        n = sum(len(b) for b in batches)
        note("gathering_add_pop", (time.perf_counter() - start) / n * 1e6)
        start = time.perf_counter()
        motion = [kinematics.compute(b.position, b.velocity, b.acceleration) for b in batches]
        note("kinematics_compute", (time.perf_counter() - start) / n * 1e6)
        identifier = PayloadIdentifier()
        start = time.perf_counter()
        for b, (twist, proper) in zip(batches, motion, strict=True):
            identifier.add(twist, proper, b.wrench)
        note("regressor_accumulate", (time.perf_counter() - start) / n * 1e6)
        online = OnlineEstimator()
        start = time.perf_counter()
        for b, (twist, proper) in zip(batches, motion, strict=True):
            online.add(b.times, twist, proper, b.wrench, b.wrench_raw)
        note("online_add", (time.perf_counter() - start) / n * 1e6)
        online.solve()  # the first solve compiles the problem
        start = time.perf_counter()
        online.solve()
        note("solve_ms", (time.perf_counter() - start) * 1e3)
        # With an estimate, add also predicts the wrench and runs the contact monitor.
        start = time.perf_counter()
        for b, (twist, proper) in zip(batches, motion, strict=True):
            online.add(b.times + seconds, twist, proper, b.wrench, b.wrench_raw)
        note("online_add_monitoring", (time.perf_counter() - start) / n * 1e6)
    out = {key: round(float(np.median(v)), 2) for key, v in best.items()}
    out["kinematics_regressor_accumulate"] = round(
        out["kinematics_compute"] + out["regressor_accumulate"], 2)
    out["kinematics_online_add"] = round(
        out["kinematics_compute"] + out["online_add_monitoring"], 2)
    out["batch_samples"] = batch
    out["repeats"] = repeats
    return out


# ----------------------------------------------------------------------------------------------
# report


def _label(run: Run) -> str:
    return f"{run.mode} {run.executor} {run.setting.label}"


def _print_runs(runs: list[Run]) -> None:
    print(f"\n{'run':58} {'sent':>6} {'solver':>6} {'drop':>6} "
          f"{'p50 ms':>7} {'p99 ms':>7} {'worst':>7} {'steal':>6}  cpu % (steady: after "
          f"{STEADY_AFTER:g} s)")
    for run in runs:
        c, lat = run.counts, run.latency
        cpu = " ".join(f"{k} {v:.0f} ({run.cpu_steady_percent.get(k, float('nan')):.1f})"
                       for k, v in run.cpu_percent.items())
        print(f"{_label(run):58} {c['simulator_published']['wrench']:6d} "
              f"{c['solver_received']:6d} {c['dropped']:6d} "
              f"{lat.get('latency_p50_ms', float('nan')):7.2f} "
              f"{lat.get('latency_p99_ms', float('nan')):7.2f} "
              f"{lat.get('latency_p99_worst_window_ms', float('nan')):7.2f} "
              f"{run.steal_percent:6.1f}  {cpu}")
    print("\ndrops per stage and latency breakdown")
    for run in runs:
        c, lat = run.counts, run.latency
        print(f"  {_label(run)}")
        print(f"    published {c['simulator_published']}, gatherer received "
              f"{c['gatherer_received']}, published {c['gatherer_published']} "
              f"(dropped {c['gatherer_dropped_by_reason']}, held at end "
              f"{c['gatherer_held_at_end']}), kinematics {c['kinematics_received']} -> "
              f"{c['kinematics_published']}, solver {c['solver_received']}")
        print(f"    lost per stage {c['dropped_per_stage']}")
        print(f"    stage latency {lat['stages_ms']}; by design {lat['design_ms']}")
        for note in run.notes:
            print(f"    note: {note}")


def free_domain(first: int, tries: int = 20) -> int:
    """A DDS domain id, from ``first`` on, in which no pipeline node runs yet."""
    import rclpy
    from rclpy.node import Node

    for k in range(tries):
        domain = (first - 1 + k) % 100 + 1
        context = rclpy.Context()
        rclpy.init(context=context, domain_id=domain)
        try:
            node = Node("throughput_domain_check", context=context)
            time.sleep(1.5)  # discovery
            busy = {"simulator", *NODES} & set(node.get_node_names())
            node.destroy_node()
        finally:
            rclpy.try_shutdown(context=context)
        if not busy:
            return domain
        print(f"ROS domain {domain} already has {sorted(busy)}: trying the next one")
    raise RuntimeError(f"no free ROS domain among {tries} from {first}")


def ros_versions() -> dict[str, str]:
    """The ROS 2 distribution and rclpy version this process runs."""
    from inertial_id.nodes.compat import rclpy_version, ros_distro

    return {"distro": ros_distro(), "rclpy": ".".join(map(str, rclpy_version()))}


DISTRO_VENVS = {"kilted": ".venv", "jazzy": ".venv-jazzy"}


def lost_between_processes(counts: dict[str, Any]) -> int:
    """Samples lost on the way from one process to the next (not the gatherer's drops by
    design before its first full joint window)."""
    return sum(int(v) for k, v in counts.get("dropped_per_stage", {}).items() if "_to_" in k)


def compare_distros(args: argparse.Namespace) -> int:
    """Run this script per distribution with its environment's python, alternating
    ``args.repeat`` rounds; print every run side by side."""
    root = Path(__file__).resolve().parents[1]
    distros = [d.strip() for d in args.distro.split(",") if d.strip()]
    unknown = set(distros) - set(DISTRO_VENVS)
    if unknown:
        raise SystemExit(f"--distro: unknown {sorted(unknown)}; use {sorted(DISTRO_VENVS)}")
    pythons = {d: root / DISTRO_VENVS[d] / "bin" / "python" for d in distros}
    missing = [f"{d} ({p.parent.parent.name}: make venv ROS_DISTRO={d})"
               for d, p in pythons.items() if not p.is_file()]
    if missing:
        raise SystemExit("no development environment for " + ", ".join(missing))
    child_args = ["--duration", str(args.duration), "--settings", args.settings,
                  "--tick", str(args.tick), "--executor", args.executor, "--no-core"]
    child_args += (["--separate"] if args.separate else ["--composed"] if args.composed
                   else ["--core-only"] if args.core_only else [])
    child_args += ["--no-stage-latency"] if args.no_stage_latency else []
    # The ROS wheels' start-up hook re-launched this python with its venv's libraries on
    # LD_LIBRARY_PATH and a flag saying so: the other environment's python must start clean.
    env = {k: v for k, v in os.environ.items() if k != "_ROS_WHEELS_BOOTSTRAP_COMPLETE"}
    env["LD_LIBRARY_PATH"] = os.pathsep.join(
        part for part in env.get("LD_LIBRARY_PATH", "").split(os.pathsep)
        if part and not part.startswith(sys.prefix + os.sep))
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="throughput_distros_") as tmp:
        for round_ in range(args.repeat):
            for distro in distros:
                out = Path(tmp) / f"{distro}_{round_}.json"
                print(f"\n===== {distro}, round {round_ + 1} of {args.repeat} =====", flush=True)
                subprocess.run([str(pythons[distro]), str(Path(__file__).resolve()),
                                *child_args, "--json", str(out)], check=True, env=env)
                doc = json.loads(out.read_text())
                for run in doc["runs"]:
                    rows.append({"distro": distro, "round": round_ + 1,
                                 "rclpy": doc["ros"]["rclpy"], **run})
    print(f"\n{'distro':7} {'rclpy':6} {'round':>5} {'run':44} {'sent':>6} {'lost':>5} "
          f"{'p50 ms':>7} {'p99 ms':>7} {'steal %':>7}")
    for row in rows:
        counts = row["counts"]
        label = (f"{row['mode']} {row['executor']} w{row['window']} lag{row['lag']} "
                 f"rate{row['publish_rate']:g}")
        print(f"{row['distro']:7} {row['rclpy']:6} {row['round']:5d} {label:44} "
              f"{counts['simulator_published']['wrench']:6d} "
              f"{lost_between_processes(counts):5d} {row['latency_p50_ms']:7.2f} "
              f"{row['latency_p99_ms']:7.2f} {row['steal_percent']:7.1f}")
    print("lost: samples lost between the processes; the gatherer's drops before its first "
          "full joint window are by design and not counted")
    if args.json:
        args.json.write_text(json.dumps({"runs": rows}, indent=2, default=str) + "\n")
        print(f"wrote {args.json}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=60.0,
                        help="seconds measured per run (default 60; latency percentiles cover "
                        "the last 20 s, so use >= 25 for steady-state numbers)")
    parser.add_argument("--json", type=Path, help="write the results to this JSON file")
    phase = parser.add_mutually_exclusive_group()
    phase.add_argument("--composed", action="store_true",
                       help="only the composed runs (all nodes in one process, one executor)")
    phase.add_argument("--separate", action="store_true",
                       help="only the runs with the nodes as separate processes")
    phase.add_argument("--one-process", action="store_true",
                       help="only the runs of the shipped one-process mode (the pipeline "
                       "executable: the three nodes linked in one process, the simulator "
                       "in another)")
    phase.add_argument("--core-only", action="store_true", help="only the in-process core cost")
    parser.add_argument("--settings", default="41:2:200,15:-1:50",
                        help="gatherer settings to try, window:lag:publish_rate[:tick] comma "
                        "separated, lag -1: half the window (default: 41:2:200, the defaults, "
                        "and 15:-1:50, the previous ones)")
    parser.add_argument("--tick", type=float, default=0.005,
                        help="simulator publishing period, s (default 0.005, its default)")
    parser.add_argument("--executor", default="single",
                        help="comma separated: single (separate processes: the executables as "
                        "shipped, which spin rclpy's EventsExecutor where the distribution has "
                        "it; composed: a SingleThreadedExecutor) and/or events (the same nodes "
                        "under rclpy's EventsExecutor through this script, in both modes)")
    parser.add_argument("--no-stage-latency", action="store_true",
                        help="do not subscribe to the batches between the nodes")
    parser.add_argument("--no-core", action="store_true",
                        help="skip the in-process core cost (it does not depend on ROS)")
    parser.add_argument("--distro",
                        help="comma separated ROS 2 distributions (kilted, jazzy): run once "
                        "per distribution in its development environment and compare")
    add_solver_option(parser)
    parser.add_argument("--repeat", type=int, default=1,
                        help="with --distro: rounds of one run per distribution (default 1)")
    parser.add_argument("--child", nargs=2, metavar=("KIND", "SETTING"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.distro and not args.child:
        return compare_distros(args)
    settings = parse_settings(args.settings, args.tick)
    executors = [e.strip() for e in args.executor.split(",")]
    if set(executors) - {"single", "events"}:
        parser.error("--executor takes single and/or events")
    if args.child:
        return _child(args.child[0], parse_settings(args.child[1], args.tick)[0], executors[0])
    solver = solver_values(args, parser)
    if solver and not ((args.separate or args.one_process) and executors == ["single"]):
        parser.error("--solver needs --separate or --one-process and the node executables "
                     "(--executor single)")
    if args.one_process and executors != ["single"]:
        parser.error("--one-process runs the pipeline executable (--executor single)")

    load_before = os.getloadavg()
    modes = [] if args.core_only else (["composed"] if args.composed else
                                       ["separate"] if args.separate else
                                       ["one_process"] if args.one_process else
                                       ["separate", "one_process", "composed"])
    runs: list[Run] = []
    if modes:
        os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
        first = int(os.environ.get("ROS_DOMAIN_ID", os.getpid() % 100 + 1))
        os.environ["ROS_DOMAIN_ID"] = str(free_domain(first))
        env = dict(os.environ)
        print(f"ROS_DOMAIN_ID={env['ROS_DOMAIN_ID']}, "
              f"ROS_AUTOMATIC_DISCOVERY_RANGE={env['ROS_AUTOMATIC_DISCOVERY_RANGE']}")
    for setting in settings:
        for executor in executors:
            for mode in modes:
                print(f"{mode} {executor}: {setting.label}, {args.duration:g} s ...",
                      flush=True)
                runs.append(run_pipeline(mode, setting, args.duration, env, executor,
                                         not args.no_stage_latency, solver))
    if runs:
        _print_runs(runs)
    core: dict[str, Any] = {}
    if not args.no_core:
        print("\ncore cost per sample (us), in-process, no ROS ...", flush=True)
        core = core_cost()
        for key, value in core.items():
            print(f"  {key:34} {value}")
        verdict = ("meets" if core["kinematics_regressor_accumulate"] <= CORE_TARGET_US
                   else "misses")
        print(f"  kinematics + regressor + accumulate {verdict} the {CORE_TARGET_US:g} us "
              "target")
    meeting = [_label(r) for r in runs
               if r.latency.get("latency_p99_ms", np.inf) <= LATENCY_TARGET_MS]
    print(f"\nlatency p99 <= {LATENCY_TARGET_MS:g} ms: {', '.join(meeting) or 'no setting'}")
    for run in runs:
        steady = sum(v for k, v in run.cpu_steady_percent.items() if k in PIPELINE)
        verdict = "meets" if steady <= CPU_TARGET_PERCENT else "misses"
        print(f"pipeline CPU, steady: {steady:.1f} % of a core, {verdict} the "
              f"{CPU_TARGET_PERCENT:g} % target: {_label(run)}")
    load_after = os.getloadavg()
    print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f} "
          f"({os.cpu_count()} cores; other work on the machine shifts every timing)")
    if args.json:
        head = runs[0].summary() if runs else {}
        doc = {
            "headline_run": _label(runs[0]) if runs else None,
            "dropped": head.get("dropped"),
            "latency_p50_ms": head.get("latency_p50_ms"),
            "latency_p99_ms": head.get("latency_p99_ms"),
            "cpu_percent": head.get("cpu_percent", {}),
            "core_us_per_sample": core,
            "targets": {"latency_p99_ms": LATENCY_TARGET_MS,
                        "pipeline_cpu_steady_percent": CPU_TARGET_PERCENT,
                        "kinematics_regressor_accumulate_us": CORE_TARGET_US},
            "meets_latency_target": meeting,
            "rates_hz": {"wrench": WRENCH_RATE, "joint_state": JOINT_STATE_RATE},
            "ros": ros_versions(),
            "machine": {"cpus": os.cpu_count(), "loadavg_before": load_before[0],
                        "loadavg_after": load_after[0]},
            "runs": [r.summary() for r in runs],
        }
        args.json.write_text(json.dumps(doc, indent=2, default=str) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
