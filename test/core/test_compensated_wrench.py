"""The payload-compensated wrench: its pieces against references, and on the simulated arm the
noise floor with nothing touching the tool and the contact's wrench when something does."""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inertial_id.core.compensated_wrench import (
    MAX_EXTRAPOLATION,
    WrenchCompensation,
    local_quadratic,
    spatial_inertia,
)
from inertial_id.core.errors import InertialIdError
from inertial_id.core.kinematics import SensorKinematics
from inertial_id.core.regressor import predicted_wrench, regressor
from inertial_id.core.simulation import (
    BUNDLED_HOME,
    BUNDLED_SENSOR_FRAME,
    Contact,
    FourierTrajectory,
    PayloadSimulation,
    bundled_urdf_path,
    default_payload,
)

SEEDS = st.integers(0, 2**31)


@cache
def _kinematics() -> SensorKinematics:
    return SensorKinematics(bundled_urdf_path(), BUNDLED_SENSOR_FRAME)


@settings(max_examples=50, deadline=None)
@given(SEEDS, st.integers(3, 40))
def test_local_quadratic_is_the_least_squares_quadratic(seed: int, n: int) -> None:
    rng = np.random.default_rng(seed)
    times = 100.0 + np.sort(rng.uniform(0.0, 0.1, n)) + 1e-4 * np.arange(n)
    positions = rng.normal(size=(n, 6))
    tau = times - times[-1]
    design = np.column_stack((np.ones(n), tau, tau * tau))
    c = np.linalg.lstsq(design, positions, rcond=None)[0]
    q, qd, qdd = local_quadratic(times, positions)
    scale = np.abs(c).max()
    np.testing.assert_allclose(q, c[0], atol=1e-8 * scale)
    np.testing.assert_allclose(qd, c[1], atol=1e-6 * scale / 0.1)
    np.testing.assert_allclose(qdd, 2.0 * c[2], atol=1e-5 * scale / 0.01)


def test_local_quadratic_is_exact_on_a_parabola_and_refuses_too_few_samples() -> None:
    times = np.array([0.0, 0.003, 0.004, 0.01, 0.012])
    q, qd, qdd = local_quadratic(times, (1.0 + 2.0 * times - 3.0 * times**2)[:, None])
    t = times[-1]
    np.testing.assert_allclose([q[0], qd[0], qdd[0]], [1 + 2 * t - 3 * t * t, 2 - 6 * t, -6.0])
    with pytest.raises(InertialIdError):
        local_quadratic(times[:2], np.zeros((2, 1)))


@settings(max_examples=50, deadline=None)
@given(SEEDS)
def test_the_spatial_inertia_wrench_is_y_pi(seed: int) -> None:
    """``I a + v x* (I v)`` with pinocchio's inertia is the regressor times ``pi``, for any
    ``pi`` (the reordering of the inertia's entries is right)."""
    rng = np.random.default_rng(seed)
    pi, twist, proper = rng.normal(size=10), rng.normal(size=6), rng.normal(size=6)
    inertia = spatial_inertia(pi)
    import pinocchio as pin
    v, a = pin.Motion(twist), pin.Motion(proper)
    wrench = (inertia * a + v.cross(inertia * v)).vector
    np.testing.assert_allclose(wrench, regressor(twist, proper) @ pi, atol=1e-10)
    np.testing.assert_allclose(wrench, predicted_wrench(pi, twist, proper, sign=1.0),
                               atol=1e-10)


def test_one_sample_kinematics_equal_the_batch() -> None:
    kinematics = _kinematics()
    rng = np.random.default_rng(3)
    q, qd, qdd = (rng.normal(size=(5, kinematics.nv)) for _ in range(3))
    twist, proper = kinematics.compute(q, qd, qdd)
    for k in range(5):
        v, a = kinematics.compute_one(q[k], qd[k], qdd[k])
        np.testing.assert_allclose(v.vector, twist[k], atol=1e-12)
        np.testing.assert_allclose(a.vector, proper[k], atol=1e-12)


class Postures:
    """A motion that rests 2 s in each of ``postures`` (n, nv) in turn."""

    def __init__(self, postures: np.ndarray) -> None:
        self.postures = postures

    def __call__(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        q = self.postures[np.minimum((np.atleast_1d(t) // 2.0).astype(int),
                                     len(self.postures) - 1)]
        return q, np.zeros_like(q), np.zeros_like(q)


def _stream(contacts: tuple[Contact, ...] = (), joint_rate: float = 500.0, seed: int = 0,
            motion: Postures | None = None) -> tuple[PayloadSimulation, np.ndarray, np.ndarray]:
    """10 s of the simulated arm (a random motion, or ``motion``): the compensated wrench at
    every 1 kHz wrench (NaN where None) with the true payload and bias as the estimate, and
    the wrench stamps."""
    trajectory = motion or FourierTrajectory.random(BUNDLED_HOME, seed=seed + 1)
    sim = PayloadSimulation(_kinematics(), trajectory, payload=default_payload(),
                            contacts=contacts, seed=seed)
    joint_t = np.arange(0.0, 10.0, 1.0 / joint_rate)
    wrench_t = np.arange(0.0, 10.0, 1e-3) + 3e-4
    position, _ = sim.joint_states(joint_t)
    wrench = sim.wrench(wrench_t)
    compensation = WrenchCompensation(_kinematics().compute_one, sim.sign)
    compensation.set_estimate(sim.payload_pi(wrench_t)[0], sim.offset)
    out = np.full((wrench_t.size, 6), np.nan)
    j = 0
    for k, t in enumerate(wrench_t):
        while j < joint_t.size and joint_t[j] <= t:
            compensation.add_joint_state(joint_t[j], position[j])
            j += 1
        value = compensation.compensate(t, wrench[k])
        if value is not None:
            out[k] = value
    return sim, wrench_t, out


def _noise_ratio(sim: PayloadSimulation, out: np.ndarray) -> np.ndarray:
    """RMS of each axis of the compensated wrench over the sensor's noise std."""
    noise = np.repeat([sim.force_noise_std, sim.torque_noise_std], 3)
    return np.sqrt(np.mean(out**2, axis=0)) / noise


def test_at_rest_in_any_posture_the_compensated_wrench_is_the_sensor_noise() -> None:
    """Five postures, 2 s each, nothing touching: the RMS of each axis is the sensor's noise
    (within 10 %), and every wrench after the first joint states is compensated."""
    rng = np.random.default_rng(4)
    home = np.asarray(BUNDLED_HOME, dtype=float)
    postures = home + rng.uniform(-1.0, 1.0, (5, home.size))
    sim, t, out = _stream(motion=Postures(postures))
    moving = (t % 2.0 < 0.1) | (t < 0.1)  # a posture's first joint states: the jump
    assert np.isfinite(out[t > 0.1]).all()
    ratio = _noise_ratio(sim, out[~moving])
    assert (np.abs(ratio - 1.0) < 0.1).all(), ratio


@pytest.mark.parametrize(("seed", "joint_rate"), [(0, 500.0), (1, 500.0), (2, 125.0)])
def test_in_motion_the_compensated_wrench_stays_near_the_noise_floor(
        seed: int, joint_rate: float) -> None:
    """Through the random motion, the RMS of each axis is within 1.5 times the sensor's own
    noise (the rest: the encoders' 1e-5 rad noise in the local fit's acceleration, and its
    bias from the motion's jerk); every wrench after the first joint states is compensated."""
    sim, _, out = _stream(seed=seed, joint_rate=joint_rate)
    assert np.isfinite(out[100:]).all()
    ratio = _noise_ratio(sim, out[100:])
    assert (ratio < 1.5).all(), ratio
    assert (ratio > 0.9).all(), ratio  # the sensor's noise itself cannot be taken out


def test_a_push_shows_as_its_own_wrench() -> None:
    """A 20 N push on the payload: the compensated wrench is ``-s`` times the push's wrench
    while it lasts, and zero (to noise) outside."""
    push = Contact(4.0, 1.0, (5.0, -20.0, 3.0), (0.0, 0.02, 0.1))
    sim, t, out = _stream(contacts=(push,))
    during = (t > 4.05) & (t < 4.95)
    np.testing.assert_allclose(out[during].mean(axis=0), -sim.sign * push.wrench(),
                               atol=0.05 * np.abs(push.wrench()).max())
    outside = (t > 0.1) & ((t < 3.9) | (t > 5.1))
    assert np.abs(out[outside].mean(axis=0)).max() < 0.02


def test_bad_or_missing_inputs_give_no_value_and_keep_the_last_estimate() -> None:
    kinematics = _kinematics()
    compensation = WrenchCompensation(kinematics.compute_one, -1.0)
    home = np.asarray(BUNDLED_HOME, dtype=float)
    assert compensation.compensate(0.0, np.zeros(6)) is None  # no estimate
    pi = default_payload().pi
    compensation.set_estimate(pi, np.arange(6.0))
    for k in range(5):
        compensation.add_joint_state(0.002 * k, home)
    at_rest = compensation.compensate(0.009, np.zeros(6))
    assert at_rest is not None
    with pytest.raises(InertialIdError):
        compensation.set_estimate(np.full(10, np.nan), np.zeros(6))
    np.testing.assert_array_equal(compensation.pi, pi)
    np.testing.assert_array_equal(compensation.compensate(0.009, np.zeros(6)), at_rest)
    assert compensation.compensate(0.008 + 1.01 * MAX_EXTRAPOLATION, np.zeros(6)) is None
    compensation.add_joint_state(0.001, home)  # older: the track starts again
    assert compensation.compensate(0.002, np.zeros(6)) is None


def test_a_driver_payload_is_not_subtracted_twice() -> None:
    """A driver that already subtracts ``pi_d``: only ``pi - pi_d`` is taken out."""
    kinematics = _kinematics()
    home = np.asarray(BUNDLED_HOME, dtype=float)
    pi = default_payload().pi
    full, part = (WrenchCompensation(kinematics.compute_one, -1.0) for _ in range(2))
    for compensation in (full, part):
        compensation.set_estimate(pi, np.zeros(6))
    part.set_driver_payload(0.25 * pi)
    for k in range(5):
        full.add_joint_state(0.002 * k, home)
        part.add_joint_state(0.002 * k, home)
    taken_full = -full.compensate(0.008, np.zeros(6))
    taken_part = -part.compensate(0.008, np.zeros(6))
    np.testing.assert_allclose(taken_part, 0.75 * taken_full, atol=1e-12)
    assert np.linalg.norm(taken_full[:3]) == pytest.approx(9.81 * pi[0], rel=1e-3)
