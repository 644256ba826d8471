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
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import cvxpy as cp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from inertial_id.core.estimators import (  # noqa: E402
    ConsistentEstimator,
    pseudo_inertia_expression,
)
from inertial_id.core.kinematics import SensorKinematics  # noqa: E402
from inertial_id.core.payload import PayloadConfig, PayloadIdentifier  # noqa: E402
from inertial_id.core.regressor import measurement_matrix  # noqa: E402
from inertial_id.core.simulation import (  # noqa: E402
    BUNDLED_HOME,
    BUNDLED_SENSOR_FRAME,
    FourierTrajectory,
    PayloadSimulation,
    bundled_urdf_path,
)

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
    args = parser.parse_args(argv)

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


if __name__ == "__main__":
    sys.exit(main())
