"""The payload from a loaded/unloaded pair of recordings of the same trajectory
(inertial_id.core.joint_torque.torque_payload.paired_difference): aligned in time by
cross-correlation and
subtracted sample by sample, so the link model's own error cancels; refitting only friction and
offsets on the unloaded run leaves that error to become a phantom mass."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from inertial_id.core.joint_torque.friction import FrictionModel
from inertial_id.core.joint_torque.link_model import transform_parameters
from inertial_id.core.joint_torque.torque_payload import (
    LinkTorqueModel,
    TorquePayloadIdentifier,
    identify_paired_payload,
    paired_difference,
    time_shift,
)
from inertial_id.core.parameters import BodyParameters
from inertial_id.core.simulation import (
    BUNDLED_HOME,
    BUNDLED_SENSOR_FRAME,
    FourierTrajectory,
    bundled_urdf_path,
)

STEP = 0.005  # s
DELAY = 0.506  # s: the unloaded run's clock is this far ahead of the loaded run's
MASS = 2.8  # kg
PAYLOAD = BodyParameters.from_mass_com_inertia(MASS, [0.01, -0.02, 0.06],
                                               np.diag([0.012, 0.010, 0.006]))
FRICTION = FrictionModel("symmetric", smooth=True, velocity_threshold=0.03)


@pytest.fixture(scope="module")
def truth() -> LinkTorqueModel:
    return LinkTorqueModel.from_urdf(bundled_urdf_path())


def _run(truth: LinkTorqueModel, payload: BodyParameters | None, clock_offset: float,
         effort_offset: float, seed: int) -> tuple[np.ndarray, ...]:
    """(t, q, qd, qdd, effort): 30 s of one trajectory on a clock ``clock_offset`` s ahead,
    the true links (and payload merged into the last body), Coulomb 0.3 + viscous 0.05 N m,
    an effort offset of this run, 0.03 N m noise."""
    trajectory = FourierTrajectory.random(BUNDLED_HOME, amplitude=0.8, period=10.0,
                                          max_velocity=1.2, seed=7)
    t = np.arange(0.0, 30.0, STEP)
    q, qd, qdd = trajectory(t - clock_offset)
    standard = truth.standard.copy()
    if payload is not None:
        identifier = TorquePayloadIdentifier(truth, BUNDLED_SENSOR_FRAME)
        frame = identifier.kinematics.model.frames[identifier.kinematics.frame_id]
        standard[-1] += transform_parameters(payload.pi, frame.placement)
    phi = np.tile([0.3, 0.05, effort_offset], truth.model.n)
    effort = (truth.model.inverse_dynamics(standard, q, qd, qdd)
              + np.einsum("njf,f->nj", FRICTION.regressor(qd), phi))
    noise = np.random.default_rng(seed).normal(size=effort.shape) * 0.03
    return t, q, qd, qdd, effort + noise


@pytest.fixture(scope="module")
def pair(truth: LinkTorqueModel) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]]:
    return _run(truth, PAYLOAD, 0.0, 0.1, 1), _run(truth, None, DELAY, -0.05, 2)


def _wrong(truth: LinkTorqueModel) -> LinkTorqueModel:
    """A link model with a poor prior of the wrist (the last three bodies, whose torques on
    the upper joints look most like a payload's): masses 50 % heavy, CoMs moved by 2-4 cm,
    inertias 20 % off; and friction terms (the old way refits them)."""
    rng = np.random.default_rng(11)
    standard = truth.standard.copy()
    for i in range(truth.model.n - 3, truth.model.n):
        body = BodyParameters.from_pi(standard[i])
        com = body.com + rng.uniform(0.02, 0.04, 3) * rng.choice([-1, 1], 3)
        standard[i] = BodyParameters.from_mass_com_inertia(1.5 * body.mass, com,
                                                           1.2 * body.inertia_com).pi
    coefficients = np.zeros(truth.model.n * len(FRICTION.terms))
    return replace(truth, standard=standard, friction=FRICTION, coefficients=coefficients,
                   joint_sigma=np.full(truth.model.n, 0.05))


def test_the_runs_are_aligned_by_cross_correlation(pair) -> None:
    (t, _, qd, _, _), (tu, _, qdu, _, _) = pair
    assert time_shift(t, qd, tu, qdu, 1.0) == pytest.approx(DELAY, abs=2e-4)
    assert time_shift(tu, qdu, t, qd, 1.0) == pytest.approx(-DELAY, abs=2e-4)


def test_the_difference_of_the_pair_gets_the_mass_where_refitting_has_a_phantom(
        truth: LinkTorqueModel, pair) -> None:
    loaded, unloaded = pair
    wrong = _wrong(truth)
    difference = paired_difference(wrong, loaded, unloaded)
    assert difference.shift == pytest.approx(DELAY, abs=2e-4)
    assert difference.t.size > 0.9 * loaded[0].size
    estimate = identify_paired_payload(TorquePayloadIdentifier(wrong, BUNDLED_SENSOR_FRAME),
                                       difference)
    assert abs(estimate.body.mass - MASS) < 0.01 * MASS, estimate.body.mass
    np.testing.assert_allclose(estimate.body.com, PAYLOAD.com, atol=0.005)
    assert estimate.physically_consistent
    # The old way: friction and offsets re-fitted on the unloaded run, the wrong rigid
    # bodies kept, then the payload fitted to the loaded run.
    refitted = wrong.refit_drive_terms(*unloaded[1:])
    identifier = TorquePayloadIdentifier(refitted, BUNDLED_SENSOR_FRAME)
    identifier.add(*loaded[1:])
    old = identifier.solve().body.mass
    assert abs(old - MASS) > 0.01 * MASS, old
    assert abs(old - MASS) > 5 * abs(estimate.body.mass - MASS), (old, estimate.body.mass)
