#!/usr/bin/env python3
"""Soak run: 10^6 wrench samples through the pipeline, with memory watched.

Two ways to feed it (``--mode``):

- ``replay`` (default): a synthetic bag of ``samples / 1000`` s (1 kHz wrenches, 500 Hz joint
  states, the bundled arm and payload) is written first, in a child process and in chunks so
  its memory does not count, then ``inertial-id replay``'s :func:`inertial_id.tools.replay.replay`
  runs over it exactly as the command does. Writing 10^6 samples takes a few minutes. A thread
  samples this process's RSS every 0.2 s; "10 %" is 10 % of the replay's wall time (replay
  runs at a steady rate).
- ``core``: no bag; the simulation feeds :class:`~inertial_id.core.pipeline.PayloadPipeline`
  (the object replay runs) chunk by chunk, in time order, processing every
  ``PROCESS_PERIOD`` s of sample time (batches like the gatherer's). RSS is read at exactly
  10 % and 100 % of the samples.

Reported: peak RSS (``resource.getrusage``), RSS at 10 % and at the end and the growth between
them (absolute and per 10^5 samples), what still grows by design (the pipeline's history:
one row per processed batch and per solve), throughput, and the final estimate's errors.
RSS moves by ~10 MB as data chunks are allocated and freed, so "at 10 %" is the median of the
readings between 8 and 12 % of the run and "at the end" the median of the last 5 %.

    python bench/soak.py                                  # 10^6 samples through a bag
    python bench/soak.py --mode core --samples 200000 --json soak.json
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

WRENCH_RATE = 1000.0
JOINT_STATE_RATE = 500.0
CHUNK_SECONDS = 10.0
PROCESS_PERIOD = 0.1  # s of sample time between two passes of the core pipeline
START_TIME = 1_700_000_000.0


def rss_mb() -> float:
    """Resident set size of this process now, MB (``/proc/self/status`` VmRSS)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    return float("nan")


def peak_rss_mb() -> float:
    """Peak resident set size of this process, MB (``ru_maxrss`` is in kB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _simulation() -> Any:
    from inertial_id.core.kinematics import SensorKinematics
    from inertial_id.core.simulation import (
        BUNDLED_HOME,
        BUNDLED_SENSOR_FRAME,
        FourierTrajectory,
        PayloadSimulation,
        bundled_urdf_path,
    )

    kinematics = SensorKinematics(bundled_urdf_path(), BUNDLED_SENSOR_FRAME)
    return PayloadSimulation(kinematics, FourierTrajectory.random(BUNDLED_HOME, seed=1))


def chunks(samples: int) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                           np.ndarray]]:
    """Simulated data ``CHUNK_SECONDS`` at a time until ``samples`` wrenches: joint stamps,
    positions, velocities, wrench stamps, wrenches (stamps in s from ``START_TIME``)."""
    sim = _simulation()
    seconds = samples / WRENCH_RATE
    n_chunks = int(np.ceil(seconds / CHUNK_SECONDS))
    for c in range(n_chunks):
        begin = c * CHUNK_SECONDS
        wrench_k = np.arange(int(round(begin * WRENCH_RATE)),
                             min(samples, int(round((begin + CHUNK_SECONDS) * WRENCH_RATE))))
        joint_k = np.arange(int(round(begin * JOINT_STATE_RATE)),
                            int(round(wrench_k[-1] / WRENCH_RATE * JOINT_STATE_RATE)) + 1)
        joint_t, wrench_t = joint_k / JOINT_STATE_RATE, wrench_k / WRENCH_RATE
        position, velocity = sim.joint_states(joint_t)
        yield (START_TIME + joint_t, position, velocity, START_TIME + wrench_t,
               sim.wrench(wrench_t))


def events(joint_t: np.ndarray, wrench_t: np.ndarray) -> Iterator[tuple[bool, int]]:
    """``(is_joint, index)`` in stamp order (a joint state before a wrench of the same stamp)."""
    j = 0
    for k, t in enumerate(wrench_t):
        while j < joint_t.size and joint_t[j] <= t:
            yield True, j
            j += 1
        yield False, k


# ----------------------------------------------------------------------------------------------
# core mode


def run_core(samples: int) -> dict[str, Any]:
    from inertial_id.core.errors import SampleError
    from inertial_id.core.estimation.online import OnlineEstimator
    from inertial_id.core.gathering.gatherer import Gathering
    from inertial_id.core.pipeline import PayloadPipeline
    from inertial_id.core.simulation import bundled_urdf_path

    sim = _simulation()
    pipeline = PayloadPipeline(Gathering(bundled_urdf_path()), sim.kinematics, OnlineEstimator())
    names = sim.kinematics.joint_names
    fed = messages = 0
    timeline = []
    next_process = -np.inf
    start = time.perf_counter()
    for joint_t, position, velocity, wrench_t, wrench in chunks(samples):
        for is_joint, k in events(joint_t, wrench_t):
            try:
                if is_joint:
                    t = joint_t[k]
                    pipeline.add_joint_state(t, names, position[k], velocity[k])
                else:
                    t = wrench_t[k]
                    pipeline.add_wrench(t, wrench[k])
                    fed += 1
            except SampleError as exc:
                raise RuntimeError(f"simulated data rejected: {exc}") from exc
            messages += 1
            if t >= next_process:
                pipeline.process()
                next_process = t + PROCESS_PERIOD
            if messages % 1500 == 0:
                timeline.append((fed / samples, rss_mb()))
    estimate = pipeline.finish()
    elapsed = time.perf_counter() - start
    return {"pipeline": pipeline, "estimate": estimate, "elapsed": elapsed, "fed": fed,
            "messages": messages, **_rss_summary(timeline)}


def _rss_summary(timeline: list[tuple[float, float]]) -> dict[str, Any]:
    """RSS around 10 % and over the last 5 % of the run (medians), and a coarse timeline;
    ``timeline`` holds (fraction of the run done, RSS MB)."""
    fraction = np.array([f for f, _ in timeline])
    rss = np.array([r for _, r in timeline])
    around_10 = rss[(fraction >= 0.08) & (fraction <= 0.12)]
    last = rss[fraction >= 0.95]
    step = max(1, len(timeline) // 20)
    return {"rss_10": float(np.median(around_10)), "rss_end": float(np.median(last)),
            "timeline": [(round(f, 3), round(r, 1)) for f, r in timeline[::step]]}


# ----------------------------------------------------------------------------------------------
# replay mode


def write_bag(path: Path, samples: int) -> None:
    """The synthetic bag, written chunk by chunk (joint states, wrenches, the URDF)."""
    from inertial_id.core.simulation import BUNDLED_SENSOR_FRAME, bundled_urdf_path
    from inertial_id.io.bags import (
        JOINT_STATE,
        STRING,
        WRENCH,
        joint_state_message,
        string_message,
        wrench_message,
    )
    from inertial_id.io.bags import write_bag as write

    names = _simulation().kinematics.joint_names

    def messages() -> Iterator[tuple[str, str, float, Any]]:
        yield ("/robot_description", STRING, START_TIME,
               string_message(Path(bundled_urdf_path()).read_text()))
        for joint_t, position, velocity, wrench_t, wrench in chunks(samples):
            for is_joint, k in events(joint_t, wrench_t):
                if is_joint:
                    yield ("/joint_states", JOINT_STATE, joint_t[k] + 1e-4,
                           joint_state_message(joint_t[k], names, position[k], velocity[k]))
                else:
                    yield ("/wrench", WRENCH, wrench_t[k] + 1e-4,
                           wrench_message(wrench_t[k], BUNDLED_SENSOR_FRAME, wrench[k]))

    write(path, messages())


class RssSampler(threading.Thread):
    """Samples this process's RSS every ``period`` s while it runs."""

    def __init__(self, period: float = 0.2) -> None:
        super().__init__(daemon=True)
        self.period = period
        self.samples: list[tuple[float, float]] = []
        self._halt = threading.Event()

    def run(self) -> None:
        start = time.perf_counter()
        while not self._halt.is_set():
            self.samples.append((time.perf_counter() - start, rss_mb()))
            self._halt.wait(self.period)

    def stop(self) -> None:
        self._halt.set()
        self.join()

    def fractions(self) -> list[tuple[float, float]]:
        """(fraction of the sampling time, RSS MB)."""
        end = self.samples[-1][0] or 1.0
        return [(t / end, rss) for t, rss in self.samples]


def run_replay(samples: int, workdir: Path) -> dict[str, Any]:
    from inertial_id.tools.replay import ReplayOptions, replay

    bag = workdir / "soak_bag"
    start = time.perf_counter()
    subprocess.run([sys.executable, str(Path(__file__).resolve()), "--write-bag", str(bag),
                    "--samples", str(samples)], check=True)
    written = time.perf_counter() - start
    size = sum(f.stat().st_size for f in bag.rglob("*") if f.is_file())
    sampler = RssSampler()
    sampler.start()
    start = time.perf_counter()
    result = replay(ReplayOptions(bag, progress=False))
    elapsed = time.perf_counter() - start
    sampler.stop()
    return {"pipeline": result.pipeline, "estimate": result.estimate, "elapsed": elapsed,
            "fed": result.samples_processed, "dropped": result.dropped,
            **_rss_summary(sampler.fractions()),
            "bag_write_s": round(written, 1), "bag_mb": round(size / 1e6, 1)}


# ----------------------------------------------------------------------------------------------


def history_mb(pipeline: Any) -> float:
    """Approximate memory of the pipeline's history lists (grows with batches and solves)."""
    h = pipeline.history
    total = 0
    for name in vars(h):
        items = getattr(h, name)
        total += sys.getsizeof(items)
        total += sum(getattr(x, "nbytes", 0) + sys.getsizeof(x) for x in items)
    return total / 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=1_000_000,
                        help="wrench samples (1 kHz), default 10^6 (~1000 s of data)")
    parser.add_argument("--mode", choices=("replay", "core"), default="replay",
                        help="through a synthetic bag and replay (default), or the core "
                        "pipeline fed from the simulation in chunks")
    parser.add_argument("--json", type=Path, help="write the results to this JSON file")
    parser.add_argument("--write-bag", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.samples < 10_000:
        parser.error("--samples must be at least 10000")
    if args.write_bag:
        write_bag(args.write_bag, args.samples)
        return 0

    from inertial_id.core.metrics import parameter_errors
    from inertial_id.core.simulation import default_payload

    rss_start = rss_mb()
    workdir = Path(tempfile.mkdtemp(prefix="soak_"))
    try:
        out = run_replay(args.samples, workdir) if args.mode == "replay" else run_core(
            args.samples)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    pipeline, estimate = out.pop("pipeline"), out.pop("estimate")
    growth = out["rss_end"] - out["rss_10"]
    errors = None
    if estimate is not None:
        e = parameter_errors(estimate.pi, default_payload().pi)
        errors = {"mass_pct": round(e.mass_pct, 4), "com_mm": round(e.com_mm, 3),
                  "inertia_pct": round(e.inertia_pct, 2)}
    report = {
        "mode": args.mode,
        "samples": args.samples,
        "samples_processed": int(pipeline.samples),
        "samples_used": int(round(pipeline.online.samples)),
        "elapsed_s": round(out["elapsed"], 1),
        "us_per_sample": round(out["elapsed"] / max(out["fed"], 1) * 1e6, 1),
        "peak_rss_mb": round(peak_rss_mb(), 1),
        "rss_start_mb": round(rss_start, 1),
        "rss_at_10pct_mb": round(out["rss_10"], 1),
        "rss_at_end_mb": round(out["rss_end"], 1),
        "rss_growth_10_to_100pct_mb": round(growth, 1),
        "rss_growth_per_100k_samples_mb": round(growth / (0.9 * args.samples / 1e5), 2),
        "history_rows": {"batches": len(pipeline.history.batch_time),
                         "solves": len(pipeline.history.solve_time)},
        "history_mb": round(history_mb(pipeline), 1),
        "solve_failures": len(pipeline.solve_failures),
        "estimate_consistent": None if estimate is None else bool(
            estimate.physically_consistent),
        "estimate_errors": errors,
        "contacts": len(pipeline.online.contacts),
        # (start s since the first sample, duration s): the simulation has no contact
        "contact_intervals": [(round(float(c.start - START_TIME), 3),
                               round(float(c.end - c.start), 4))
                              for c in pipeline.online.contacts],
        "timeline": out["timeline"],
    }
    for key in ("bag_write_s", "bag_mb", "dropped"):
        if key in out:
            report[key] = out[key]
    for key, value in report.items():
        if key != "timeline":
            print(f"{key:34} {value}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
