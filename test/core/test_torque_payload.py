"""The payload from joint torques (inertial_id.core.joint_torque.torque_payload): the rows against
pinocchio's RNEA with the payload merged into the last body, known payloads recovered from simulated
efforts with an honest std, friction re-fitted from an unloaded recording."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inertial_id.core.joint_torque.friction import FrictionModel
from inertial_id.core.joint_torque.link_model import LinkModel, transform_parameters
from inertial_id.core.joint_torque.torque_payload import LinkTorqueModel, TorquePayloadIdentifier
from inertial_id.core.parameters import BodyParameters
from inertial_id.core.simulation import (
    BUNDLED_HOME,
    BUNDLED_SENSOR_FRAME,
    FourierTrajectory,
    bundled_urdf_path,
)

URDF = bundled_urdf_path()
FRICTION = FrictionModel(coulomb="symmetric", smooth=True, velocity_threshold=0.03)


@pytest.fixture(scope="module")
def links() -> LinkTorqueModel:
    return LinkTorqueModel.from_urdf(URDF)


def _payload(mass: float, com: list[float], box: list[float]) -> BodyParameters:
    a, b, c = box
    inertia = mass / 12.0 * np.diag([b * b + c * c, a * a + c * c, a * a + b * b])
    return BodyParameters.from_mass_com_inertia(mass, com, inertia)


def _merged_efforts(links: LinkTorqueModel, payload: BodyParameters, q: np.ndarray,
                    qd: np.ndarray, qdd: np.ndarray) -> np.ndarray:
    """RNEA torques with the payload added to the last body (moved to its joint frame)."""
    model = links.model
    identifier = TorquePayloadIdentifier(links, BUNDLED_SENSOR_FRAME)
    frame = identifier.kinematics.model.frames[identifier.kinematics.frame_id]
    assert frame.parentJoint == model.n  # the sensor sits on the last moving joint
    standard = links.standard.copy()
    standard[-1] += transform_parameters(payload.pi, frame.placement)
    return model.inverse_dynamics(standard, q, qd, qdd)


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 10_000))
def test_the_payload_rows_are_the_torques_of_the_payload_merged_into_the_last_body(
        seed: int) -> None:
    links = LinkTorqueModel.from_urdf(URDF)
    rng = np.random.default_rng(seed)
    payload = _payload(rng.uniform(0.1, 3.0), list(rng.uniform(-0.05, 0.1, 3)),
                       list(rng.uniform(0.02, 0.2, 3)))
    q, qd, qdd = links.model.random_states(5, seed)
    identifier = TorquePayloadIdentifier(links, BUNDLED_SENSOR_FRAME)
    expected = (_merged_efforts(links, payload, q, qd, qdd)
                - links.model.inverse_dynamics(links.standard, q, qd, qdd))
    got = np.einsum("njp,p->nj", identifier.rows(q, qd, qdd), payload.pi)
    np.testing.assert_allclose(got, expected, atol=1e-9 * (1 + np.abs(expected).max()))


def _recording(links: LinkTorqueModel, payload: BodyParameters | None, seconds: float,
               seed: int, noise: float = 0.05, friction: np.ndarray | None = None
               ) -> tuple[np.ndarray, ...]:
    """(q, qd, qdd, effort) at 200 Hz along an exciting trajectory of the bundled arm."""
    t = np.arange(0.0, seconds, 0.005)
    trajectory = FourierTrajectory.random(BUNDLED_HOME, amplitude=0.8, period=10.0,
                                          max_velocity=1.2, seed=seed)
    q, qd, qdd = trajectory(t)
    effort = (links.model.inverse_dynamics(links.standard, q, qd, qdd) if payload is None
              else _merged_efforts(links, payload, q, qd, qdd))
    if friction is not None:
        effort = effort + np.einsum("njf,f->nj", FRICTION.regressor(qd), friction)
    # Coloured measurement noise (a first-order low-pass of white noise), as filtered torques.
    rng = np.random.default_rng(seed + 1)
    white = rng.normal(size=effort.shape) * noise
    coloured = np.zeros_like(white)
    for k in range(1, len(t)):
        coloured[k] = 0.8 * coloured[k - 1] + 0.6 * white[k]
    return q, qd, qdd, effort + coloured


@pytest.mark.parametrize("seed,mass", [(1, 0.8), (2, 1.5), (3, 3.0)])
def test_a_known_payload_is_recovered_from_joint_torques(links: LinkTorqueModel, seed: int,
                                                         mass: float) -> None:
    payload = _payload(mass, [0.01, -0.02, 0.07], [0.1, 0.08, 0.14])
    q, qd, qdd, effort = _recording(links, payload, 30.0, seed)
    sigma = LinkTorqueModel.from_urdf(URDF, joint_sigma=np.full(links.model.n, 0.05))
    identifier = TorquePayloadIdentifier(sigma, BUNDLED_SENSOR_FRAME)
    identifier.add(q, qd, qdd, effort)
    estimate = identifier.solve()
    assert abs(estimate.body.mass - mass) < 0.02 * mass
    np.testing.assert_allclose(estimate.body.com, payload.com, atol=0.01)
    assert estimate.physically_consistent
    # The std is honest: the mass error is within 3 std, and the std is not vacuous.
    z = (estimate.body.mass - mass) / estimate.std[0]
    assert abs(z) < 3.0, (estimate.body.mass, estimate.std[0])
    assert estimate.std[0] < 0.02 * mass


def test_the_payload_from_torques_solves_with_cvxpy_when_the_dedicated_solver_is_off(
        links: LinkTorqueModel) -> None:
    """``dedicated_solver: false`` reaches the joint-torque payload too, with the same answer."""
    payload = _payload(1.5, [0.01, -0.02, 0.07], [0.1, 0.08, 0.14])
    q, qd, qdd, effort = _recording(links, payload, 10.0, 4)
    estimates = {}
    for dedicated in (True, False):
        identifier = TorquePayloadIdentifier(links, BUNDLED_SENSOR_FRAME, dedicated=dedicated)
        identifier.add(q, qd, qdd, effort)
        estimates[dedicated] = identifier.solve()
        assert (identifier.estimator.last_solve == "sdp") != dedicated
    # The same optimum, to within the conic solver's tolerance: far inside one std.
    difference = np.abs(estimates[False].pi - estimates[True].pi)
    assert np.all(difference < 0.01 * estimates[True].std), difference / estimates[True].std


def test_friction_and_offsets_are_refitted_from_an_unloaded_recording(
        links: LinkTorqueModel) -> None:
    nv = links.model.n
    truth = np.tile([0.3, 0.05, 0.1], nv)  # fc, fv, offset per joint
    q, qd, qdd, effort = _recording(links, None, 30.0, 4, noise=0.02, friction=truth)
    refitted = links.refit_drive_terms(q, qd, qdd, effort, FRICTION)
    np.testing.assert_allclose(refitted.coefficients, truth, atol=0.03)
    assert np.all(refitted.joint_sigma < 0.05)
    # With the refitted friction, a loaded recording gives the payload back.
    payload = _payload(1.2, [0.0, 0.03, 0.05], [0.1, 0.1, 0.1])
    q, qd, qdd, effort = _recording(links, payload, 30.0, 5, noise=0.02, friction=truth)
    identifier = TorquePayloadIdentifier(refitted, BUNDLED_SENSOR_FRAME)
    identifier.add(q, qd, qdd, effort)
    assert abs(identifier.solve().body.mass - 1.2) < 0.02 * 1.2


def test_an_unknown_payload_frame_is_refused(links: LinkTorqueModel) -> None:
    model = LinkModel(URDF)
    with pytest.raises(Exception, match="not in the URDF"):
        TorquePayloadIdentifier(LinkTorqueModel.from_urdf(model.urdf), "no_such_frame")


def test_the_simulator_efforts_are_the_arm_its_payload_contacts_and_friction(
        links: LinkTorqueModel) -> None:
    from inertial_id.core.kinematics import SensorKinematics
    from inertial_id.core.simulation import Contact, PayloadSimulation

    payload = _payload(1.1, [0.01, 0.0, 0.08], [0.1, 0.1, 0.1])
    contact = Contact(0.5, 1.0, (0.0, 25.0, -10.0), (0.0, 0.02, 0.12))
    trajectory = FourierTrajectory.random(BUNDLED_HOME, seed=2)
    sim = PayloadSimulation(SensorKinematics(URDF, BUNDLED_SENSOR_FRAME), trajectory,
                            payload=payload, contacts=(contact,))
    t = np.linspace(0.0, 2.0, 41)
    q, qd, qdd = trajectory(t)
    identifier = TorquePayloadIdentifier(links, BUNDLED_SENSOR_FRAME)
    jacobians = identifier.kinematics.jacobians(q)
    push = -np.einsum("nki,nk->ni", jacobians, sim.contact_wrench(t))
    friction = sim.coulomb_friction * np.tanh(qd / 0.03) + sim.viscous_friction * qd
    expected = _merged_efforts(links, payload, q, qd, qdd) + push + friction
    np.testing.assert_allclose(sim.joint_efforts(t, noise=False), expected, atol=1e-9)
    noisy = sim.joint_efforts(t) - sim.joint_efforts(t, noise=False)
    assert 0.02 < noisy.std() < 0.08  # effort_noise_std = 0.05 N m


def test_the_stream_adds_each_state_once_as_the_batch_filter_would(
        links: LinkTorqueModel) -> None:
    from inertial_id.core.joint_torque.torque_payload import TorquePayloadStream
    from inertial_id.core.signals import savitzky_golay

    payload = _payload(1.3, [0.0, 0.01, 0.06], [0.1, 0.1, 0.1])
    q, _, _, effort = _recording(links, payload, 6.0, 7)
    t = np.arange(len(q)) * 0.005 + 0.0003 * np.sin(np.arange(len(q)))  # jittery stamps
    batch = TorquePayloadIdentifier(links, BUNDLED_SENSOR_FRAME, score_block=0)
    smooth = [savitzky_golay(t, q, 31, 3, d) for d in (0, 1, 2)]
    inner = slice(15, len(t) - 15)
    batch.add(smooth[0][inner], smooth[1][inner], smooth[2][inner], effort[inner])
    stream = TorquePayloadStream(TorquePayloadIdentifier(links, BUNDLED_SENSOR_FRAME,
                                                         score_block=0), window=31)
    for k in range(len(t)):
        stream.push(t[k], q[k], effort[k])
        if k % 97 == 0:
            stream.process()
    stream.process()
    got, want = stream.identifier.statistics, batch.statistics
    assert stream.samples == len(t) - 30 == want.samples
    np.testing.assert_allclose(got.information, want.information, rtol=1e-9)
    np.testing.assert_allclose(got.moment, want.moment, rtol=1e-9, atol=1e-12)
    with pytest.raises(Exception, match="not after"):
        stream.push(t[-1], q[-1], effort[-1])


def _online_run(contacts: tuple, offset_from: float | None = None,
                seconds: float = 32.0, step_every: int = 12,
                switch_off: tuple[float, float] | None = None) -> tuple:
    """The live joint-torque estimator on the simulated arm at 250 Hz, a contact test every
    ``step_every`` states; an optional constant torque offset on joint 2 from ``offset_from``
    s (a stiction level left after a push); contact detection off between the two stamps of
    ``switch_off``."""
    from inertial_id.core.estimation.online import OnlineConfig
    from inertial_id.core.joint_torque.torque_payload import (
        TorquePayloadOnline,
        TorquePayloadStream,
    )
    from inertial_id.core.kinematics import SensorKinematics
    from inertial_id.core.simulation import PayloadSimulation

    payload = _payload(0.9, [0.0, 0.02, 0.08], [0.1, 0.1, 0.1])
    sim = PayloadSimulation(SensorKinematics(URDF, BUNDLED_SENSOR_FRAME),
                            FourierTrajectory.random(BUNDLED_HOME, seed=1), payload=payload,
                            contacts=contacts, coulomb_friction=0.0, viscous_friction=0.0)
    t = np.arange(0.0, seconds, 1 / 250)
    q, _ = sim.joint_states(t)
    effort = sim.joint_efforts(t)
    if offset_from is not None:
        effort[t >= offset_from, 1] += 1.0
    links = LinkTorqueModel.from_urdf(URDF)
    online = TorquePayloadOnline(
        TorquePayloadStream(TorquePayloadIdentifier(links, BUNDLED_SENSOR_FRAME), 31),
        OnlineConfig(min_samples=300, training_samples=300))
    events = []
    for k in range(t.size):
        online.stream.push(t[k], q[k], effort[k])
        if switch_off is not None:
            online.config = replace(online.config,
                                    monitor=not switch_off[0] <= t[k] < switch_off[1])
        if k % step_every == step_every - 1:
            step = online.step()
            events += [(round(float(step.times[-1]), 2), e) for e in step.events] if step else []
        if k % 250 == 249:
            online.solve()
    return online, events


def test_the_live_estimator_flags_a_push_and_keeps_it_out_of_the_estimate() -> None:
    from inertial_id.core.simulation import Contact

    online, events = _online_run((Contact(22.0, 1.5, (0.0, 40.0, 0.0)),))
    names = [e for _, e in events]
    assert names.count("contact_start") == 1 and names.count("contact_end") == 1, events
    start = next(t for t, e in events if e == "contact_start")
    assert 22.0 < start < 22.4
    assert abs(online.estimate.body.mass - 0.9) < 0.005  # the 40 N push would move it 0.1 kg
    assert online.verdicts.mass


def test_a_lasting_residual_level_is_relearned_as_the_new_baseline() -> None:
    online, events = _online_run((), offset_from=20.0, seconds=40.0)
    names = [e for _, e in events]
    assert "baseline_relearned" in names, events
    relearned = next(t for t, e in events if e == "baseline_relearned")
    assert 23.0 < relearned < 24.0  # relearn_after 3 s
    # Afterwards the monitor trains again, no contact stands at the end, the level change is
    # the joint's offset and the estimate did not absorb it (1 N m on joint 2 would bias it).
    assert names[-1] == "monitor_trained" and not online.monitor.in_contact, events
    np.testing.assert_allclose(online.offset, [0, 1.0, 0, 0, 0, 0], atol=0.05)
    assert abs(online.estimate.body.mass - 0.9) < 0.005


def test_a_contact_inside_one_long_chunk_stays_out_of_the_estimate() -> None:
    """Contact tests 0.4 s apart (a stalled executor): the push starts and ends inside one
    chunk, and must still be counted, reported and kept out."""
    from inertial_id.core.simulation import Contact

    online, events = _online_run((Contact(22.0, 0.25, (0.0, 60.0, 0.0)),), step_every=100)
    names = [e for _, e in events]
    assert names.count("contact_start") == 1 and names.count("contact_end") == 1, events
    assert online.contacts == 1
    assert abs(online.estimate.body.mass - 0.9) < 0.005


def test_switching_contact_detection_off_mid_contact_loses_nothing_after() -> None:
    from inertial_id.core.simulation import Contact

    online, _ = _online_run((Contact(22.0, 1.5, (0.0, 40.0, 0.0)),), seconds=30.0,
                            switch_off=(22.5, 30.0))
    # Detection off from 22.5 s: the rest of the push gets in (as configured), and every
    # later sample is used, none is held forever.
    assert online.monitor is None
    assert online.stream.samples > 250 * 29 - 200
    assert len(online._held) <= 1 and online._held[0][0].size < 0.3 * 250  # noqa: SLF001


def test_the_external_wrench_is_in_newtons_whatever_the_effort_units() -> None:
    """A 30 N push read through drive gains: the wrench comes back in N."""
    from inertial_id.core.estimation.online import OnlineConfig
    from inertial_id.core.joint_torque.torque_payload import (
        TorquePayloadOnline,
        TorquePayloadStream,
    )
    from inertial_id.core.simulation import Contact

    gains = {"shoulder_lift_joint": 12.5, "elbow_joint": 8.0}
    links = LinkTorqueModel.from_urdf(URDF, drive_gains=gains)
    online = TorquePayloadOnline(
        TorquePayloadStream(TorquePayloadIdentifier(links, BUNDLED_SENSOR_FRAME), 31),
        OnlineConfig())
    q, qd, qdd = FourierTrajectory.random(BUNDLED_HOME, seed=3)(np.linspace(0, 2, 9))
    push = Contact(0.0, 1.0, (0.0, 30.0, 0.0), (0.0, 0.0, 0.0)).wrench()
    jacobians = online.stream.identifier.kinematics.jacobians(q)
    torque = -np.einsum("nki,k->ni", jacobians, push)
    residual = torque / np.array([gains.get(n, 1.0) for n in links.model.joint_names])
    np.testing.assert_allclose(online._external_wrench(jacobians, residual),  # noqa: SLF001
                               np.tile(push, (9, 1)), atol=1e-9)


def test_efforts_in_drive_units_need_their_gains(links: LinkTorqueModel) -> None:
    payload = _payload(1.0, [0.0, 0.02, 0.06], [0.1, 0.1, 0.1])
    q, qd, qdd, effort = _recording(links, payload, 20.0, 8, noise=0.01)
    gains = {"shoulder_lift_joint": 12.5, "elbow_joint": 8.0}  # N m per ampere, say
    names = links.model.joint_names
    in_units = effort / np.array([gains.get(n, 1.0) for n in names])

    def mass(model: LinkTorqueModel) -> float:
        identifier = TorquePayloadIdentifier(model, BUNDLED_SENSOR_FRAME)
        identifier.add(q, qd, qdd, in_units)
        return identifier.solve().body.mass

    with_gains = LinkTorqueModel.from_urdf(URDF, joint_sigma=np.full(6, 0.01),
                                           drive_gains=gains)
    assert abs(mass(with_gains) - 1.0) < 0.02
    # Without the gains the efforts do not fit: no confident right answer (the conic solver
    # may even call the badly scaled problem infeasible).
    from inertial_id.core.errors import SolverError

    try:
        wrong = mass(LinkTorqueModel.from_urdf(URDF, joint_sigma=np.full(6, 0.01)))
    except SolverError:
        wrong = float("nan")
    assert not abs(wrong - 1.0) < 0.1
    with pytest.raises(Exception, match="drive gains"):
        LinkTorqueModel.from_urdf(URDF, drive_gains={"no_joint": 2.0})


def test_a_link_model_file_that_cannot_be_used_is_one_model_error(tmp_path) -> None:
    from inertial_id.core.errors import ModelError

    for name, text in (("list.yaml", "- 1\n- 2\n"), ("partial.yaml", "links: {}\n"),
                       ("broken.yaml", "links: [\n")):
        (tmp_path / name).write_text(text)
        with pytest.raises(ModelError, match=f"{name}: not a usable link model"):
            LinkTorqueModel.from_file(tmp_path / name, URDF)
    with pytest.raises(ModelError, match="missing.yaml: not a usable link model"):
        LinkTorqueModel.from_file(tmp_path / "missing.yaml", URDF)


def _cold_run(share: float, contacts: tuple = (), seconds: float = 30.0) -> list:
    """The live estimator on a simulated arm with 2 N m Coulomb friction that starts cold:
    ``share`` more friction fading with a 3 s time constant; its links model knows the warm
    friction. Returns the events with their stamps."""
    from inertial_id.core.estimation.online import OnlineConfig
    from inertial_id.core.joint_torque.torque_payload import (
        LinkTorqueModel,
        TorquePayloadIdentifier,
        TorquePayloadOnline,
        TorquePayloadStream,
    )
    from inertial_id.core.kinematics import SensorKinematics
    from inertial_id.core.simulation import FRICTION_VELOCITY_SCALE, PayloadSimulation

    sim = PayloadSimulation(SensorKinematics(URDF, BUNDLED_SENSOR_FRAME),
                            FourierTrajectory.random(BUNDLED_HOME, seed=1),
                            payload=_payload(0.9, [0.0, 0.02, 0.08], [0.1, 0.1, 0.1]),
                            contacts=contacts, coulomb_friction=2.0, viscous_friction=0.5)
    t = np.arange(0.0, seconds, 1 / 250)
    q, _ = sim.joint_states(t)
    _, qd, _ = sim.trajectory(t)
    warm = 2.0 * np.tanh(qd / FRICTION_VELOCITY_SCALE) + 0.5 * qd
    effort = sim.joint_efforts(t) + share * np.exp(-t / 3.0)[:, None] * warm
    plain = LinkTorqueModel.from_urdf(URDF)
    friction = FrictionModel("symmetric", smooth=True, velocity_threshold=FRICTION_VELOCITY_SCALE)
    links = replace(plain, friction=friction,
                    coefficients=np.tile([2.0, 0.5, 0.0], plain.model.n))
    online = TorquePayloadOnline(
        TorquePayloadStream(TorquePayloadIdentifier(links, BUNDLED_SENSOR_FRAME), 31),
        OnlineConfig(min_samples=300, training_samples=300))
    events = []
    for k in range(t.size):
        online.stream.push(t[k], q[k], effort[k])
        if k % 25 == 24:
            step = online.step()
            events += [(round(float(step.times[-1]), 2), e) for e in step.events] if step else []
        if k % 250 == 249:
            online.solve()
    return events


def test_the_live_monitor_takes_a_cold_start_for_no_contact_and_still_finds_a_push() -> None:
    """+30 % friction at the start fading with 3 s: no contact; a later push is found."""
    from inertial_id.core.simulation import Contact

    starts = [t for t, e in _cold_run(0.3) if e == "contact_start"]
    assert starts == []
    pushed = [t for t, e in _cold_run(0.3, (Contact(20.0, 1.0, (0.0, 30.0, 0.0)),))
              if e == "contact_start"]
    assert len(pushed) == 1 and 20.0 < pushed[0] < 20.4, pushed
