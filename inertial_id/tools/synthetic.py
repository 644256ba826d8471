"""Synthetic bags: what a robot with a known payload would record (``inertial-id simulate``).

The core :class:`~inertial_id.core.simulation.PayloadSimulation` produces joint states and
F/T readings; they are written as ``/joint_states`` (sensor_msgs/JointState), ``/wrench``
(geometry_msgs/WrenchStamped, sensor frame) and the URDF on ``/robot_description``, and the
ground truth goes to ``ground_truth.yaml`` inside the bag directory.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from numpy.typing import NDArray

from inertial_id.core.estimation.compensation import PENDING, SETTLED, compensated_body
from inertial_id.core.joint_torque.current_arm import MotorCurrentArm, Push
from inertial_id.core.kinematics import SensorKinematics, urdf_text
from inertial_id.core.parameters import BodyParameters, vector_from_symmetric
from inertial_id.core.sensor_conditions import SensorConditions, true_bias, wrench_stream
from inertial_id.core.simulation import (
    BUNDLED_HOME,
    BUNDLED_SENSOR_FRAME,
    DEFAULT_OFFSET,
    Contact,
    FourierTrajectory,
    PayloadSimulation,
    Vibration,
    bundled_urdf_path,
    default_payload,
)
from inertial_id.io.bags import (
    JOINT_STATE,
    STRING,
    TYPESTORE,
    WRENCH,
    joint_state_message,
    string_message,
    wrench_message,
    write_bag,
)
from inertial_id.io.compensation_topic import COMPENSATION, compensation_message

COMPENSATION_TOPIC = "/applier/compensation"
DRIVER_TRANSITION = 0.3
"""s a simulated driver takes to move to the payload it was given."""
DRIVER_REQUEST_LEAD = 0.02
"""s between the applier's request and the driver's switch starting."""
START_TIME = 1_700_000_000.0
"""Stamp of the first sample (s): a plausible epoch time, as a robot would record."""


@dataclass
class SimulateOptions:
    """A synthetic recording: robot, payload, noise, events; SI units, sensor frame."""

    duration: float = 30.0
    wrench_rate: float = 1000.0
    joint_state_rate: float = 500.0
    urdf: str | None = None
    sensor_frame: str = BUNDLED_SENSOR_FRAME
    home: tuple[float, ...] | None = None
    payload: BodyParameters = field(default_factory=default_payload)
    offset: tuple[float, ...] = DEFAULT_OFFSET
    force_noise_std: float = 0.08
    torque_noise_std: float = 0.004
    contacts: tuple[Contact, ...] = ()
    vibrations: tuple[Vibration, ...] = ()
    """Vibration bursts on the F/T reading, not contacts (:class:`~inertial_id.core.simulation.
    Vibration`; listed in ``ground_truth.yaml`` when there are any)."""
    payload_change: tuple[float, BodyParameters] | None = None
    driver_payload_at: float | None = None
    """From this time (s) on, the driver subtracts the payload's mass and CoM from the wrench
    it publishes, as a UR does after the payload was applied, and the applier's announcements
    are on ``/applier/compensation`` (:data:`DRIVER_TRANSITION` s to switch)."""
    seed: int = 0
    trajectory_seed: int = 1
    storage: str = "mcap"
    conditions: SensorConditions = field(default_factory=SensorConditions)
    """Drift, re-zero steps, reception stamps, quantisation, irregular rate, bursts
    (:class:`~inertial_id.core.sensor_conditions.SensorConditions`; an ideal sensor by
    default)."""


def _simulation(options: SimulateOptions) -> tuple[PayloadSimulation, str]:
    urdf = options.urdf or bundled_urdf_path()
    kinematics = SensorKinematics(urdf, options.sensor_frame)
    home = options.home or (BUNDLED_HOME if options.urdf is None else (0.0,) * kinematics.nv)
    trajectory = FourierTrajectory.random(home, seed=options.trajectory_seed)
    sim = PayloadSimulation(
        kinematics, trajectory, payload=options.payload, offset=np.asarray(options.offset),
        force_noise_std=options.force_noise_std, torque_noise_std=options.torque_noise_std,
        contacts=options.contacts, vibrations=options.vibrations, seed=options.seed,
        payload_changes=(options.payload_change,) if options.payload_change else (),
    )
    if options.driver_payload_at is not None:
        sim.set_driver_payload(options.driver_payload_at, _driver_pi(options), DRIVER_TRANSITION)
    return sim, Path(urdf).read_text()


def _driver_pi(options: SimulateOptions) -> NDArray[np.float64]:
    """What the simulated driver subtracts: the payload's mass and CoM (sensor frame)."""
    return compensated_body(options.payload, with_inertia=False).pi


def _announcements(options: SimulateOptions) -> list[tuple[str, str, float, Any]]:
    """The applier's request and the driver's settle on ``/applier/compensation``."""
    t = options.driver_payload_at
    if t is None:
        return []
    frame = options.sensor_frame
    request, settle = START_TIME + t - DRIVER_REQUEST_LEAD, START_TIME + t + DRIVER_TRANSITION
    return [(COMPENSATION_TOPIC, COMPENSATION, request,
             compensation_message(TYPESTORE, request, frame, PENDING, np.zeros(10))),
            (COMPENSATION_TOPIC, COMPENSATION, settle,
             compensation_message(TYPESTORE, settle, frame, SETTLED, _driver_pi(options)))]


def _messages(sim: PayloadSimulation, urdf_text: str,
              options: SimulateOptions) -> Iterator[tuple[str, str, float, Any]]:
    """The recording's messages in log-time order: joint states logged just after their
    stamp, wrenches on arrival (:class:`SensorConditions`)."""
    yield "/robot_description", STRING, START_TIME, string_message(urdf_text)
    rng = np.random.default_rng([options.seed, 41])  # its own stream: ideal runs unchanged
    joint_times = np.arange(0.0, options.duration, 1.0 / options.joint_state_rate)
    positions, velocities = sim.joint_states(joint_times)
    efforts = sim.joint_efforts(joint_times)
    stream = wrench_stream(sim, options.conditions, options.duration, options.wrench_rate, rng)
    kept, joint_stamps = options.conditions.joint_stamps(joint_times, rng)
    names = sim.kinematics.joint_names
    log = [(stamp + 1e-4, 0, j, stamp) for j, stamp in zip(kept, joint_stamps, strict=True)]
    log += [(arrival + 1e-4, 1, k, stamp) for k, (arrival, stamp) in
            enumerate(zip(stream.arrival, stream.stamp, strict=True))]
    announcements = _announcements(options)
    for at, kind, k, stamp in sorted(log):
        while announcements and announcements[0][2] <= START_TIME + at:
            yield announcements.pop(0)
        if kind == 0:
            yield ("/joint_states", JOINT_STATE, START_TIME + at,
                   joint_state_message(START_TIME + stamp, names, positions[k], velocities[k],
                                       efforts[k]))
        else:
            yield ("/wrench", WRENCH, START_TIME + at,
                   wrench_message(START_TIME + stamp, options.sensor_frame, stream.wrench[k]))
    yield from announcements


def _truth(body: BodyParameters) -> dict[str, Any]:
    return {"mass": body.mass, "com": body.com.tolist(),
            "inertia_com": vector_from_symmetric(body.inertia_com).tolist(),
            "pi": body.pi.tolist()}


def simulate_bag(path: str | Path, options: SimulateOptions) -> Path:
    """Write the bag and ``ground_truth.yaml`` beside its data; returns the bag directory."""
    sim, urdf_text = _simulation(options)
    path = Path(path)
    write_bag(path, _messages(sim, urdf_text, options), options.storage)
    truth = {
        "frame": options.sensor_frame,
        "payload": _truth(options.payload),
        "wrench_offset": list(options.offset),
        "contacts": [[c.start, c.start + c.duration] for c in options.contacts],
    }
    if options.vibrations:
        truth["vibrations"] = [[v.start, v.start + v.duration] for v in options.vibrations]
    if options.driver_payload_at is not None:
        truth["driver_payload"] = {"time": options.driver_payload_at,
                                   "pi": _driver_pi(options).tolist()}
    c = options.conditions
    if c != SensorConditions():
        truth["sensor_conditions"] = {
            "drift": list(c.drift), "rezero": list(c.rezero),
            "period_jitter": c.period_jitter, "lag": list(c.lag), "quantum": list(c.quantum),
            "burst": c.burst, "burst_loss": c.burst_loss, "joint_jitter": c.joint_jitter,
            "joint_loss": c.joint_loss}
        truth["wrench_offset_end"] = true_bias(sim, c, [options.duration])[0].tolist()
    if options.payload_change:
        truth["payload_change"] = {"time": options.payload_change[0],
                                   "payload": _truth(options.payload_change[1])}
    (path / "ground_truth.yaml").write_text(yaml.safe_dump(truth, sort_keys=False))
    return path


def _current_messages(arm: MotorCurrentArm, rec: dict[str, NDArray[np.float64]]
                      ) -> Iterator[tuple[str, str, float, Any]]:
    yield "/robot_description", STRING, START_TIME, string_message(urdf_text(arm.cad_urdf))
    names = arm.joint_names
    for k, t in enumerate(rec["t"]):
        stamp = START_TIME + t
        yield ("/joint_states", JOINT_STATE, stamp + 1e-4,
               joint_state_message(stamp, names, rec["position"][k], rec["velocity"][k],
                                   rec["effort"][k]))


def write_current_bag(path: str | Path, arm: MotorCurrentArm,
                      rec: dict[str, NDArray[np.float64]], payload: BodyParameters,
                      pushes: Sequence[Push] = (), storage: str = "mcap") -> Path:
    """Write a simulated motor-current arm's recording (:meth:`MotorCurrentArm.record`) as a
    bag, with ``ground_truth.yaml`` (the arm, the payload in the sensor frame, the pushes
    ``[start, end]`` s since the first sample) and the true arm's URDF (``truth.urdf``) in its
    directory; returns the directory."""
    path = Path(path)
    write_bag(path, _current_messages(arm, rec), storage)
    truth = {"frame": arm.sensor_frame, "payload": _truth(payload), "arm": arm.truth(),
             "pushes": [[p.start, p.start + p.duration] for p in pushes],
             "push_forces": [list(p.force) for p in pushes]}
    (path / "ground_truth.yaml").write_text(yaml.safe_dump(truth, sort_keys=False))
    (path / "truth.urdf").write_text(arm.truth_urdf)
    return path
