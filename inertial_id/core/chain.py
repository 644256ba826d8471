"""Sensor-frame kinematics vectorised over samples, for chains of fixed-axis joints.

pinocchio's Python API computes one configuration per call (a few microseconds each); replaying
a recording needs tens of thousands per minute of data. :class:`FixedAxisChain` runs the same
recursions as ``pinocchio.forwardKinematics`` / ``computeFrameJacobian`` with numpy over all N
samples at once, looping only over the joints that support the frame (root to the frame's
parent joint). It applies when every one of those joints moves along or about one axis fixed in
its joint frame: revolute (``RX/RY/RZ``, ``RevoluteUnaligned``), unbounded revolute
(``RUBX/RUBY/RUBZ``, ``RevoluteUnboundedUnaligned``) and prismatic (``PX/PY/PZ``,
``PrismaticUnaligned``); :meth:`FixedAxisChain.from_model` returns ``None`` otherwise and the
caller keeps pinocchio's per-sample loop.

Conventions (pinocchio's): spatial motion vectors are ``[linear; angular]``, SI units (m/s,
rad/s, m/s^2, rad/s^2); a placement ``M = (R, p)`` maps child coordinates to parent ones and
``M.actInv`` expresses a parent-frame motion in the child frame::

    M.actInv([v; w]) = [R^T (v - p x w); R^T w]

For each supporting joint i, ``X_i = jointPlacement_i * joint_motion(q_i)`` and, in joint i's
frame (``LOCAL``)::

    v_i = X_i.actInv(v_parent) + S_i qd_i
    a_i = X_i.actInv(a_parent) + S_i qdd_i + v_i x (S_i qd_i)

with ``S_i = [0; u]`` (revolute about the unit axis u) or ``[u; 0]`` (prismatic along u).
Starting from ``v_0 = 0`` and ``a_0 = [-g; 0]`` gives the frame's proper acceleration
``a - [R^T g; 0]`` directly (the linear part of ``a_0`` only ever passes through ``actInv``).

Each joint's vectors are held in its *axis coordinates*: the joint frame turned by a constant
rotation ``A_i`` with ``A_i e_z = u``. There every joint moves along or about z, and the
constant parts (``A_i``, the joint placements, the frame placement) fold into one small matrix
product per joint over all samples. Arrays are sample-major, one 3-vector as the 4 floats
``[x, y, z, 0]`` (or ``[x, y, z, 1]`` for a point): viewed as complex numbers that is
``[x + i y, z]``, so turning every vector by ``q`` about z is one complex product by
``exp(i q)`` and ``e_z x v`` one by ``i``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin
from numpy.typing import NDArray

REVOLUTE_JOINTS = frozenset({
    "JointModelRX", "JointModelRY", "JointModelRZ", "JointModelRevoluteUnaligned",
    "JointModelRUBX", "JointModelRUBY", "JointModelRUBZ",
    "JointModelRevoluteUnboundedUnaligned",
})
PRISMATIC_JOINTS = frozenset({
    "JointModelPX", "JointModelPY", "JointModelPZ", "JointModelPrismaticUnaligned",
})


def skew(u: NDArray[np.float64]) -> NDArray[np.float64]:
    """The cross-product matrix ``[u]x`` with ``[u]x y = u x y``."""
    return np.array([[0.0, -u[2], u[1]], [u[2], 0.0, -u[0]], [-u[1], u[0], 0.0]])


def act_inv_matrix(rotation: NDArray[np.float64], translation: NDArray[np.float64]
                   ) -> NDArray[np.float64]:
    """The 6x6 matrix of ``SE3(rotation, translation).actInv`` on ``[linear; angular]``."""
    out = np.zeros((6, 6))
    out[:3, :3] = out[3:, 3:] = rotation.T
    out[:3, 3:] = -rotation.T @ skew(translation)
    return out


def block2(m: NDArray[np.float64]) -> NDArray[np.float64]:
    """``diag(m, m)``: a 3x3 map applied to both halves of a 6-vector."""
    out = np.zeros((6, 6))
    out[:3, :3] = out[3:, 3:] = m
    return out


def axis_frame(u: NDArray[np.float64]) -> NDArray[np.float64]:
    """A rotation ``A`` with ``A e_z = u`` (the identity when u is already z)."""
    z = np.asarray(u, dtype=float) / np.linalg.norm(u)
    if np.array_equal(z, [0.0, 0.0, 1.0]):
        return np.eye(3)
    helper = np.eye(3)[int(np.argmin(np.abs(z)))]
    x = np.cross(helper, z)
    x /= np.linalg.norm(x)
    return np.column_stack((x, np.cross(z, x), z))


def motion_subspace(joint: pin.JointModel) -> NDArray[np.float64]:
    """The one-DoF joint's motion subspace ``S`` (6,), ``[linear; angular]`` in its frame."""
    joint_data = joint.createData()
    neutral = np.array([1.0, 0.0]) if joint.nq == 2 else np.zeros(1)
    joint.calc(joint_data, neutral)
    return np.array(joint_data.S, dtype=float).reshape(6)


def unit_phasors(angles: NDArray[np.float64]) -> NDArray[np.complex128]:
    """``exp(i angles) = cos + i sin`` (angles in rad) from ``t = tan(angles / 2)``: one
    ``tan`` is several times faster than numpy's float64 ``sin`` and ``cos``, and the rational
    forms ``cos = (1 - t^2) / (1 + t^2)``, ``sin = 2 t / (1 + t^2)`` agree with them to a few
    ulp (also at ``angles = pi``, where t is about 1e16)."""
    t = np.tan(0.5 * angles)
    t2 = t * t
    scale = 1.0 / (1.0 + t2)
    out = np.empty(angles.shape, dtype=np.complex128)
    out.real = (1.0 - t2) * scale
    out.imag = 2.0 * t * scale
    return out


def padded(matrix: NDArray[np.float64], blocks: int) -> NDArray[np.float64]:
    """A (3 blocks, 3 blocks) matrix spread over (4 blocks, 4 blocks), each 3-vector block
    followed by a zero pad slot (the layout of this module's arrays)."""
    index = np.array([4 * b + k for b in range(blocks) for k in range(3)])
    out = np.zeros((4 * blocks, 4 * blocks))
    out[np.ix_(index, index)] = matrix
    return out


@dataclass(frozen=True)
class ChainJoint:
    """One joint supporting the frame.

    ``column`` is its column in (N, nv) joint arrays (``idx_v``); ``revolute`` tells a
    revolute (angle in rad) from a prismatic joint (position in m); ``axis`` is its unit axis u
    in its own frame; ``rotation`` and ``translation`` its ``jointPlacement`` (its frame in its
    parent joint's frame at q = 0).
    """

    column: int
    revolute: bool
    axis: NDArray[np.float64]
    rotation: NDArray[np.float64]
    translation: NDArray[np.float64]


class FixedAxisChain:
    """Twist, proper acceleration and Jacobian of one frame, for N samples at once.

    Joint arrays are (N, nv) in the model's velocity order (``idx_v``): angles in rad for
    revolute joints (also unbounded ones, not their cos/sin), positions in m for prismatic ones,
    and their first and second time derivatives. Joints that do not support the frame are
    ignored (their Jacobian columns are zero).
    """

    def __init__(self, joints: list[ChainJoint], frame_placement: pin.SE3, nv: int) -> None:
        self.joints = joints
        self.nv = nv
        self.columns = np.array([j.column for j in joints], dtype=np.intp)
        self._revolute = np.array([j.revolute for j in joints], dtype=bool)
        frames = [axis_frame(j.axis) for j in joints]
        # The parent's axis coordinates (the world's for the root joint).
        before = [np.eye(3), *frames][:len(frames)]
        last = frames[-1] if frames else np.eye(3)
        # Root to frame, on rows [v; 0; w; 0]: from the parent's axis coordinates to the
        # joint's, before its motion (right-multiplied, hence transposed).
        self._down = [
            padded(block2(a.T) @ act_inv_matrix(j.rotation, j.translation) @ block2(b), 2).T
            for j, a, b in zip(joints, frames, before, strict=True)
        ]
        to_frame = act_inv_matrix(frame_placement.rotation, frame_placement.translation)
        self._to_frame = padded(to_frame @ block2(last), 2).T[:, [0, 1, 2, 4, 5, 6]]
        # Frame to root, on the columns of [G | h] (the frame's pose in the joint's axis
        # coordinates, as rows [x, y, z, w]): the parent's is up @ (joint motion [G | h]).
        self._up = []
        for j, a, b in zip(joints, frames, before, strict=True):
            up = np.eye(4)
            up[:3, :3] = b.T @ j.rotation @ a
            up[:3, 3] = b.T @ j.translation
            self._up.append(up.T)
        self._frame_pose = np.zeros((4, 4))
        self._frame_pose[:3, :3] = (last.T @ frame_placement.rotation).T
        self._frame_pose[3, :3] = last.T @ frame_placement.translation
        self._frame_pose[3, 3] = 1.0

    @classmethod
    def from_model(cls, model: pin.Model, frame_id: int) -> FixedAxisChain | None:
        """The chain supporting frame ``frame_id``, or ``None`` when one of its joints is not a
        fixed-axis one-DoF joint (free-flyer, spherical, planar, helical, mimic, composite...)."""
        joints: list[ChainJoint] = []
        joint_id = int(model.frames[frame_id].parentJoint)
        while joint_id > 0:
            joint = model.joints[joint_id]
            name = joint.shortname()
            if name not in REVOLUTE_JOINTS and name not in PRISMATIC_JOINTS:
                return None
            revolute = name in REVOLUTE_JOINTS
            subspace = motion_subspace(joint)
            axis, other = (subspace[3:], subspace[:3]) if revolute else (subspace[:3], subspace[3:])
            if np.any(other != 0.0) or not np.isclose(np.linalg.norm(axis), 1.0, atol=1e-12):
                return None
            placement = model.jointPlacements[joint_id]
            joints.append(ChainJoint(column=int(joint.idx_v), revolute=revolute, axis=axis,
                                     rotation=placement.rotation.copy(),
                                     translation=placement.translation.copy()))
            joint_id = int(model.parents[joint_id])
        return cls(joints[::-1], model.frames[frame_id].placement, int(model.nv))

    def motion(
        self,
        positions: NDArray[np.float64],
        velocities: NDArray[np.float64],
        accelerations: NDArray[np.float64],
        gravity: NDArray[np.float64],
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Body twist and proper acceleration of the frame, each (N, 6) ``[linear; angular]``
        in the frame's axes (pinocchio ``LOCAL``; m/s, rad/s; m/s^2, rad/s^2).

        The acceleration is pinocchio's spatial (not classical) one minus ``[R^T g; 0]``, with
        R the frame's orientation in the world and ``gravity`` g (3,) in world axes (m/s^2).
        """
        n = positions.shape[0]
        q = positions[:, self.columns].T  # (m, N)
        qd = velocities[:, self.columns].T
        qdd = accelerations[:, self.columns].T
        turn_back = unit_phasors(-q[self._revolute])  # Rz(q)^T as a complex product
        # state[0] is the velocity, state[1] the acceleration; rows [v, 0, w, 0] (2, N, 8).
        state = np.zeros((2, n, 8))
        state[1, :, :3] = -np.asarray(gravity, dtype=float)
        turn = 0
        for i, joint in enumerate(self.joints):
            state = (state.reshape(2 * n, 8) @ self._down[i]).reshape(2, n, 8)
            pairs = state.view(np.complex128)  # (2, N, 4): [vx + i vy, vz, wx + i wy, wz]
            if joint.revolute:
                pairs[:, :, 0::2] *= turn_back[turn][:, None]
                turn += 1
                state[0, :, 6] += qd[i]
                # v_i x (S qd) = qd (v x e_z on both halves) = qd (vy, -vx, 0) = -i qd (vx + i vy).
                pairs[1, :, 0::2] -= (1j * qd[i])[:, None] * pairs[0, :, 0::2]
                state[1, :, 6] += qdd[i]
            else:
                # (I, q e_z).actInv: v -= q e_z x w, i.e. vx + i vy -= i q (wx + i wy).
                pairs[:, :, 0] -= (1j * q[i]) * pairs[:, :, 2]
                state[0, :, 2] += qd[i]
                # v_i x (S qd) = [qd w x e_z; 0]: ax + i ay -= i qd (wx + i wy).
                pairs[1, :, 0] -= (1j * qd[i]) * pairs[0, :, 2]
                state[1, :, 2] += qdd[i]
        out = state.reshape(2 * n, 8) @ self._to_frame  # (2N, 6)
        return out[:n], out[n:]

    def jacobians(self, positions: NDArray[np.float64]) -> NDArray[np.float64]:
        """The frame's Jacobians (N, 6, nv), pinocchio ``LOCAL``: ``[v; w] = J qd`` in the
        frame's axes (m/s and rad/s per rad/s or m/s of each joint).

        The column of joint k is ``M_kf.actInv(S_k)`` with ``M_kf`` the frame's pose in joint
        k's frame; in k's axis coordinates ``M_kf = [G | h]`` and the column is
        ``[G^T (e_z x h); G^T e_z]`` (revolute) or ``[G^T e_z; 0]`` (prismatic). ``M_kf`` is
        built from the frame down to the root: ``M_parent,f = X_k M_kf``.
        """
        n = positions.shape[0]
        out = np.zeros((n, 6, self.nv))
        q = positions[:, self.columns].T  # (m, N)
        turn = unit_phasors(q[self._revolute])
        turns = np.cumsum(self._revolute) - 1
        # The columns G0, G1, G2 and h of [G | h], each as [x, y, z, w] (4, N, 4).
        pose = np.repeat(self._frame_pose[:, None, :], n, axis=1)
        for i in range(len(self.joints) - 1, -1, -1):
            joint = self.joints[i]
            pairs = pose.view(np.complex128)  # (4, N, 2): [x + i y, z + i w]
            column = joint.column
            # G^T e_z is G's z row; G^T (e_z x h) = hx G_y - hy G_x = Im(conj(hx + i hy) G_xy).
            if joint.revolute:
                out[:, :3, column] = (pairs[3, :, 0].conj() * pairs[:3, :, 0]).imag.T
                out[:, 3:, column] = pose[:3, :, 2].T
            else:
                out[:, :3, column] = pose[:3, :, 2].T
            if i == 0:
                break
            if joint.revolute:
                pairs[:, :, 0] *= turn[turns[i]]
            else:
                pose[3, :, 2] += q[i]
            pose = (pose.reshape(4 * n, 4) @ self._up[i]).reshape(4, n, 4)
        return out
