#!/usr/bin/env python3
"""Joint-torque identification on simulated motor-current arms, with the commands' defaults.

Each arm (:class:`inertial_id.core.joint_torque.current_arm.MotorCurrentArm`, one per seed) is the
CAD URDF
with its link inertials perturbed (mass +-10 %, CoM +-1 cm, inertia +-20 %), efforts from motor
currents at 125 Hz (drive gains off by up to 4 % per joint, current noise 0.02 A, 1 mA steps,
a current offset), Coulomb friction held at rest at 95 % in the last direction of motion
(presliding 5 mrad), viscous friction. Recordings (bags written as ``inertial-id simulate``
writes them):

- ``ident`` (40 s) and ``valid`` (30 s): two different exciting trajectories of the unloaded
  arm, in each the fifth joint (a wrist joint) stands still for 5 s while the others move
  (``--rest-only-in-validation``: in ``valid`` only, so no record identify-links sees rests);
- ``loaded``/``unloaded`` (25 s each): one trajectory, with a random payload (1.5-3 kg, CoM
  up to 8 cm off, box inertia) and without;
- ``push1``, ``push2`` (30 s each): other trajectories of the unloaded arm with people pushing
  the flange (20-60 N in random directions, 0.5-2 s each, about 30 % of the recording).

Per arm the package's commands run with their defaults (in-process, ``inertial_id.tools.cli.main``):
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

The real arms (``--robots panda tiago``; by default those whose data is next to the
repository) go through the same commands with the same defaults, from bags written as their
drivers publish (the recordings' own stamps, positions and efforts):
``identify-links BAG --urdf URDF --train-rows A B`` then ``check-links MODEL HELD_OUT``
(held-out rows written as their own bag). Neither has another recording with nothing held, so
identify-links chooses on time blocks of its training rows.

- Panda (bench/panda_links.py's data, URDF, generic prior and target): the first and the last
  of its five time blocks held out (one training range, the protocol
  of the tables in docs/joint_torque.md; identify-links now takes several); the
  published models (p_hat, delta, the released .m model, with the released friction) scored on
  check-links' own rows; ratio identified / best published per joint, target met when the
  gain over the best published is >= 5 % on joints 1-4 and >= 3 % on 5-7, every link
  consistent. No contact in the recording: every interval check-links reports is false.
- TIAGo (bench/tiago_links.py's test part: the last 30 %): the CAD model (URDF inertials, the
  drive gains, friction and offsets fitted on the same training rows under the friction model
  identify-links chose) scored on the same rows; ratio identified / CAD.

Each with the defaults, then (as a measurement, not a default) with the Savitzky-Golay window
spanning the simulated arms' 0.24 s in the arm's own samples, and TIAGo with ``--fit-gains``
(its efforts are driver units, not N m).

    python bench/torque_generalization.py --json torque_generalization.json   # all, ~10 min
    python bench/torque_generalization.py --robots sim         # the 3 simulated arms only
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: `bench` as a package

from bench._panda_data import DEFAULT_DATA_DIR as PANDA_DATA  # noqa: E402
from bench._panda_data import (  # noqa: E402
    DELTA,
    P_HAT,
    panda_urdf,
    published_bodies,
    published_friction,
    read_raw,
    reverse_engineered_torques,
)
from bench.panda_links import EDGE, GUARD, TARGET_GAIN, blocks, generic_prior  # noqa: E402
from bench.tiago_bag import EPOCH  # noqa: E402
from bench.tiago_links import DEFAULT_DATA_DIR as TIAGO_DATA  # noqa: E402
from bench.tiago_links import fit_cad  # noqa: E402
from bench.tiago_links import load as tiago_load  # noqa: E402
from bench.tiago_links import split as tiago_split  # noqa: E402
from inertial_id.core.joint_torque.current_arm import (  # noqa: E402
    MotorCurrentArm,
    nothing_held,
    random_pushes,
    trajectory,
)
from inertial_id.core.joint_torque.friction import FrictionModel  # noqa: E402
from inertial_id.core.joint_torque.link_model import LinkModel  # noqa: E402
from inertial_id.core.joint_torque.torque_payload import LinkTorqueModel  # noqa: E402
from inertial_id.core.parameters import BodyParameters  # noqa: E402
from inertial_id.core.simulation import BUNDLED_HOME  # noqa: E402
from inertial_id.io.bags import (  # noqa: E402
    JOINT_STATE,
    STRING,
    joint_state_message,
    string_message,
    write_bag,
)
from inertial_id.io.joint_records import read_joint_csv, window_samples  # noqa: E402
from inertial_id.tools.cli import main as inertial_id  # noqa: E402
from inertial_id.tools.synthetic import write_current_bag
from inertial_id.tools.torque_tool import read_rows  # noqa: E402

ARMS = {"bundled": ("arm6_ft.urdf", BUNDLED_HOME),
        "spherical": ("arm6_spherical_ft.urdf", (0.0, 0.3, 0.3, 0.5, 0.9, 0.3))}
HOLD_JOINT = 4
TARGET = {"ratio": 1.10, "mass_pct": 2.0}
ROBOTS = ("sim", "panda", "tiago")


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


def make_bags(arm: MotorCurrentArm, seed: int, folder: Path, push_force: float = 60.0,
              rest_in_ident: bool = True) -> dict[str, Any]:
    """Write the arm's six recordings into ``folder`` (pushes of ``push_force / 2`` to
    ``push_force`` N; the fifth joint rests in ``valid``, and in ``ident`` when
    ``rest_in_ident``); their truths."""
    home = arm.home
    payload = random_payload(seed)
    base = 100 * seed
    hold = ((HOLD_JOINT, 14.0, 19.0),) if rest_in_ident else ()
    plan = {"ident": (trajectory(home, base + 1, hold), 40.0,
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
    options = SimpleNamespace(joint_states_topic=None, window=None, order=3)
    t, q, qd, qdd, effort = read_rows(links, bag, options)
    predicted = arm.expected(arm.rigid(q, qd, qdd), qd, float(np.median(np.diff(t))))
    return relative(effort, predicted), np.sqrt(np.mean((effort - predicted) ** 2, 0)).tolist()


def score_contacts(intervals: list[list[float]], pushes: list[list[float]]
                   ) -> dict[str, Any]:
    """Pushes found, their onset delays (s) and the false alarms of check-links' contact
    ``intervals`` (s since the recording's first joint state, as the pushes)."""
    delays = []
    for start, end in pushes:
        hits = [a for a, b in intervals if a < end + 0.3 and b > start]
        delays.append(round(min(hits) - start, 3) if hits else None)
    false = [iv for iv in intervals
             if not any(iv[0] < e + 0.5 and iv[1] > s - 0.5 for s, e in pushes)]
    return {"pushes": len(pushes), "found": sum(d is not None for d in delays),
            "onset_delay_s": delays, "false_alarms": len(false), "false_intervals": false}


def one_arm(name: str, seed: int, folder: Path, push_force: float = 60.0,
            known: tuple[str, ...] = (), gain_std: str | None = None,
            rest_in_ident: bool = True) -> dict[str, Any]:
    """Simulate one arm, run the commands, score them (``known``: joints whose true drive
    gain identify-links is given, ``--drive-gain``, as a user who measured it)."""
    urdf_file, home = ARMS[name]
    cad = str(resources.files("inertial_id") / "resources" / urdf_file)
    arm = MotorCurrentArm.random(cad, seed, home=home)
    begin = time.perf_counter()
    truth = make_bags(arm, seed, folder, push_force, rest_in_ident)
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
    contacts = {"valid": score_contacts(check["contacts"], [])}
    for bag, pushes in truth["pushes"].items():
        run(["check-links", str(model), str(folder / bag), "--output",
             str(folder / f"{bag}.json")])
        found = json.loads((folder / f"{bag}.json").read_text())["contacts"]
        contacts[bag] = {**score_contacts(found, pushes),
                         "peak_joint_torque_nm": [round(x, 2) for x in truth["push_peak"][bag]]}
    ratio = [a / b for a, b in zip(check["relative_error_percent"], truth_rel, strict=True)]
    return {
        "arm": name, "seed": seed, "joints": check["joints"],
        "gain_error": arm.gain_error.tolist(),
        "friction_choice": doc["friction_model"],
        "rest_rule": doc["choices"]["friction"].get("rest"), "prior_weight": doc["prior_weight"],
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


# ------------------------------------------------------------------------- the real arms
#
# The same commands with the same defaults on the real recordings (next to the repository):
# identify-links on the training rows, check-links on held-out rows written as their own bag.
# Neither real arm has a second recording with nothing held, so identify-links makes its
# choices on time blocks of the training rows (no --held-out). Each held-out bag carries half
# a Savitzky-Golay window more on each side, which check-links' filter needs and does not
# score: it scores exactly the held-out rows, with the states the whole record's filter gives
# them.

TIAGO_TRAIN_FRACTION = 0.7  # bench/tiago_links.py's split: the first 70 % train


def check_options(window: int | None) -> SimpleNamespace:
    """check-links' reading options (read_rows) with this window."""
    return SimpleNamespace(joint_states_topic=None, window=window, order=3)


def window_for(t: np.ndarray, seconds: float | None) -> int:
    """The odd window (samples) spanning ``seconds`` at the record's rate, as the commands
    compute it (:func:`~inertial_id.io.joint_records.window_samples`); their default, 0.24 s,
    without ``seconds``."""
    return window_samples(t) if seconds is None else window_samples(t, seconds=seconds)


def write_joint_bag(path: Path, t: np.ndarray, names: list[str], position: np.ndarray,
                    effort: np.ndarray, urdf: str, velocity: np.ndarray | None = None) -> Path:
    """Joint states with efforts, as a driver publishes them (header stamps ``EPOCH + t``),
    and the URDF on ``/robot_description``."""
    def messages():  # noqa: ANN202
        yield "/robot_description", STRING, EPOCH + t[0], string_message(urdf)
        for k, stamp in enumerate(EPOCH + t):
            yield ("/joint_states", JOINT_STATE, stamp + 1e-4, joint_state_message(
                stamp, names, position[k], np.zeros(0) if velocity is None else velocity[k],
                effort[k]))

    write_bag(path, messages())
    return path


def held_out_bag(path: Path, t: np.ndarray, names: list[str], position: np.ndarray,
                 effort: np.ndarray, urdf: str, rows: tuple[int, int], window: int | None,
                 velocity: np.ndarray | None = None) -> Path:
    """Rows ``[a, b)`` with half a window more on each side (not scored): ``window``, or
    with the commands' default (``window`` None) the window check-links computes from the
    padded rows' own stamps (it follows their jitter)."""
    half = (window or window_samples(t)) // 2
    for _ in range(5):  # the padded rows' default window, stable after a step or two
        a, b = max(rows[0] - half, 0), min(rows[1] + half, t.size)
        if window is not None or window_samples(t[a:b]) // 2 == half:
            break
        half = window_samples(t[a:b]) // 2
    a, b = rows[0] - half, rows[1] + half
    assert a >= 0 and b <= t.size
    return write_joint_bag(path, t[a:b], names, position[a:b], effort[a:b], urdf,
                           None if velocity is None else velocity[a:b])


def identify_and_check(folder: Path, bag: Path, urdf: Path, train: tuple[int, int],
                       check: Path, extra: tuple[str, ...] = (), window: int | None = None
                       ) -> tuple[dict, dict]:
    """``identify-links BAG --urdf URDF --train-rows A B [extra]`` then ``check-links MODEL
    CHECK`` (both with ``--window`` when a window is given, else the commands' default): the
    model YAML and the check's JSON."""
    model, out = folder / "model.yaml", folder / "check.json"
    given = [] if window is None else ["--window", str(window)]
    run(["identify-links", str(bag), "--urdf", str(urdf), "--train-rows", str(train[0]),
         str(train[1]), *extra, *given, "--output", str(model)])
    run(["check-links", str(model), str(check), *given, "--output", str(out)])
    return yaml.safe_load(model.read_text()), json.loads(out.read_text())


def choices(doc: dict) -> dict[str, Any]:
    """What identify-links chose from the data (the model YAML's)."""
    return {"friction_model": doc["friction_model"], "prior_weight": doc["prior_weight"],
            "gain_std": doc.get("gain_std"), "effort_scale": list(doc["effort_scale"].values()),
            "all_links_consistent": doc.get("all_links_consistent"), "seconds": doc["seconds"]}


def panda(root: Path, data: Path, seconds: float | None = None, folds: int = 5
          ) -> dict[str, Any]:
    """The Panda recording through the commands, scored against the published models.

    The recording is written as a bag as recorded (1 kHz, jittery stamps, raw joint-torque
    sensor readings; the URDF of bench/panda_links.py: the DH kinematics and its generic
    prior, neither published model). bench/panda_links.py's five time blocks (after 0.2 s at
    each end); the folds held out are the first and the last block (training: the four
    others in one range, 0.25 s guard; this protocol predates several --train-rows ranges).
    The published models (p_hat, delta, the released .m model, each with the released
    friction) are evaluated on check-links' own rows (the same Savitzky-Golay states);
    score: RMS of the raw torque minus the prediction, pooled over the held-out blocks, and
    ``100 |e - e_hat| / |e|``. ``seconds``: the Savitzky-Golay window's span (see
    :func:`window_for`)."""
    t, raw = read_raw(data)
    window = window_for(t, seconds)
    names = [f"panda_joint{j}" for j in range(1, 8)]
    q, qd, tau = raw["positions"], raw["velocity"], raw["torques"]
    text = panda_urdf(generic_prior())
    urdf = root / "panda.urdf"
    urdf.write_text(text)
    bag = root / "panda"
    if not bag.exists():
        write_joint_bag(bag, t, names, q, tau, text, qd)
    inner = np.flatnonzero((t >= t[0] + EDGE) & (t <= t[-1] - EDGE))
    parts = [inner[b] for b in blocks(inner.size, folds)]
    kinematics = LinkModel(text)
    bodies = {name: np.concatenate([b.pi for b in published_bodies(table)])
              for name, table in (("p_hat", P_HAT), ("delta", DELTA))}
    names_published = ("p_hat", "delta", "reverse_engineered")
    effort_rows, residuals, fold_docs = [], {k: [] for k in ("identified", *names_published)}, []
    for k in (0, folds - 1):
        held = parts[k]
        a, b = int(held[0]), int(held[-1]) + 1
        if k == 0:
            train = (int(np.searchsorted(t, t[b - 1] + GUARD, "right")), int(inner[-1]) + 1)
        else:
            train = (int(inner[0]), int(np.searchsorted(t, t[a] - GUARD, "left")))
        folder = root / f"panda_window{window}_fold{k + 1}"
        folder.mkdir()
        given = None if seconds is None else window
        check = held_out_bag(folder / "held_out", t, names, q, tau, text, (a, b), given, qd)
        begin = time.perf_counter()
        doc, result = identify_and_check(folder, bag, urdf, train, check, (), given)
        links = LinkTorqueModel.from_file(folder / "model.yaml")
        rows_t, rq, rqd, rqdd, effort = read_rows(links, check, check_options(given))
        assert effort.shape[0] == b - a == result["samples"]
        assert list(links.model.joint_names) == names == kinematics.joint_names
        identified = links.at_sample_period(float(np.median(np.diff(rows_t)))).efforts(
            rq, rqd, rqdd)
        assert np.allclose(np.sqrt(np.mean((effort - identified) ** 2, 0)), result["rms"])
        regressor = kinematics.regressor(rq, rqd, rqdd)
        predictions = {"identified": identified, "reverse_engineered":
                       reverse_engineered_torques(rq, rqd, rqdd, data)}
        for name, pi in bodies.items():
            predictions[name] = np.einsum("njp,p->nj", regressor, pi) + published_friction(rqd)
        effort_rows.append(effort)
        for name, prediction in predictions.items():
            residuals[name].append(effort - prediction)
        fold_docs.append({"fold": k + 1, "held_out_s": [float(t[a] - t[0]), float(t[b - 1] - t[0])],
                          "train_rows": list(train), "held_out_rows": [a, b],
                          "contacts": result["contacts"], **choices(doc),
                          "seconds": round(time.perf_counter() - begin, 1)})
        print(f"panda (window {window}) fold {k + 1}: held out "
              f"{t[a] - t[0]:.2f}-{t[b - 1] - t[0]:.2f} s, {fold_docs[-1]['seconds']} s",
              flush=True)
    effort = np.concatenate(effort_rows)
    norm = np.linalg.norm(effort, axis=0)
    scores = {}
    for name, parts_ in residuals.items():
        residual = np.concatenate(parts_)
        scores[name] = {"rms": np.sqrt(np.mean(residual ** 2, 0)).tolist(),
                        "relative_error_percent": (100 * np.linalg.norm(residual, axis=0)
                                                   / norm).tolist()}
    best_index = np.argmin([scores[n]["rms"] for n in names_published], axis=0)
    best_rms = np.array([scores[names_published[i]]["rms"][j] for j, i in enumerate(best_index)])
    best_rel = [scores[names_published[i]]["relative_error_percent"][j]
                for j, i in enumerate(best_index)]
    ident = np.asarray(scores["identified"]["rms"])
    gain = 100 * (1 - ident / best_rms)
    consistent = all(f["all_links_consistent"] for f in fold_docs)
    false = sum(len(f["contacts"]) for f in fold_docs)
    return {
        "robot": "panda", "window": window, "window_seconds": seconds,
        "flags": [] if seconds is None else ["--window", str(window)],
        "joints": names, "folds_held_out": [f["fold"] for f in fold_docs],
        "samples": int(effort.shape[0]), "models": scores,
        "identified_relative_error_percent": scores["identified"]["relative_error_percent"],
        "best_published": [names_published[i] for i in best_index],
        "best_published_relative_error_percent": best_rel,
        "ratio": (ident / best_rms).tolist(),
        "gain_over_best_published_percent": gain.tolist(),
        "target_gain_percent": list(TARGET_GAIN),
        "target_met": bool(np.all(gain >= np.asarray(TARGET_GAIN)) and consistent),
        "target_shortfall_percent": np.maximum(np.asarray(TARGET_GAIN) - gain, 0).tolist(),
        "all_links_consistent": consistent, "false_alarms": false, "folds": fold_docs}


def tiago(root: Path, data: Path, extra: tuple[str, ...] = (), seconds: float | None = None
          ) -> dict[str, Any]:
    """The TIAGo ``dynamic`` recording through the commands (``extra``: flags added to
    identify-links), scored against the CAD model on bench/tiago_links.py's test part.

    The recording is written as a bag (torso lift and arm 1-7, positions and the driver's
    efforts, about 100 Hz; the other joints of the URDF locked at 0 by identify-links).
    identify-links trains on the first 70 % (``--train-rows 0 A``), check-links scores the last
    30 %. The CAD model (the data set's only reference: the URDF's inertials) gets the drive
    gains, Coulomb, viscous friction and offsets fitted per joint on the same training rows
    (bench/tiago_links.py's CAD fit) under the friction model identify-links chose, and is
    scored on the same rows. ``seconds``: the Savitzky-Golay window's span (see
    :func:`window_for`)."""
    run_dir = data / "dynamic"
    position = read_joint_csv(run_dir / "tiago_position.csv")
    effort = read_joint_csv(run_dir / "tiago_effort.csv")
    assert position.names == effort.names and np.allclose(position.t, effort.t)
    text = (data / "tiago_48_hey5.urdf").read_text()
    window = window_for(position.t, seconds)
    label = f"tiago_window{window}" + "".join(extra).replace("-", "_")
    folder = root / label
    folder.mkdir()
    bag = write_joint_bag(folder / "tiago", position.t, position.names, position.values,
                          effort.values, text)
    n = position.t.size
    stop = int(TIAGO_TRAIN_FRACTION * n)
    given = None if seconds is None else window
    check = held_out_bag(folder / "test", position.t, position.names, position.values,
                         effort.values, text, (stop, n - window // 2), given)
    begin = time.perf_counter()
    doc, result = identify_and_check(folder, bag, data / "tiago_48_hey5.urdf", (0, stop), check,
                                     extra, given)
    model, joint = tiago_load(data, window)
    assert list(model.joint_names) == result["joints"]
    friction = FrictionModel.from_settings(doc["friction_model"])
    _, train, test = tiago_split(model, joint, TIAGO_TRAIN_FRACTION, friction)
    assert test.samples == result["samples"]
    cad = fit_cad(train)
    residual = test.effort - test.predict(cad)
    cad_rel = (100 * np.linalg.norm(residual, axis=0)
               / np.linalg.norm(test.effort, axis=0)).tolist()
    ident = result["relative_error_percent"]
    return {
        "robot": "tiago", "window": window, "window_seconds": seconds,
        "flags": [*extra, *([] if seconds is None else ["--window", str(window)])],
        "joints": result["joints"],
        "train_rows": [0, stop], "samples": result["samples"],
        "identified_rms": result["rms"], "identified_relative_error_percent": ident,
        "cad_rms": np.sqrt(np.mean(residual ** 2, 0)).tolist(),
        "cad_relative_error_percent": cad_rel,
        "cad_effort_scale": cad.effort_scale.tolist(),
        "ratio": [a / b for a, b in zip(ident, cad_rel, strict=True)],
        "false_alarms": len(result["contacts"]), "contacts": result["contacts"],
        **choices(doc), "seconds": round(time.perf_counter() - begin, 1)}


def print_real(r: dict[str, Any]) -> None:
    """A real arm's table."""
    what = "best published" if r["robot"] == "panda" else "CAD fit"
    key = ("best_published_relative_error_percent" if r["robot"] == "panda"
           else "cad_relative_error_percent")
    print(f"\n{r['robot']} {' '.join(r['flags'])}")
    for label, values in (("identified %", r["identified_relative_error_percent"]),
                          (f"{what} %", r[key]), ("ratio", r["ratio"])):
        print(f"  {label:<18}" + " ".join(f"{v:8.3f}" for v in values))
    if r["robot"] == "panda":
        print("  best published    " + " ".join(f"{v:>8.8s}" for v in r["best_published"]))
        print("  gain %            " + " ".join(
            f"{v:8.1f}" for v in r["gain_over_best_published_percent"]))
        print(f"  target met: {r['target_met']} (consistent {r['all_links_consistent']}, "
              f"false alarms {r['false_alarms']})")
    else:
        print(f"  false alarms {r['false_alarms']}; {r['seconds']} s")

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
    p.add_argument("--rest-only-in-validation", action="store_true",
                   help="the fifth joint rests only in the validation recording (no joint "
                   "rests in the identification record or the unloaded run)")
    p.add_argument("--robots", nargs="+", choices=ROBOTS, metavar="ROBOT",
                   help="sim (the simulated arms), panda, tiago (the real recordings next to "
                   "the repository); default: sim and every real one whose data is there")
    p.add_argument("--panda-data", type=Path, default=PANDA_DATA, metavar="DIR",
                   help="the Panda data folder (default: shared/data/panda next to the "
                   "repository)")
    p.add_argument("--tiago-data", type=Path, default=TIAGO_DATA, metavar="DIR",
                   help="the TIAGo data folder (default: shared/data/tiago next to the "
                   "repository)")
    p.add_argument("--json", type=Path, metavar="OUT", help="write every figure here")
    p.add_argument("--keep", type=Path, metavar="DIR",
                   help="keep the bags and outputs under DIR (default: a temporary folder)")
    args = p.parse_args(argv)
    robots = args.robots or ["sim", *(name for name, folder in (
        ("panda", args.panda_data), ("tiago", args.tiago_data)) if folder.is_dir())]
    rows, real = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        if "sim" in robots:
            for seed in args.seeds:
                folder = root / f"{args.arm}_{seed}"
                folder.mkdir(parents=True, exist_ok=False)
                rows.append(one_arm(args.arm, seed, folder, args.push_force,
                                    tuple(args.known_gain), args.gain_std,
                                    not args.rest_only_in_validation))
                print_arm(rows[-1])
        # Each real arm with the commands' defaults, then with their Savitzky-Golay window
        # spanning the simulated arms' 0.24 s (the default's 31 samples are 0.031 s at the
        # Panda's 1 kHz); TIAGo also with --fit-gains: its efforts are driver units (the CAD
        # fit's scales 1e-4 to 0.14 in magnitude, five negative), not the N m the defaults take.
        runs = {"panda": ("panda", (), None), "tiago": ("tiago", (), None),
                "tiago_fit_gains": ("tiago", ("--fit-gains",), None)}
        for key, (robot, extra, seconds) in runs.items():
            if robot not in robots:
                continue
            real[key] = (panda(root, args.panda_data, seconds) if robot == "panda"
                         else tiago(root, args.tiago_data, extra, seconds))
            print_real(real[key])
    total = summary(rows) if rows else {}
    print("\n" + json.dumps(total))
    if args.json:
        args.json.write_text(json.dumps({"robots": robots, "arms": rows, "summary": total,
                                         **real}, indent=2) + "\n")
    met = not rows or (total["links_met"] and total["payload_met"]
                       and total["found"] == total["pushes"] and total["false_alarms"] == 0)
    met = met and real.get("panda", {}).get("target_met", True)
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
