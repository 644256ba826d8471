#!/usr/bin/env python3
"""Noise-free filter bias: the runs of ``bench/uncertainty.py`` without any noise.

Each run (same seeds, payloads, trajectories, rates and robots as the calibration benchmark)
is simulated with no F/T and no encoder noise and replayed, with the gatherer's matched filter
and with the joints filtered only; what is left of the error is the filter's bias. Prints per
run the largest inertia error (about the sensor origin) relative to the largest inertia entry,
the mass error and the Ixx error, and the median and maximum over the runs.

    python bench/filter_bias.py                 # seeds 0-55
    python bench/filter_bias.py --seeds 38 3    # chosen runs
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: `bench` as a package

from bench.uncertainty import DEFAULT_DATA_DIR, draw_case, robots, run_case  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="*", default=list(range(56)))
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA_DIR)
    args = parser.parse_args(argv)
    available = robots(args.data)
    rows: dict[str, list[tuple[float, float, float]]] = {"plain": [], "matched": []}
    for seed in args.seeds:
        case = draw_case(seed, available)
        case = dataclasses.replace(case, noise_scale=0.0,
                                   robot=dataclasses.replace(case.robot, joint_noise=0.0))
        truth = case.payload.pi
        line = [f"run {seed:3d} {case.robot.name:5s} {case.trajectory:6s} "
                f"{case.rates[0]:.0f} Hz m {case.payload.mass:.2f} kg"]
        for label, matched in (("plain", False), ("matched", True)):
            estimate, _ = run_case(case, matched)
            err = estimate.pi - truth
            inertia = float(np.max(np.abs(err[4:])) / np.max(np.abs(truth[4:])))
            mass = float(abs(err[0]) / truth[0])
            ixx = float(err[4] / truth[4])
            rows[label].append((inertia, mass, ixx))
            line.append(f"{label}: inertia {100 * inertia:6.3f} %, mass {100 * mass:.4f} %, "
                        f"Ixx {100 * ixx:+7.3f} %")
        print("  ".join(line), flush=True)
    for label, values in rows.items():
        v = np.abs(np.array(values))
        print(f"{label:8s} inertia error (max entry / largest entry): median "
              f"{100 * np.median(v[:, 0]):.3f} %, max {100 * v[:, 0].max():.3f} %; mass: median "
              f"{100 * np.median(v[:, 1]):.4f} %, max {100 * v[:, 1].max():.4f} %; |Ixx|: "
              f"median {100 * np.median(v[:, 2]):.3f} %, max {100 * v[:, 2].max():.3f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
