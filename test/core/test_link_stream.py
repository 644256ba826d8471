"""The links stage without ROS (:class:`LinkStream`): joint states checked, kept for the
horizon, smoothed and fitted; the fit explains efforts made with heavier links than the URDF's,
better than the URDF; bad states are refused and counted, nothing kept is lost.

The efforts are the bundled arm's inverse dynamics with links 2 and 3 1.3 times the URDF's (all
ten parameters) plus viscous and Coulomb friction, along a Fourier trajectory.
"""

from __future__ import annotations

import numpy as np
import pytest

from inertial_id.core.errors import InertialIdError, SampleError
from inertial_id.core.joint_torque.friction import FrictionModel
from inertial_id.core.joint_torque.link_model import LinkModel
from inertial_id.core.joint_torque.link_selection import LinkOptions
from inertial_id.core.joint_torque.link_stream import (
    MIN_STATES,
    LinkStream,
    fit_links,
    link_model,
)
from inertial_id.core.parameters import BodyParameters
from inertial_id.core.samples import JointStateSample
from inertial_id.core.simulation import BUNDLED_HOME, FourierTrajectory, bundled_urdf_path

RATE = 100.0  # Hz
URDF = bundled_urdf_path()
OPTIONS = LinkOptions(method="sdp", prior_weight=1e-2, friction=FrictionModel())


@pytest.fixture(scope="module")
def model() -> LinkModel:
    return link_model(open(URDF).read())  # noqa: SIM115, PTH123 - read once


def _states(model: LinkModel, seconds: float, start: float = 100.0
            ) -> list[JointStateSample]:
    t = np.arange(0.0, seconds, 1.0 / RATE)
    q, qd, qdd = FourierTrajectory.random(BUNDLED_HOME, seed=4)(t)
    truth = model.cad.copy()
    truth[1:3] *= 1.3
    effort = model.inverse_dynamics(truth, q, qd, qdd) + 0.4 * qd + 0.2 * np.sign(qd)
    names = list(reversed(model.joint_names))  # the message's order is not the model's
    return [JointStateSample(start + t[k], names, q[k][::-1].copy(), np.zeros(0),
                             effort[k][::-1].copy()) for k in range(t.size)]


def test_a_fit_explains_the_efforts_better_than_the_urdf(model: LinkModel) -> None:
    states = _states(model, 8.0)
    stream = LinkStream(model, OPTIONS, window=15)
    for k, state in enumerate(states):
        assert stream.due()
        stream.add(state)
        if k == MIN_STATES - 2:
            assert stream.fit() is None  # too few states yet
    fit = stream.fit()
    assert fit is not None and stream.fits == 1 and stream.last is fit
    assert fit.problem.samples == len(states) - 14  # the filter's edges left out
    for pi in fit.own:
        assert BodyParameters.from_pi(pi).is_physically_consistent()
    doc = fit.document(OPTIONS.max_relative_std)
    assert doc["joints"] == model.joint_names and doc["all_links_consistent"]
    assert sorted(doc["links"]) == sorted(model.link_names)
    rms = np.array([doc["torque_rms"][n] for n in model.joint_names])
    rms_cad = np.array([doc["torque_rms_cad"][n] for n in model.joint_names])
    q = np.array([s.position[::-1] for s in states])
    effort = np.array([s.effort[::-1] for s in states])
    assert np.mean(rms / np.sqrt(np.mean(effort**2, axis=0))) < 0.05, rms
    assert rms[1] < 0.6 * rms_cad[1], (rms, rms_cad)
    # The stage fits what fit_links fits on its rows: the same document.
    rows = stream.rows()
    np.testing.assert_allclose(rows[0], q[7:-7], atol=1e-3)
    again = fit_links(model, rows, OPTIONS).document(OPTIONS.max_relative_std)
    assert again["torque_rms"] == pytest.approx(doc["torque_rms"], rel=1e-6)


def test_bad_states_are_refused_and_counted_and_a_restart_starts_over(model: LinkModel
                                                                      ) -> None:
    states = _states(model, 1.0)
    stream = LinkStream(model, OPTIONS, window=15, horizon=0.5)
    for state in states[:60]:
        stream.add(state)
    assert len(stream.states) == 51  # 0.5 s of the last 0.6 s at 100 Hz, both ends kept
    last = states[59]
    bad = [last._replace(stamp=last.stamp),  # not after the previous one
           last._replace(stamp=last.stamp + 0.01, position=last.position * np.nan),
           last._replace(stamp=last.stamp + 0.01, names=last.names[1:],
                         position=last.position[1:], effort=last.effort[1:])]
    for state in bad:
        with pytest.raises(SampleError):
            stream.add(state)
    assert stream.rejected == 3 and len(stream.states) == 51 and stream.stamp == last.stamp
    later = _states(model, 1.2, start=10.0)  # the stamps restarted (a bag played again)
    refused = 0
    for state in later:
        try:
            stream.add(state)
        except SampleError:  # until the new stream has lasted 1 s (the stamp policy)
            refused += 1
    assert 90 <= refused < len(later) and stream.rejected == 3 + refused
    kept = [s[0] for s in stream.states]
    assert min(kept) >= 10.0 and stream.stamp == later[-1].stamp
    assert len(kept) == len(later) - refused


def test_every_decimation_th_state_is_due(model: LinkModel) -> None:
    stream = LinkStream(model, OPTIONS, window=15, decimation=3)
    assert [stream.due() for _ in range(7)] == [True, False, False, True, False, False, True]
    assert stream.arrived == 7


def test_joints_that_do_not_move_are_refused() -> None:
    with pytest.raises(InertialIdError, match="not movable in the URDF: no_such_joint"):
        link_model(open(URDF).read(), ["no_such_joint"])  # noqa: SIM115, PTH123
