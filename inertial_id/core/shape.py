"""Shape priors of a payload: bounding ellipsoids and uniform-density inertial parameters.

From a point cloud of the payload (sensor frame, metres), with optional per-point volumes
(m^3, e.g. the tetrahedra a mesh point stands for), this module builds

- :class:`Ellipsoid` ``{x : (x - c)^T S^-1 (x - c) <= 1}``, the minimum-volume ellipsoid
  enclosing the points (Khachiyan's algorithm), and its matrix ``Q`` of Wensing et al. (2017,
  Thm 4): a body inside the ellipsoid has ``tr(J(pi) Q) >= 0``;
- :func:`uniform_density_prior`, the ``pi`` of a uniform body of a given mass occupying the
  points, a prior for the estimators.
"""

from __future__ import annotations

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
