#!/usr/bin/env python3
"""Sensors as they are: each condition of a real installation against the "Done when" of the
F/T bias and transport work (drift, a driver's re-zero, reception stamps at 100 and 62.5 Hz,
bursts).

Each case writes a synthetic bag (``inertial-id simulate``'s
:func:`~inertial_id.tools.synthetic.simulate_bag` with
:class:`~inertial_id.core.sensor_conditions.SensorConditions`, the bundled 6-DoF arm) and
replays it with the default parameters (:func:`inertial_id.tools.replay.replay`). Per case:
mass error (%), CoM error (mm), inertia-about-the-CoM error (%, Frobenius), the mass's ``z``,
the force bias error at the end (N, largest axis), pushes found, false contact time (flagged
time farther than 0.1 s before or 0.3 s after a push, share of the run), bias steps found,
open anomalies, the share of samples gated, and for a re-zero the force bias error 2 s after
it (a replay stopped there).

    python bench/sensor_conditions.py                  # every case, a few minutes
    python bench/sensor_conditions.py --only drift     # one case
    python bench/sensor_conditions.py --json out.json
    python bench/sensor_conditions.py --no-bias-drift  # a constant offset, as before
    python bench/sensor_conditions.py --solver bias_drift_prior=0  # any solver parameter
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: `bench` as a package

from bench._options import add_solver_option, solver_values  # noqa: E402
from inertial_id.core.metrics import parameter_errors
from inertial_id.core.parameters import BodyParameters
from inertial_id.core.sensor_conditions import SensorConditions
from inertial_id.core.simulation import Contact, default_payload
from inertial_id.tools.replay import ReplayOptions, ReplayResult, replay
from inertial_id.tools.synthetic import SimulateOptions, simulate_bag


def body(mass: float, com: tuple[float, float, float]) -> BodyParameters:
    """The demo payload's shape scaled to ``mass`` (kg), CoM at ``com`` (m, sensor frame)."""
    demo = default_payload()
    return BodyParameters.from_mass_com_inertia(mass, com, demo.inertia_com * mass / demo.mass)


@dataclass(frozen=True)
class Case:
    """One recording: its simulate options and what it holds."""

    name: str
    options: SimulateOptions
    what: str
    rezero: tuple[float, ...] = ()
    pushes: tuple[Contact, ...] = field(default=())


def cases() -> list[Case]:
    """The issue's recordings, simulated (see the module docstring)."""
    push = Contact(95.0, 0.7, (0.0, 12.0, 4.0))
    return [
        Case("drift", SimulateOptions(
            duration=120.0, wrench_rate=500.0, joint_state_rate=500.0,
            payload=body(3.0, (0.01, -0.02, 0.08)),
            conditions=SensorConditions(drift=(0.0, 0.0, 0.6 / 120, 0.02 / 120, 0.0, 0.0))),
            "3 kg, 500 Hz, +0.6 N fz and +0.02 N m tx over 120 s"),
        Case("drift 1 N/min", SimulateOptions(
            duration=120.0, wrench_rate=500.0, joint_state_rate=500.0,
            conditions=SensorConditions(drift=(0.5 / 60, -0.5 / 60, 1.0 / 60, 0.01 / 60,
                                               0.0, -0.01 / 60))),
            "1.5 kg, 500 Hz, 1 N/min in fz, 0.5 N/min in fx, fy"),
        Case("re-zero", SimulateOptions(
            duration=120.0, wrench_rate=500.0, joint_state_rate=500.0,
            payload=body(2.0, (0.0, 0.01, 0.06)), force_noise_std=0.5, torque_noise_std=0.015,
            contacts=(push,),
            conditions=SensorConditions(drift=(0.0, 0.0, 0.8 / 60, 0.0, 0.0, 0.0),
                                        rezero=(60.0,))),
            "2 kg, 500 Hz, noise 0.5 N, 0.8 N/min, zeroed at 60 s, push at 95 s",
            rezero=(60.0,), pushes=(push,)),
        Case("100 Hz on reception", SimulateOptions(
            duration=120.0, wrench_rate=100.0, joint_state_rate=500.0,
            conditions=SensorConditions(lag=(0.003, 0.009), quantum=(0.01, 0.0005),
                                        joint_jitter=2e-4, joint_loss=0.003)),
            "1.5 kg, lag 3-9 ms, quantised, joints jittered, 0.3 % lost"),
        Case("62.5 Hz on reception", SimulateOptions(
            duration=180.0, wrench_rate=62.5, joint_state_rate=500.0,
            payload=body(0.9, (0.005, 0.0, 0.05)),
            conditions=SensorConditions(lag=(0.004, 0.016), quantum=(0.01, 0.0005),
                                        period_jitter=0.05)),
            "0.9 kg, lag 4-16 ms, 180 s"),
        Case("bursts", SimulateOptions(
            duration=60.0, wrench_rate=1000.0, joint_state_rate=500.0,
            payload=body(8.0, (0.0, 0.02, 0.1)),
            conditions=SensorConditions(burst=8, burst_loss=0.005)),
            "8 kg, 1 kHz in bursts of 8, 0.5 % of bursts lost"),
    ]


def contact_scores(result: ReplayResult, pushes: tuple[Contact, ...], duration: float
                   ) -> tuple[int, float]:
    """Pushes found (a detected interval within 0.1 s before to 0.3 s after) and the false
    contact time (% of ``duration``)."""
    windows = [(p.start - 0.1, p.start + p.duration + 0.3) for p in pushes]
    found = sum(any(a < hi and b > lo for a, b in result.contacts) for lo, hi in windows)
    false = 0.0
    for a, b in result.contacts:
        covered = sum(max(0.0, min(b, hi) - max(a, lo)) for lo, hi in windows)
        false += (b - a) - covered
    return found, 100.0 * false / duration


def relearned(case: Case, root: Path, params: Path | None) -> float:
    """The force bias error (N, largest axis) 2 s after the re-zero: the same run, ended
    there (its own bag)."""
    short = replace(case.options, duration=case.rezero[0] + 2.0)
    bag = simulate_bag(root / "relearn", short)
    truth = yaml.safe_load((bag / "ground_truth.yaml").read_text())
    result = replay(ReplayOptions(bag, params=params, progress=False))
    assert result.estimate is not None
    return float(np.abs(result.estimate.offset[:3]
                        - np.asarray(truth["wrench_offset_end"][:3])).max())


def run_case(case: Case, root: Path, params: Path | None) -> dict[str, Any]:
    """Simulate, replay (with the parameter file ``params``; None: the defaults) and score
    one case."""
    bag = simulate_bag(root / case.name.replace(" ", "_").replace("/", "_"), case.options)
    truth = yaml.safe_load((bag / "ground_truth.yaml").read_text())
    started = time.perf_counter()
    result = replay(ReplayOptions(bag, params=params, progress=False))
    seconds = time.perf_counter() - started
    estimate = result.estimate
    assert estimate is not None
    errors = parameter_errors(estimate.pi, case.options.payload.pi)
    end = np.asarray(truth.get("wrench_offset_end", truth["wrench_offset"]))
    found, false = contact_scores(result, case.pushes, case.options.duration)
    ledger = result.ledger
    row = {"case": case.name, "what": case.what, "mass_pct": errors.mass_pct,
           "com_mm": errors.com_mm, "inertia_pct": errors.inertia_pct,
           "mass_z": float((estimate.pi[0] - case.options.payload.mass) / estimate.std[0]),
           "bias_n": float(np.abs(estimate.offset[:3] - end[:3]).max()),
           "pushes": f"{found}/{len(case.pushes)}", "false_pct": false,
           "steps": [round(t - result.start_time, 2) for t in result.pipeline.online.bias_steps],
           "open": len(result.pipeline.online.open_anomalies),
           "gated_pct": 100.0 * ledger["solver_dropped"].get("gated", 0) / ledger["synchronised"],
           "wrench_delay_ms": 1e3 * float(result.pipeline.gathering.wrench_delay),
           "replay_s": seconds}
    if case.rezero:
        row["relearn_n"] = relearned(case, root, params)
    return row


def table(rows: list[dict[str, Any]]) -> str:
    """The rows as a Markdown table."""
    lines = ["| case | mass % | CoM mm | inertia % | mass z | bias end N | pushes | false % "
             "| steps s | bias 2 s after N | open | gated % |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        relearn = f"{r['relearn_n']:.3f}" if "relearn_n" in r else "–"
        lines.append(
            f"| {r['case']} | {r['mass_pct']:.3f} | {r['com_mm']:.2f} | {r['inertia_pct']:.1f} "
            f"| {r['mass_z']:+.1f} | {r['bias_n']:.3f} | {r['pushes']} | {r['false_pct']:.2f} "
            f"| {r['steps'] or '–'} | {relearn} | {r['open']} | {r['gated_pct']:.1f} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="run only the case of this name")
    parser.add_argument("--json", type=Path, help="write every row here")
    parser.add_argument("--no-bias-drift", action="store_true",
                        help="a constant F/T offset (the solver's bias_drift off)")
    add_solver_option(parser)
    args = parser.parse_args()
    solver = solver_values(args, parser)
    if args.no_bias_drift:
        solver["bias_drift"] = False
    chosen = [c for c in cases() if args.only in (None, c.name)]
    if not chosen:
        parser.error(f"no case named {args.only!r}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        params = None
        if solver:
            params = Path(tmp) / "params.yaml"
            params.write_text(yaml.safe_dump({"solver": {"ros__parameters": solver}}))
        for case in chosen:
            rows.append(run_case(case, Path(tmp), params))
            print(f"{case.name}: done ({rows[-1]['replay_s']:.0f} s replay)", file=sys.stderr)
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
