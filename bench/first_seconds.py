#!/usr/bin/env python3
"""The first seconds of an estimate without ROS: the live path on sample time.

The demo's simulated arm (``config/demo.yaml``: 1 kHz wrench, 500 Hz joint states, 1.5 kg)
runs through the gatherer's core (:class:`~inertial_id.core.gathering.gatherer.Gathering`
with the node's defaults: the filter chosen from the data, the provisional filter's samples
meanwhile), the kinematics stage and the solver's estimation stage (its defaults, a solve
after every 5 ms batch), as the three nodes run them, with the batch's last stamp as the
clock. It prints, from the arm's first sample, when the first estimate came and from when on
mass and CoM (converged, within 1 % and 2 mm) and the inertia (converged, within 10 % of
the largest principal moment) held for good, as ``bench/first_estimate.py`` times them live;
here nothing of discovery, scheduling or CPU is in them. ``--trace`` prints the estimate
every 50 ms until 2 s.

``--cost`` also times each part of that path from 6 s of motion on (after the filter's
choice, the steady state) and prints it as the share of one core it would take at real
time: the gatherer's buffering of each message and its batch's filter, the kinematics stage
and the estimation stage (``time.perf_counter`` around each call; ROS not included).

    python bench/first_seconds.py --seeds 0,1,2
    python bench/first_seconds.py --cost --duration 16
    python bench/first_seconds.py --seeds 0,1,2 --solver bias_drift_prior=0
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: `bench` as a package

from bench._options import add_solver_option, solver_values  # noqa: E402
from inertial_id.core.estimation import sdp
from inertial_id.core.estimation.stage import EstimationStage
from inertial_id.core.gathering.gatherer import Gathering
from inertial_id.core.kinematics import SensorKinematics
from inertial_id.core.parameters import BodyParameters
from inertial_id.core.simulation import FourierTrajectory, PayloadSimulation, bundled_urdf_path
from inertial_id.core.stages import KinematicsStage
from inertial_id.params.settings import gatherer_kinematics, gatherer_settings, online_estimator
from inertial_id.params.spec import with_defaults
from inertial_id.params.table import SIMULATOR_PARAMS, SOLVER_PARAMS

ROOT = Path(__file__).resolve().parents[1]
TICK = 0.005  # s: the simulator's publishing period, one batch each
COST_FROM = 6.0  # s of motion from which --cost times the parts
COST_PARTS = ("buffering", "filter", "kinematics", "estimation")
MASS_TOLERANCE, COM_TOLERANCE, INERTIA_TOLERANCE = 0.01, 0.002, 0.10


def demo_simulation(seed: int) -> tuple[SensorKinematics, PayloadSimulation, BodyParameters]:
    """The simulator node's arm and payload with ``config/demo.yaml`` (noise ``seed``)."""
    demo = yaml.safe_load((ROOT / "config" / "demo.yaml").read_text())
    v = {p.name: p.default for p in SIMULATOR_PARAMS}
    v.update(demo["/**/simulator"]["ros__parameters"])
    kinematics = SensorKinematics(bundled_urdf_path(), v["sensor_frame"])
    trajectory = FourierTrajectory.random(v["home"], amplitude=v["amplitude"],
                                          period=v["period"], max_velocity=v["max_velocity"],
                                          seed=v["trajectory_seed"])
    truth = BodyParameters.from_mass_com_inertia(v["payload_mass"], v["payload_com"],
                                                 v["payload_inertia"])
    sim = PayloadSimulation(kinematics, trajectory, payload=truth,
                            offset=np.asarray(v["wrench_offset"], dtype=float),
                            force_noise_std=v["force_noise_std"],
                            torque_noise_std=v["torque_noise_std"],
                            joint_noise_std=v["joint_noise_std"], seed=seed)
    return kinematics, sim, truth


def first_seconds(seed: int, duration: float = 6.0, trace: bool = False,
                  cost: dict[str, float] | None = None,
                  solver: Mapping[str, Any] | None = None) -> dict[str, float]:
    """s from the first sample to the first estimate, to mass and CoM and to the inertia
    right and converged for good (nan: not within ``duration``); ``cost``, when given, gets
    each part's CPU time from :data:`COST_FROM` on (s, ``time.perf_counter``); ``solver``:
    solver parameter values other than the defaults."""
    kinematics, sim, truth = demo_simulation(seed)
    joint_t = np.arange(0.0, duration, 1.0 / 500.0)
    wrench_t = np.arange(0.0, duration, 1e-3)
    q, qd = sim.joint_states(joint_t)
    w = sim.wrench(wrench_t)
    urdf, values = bundled_urdf_path(), {"urdf_path": bundled_urdf_path()}
    gathering = Gathering(urdf, gatherer_settings(values), gatherer_kinematics(values).model(urdf))
    gathering.match(kinematics)
    motion_stage = KinematicsStage(kinematics)
    values = with_defaults(SOLVER_PARAMS, solver or {}, "solver")
    stage = EstimationStage(online_estimator(values), TICK,
                            solve_share=float(values["solve_share"]))
    names = list(gathering.joint_names)
    since = {"first": np.nan, "mass_com": np.nan, "inertia": np.nan}
    j = 0
    largest = float(np.linalg.eigvalsh(truth.inertia_com)[-1])
    marks = [0.0] * 5
    for k in range(0, wrench_t.size, 5):
        clock = wrench_t[k] + TICK
        marks[0] = time.perf_counter()
        while j < joint_t.size and joint_t[j] < clock:
            gathering.add_joint_state(joint_t[j], names, q[j], qd[j])
            j += 1
        for i in range(k, min(k + 5, wrench_t.size)):
            gathering.add_wrench(wrench_t[i], w[i])
        marks[1] = time.perf_counter()
        batch, choice, provisional = gathering.pop_ready(), gathering.choice, False
        if choice is None:
            batch, choice, provisional = (gathering.pop_provisional(),
                                          gathering.provisional_choice, True)
        marks[2] = time.perf_counter()
        motion = motion_stage.run(batch) if len(batch) else None
        marks[3] = marks[4] = time.perf_counter()
        if motion is not None and motion.samples is not None:
            b = motion.samples
            result = stage.add({
                "times": b.times, "twist": motion.twist,
                "proper_acceleration": motion.proper_acceleration, "wrench": b.wrench,
                "wrench_raw": b.wrench_raw, "acceleration_noise": b.acceleration_noise,
                "filter_span": choice.past_span, "angular_products": b.angular_products},
                clock, provisional)
            marks[4] = time.perf_counter()
        if cost is not None and wrench_t[k] >= COST_FROM:
            for part, start, end in zip(COST_PARTS, marks, marks[1:], strict=False):
                cost[part] = cost.get(part, 0.0) + end - start
        if motion is None or motion.samples is None:
            continue
        current = stage.current
        estimate = current.estimate
        if not result.solved or estimate is None:
            continue
        body, verdicts = estimate.body, current.verdicts
        if np.isnan(since["first"]):
            since["first"] = clock
        right = (abs(body.mass - truth.mass) < MASS_TOLERANCE * truth.mass
                 and np.all(np.abs(body.com - truth.com) < COM_TOLERANCE))
        _hold(since, "mass_com", verdicts.payload and right, clock)
        inertia_error = np.max(np.abs(body.inertia_com - truth.inertia_com))
        _hold(since, "inertia", verdicts.inertia and inertia_error < INERTIA_TOLERANCE * largest,
              clock)
        if trace and clock < 2.0 and round(clock * 1000) % 50 == 0:
            print(f"  {clock:5.3f} s  mass {body.mass:.4f} ± {estimate.std[0]:.4f} kg, CoM error "
                  f"{np.abs(body.com - truth.com).max() * 1e3:.2f} mm, std "
                  f"{estimate.com_std.max() * 1e3:.2f} mm, {verdicts}")
    return since


def _hold(since: dict[str, float], key: str, ok: bool, clock: float) -> None:
    """``since[key]``: when ``ok`` became true for good (nan while it is not)."""
    if not ok:
        since[key] = np.nan
    elif np.isnan(since[key]):
        since[key] = clock


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0", help="comma separated noise seeds (default 0)")
    parser.add_argument("--duration", type=float, default=6.0, help="s of motion (default 6)")
    parser.add_argument("--trace", action="store_true", help="the estimate every 50 ms to 2 s")
    parser.add_argument("--cost", action="store_true",
                        help=f"also each part's share of a core from {COST_FROM:g} s on")
    add_solver_option(parser)
    args = parser.parse_args(argv)
    solver = solver_values(args, parser)
    sdp.warm_up()
    print("seed  first s  mass+CoM s  inertia s" + "".join(
        f"  {part} %" for part in COST_PARTS) * args.cost + "  total %" * args.cost)
    for seed in (int(s) for s in args.seeds.split(",")):
        cost: dict[str, float] | None = {} if args.cost else None
        since = first_seconds(seed, args.duration, args.trace, cost, solver)
        line = (f"{seed:4d}  {since['first']:7.3f}  {since['mass_com']:10.3f}  "
                f"{since['inertia']:9.3f}")
        if cost is not None:
            span = max(args.duration - COST_FROM, 1e-9)
            shares = [100.0 * cost.get(part, 0.0) / span for part in COST_PARTS]
            line += "".join(f"  {x:{len(p) + 2}.1f}" for p, x in zip(COST_PARTS, shares,
                                                                      strict=True))
            line += f"  {sum(shares):7.1f}"
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
