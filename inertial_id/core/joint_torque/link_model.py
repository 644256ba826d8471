"""The chain model of link identification: a URDF's moving joints as pinocchio bodies, their
CAD parameters, the joint-torque regressor, and the base parameters.

Conventions (see :mod:`inertial_id.core.joint_torque.links` for the whole joint model): each moving
joint
``i`` carries one rigid **body**, its URDF child link plus everything rigidly attached to it;
its parameters ``pi_i`` are in the package order about the origin of joint ``i``'s frame, in
its axes, SI units; the standard vector stacks them in pinocchio's joint order. Base
parameters (Gautier's numerical method): ``Y = Y_b K``, ``pi_b = K pi``.
"""


from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pinocchio as pin
import scipy.linalg
from numpy.typing import ArrayLike, NDArray

from inertial_id.core.errors import ModelError, SampleError
from inertial_id.core.kinematics import SensorKinematics, load_urdf_model, urdf_text
from inertial_id.core.parameters import (
    PI_NAMES,
    BodyParameters,
    from_pinocchio_order,
    skew,
    symmetric_from_vector,
    to_pinocchio_order,
    vector_from_symmetric,
)

N_PI = 10
# Column permutation pinocchio -> package order: ours[..., i] = pinocchio's[..., _FROM_PIN[i]].
_FROM_PIN = from_pinocchio_order(np.arange(N_PI)).astype(int)


# --------------------------------------------------------------------------- the chain model


def _lock_positions(
    model: pin.Model, joints: Sequence[str] | None, locked: Mapping[str, float] | None
) -> dict[str, float]:
    """Positions of the joints to lock: ``locked``, plus every joint not in ``joints`` at 0
    (clipped into its limits)."""
    lock = dict(locked or {})
    if joints is None:
        return lock
    names = list(model.names)[1:]
    missing = [j for j in joints if j not in names]
    if missing:
        raise ModelError(f"joints not in the URDF: {', '.join(missing)}")
    for name in names:
        if name in joints or name in lock:
            continue
        joint = model.joints[model.getJointId(name)]
        value = 0.0
        if joint.nq == 1:
            lo, hi = model.lowerPositionLimit[joint.idx_q], model.upperPositionLimit[joint.idx_q]
            if lo <= hi:
                value = float(np.clip(0.0, lo, hi))
        lock[name] = value
    return lock


def _floats(text: str | None, default: Sequence[float]) -> list[float]:
    return [float(v) for v in text.split()] if text else list(default)


def urdf_link_inertials(text: str) -> dict[str, BodyParameters]:
    """Each URDF link's ``<inertial>`` as parameters about the **link frame origin**, link axes."""
    root = ET.fromstring(text)
    out: dict[str, BodyParameters] = {}
    for link in root.iter("link"):
        inertial = link.find("inertial")
        if inertial is None or inertial.find("mass") is None:
            continue
        origin = inertial.find("origin")
        xyz = _floats(origin.get("xyz") if origin is not None else None, (0, 0, 0))
        rpy = _floats(origin.get("rpy") if origin is not None else None, (0, 0, 0))
        mass = float(inertial.find("mass").get("value", "0"))
        tensor = inertial.find("inertia")
        keys = ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")
        values = [float(tensor.get(k, "0")) if tensor is not None else 0.0 for k in keys]
        inertia = symmetric_from_vector(values)
        rotation = pin.rpy.rpyToMatrix(*rpy)
        out[link.get("name")] = BodyParameters.from_mass_com_inertia(
            mass, xyz, rotation @ inertia @ rotation.T)
    return out


def transform_parameters(pi: ArrayLike, placement: pin.SE3) -> NDArray[np.float64]:
    """``pi`` of a body given in frame B, expressed in frame A, with ``placement`` = A_M_B."""
    body = BodyParameters.from_pi(pi)
    r, p = placement.rotation, placement.translation
    m, h = body.mass, r @ body.first_moment
    # I_A = R I_B R^T - m [p]x[p]x - [p]x[h']x - [h']x[p]x  with h' = R h_B (in A's axes).
    px, hx = skew(p), skew(h)
    inertia = r @ body.inertia_origin @ r.T - m * px @ px - px @ hx - hx @ px
    return np.concatenate(([m], h + m * p, vector_from_symmetric(inertia)))


class LinkModel:
    """A URDF chain for link identification: pinocchio model, CAD parameters, limits.

    ``joints`` are the moving joints (every other joint is locked at 0, clipped into its
    limits, unless ``locked`` gives its position); with ``joints=None`` only ``locked`` joints
    are locked. Joint order is pinocchio's (depth-first over the URDF tree), see
    :attr:`joint_names`; only 1-DoF joints are supported.
    """

    def __init__(
        self,
        urdf: str,
        joints: Sequence[str] | None = None,
        locked: Mapping[str, float] | None = None,
        sensor_frame: str = "universe",
    ) -> None:
        self.urdf = urdf_text(urdf)
        full = load_urdf_model(self.urdf)
        self.locked = _lock_positions(full, joints, locked)
        # SensorKinematics builds the reduced model and maps positions to configurations.
        self.kinematics = SensorKinematics(self.urdf, sensor_frame, locked_joints=self.locked)
        self.model: pin.Model = self.kinematics.model
        self.data = self.model.createData()
        self.joint_names: list[str] = list(self.kinematics.joint_names)
        self.n = len(self.joint_names)
        self.cad = np.array([BodyParameters.from_pinocchio(self.model.inertias[i]).pi
                             for i in range(1, self.model.njoints)])
        self.link_names, self.link_placements = self._child_links()
        self.own_cad, self.attachments = self._own_and_attached()
        self._idx_q = [j.idx_q for j in self.model.joints[1:]]
        self._unbounded = [j.nq == 2 for j in self.model.joints[1:]]

    # -- structure -----------------------------------------------------------------------

    def _child_links(self) -> tuple[list[str], list[pin.SE3]]:
        """URDF child link of each moving joint and its placement in the joint frame."""
        root = ET.fromstring(self.urdf)
        child = {j.get("name"): j.find("child").get("link") for j in root.iter("joint")
                 if j.find("child") is not None}
        names, placements = [], []
        for name in self.joint_names:
            link = child.get(name)
            if link is None or not self.model.existFrame(link):
                raise ModelError(f"joint {name} has no child link frame in the model")
            frame = self.model.frames[self.model.getFrameId(link)]
            names.append(link)
            placements.append(frame.placement.copy())
        return names, placements

    def _own_and_attached(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """CAD parameters of each child link alone and of the rest of its body (joint frame)."""
        inertials = urdf_link_inertials(self.urdf)
        own = np.zeros((self.n, N_PI))
        for i, (link, placement) in enumerate(zip(self.link_names, self.link_placements,
                                                  strict=True)):
            if link in inertials:
                own[i] = transform_parameters(inertials[link].pi, placement)
        return own, self.cad - own

    @property
    def parameter_names(self) -> list[str]:
        """``joint.m``, ``joint.mcx`` ... for the standard vector (10 per joint)."""
        return [f"{j}.{p}" for j in self.joint_names for p in PI_NAMES]

    @property
    def position_limits(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Lower and upper position limits per joint (continuous joints: -pi, pi)."""
        lo = np.array([-np.pi if u else self.model.lowerPositionLimit[i]
                       for i, u in zip(self._idx_q, self._unbounded, strict=True)])
        hi = np.array([np.pi if u else self.model.upperPositionLimit[i]
                       for i, u in zip(self._idx_q, self._unbounded, strict=True)])
        return lo, hi

    @property
    def velocity_limits(self) -> NDArray[np.float64]:
        """Velocity limit per joint (rad/s or m/s)."""
        return np.asarray(self.model.velocityLimit, dtype=float).copy()

    @property
    def effort_limits(self) -> NDArray[np.float64]:
        """Effort limit per joint (N m or N)."""
        return np.asarray(self.model.effortLimit, dtype=float).copy()

    def order(self, names: Sequence[str]) -> NDArray[np.intp]:
        """Index into ``names`` of each model joint (:class:`SampleError` when one is missing)."""
        position = {n: i for i, n in enumerate(names)}
        missing = [n for n in self.joint_names if n not in position]
        if missing:
            raise SampleError(f"data lack the joints {', '.join(missing)}")
        return np.array([position[n] for n in self.joint_names], dtype=np.intp)

    # -- dynamics --------------------------------------------------------------------------

    def regressor(self, q: ArrayLike, qd: ArrayLike, qdd: ArrayLike) -> NDArray[np.float64]:
        """Joint-torque regressor ``Y`` with ``tau = Y pi``: (N, nv) inputs -> (N, nv, 10 n).

        Columns in the package order per body, parameters about each joint frame's origin.
        """
        q, qd, qdd = self.batch(q, qd, qdd)
        out = np.empty((q.shape[0], self.n, N_PI * self.n))
        for k in range(q.shape[0]):
            y = pin.computeJointTorqueRegressor(self.model, self.data,
                                                self.kinematics.configuration(q[k]), qd[k], qdd[k])
            out[k] = y.reshape(self.n, self.n, N_PI)[:, :, _FROM_PIN].reshape(self.n, -1)
        return out

    def inverse_dynamics(self, parameters: ArrayLike, q: ArrayLike, qd: ArrayLike,
                         qdd: ArrayLike) -> NDArray[np.float64]:
        """Joint torques by pinocchio's RNEA with ``parameters`` (n, 10) -> (N, nv)."""
        q, qd, qdd = self.batch(q, qd, qdd)
        model = self.model.copy()
        for i, pi in enumerate(np.asarray(parameters, dtype=float).reshape(self.n, N_PI)):
            model.inertias[i + 1] = pin.Inertia.FromDynamicParameters(to_pinocchio_order(pi))
        data = model.createData()
        return np.array([pin.rnea(model, data, self.kinematics.configuration(a), b, c).copy()
                         for a, b, c in zip(q, qd, qdd, strict=True)])

    def random_states(self, count: int, seed: int = 0) -> tuple[NDArray[np.float64], ...]:
        """Random positions (within limits), velocities and accelerations, three (N, nv)."""
        rng = np.random.default_rng(seed)
        lo, hi = self.position_limits
        q = rng.uniform(lo, hi, (count, self.n))
        scale = np.where(self.velocity_limits > 0, self.velocity_limits, 1.0)
        return q, rng.normal(size=(count, self.n)) * scale, rng.normal(size=(count, self.n)) * 3

    def batch(self, *arrays: ArrayLike) -> list[NDArray[np.float64]]:
        """The arrays as (N, nv) floats (:class:`SampleError` on a shape mismatch)."""
        out = [np.atleast_2d(np.asarray(a, dtype=float)) for a in arrays]
        if any(a.shape != out[0].shape or a.shape[1] != self.n for a in out):
            raise SampleError(f"expected (N, {self.n}) joint arrays, got "
                              f"{', '.join(str(a.shape) for a in out)}")
        return out


# ------------------------------------------------------------------------ base parameters


@dataclass(frozen=True)
class BaseParameters:
    """Base parameters ``pi_b = K pi`` (Gautier's numerical method via pivoted QR).

    ``independent`` are the standard columns kept (ascending); the base regressor is
    ``Y[..., independent]`` and ``Y = Y_b K`` exactly. ``regrouping`` is ``K`` (n_b, n_s).
    """

    independent: NDArray[np.intp]
    regrouping: NDArray[np.float64]

    @property
    def count(self) -> int:
        """Number of base parameters."""
        return int(self.independent.size)

    def base_regressor(self, y: NDArray[np.float64]) -> NDArray[np.float64]:
        """``Y_b`` from a standard regressor (any leading shape)."""
        return y[..., self.independent]

    def link_of(self, n_links: int) -> NDArray[np.intp]:
        """Body index (0..n_links-1) of each base parameter: that of its independent
        column (Bonnet's sub-regressor of the body)."""
        del n_links  # every independent column belongs to one of the bodies
        return (self.independent // N_PI).astype(np.intp)

    def expressions(self, names: Sequence[str], digits: int = 4) -> list[str]:
        """Readable ``pi_b`` entries, e.g. ``arm_2_joint.Izz + 0.01563 arm_3_joint.m``."""
        out = []
        for row, col in zip(self.regrouping, self.independent, strict=True):
            terms = [names[col]]
            for j in np.flatnonzero(row):
                if j != col:
                    terms.append(f"{row[j]:+.{digits}g} {names[j]}")
            out.append(" ".join(terms))
        return out

    def standard_closest(self, base: ArrayLike, prior: ArrayLike,
                         scale: ArrayLike | None = None) -> NDArray[np.float64]:
        """The standard vector nearest ``prior`` (in ``scale`` units) with ``K pi = base``."""
        prior = np.asarray(prior, dtype=float).ravel()
        s = np.ones_like(prior) if scale is None else np.asarray(scale, dtype=float).ravel()
        ks = self.regrouping * s
        correction = np.linalg.lstsq(ks, np.asarray(base) - self.regrouping @ prior,
                                     rcond=None)[0]
        return prior + s * correction


def base_parameters(
    y: NDArray[np.float64], tolerance: float = 1e-8
) -> BaseParameters:
    """Base parameters of a stacked regressor ``y`` (rows, n_s) by QR with column pivoting.

    Columns are scaled to unit norm before the factorisation (zero columns stay dependent);
    a pivot is independent while ``|R_kk| > tolerance |R_00|``. The regrouping coefficients
    come from least squares on the unscaled columns, so ``y = y[:, independent] K`` holds to
    rounding.
    """
    y = np.asarray(y, dtype=float).reshape(-1, y.shape[-1])
    norms = np.linalg.norm(y, axis=0)
    scaled = y / np.where(norms > 0, norms, 1.0)
    _, r, perm = scipy.linalg.qr(scaled, mode="economic", pivoting=True)
    diag = np.abs(np.diag(r))
    rank = int(np.sum(diag > tolerance * diag[0])) if diag.size and diag[0] > 0 else 0
    independent = np.sort(perm[:rank])
    beta = np.linalg.lstsq(y[:, independent], y, rcond=None)[0]
    beta[np.abs(beta) < 1e-10] = 0.0
    beta[:, independent] = np.eye(rank)
    return BaseParameters(independent.astype(np.intp), beta)


def structural_base_parameters(model: LinkModel, samples: int = 400, seed: int = 0,
                               tolerance: float = 1e-8) -> BaseParameters:
    """Base parameters of ``model`` from the regressor of random states (structural rank)."""
    return base_parameters(model.regressor(*model.random_states(samples, seed)), tolerance)
