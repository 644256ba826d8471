#!/usr/bin/env python3
"""Calibration of the reported standard deviations: random payloads through the replay path.

Each run draws a payload (mass 0.3-3 kg, CoM within 6 cm, a box of 3-20 cm sides in a random
orientation), an F/T bias (forces within 3 N, torques within 0.1 N m), a trajectory (fast and
exciting down to slow and poorly exciting), a noise level (0.5-2x the demo's 0.08 N /
0.004 N m) and sample rates, simulates it with :class:`inertial_id.core.simulation.
PayloadSimulation` and runs the messages through the pipeline ``inertial-id replay`` builds
(:func:`inertial_id.tools.replay.build_pipeline` and :func:`~inertial_id.tools.feeding.feed`: the
nodes' core objects, solving every 0.5 s of stamps, contacts gated) — only the bag file is skipped.
Robots: the bundled arm (default parameters, 1 kHz / 500 Hz or 500 / 250 Hz) and the TIAGo
of ``bench/tiago_params.yaml`` (100 Hz, 40-90 s runs) when its URDF is in the shared data
folder (otherwise skipped with a message).

For every estimated quantity ``z = (estimate - truth) / std``; per group (mass, first moments
``m c``, inertia about the sensor origin, offset, and the derived CoM and inertia about the
CoM) it prints the share of ``|z| <= 1`` and ``<= 2`` and the median ``|z|`` (an honest
Gaussian std: 68 %, 95 %, 0.67), for the reported covariance and, on the same estimates, the
classical one (white noise: :func:`inertial_id.core.estimation.estimators.make_estimate`). The
reported
table carries 95 % bootstrap intervals (runs resampled): with one mass per run, 56 runs leave
its median ``|z|`` uncertain by about 0.1 either way, hence 200 runs by default (about
3 min). ``--tiago-jackknife`` adds the real TIAGo run: its delete-one-block jackknife std
against the reported std (``bench/tiago_payload.py``).

    python bench/uncertainty.py                 # 200 runs
    python bench/uncertainty.py --quick         # 16 runs
    python bench/uncertainty.py --runs 80 --json out.json --tiago-jackknife
    python bench/uncertainty.py --first-seed 3000   # payloads the defaults never drew
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: `bench` as a package

from bench.tiago_bag import DEFAULT_DATA_DIR, URDF_NAME, WRENCH_TOPIC, convert  # noqa: E402
from inertial_id.core.estimate import N_PI, Estimate  # noqa: E402
from inertial_id.core.estimation.estimators import make_estimate  # noqa: E402
from inertial_id.core.parameters import BodyParameters, vector_from_symmetric  # noqa: E402
from inertial_id.core.samples import JointStateSample, WrenchSample  # noqa: E402
from inertial_id.core.simulation import (  # noqa: E402
    BUNDLED_HOME,
    FourierTrajectory,
    PayloadSimulation,
    bundled_urdf_path,
)
from inertial_id.core.statistics import SufficientStatistics  # noqa: E402
from inertial_id.params.settings import kinematics_settings, online_config  # noqa: E402
from inertial_id.tools.feeding import PROCESS_PERIOD, feed  # noqa: E402
from inertial_id.tools.replay import (  # noqa: E402
    ReplayOptions,
    build_pipeline,
    load_params,
    replay,
)

TIAGO_PARAMS = Path(__file__).resolve().parent / "tiago_params.yaml"
START = 1_700_000_000.0
"""Stamp of the first sample (s), as a robot would record."""
GROUPS = ("mass", "first moments m c", "inertia (origin)", "offset", "CoM",
          "inertia (CoM)")
TRAJECTORIES = {  # name: (amplitude rad, max joint speed rad/s)
    "fast": (0.6, 1.5), "medium": (0.4, 0.6), "slow": (0.15, 0.2)}


@dataclass(frozen=True)
class Robot:
    """A robot to simulate: parameter file contents, URDF, home pose, rates (Hz)."""

    name: str
    params: dict[str, dict[str, Any]]
    urdf: str
    home: tuple[float, ...]
    rates: tuple[tuple[float, float], ...]
    duration: tuple[float, float]
    joint_noise: float


def robots(data: Path) -> list[Robot]:
    """The bundled arm, and the TIAGo when its URDF is in ``data``."""
    out = [Robot("arm6", {}, bundled_urdf_path(), BUNDLED_HOME,
                 ((1000.0, 500.0), (500.0, 250.0)), (10.0, 25.0), 1e-5)]
    urdf = data / URDF_NAME
    if urdf.is_file():
        out.append(Robot("tiago", load_params(TIAGO_PARAMS), urdf.read_text(),
                         (0.15, 0.2, 0.3, 0.0, 1.0, 0.0, 0.5, 0.0), ((100.0, 100.0),),
                         (40.0, 90.0), 1.5e-5))
    else:
        print(f"TIAGo URDF not found ({urdf}): only the bundled arm is benchmarked")
    return out


def random_payload(rng: np.random.Generator) -> BodyParameters:
    """Mass 0.3-3 kg, CoM within 6 cm, a box of 3-20 cm sides in a random orientation."""
    mass = rng.uniform(0.3, 3.0)
    direction = rng.normal(size=3)
    com = direction / np.linalg.norm(direction) * rng.uniform(0.0, 0.06)
    a, b, c = rng.uniform(0.03, 0.2, 3)
    box = mass / 12.0 * np.diag([b * b + c * c, a * a + c * c, a * a + b * b])
    rotation, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    return BodyParameters.from_mass_com_inertia(mass, com, rotation @ box @ rotation.T)


@dataclass(frozen=True)
class Case:
    """One run: robot, payload, bias, trajectory, noise scale, rates (Hz), duration (s)."""

    robot: Robot
    seed: int
    payload: BodyParameters
    offset: NDArray[np.float64]
    trajectory: str
    noise_scale: float
    rates: tuple[float, float]
    duration: float


def draw_case(seed: int, available: list[Robot]) -> Case:
    """The run of this seed (every fourth on the TIAGo when it is available)."""
    rng = np.random.default_rng(seed)
    robot = available[1] if len(available) > 1 and seed % 4 == 3 else available[0]
    offset = np.concatenate((rng.uniform(-3.0, 3.0, 3), rng.uniform(-0.1, 0.1, 3)))
    return Case(robot, seed, random_payload(rng), offset,
                str(rng.choice(list(TRAJECTORIES))), float(rng.choice([0.5, 1.0, 2.0])),
                robot.rates[int(rng.integers(len(robot.rates)))],
                float(rng.uniform(*robot.duration)))


def messages(case: Case) -> list[JointStateSample | WrenchSample]:
    """What the robot driver would publish, in stamp order (as ``inertial-id simulate``)."""
    robot = case.robot
    kinematics = kinematics_settings(robot.params.get("kinematics", {})).model(robot.urdf)
    amplitude, speed = TRAJECTORIES[case.trajectory]
    trajectory = FourierTrajectory.random(robot.home, amplitude=amplitude, max_velocity=speed,
                                          seed=case.seed + 1)
    sim = PayloadSimulation(kinematics, trajectory, payload=case.payload, offset=case.offset,
                            force_noise_std=0.08 * case.noise_scale,
                            torque_noise_std=0.004 * case.noise_scale,
                            joint_noise_std=robot.joint_noise, seed=case.seed)
    wrench_rate, joint_rate = case.rates
    return sim.driver_messages(case.duration, joint_rate, wrench_rate, START, "ft_sensor")


def run_case(case: Case, matched: bool = True,
             errors_in_variables: bool = True,
             bias_drift: bool = True) -> tuple[Estimate, Estimate]:
    """The replay path's final estimate and, for the same ``x``, the classical covariance
    (``matched``: the gatherer's matched filter, the default; False: joints filtered only;
    ``errors_in_variables``: the gatherer's correction for the encoders' noise;
    ``bias_drift``: the solver's drifting-bias model)."""
    params = copy.deepcopy(case.robot.params)
    for node in ("gatherer", "kinematics", "solver"):
        params.setdefault(node, {})
    params["gatherer"]["matched_filter"] = matched
    params["gatherer"]["errors_in_variables"] = errors_in_variables
    params["solver"]["bias_drift"] = bias_drift
    pipeline = build_pipeline(params, case.robot.urdf)
    feed(messages(case), pipeline, PROCESS_PERIOD)
    estimate = pipeline.finish()
    if estimate is None:
        raise RuntimeError(f"run {case.seed}: no estimate")
    solved = pipeline.online.identifier.solved_statistics()
    plain = SufficientStatistics(solved.n_unknowns)
    plain.merge(solved)  # totals: no block scores
    x = np.concatenate((estimate.pi, estimate.offset))
    return estimate, make_estimate(plain, x, estimate.method)


def z_scores(estimate: Estimate, case: Case) -> dict[str, NDArray[np.float64]]:
    """``(estimate - truth) / std`` per group."""
    truth = case.payload
    inertia_com = vector_from_symmetric(estimate.body.inertia_com)
    return {
        "mass": (estimate.pi[:1] - truth.pi[:1]) / estimate.std[:1],
        "first moments m c": (estimate.pi[1:4] - truth.pi[1:4]) / estimate.std[1:4],
        "inertia (origin)": (estimate.pi[4:N_PI] - truth.pi[4:]) / estimate.std[4:],
        "offset": (estimate.offset - case.offset) / estimate.offset_std,
        "CoM": (estimate.body.com - truth.com) / estimate.com_std,
        "inertia (CoM)": (inertia_com - vector_from_symmetric(truth.inertia_com))
        / estimate.inertia_com_std,
    }


def summarise(z: list[dict[str, NDArray[np.float64]]],
              resamples: int = 2000) -> dict[str, dict[str, Any]]:
    """Per group: count, share within 1 and 2 std, median |z|, mean z^2, largest |z|, and 95 %
    bootstrap intervals of the 2-std share and of the median (runs resampled with
    replacement: a run's values share its data, so the run is the unit)."""
    rng = np.random.default_rng(0)
    picks = rng.integers(len(z), size=(resamples, len(z)))
    out: dict[str, dict[str, Any]] = {}
    for group in GROUPS:
        per_run = [np.abs(run[group]) for run in z]
        values = np.concatenate(per_run)
        within_2, median = [], []
        for pick in picks:
            sample = np.concatenate([per_run[i] for i in pick])
            within_2.append(np.mean(sample <= 2.0))
            median.append(np.median(sample))
        out[group] = {"n": int(values.size), "within_1": float(np.mean(values <= 1.0)),
                      "within_2": float(np.mean(values <= 2.0)),
                      "median_abs_z": float(np.median(values)),
                      "mean_z2": float(np.mean(values**2)),
                      "max_abs_z": float(values.max()),
                      "within_2_interval": [float(v) for v in np.percentile(within_2, [2.5, 97.5])],
                      "median_interval": [float(v) for v in np.percentile(median, [2.5, 97.5])]}
    return out


def markdown(tables: dict[str, dict[str, dict[str, Any]]], intervals: bool = False) -> str:
    """Tables side by side: ``{label: summarise(...)}``; ``intervals``: with the 95 %
    bootstrap intervals of the 2-std share and the median."""
    labels = list(tables)
    head = "| group | n | " + " | ".join(
        f"{label}: ≤1σ / ≤2σ / median abs z" for label in labels) + " |"
    lines = [head, "|---|---|" + "---|" * len(labels)]
    for group in GROUPS:
        cells = [_cell(t[group], intervals) for t in tables.values()]
        n = next(iter(tables.values()))[group]["n"]
        lines.append(f"| {group} | {n} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _cell(row: dict[str, Any], intervals: bool) -> str:
    if not intervals:
        return (f"{100 * row['within_1']:.0f} % / {100 * row['within_2']:.0f} % / "
                f"{row['median_abs_z']:.2f}")
    low2, high2 = row["within_2_interval"]
    low, high = row["median_interval"]
    return (f"{100 * row['within_1']:.0f} % / {100 * row['within_2']:.0f} % "
            f"[{100 * low2:.0f}–{100 * high2:.0f}] / {row['median_abs_z']:.2f} "
            f"[{low:.2f}–{high:.2f}]")


def tiago_jackknife(data: Path) -> dict[str, Any] | None:
    """The real TIAGo run: reported std against the delete-one-block jackknife std."""
    if not (data / URDF_NAME).is_file():
        print(f"TIAGo data not found ({data}): jackknife check skipped")
        return None
    import tiago_payload

    with tempfile.TemporaryDirectory(prefix="tiago_bag_") as tmp:
        bag = Path(tmp) / "tiago"
        convert(bag, data, "mcap")
        result = replay(ReplayOptions(bag, params=TIAGO_PARAMS, wrench_topic=WRENCH_TOPIC,
                                      progress=False))
        params = load_params(TIAGO_PARAMS)
        _, samples, _ = tiago_payload.read_bag(bag, params)
    solver = {k: v for k, v in params["solver"].items()
              if k not in ("publish_rate", "contact_decimation")}
    jack = tiago_payload.jackknife(samples, online_config(solver).payload)
    e = result.estimate
    return {"mass": float(e.pi[0]), "covariance_type": e.covariance_type,
            "std_mass": float(e.std[0]), "jackknife_mass": jack["std"][0],
            "com_std": [float(v) for v in e.com_std], "jackknife_com": jack["com_std"],
            "std_pi": [float(v) for v in e.std], "jackknife_pi": jack["std"],
            "physically_consistent": bool(e.physically_consistent)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200,
                        help="random runs (56 left the mass median |z| uncertain by about 0.1)")
    parser.add_argument("--quick", action="store_true", help="16 runs")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA_DIR,
                        help="the TIAGo data folder")
    parser.add_argument("--tiago-jackknife", action="store_true",
                        help="also compare std and jackknife on the real TIAGo run")
    parser.add_argument("--json", type=Path, help="write the numbers to this JSON file")
    parser.add_argument("--no-matched-filter", action="store_true",
                        help="filter the joints only (the gatherer before matched filtering)")
    parser.add_argument("--no-bias-drift", action="store_true",
                        help="a constant F/T offset (the solver's bias_drift off)")
    parser.add_argument("--no-errors-in-variables", action="store_true",
                        help="no correction for the encoders' noise (as before it was built)")
    args = parser.parse_args(argv)
    runs = 16 if args.quick else args.runs
    available = robots(args.data)
    start = time.perf_counter()
    reported: list[dict[str, NDArray[np.float64]]] = []
    classical: list[dict[str, NDArray[np.float64]]] = []
    per_robot: dict[str, list[dict[str, NDArray[np.float64]]]] = {}
    kinds: dict[str, int] = {}
    for seed in range(args.first_seed, args.first_seed + runs):
        case = draw_case(seed, available)
        estimate, plain = run_case(case, not args.no_matched_filter,
                                   not args.no_errors_in_variables, not args.no_bias_drift)
        z = z_scores(estimate, case)
        reported.append(z)
        classical.append(z_scores(plain, case))
        per_robot.setdefault(case.robot.name, []).append(z)
        kind = estimate.covariance_type.split(",")[0].split(" x ")[0]
        kinds[kind] = kinds.get(kind, 0) + 1
        worst = max(float(np.max(np.abs(v))) for v in z.values())
        print(f"run {seed:3d} {case.robot.name:5s} {case.trajectory:6s} noise x{case.noise_scale}"
              f" {case.rates[0]:.0f} Hz {case.duration:4.1f} s m {case.payload.mass:.2f} kg: "
              f"max |z| {worst:5.1f} ({estimate.covariance_type})", flush=True)
    elapsed = time.perf_counter() - start
    tables = {"reported": summarise(reported), "classical": summarise(classical)}
    print(f"\n{runs} runs in {elapsed:.0f} s; covariance types {kinds}\n")
    print(markdown({"reported": tables["reported"]}, intervals=True))
    print("\nthe same estimates with the classical std\n")
    print(markdown({"classical": tables["classical"]}))
    robot_tables = {name: summarise(z) for name, z in per_robot.items()}
    print("\nreported std, per robot\n")
    print(markdown(robot_tables))
    doc: dict[str, Any] = {"runs": runs, "first_seed": args.first_seed, "seconds": elapsed,
                           "tables": tables, "per_robot": robot_tables}
    if args.tiago_jackknife:
        check = tiago_jackknife(args.data)
        doc["tiago"] = check
        if check is not None:
            print(f"\nTIAGo calibration_weight: mass {check['mass']:.4f} kg, reported std "
                  f"{check['std_mass']:.4f} kg ({check['covariance_type']}), jackknife "
                  f"{check['jackknife_mass']:.4f} kg; CoM std "
                  f"{np.round(1e3 * np.asarray(check['com_std']), 2)} mm, jackknife "
                  f"{np.round(1e3 * np.asarray(check['jackknife_com']), 2)} mm")
    if args.json is not None:
        args.json.write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
