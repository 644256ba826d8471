"""Warm-up friction recognised in a joint residual (inertial_id.core.joint_torque.warmup): the fit
recovers a known warm-up, chunks add up to the whole, and on the simulated motor-current arm a
cold start of +15 % fading over seconds raises no contact while pushes are still found."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inertial_id.core.estimation.anomaly import contact_intervals
from inertial_id.core.joint_torque.current_arm import (
    MotorCurrentArm,
    Push,
    nothing_held,
    trajectory,
)
from inertial_id.core.joint_torque.warmup import (
    WARMUP_MAX,
    WARMUP_TIMES,
    WarmUpStatistics,
    fit_warmup,
    warm_contact_intervals,
)
from inertial_id.core.simulation import bundled_urdf_path

PERIOD = 1.0 / 125.0


def _friction(n: int, joints: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """Rows' time since the start (s) and friction efforts of sinusoidal motions (N m)."""
    since = np.arange(n) * PERIOD
    qd = np.sin(since[:, None] * np.linspace(0.7, 1.9, joints) + np.arange(joints))
    return since, 2.0 * np.tanh(qd / 0.02) + 0.5 * qd


@settings(max_examples=30, deadline=None)
@given(share=st.floats(0.0, WARMUP_MAX), level=st.floats(-0.1, 0.1),
       k=st.integers(0, len(WARMUP_TIMES) - 1), cut=st.integers(1, 3999))
def test_a_known_warmup_is_recovered_and_chunks_add_up(share: float, level: float, k: int,
                                                       cut: int) -> None:
    since, friction = _friction(4000)
    noise = np.random.default_rng(1).normal(0.0, 0.05, friction.shape)
    decay = np.exp(-since / WARMUP_TIMES[k])[:, None]
    residual = (share * decay + level) * friction + noise
    warm = fit_warmup(since, residual, friction)
    if share > 0.05:
        assert warm.time_constant == WARMUP_TIMES[k]
    left = residual - warm.efforts(since, friction)
    assert np.sqrt(np.mean(left ** 2)) < 0.0505
    np.testing.assert_allclose(warm.efforts(since, friction),
                               (share * decay + level) * friction, atol=0.03)
    whole, parts = WarmUpStatistics(3), WarmUpStatistics(3)
    whole.add(since, residual, friction)
    parts.add(since[:cut], residual[:cut], friction[:cut])
    parts.add(since[cut:], residual[cut:], friction[cut:])
    np.testing.assert_allclose(parts.moments, whole.moments, rtol=1e-9, atol=1e-9)


def test_the_share_is_bounded_so_a_push_is_not_explained_away() -> None:
    since, friction = _friction(2000)
    residual = 5.0 * friction * (since < 1.0)[:, None]  # five times the friction for 1 s
    warm = fit_warmup(since, residual, friction)
    assert np.all(warm.share <= WARMUP_MAX) and np.all(np.abs(warm.level) <= WARMUP_MAX)


@pytest.fixture(scope="module")
def cold_record() -> dict[str, np.ndarray]:
    """30 s of the arm with friction +15 % at the start fading with a 4 s time constant, and
    two pushes (one in the first seconds, while the drive is cold)."""
    arm = MotorCurrentArm.random(bundled_urdf_path(), seed=4)
    traj = trajectory(arm.home, seed=8)
    pushes = (Push(2.0, 1.0, (0.0, 25.0, 0.0)), Push(20.0, 1.0, (20.0, 0.0, -15.0)))
    out = {}
    for label, held in (("pushed", pushes), ("free", ())):
        rec = arm.record(traj, 30.0, nothing_held(), held, seed=3)
        _, qd, qdd = traj(rec["t"])
        friction = arm.gain_error * arm.friction(qd, PERIOD)
        cold = 0.15 * np.exp(-rec["t"] / 4.0)[:, None] * friction
        rigid = arm.expected(arm.rigid(*traj(rec["t"])), qd, PERIOD)
        out[label] = (rec["t"], rec["effort"] + cold - rigid, friction)
    return out


def test_a_cold_start_is_no_contact_and_pushes_are_still_found(cold_record) -> None:
    since, residual, friction = cold_record["free"]
    assert contact_intervals(since, residual, origin=0.0)  # without: the cold start is one
    found, warm = warm_contact_intervals(since, residual, friction)
    assert found == []
    assert 0.1 <= warm.share.max() <= WARMUP_MAX
    since, residual, friction = cold_record["pushed"]
    found, _ = warm_contact_intervals(since, residual, friction)
    assert len(found) == 2
    for (start, end), push in zip(found, (2.0, 20.0), strict=True):
        assert start < push + 1.0 and end > push
