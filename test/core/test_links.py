"""Link identification from joint torques: regressor, base parameters, friction, estimators,
identified URDF, and the identify-links command (core/joint_torque/links/, joint_records.py,
links_tool.py)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from inertial_id.core.errors import InertialIdError, ModelError, SampleError, SolverError
from inertial_id.core.joint_torque.friction import FrictionModel
from inertial_id.core.joint_torque.link_model import (
    LinkModel,
    base_parameters,
    structural_base_parameters,
    transform_parameters,
)
from inertial_id.core.joint_torque.link_urdf import identified_urdf
from inertial_id.core.joint_torque.links import (
    ConstrainedLinkEstimator,
    LinkIdentification,
    correlation_times,
    identify,
)
from inertial_id.core.parameters import (
    BodyParameters,
    from_pinocchio_order,
    is_physically_consistent,
)
from inertial_id.core.simulation import bundled_urdf_path
from inertial_id.io.joint_records import joint_name, read_joint_csv
from inertial_id.tools.links_tool import add_identify_links_parser, run_identify_links

TIAGO = Path(__file__).resolve().parents[3] / "shared" / "data" / "tiago"


@pytest.fixture(scope="module")
def arm() -> LinkModel:
    return LinkModel(bundled_urdf_path())


@pytest.fixture(scope="module")
def base(arm):
    return structural_base_parameters(arm)


def states(model: LinkModel, count: int, seed: int, rest: float = 0.0):
    """Random states; a fraction ``rest`` of each joint's velocities is exactly zero."""
    q, qd, qdd = model.random_states(count, seed)
    if rest:
        qd[np.random.default_rng(seed + 1).random(qd.shape) < rest] = 0.0
    return q, qd, qdd


def perturbed(model: LinkModel, seed: int = 3) -> np.ndarray:
    """A consistent set of body parameters near the CAD (masses, CoMs, inertias changed)."""
    rng = np.random.default_rng(seed)
    out = []
    for pi in model.cad:
        body = BodyParameters.from_pi(pi)
        inertia = body.inertia_com * rng.uniform(0.8, 1.2)
        out.append(BodyParameters.from_mass_com_inertia(
            body.mass * rng.uniform(0.85, 1.15), body.com + rng.normal(size=3) * 0.01,
            inertia).pi)
    return np.array(out)


# ------------------------------------------------------------------------------ regressor


def test_regressor_matches_rnea_with_cad_parameters(arm):
    import pinocchio as pin

    q, qd, qdd = states(arm, 20, 0)
    y = arm.regressor(q, qd, qdd)
    assert y.shape == (20, arm.n, 10 * arm.n)
    data = arm.model.createData()
    for k in range(20):
        tau = pin.rnea(arm.model, data, arm.kinematics.configuration(q[k]), qd[k], qdd[k])
        np.testing.assert_allclose(y[k] @ arm.cad.ravel(), tau, atol=1e-9)


def test_regressor_columns_in_package_order(arm):
    """CAD parameters come from pinocchio's order through from_pinocchio_order."""
    np.testing.assert_allclose(arm.cad[2], from_pinocchio_order(
        arm.model.inertias[3].toDynamicParameters()))
    params = perturbed(arm)
    q, qd, qdd = states(arm, 10, 1)
    tau = arm.inverse_dynamics(params, q, qd, qdd)
    np.testing.assert_allclose(np.einsum("njk,k->nj", arm.regressor(q, qd, qdd),
                                         params.ravel()), tau, atol=1e-9)


def test_bad_shapes_are_sample_errors(arm):
    with pytest.raises(SampleError):
        arm.regressor(np.zeros((3, arm.n)), np.zeros((3, arm.n)), np.zeros((2, arm.n)))


# ------------------------------------------------------------------------ base parameters


def test_base_parameters_reproduce_torques_and_have_full_rank(arm, base):
    q, qd, qdd = states(arm, 50, 11)  # not the states the base parameters came from
    y = arm.regressor(q, qd, qdd)
    yb = base.base_regressor(y)
    params = perturbed(arm).ravel()
    np.testing.assert_allclose(np.einsum("njb,b->nj", yb, base.regrouping @ params),
                               np.einsum("njk,k->nj", y, params), atol=1e-9)
    stacked = yb.reshape(-1, base.count)
    assert np.linalg.matrix_rank(stacked) == base.count
    assert np.linalg.matrix_rank(y.reshape(-1, y.shape[-1])) == base.count
    assert base.count < 10 * arm.n


def test_base_parameters_of_a_known_structure():
    """Columns [a, 2a, b, 0]: rank 2, the second regroups onto the first, the zero vanishes."""
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(2, 40))
    bp = base_parameters(np.column_stack((a, 2 * a, b, np.zeros(40))))
    assert bp.count == 2
    k = bp.regrouping
    np.testing.assert_allclose(k @ [1.0, 1.0, 1.0, 5.0], [3.0, 1.0])


def test_base_parameter_expressions_name_standard_parameters(arm, base):
    names = base.expressions(arm.parameter_names)
    assert len(names) == base.count
    assert all(re.match(r"\w+_joint\.\w+", n) for n in names)


# ----------------------------------------------------------------------- friction, recovery


def test_friction_model_columns():
    fm = FrictionModel("asymmetric", velocity_threshold=0.01)
    qd = np.array([[0.5, -0.5], [0.005, -2.0]])
    f = fm.regressor(qd)
    assert fm.terms == ["fc+", "fc-", "fv", "offset"]
    np.testing.assert_allclose(f[0, 0, :4], [1, 0, 0.5, 1])
    np.testing.assert_allclose(f[0, 1, 4:], [0, -1, -0.5, 1])
    np.testing.assert_allclose(f[1, 0, :4], [0, 0, 0.005, 1])  # inside the dead band
    assert np.all(f[:, 0, 4:] == 0) and np.all(f[:, 1, :4] == 0)
    assert FrictionModel("symmetric", armature=True).terms == ["fc", "fv", "offset", "Ia"]


def simulate(model, params, friction, phi, count=300, seed=5, rest=0.2, noise=0.0):
    q, qd, qdd = states(model, count, seed, rest)
    tau = model.inverse_dynamics(params, q, qd, qdd)
    tau = tau + np.einsum("njf,f->nj", friction.regressor(qd, qdd), phi)
    tau += np.random.default_rng(seed).normal(size=tau.shape) * noise
    return q, qd, qdd, tau


def test_exact_recovery_of_base_parameters_and_friction(arm, base):
    friction = FrictionModel("asymmetric")
    phi = np.random.default_rng(2).uniform(0.1, 2.0, len(friction.names(arm.joint_names)))
    params = perturbed(arm)
    problem = LinkIdentification(arm, *simulate(arm, params, friction, phi), friction, base)
    estimate = problem.weighted_least_squares()
    np.testing.assert_allclose(estimate.base, base.regrouping @ params.ravel(),
                               rtol=1e-7, atol=1e-8)
    np.testing.assert_allclose(estimate.friction, phi, rtol=1e-7)
    assert np.all(problem.rms(estimate) < 1e-8)


def test_asymmetric_coulomb_and_offset_collinear_without_rest(arm, base):
    """Without rest samples fc+, fc- and the offset are collinear: infinite sigma."""
    friction = FrictionModel("asymmetric")
    phi = np.ones(len(friction.names(arm.joint_names)))
    data = simulate(arm, arm.cad, friction, phi, rest=0.0, noise=1e-3)
    estimate = LinkIdentification(arm, *data, friction, base).weighted_least_squares()
    sigma = estimate.relative_std[base.count:].reshape(arm.n, 4)  # fc+, fc-, fv, offset
    assert np.all(np.isinf(sigma[:, [0, 1, 3]]))
    assert np.all(np.isfinite(sigma[:, 2]))
    assert np.all(np.isfinite(estimate.relative_std[:base.count]))


def test_effort_scale_recovered_against_cad(arm, base):
    """Efforts in motor units (effort = s tau + friction): fit_cad finds s per joint."""
    friction = FrictionModel("symmetric")
    phi = np.full(len(friction.names(arm.joint_names)), 0.3)
    q, qd, qdd, tau = simulate(arm, arm.cad, friction, np.zeros_like(phi))
    scale = np.array([0.1, -0.05, 0.2, 1.0, 3.0, -0.5])
    effort = scale * tau + np.einsum("njf,f->nj", friction.regressor(qd), phi)
    cad = LinkIdentification(arm, q, qd, qdd, effort, friction, base).fit_cad()
    np.testing.assert_allclose(cad.effort_scale, scale, rtol=1e-8)
    np.testing.assert_allclose(cad.friction, phi, rtol=1e-6)


def test_known_effort_scale_is_kept(arm, base):
    friction = FrictionModel("symmetric")
    q, qd, qdd, tau = simulate(arm, arm.cad, friction, np.zeros(3 * arm.n))
    scale = np.array([0.1, -0.05, 0.2, 1.0, 3.0, -0.5])
    start = np.ones(arm.n)
    start[1] = 7.0  # a wrong "known" value is kept as given
    problem = LinkIdentification(arm, q, qd, qdd, scale * tau, friction, base,
                                 effort_scale=start, known_scale=np.arange(arm.n) == 1)
    fitted = problem.fit_cad().effort_scale
    assert fitted[1] == 7.0
    np.testing.assert_allclose(np.delete(fitted, 1), np.delete(scale, 1), rtol=1e-8)


def test_smooth_coulomb_columns():
    fm = FrictionModel("asymmetric", velocity_threshold=0.1, smooth=True)
    qd = np.array([[0.05, -0.05], [0.0, -1.0]])
    f = fm.regressor(qd)
    t = np.tanh(0.5)
    np.testing.assert_allclose(f[0, 0, :4], [t, 0, 0.05, 1])
    np.testing.assert_allclose(f[0, 1, 4:], [0, -t, -0.05, 1])
    np.testing.assert_allclose(f[1, 0, :4], [0, 0, 0, 1])  # continuous through rest
    np.testing.assert_allclose(f[1, 1, 4:5], [0])
    with pytest.raises(InertialIdError):
        FrictionModel("symmetric", velocity_threshold=0.0, smooth=True)


def test_direction_memory_state_keeps_the_last_motion_direction():
    """Dahl state: +1 after positive motion then rest, -1 after negative, 0 before any
    motion; velocity noise inside the dead band leaves it alone; one exact step."""
    fm = FrictionModel("symmetric", velocity_threshold=0.01, presliding=1e-3,
                       sample_period=0.01)
    qd = np.concatenate((np.zeros(5), np.full(20, 0.5), np.zeros(30), np.full(20, -0.5),
                         np.zeros(30)))
    z = fm.direction(np.column_stack((qd, -qd)))
    np.testing.assert_allclose(z[:5], 0.0)
    np.testing.assert_allclose(z[25:55, 0], 1.0, atol=1e-12)
    np.testing.assert_allclose(z[25:55, 1], -1.0, atol=1e-12)
    np.testing.assert_allclose(z[75:, 0], -1.0, atol=1e-12)
    np.testing.assert_allclose(z[75:, 1], 1.0, atol=1e-12)
    # First step from 0: displacement 0.5 * 0.01 = 5 x0 -> z = 1 - exp(-5).
    assert z[5, 0] == pytest.approx(1.0 - np.exp(-5.0))
    # Noise inside the dead band after positive motion: the state stays +1.
    noise = np.random.default_rng(0).uniform(-0.009, 0.009, 50)
    held = fm.direction(np.concatenate((np.full(10, 0.3), noise))[:, None])
    np.testing.assert_allclose(held[10:, 0], held[9, 0])
    # The Coulomb column is the state; a slow reversal passes through it continuously.
    f = fm.regressor(qd[:, None])
    np.testing.assert_allclose(f[:, 0, 0], z[:, 0])
    slow = fm.direction(np.linspace(0.05, -0.05, 200)[:, None])[:, 0]
    assert np.max(np.abs(np.diff(slow))) < 0.4 and slow[-1] < -0.99 and slow[0] > 0
    # With smooth: tanh(qd / v0) while moving, the memory at rest.
    both = FrictionModel("symmetric", velocity_threshold=0.01, presliding=1e-3,
                         sample_period=0.01, smooth=True).regressor(qd[:, None])[:, 0, 0]
    m = np.tanh(qd / 0.01)
    np.testing.assert_allclose(both, m + (1 - np.abs(m)) * z[:, 0])
    np.testing.assert_allclose(both[25:55], 1.0, atol=1e-12)
    np.testing.assert_allclose(both[75:], -1.0, atol=1e-12)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-1.0, 1.0), min_size=1, max_size=40), st.floats(1e-4, 1e-1))
def test_direction_memory_follows_the_last_motion(velocities, x0):
    """Property: z in [-1, 1], held through rest, and after the last run of motion in one
    direction (displacement D) within 2 exp(-D / x0) of that direction's sign."""
    v0, dt = 0.05, 0.01
    fm = FrictionModel("asymmetric", velocity_threshold=v0, presliding=x0, sample_period=dt)
    qd = np.concatenate((velocities, np.zeros(10)))
    z = fm.direction(qd[:, None])[:, 0]
    assert np.all(np.abs(z) <= 1.0)
    moving = np.flatnonzero(np.abs(qd) > v0)
    if moving.size == 0:
        np.testing.assert_array_equal(z, 0.0)
        return
    last = moving[-1]
    np.testing.assert_array_equal(z[last:], z[last])
    direction = np.sign(qd[last])
    run = moving[np.cumprod(np.sign(qd[moving[::-1]]) == direction)[::-1].astype(bool)]
    displacement = np.sum(np.abs(qd[run])) * dt
    assert abs(direction - z[last]) <= 2.0 * np.exp(-displacement / x0) + 1e-12
    # The asymmetric columns split the state by its sign: fc+ max(z, 0) + fc- min(z, 0).
    f = fm.regressor(qd[:, None])
    np.testing.assert_allclose(f[:, 0, 0] + f[:, 0, 1], z)
    assert np.all(f[:, 0, 0] >= 0) and np.all(f[:, 0, 1] <= 0)


def test_known_friction_with_memory_is_recovered(arm, base):
    """Efforts with a Coulomb term that holds its direction at rest (time-ordered record):
    WLS with the same model recovers pi_b and friction exactly; the memoryless model cannot
    explain the rests; a subset keeps the states of the whole record."""
    friction = FrictionModel("asymmetric", velocity_threshold=0.01, presliding=2e-3,
                             sample_period=0.01)
    count = 240
    t = np.arange(count) * 0.01
    rng = np.random.default_rng(11)
    q, _, _ = arm.random_states(1, 3)
    # Smooth strokes with rests: sin bursts of random sign per joint, zero between them.
    phase = np.sin(2 * np.pi * t / 0.8)
    gate = (np.floor(t / 0.8) % 2 == 0)[:, None]
    qd = gate * phase[:, None] * rng.uniform(0.5, 1.5, arm.n)
    qd *= np.where(np.arange(count)[:, None] < count // 2, 1.0, -1.0)
    qdd = np.gradient(qd, t, axis=0)
    q = q + np.cumsum(qd, axis=0) * 0.01
    phi = rng.uniform(0.1, 1.0, len(friction.names(arm.joint_names)))
    params = perturbed(arm)
    effort = arm.inverse_dynamics(params, q, qd, qdd)
    effort += np.einsum("njf,f->nj", friction.regressor(qd, qdd), phi)
    problem = LinkIdentification(arm, q, qd, qdd, effort, friction, base)
    estimate = problem.weighted_least_squares()
    np.testing.assert_allclose(estimate.friction, phi, rtol=1e-5)
    np.testing.assert_allclose(estimate.base, base.regrouping @ params.ravel(),
                               rtol=1e-4, atol=1e-5)  # few poses: pi_b less well conditioned
    assert np.all(problem.rms(estimate) < 1e-6)
    memoryless = problem.with_friction(FrictionModel("asymmetric", velocity_threshold=0.01))
    assert np.all(memoryless.rms(memoryless.weighted_least_squares()) > 1e-3)
    late = np.arange(count) >= count // 2
    np.testing.assert_array_equal(problem.subset(late).f, problem.f[late])


def test_drive_scales_and_inertials_fitted_jointly(arm, base):
    """Efforts in motor units with one known gain: the CAD fit of the scales is off (wrong
    inertials), the alternation of scales and the SDP recovers scales, pi and friction."""
    friction = FrictionModel("symmetric", velocity_threshold=0.05, smooth=True)
    phi = np.full(len(friction.names(arm.joint_names)), 0.3)
    params = perturbed(arm)
    q, qd, qdd, tau = simulate(arm, params, friction, np.zeros_like(phi), count=150)
    scale = np.array([1.0, -0.05, 0.2, 1.5, 3.0, -0.5])
    effort = scale * tau + np.einsum("njf,f->nj", friction.regressor(qd), phi)
    problem = LinkIdentification(arm, q, qd, qdd, effort, friction, base,
                                 known_scale=np.arange(arm.n) == 0)
    cad = problem.fit_cad()
    assert np.isnan(cad.info["effort_scale_relative_std"][0])
    assert np.all(np.isfinite(cad.info["effort_scale_relative_std"][1:]))
    assert np.max(np.abs(cad.effort_scale / scale - 1)) > 0.05
    problem.effort_scale = cad.effort_scale.copy()
    estimate = identify(problem, "sdp", prior_weight=1e-8, epsilon=1e-9, refine_scale=50,
                        tolerance=1e-7)
    np.testing.assert_allclose(estimate.effort_scale, scale, rtol=1e-3)
    truth = base.regrouping @ params.ravel()
    assert np.max(np.abs(estimate.base - truth) / (np.abs(truth) + 1e-2)) < 1e-3
    np.testing.assert_allclose(estimate.friction, phi, atol=1e-4)
    assert all(estimate.link_consistency(arm.attachments))


def test_subset_and_friction_swap_match_a_fresh_problem(arm, base):
    q, qd, qdd = states(arm, 60, 8, rest=0.2)
    effort = arm.inverse_dynamics(arm.cad, q, qd, qdd)
    symmetric, smooth = FrictionModel("symmetric"), FrictionModel("asymmetric", smooth=True)
    problem = LinkIdentification(arm, q, qd, qdd, effort, symmetric, base)
    rows = np.arange(60) % 3 != 0
    for derived, fresh in (
        (problem.subset(rows),
         LinkIdentification(arm, q[rows], qd[rows], qdd[rows], effort[rows], symmetric, base)),
        (problem.with_friction(smooth),
         LinkIdentification(arm, q, qd, qdd, effort, smooth, base)),
    ):
        sigma = np.linspace(1.0, 2.0, arm.n)
        a, b = derived.statistics(sigma), fresh.statistics(sigma)
        np.testing.assert_allclose(a.information, b.information, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(a.moment, b.moment, rtol=1e-12, atol=1e-12)
        assert derived.friction_names == fresh.friction_names
        assert derived.samples == fresh.samples


def test_relative_std_and_correlation_time():
    rng = np.random.default_rng(0)
    white = rng.normal(size=(20000, 1))
    coloured = np.convolve(white[:, 0], np.ones(20) / 20, mode="same")[:, None]
    assert correlation_times(white)[0] == pytest.approx(1.0, abs=0.3)
    assert correlation_times(coloured)[0] == pytest.approx(20.0, rel=0.3)


# -------------------------------------------------------------------- constrained estimates


@pytest.fixture(scope="module")
def noisy(arm, base):
    friction = FrictionModel("symmetric")
    phi = np.random.default_rng(4).uniform(0.1, 1.0, len(friction.names(arm.joint_names)))
    params = perturbed(arm)
    data = simulate(arm, params, friction, phi, count=200, noise=0.05)
    return LinkIdentification(arm, *data, friction, base), params


@pytest.mark.parametrize("method", ["sdp", "qp"])
def test_constrained_estimates_are_consistent_per_link(arm, noisy, method):
    problem, params = noisy
    for consistency, attachments in (("link", arm.attachments), ("body", None)):
        # The prior weight is relative to the effort energy: tiny for a 0.05 N m noise.
        estimate = identify(problem, method, prior_weight=1e-7, consistency=consistency,
                            com_margin=0.05)
        assert estimate.standard.shape == (arm.n, 10)
        assert all(estimate.link_consistency(attachments))
        com = estimate.standard[:, 1:4] / estimate.standard[:, :1]
        assert np.all(np.abs(com - arm.cad[:, 1:4] / arm.cad[:, :1]) <= 0.05 + 1e-6)
        # Noise 0.05 N m: the fit is close to the truth's.
        truth = problem.rms(problem.fit_cad(params, fit_scale=False))
        assert np.all(problem.rms(estimate) < 1.05 * truth)


def test_sdp_and_qp_agree_and_recover_noiseless_data(arm, base):
    friction = FrictionModel("symmetric")
    phi = np.full(len(friction.names(arm.joint_names)), 0.5)
    params = perturbed(arm)
    problem = LinkIdentification(arm, *simulate(arm, params, friction, phi), friction, base)
    truth = base.regrouping @ params.ravel()
    sdp = identify(problem, "sdp", prior_weight=1e-8, epsilon=1e-9)
    qp = identify(problem, "qp", prior_weight=1e-8, epsilon=1e-9)
    scale = np.abs(truth) + 1e-2
    assert np.max(np.abs(sdp.base - truth) / scale) < 1e-3
    assert np.max(np.abs(qp.base - truth) / scale) < 1e-3
    np.testing.assert_allclose(sdp.friction, phi, atol=1e-3)


def test_holding_unidentified_base_parameters_at_cad(arm, noisy):
    problem, _ = noisy
    estimate = identify(problem, "sdp", max_relative_std=1.0)
    held = ~(problem.weighted_least_squares().relative_std[:problem.base.count] <= 1.0)
    assert held.any() and estimate.info["held"] == held.sum()
    cad_base = problem.base.regrouping @ arm.cad.ravel()
    np.testing.assert_allclose(estimate.base[held], cad_base[held], rtol=1e-5, atol=1e-7)


def test_estimator_is_built_once_and_resolves(arm, noisy):
    problem, _ = noisy
    solver = ConstrainedLinkEstimator(arm, problem.base, problem.f.shape[-1], "sdp")
    sigma = problem.weighted_least_squares().joint_sigma
    first = solver.solve(problem, sigma)
    compiled = solver._problem
    solver.set_prior_weight(1.0)
    second = solver.solve(problem, sigma)
    assert solver._problem is compiled
    # A heavy prior pulls the standard parameters to the CAD.
    assert (np.linalg.norm(second.standard - arm.cad)
            < np.linalg.norm(first.standard - arm.cad))


def test_wls_and_pls_give_standard_parameters_matching_their_base(arm, noisy):
    problem, _ = noisy
    for method in ("wls", "pls"):
        estimate = identify(problem, method)
        np.testing.assert_allclose(problem.base.regrouping @ estimate.standard.ravel(),
                                   estimate.base, atol=1e-8)


# ------------------------------------------------------------------------ identified URDF


def _without_inertials(text: str) -> str:
    return re.sub(r"<inertial>.*?</inertial>", "", text, flags=re.DOTALL)


def test_identified_urdf_round_trips(arm):
    params = perturbed(arm)
    text = identified_urdf(arm, params)
    assert _without_inertials(text) == _without_inertials(arm.urdf)
    again = LinkModel(text)
    np.testing.assert_allclose(again.cad[:, 0], params[:, 0], rtol=1e-8)
    np.testing.assert_allclose(again.cad, params, rtol=1e-6, atol=1e-9)


def test_transform_parameters_matches_pinocchio():
    import pinocchio as pin

    body = BodyParameters.from_mass_com_inertia(1.3, [0.1, -0.2, 0.05],
                                                np.diag([0.02, 0.03, 0.04]))
    placement = pin.SE3(pin.rpy.rpyToMatrix(0.3, -0.2, 1.0), np.array([0.2, 0.1, -0.3]))
    expected = BodyParameters.from_pinocchio(placement.act(body.to_pinocchio())).pi
    np.testing.assert_allclose(transform_parameters(body.pi, placement), expected, atol=1e-12)


def test_non_positive_link_mass_is_refused(arm):
    params = arm.cad.copy()
    params[1, 0] = -1.0
    with pytest.raises(SolverError, match="non-positive mass"):
        identified_urdf(arm, params)


def test_self_closing_and_missing_inertials_are_written():
    text = """<robot name="r">
  <link name="base"/>
  <joint name="j1" type="revolute"><parent link="base"/><child link="a"/>
    <axis xyz="0 0 1"/><limit lower="-1" upper="1" effort="10" velocity="1"/></joint>
  <link name="a"/>
  <joint name="j2" type="revolute"><parent link="a"/><child link="b"/>
    <origin xyz="0.3 0 0"/><axis xyz="0 1 0"/>
    <limit lower="-1" upper="1" effort="10" velocity="1"/></joint>
  <link name="b"><visual><geometry><box size="0.1 0.1 0.1"/></geometry></visual></link>
</robot>"""
    model = LinkModel(text)
    params = np.array([BodyParameters.from_mass_com_inertia(m, [0.1, 0, 0],
                                                            np.eye(3) * 0.01).pi
                       for m in (1.0, 2.0)])
    again = LinkModel(identified_urdf(model, params))
    np.testing.assert_allclose(again.cad, params, atol=1e-9)


# ------------------------------------------------------------------------------- TIAGo


@pytest.mark.skipif(not (TIAGO / "tiago_48_hey5.urdf").is_file(), reason="no TIAGo data")
def test_tiago_chain_locks_everything_else_and_splits_attachments():
    joints = ["torso_lift_joint", *(f"arm_{i}_joint" for i in range(1, 8))]
    model = LinkModel(str(TIAGO / "tiago_48_hey5.urdf"), joints=joints)
    assert model.joint_names == joints and model.model.nv == 8
    np.testing.assert_allclose(model.own_cad + model.attachments, model.cad)
    assert model.link_names[-1] == "arm_7_link"
    assert model.own_cad[-1, 0] == pytest.approx(0.234252)
    assert model.attachments[-1, 0] > 1.0  # hand, F/T sensor, locked fingers
    # The CAD arm_1_link violates the triangle inequality (not physically consistent).
    assert not is_physically_consistent(model.own_cad[1])


# -------------------------------------------------------------------------------- command


def test_joint_names_from_headers():
    assert joint_name("- arm_1_joint_position") == "arm_1_joint"
    assert joint_name("wrist_1_joint_effort") == "wrist_1_joint"
    assert joint_name("elbow") == "elbow"


def _write_csv(path: Path, t, names, values, kind):
    header = ",".join(["t"] + [f"- {n}_{kind}" for n in names])
    np.savetxt(path, np.column_stack((t, values)), delimiter=",", header=header, comments="")


def test_identify_links_trains_on_several_row_ranges(arm, tmp_path):
    """--train-rows twice: the model is fitted on both ranges, the block between them (and
    the rows after) is the validation, and it is predicted as well as the training rows;
    overlapping ranges are refused with a one-line error."""
    from inertial_id.core.simulation import FourierTrajectory

    traj = FourierTrajectory.random(np.zeros(arm.n), amplitude=1.0, period=6.0, seed=4)
    t = np.arange(0.0, 12.0, 0.01)
    q, qd, qdd = traj(t)
    tau = arm.inverse_dynamics(perturbed(arm), q, qd, qdd)
    _write_csv(tmp_path / "pos.csv", t, arm.joint_names, q, "position")
    _write_csv(tmp_path / "eff.csv", t, arm.joint_names, tau, "effort")
    parser = argparse.ArgumentParser()
    add_identify_links_parser(parser.add_subparsers(dest="command"))
    common = ["identify-links", "--urdf", bundled_urdf_path(), "--position",
              str(tmp_path / "pos.csv"), "--effort", str(tmp_path / "eff.csv"),
              "--window", "21", "--method", "wls", "--friction", "none",
              "--gain-std", "0", "--output", str(tmp_path / "out.yaml")]
    args = parser.parse_args(common + ["--train-rows", "600", "900", "--train-rows", "0",
                                       "400"])
    assert run_identify_links(args) == 0
    doc = yaml.safe_load((tmp_path / "out.yaml").read_text())
    assert doc["train_rows"] == [[0, 400], [600, 900]]
    assert doc["samples"] == 700 - 10  # the filter's first rows are left out
    # Rigid-body torques of tens of N m, no friction: the rows between and after the
    # ranges are predicted to a fraction of a N m (0.045 measured).
    assert max(doc["validation_rms"].values()) < 0.2
    overlap = parser.parse_args(common + ["--train-rows", "0", "500", "--train-rows", "400",
                                          "900"])
    with pytest.raises(SampleError, match="overlap"):
        run_identify_links(overlap)


def test_identify_links_command(arm, tmp_path):
    from inertial_id.core.simulation import FourierTrajectory

    traj = FourierTrajectory.random(np.zeros(arm.n), amplitude=1.0, period=6.0, seed=2)
    t = np.arange(0.0, 12.0, 0.01)
    q, qd, qdd = traj(t)
    friction = FrictionModel("symmetric")
    phi = np.full(len(friction.names(arm.joint_names)), 0.2)
    tau = arm.inverse_dynamics(perturbed(arm), q, qd, qdd)
    tau += np.einsum("njf,f->nj", friction.regressor(qd), phi)
    order = list(reversed(arm.joint_names))  # any column order works
    idx = [arm.joint_names.index(n) for n in order]
    _write_csv(tmp_path / "pos.csv", t, order, q[:, idx], "position")
    _write_csv(tmp_path / "eff.csv", t, order, tau[:, idx], "effort")
    assert read_joint_csv(tmp_path / "pos.csv").names == order
    parser = argparse.ArgumentParser()
    add_identify_links_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args([
        "identify-links", "--urdf", bundled_urdf_path(), "--position",
        str(tmp_path / "pos.csv"), "--effort", str(tmp_path / "eff.csv"), "--train-rows",
        "0", "900", "--output", str(tmp_path / "out.yaml"), "--output-urdf",
        str(tmp_path / "out.urdf"), "--window", "21", "--prior-weight", "1e-8"])
    assert run_identify_links(args) == 0
    doc = yaml.safe_load((tmp_path / "out.yaml").read_text())
    assert doc["all_links_consistent"] is True
    # The Coulomb shape (dead band or tanh and its v0) is chosen from the data by default.
    assert doc["choices"]["friction"]["source"] == "cross-validation"
    shapes = {(row["smooth"], row["velocity_threshold"])
              for row in doc["choices"]["friction"]["candidates"]}
    assert (False, 0.002) in shapes and any(smooth for smooth, _ in shapes)
    assert set(doc["torque_rms"]) == set(arm.joint_names)
    assert max(doc["validation_rms"].values()) < 0.2
    assert {"name", "value", "std", "relative_std_percent"} <= set(doc["base_parameters"][0])
    assert set(doc["friction"]["elbow_joint"]) >= {"fc", "fv", "offset"}
    written = LinkModel(str(tmp_path / "out.urdf"))
    assert np.all(written.cad[:, 0] > 0)


def test_identify_links_rejects_misaligned_files(arm, tmp_path):
    t = np.arange(0.0, 1.0, 0.01)
    _write_csv(tmp_path / "pos.csv", t, arm.joint_names, np.zeros((t.size, arm.n)), "position")
    _write_csv(tmp_path / "eff.csv", t[:-1], arm.joint_names, np.zeros((t.size - 1, arm.n)),
               "effort")
    parser = argparse.ArgumentParser()
    add_identify_links_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["identify-links", "--urdf", bundled_urdf_path(), "--position",
                              str(tmp_path / "pos.csv"), "--effort",
                              str(tmp_path / "eff.csv")])
    with pytest.raises(SampleError, match="effort"):
        run_identify_links(args)


def test_unknown_joints_are_model_errors():
    with pytest.raises(ModelError):
        LinkModel(bundled_urdf_path(), joints=["no_such_joint"])
