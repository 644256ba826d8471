"""Speed of the constrained solve: sufficient statistics against the direct formulation.

For a window of N samples (default 10,000: 60,000 rows) of the simulated arm, it times

- ``ours``: the LMI-constrained SDP of :class:`ConsistentEstimator` re-solved from the
  16x16 sufficient statistics (parametrised cvxpy problem, compiled once; median of warm
  re-solves), plus the accumulation of the statistics (per sample); and the default
  estimator, whose exact interior shortcut replaces the conic solve by one linear solve when
  the unconstrained optimum satisfies the constraints (``default_path`` says which ran);
- ``direct``: the textbook formulation, ``min ||W^1/2 (A x - b)||^2 s.t. J(pi) >= eps I``
  with the stacked raw matrix ``A`` as a cvxpy constant (compiled and solved each time);
- ``manifold``: the manifold estimator (Traversaro 2016) warm re-solve after 100 more samples,
  if ``inertial_id.core.manifold`` is available;

checks that ours and direct reach the same optimum (relative difference of ``x`` and of the
cost) and prints the speed-up measured in this run. ``--json FILE`` writes the numbers.

``--families`` times the three solve paths of :class:`ConsistentEstimator` instead, on
growing windows (10 each) of the instance families that matter for the payload SDP:

- ``ruler``: a 9 g ruler (30 x 2 x 0.3 cm) moving slowly, 0.5 N / 0.02 N m noise (LMI active);
- ``box``: a 60 g box (5 cm) on the default trajectory at 1 N / 0.05 N m noise;
- ``static``: 8 static poses, 0.5 s each (the inertia is not identifiable: rank-deficient
  statistics), with the estimator's default negligible prior and with a 1e-2 prior;
- ``payload``: the demo's 1.5 kg payload on the default trajectory (LMI inactive: the
  interior shortcut's family).

Paths, each after the same parameter update: ``conic`` (cvxpy + Clarabel, what the LMI-
active solves use today), ``dedicated`` (:mod:`inertial_id.core.sdp`, compiled with numba,
warm started from the previous window's optimum), ``interior`` (the default path's one
linear solve where the LMI is inactive), and a tight Clarabel solve (1e-12) as the reference
for the objective. JSON keys: per family and path median and p90 (us); ``speedup_active``
(conic / dedicated, median over the LMI-active families' medians), ``speedup_interior``
(default path / dedicated where the LMI is inactive), ``max_relative_objective_gap``
(dedicated against the reference, over all solves; negative: the dedicated one is lower),
``min_eig_over_epsilon`` (smallest ``lambda_min(J) / epsilon`` over the dedicated
solutions), ``dedicated_failures`` (solves the dedicated path handed to cvxpy).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

import cvxpy as cp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from inertial_id.core import sdp  # noqa: E402
from inertial_id.core.estimators import (  # noqa: E402
    ConsistentEstimator,
    prior_scale,
    pseudo_inertia_expression,
)
from inertial_id.core.kinematics import SensorKinematics  # noqa: E402
from inertial_id.core.parameters import (  # noqa: E402
    BodyParameters,
    min_pseudo_inertia_eigenvalue,
)
from inertial_id.core.payload import PayloadConfig, PayloadIdentifier  # noqa: E402
from inertial_id.core.regressor import measurement_matrix, predicted_wrench  # noqa: E402
from inertial_id.core.simulation import (  # noqa: E402
    BUNDLED_HOME,
    BUNDLED_SENSOR_FRAME,
    FourierTrajectory,
    PayloadSimulation,
    bundled_urdf_path,
)
from inertial_id.core.statistics import SufficientStatistics  # noqa: E402

EPSILON = 1e-8


def samples(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Twist, proper acceleration and wrench of n samples at 1 kHz of the simulated arm."""
    kinematics = SensorKinematics(bundled_urdf_path(), BUNDLED_SENSOR_FRAME)
    trajectory = FourierTrajectory.random(BUNDLED_HOME, seed=seed + 1)
    sim = PayloadSimulation(kinematics, trajectory, seed=seed)
    t = np.arange(n) * 1e-3
    twist, proper = kinematics.compute(*trajectory(t))
    return twist, proper, sim.wrench(t)


def median_time(fn: Callable[[], object], repeats: int) -> float:
    """Median wall time of ``fn`` in seconds."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def direct_solve(a: np.ndarray, b: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, float]:
    """The direct formulation on the stacked raw matrix; its solution and its cost."""
    x = cp.Variable(16)
    root = np.sqrt(w)
    objective = cp.sum_squares(cp.multiply(root, a @ x - b))
    constraints = [pseudo_inertia_expression(x[:10]) - EPSILON * np.eye(4) >> 0]
    problem = cp.Problem(cp.Minimize(objective), constraints)
    problem.solve(solver="CLARABEL")
    return np.asarray(x.value), float(problem.value)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the comparison; see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=10_000, help="window size (samples)")
    parser.add_argument("--repeats", type=int, default=5, help="timed repetitions")
    parser.add_argument("--json", type=Path, help="write the numbers here")
    parser.add_argument("--families", action="store_true",
                        help="time the solve paths on the instance families instead")
    args = parser.parse_args(argv)
    if args.families:
        result = families(args.repeats)
        if args.json:
            args.json.write_text(json.dumps(result, indent=2))
        return 0

    twist, proper, wrench = samples(args.samples)
    config = PayloadConfig(force_noise_std=0.08, torque_noise_std=0.004, epsilon=EPSILON)
    identifier = PayloadIdentifier(config)
    start = time.perf_counter()
    identifier.add(twist, proper, wrench)
    accumulate_us = (time.perf_counter() - start) / args.samples * 1e6
    stats = identifier.statistics

    conic = ConsistentEstimator(epsilon=EPSILON, prior_weight=0.0, interior_shortcut=False)
    ours = conic.solve(stats)  # compiles the problem once
    ours_s = median_time(lambda: conic.solve(stats), args.repeats)
    x_ours = np.concatenate((ours.pi, ours.offset))
    # The default estimator: one linear solve when the unconstrained optimum is feasible.
    shortcut = ConsistentEstimator(epsilon=EPSILON, prior_weight=0.0)
    fast = shortcut.solve(stats)
    shortcut_s = median_time(lambda: shortcut.solve(stats), args.repeats)
    x_fast = np.concatenate((fast.pi, fast.offset))

    a = measurement_matrix(twist, proper, identifier.sign)
    b = wrench.reshape(-1)
    w = np.tile(np.repeat([0.08**-2, 0.004**-2], 3), args.samples)
    x_direct, cost_direct = direct_solve(a, b, w)
    direct_s = median_time(lambda: direct_solve(a, b, w), max(1, args.repeats // 2))
    cost_ours = stats.residual(x_ours)
    x_diff = float(np.linalg.norm(x_ours - x_direct) / np.linalg.norm(x_direct))
    cost_diff = abs(cost_ours - cost_direct) / cost_direct

    result = {
        "samples": args.samples, "rows": int(b.size),
        "accumulate_us_per_sample": accumulate_us,
        "ours_solve_ms": ours_s * 1e3, "direct_solve_ms": direct_s * 1e3,
        "speedup": direct_s / ours_s,
        "relative_difference_x": x_diff, "relative_difference_cost": cost_diff,
        "ours_default_solve_ms": shortcut_s * 1e3, "default_path": shortcut.last_solve,
        "default_vs_direct_relative_difference_x": float(
            np.linalg.norm(x_fast - x_direct) / np.linalg.norm(x_direct)),
    }
    result.update(_manifold_timing(identifier, twist, proper, wrench, args.repeats))
    for key, value in result.items():
        print(f"{key:28s} {value:.4g}" if isinstance(value, float) else f"{key:28s} {value}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


def _manifold_timing(identifier: PayloadIdentifier, twist: np.ndarray, proper: np.ndarray,
                     wrench: np.ndarray, repeats: int) -> dict[str, float]:
    """Cold and warm (100 more samples) manifold solves, if the estimator is available."""
    try:
        from inertial_id.core.manifold import ManifoldEstimator
    except ImportError:
        return {}
    estimator = ManifoldEstimator()
    start = time.perf_counter()
    estimator.solve(identifier.statistics)
    cold = time.perf_counter() - start
    warm = []
    for k in range(repeats * 4):
        identifier.add(twist[k * 100:(k + 1) * 100], proper[k * 100:(k + 1) * 100],
                       wrench[k * 100:(k + 1) * 100])
        start = time.perf_counter()
        estimator.solve(identifier.statistics)
        warm.append(time.perf_counter() - start)
    return {"manifold_cold_ms": cold * 1e3, "manifold_warm_median_ms": float(np.median(warm)) * 1e3}


def _box(mass: float, sides: tuple[float, float, float], com: Sequence[float]) -> BodyParameters:
    a, b, c = sides
    inertia = mass / 12.0 * np.diag([b * b + c * c, a * a + c * c, a * a + b * b])
    return BodyParameters.from_mass_com_inertia(mass, com, inertia)


def _family_statistics(name: str, windows: int = 10) -> list[SufficientStatistics]:
    """The statistics of a family's growing windows (see the module docstring)."""
    kinematics = SensorKinematics(bundled_urdf_path(), BUNDLED_SENSOR_FRAME)
    if name == "static":
        rng = np.random.default_rng(5)
        home = np.asarray(BUNDLED_HOME)
        poses = home + rng.uniform(-0.8, 0.8, (8, home.size))
        q = np.repeat(poses, 500, axis=0)
        twist, proper = kinematics.compute(q, np.zeros_like(q), np.zeros_like(q))
        payload, noise = _box(0.5, (0.1, 0.06, 0.04), [0.0, 0.01, 0.05]), (0.1, 0.005)
        wrench = predicted_wrench(payload.pi, twist, proper, np.zeros(6), -1.0)
        wrench = wrench + rng.normal(size=wrench.shape) * np.repeat(noise, 3)
    else:
        setting = {"ruler": (_box(0.009, (0.3, 0.02, 0.003), [0.0, 0.0, 0.15]), (0.5, 0.02),
                             (0.15, 0.2)),
                   "box": (_box(0.06, (0.05, 0.05, 0.05), [0.0, 0.0, 0.04]), (1.0, 0.05),
                           (0.6, 1.5)),
                   "payload": (None, (0.08, 0.004), (0.6, 1.5))}[name]
        payload, noise, (amplitude, speed) = setting
        trajectory = FourierTrajectory.random(BUNDLED_HOME, amplitude=amplitude,
                                              max_velocity=speed, seed=2)
        sim = PayloadSimulation(kinematics, trajectory, force_noise_std=noise[0],
                                torque_noise_std=noise[1], seed=2,
                                **({} if payload is None else {"payload": payload}))
        t = np.arange(20_000) * 1e-3
        twist, proper = kinematics.compute(*trajectory(t))
        wrench = sim.wrench(t)
    config = PayloadConfig(force_noise_std=noise[0], torque_noise_std=noise[1],
                           epsilon=EPSILON)
    identifier = PayloadIdentifier(config)
    out = []
    for chunk in np.array_split(np.arange(len(wrench)), windows):
        identifier.add(twist[chunk], proper[chunk], wrench[chunk])
        out.append(identifier.statistics.copy())
    return out


def _timed(fn: Callable[[], object], repeats: int) -> tuple[float, object]:
    """Best of ``repeats`` calls (s) and the last result: the machine's noise only adds."""
    best, result = np.inf, None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def _objective(estimator: ConsistentEstimator, stats: SufficientStatistics,
               x: np.ndarray) -> float:
    """The estimate's objective at ``x`` (unscaled ``[pi; offset]``): the weighted residual
    of all the data plus the Euclidean prior term."""
    weights = estimator.prior_weight * prior_scale(stats.information)
    return stats.residual(x) + float(weights @ (x[:10] - estimator.prior) ** 2)


def _warm_solve(estimator: ConsistentEstimator, warm: np.ndarray | None) -> np.ndarray | None:
    """The dedicated path from ``warm`` (the previous window's optimum), every repeat alike."""
    estimator._warm = warm  # noqa: SLF001
    return estimator._solve_dedicated()  # noqa: SLF001


def families(repeats: int) -> dict[str, object]:
    """The ``--families`` benchmark (module docstring)."""
    cases = {"ruler": ({}, True), "box": ({}, True), "static": ({}, True),
             "static_prior": ({"prior_weight": 1e-2}, True), "payload": ({}, False)}
    times: dict[str, dict[str, list[float]]] = {}
    gaps, eig_ratios, failures, active_seen = [], [], 0, {}
    family_gaps: dict[str, list[float]] = {}
    statistics = {name: _family_statistics(name.split("_")[0]) for name in cases}
    for name, (options, _) in cases.items():
        prior = (_box(0.5, (0.1, 0.06, 0.04), [0.0, 0.01, 0.05]).pi
                 if options else None)
        estimator = ConsistentEstimator(epsilon=EPSILON, prior=prior, dedicated=True,
                                        **options)
        estimator.solve(statistics[name][0])  # cvxpy compiles the problem once
        family = times.setdefault(name, {"conic": [], "dedicated": [], "interior": []})
        active, warm = 0, None
        for stats in statistics[name]:
            estimator._update_parameters(stats)  # noqa: SLF001
            interior_s, interior = _timed(estimator._interior_minimiser, repeats)  # noqa: SLF001
            conic_s, _ = _timed(estimator._solve_sdp, repeats)  # noqa: SLF001
            dedicated_s, x = _timed(partial(_warm_solve, estimator, warm), repeats)
            warm = estimator._warm  # noqa: SLF001
            estimator._problem.solve(solver="CLARABEL", tol_gap_abs=1e-12,  # noqa: SLF001
                                     tol_gap_rel=1e-12, tol_feas=1e-12)
            reference = np.asarray(estimator._x.value)  # noqa: SLF001
            if x is None:
                failures += 1
                continue
            family["conic"].append(conic_s * 1e6)
            family["dedicated"].append(dedicated_s * 1e6)
            if interior is not None:
                family["interior"].append(interior_s * 1e6)
            else:
                active += 1
            scale = estimator._update_parameters(stats)  # noqa: SLF001
            value = _objective(estimator, stats, scale * x)
            value_ref = _objective(estimator, stats, scale * reference)
            gaps.append((value - value_ref) / abs(value_ref))
            family_gaps.setdefault(name, []).append(gaps[-1])
            eig_ratios.append(min_pseudo_inertia_eigenvalue(scale[:10] * x[:10]) / EPSILON)
        active_seen[name] = active
    summary = {name: {path: {"median_us": float(np.median(v)), "p90_us": float(np.percentile(
        v, 90)), "solves": len(v)} for path, v in paths.items() if v}
        for name, paths in times.items()}
    active_families = [n for n, k in active_seen.items() if k == len(statistics[n])]
    inactive = [n for n, k in active_seen.items() if k == 0]
    result = {
        "families": summary, "lmi_active_solves": active_seen,
        "compiled": sdp.compiled(),
        "speedup_active": float(np.median([summary[n]["conic"]["median_us"]
                                           / summary[n]["dedicated"]["median_us"]
                                           for n in active_families])) if active_families
        else None,
        "speedup_interior": float(np.median([summary[n]["interior"]["median_us"]
                                             / summary[n]["dedicated"]["median_us"]
                                             for n in inactive])) if inactive else None,
        "max_relative_objective_gap": float(max(gaps)),
        "min_eig_over_epsilon": float(min(eig_ratios)),
        "dedicated_failures": failures,
        "max_relative_objective_gap_per_family": {n: float(max(g))
                                                  for n, g in family_gaps.items()},
    }
    for name, paths in summary.items():
        cells = "  ".join(f"{p} {v['median_us']:8.0f} / {v['p90_us']:8.0f} us"
                          for p, v in paths.items())
        print(f"{name:13s} LMI active {active_seen[name]:2d}/{len(statistics[name])}  {cells}")
    for key in ("speedup_active", "speedup_interior", "max_relative_objective_gap",
                "min_eig_over_epsilon", "dedicated_failures",
                "max_relative_objective_gap_per_family"):
        print(f"{key:28s} {result[key]}")
    return result


if __name__ == "__main__":
    sys.exit(main())
