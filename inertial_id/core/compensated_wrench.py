"""The wrench with the payload and the bias taken out, for each wrench as it arrives.

Controllers that act on a wrist F/T (an admittance controller, a force-limited insertion) want
the wrench the environment applies, not the payload's weight and inertia and the sensor's bias.
:class:`WrenchCompensation` subtracts, from each measured wrench ``w`` (sensor frame, N and
N m), the bias ``b`` and the payload's wrench at that instant:

``w_c = w - b - s Y(v, a) (pi - pi_d)``

with ``pi`` the latest estimate, ``s`` the wrench sign, ``pi_d`` what a driver already
subtracts (zero unless it compensates; :class:`~inertial_id.core.estimation.compensation.
DriverCompensation`), and ``Y(v, a)`` the regressor (:func:`~inertial_id.core.regressor.
regressor`) at the sensor's twist and proper acceleration. ``w_c`` is what the sensor would
read with nothing mounted and no bias: ``-s`` times the external wrench on the payload.

The kinematics come from the latest joint states alone, without the estimator's filter lag:
a quadratic fitted to the joint positions of the last :data:`TRACK_SPAN` (at least
:data:`TRACK_MIN_SAMPLES` of them) gives ``q, qd, qdd`` at the newest joint stamp
(:func:`local_quadratic`, a one-sided Savitzky-Golay estimate: no delay, and far less noise
than a second difference). The payload's wrench, ``I a + v x* (I v)`` with pinocchio's spatial
inertia (equal to ``Y(v, a) pi``), is computed once per joint state; a wrench between or after
joint states takes it extrapolated linearly from the last two
(:meth:`WrenchCompensation.compensate`), so that a 1 kHz wrench costs a subtraction.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

import numpy as np
import pinocchio as pin
from numpy.typing import ArrayLike, NDArray

from inertial_id.core.errors import InertialIdError
from inertial_id.core.estimate import N_PI

TRACK_SPAN = 0.04
"""s of joint states in the local quadratic (20 at 500 Hz): long enough that the encoders'
noise averages out of the acceleration, short enough that the motion's jerk does not bias it
..."""
TRACK_MIN_SAMPLES = 7
"""... and at least this many joint states (a slow joint stream: 56 ms at 125 Hz)."""
MAX_GAP = 0.25
"""s between joint states beyond which the track starts again."""
MAX_EXTRAPOLATION = 0.05
"""s: a wrench later than this after the newest joint state is not compensated (the arm's
state is unknown)."""
PINOCCHIO_ORDER = np.array([0, 1, 2, 3, 4, 5, 7, 6, 8, 9])
"""``pi`` (``Ixx, Ixy, Ixz, Iyy, Iyz, Izz``) in ``pin.Inertia.FromDynamicParameters``'s
order (``Ixx, Ixy, Iyy, Ixz, Iyz, Izz``)."""

Kinematics = Callable[[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]],
                      tuple[pin.Motion, pin.Motion]]
"""``(q, qd, qdd) (nv,) -> (twist, proper acceleration)``, sensor frame
(:meth:`~inertial_id.core.kinematics.SensorKinematics.compute_one`)."""


def local_quadratic(times: NDArray[np.float64], positions: NDArray[np.float64]
                    ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """``q, qd, qdd`` (nv,) at the last of ``times`` (N,) s, from the least-squares quadratic
    through ``positions`` (N, nv) (rad or m). At least three samples with distinct stamps.

    The 3x3 normal equations in the time scaled to the window, solved by their adjugate:
    a few microseconds, where a general solver takes tens."""
    if times.size < 3:
        raise InertialIdError(f"a quadratic needs 3 joint states, got {times.size}")
    scale = float(times[-1] - times[0])
    if not scale > 0.0:
        raise InertialIdError("the joint states of a quadratic need distinct stamps")
    tau = (times - times[-1]) / scale
    tau2 = tau * tau
    s0, s1, s2 = float(times.size), float(tau.sum()), float(tau2.sum())
    s3, s4 = float(tau2 @ tau), float(tau2 @ tau2)
    b0, b1, b2 = positions.sum(axis=0), tau @ positions, tau2 @ positions
    # Adjugate of [[s0, s1, s2], [s1, s2, s3], [s2, s3, s4]] (symmetric), by rows.
    a00, a01, a02 = s2 * s4 - s3 * s3, s2 * s3 - s1 * s4, s1 * s3 - s2 * s2
    a11, a12, a22 = s0 * s4 - s2 * s2, s1 * s2 - s0 * s3, s0 * s2 - s1 * s1
    det = s0 * a00 + s1 * a01 + s2 * a02
    q = (a00 * b0 + a01 * b1 + a02 * b2) / det
    qd = (a01 * b0 + a11 * b1 + a12 * b2) / (det * scale)
    qdd = 2.0 * (a02 * b0 + a12 * b1 + a22 * b2) / (det * scale * scale)
    return q, qd, qdd


def spatial_inertia(pi: NDArray[np.float64]) -> pin.Inertia:
    """``pi`` (10,: ``[m, m c, Ixx, Ixy, Ixz, Iyy, Iyz, Izz]``, SI, inertia about the frame's
    origin) as pinocchio's spatial inertia (any ``pi``, consistent or not)."""
    return pin.Inertia.FromDynamicParameters(np.asarray(pi, dtype=float)[PINOCCHIO_ORDER])


class WrenchCompensation:
    """See the module docstring. ``kinematics`` maps one joint state to the sensor's twist and
    proper acceleration; ``sign`` is the wrench sign ``s``."""

    def __init__(self, kinematics: Kinematics, sign: float) -> None:
        self.kinematics = kinematics
        self.sign = float(sign)
        self.pi: NDArray[np.float64] | None = None
        self.offset = np.zeros(6)
        self.driver_pi = np.zeros(N_PI)
        self._inertia = spatial_inertia(np.zeros(N_PI))
        self._times: deque[float] = deque()
        self._positions: deque[NDArray[np.float64]] = deque()
        self._payload: deque[tuple[float, NDArray[np.float64]]] = deque(maxlen=2)

    @property
    def ready(self) -> bool:
        """An estimate and the payload's wrench at a joint state."""
        return self.pi is not None and bool(self._payload)

    def set_estimate(self, pi: ArrayLike, offset: ArrayLike) -> None:
        """The latest estimate: ``pi`` (10,) and the bias ``offset`` (6,), sensor frame, SI.
        A non-finite one is refused (:class:`InertialIdError`) and the last one kept."""
        pi, offset = np.asarray(pi, dtype=float), np.asarray(offset, dtype=float)
        if pi.shape != (N_PI,) or offset.shape != (6,):
            raise InertialIdError(f"estimate shapes {pi.shape}, {offset.shape}: want (10,), (6,)")
        if not (np.isfinite(pi).all() and np.isfinite(offset).all()):
            raise InertialIdError("a non-finite estimate is not used for compensation")
        self.pi, self.offset = pi.copy(), offset.copy()
        self._refresh()

    def set_driver_payload(self, pi: ArrayLike) -> None:
        """What the driver subtracts from the wrench it publishes (10,), zero if nothing."""
        self.driver_pi = np.asarray(pi, dtype=float).copy()
        self._refresh()

    def add_joint_state(self, t: float, position: NDArray[np.float64]) -> None:
        """One joint state (s; (nv,) in the kinematics' joint order, rad or m), newer than the
        last (an older or equal stamp, or one after :data:`MAX_GAP`, starts the track
        again)."""
        times, positions = self._times, self._positions
        if times and not 0.0 < t - times[-1] <= MAX_GAP:
            times.clear(), positions.clear(), self._payload.clear()
        times.append(float(t))
        positions.append(position)
        while len(times) > TRACK_MIN_SAMPLES and t - times[1] >= TRACK_SPAN:
            times.popleft(), positions.popleft()
        if self.pi is not None and len(times) >= 3:
            self._payload.append((t, self._payload_wrench()))

    def _payload_wrench(self) -> NDArray[np.float64]:
        """``s Y(v, a) (pi - pi_d)`` at the newest joint state."""
        q, qd, qdd = local_quadratic(np.fromiter(self._times, float, len(self._times)),
                                     np.array(self._positions))
        twist, proper = self.kinematics(q, qd, qdd)
        inertia = self._inertia
        return self.sign * (inertia * proper + twist.cross(inertia * twist)).vector

    def _refresh(self) -> None:
        """A new estimate or driver payload: the payload's wrench again from the newest joint
        state (the older one is dropped)."""
        self._payload.clear()
        if self.pi is not None:
            self._inertia = spatial_inertia(self.pi - self.driver_pi)
            if len(self._times) >= 3:
                self._payload.append((self._times[-1], self._payload_wrench()))

    def compensate(self, t: float, wrench: NDArray[np.float64]) -> NDArray[np.float64] | None:
        """``w_c`` (6,) of the wrench measured at ``t`` (s, the joint states' clock; sensor
        frame, N and N m), or None before :attr:`ready` or when ``t`` is more than
        :data:`MAX_EXTRAPOLATION` from the newest joint state (either side)."""
        if not self.ready:
            return None
        newest_t, newest = self._payload[-1]
        if abs(t - newest_t) > MAX_EXTRAPOLATION:
            return None
        payload = newest
        if len(self._payload) == 2:
            older_t, older = self._payload[0]
            payload = newest + (t - newest_t) / (newest_t - older_t) * (newest - older)
        return wrench - self.offset - payload
