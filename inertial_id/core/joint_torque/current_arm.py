"""A simulated motor-current arm: what a cobot without joint torque sensors publishes.

The driver reports ``effort_j = k_j i_j`` (N m), the motor current ``i_j`` (A) times a constant
nominal drive gain ``k_j`` (N m/A, gear included). The motor current follows the true joint
torque through the *true* gain ``k_j / g_j``, so the published effort is

``e_j = g_j (tau_j + f_j) + k_j (o_j + n_j)`` rounded to the current step ``k_j delta_i``,

with ``g_j`` the driver's gain error (a few % off 1), ``o_j`` a current offset (A), ``n_j``
white current noise (A) and

- ``tau``: the rigid-body torques of the *true* arm (pinocchio RNEA on a URDF whose link
  inertials are the CAD ones perturbed, :func:`perturbed_urdf`), plus the payload and the
  external wrench at the sensor frame (:class:`~inertial_id.core.simulation.PayloadSimulation`,
  which also gives the trajectory and the encoder noise);
- ``f``: friction ``fc (m + h (1 - |m|) z) + fv qd``, ``m = tanh(qd / v0)`` and ``z`` the
  direction-memory state of :class:`~inertial_id.core.joint_torque.friction.FrictionModel`
  (presliding
  ``x0``, dead band ``v0``): a joint that stops keeps the share ``h`` (0.95) of its sliding
  Coulomb torque in its last direction of motion.

Frames: joint torques in N m about each joint axis, the payload and pushes in the sensor
frame (``ft_sensor`` of the bundled arm, at the flange). :meth:`MotorCurrentArm.expected`
gives the noise-free efforts for any joint states (the truth model, e.g. on filtered states).
:func:`write_current_bag` writes a bag the way ``inertial-id simulate`` does (the CAD URDF on
``/robot_description``, ``/joint_states`` with efforts, ``ground_truth.yaml`` beside).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pinocchio as pin
from numpy.typing import ArrayLike, NDArray

from inertial_id.core.joint_torque.friction import FrictionModel
from inertial_id.core.joint_torque.link_model import LinkModel
from inertial_id.core.joint_torque.link_urdf import identified_urdf
from inertial_id.core.kinematics import SensorKinematics, urdf_text
from inertial_id.core.parameters import BodyParameters
from inertial_id.core.simulation import (
    BUNDLED_HOME,
    BUNDLED_SENSOR_FRAME,
    Contact,
    FourierTrajectory,
    PayloadSimulation,
)

RATE = 125.0
"""Hz: the joint state rate of the drivers this arm imitates."""


def nothing_held() -> BodyParameters:
    """A payload of negligible mass (the unloaded arm), sensor frame."""
    return BodyParameters.from_mass_com_inertia(1e-6, [0.0, 0.0, 0.0], [1e-9, 0, 0, 1e-9, 0,
                                                                         1e-9])


def perturbed_urdf(cad_urdf: str, seed: int, mass: float = 0.1, com: float = 0.01,
                   inertia: float = 0.2) -> str:
    """The CAD URDF (path or text) with every moving link's inertial perturbed: mass times
    ``1 + U(-mass, mass)``, CoM moved by ``U(-com, com)`` m per axis (joint frame), inertia
    about the CoM times ``1 + U(-inertia, inertia)`` (stays positive definite)."""
    rng = np.random.default_rng([seed, 7])
    model = LinkModel(urdf_text(cad_urdf))
    standard = model.cad.copy()
    for i in range(model.n):
        own = BodyParameters.from_pi(model.own_cad[i])
        if own.mass <= 0:
            continue
        body = BodyParameters.from_mass_com_inertia(
            own.mass * (1 + rng.uniform(-mass, mass)), own.com + rng.uniform(-com, com, 3),
            own.inertia_com * (1 + rng.uniform(-inertia, inertia)))
        standard[i] = model.attachments[i] + body.pi
    return identified_urdf(model, standard)


@dataclass(frozen=True)
class Push:
    """A person pushing the flange: ``force`` (N, sensor frame) at ``point`` (m, sensor frame)
    from ``start`` (s since the recording's start) for ``duration`` s."""

    start: float
    duration: float
    force: tuple[float, float, float]
    point: tuple[float, float, float] = (0.0, 0.0, 0.05)

    def contact(self) -> Contact:
        """The same push as the simulator's :class:`Contact`."""
        return Contact(self.start, self.duration, self.force, self.point)


def random_pushes(duration: float, seed: int, share: float = 0.3, force: float = 60.0,
                  lengths: tuple[float, float] = (0.5, 2.0)) -> tuple[Push, ...]:
    """Pushes of ``lengths`` s (uniform) filling about ``share`` of ``duration`` s, at least
    1 s apart and 1 s from either end, each a force of ``force / 2 .. force`` N in a random
    direction."""
    rng = np.random.default_rng([seed, 11])
    pushes: list[Push] = []
    t = 1.0 + rng.uniform(0.0, 1.0)
    mean_gap = np.mean(lengths) * (1 - share) / share
    while True:
        length = float(rng.uniform(*lengths))
        if t + length > duration - 1.0:
            break
        direction = rng.normal(size=3)
        magnitude = rng.uniform(0.5, 1.0) * force
        pushes.append(Push(round(t, 3), round(length, 3),
                           tuple(float(x) for x in magnitude * direction
                                 / np.linalg.norm(direction))))
        t += length + max(1.0, float(rng.exponential(mean_gap)))
    return tuple(pushes)


@dataclass(frozen=True)
class MotorCurrentArm:
    """One simulated arm (module docstring); per-joint arrays in the URDF's joint order.

    ``gain_error`` ``g`` (published / true effort), ``coulomb`` (N m), ``viscous``
    (N m s/rad), ``drive_gain`` ``k`` (N m/A), ``current_offset`` (A), ``current_noise`` (A,
    std), ``current_step`` (A, 0: no rounding), ``hold`` the share of the Coulomb torque a
    stopped joint keeps, ``presliding`` ``x0`` (rad), ``velocity_scale`` ``v0`` (rad/s) of
    the Coulomb term's ``tanh(qd / v0)`` and the dead band of its memory.
    """

    cad_urdf: str
    truth_urdf: str
    gain_error: NDArray[np.float64]
    coulomb: NDArray[np.float64]
    viscous: NDArray[np.float64]
    drive_gain: NDArray[np.float64]
    current_offset: NDArray[np.float64]
    current_noise: NDArray[np.float64]
    current_step: float = 1e-3
    hold: float = 0.95
    presliding: float = 0.005
    velocity_scale: float = 0.02
    sensor_frame: str = BUNDLED_SENSOR_FRAME
    home: tuple[float, ...] = BUNDLED_HOME
    _kinematics: list[SensorKinematics] = field(default_factory=list, repr=False,
                                                compare=False)

    @classmethod
    def random(cls, cad_urdf: str, seed: int, gain_error: float = 0.04,
               home: Sequence[float] = BUNDLED_HOME,
               sensor_frame: str = BUNDLED_SENSOR_FRAME) -> MotorCurrentArm:
        """An arm of the CAD URDF (path) with random true inertials, gains off by up to
        ``gain_error``, friction and noise scaled to each joint's effort limit (big joints
        ~150 N m: Coulomb 2-5 N m, noise 0.2 N m; wrist ~28 N m: 0.4-1 N m, 0.04 N m),
        ``v0`` log-uniform in 0.01-0.04 rad/s and ``x0`` in 2-10 mrad."""
        rng = np.random.default_rng([seed, 3])
        limits = LinkModel(urdf_text(cad_urdf)).effort_limits
        n = limits.size
        k = limits / 15.0  # N m/A: the limit at 15 A
        return cls(
            cad_urdf=cad_urdf, truth_urdf=perturbed_urdf(cad_urdf, seed),
            gain_error=1 + rng.uniform(-gain_error, gain_error, n),
            coulomb=limits * rng.uniform(0.013, 0.035, n),
            viscous=limits * rng.uniform(0.005, 0.02, n),
            drive_gain=k, current_offset=rng.uniform(-0.02, 0.02, n),
            current_noise=np.full(n, 0.02),
            presliding=float(rng.uniform(0.002, 0.01)),
            velocity_scale=float(np.exp(rng.uniform(np.log(0.01), np.log(0.04)))),
            sensor_frame=sensor_frame, home=tuple(home))

    @property
    def kinematics(self) -> SensorKinematics:
        """The true arm's kinematics and inertials, built once."""
        if not self._kinematics:
            self._kinematics.append(SensorKinematics(self.truth_urdf, self.sensor_frame))
        return self._kinematics[0]

    @property
    def joint_names(self) -> list[str]:
        """The moving joints, in order."""
        return list(self.kinematics.joint_names)

    def friction(self, qd: ArrayLike, period: float) -> NDArray[np.float64]:
        """Friction torques (N, nv), N m, of velocity rows (rad/s) in time order ``period``
        s apart, the memory starting with no direction."""
        qd = np.atleast_2d(np.asarray(qd, dtype=float))
        memory = FrictionModel("symmetric", velocity_threshold=self.velocity_scale,
                               presliding=self.presliding, sample_period=period)
        moving = np.tanh(qd / self.velocity_scale)
        sign = moving + self.hold * (1 - np.abs(moving)) * memory.direction(qd)
        return self.coulomb * sign + self.viscous * qd

    def expected(self, torque: ArrayLike, qd: ArrayLike, period: float) -> NDArray[np.float64]:
        """Noise-free published efforts (N, nv), N m, of rigid-body + payload + external
        torques ``torque`` (N m) and velocity rows ``qd`` (rad/s) in time order."""
        friction = self.friction(qd, period)
        return (self.gain_error * (np.asarray(torque, dtype=float) + friction)
                + self.drive_gain * self.current_offset)

    def rigid(self, q: ArrayLike, qd: ArrayLike, qdd: ArrayLike) -> NDArray[np.float64]:
        """The true arm's own rigid-body torques (N, nv), N m: pinocchio RNEA of the true
        inertials under the kinematics' gravity, nothing held."""
        k = self.kinematics
        model = k.model.copy()
        model.gravity.linear = k.gravity
        data = model.createData()
        q, qd, qdd = (np.atleast_2d(np.asarray(a, dtype=float)) for a in (q, qd, qdd))
        return np.array([pin.rnea(model, data, c, v, a) for c, v, a in
                         zip(k.configuration(q), qd, qdd, strict=True)])

    def simulation(self, trajectory: FourierTrajectory, payload: BodyParameters,
                   pushes: Sequence[Push] = (), seed: int = 0) -> PayloadSimulation:
        """The rigid-body simulator of this arm (no friction, no effort noise)."""
        return PayloadSimulation(self.kinematics, trajectory, payload=payload,
                                 coulomb_friction=0.0, viscous_friction=0.0,
                                 effort_noise_std=0.0,
                                 contacts=tuple(p.contact() for p in pushes), seed=seed)

    def record(self, trajectory: FourierTrajectory, duration: float, payload: BodyParameters,
               pushes: Sequence[Push] = (), seed: int = 0, rate: float = RATE,
               delay: float = 0.0) -> dict[str, NDArray[np.float64]]:
        """What the driver publishes over ``duration`` s at ``rate`` Hz: ``t`` (s, from 0),
        ``position`` (rad), ``velocity`` (rad/s), ``effort`` (N m), and the true ``torque``
        (N m, rigid + payload + pushes, no friction). The first sample is the trajectory's (and
        the pushes') time ``delay`` s (a pair's second recording starting late)."""
        t = np.arange(0.0, duration, 1.0 / rate)
        sim = self.simulation(trajectory, payload, pushes, seed)
        position, velocity = sim.joint_states(t + delay)
        torque = sim.joint_efforts(t + delay, noise=False)
        _, qd, _ = trajectory(t + delay)
        effort = self.expected(torque, qd, 1.0 / rate)
        rng = np.random.default_rng([seed, 5])
        current = effort / self.drive_gain + rng.normal(size=effort.shape) * self.current_noise
        if self.current_step > 0:
            current = np.round(current / self.current_step) * self.current_step
        return {"t": t, "position": position, "velocity": velocity,
                "effort": current * self.drive_gain, "torque": torque}

    def truth(self) -> dict[str, Any]:
        """The arm's own parameters as plain values (``ground_truth.yaml``)."""
        return {"joints": self.joint_names, "gain_error": self.gain_error.tolist(),
                "coulomb": self.coulomb.tolist(), "viscous": self.viscous.tolist(),
                "drive_gain": self.drive_gain.tolist(),
                "current_offset": self.current_offset.tolist(),
                "current_noise": self.current_noise.tolist(),
                "current_step": self.current_step, "hold": self.hold,
                "presliding": self.presliding, "velocity_scale": self.velocity_scale}


def trajectory(home: Sequence[float], seed: int,
               holds: tuple[tuple[int, float, float], ...] = ()) -> FourierTrajectory:
    """An exciting trajectory around ``home`` (rad) with ``holds`` ``(joint, start, stop)``:
    that joint stands still for ``stop - start`` s while the others move, from its first
    velocity reversal at or after ``start`` (a stop, not a velocity step: it resumes from
    rest, as a real joint would)."""
    free = FourierTrajectory.random(home, amplitude=0.7, max_velocity=1.2, seed=seed)
    placed = []
    for joint, start, stop in holds:
        t = np.arange(start, start + free.period, 1e-3)
        qd = free(t)[1][:, joint]
        begin = float(t[1:][np.sign(qd[1:]) != np.sign(qd[:-1])][0])
        placed.append((joint, begin, begin + stop - start))
    return replace(free, holds=tuple(placed))
