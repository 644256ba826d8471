#!/usr/bin/env python3
"""Joint-torque identification on simulated motor-current arms, with the commands' defaults.

Each arm (:class:`inertial_id.core.current_arm.MotorCurrentArm`, one per seed) is the CAD URDF
with its link inertials perturbed (mass +-10 %, CoM +-1 cm, inertia +-20 %), efforts from motor
currents at 125 Hz (drive gains off by up to 4 % per joint, current noise 0.02 A, 1 mA steps,
a current offset), Coulomb friction held at rest at 95 % in the last direction of motion
(presliding 5 mrad), viscous friction. Recordings (bags written as ``inertial-id simulate``
writes them):

- ``ident`` (40 s) and ``valid`` (30 s): two different exciting trajectories of the unloaded
  arm, in each the fifth joint (a wrist joint) stands still for 5 s while the others move;
- ``loaded``/``unloaded`` (25 s each): one trajectory, with a random payload (1.5-3 kg, CoM
  up to 8 cm off, box inertia) and without;
- ``push1``, ``push2`` (30 s each): other trajectories of the unloaded arm with people pushing
  the flange (20-60 N in random directions, 0.5-2 s each, about 30 % of the recording).

Per arm the package's commands run with their defaults (in-process, ``inertial_id.cli.main``):
``identify-links ident --urdf CAD --held-out unloaded`` (the choices scored on the pair's
unloaded run, another trajectory of the same arm, instead of time blocks of ``ident``);
``check-links MODEL valid --compare-urdf``;
``identify-payload loaded --unloaded unloaded --links MODEL --payload-frame ft_sensor``;
``check-links MODEL pushK``. identify-links chooses the drive gains' refinement (prior std
0, 0.003, 0.01, 0.03, geometric mean of the refined gains held at the published ones) and
identify-payload whether to fit the gains' ratios with the payload on the pair; "gain error"
is published / true, the scales identified are to be compared with it. ``--known-gain`` gives
identify-links true gains as user knowledge (not used by default). The truth model (the
simulator's own inertials, friction, gains and offsets) is scored through the same check: the
same bag reading, Savitzky-Golay states and rows, its prediction
:meth:`MotorCurrentArm.expected` of the filtered states.

Reported per arm and joint: held-out relative error ``100 |e - e_hat| / |e|`` of the identified
model, of the truth model and their ratio, the CAD URDF's; the payload mass error; per push
recording the pushes found, false alarms, onset delays (a push is found by an interval that
starts before its end + 0.3 s and ends after its start; an interval overlapping no push
+-0.5 s is a false alarm; the contact-free validation recording's intervals are all false).

Target (issue 28): identified within 10 % of the truth model's error on every joint (ratio
<= 1.10), payload mass within 2 %, every push found, no false alarm.

    python bench/torque_generalization.py --json torque_generalization.json   # 3 arms
    python bench/torque_generalization.py --seeds 1 --arm spherical
    python bench/torque_generalization.py --seeds 1 --push-force 12   # weaker pushes
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import yaml

from inertial_id.cli import main as inertial_id
from inertial_id.core.current_arm import (
    MotorCurrentArm,
    nothing_held,
    random_pushes,
    trajectory,
    write_current_bag,
)
from inertial_id.core.parameters import BodyParameters
from inertial_id.core.simulation import BUNDLED_HOME
from inertial_id.core.torque_payload import LinkTorqueModel
from inertial_id.torque_tool import read_rows

ARMS = {"bundled": ("arm6_ft.urdf", BUNDLED_HOME),
        "spherical": ("arm6_spherical_ft.urdf", (0.0, 0.3, 0.3, 0.5, 0.9, 0.3))}
HOLD_JOINT = 4
TARGET = {"ratio": 1.10, "mass_pct": 2.0}


def random_payload(seed: int) -> BodyParameters:
    """1.5-3 kg, CoM up to 8 cm off the sensor's z axis and 4-12 cm along it (sensor frame),
    the inertia of a uniform box of 6-16 cm sides about the CoM."""
    rng = np.random.default_rng([seed, 13])
    mass = rng.uniform(1.5, 3.0)
    a, b, c = rng.uniform(0.06, 0.16, 3)
    inertia = mass / 12 * np.diag([b * b + c * c, a * a + c * c, a * a + b * b])
    com = [*rng.uniform(-0.08, 0.08, 2) / np.sqrt(2), rng.uniform(0.04, 0.12)]
    return BodyParameters.from_mass_com_inertia(mass, com, inertia)


def run(argv: list[str]) -> None:
    """One ``inertial-id`` command, its printout swallowed; raises on a non-zero exit."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = inertial_id(argv)
    if code != 0:
        raise RuntimeError(f"inertial-id {' '.join(argv)} exited {code}:\n{out.getvalue()}")


def make_bags(arm: MotorCurrentArm, seed: int, folder: Path, push_force: float = 60.0
              ) -> dict[str, Any]:
    """Write the arm's six recordings into ``folder`` (pushes of ``push_force / 2`` to
    ``push_force`` N); their truths."""
    home = arm.home
    payload = random_payload(seed)
    base = 100 * seed
    plan = {"ident": (trajectory(home, base + 1, ((HOLD_JOINT, 14.0, 19.0),)), 40.0,
                      nothing_held(), ()),
            "valid": (trajectory(home, base + 2, ((HOLD_JOINT, 10.0, 15.0),)), 30.0,
                      nothing_held(), ()),
            "loaded": (trajectory(home, base + 3), 25.0, payload, ()),
            "unloaded": (trajectory(home, base + 3), 25.0, nothing_held(), ())}
    for k in (1, 2):
        plan[f"push{k}"] = (trajectory(home, base + 3 + k), 30.0, nothing_held(),
                            random_pushes(30.0, base + k, force=push_force))
    out: dict[str, Any] = {"payload_mass": payload.mass, "pushes": {}, "push_peak": {}}
    for i, (name, (traj, duration, held, pushes)) in enumerate(plan.items()):
        rec = arm.record(traj, duration, held, pushes, seed=base + 20 + i)
        write_current_bag(folder / name, arm, rec, held, pushes)
        if pushes:
            free = arm.record(traj, duration, held, (), seed=base + 20 + i)
            extra = np.abs(rec["torque"] - free["torque"]).max(axis=1)
            out["pushes"][name] = [[p.start, p.start + p.duration] for p in pushes]
            out["push_peak"][name] = [float(extra[(rec["t"] >= p.start)
                                                  & (rec["t"] < p.start + p.duration)].max())
                                      for p in pushes]
    return out


def relative(effort: np.ndarray, predicted: np.ndarray) -> list[float]:
    """Per joint ``100 |e - e_hat| / |e|`` (check-links' relative error)."""
    return (100 * np.linalg.norm(effort - predicted, axis=0)
            / np.linalg.norm(effort, axis=0)).tolist()


def truth_check(arm: MotorCurrentArm, bag: Path) -> tuple[list[float], list[float]]:
    """The truth model's relative error per joint on ``bag``, through check-links' rows."""
    links = LinkTorqueModel.from_urdf(arm.cad_urdf)
    options = SimpleNamespace(joint_states_topic=None, window=31, order=3)
    t, q, qd, qdd, effort = read_rows(links, bag, options)
    predicted = arm.expected(arm.rigid(q, qd, qdd), qd, float(np.median(np.diff(t))))
    return relative(effort, predicted), np.sqrt(np.mean((effort - predicted) ** 2, 0)).tolist()


def score_contacts(found: list[list[float]], pushes: list[list[float]], offset: float
                   ) -> dict[str, Any]:
    """Pushes found, their onset delays (s) and the false alarms of ``found`` intervals (s
    since the first checked row, ``offset`` s after the recording's start)."""
    intervals = [[a + offset, b + offset] for a, b in found]
    delays = []
    for start, end in pushes:
        hits = [a for a, b in intervals if a < end + 0.3 and b > start]
        delays.append(round(min(hits) - start, 3) if hits else None)
    false = [iv for iv in intervals
             if not any(iv[0] < e + 0.5 and iv[1] > s - 0.5 for s, e in pushes)]
    return {"pushes": len(pushes), "found": sum(d is not None for d in delays),
            "onset_delay_s": delays, "false_alarms": len(false), "false_intervals": false}


def one_arm(name: str, seed: int, folder: Path, push_force: float = 60.0,
            known: tuple[str, ...] = (), gain_std: str | None = None) -> dict[str, Any]:
    """Simulate one arm, run the commands, score them (``known``: joints whose true drive
    gain identify-links is given, ``--drive-gain``, as a user who measured it)."""
    urdf_file, home = ARMS[name]
    cad = str(resources.files("inertial_id") / "resources" / urdf_file)
    arm = MotorCurrentArm.random(cad, seed, home=home)
    begin = time.perf_counter()
    truth = make_bags(arm, seed, folder, push_force)
    model = folder / "model.yaml"
    names = arm.joint_names
    gains = [f"{j}={float(1.0 / arm.gain_error[names.index(j)])!r}" for j in known]
    run(["identify-links", str(folder / "ident"), "--urdf", cad, "--held-out",
         str(folder / "unloaded"), "--output", str(model)]
        + (["--drive-gain", *gains] if gains else [])
        + (["--gain-std", gain_std] if gain_std is not None else []))
    doc = yaml.safe_load(model.read_text())
    run(["check-links", str(model), str(folder / "valid"), "--compare-urdf",
         "--output", str(folder / "valid.json")])
    check = json.loads((folder / "valid.json").read_text())
    truth_rel, truth_rms = truth_check(arm, folder / "valid")
    run(["identify-payload", str(folder / "loaded"), "--unloaded", str(folder / "unloaded"),
         "--links", str(model), "--payload-frame", arm.sensor_frame,
         "--output", str(folder / "payload.yaml")])
    payload_doc = yaml.safe_load((folder / "payload.yaml").read_text())
    mass = payload_doc["estimate"]["mass"]
    pair_gains = payload_doc["unloaded"].get("gains", {})
    offset = 15 / 125.0  # check-links scores from the first full filter window
    contacts = {"valid": score_contacts(check["contacts"], [], offset)}
    for bag, pushes in truth["pushes"].items():
        run(["check-links", str(model), str(folder / bag), "--output",
             str(folder / f"{bag}.json")])
        found = json.loads((folder / f"{bag}.json").read_text())["contacts"]
        contacts[bag] = {**score_contacts(found, pushes, offset),
                         "peak_joint_torque_nm": [round(x, 2) for x in truth["push_peak"][bag]]}
    ratio = [a / b for a, b in zip(check["relative_error_percent"], truth_rel, strict=True)]
    return {
        "arm": name, "seed": seed, "joints": check["joints"],
        "gain_error": arm.gain_error.tolist(),
        "friction_choice": doc["friction_model"], "prior_weight": doc["prior_weight"],
        "gain_std": doc.get("gain_std"), "gain_anchor": doc.get("gain_anchor"),
        "effort_scale": list(doc["effort_scale"].values()),
        "pair_effort_scale": list(pair_gains.get("effort_scale", {}).values()),
        "pair_gain_choice": [{k: r[k] for k in ("gains", "score")}
                             for r in pair_gains.get("candidates", [])],
        "identified_relative_error_percent": check["relative_error_percent"],
        "truth_relative_error_percent": truth_rel,
        "ratio": ratio, "cad_relative_error_percent": check["urdf_relative_error_percent"],
        "identified_rms": check["rms"], "truth_rms": truth_rms,
        "payload_mass": truth["payload_mass"], "payload_mass_identified": mass,
        "payload_mass_error_percent": 100 * (mass / truth["payload_mass"] - 1),
        "contacts": contacts, "seconds": round(time.perf_counter() - begin, 1)}


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Whether each part of the target holds over all arms."""
    pushes = [c for r in rows for k, c in r["contacts"].items() if k != "valid"]
    return {
        "worst_ratio": max(max(r["ratio"]) for r in rows),
        "links_met": all(max(r["ratio"]) <= TARGET["ratio"] for r in rows),
        "worst_mass_error_percent": max(abs(r["payload_mass_error_percent"]) for r in rows),
        "payload_met": all(abs(r["payload_mass_error_percent"]) <= TARGET["mass_pct"]
                           for r in rows),
        "pushes": sum(c["pushes"] for c in pushes), "found": sum(c["found"] for c in pushes),
        "false_alarms": sum(c["false_alarms"] for r in rows for c in r["contacts"].values()),
        "max_onset_delay_s": max((d for c in pushes for d in c["onset_delay_s"]
                                  if d is not None), default=None)}


def print_arm(r: dict[str, Any]) -> None:
    """One arm's table."""
    print(f"\narm {r['arm']} seed {r['seed']} ({r['seconds']} s): memory x0 "
          f"{r['friction_choice']['presliding']:g}, prior weight {r['prior_weight']}, "
          f"gain prior std {r['gain_std']}")
    for label, key in (("identified %", "identified_relative_error_percent"),
                       ("truth %", "truth_relative_error_percent"), ("ratio", "ratio"),
                       ("CAD URDF %", "cad_relative_error_percent"),
                       ("gain error", "gain_error"), ("links' scales", "effort_scale"),
                       ("pair's scales", "pair_effort_scale")):
        print(f"  {label:<14}" + " ".join(f"{v:8.3f}" for v in r[key]))
    print(f"  payload {r['payload_mass']:.4f} kg -> {r['payload_mass_identified']:.4f} kg "
          f"({r['payload_mass_error_percent']:+.2f} %)")
    for bag, c in r["contacts"].items():
        print(f"  {bag}: {c['found']}/{c['pushes']} found, {c['false_alarms']} false, "
              f"delays {c['onset_delay_s']}")


def main(argv: list[str] | None = None) -> int:
    """Run the bench; 0 when the target is met."""
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3],
                   help="one simulated arm per seed (default 1 2 3)")
    p.add_argument("--arm", choices=sorted(ARMS), default="bundled",
                   help="the URDF (default bundled: inertial_id/resources/arm6_ft.urdf)")
    p.add_argument("--push-force", type=float, default=60.0, metavar="N",
                   help="pushes of N/2 to N newtons at the flange (default 60)")
    p.add_argument("--known-gain", nargs="+", default=[], metavar="JOINT",
                   help="give identify-links these joints' true drive gains (--drive-gain), "
                   "as a user who measured them would")
    p.add_argument("--gain-std", metavar="STD|auto",
                   help="pass identify-links --gain-std (default: its own default)")
    p.add_argument("--json", type=Path, metavar="OUT", help="write every figure here")
    p.add_argument("--keep", type=Path, metavar="DIR",
                   help="keep the bags and outputs under DIR (default: a temporary folder)")
    args = p.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        for seed in args.seeds:
            folder = root / f"{args.arm}_{seed}"
            folder.mkdir(parents=True, exist_ok=False)
            rows.append(one_arm(args.arm, seed, folder, args.push_force,
                                tuple(args.known_gain), args.gain_std))
            print_arm(rows[-1])
    total = summary(rows)
    print("\n" + json.dumps(total))
    if args.json:
        args.json.write_text(json.dumps({"arms": rows, "summary": total}, indent=2) + "\n")
    met = (total["links_met"] and total["payload_met"] and total["found"] == total["pushes"]
           and total["false_alarms"] == 0)
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
