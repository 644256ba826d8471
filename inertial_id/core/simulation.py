"""A simulated robot carrying a payload behind a wrist F/T sensor.

:class:`FourierTrajectory` is an exciting joint trajectory (finite Fourier series, analytic
derivatives) kept inside position and velocity limits. :class:`PayloadSimulation` produces
what a robot driver would publish: joint positions and velocities with encoder noise, the
wrench the F/T sensor reports, ``s Y(v, a_g) pi - s w_ext + offset + noise`` (``s = -1`` for
the payload-on-sensor convention, ``w_ext`` an external contact wrench applied to the payload,
sensor frame), and the joint torques a torque-sensing arm reports: the rigid-body torques of
the URDF's links (RNEA) plus ``J^T (Y pi - w_ext)`` of the payload at the sensor frame, plus
friction ``fc tanh(qd / 0.03) + fv qd`` and noise. Optional :class:`Vibration` bursts (a tool's
or the structure's vibration, not a contact) add to the F/T reading only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources

import numpy as np
import pinocchio as pin
from numpy.typing import ArrayLike, NDArray

from inertial_id.core.joint_torque.friction import FrictionModel
from inertial_id.core.kinematics import SensorKinematics
from inertial_id.core.parameters import BodyParameters, skew
from inertial_id.core.regressor import PAYLOAD_ON_SENSOR, regressor
from inertial_id.core.samples import JointStateSample, WrenchSample

BUNDLED_URDF = "arm6_ft.urdf"
FRICTION_VELOCITY_SCALE = 0.03
"""rad/s: the simulated Coulomb friction is ``fc tanh(qd / FRICTION_VELOCITY_SCALE)``."""
BUNDLED_SENSOR_FRAME = "ft_sensor"
# A pose of the bundled arm with the wrist well clear of the base.
BUNDLED_HOME = (0.0, -1.2, 1.5, -1.2, -1.4, 0.0)


def bundled_urdf_path() -> str:
    """Path of the bundled 6-DoF arm with a wrist F/T sensor (frame ``ft_sensor``)."""
    return str(resources.files("inertial_id") / "resources" / BUNDLED_URDF)


def default_payload() -> BodyParameters:
    """The demo payload: 1.5 kg, CoM off-axis, a 12 x 8 x 16 cm box-like inertia about its CoM."""
    mass = 1.5
    a, b, c = 0.12, 0.08, 0.16
    inertia = mass / 12.0 * np.diag([b * b + c * c, a * a + c * c, a * a + b * b])
    return BodyParameters.from_mass_com_inertia(mass, [0.012, -0.018, 0.065], inertia)


DEFAULT_OFFSET = (1.2, -0.8, 2.5, 0.05, -0.03, 0.02)


@dataclass(frozen=True)
class FourierTrajectory:
    """``q_i(t) = q0_i + sum_l A_il sin(l w t + phi_il)`` with ``w = 2 pi / period``.

    ``holds``: ``(joint, start, stop)`` (index, s, s): that joint stands still from ``start``
    to ``stop`` while the others move, then goes on from where it stopped (its own clock
    pauses; its velocity and acceleration are zero during the hold).
    """

    home: NDArray[np.float64]
    amplitudes: NDArray[np.float64]  # (n_joints, harmonics), rad
    phases: NDArray[np.float64]  # (n_joints, harmonics), rad
    period: float
    holds: tuple[tuple[int, float, float], ...] = ()

    @classmethod
    def random(
        cls,
        home: ArrayLike,
        amplitude: float | ArrayLike = 0.6,
        period: float = 8.0,
        harmonics: int = 4,
        max_velocity: float | ArrayLike = 1.5,
        seed: int = 0,
    ) -> FourierTrajectory:
        """Random coefficients scaled so each joint's amplitude and speed stay within bounds.

        ``amplitude`` bounds ``|q - home|`` and ``max_velocity`` bounds ``|qdot|`` per joint.
        """
        rng = np.random.default_rng(seed)
        home = np.asarray(home, dtype=float)
        n = home.size
        raw = rng.uniform(0.3, 1.0, (n, harmonics)) / np.arange(1, harmonics + 1)
        phases = rng.uniform(0.0, 2 * np.pi, (n, harmonics))
        omega = 2 * np.pi / period
        bound_q = raw.sum(axis=1)
        bound_v = (raw * omega * np.arange(1, harmonics + 1)).sum(axis=1)
        scale = np.minimum(np.broadcast_to(amplitude, n) / bound_q,
                           np.broadcast_to(max_velocity, n) / bound_v)
        return cls(home, raw * scale[:, None], phases, float(period))

    def __call__(
        self, t: ArrayLike
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
        """Positions, velocities, accelerations at times ``t`` (N,) -> three (N, n) arrays."""
        t = np.atleast_1d(np.asarray(t, dtype=float))
        k = np.arange(1, self.amplitudes.shape[1] + 1)
        w = 2 * np.pi / self.period * k  # (H,)
        clock = np.repeat(t[:, None], self.home.size, axis=1)  # each joint's own time
        running = np.ones_like(clock)
        for joint, start, stop in self.holds:
            clock[:, joint] -= np.clip(t - start, 0.0, stop - start)
            running[(t >= start) & (t < stop), joint] = 0.0
        arg = clock[:, :, None] * w[None, None, :] + self.phases[None]
        amp = self.amplitudes[None]
        q = self.home + (amp * np.sin(arg)).sum(-1)
        qd = running * (amp * w * np.cos(arg)).sum(-1)
        qdd = -running * (amp * w**2 * np.sin(arg)).sum(-1)
        return q, qd, qdd


@dataclass(frozen=True)
class Contact:
    """An external force on the payload: ``force`` (N, sensor frame) at ``point`` (m, sensor
    frame) from ``start`` for ``duration`` seconds."""

    start: float
    duration: float
    force: tuple[float, float, float]
    point: tuple[float, float, float] = (0.0, 0.0, 0.1)

    def wrench(self) -> NDArray[np.float64]:
        """``[F; p x F]`` about the sensor origin."""
        f = np.asarray(self.force, dtype=float)
        return np.concatenate((f, skew(self.point) @ f))


@dataclass(frozen=True)
class Vibration:
    """A vibration burst on the F/T reading (sensor frame): not a contact, nothing touches the
    payload.

    What it models: a wrist F/T sensor also reads the vibration of what is bolted to it and of
    the arm it is on. A tool's or gripper's motor (an unbalanced spindle, a screwdriver, a
    gripper's drive while it closes), a pneumatic valve switching, or an arm's structural
    modes rung up by a jerky stop shake the payload at tens of hertz for a fraction of a
    second; the inertial force of that motion, ``m a``, is what the sensor reports on top of
    the rigid-body wrench. Typical values, used by ``bench/tune.py``: 15-40 Hz (where an arm's
    lowest structural modes with a payload and the rotation of a spindle or a gripper's drive
    commonly lie), 0.2-0.6 s, a peak force of tenths of a newton to a newton or two (a 1 kg
    tool oscillating 0.01-0.08 mm at 25 Hz: ``m (2 pi f)^2 x`` = 0.25-2 N), a few times the
    sensor's white noise.
    Such a burst has zero mean, so a low-pass (the gatherer's filtered wrench) removes most of
    it, while a contact is a force held for its duration.

    The reading gains ``e(t) sin(2 pi frequency (t - start) + phase) [F; p x F]`` for
    ``start <= t < start + duration`` (s): ``F = force`` (N, peak, sensor frame), applied at
    ``point`` (m, sensor frame; the torque in N m), ``e`` a Hann envelope (rises from and
    falls to zero over the burst, a ring-up and ring-down; 1 at its middle), ``frequency``
    in Hz, ``phase`` in rad.
    """

    start: float
    duration: float
    frequency: float
    force: tuple[float, float, float]
    point: tuple[float, float, float] = (0.0, 0.0, 0.1)
    phase: float = 0.0

    def wrench(self, times: ArrayLike) -> NDArray[np.float64]:
        """The burst's wrench at ``times`` (s), (N, 6): N and N m, sensor frame; zero outside
        the burst."""
        t = np.atleast_1d(np.asarray(times, dtype=float))
        out = np.zeros((t.size, 6))
        active = (t >= self.start) & (t < self.start + self.duration)
        if not active.any() or self.duration <= 0.0:
            return out
        s = t[active] - self.start
        envelope = np.sin(np.pi * s / self.duration) ** 2
        wave = envelope * np.sin(2.0 * np.pi * self.frequency * s + self.phase)
        f = np.asarray(self.force, dtype=float)
        out[active] = wave[:, None] * np.concatenate((f, skew(self.point) @ f))[None, :]
        return out


def random_vibrations(duration: float, rate: float, amplitude: float,
                      band: tuple[float, float] = (15.0, 40.0),
                      length: tuple[float, float] = (0.2, 0.6),
                      avoid: tuple[tuple[float, float], ...] = (), clearance: float = 0.5,
                      seed: int = 0) -> tuple[Vibration, ...]:
    """Bursts of :class:`Vibration` at random times over ``[0, duration)`` s, ``rate`` per
    second on average (Poisson; fewer when they do not fit): each one's frequency uniform in
    ``band`` (Hz), its length uniform in ``length`` (s), its peak force ``amplitude`` (N) times
    a uniform 0.5-1 in a random direction (sensor frame), its phase random. None overlaps
    another or comes within ``clearance`` (s) of an interval of ``avoid`` (``(start, end)``
    s, e.g. the contacts, so the labels of those stay true). Reproducible from ``seed``; uses
    its own random stream."""
    rng = np.random.default_rng([seed, 27])
    bursts: list[Vibration] = []
    taken = [(a - clearance, b + clearance) for a, b in avoid]
    for _ in range(int(rng.poisson(rate * duration))):
        d = float(rng.uniform(*length))
        start = float(rng.uniform(0.0, max(0.0, duration - d)))
        direction = rng.normal(size=3)
        force = direction / np.linalg.norm(direction) * amplitude * rng.uniform(0.5, 1.0)
        frequency = float(rng.uniform(*band))
        phase = float(rng.uniform(0.0, 2.0 * np.pi))
        if any(start < b and start + d > a for a, b in taken):
            continue
        taken.append((start - clearance, start + d + clearance))
        bursts.append(Vibration(start, d, frequency, tuple(float(x) for x in force),
                                phase=phase))
    return tuple(sorted(bursts, key=lambda v: v.start))


@dataclass
class PayloadSimulation:
    """Joint states and F/T readings of a robot moving a known payload (see module docstring).

    ``payload_changes``: ``(time, body)`` pairs: from ``time`` on the robot holds ``body``
    (a grasp or release; a release is a body of negligible mass).

    Noise: ``force_noise_std`` (N), ``torque_noise_std`` (N m), ``joint_noise_std`` (rad) on
    positions, ``velocity_noise_std`` (rad/s) on measured velocities and
    ``effort_noise_std`` (N m) on joint torques; ``offset`` is the F/T bias
    ``[fx, fy, fz, tx, ty, tz]``. Joint friction: ``coulomb_friction`` (N m, smoothed over
    :data:`FRICTION_VELOCITY_SCALE`) and ``viscous_friction`` (N m s/rad), the same per joint.
    With ``presliding`` ``x0`` > 0 (rad) the Coulomb torque is held at rest in the direction
    of the last motion: ``fc (m + (1 - |m|) z)``, ``m = tanh(qd / 0.03)`` and ``z`` the
    direction-memory state of :class:`~inertial_id.core.joint_torque.friction.FrictionModel` (dead
    band
    :data:`FRICTION_VELOCITY_SCALE`), continued from one :meth:`joint_efforts` call to the
    next, so successive calls must be consecutive times. ``vibrations``: bursts added to the
    F/T reading only (:class:`Vibration`; none by default, and then the readings are what
    they were without the field).
    """

    kinematics: SensorKinematics
    trajectory: FourierTrajectory  # or any motion ``times -> (q, qd, qdd)``: a TrackedArm
    payload: BodyParameters = field(default_factory=default_payload)
    offset: NDArray[np.float64] = field(default_factory=lambda: np.array(DEFAULT_OFFSET))
    sign: float = PAYLOAD_ON_SENSOR
    force_noise_std: float = 0.08
    torque_noise_std: float = 0.004
    joint_noise_std: float = 1e-5
    velocity_noise_std: float = 1e-3
    effort_noise_std: float = 0.05
    coulomb_friction: float = 0.3
    viscous_friction: float = 0.1
    presliding: float = 0.0
    contacts: tuple[Contact, ...] = ()
    vibrations: tuple[Vibration, ...] = ()
    payload_changes: tuple[tuple[float, BodyParameters], ...] = ()
    seed: int = 0
    driver_payloads: list[tuple[float, float, NDArray[np.float64]]] = field(
        default_factory=list)
    """``(time, transition, pi)``: from ``time`` (s) the published wrench is compensated for
    ``pi`` (sensor frame), as a UR driver's is for the payload it was given, reached linearly
    over ``transition`` s from the one before (:meth:`set_driver_payload`)."""

    def __post_init__(self) -> None:
        self.offset = np.asarray(self.offset, dtype=float)
        self._rng = np.random.default_rng(self.seed)
        self._effort_rng = np.random.default_rng([self.seed, 2])  # its own stream
        self._dynamics: tuple | None = None
        self._direction: NDArray[np.float64] | None = None  # memory state after the last call
        self.payload_changes = tuple(sorted(self.payload_changes, key=lambda c: c[0]))

    def payload_at(self, t: float) -> BodyParameters:
        """The payload held at time ``t``: the last change at or before it, else ``payload``."""
        held = self.payload
        for start, body in self.payload_changes:
            if t >= start:
                held = body
        return held

    def mount(self, t: float, body: BodyParameters) -> None:
        """From ``t`` (s) on, the robot holds ``body`` (a tool change)."""
        self.payload_changes = tuple(sorted((*self.payload_changes, (float(t), body)),
                                            key=lambda c: c[0]))

    def set_driver_payload(self, t: float, pi: ArrayLike, transition: float = 0.0) -> None:
        """From ``t`` (s) on, the wrench is compensated for ``pi`` (10, sensor frame), reached
        over ``transition`` s (:attr:`driver_payloads`)."""
        self.driver_payloads.append((float(t), max(0.0, float(transition)),
                                     np.asarray(pi, dtype=float)))

    def driver_pi(self, times: ArrayLike) -> NDArray[np.float64]:
        """``pi`` the driver compensates at each time, (N, 10) (zeros before any)."""
        t = np.atleast_1d(np.asarray(times, dtype=float))
        out = np.zeros((t.size, 10))
        for start, transition, pi in self.driver_payloads:
            share = (np.clip((t - start) / transition, 0.0, 1.0) if transition > 0
                     else (t >= start).astype(float))
            out += share[:, None] * (pi - out)
        return out

    def payload_pi(self, times: ArrayLike) -> NDArray[np.float64]:
        """``pi`` of the held payload at each time, (N, 10)."""
        t = np.atleast_1d(np.asarray(times, dtype=float))
        out = np.tile(self.payload.pi, (t.size, 1))
        for start, body in self.payload_changes:
            out[t >= start] = body.pi
        return out

    def contact_wrench(self, times: ArrayLike) -> NDArray[np.float64]:
        """External wrench on the payload at each time, (N, 6), sensor frame."""
        t = np.atleast_1d(np.asarray(times, dtype=float))
        out = np.zeros((t.size, 6))
        for contact in self.contacts:
            active = (t >= contact.start) & (t < contact.start + contact.duration)
            out[active] += contact.wrench()
        return out

    def vibration_wrench(self, times: ArrayLike) -> NDArray[np.float64]:
        """The :attr:`vibrations`' wrench at each time, (N, 6), N and N m, sensor frame."""
        t = np.atleast_1d(np.asarray(times, dtype=float))
        out = np.zeros((t.size, 6))
        for burst in self.vibrations:
            out += burst.wrench(t)
        return out

    def _held_wrench(self, times: NDArray[np.float64], q: NDArray[np.float64],
                     qd: NDArray[np.float64], qdd: NDArray[np.float64],
                     compensated: bool = False) -> NDArray[np.float64]:
        """The wrench the arm applies to what it holds, ``Y(v, a_g) pi - w_ext`` (N, 6),
        sensor frame, at the trajectory's ``q, qd, qdd`` of ``times``; ``compensated``: with
        ``pi`` less the driver's payload (:meth:`driver_pi`)."""
        twist, proper = self.kinematics.compute(q, qd, qdd)
        pi = self.payload_pi(times)
        if compensated and self.driver_payloads:
            pi = pi - self.driver_pi(times)
        inertial = np.einsum("nij,nj->ni", regressor(twist, proper), pi)
        return inertial - self.contact_wrench(times)

    def wrench(self, times: ArrayLike, noise: bool = True) -> NDArray[np.float64]:
        """F/T readings at ``times``, (N, 6), compensated for the driver's payload."""
        q, qd, qdd = self.trajectory(times)
        clean = self.sign * self._held_wrench(times, q, qd, qdd, compensated=True) + self.offset
        if self.vibrations:
            clean = clean + self.vibration_wrench(times)
        if not noise:
            return clean
        std = np.repeat([self.force_noise_std, self.torque_noise_std], 3)
        return clean + self._rng.normal(size=clean.shape) * std

    def joint_states(
        self, times: ArrayLike
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Measured joint positions and velocities at ``times``, two (N, n) arrays."""
        q, qd, _ = self.trajectory(times)
        q = q + self._rng.normal(size=q.shape) * self.joint_noise_std
        qd = qd + self._rng.normal(size=qd.shape) * self.velocity_noise_std
        return q, qd

    def _coulomb_sign(self, times: NDArray[np.float64], qd: NDArray[np.float64]
                      ) -> NDArray[np.float64]:
        """The Coulomb term's sign (N, nv): ``tanh(qd / v)``, or with ``presliding`` the
        memory form (class docstring), integrated at the median step of ``times``."""
        moving = np.tanh(qd / FRICTION_VELOCITY_SCALE)
        if not self.presliding > 0:
            return moving
        step = float(np.median(np.diff(times))) if times.size > 1 else 1e-3
        memory = FrictionModel("symmetric", velocity_threshold=FRICTION_VELOCITY_SCALE,
                               presliding=self.presliding, sample_period=step)
        z = memory.direction(qd, self._direction)
        self._direction = z[-1].copy()
        return moving + (1.0 - np.abs(moving)) * z

    def driver_messages(self, duration: float, joint_rate: float, wrench_rate: float,
                        start: float, frame: str, wrench_delay: float = 0.0
                        ) -> list[JointStateSample | WrenchSample]:
        """What the drivers would publish over ``duration`` s at the two rates (Hz), in
        arrival order: each wrench after the joint states stamped at or before it. Stamps from
        ``start`` (s); the wrench's stamped ``wrench_delay`` s late; ``frame`` its frame."""
        joint_t = np.arange(0.0, duration, 1.0 / joint_rate)
        wrench_t = np.arange(0.0, duration, 1.0 / wrench_rate)
        position, velocity = self.joint_states(joint_t)
        wrench = self.wrench(wrench_t)
        names = self.kinematics.joint_names
        out: list[JointStateSample | WrenchSample] = []
        j = 0
        for k, t in enumerate(wrench_t):
            while j < joint_t.size and joint_t[j] <= t:
                out.append(JointStateSample(start + joint_t[j], names, position[j],
                                            velocity[j]))
                j += 1
            out.append(WrenchSample(start + t + wrench_delay, frame, wrench[k]))
        return out

    def joint_efforts(self, times: ArrayLike, noise: bool = True) -> NDArray[np.float64]:
        """Joint torques at ``times`` (N, nv), N m: links (RNEA with the URDF's inertials and
        the kinematics' gravity) + payload and contact at the sensor frame + friction."""
        q, qd, qdd = self.trajectory(times)
        k = self.kinematics
        if self._dynamics is None:  # the URDF's bodies under the kinematics' gravity, once
            model = k.model.copy()
            model.gravity.linear = k.gravity
            self._dynamics = (model, model.createData())
        model, data = self._dynamics
        links = np.array([pin.rnea(model, data, c, v, a) for c, v, a in
                          zip(k.configuration(q), qd, qdd, strict=True)])
        payload = np.einsum("nki,nk->ni", k.jacobians(q), self._held_wrench(times, q, qd, qdd))
        friction = (self.coulomb_friction * self._coulomb_sign(np.atleast_1d(times), qd)
                    + self.viscous_friction * qd)
        clean = links + payload + friction
        if not noise:
            return clean
        return clean + self._effort_rng.normal(size=clean.shape) * self.effort_noise_std
