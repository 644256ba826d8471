"""Shape priors of a payload: bounding ellipsoids and uniform-density inertial parameters.

From a point cloud of the payload (sensor frame, metres), with optional per-point volumes
(m^3, e.g. the tetrahedra a mesh point stands for) — or points filling the URDF collision
geometry below the sensor (:func:`urdf_collision_points`) — this module builds

- :class:`Ellipsoid` ``{x : (x - c)^T S^-1 (x - c) <= 1}``, the minimum-volume ellipsoid
  enclosing the points (Khachiyan's algorithm), and its matrix ``Q`` of Wensing et al. (2017,
  Thm 4): a body inside the ellipsoid has ``tr(J(pi) Q) >= 0``;
- :func:`uniform_density_prior`, the ``pi`` of a uniform body of a given mass occupying the
  points, a prior for the estimators.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from inertial_id.core.errors import InertialIdError
from inertial_id.core.parameters import pi_from_pseudo_inertia


@dataclass(frozen=True)
class Ellipsoid:
    """``{x : (x - centre)^T shape^-1 (x - centre) <= 1}`` in the sensor frame (m, m^2)."""

    centre: NDArray[np.float64]
    shape: NDArray[np.float64]

    @classmethod
    def sphere(cls, centre: ArrayLike, radius: float) -> Ellipsoid:
        """A ball of ``radius`` metres."""
        return cls(np.asarray(centre, dtype=float), radius**2 * np.eye(3))

    @classmethod
    def enclosing(cls, points: ArrayLike, tolerance: float = 1e-4,
                  max_iterations: int = 2000) -> Ellipsoid:
        """Minimum-volume ellipsoid enclosing ``points`` (N, 3) (Khachiyan 1996)."""
        p = np.asarray(points, dtype=float)
        if p.ndim != 2 or p.shape[1] != 3 or p.shape[0] < 4:
            raise InertialIdError(f"need at least 4 points (N, 3), got {p.shape}")
        n = p.shape[0]
        lifted = np.hstack([p, np.ones((n, 1))]).T  # (4, N)
        u = np.full(n, 1.0 / n)
        for _ in range(max_iterations):
            x = lifted @ (u[:, None] * lifted.T)
            m = np.einsum("ij,ji->i", lifted.T, np.linalg.solve(x, lifted))
            j = int(np.argmax(m))
            step = (m[j] - 4.0) / (4.0 * (m[j] - 1.0))
            if step < tolerance:
                break
            u *= 1.0 - step
            u[j] += step
        centre = p.T @ u
        cov = (p.T * u) @ p - np.outer(centre, centre)
        shape = 3.0 * cov
        # Khachiyan's ellipsoid is within tolerance; scale so that every point is inside.
        d = p - centre
        reach = np.einsum("ij,ij->i", d @ np.linalg.inv(shape), d).max()
        return cls(centre, shape * max(reach, 1.0))

    def q_matrix(self) -> NDArray[np.float64]:
        """``Q`` with ``[x; 1]^T Q [x; 1] = 1 - (x - c)^T S^-1 (x - c)`` (>= 0 inside)."""
        s_inv = np.linalg.inv(self.shape)
        c = self.centre
        q = np.empty((4, 4))
        q[:3, :3] = -s_inv
        q[:3, 3] = q[3, :3] = s_inv @ c
        q[3, 3] = 1.0 - c @ s_inv @ c
        return q

    def contains(self, points: ArrayLike, tolerance: float = 1e-9) -> NDArray[np.bool_]:
        """Which of the points (N, 3) lie inside (within ``tolerance``)."""
        d = np.atleast_2d(np.asarray(points, dtype=float)) - self.centre
        return np.einsum("ij,ij->i", d @ np.linalg.inv(self.shape), d) <= 1.0 + tolerance


def uniform_density_prior(
    points: ArrayLike, mass: float, volumes: ArrayLike | None = None
) -> NDArray[np.float64]:
    """``pi`` of ``mass`` kg spread over the points in proportion to their volumes.

    Each point stands for the mass ``mass * v_k / sum(v)`` (equal shares without volumes);
    ``J = sum_k m_k [p_k; 1][p_k; 1]^T`` gives ``pi`` about the sensor origin.
    """
    p = np.asarray(points, dtype=float)
    w = np.ones(p.shape[0]) if volumes is None else np.asarray(volumes, dtype=float)
    if p.ndim != 2 or p.shape[1] != 3 or w.shape != (p.shape[0],) or np.any(w < 0):
        raise InertialIdError("points must be (N, 3) with N non-negative volumes")
    if mass <= 0 or w.sum() <= 0:
        raise InertialIdError("the prior needs a positive mass and total volume")
    masses = mass * w / w.sum()
    lifted = np.hstack([p, np.ones((p.shape[0], 1))])
    return pi_from_pseudo_inertia((lifted.T * masses) @ lifted)


def _grid_in(kind: str, size: NDArray[np.float64], spacing: float) -> NDArray[np.float64]:
    """Grid points (spacing m) inside a box (size = extents), cylinder (radius, length; axis
    z) or sphere (radius), centred at the origin; at least the centre."""
    half = {"box": size / 2, "cylinder": np.array([size[0], size[0], size[1] / 2]),
            "sphere": np.full(3, size[0])}[kind]
    axes = [np.arange(-h + spacing / 2, h, spacing) if h > spacing else np.zeros(1)
            for h in half]
    points = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 3)
    if kind == "cylinder":
        points = points[np.hypot(points[:, 0], points[:, 1]) <= size[0]]
    elif kind == "sphere":
        points = points[np.linalg.norm(points, axis=1) <= size[0]]
    return points if points.size else np.zeros((1, 3))


def _geometry(element: ET.Element) -> tuple[str, NDArray[np.float64]] | None:
    for kind, keys in (("box", ("size",)), ("cylinder", ("radius", "length")),
                       ("sphere", ("radius",))):
        shape = element.find(f"geometry/{kind}")
        if shape is not None:
            values = " ".join(shape.get(k, "0") for k in keys)
            return kind, np.array([float(v) for v in values.split()])
    return None


def urdf_collision_points(urdf: str, sensor_frame: str, spacing: float = 0.005,
                          ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Points filling the collision geometry below ``sensor_frame``, in the sensor frame.

    Every link below the sensor's link (through any joints, at their zero position) adds grid
    points of its ``<collision>`` boxes, cylinders and spheres; mesh geometry is skipped.
    Returns points (N, 3) in m and the volume each stands for (N,), in m^3.
    """
    import pinocchio as pin

    from inertial_id.core.kinematics import load_urdf_model, urdf_text

    text = urdf_text(urdf)
    model = load_urdf_model(text)
    root = ET.fromstring(text)
    if not model.existFrame(sensor_frame):
        raise InertialIdError(f"frame {sensor_frame!r} is not in the URDF")
    data = model.createData()
    pin.framesForwardKinematics(model, data, pin.neutral(model))
    sensor_inverse = data.oMf[model.getFrameId(sensor_frame)].inverse()
    children: dict[str, list[str]] = {}
    for joint in root.iter("joint"):
        children.setdefault(joint.find("parent").get("link"), []).append(
            joint.find("child").get("link"))
    below, stack = [], [sensor_frame]
    while stack:
        link = stack.pop()
        below.append(link)
        stack.extend(children.get(link, []))
    links = {link.get("name"): link for link in root.iter("link")}
    points, volumes = [], []
    for name in below:
        if name not in links or not model.existFrame(name):
            continue
        link_pose = sensor_inverse * data.oMf[model.getFrameId(name)]
        for collision in links[name].iter("collision"):
            shape = _geometry(collision)
            if shape is None:
                continue
            origin = collision.find("origin")
            xyz = [float(v) for v in (origin.get("xyz", "0 0 0") if origin is not None
                                      else "0 0 0").split()]
            rpy = [float(v) for v in (origin.get("rpy", "0 0 0") if origin is not None
                                      else "0 0 0").split()]
            pose = link_pose * pin.SE3(pin.rpy.rpyToMatrix(*rpy), np.array(xyz))
            local = _grid_in(*shape, spacing)
            points.append(local @ pose.rotation.T + pose.translation)
            volumes.append(np.full(len(local), spacing**3))
    if not points:
        raise InertialIdError(f"no box, cylinder or sphere collision geometry below "
                              f"{sensor_frame!r}")
    return np.concatenate(points), np.concatenate(volumes)


@dataclass(frozen=True)
class EquivalentBox:
    """The solid box of uniform density with a body's mass and inertia about its CoM.

    ``rotation``'s columns are the box's axes (the body's principal axes) in the body frame
    (a proper rotation, det +1); ``size`` its full side lengths along them (m), so that its
    inertia about the centre is ``rotation diag(m (b^2 + c^2), m (a^2 + c^2), m (a^2 + b^2)) /
    12 rotation^T`` for ``size = (a, b, c)``.
    """

    rotation: NDArray[np.float64]
    size: NDArray[np.float64]

    def inertia(self, mass: float) -> NDArray[np.float64]:
        """Inertia (kg m^2) of the box of ``mass`` about its centre, in the body frame."""
        a2, b2, c2 = self.size**2
        moments = mass / 12.0 * np.array([b2 + c2, a2 + c2, a2 + b2])
        return self.rotation @ np.diag(moments) @ self.rotation.T


def equivalent_box(mass: float, inertia_com: ArrayLike) -> EquivalentBox:
    """:class:`EquivalentBox` of a body: sides ``a_i^2 = 6 (J_j + J_k - J_i) / m`` from the
    principal moments ``J`` (the triangle inequality keeps them real; a tiny violation from
    rounding gives a flat side of 0). ``mass`` > 0 (kg), ``inertia_com`` 3x3 (kg m^2)."""
    if not mass > 0.0:
        raise InertialIdError(f"an equivalent box needs a positive mass, got {mass}")
    moments, axes = np.linalg.eigh(np.asarray(inertia_com, dtype=float))
    if np.linalg.det(axes) < 0.0:
        axes[:, 2] = -axes[:, 2]
    squares = 6.0 * (moments.sum() - 2.0 * moments) / mass
    return EquivalentBox(rotation=axes, size=np.sqrt(np.clip(squares, 0.0, None)))
