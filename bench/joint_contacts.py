#!/usr/bin/env python3
"""Contacts from joint torques alone: all pushes of 5 N m found, no false alarm in 10 min.

The simulated bundled arm (no F/T sensor used) moves along exciting trajectories; its joint
torques are the URDF's rigid-body torques plus Coulomb and viscous friction plus 0.05 N m of
noise, as :class:`~inertial_id.core.simulation.PayloadSimulation` makes them. The link model
is identified first from a separate contact-free recording (the package's
``identify-links`` fit: SDP with the URDF prior, smooth Coulomb + viscous + offset), as a user
would. Then:

- **false alarms**: 10 minutes of contact-free motion (one recording per trajectory seed,
  ``--minutes``), every contact interval the detector reports counts as a false alarm;
- **pushes**: recordings of 60 s with pushes at the flange, each scaled so that the largest
  joint torque it causes, at its mid-time, is exactly ``--push-torque`` (5 N m: the issue's
  smallest contact to find), random directions, 0.3-1.5 s long, one recording starting
  **with** a push (no clean training period). A push is found when a reported interval
  overlaps it.

Detection: :func:`inertial_id.core.estimation.anomaly.contact_intervals` on the residual ``measured
- model`` (Savitzky-Golay positions as in ``check-links``): Hotelling T^2 with the contact-free
covariance learned robustly from the whole record, confidence 0.9999, 0.1 s above the
threshold to start a contact, 0.1 s below to end it. The simulated residual is white noise
around an exact model structure, which flatters any detector: the real-data counterpart is the
false-alarm count of ``bench/panda_links.py`` on the Panda's held-out residuals.

The **live** monitor (the solver's ``payload_from_torques`` mode,
:class:`~inertial_id.core.joint_torque.torque_payload.TorquePayloadOnline`) runs on the same kind of
streams with a 1 kg payload held (it starts once the payload's mass has converged): one
contact-free stream of ``--minutes``, and 1-minute streams with pushes after 20 s.

    python bench/joint_contacts.py --json joint_contacts.json      # about 2 min on 2 cores
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from inertial_id.core.estimation.anomaly import contact_intervals
from inertial_id.core.estimation.online import OnlineConfig
from inertial_id.core.joint_torque.friction import FrictionModel
from inertial_id.core.joint_torque.link_model import LinkModel
from inertial_id.core.joint_torque.links import LinkIdentification, identify
from inertial_id.core.joint_torque.torque_payload import (
    LinkTorqueModel,
    TorquePayloadIdentifier,
    TorquePayloadOnline,
    TorquePayloadStream,
)
from inertial_id.core.kinematics import SensorKinematics
from inertial_id.core.parameters import BodyParameters
from inertial_id.core.signals import savitzky_golay
from inertial_id.core.simulation import (
    BUNDLED_HOME,
    BUNDLED_SENSOR_FRAME,
    Contact,
    FourierTrajectory,
    PayloadSimulation,
    bundled_urdf_path,
)

RATE = 200.0  # Hz of joint states
WINDOW = 31
NOTHING = BodyParameters.from_mass_com_inertia(1e-6, [0, 0, 0], [1e-9, 0, 0, 1e-9, 0, 1e-9])


HELD = BodyParameters.from_mass_com_inertia(1.0, [0.0, 0.02, 0.07],
                                           [0.002, 0.0, 0.0, 0.002, 0.0, 0.001])
"""The payload of the live runs (the live monitor starts once its mass has converged)."""


def simulation(seed: int, contacts: tuple[Contact, ...] = (),
               payload: BodyParameters = NOTHING) -> PayloadSimulation:
    """The bundled arm holding ``payload`` (default nothing: the flange is pushed),
    trajectory ``seed``."""
    trajectory = FourierTrajectory.random(BUNDLED_HOME, amplitude=0.7, period=10.0,
                                          max_velocity=1.2, seed=seed)
    return PayloadSimulation(SensorKinematics(bundled_urdf_path(), BUNDLED_SENSOR_FRAME),
                             trajectory, payload=payload, contacts=contacts, seed=seed)


def live(links: LinkTorqueModel, sim: PayloadSimulation, seconds: float
         ) -> list[tuple[float, str]]:
    """Stream the simulated joint states through the live estimator and monitor
    (:class:`TorquePayloadOnline`, as the solver's ``payload_from_torques`` mode runs it:
    contact test every 0.05 s, a solve every 0.5 s); returns the events with their stamps."""
    t = np.arange(0.0, seconds, 1.0 / RATE)
    q, _ = sim.joint_states(t)
    effort = sim.joint_efforts(t)
    online = TorquePayloadOnline(
        TorquePayloadStream(TorquePayloadIdentifier(links, BUNDLED_SENSOR_FRAME), WINDOW),
        OnlineConfig(min_samples=300, training_samples=400))
    events: list[tuple[float, str]] = []
    step_every, solve_every = int(0.05 * RATE), int(0.5 * RATE)
    for k in range(t.size):
        online.stream.push(t[k], q[k], effort[k])
        if k % step_every == step_every - 1:
            step = online.step()
            if step is not None:
                events += [(float(step.times[-1]), e) for e in step.events]
        if k % solve_every == solve_every - 1:
            online.solve()
    return events


def run_live(links: LinkTorqueModel, minutes: float, recordings: int, push_torque: float,
             seed: int) -> dict:
    """The live monitor: false alarms in ``minutes`` of one contact-free stream, pushes found
    (a ``contact_start`` within a push or 0.3 s after it) in 1-minute streams whose pushes
    start after 20 s (the estimate has converged and the monitor trained by then)."""
    events = live(links, simulation(seed, payload=HELD), 60.0 * minutes)
    false_alarms = [round(t, 2) for t, e in events if e == "contact_start"]
    relearned = sum(e == "baseline_relearned" for _, e in events)
    rng = np.random.default_rng(seed + 1)
    total = found = 0
    missed = []
    for k in range(recordings):
        sim = simulation(seed + 2000 + k, payload=HELD)
        sim.contacts = tuple(c for c in pushes(sim, rng, 60.0, 8, push_torque, False)
                             if c.start > 20.0)
        starts = [t for t, e in live(links, sim, 60.0) if e == "contact_start"]
        for c in sim.contacts:
            total += 1
            if any(c.start <= s <= c.start + c.duration + 0.3 for s in starts):
                found += 1
            else:
                missed.append([k, c.start, c.duration])
    return {"contact_free_seconds": 60.0 * minutes, "false_alarms": len(false_alarms),
            "false_alarm_stamps": false_alarms, "baseline_relearned": relearned,
            "pushes": total, "pushes_found": found, "missed": missed}


def record(sim: PayloadSimulation, seconds: float) -> tuple[NDArray[np.float64], ...]:
    """(t, q, qd, qdd, effort): positions with encoder noise, Savitzky-Golay smoothed and
    differentiated, the filter's edges dropped."""
    t = np.arange(0.0, seconds, 1.0 / RATE)
    q_measured, _ = sim.joint_states(t)
    effort = sim.joint_efforts(t)
    q, qd, qdd = (savitzky_golay(t, q_measured, WINDOW, 3, d) for d in (0, 1, 2))
    inner = slice(WINDOW // 2, t.size - WINDOW // 2)
    return t[inner], q[inner], qd[inner], qdd[inner], effort[inner]


def identified_model(seconds: float = 60.0) -> LinkTorqueModel:
    """The link model identified on a contact-free recording (seed 100)."""
    _, q, qd, qdd, effort = record(simulation(100), seconds)
    model = LinkModel(bundled_urdf_path())
    friction = FrictionModel(coulomb="symmetric", smooth=True, velocity_threshold=0.03)
    problem = LinkIdentification(model, q, qd, qdd, effort, friction=friction)
    est = identify(problem, method="sdp", prior_weight=1e-3)
    return LinkTorqueModel(model, est.standard, friction, est.friction, est.effort_scale,
                           est.joint_sigma)


def pushes(sim: PayloadSimulation, rng: np.random.Generator, seconds: float, count: int,
           torque: float, start_with_one: bool) -> tuple[Contact, ...]:
    """``count`` pushes at the flange, each scaled so its largest joint torque at mid-time is
    ``torque`` (N m), spaced at least 4 s apart."""
    starts = np.sort(rng.uniform(3.0, seconds - 3.0, count))
    starts = starts[np.concatenate(([True], np.diff(starts) > 4.0))]
    if start_with_one:
        starts = np.concatenate(([0.0], starts[starts > 4.0]))
    out = []
    for start in starts:
        duration = float(rng.uniform(0.3, 1.5))
        direction = rng.normal(size=3)
        direction /= np.linalg.norm(direction)
        probe = Contact(0.0, 1.0, tuple(direction), (0.0, 0.0, 0.0))
        q, _, _ = sim.trajectory(np.array([start + duration / 2]))
        jac = sim.kinematics.jacobians(q)[0]
        peak = float(np.max(np.abs(jac.T @ probe.wrench())))
        out.append(Contact(float(start), duration, tuple(direction * torque / peak),
                           (0.0, 0.0, 0.0)))
    return tuple(out)


def run(minutes: float, recordings: int, push_torque: float, seed: int) -> dict:
    """The whole benchmark; the JSON document."""
    begin = time.perf_counter()
    links = identified_model()
    false_alarms, free_seconds = [], 0.0
    per_recording = 60.0
    for k in range(int(round(minutes))):
        t, q, qd, qdd, effort = record(simulation(seed + k), per_recording)
        found = contact_intervals(t, effort - links.efforts(q, qd, qdd))
        false_alarms += [[k, *interval] for interval in found]
        free_seconds += t[-1] - t[0]
    rng = np.random.default_rng(seed)
    total = found_count = 0
    missed, extra = [], 0
    for k in range(recordings):
        sim = simulation(seed + 1000 + k)
        sim.contacts = pushes(sim, rng, per_recording, 8, push_torque, start_with_one=(k == 0))
        t, q, qd, qdd, effort = record(sim, per_recording)
        found = contact_intervals(t, effort - links.efforts(q, qd, qdd))
        shifted = [(a + t[0], b + t[0]) for a, b in found]
        for c in sim.contacts:
            total += 1
            if any(a <= c.start + c.duration and b >= c.start for a, b in shifted):
                found_count += 1
            else:
                missed.append([k, c.start, c.duration])
        extra += sum(not any(a <= c.start + c.duration + 0.2 and b >= c.start - 0.2
                             for c in sim.contacts) for a, b in shifted)
    return {"contact_free_seconds": free_seconds, "false_alarms": len(false_alarms),
            "false_alarm_intervals": false_alarms, "pushes": total, "pushes_found": found_count,
            "missed": missed, "detections_outside_pushes": extra,
            "live": run_live(links, minutes, recordings, push_torque, seed),
            "push_torque_nm": push_torque, "rate_hz": RATE,
            "seconds": time.perf_counter() - begin}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Contacts from joint torques on the simulated arm: pushes of a given "
                    "joint torque found, false alarms in contact-free motion.")
    parser.add_argument("--minutes", type=float, default=10.0,
                        help="contact-free motion, in 1-minute recordings (default 10)")
    parser.add_argument("--recordings", type=int, default=5,
                        help="1-minute recordings with pushes (default 5)")
    parser.add_argument("--push-torque", type=float, default=5.0,
                        help="largest joint torque of each push, N m (default 5)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args(argv)
    doc = run(args.minutes, args.recordings, args.push_torque, args.seed)
    print(f"contact-free: {doc['contact_free_seconds']:.0f} s, false alarms "
          f"{doc['false_alarms']}; pushes of {doc['push_torque_nm']:g} N m: "
          f"{doc['pushes_found']}/{doc['pushes']} found, {doc['detections_outside_pushes']} "
          f"detections outside pushes")
    lv = doc["live"]
    print(f"live: contact-free {lv['contact_free_seconds']:.0f} s, false alarms "
          f"{lv['false_alarms']} (baseline relearned {lv['baseline_relearned']}); pushes "
          f"{lv['pushes_found']}/{lv['pushes']} found ({doc['seconds']:.0f} s)")
    if args.json:
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
