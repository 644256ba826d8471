"""Benchmark of ``inertial-id tune``: does the search beat the defaults on bags it never saw?

Simulates labelled bags of the bundled arm (mixed payloads, F/T noise levels and contacts,
some of them weak: the defaults' contact monitor misses or is late on those), writes their
labels (payload and contact intervals from the simulation's truth), runs ``inertial-id tune``
on them (half held out) and prints the held-out scores of the defaults and of the tuned
parameters; ``--json`` writes them. ``--vibration RATIO`` adds vibration bursts to the
F/T readings (:func:`inertial_id.core.simulation.random_vibrations`: 15-40 Hz, 0.2-0.6 s, peak
force 0.5-1 times RATIO times the bag's force noise std, ``--vibration-rate`` per second, at
least 0.5 s from any contact): a tool's or the arm's vibration, not a contact, so the labels
name none there.

    python bench/tune.py --bags 12 --duration 20 --trials 20 --workers 2
    python bench/tune.py --bags 12 --duration 20 --trials 20 --workers 2 --vibration 5
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

from inertial_id.core.parameters import BodyParameters
from inertial_id.core.simulation import Contact, default_payload, random_vibrations
from inertial_id.tools.synthetic import SimulateOptions, simulate_bag
from inertial_id.tools.tune import TuneOptions, report_lines, run_tune


def make_bags(root: Path, count: int, duration: float, seed: int,
              force_range: tuple[float, float] = (0.8, 6.0), vibration: float = 0.0,
              vibration_rate: float = 0.3) -> Path:
    """``count`` labelled bags under ``root``, contacts of ``force_range`` (N, low and high of a
    uniform draw) and, with ``vibration`` > 0, vibration bursts of a peak force up to
    ``vibration`` times the bag's force noise std, ``vibration_rate`` per second (none within
    0.5 s of a contact); returns the labels file."""
    rng = np.random.default_rng(seed)
    labels = {}
    for i in range(count):
        mass = float(rng.uniform(0.5, 3.0))
        com = [float(rng.uniform(-0.03, 0.03)), float(rng.uniform(-0.03, 0.03)),
               float(rng.uniform(0.03, 0.1))]
        inertia = default_payload().inertia_com * mass / default_payload().mass
        noise = float(rng.choice([0.05, 0.1, 0.2]))
        contacts = []
        for _ in range(int(rng.integers(1, 3))):
            direction = rng.normal(size=3)
            force = direction / np.linalg.norm(direction) * rng.uniform(*force_range)
            start = float(rng.uniform(8.0, duration - 2.0))
            if all(abs(start - c.start) > 2.0 for c in contacts):
                contacts.append(Contact(start, float(rng.uniform(0.2, 1.0)),
                                        tuple(float(f) for f in force)))
        name = f"r{i % 3}/bag{i:02d}"
        vibrations = () if vibration <= 0.0 else random_vibrations(
            duration, vibration_rate, vibration * noise,
            avoid=tuple((c.start, c.start + c.duration) for c in contacts), seed=seed * 1000 + i)
        simulate_bag(root / name, SimulateOptions(
            duration=duration, payload=BodyParameters.from_mass_com_inertia(mass, com, inertia),
            force_noise_std=noise, torque_noise_std=noise / 20.0, contacts=tuple(contacts),
            vibrations=vibrations, seed=seed * 1000 + i, trajectory_seed=1 + i % 4))
        labels[name] = {"payload": {"mass": mass, "com": com},
                        "contacts": [[c.start, c.start + c.duration] for c in contacts]}
    path = root / "labels.yaml"
    path.write_text(yaml.safe_dump({"bags": labels}, sort_keys=True))
    return path


def main() -> int:
    """Simulate, tune, print (and with ``--json`` write) the held-out comparison."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bags", type=int, default=12)
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--force", type=float, nargs=2, default=(0.8, 6.0), metavar=("LOW", "HIGH"),
                        help="contact forces drawn from LOW..HIGH N (default 0.8 6; weak "
                             "contacts, e.g. 0.2 1, are where the defaults miss some)")
    parser.add_argument("--vibration", type=float, default=0.0, metavar="RATIO",
                        help="vibration bursts on the F/T readings, 15-40 Hz, 0.2-0.6 s, peak "
                             "force 0.5-1 times RATIO times the bag's force noise std "
                             "(default 0: none)")
    parser.add_argument("--vibration-rate", type=float, default=0.3, metavar="PER_S",
                        help="vibration bursts per second on average (default 0.3)")
    parser.add_argument("--dir", type=Path, help="keep the bags here (default: a temporary "
                                                 "directory)")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tune_bench_") as tmp:
        root = args.dir or Path(tmp)
        began = time.monotonic()
        labels = make_bags(root, args.bags, args.duration, args.seed, tuple(args.force),
                           args.vibration, args.vibration_rate)
        simulated = time.monotonic() - began
        options = TuneOptions(inputs=(str(root),), output=root / "tuned.yaml", labels=labels,
                              trials=args.trials, workers=args.workers, seed=args.seed,
                              progress=sys.stderr.isatty())
        result = run_tune(options)
        seconds = time.monotonic() - began - simulated
    print("\n".join(report_lines(result, options)))
    print(f"simulated {args.bags} bags of {args.duration:g} s in {simulated:.0f} s; tuned in "
          f"{seconds:.0f} s with {args.workers} workers")
    if args.json:
        assert result.default_held_out is not None and result.tuned_held_out is not None
        doc = {"command": " ".join(sys.argv), "seconds": round(seconds, 1),
               "tuning_bags": [Path(b).relative_to(root).as_posix() for b in result.tuning],
               "held_out_bags": [Path(b).relative_to(root).as_posix() for b in result.held_out],
               "defaults_tuning": result.defaults.score.parts,
               "best_tuning": None if result.best is None else result.best.score.parts,
               "best_values": None if result.best is None else result.best.values,
               "defaults_held_out": result.default_held_out.parts,
               "tuned_held_out": result.tuned_held_out.parts,
               "held_out_loss": {"defaults": result.default_held_out.loss,
                                 "tuned": result.tuned_held_out.loss},
               "improvement": result.improvement}
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
