"""The URDF written from a modified-DH table (inertial_id.core.joint_torque.dh) and the Panda built
from it (bench/_panda_data.py): frames against the DH product, a known pose of the Panda, inertials
unchanged, the published models' torques reproduced on the generated model."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench import _panda_data as panda
from inertial_id.core.errors import ModelError
from inertial_id.core.joint_torque.dh import (
    DHRow,
    dh_transform,
    forward_kinematics,
    modified_dh_urdf,
)
from inertial_id.core.joint_torque.link_model import LinkModel
from inertial_id.core.kinematics import load_urdf_model
from inertial_id.core.parameters import BodyParameters

angles = st.floats(-np.pi, np.pi)


def _frames(urdf: str, q: np.ndarray) -> list[np.ndarray]:
    """Placements of every URDF link frame (pinocchio), in chain order."""
    model = load_urdf_model(urdf)
    data = model.createData()
    pin.framesForwardKinematics(model, data, q)
    return [data.oMf[model.getFrameId(f"panda_link{i}")].homogeneous for i in range(1, 9)]


@settings(max_examples=25, deadline=None)
@given(st.lists(angles, min_size=7, max_size=7))
def test_the_urdf_link_frames_are_the_dh_frames(q: list[float]) -> None:
    frames = _frames(panda.panda_urdf(), np.array(q))
    expected = forward_kinematics(panda.DH_ROWS, q)
    for got, want in zip(frames, expected, strict=True):
        np.testing.assert_allclose(got, want, atol=1e-9)


@given(st.floats(-1.0, 1.0), angles, st.floats(-1.0, 1.0), angles, angles)
def test_one_row_is_rot_x_trans_x_rot_z_trans_z(a: float, alpha: float, d: float,
                                                theta: float, q: float) -> None:
    def rot(axis: int, angle: float) -> np.ndarray:
        out = np.eye(4)
        out[:3, :3] = pin.utils.rotate("xyz"[axis], angle)
        return out

    def trans(axis: int, length: float) -> np.ndarray:
        out = np.eye(4)
        out[axis, 3] = length
        return out

    expected = rot(0, alpha) @ trans(0, a) @ rot(2, theta + q) @ trans(2, d)
    np.testing.assert_allclose(dh_transform(DHRow(a, alpha, d, theta), q), expected, atol=1e-12)


def test_the_panda_flange_at_zero_is_where_franka_puts_it() -> None:
    # Franka's documentation: at q = 0 the flange is 0.088 m ahead and 0.926 m above the
    # base, its z axis pointing down.
    flange = _frames(panda.panda_urdf(), np.zeros(7))[-1]
    np.testing.assert_allclose(flange[:3, 3], [0.088, 0.0, 0.926], atol=1e-9)
    np.testing.assert_allclose(flange[:3, 2], [0.0, 0.0, -1.0], atol=1e-9)


def test_the_inertials_arrive_unchanged_in_the_link_frames() -> None:
    bodies = panda.published_bodies(panda.P_HAT)
    model = LinkModel(panda.panda_urdf(bodies))
    np.testing.assert_allclose(model.cad, [b.pi for b in bodies], rtol=1e-9, atol=1e-12)


def test_limits_and_bodies_must_match_the_rows() -> None:
    rows = panda.DH_ROWS
    with pytest.raises(ModelError, match="bodies"):
        modified_dh_urdf("x", rows, [None] * 3)
    with pytest.raises(ModelError, match="limits"):
        modified_dh_urdf("x", rows, [None] * len(rows), effort_limits=[1.0])


def test_the_published_model_reproduces_the_recorded_torque_on_the_generated_urdf() -> None:
    """The generated frames and the tables' convention (inertia about the CoM in the DH frame)
    agree with the real robot: p_hat plus its friction explains the recorded torque of every
    joint to within a few tenths of a N m (a frame or convention error gives N m)."""
    if not (panda.DEFAULT_DATA_DIR / "trajectory_1").is_dir():
        pytest.skip("the Panda data set is not next to the repository")
    rec = panda.load_recording()
    model = LinkModel(panda.panda_urdf())
    rows = slice(200, -200, 10)
    pi = np.concatenate([b.pi for b in panda.published_bodies(panda.P_HAT)])
    predicted = (np.einsum("njp,p->nj", model.regressor(rec.q[rows], rec.qd[rows],
                                                        rec.qdd[rows]), pi)
                 + panda.published_friction(rec.qd[rows]))
    rms = np.sqrt(np.mean((rec.tau[rows] - predicted) ** 2, axis=0))
    spread = rec.tau[rows].std(axis=0)
    assert np.all(rms < 0.7), rms
    assert np.all(rms < 0.25 * spread), (rms, spread)


def test_a_massless_row_has_no_inertial() -> None:
    body = BodyParameters.from_mass_com_inertia(1.0, [0, 0, 0.1], [0.01, 0, 0, 0.01, 0, 0.01])
    urdf = modified_dh_urdf("arm", [DHRow(0.0, 0.0, 0.3), DHRow(0.1, 0.0, 0.0, fixed=True)],
                            [body, None])
    assert urdf.count("<inertial>") == 1 and 'type="fixed"' in urdf


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.floats(-0.5, 0.5), angles, st.floats(-0.5, 0.5), angles),
                min_size=1, max_size=4),
       st.lists(angles, min_size=4, max_size=4))
def test_any_rows_with_any_offsets_give_the_dh_frames(
        rows: list[tuple[float, float, float, float]], q: list[float]) -> None:
    table = [DHRow(a, alpha, d, theta) for a, alpha, d, theta in rows]
    urdf = modified_dh_urdf("arm", table, [None] * len(table))
    model = load_urdf_model(urdf)
    data = model.createData()
    pin.framesForwardKinematics(model, data, np.array(q[:len(table)]))
    expected = forward_kinematics(table, q[:len(table)])
    for i, want in enumerate(expected, start=1):
        got = data.oMf[model.getFrameId(f"arm_link{i}")].homogeneous
        np.testing.assert_allclose(got, want, atol=1e-9)


def test_the_authors_released_model_files_are_read_as_formulas() -> None:
    """The MATLAB model (Table III coefficients) evaluated from its files explains the recorded
    torque as well as p_hat does (a mistranslated operator or index gives N m), and its
    gravity is that of a rigid chain: zero torque on joint 1 (its axis is vertical)."""
    if not (panda.DEFAULT_DATA_DIR / "reference_model").is_dir():
        pytest.skip("the Panda data set is not next to the repository")
    rec = panda.load_recording()
    rows = slice(200, -200, 20)
    tau = panda.reverse_engineered_torques(rec.q[rows], rec.qd[rows], rec.qdd[rows])
    rms = np.sqrt(np.mean((rec.tau[rows] - tau) ** 2, axis=0))
    assert np.all(rms < 0.7), rms
    assert np.all(rms < 0.25 * rec.tau[rows].std(axis=0)), rms
    at_rest = panda.reverse_engineered_torques(rec.q[rows][:5], 0 * rec.qd[rows][:5],
                                               0 * rec.qdd[rows][:5])
    np.testing.assert_allclose(at_rest[:, 0] - panda.published_friction(
        0 * rec.qd[rows][:5])[:, 0], 0.0, atol=1e-9)
