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
  if ``inertial_id.core.estimation.manifold`` is available;

checks that ours and direct reach the same optimum (relative difference of ``x`` and of the
cost) and prints the speed-up measured in this run. ``--json FILE`` writes the numbers.

``--families`` times the solve paths of :class:`ConsistentEstimator` instead, on growing
windows (10 each) of the instance families that matter for the payload SDP:

- ``ruler``: a 9 g ruler (30 x 2 x 0.3 cm) moving slowly, 0.5 N / 0.02 N m noise (LMI active);
- ``box``: a 60 g box (5 cm) on the default trajectory at 1 N / 0.05 N m noise;
- ``static``: 8 static poses, 0.5 s each (the inertia is not identifiable: rank-deficient
  statistics), with the estimator's default negligible prior and with a 1e-2 prior;
- ``payload``: the demo's 1.5 kg payload on the default trajectory (LMI inactive: the
  interior shortcut's family).

Every path is timed from the sufficient statistics to the solution (the estimate's
packaging, the same for all, aside): ``default`` is what ``solve`` runs without the
dedicated solver (cvxpy's parameter update, the interior shortcut's linear solve, and
cvxpy + Clarabel where the LMI is active); ``dedicated`` is
:func:`inertial_id.core.estimation.sdp.solve_statistics` warm-started from the solve one gatherer
batch (5 samples) earlier, as the solver node runs it at the batch rate; ``dedicated_cold``
without a warm start; ``dedicated_window`` warm-started from the previous window (2 s of
data earlier). A tight Clarabel solve (1e-12) is the reference for the objective. JSON keys:
per family and path median and p90 (us); ``speedup_active`` (default / dedicated, median
over the LMI-active families' medians), ``speedup_interior`` (the same where the LMI is
inactive), ``speedup_active_cold`` and ``speedup_active_window`` (the same for the other
starts), ``dedicated_methods`` (how the warm solves ended: unconstrained, Newton on the
active face, interior-point), ``max_relative_objective_gap`` (dedicated against the
reference, over all solves; negative: the dedicated one is lower),
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

from inertial_id.core.estimation import sdp  # noqa: E402
from inertial_id.core.estimation.estimators import (  # noqa: E402
    ConsistentEstimator,
    prior_scale,
    pseudo_inertia_expression,
)
from inertial_id.core.estimation.payload import PayloadConfig, PayloadIdentifier  # noqa: E402
from inertial_id.core.kinematics import SensorKinematics  # noqa: E402
from inertial_id.core.parameters import (  # noqa: E402
    BodyParameters,
    min_pseudo_inertia_eigenvalue,
)
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

    conic = ConsistentEstimator(epsilon=EPSILON, prior_weight=0.0, interior_shortcut=False,
                                dedicated=False)
    ours = conic.solve(stats)  # compiles the problem once
    ours_s = median_time(lambda: conic.solve(stats), args.repeats)
    x_ours = np.concatenate((ours.pi, ours.offset))
    # The default estimator: one linear solve when the unconstrained optimum is feasible.
    shortcut = ConsistentEstimator(epsilon=EPSILON, prior_weight=0.0, dedicated=False)
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
        from inertial_id.core.estimation.manifold import ManifoldEstimator
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


BATCH = 5
"""Samples per gatherer batch (1 kHz wrench, 200 Hz batches): what one live solve adds."""


def _family_statistics(name: str, windows: int = 10
                       ) -> list[tuple[SufficientStatistics, SufficientStatistics]]:
    """The statistics of a family's growing windows (see the module docstring), each with
    the same window one batch shorter (the previous live solve's statistics)."""
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
        head, last = chunk[:-BATCH], chunk[-BATCH:]
        identifier.add(twist[head], proper[head], wrench[head])
        previous = identifier.statistics.copy()
        identifier.add(twist[last], proper[last], wrench[last])
        out.append((previous, identifier.statistics.copy()))
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


def _default_path(estimator: ConsistentEstimator, stats: SufficientStatistics
                  ) -> np.ndarray | None:
    """What :meth:`ConsistentEstimator.solve` runs without the dedicated solver, from the
    statistics to the solution (the estimate's packaging aside): the parameter update, the
    interior shortcut, and the conic solve when the shortcut does not apply. Returns the
    solution in the estimator's scaled units."""
    estimator._update_parameters(stats)  # noqa: SLF001
    x = estimator._interior_minimiser()  # noqa: SLF001
    return estimator._solve_sdp() if x is None else x  # noqa: SLF001


def _dedicated(estimator: ConsistentEstimator, stats: SufficientStatistics,
               warm: tuple[np.ndarray | None, np.ndarray | None]) -> np.ndarray | None:
    """The dedicated path from the statistics, warm-started from ``warm`` (a solution and
    its dual), every repeat alike."""
    estimator._warm, estimator._warm_dual = warm  # noqa: SLF001
    return estimator._solve_dedicated(stats)  # noqa: SLF001


def families(repeats: int) -> dict[str, object]:
    """The ``--families`` benchmark (module docstring)."""
    cases = {"ruler": {}, "box": {}, "static": {}, "static_prior": {"prior_weight": 1e-2},
             "payload": {}}
    paths = ("default", "dedicated", "dedicated_cold", "dedicated_window")
    times: dict[str, dict[str, list[float]]] = {}
    gaps, eig_ratios, failures, active_seen, methods = [], [], 0, {}, {}
    family_gaps: dict[str, list[float]] = {}
    for name, options in cases.items():
        windows = _family_statistics(name.split("_")[0])
        prior = _box(0.5, (0.1, 0.06, 0.04), [0.0, 0.01, 0.05]).pi if options else None
        estimator = ConsistentEstimator(epsilon=EPSILON, prior=prior, dedicated=True,
                                        **options)
        estimator.solve(windows[0][1])  # numba loads its cache, cvxpy compiles the problem
        family = times.setdefault(name, {path: [] for path in paths})
        active, window_warm = 0, (None, None)
        for previous, stats in windows:
            estimator._update_parameters(stats)  # noqa: SLF001
            active += estimator._interior_minimiser() is None  # noqa: SLF001
            default_s, _ = _timed(partial(_default_path, estimator, stats), repeats)
            # The live node's case: warm from the solve one batch earlier.
            if _dedicated(estimator, previous, (None, None)) is None:
                failures += 1  # no warm start for this window: it would time a cold solve
                continue
            batch_warm = (estimator._warm, estimator._warm_dual)  # noqa: SLF001
            dedicated_s, x = _timed(partial(_dedicated, estimator, stats, batch_warm), repeats)
            result = estimator.last_dedicated
            cold_s, _ = _timed(partial(_dedicated, estimator, stats, (None, None)), repeats)
            window_s, _ = _timed(partial(_dedicated, estimator, stats, window_warm), repeats)
            window_warm = (estimator._warm, estimator._warm_dual)  # noqa: SLF001
            estimator._update_parameters(stats)  # noqa: SLF001
            estimator._problem.solve(solver="CLARABEL", tol_gap_abs=1e-12,  # noqa: SLF001
                                     tol_gap_rel=1e-12, tol_feas=1e-12)
            scale = estimator._update_parameters(stats)  # noqa: SLF001
            reference = scale * np.asarray(estimator._x.value)  # noqa: SLF001
            if x is None:
                failures += 1
                continue
            methods.setdefault(name, []).append(result.method)
            for path, seconds in zip(paths, (default_s, dedicated_s, cold_s, window_s),
                                     strict=True):
                family[path].append(seconds * 1e6)
            value = _objective(estimator, stats, x)
            value_ref = _objective(estimator, stats, reference)
            gaps.append((value - value_ref) / abs(value_ref))
            family_gaps.setdefault(name, []).append(gaps[-1])
            eig_ratios.append(min_pseudo_inertia_eigenvalue(x[:10]) / EPSILON)
        active_seen[name] = active
    summary = {name: {path: {"median_us": float(np.median(v)), "p90_us": float(np.percentile(
        v, 90)), "solves": len(v)} for path, v in paths_.items() if v}
        for name, paths_ in times.items()}
    active_families = [n for n, k in active_seen.items() if k == len(times[n]["default"])]
    inactive = [n for n, k in active_seen.items() if k == 0]

    def speedup(families_: list[str], path: str) -> float | None:
        return float(np.median([summary[n]["default"]["median_us"]
                                / summary[n][path]["median_us"] for n in families_])
                     ) if families_ else None

    result = {
        "families": summary, "lmi_active_solves": active_seen,
        "dedicated_methods": {n: {m: v.count(m) for m in sorted(set(v))}
                              for n, v in methods.items()},
        "compiled": sdp.compiled(),
        "speedup_active": speedup(active_families, "dedicated"),
        "speedup_interior": speedup(inactive, "dedicated"),
        "speedup_active_cold": speedup(active_families, "dedicated_cold"),
        "speedup_active_window": speedup(active_families, "dedicated_window"),
        "max_relative_objective_gap": float(max(gaps)),
        "min_eig_over_epsilon": float(min(eig_ratios)),
        "dedicated_failures": failures,
        "max_relative_objective_gap_per_family": {n: float(max(g))
                                                  for n, g in family_gaps.items()},
    }
    for name, paths_ in summary.items():
        cells = "  ".join(f"{p} {v['median_us']:7.0f} / {v['p90_us']:7.0f} us"
                          for p, v in paths_.items())
        print(f"{name:13s} LMI active {active_seen[name]:2d}/{len(times[name]['default'])}"
              f"  {cells}")
    for key in ("dedicated_methods", "speedup_active", "speedup_interior",
                "speedup_active_cold", "speedup_active_window", "max_relative_objective_gap",
                "min_eig_over_epsilon", "dedicated_failures",
                "max_relative_objective_gap_per_family"):
        print(f"{key:28s} {result[key]}")
    return result


if __name__ == "__main__":
    sys.exit(main())
