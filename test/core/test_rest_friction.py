"""Friction at rest where the identification records cannot decide it
(inertial_id.core.joint_torque.link_selection: rests, physical_candidates): a joint that rests
only in a recording the identification never saw, on the simulated motor-current arm."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from inertial_id.core.joint_torque.current_arm import MotorCurrentArm, nothing_held, trajectory
from inertial_id.core.joint_torque.friction import FrictionModel
from inertial_id.core.joint_torque.link_model import LinkModel
from inertial_id.core.joint_torque.link_selection import (
    REST_SECONDS,
    REST_SPEED,
    LinkOptions,
    coulomb_candidates,
    identify_links,
    physical_candidates,
    rests,
)
from inertial_id.core.joint_torque.links import LinkIdentification
from inertial_id.core.simulation import bundled_urdf_path

PERIOD = 1.0 / 125.0
RESTING = 4  # the wrist joint that rests in the validation recording only


@given(still=st.floats(0.0, 2.0), moved_before=st.booleans())
def test_a_joint_rests_only_when_still_long_enough_after_moving(still: float,
                                                                moved_before: bool) -> None:
    n = int(round(still / PERIOD))
    moving = np.full(50, 0.3)
    column = np.concatenate([moving if moved_before else np.zeros(0), np.zeros(n), moving])
    qd = np.column_stack([column, np.full(column.size, 0.5)])
    expected = moved_before and n >= int(np.ceil(REST_SECONDS / PERIOD))
    assert rests(qd, PERIOD) is expected


def test_memory_is_kept_unless_a_record_rests() -> None:
    base = FrictionModel("symmetric", smooth=True, velocity_threshold=0.02,
                         sample_period=PERIOD)
    candidates = coulomb_candidates(base, scales=(0.01, 0.02))
    # Velocity reversals pass through rest without resting.
    moving = np.column_stack([np.sin(np.arange(1000) * PERIOD)] * 2)
    assert np.abs(moving).min() < REST_SPEED
    kept, rested = physical_candidates(candidates, [moving], PERIOD)
    assert not rested and kept and all(c.memory for c in kept)
    resting = moving.copy()
    resting[400:600, 1] = 0.0
    kept, rested = physical_candidates(candidates, [moving, resting], PERIOD)
    assert rested and kept == candidates
    # Without any memory candidate (--direction-memory off) the candidates stay as given.
    plain = coulomb_candidates(base, scales=(0.01,), presliding=None)
    assert physical_candidates(plain, [moving], PERIOD)[0] == plain


@pytest.fixture(scope="module")
def arm() -> MotorCurrentArm:
    return MotorCurrentArm.random(bundled_urdf_path(), seed=1)  # the bench's arm 1


def _rows(arm: MotorCurrentArm, seed: int, duration: float,
          holds: tuple[tuple[int, float, float], ...] = ()) -> tuple[np.ndarray, ...]:
    traj = trajectory(arm.home, seed=seed, holds=holds)
    rec = arm.record(traj, duration, nothing_held(), seed=seed)
    q, qd, qdd = traj(rec["t"])
    return q, qd, qdd, rec["effort"]


def _relative(effort: np.ndarray, predicted: np.ndarray) -> np.ndarray:
    return np.linalg.norm(effort - predicted, axis=0) / np.linalg.norm(effort, axis=0)


def test_a_joint_resting_only_in_validation_keeps_its_last_direction(
        arm: MotorCurrentArm) -> None:
    """No joint rests in the identification record nor in the held-out recording that scores
    the choices; in the 30 s validation recording the wrist joint rests 5 s (the bench's
    protocol, exact states). The identified model keeps the memory; at rest it predicts the
    Coulomb level held in the last direction to within the 5 % the simulated drive lets go
    (it holds 95 %), where the same shape without memory misses most of it; the joints that
    move are within 10 % of the truth model's relative error."""
    model = LinkModel(bundled_urdf_path())
    ident, other = _rows(arm, 21, 24.0), _rows(arm, 22, 12.0)
    valid = _rows(arm, 23, 30.0, ((RESTING, 10.0, 15.0),))
    assert not rests(ident[1], PERIOD) and not rests(other[1], PERIOD)
    assert rests(valid[1], PERIOD)
    base = FrictionModel("symmetric", smooth=True, velocity_threshold=0.02,
                         sample_period=PERIOD)
    options = LinkOptions(method="wls", friction=base, held_out=(other,),
                          friction_candidates=coulomb_candidates(base, (0.01, 0.02, 0.04),
                                                                 dead_band=False),
                          refine_friction=True, gain_std=None)
    problem, _, estimate = identify_links(model, ident, options)
    assert problem.friction_model.memory
    assert estimate.info["selection"]["rest"] == [{"rests": False, "memory_only": True}]
    truth = arm.expected(arm.rigid(*valid[:3]), valid[1], PERIOD)
    held = LinkIdentification(model, *valid, problem.friction_model)
    held.effort_scale = problem.effort_scale
    predicted = held.predict(estimate)
    ratio = _relative(valid[3], predicted) / _relative(valid[3], truth)
    moving = np.arange(model.n) != RESTING
    assert np.all(ratio[moving] <= 1.10), ratio
    still = np.abs(valid[1][:, RESTING]) == 0.0
    level = arm.coulomb[RESTING] * arm.gain_error[RESTING]
    miss = abs(np.mean((valid[3] - predicted)[still, RESTING]))
    assert miss <= 0.06 * level, (miss, level)
    plain = problem.friction_model.with_presliding(0.0)
    fit = LinkIdentification(model, *ident, plain).weighted_least_squares()
    no_memory = LinkIdentification(model, *valid, plain).predict(fit)
    assert abs(np.mean((valid[3] - no_memory)[still, RESTING])) > 0.5 * level
