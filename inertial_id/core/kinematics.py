"""Sensor-frame kinematics from a URDF with pinocchio.

For each sample of joint positions, velocities and accelerations (the model's joint order,
radians / metres, SI derivatives) :class:`SensorKinematics` returns, in the sensor frame,

- the body twist ``v = [v_lin; w]`` (``pinocchio.LOCAL``), and
- the proper acceleration ``a_g = [a_lin - R^T g; alpha]``: pinocchio's spatial (not classical)
  body acceleration minus gravity, with ``R`` the sensor orientation in the base frame and ``g``
  gravity in the base frame (default ``[0, 0, -9.81]``). A sensor at rest has
  ``a_g = [R^T (0, 0, 9.81); 0]``: what an accelerometer reads.

When every joint between the base and the sensor frame has a fixed axis (revolute, continuous,
prismatic: the URDF's own one-DoF joints) both come from
:class:`inertial_id.core.chain.FixedAxisChain`, vectorised over the samples; otherwise from
pinocchio, one sample per call. The two agree to rounding (about 1e-15).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pinocchio as pin
from numpy.typing import ArrayLike, NDArray

from inertial_id.core.chain import FixedAxisChain
from inertial_id.core.errors import DuplicateJointError, ModelError, SampleError

DEFAULT_GRAVITY = (0.0, 0.0, -9.81)
CHAIN_MOTION_FROM = 16
"""Samples from which :meth:`SensorKinematics.compute` runs the vectorised chain rather than
pinocchio's per-sample loop. The chain's cost is nearly flat in N (its Python loop is over
the joints, about 150 us for the bundled 6-joint arm) and the loop's grows by about 12 us a
sample: the loop is cheaper for the live nodes' few samples a batch, the chain for
replay's thousands (measured crossover 16-20 samples, ``timeit`` on this 2-core machine)."""
CHAIN_JACOBIANS_FROM = 32
"""The same for :meth:`SensorKinematics.jacobians` (chain about 110 us, loop about 25 us
plus 2-3 us a sample; measured crossover 32-48)."""


def urdf_text(urdf: str) -> str:
    """URDF text from text or a file path (:class:`ModelError` naming an unreadable file)."""
    if urdf.lstrip().startswith("<"):
        return urdf
    path = Path(urdf).expanduser()
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ModelError(f"cannot read URDF file {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise ModelError(f"URDF file {path} is not UTF-8 text: {exc.reason} at byte "
                         f"{exc.start}") from exc


def load_urdf_model(urdf: str) -> pin.Model:
    """Build a pinocchio model from URDF text or a path to a URDF file.

    Raises :class:`ModelError` naming the file when it does not exist or does not parse.
    """
    text = urdf_text(urdf)
    source = "robot_description" if text is urdf else str(Path(urdf).expanduser())
    try:
        return pin.buildModelFromXML(text)
    except (RuntimeError, ValueError) as exc:
        raise ModelError(f"URDF from {source} does not parse: {exc}") from exc


def require_frame(model: pin.Model, name: str, role: str) -> int:
    """The id of frame ``name``; :class:`ModelError` naming the ``role`` and the model's link
    frames when the URDF has no such frame."""
    if not model.existFrame(name):
        kinds = (pin.FrameType.BODY, pin.FrameType.OP_FRAME, pin.FrameType.SENSOR)
        frames = sorted({f.name for f in model.frames if f.type in kinds})
        raise ModelError(f"{role} {name!r} is not in the URDF; frames: {', '.join(frames)}")
    return int(model.getFrameId(name))


def movable_joint_names(model: pin.Model) -> list[str]:
    """Names of the model's joints (pinocchio's order, the URDF tree depth-first), no universe."""
    return list(model.names)[1:]


class SensorKinematics:
    """Twist and proper acceleration of one frame (the F/T sensor) of a URDF model.

    ``locked_joints`` maps joint names to fixed positions; those joints are removed from the
    model (pinocchio's reduced model), so ``joint_names`` lists only the moving ones.

    :meth:`compute` and :meth:`jacobians` run vectorised over the samples (:attr:`batched`)
    when the joints supporting the sensor frame all have fixed axes and the batch is large
    enough to pay for it (:data:`CHAIN_MOTION_FROM`, :data:`CHAIN_JACOBIANS_FROM`), and call
    pinocchio once per sample otherwise; both give the same values.
    """

    def __init__(
        self,
        urdf: str,
        sensor_frame: str,
        gravity: ArrayLike = DEFAULT_GRAVITY,
        locked_joints: Mapping[str, float] | None = None,
    ) -> None:
        model = load_urdf_model(urdf)
        if locked_joints:
            model = _lock_joints(model, locked_joints)
        self.frame_id = require_frame(model, sensor_frame, "sensor frame")
        for joint in model.joints[1:]:
            if not (joint.nv == 1 and joint.nq in (1, 2)):
                raise ModelError(
                    f"joint type {joint.shortname()} is not supported (only 1-DoF joints)"
                )
        self.model = model
        self.data = model.createData()
        self.sensor_frame = sensor_frame
        self.gravity = np.asarray(gravity, dtype=float).reshape(3)
        self.joint_names = movable_joint_names(model)
        self._unbounded = np.array([j.nq == 2 for j in model.joints[1:]], dtype=bool)
        self._idx_q = np.array([j.idx_q for j in model.joints[1:]], dtype=int)
        self._plain = not self._unbounded.any()  # configuration = positions
        self._chain = FixedAxisChain.from_model(model, self.frame_id)

    @property
    def batched(self) -> bool:
        """Whether :meth:`compute` and :meth:`jacobians` can run vectorised over the samples
        (all joints supporting the sensor frame have fixed axes) rather than a pinocchio loop;
        they do for batches of :data:`CHAIN_MOTION_FROM` / :data:`CHAIN_JACOBIANS_FROM` samples
        or more."""
        return self._chain is not None

    @property
    def nv(self) -> int:
        """Number of joints (velocities)."""
        return int(self.model.nv)

    def configuration(self, positions: ArrayLike) -> NDArray[np.float64]:
        """pinocchio configuration(s) from joint positions, (nv,) -> (nq,) or (N, nv) ->
        (N, nq); continuous joints become (cos, sin)."""
        theta = np.asarray(positions, dtype=float)
        if self._plain:  # no continuous joint: the configuration is the positions
            return theta
        q = np.empty(theta.shape[:-1] + (self.model.nq,))
        bounded = ~self._unbounded
        q[..., self._idx_q[bounded]] = theta[..., bounded]
        start = self._idx_q[self._unbounded]
        q[..., start] = np.cos(theta[..., self._unbounded])
        q[..., start + 1] = np.sin(theta[..., self._unbounded])
        return q

    def sensor_pose(self, positions: ArrayLike) -> pin.SE3:
        """Placement of the sensor frame in the base frame."""
        pin.framesForwardKinematics(self.model, self.data, self.configuration(positions))
        return self.data.oMf[self.frame_id].copy()

    def jacobians(self, positions: ArrayLike) -> NDArray[np.float64]:
        """The sensor frame's Jacobians (N, 6, nv) for (N, nv) positions: ``[v; w] = J qd``
        in the sensor frame's axes (pinocchio ``LOCAL``). ``J^T w`` are the joint torques that
        balance a wrench ``w = [f; tau]`` the arm applies at the frame's origin."""
        q = np.atleast_2d(np.asarray(positions, dtype=float))
        if q.shape[1] != self.nv:
            raise SampleError(f"expected (N, {self.nv}) joint positions, got {q.shape}")
        if self._chain is not None and q.shape[0] >= CHAIN_JACOBIANS_FROM:
            return self._chain.jacobians(q)
        return self._jacobians_loop(q)

    def _jacobians_loop(self, q: NDArray[np.float64]) -> NDArray[np.float64]:
        """:meth:`jacobians` with pinocchio, one sample per call: (N, nv) -> (N, 6, nv)."""
        out = np.empty((q.shape[0], 6, self.nv))
        for k, configuration in enumerate(self.configuration(q)):
            out[k] = pin.computeFrameJacobian(self.model, self.data, configuration,
                                              self.frame_id, pin.LOCAL)
        return out

    def compute(
        self, positions: ArrayLike, velocities: ArrayLike, accelerations: ArrayLike
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Twist and proper acceleration of the sensor frame for a batch of samples.

        Inputs are (N, nv) or (nv,) joint positions (rad or m), velocities and accelerations
        in the model's joint order; outputs are (N, 6) or (6,), ``[linear; angular]`` in the
        sensor frame: the twist (m/s, rad/s) and the proper acceleration (m/s^2, rad/s^2).
        """
        q = np.asarray(positions, dtype=float)
        single = q.ndim == 1
        q, qd, qdd = (np.atleast_2d(np.asarray(x, dtype=float)) for x in
                      (positions, velocities, accelerations))
        if not (q.shape == qd.shape == qdd.shape and q.shape[1] == self.nv):
            raise SampleError(
                f"expected (N, {self.nv}) joint arrays, got {q.shape}, {qd.shape}, {qdd.shape}"
            )
        if self._chain is not None and q.shape[0] >= CHAIN_MOTION_FROM:
            twist, proper = self._chain.motion(q, qd, qdd, self.gravity)
        else:
            twist, proper = self._compute_loop(q, qd, qdd)
        return (twist[0], proper[0]) if single else (twist, proper)

    def compute_one(self, position: NDArray[np.float64], velocity: NDArray[np.float64],
                    acceleration: NDArray[np.float64]) -> tuple[pin.Motion, pin.Motion]:
        """:meth:`compute` of one sample (nv,) each, with pinocchio and the least Python per
        call (for a stream at sensor rate): the twist and the proper acceleration as
        ``pin.Motion`` in the sensor frame (``LOCAL``)."""
        q = self.configuration(position)
        model, data, fid = self.model, self.data, self.frame_id
        pin.forwardKinematics(model, data, q, velocity, acceleration)
        rotation = pin.updateFramePlacement(model, data, fid).rotation
        twist = pin.getFrameVelocity(model, data, fid, pin.LOCAL)
        proper = pin.getFrameAcceleration(model, data, fid, pin.LOCAL)
        proper.linear = proper.linear - rotation.T @ self.gravity
        return twist, proper

    def _compute_loop(
        self, q: NDArray[np.float64], qd: NDArray[np.float64], qdd: NDArray[np.float64]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """:meth:`compute` with pinocchio, one sample per call, on (N, nv) arrays: twist and
        proper acceleration (N, 6) ``[linear; angular]`` in the sensor frame (``LOCAL``)."""
        n = q.shape[0]
        twist = np.empty((n, 6))
        proper = np.empty((n, 6))
        rotation = np.empty((n, 3, 3))
        model, data, fid = self.model, self.data, self.frame_id
        configurations = self.configuration(q)
        for k in range(n):
            pin.forwardKinematics(model, data, configurations[k], qd[k], qdd[k])
            rotation[k] = pin.updateFramePlacement(model, data, fid).rotation
            twist[k] = pin.getFrameVelocity(model, data, fid, pin.LOCAL).vector
            proper[k] = pin.getFrameAcceleration(model, data, fid, pin.LOCAL).vector
        proper[:, :3] -= np.einsum("nji,j->ni", rotation, self.gravity)
        return twist, proper


def _lock_joints(model: pin.Model, locked: Mapping[str, float]) -> pin.Model:
    """Reduced model with the named joints fixed at the given positions."""
    unknown = [name for name in locked if not model.existJointName(name)]
    if unknown:
        raise ModelError(f"locked joints not in the URDF: {', '.join(unknown)}")
    q_ref = pin.neutral(model)
    ids = []
    for name, value in locked.items():
        joint_id = model.getJointId(name)
        joint = model.joints[joint_id]
        if joint.nq == 2:
            q_ref[joint.idx_q : joint.idx_q + 2] = np.cos(value), np.sin(value)
        else:
            q_ref[joint.idx_q] = value
        ids.append(joint_id)
    return pin.buildReducedModel(model, ids, q_ref)


class JointMapper:
    """Maps ``sensor_msgs/JointState`` arrays to the model's joint order.

    Extra joints and any order in the message are fine; a model joint missing from the message
    is a :class:`SampleError` naming it, and one listed twice with different values a
    :class:`DuplicateJointError`. At most ``MAX_CACHED`` name lists are remembered.
    """

    MAX_CACHED = 64

    def __init__(self, joint_names: Sequence[str]) -> None:
        self.joint_names = list(joint_names)
        self._cache: dict[tuple[str, ...], tuple[NDArray[np.intp], NDArray[np.intp]]] = {}

    def _lookup(self, message_names: Sequence[str]) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
        """Index of each model joint in the message, and the indices of later duplicates of
        model joints with the index of the first occurrence they must agree with (2, k)."""
        key = tuple(message_names)
        found = self._cache.get(key)
        if found is None:
            first: dict[str, int] = {}
            repeats = []
            model = set(self.joint_names)
            for i, name in enumerate(key):
                if name in first and name in model:
                    repeats.append((first[name], i))
                first.setdefault(name, i)
            missing = [name for name in self.joint_names if name not in first]
            if missing:
                raise SampleError(f"joint state lacks joints {', '.join(missing)}")
            found = (np.array([first[name] for name in self.joint_names], dtype=np.intp),
                     np.array(repeats, dtype=np.intp).reshape(-1, 2).T)
            if len(self._cache) >= self.MAX_CACHED:
                self._cache.clear()
            self._cache[key] = found
        return found

    def indices(self, message_names: Sequence[str]) -> NDArray[np.intp]:
        """Index into the message arrays for each model joint (first occurrence)."""
        return self._lookup(message_names)[0]

    def has_duplicates(self, message_names: Sequence[str]) -> bool:
        """Whether a model joint is listed more than once."""
        return bool(self._lookup(message_names)[1].size)

    def select(self, message_names: Sequence[str], values: Sequence[float]) -> NDArray[np.float64]:
        """The model-ordered values of one JointState array (position, velocity, effort)."""
        if len(values) != len(message_names):
            raise SampleError(f"{len(values)} values for {len(message_names)} joint names")
        index, repeats = self._lookup(message_names)
        array = np.asarray(values, dtype=float)
        if repeats.size and not np.array_equal(array[repeats[0]], array[repeats[1]]):
            names = sorted({message_names[i] for i in repeats[0]})
            raise DuplicateJointError(f"joints listed twice with different values: "
                                      f"{', '.join(names)}")
        return array[index]
