"""Rigid-body inertial parameters and their conversions.

The one parameter order of the package (the papers' order) is

    pi = [m, mcx, mcy, mcz, Ixx, Ixy, Ixz, Iyy, Iyz, Izz]

with ``m`` in kg, the first moment of mass ``h = m c`` in kg m, and the rotational inertia
``I`` in kg m^2 **about the frame origin**, in the frame's axes (for a payload: the F/T sensor
frame). Six-vectors of symmetric 3x3 matrices use ``[xx, xy, xz, yy, yz, zz]``.

pinocchio orders its dynamic parameters ``[m, h, Ixx, Ixy, Iyy, Ixz, Iyz, Izz]``; the only
conversions between the two orders are :func:`to_pinocchio_order` and
:func:`from_pinocchio_order`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numpy.typing import ArrayLike, NDArray

from inertial_id.core.errors import InertialIdError

PI_NAMES: tuple[str, ...] = ("m", "mcx", "mcy", "mcz", "Ixx", "Ixy", "Ixz", "Iyy", "Iyz", "Izz")

# Index of pinocchio's dynamic parameters in our order: ours[_PIN_FROM_OURS] == pinocchio's.
_PIN_FROM_OURS = np.array([0, 1, 2, 3, 4, 5, 7, 6, 8, 9])

# (row, col) of the 3x3 symmetric matrix for each entry of a [xx, xy, xz, yy, yz, zz] vector.
_SYM_INDEX = ((0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2))


def skew(v: ArrayLike) -> NDArray[np.float64]:
    """The 3x3 matrix ``[v]x`` with ``[v]x u = v x u``."""
    x, y, z = np.asarray(v, dtype=float)
    return np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])


def symmetric_from_vector(s: ArrayLike) -> NDArray[np.float64]:
    """A symmetric 3x3 matrix from ``[xx, xy, xz, yy, yz, zz]``."""
    s = np.asarray(s, dtype=float)
    out = np.empty((3, 3))
    for value, (i, j) in zip(s, _SYM_INDEX, strict=True):
        out[i, j] = out[j, i] = value
    return out


def vector_from_symmetric(matrix: ArrayLike) -> NDArray[np.float64]:
    """``[xx, xy, xz, yy, yz, zz]`` of a 3x3 matrix (its symmetric part)."""
    m = np.asarray(matrix, dtype=float)
    m = 0.5 * (m + m.T)
    return np.array([m[i, j] for i, j in _SYM_INDEX])


def to_pinocchio_order(pi: ArrayLike) -> NDArray[np.float64]:
    """Our ``pi`` to pinocchio's ``[m, h, Ixx, Ixy, Iyy, Ixz, Iyz, Izz]`` (same point and axes)."""
    return np.asarray(pi, dtype=float)[_PIN_FROM_OURS]


def from_pinocchio_order(dynamic_parameters: ArrayLike) -> NDArray[np.float64]:
    """pinocchio's ``toDynamicParameters()`` vector to our ``pi`` order."""
    ours = np.empty(10)
    ours[_PIN_FROM_OURS] = np.asarray(dynamic_parameters, dtype=float)
    return ours


def pseudo_inertia(pi: ArrayLike) -> NDArray[np.float64]:
    """Pseudo-inertia ``J(pi) = [[0.5 tr(I) 1 - I, h], [h^T, m]]`` (Wensing et al. 2017, eq. 7).

    ``J`` is the second moment of the density in homogeneous coordinates; ``pi`` is fully
    physically consistent exactly when ``J`` is positive definite.
    """
    pi = np.asarray(pi, dtype=float)
    inertia = symmetric_from_vector(pi[4:])
    j = np.empty((4, 4))
    j[:3, :3] = 0.5 * np.trace(inertia) * np.eye(3) - inertia
    j[:3, 3] = j[3, :3] = pi[1:4]
    j[3, 3] = pi[0]
    return j


def pi_from_pseudo_inertia(j: ArrayLike) -> NDArray[np.float64]:
    """Inverse of :func:`pseudo_inertia`: ``I = tr(Sigma) 1 - Sigma``."""
    j = np.asarray(j, dtype=float)
    j = 0.5 * (j + j.T)
    sigma = j[:3, :3]
    inertia = np.trace(sigma) * np.eye(3) - sigma
    return np.concatenate(([j[3, 3]], j[:3, 3], vector_from_symmetric(inertia)))


def min_pseudo_inertia_eigenvalue(pi: ArrayLike) -> float:
    """Smallest eigenvalue of ``J(pi)``: the margin of full physical consistency (kg m^2)."""
    return float(np.linalg.eigvalsh(pseudo_inertia(pi))[0])


def is_physically_consistent(pi: ArrayLike, margin: float = 0.0) -> bool:
    """True when ``J(pi)`` is positive definite with smallest eigenvalue above ``margin``."""
    pi = np.asarray(pi, dtype=float)
    return bool(np.all(np.isfinite(pi))) and min_pseudo_inertia_eigenvalue(pi) > margin


@dataclass(frozen=True)
class BodyParameters:
    """Inertial parameters of one rigid body, stored as ``pi`` (see the module docstring).

    Build it with :meth:`from_pi` or :meth:`from_mass_com_inertia`; read it as mass, centre of
    mass and inertia about the origin or about the CoM. All quantities are in the body's
    reference frame (the F/T sensor frame for a payload).
    """

    pi: NDArray[np.float64]

    def __post_init__(self) -> None:
        pi = np.array(self.pi, dtype=float).reshape(-1)
        if pi.shape != (10,):
            raise InertialIdError(f"pi must have 10 entries, got {pi.size}")
        pi.setflags(write=False)
        object.__setattr__(self, "pi", pi)

    @classmethod
    def from_pi(cls, pi: ArrayLike) -> BodyParameters:
        """From ``[m, mcx, mcy, mcz, Ixx, Ixy, Ixz, Iyy, Iyz, Izz]`` about the frame origin."""
        return cls(np.asarray(pi, dtype=float))

    @classmethod
    def from_mass_com_inertia(
        cls, mass: float, com: ArrayLike, inertia_com: ArrayLike
    ) -> BodyParameters:
        """From mass (kg), CoM (m) and inertia about the CoM (3x3 or 6-vector, kg m^2).

        Uses the parallel-axis theorem ``I_O = I_C - m [c]x [c]x``.
        """
        c = np.asarray(com, dtype=float)
        i_c = np.asarray(inertia_com, dtype=float)
        if i_c.shape == (6,):
            i_c = symmetric_from_vector(i_c)
        i_o = i_c - mass * skew(c) @ skew(c)
        return cls(np.concatenate(([mass], mass * c, vector_from_symmetric(i_o))))

    @classmethod
    def from_pinocchio(cls, inertia: object) -> BodyParameters:
        """From a ``pinocchio.Inertia`` (its dynamic parameters are about its frame origin)."""
        return cls(from_pinocchio_order(inertia.toDynamicParameters()))  # type: ignore[attr-defined]

    @property
    def mass(self) -> float:
        """Mass in kg."""
        return float(self.pi[0])

    @property
    def first_moment(self) -> NDArray[np.float64]:
        """``h = m c`` in kg m."""
        return self.pi[1:4].copy()

    @property
    def com(self) -> NDArray[np.float64]:
        """Centre of mass in m; NaN when the mass is not positive."""
        if self.mass <= 0.0:
            return np.full(3, np.nan)
        return self.pi[1:4] / self.mass

    @property
    def inertia_origin(self) -> NDArray[np.float64]:
        """Rotational inertia about the frame origin, 3x3, kg m^2."""
        return symmetric_from_vector(self.pi[4:])

    @property
    def inertia_com(self) -> NDArray[np.float64]:
        """Rotational inertia about the CoM, 3x3, kg m^2 (NaN when the mass is not positive)."""
        c = self.com
        return self.inertia_origin + self.mass * skew(c) @ skew(c)

    @property
    def pseudo_inertia(self) -> NDArray[np.float64]:
        """``J(pi)``, see :func:`pseudo_inertia`."""
        return pseudo_inertia(self.pi)

    @cached_property
    def min_pseudo_inertia_eigenvalue(self) -> float:
        """Smallest eigenvalue of ``J(pi)`` (computed once: ``pi`` is read-only)."""
        return min_pseudo_inertia_eigenvalue(self.pi)

    def is_physically_consistent(self, margin: float = 0.0) -> bool:
        """See :func:`is_physically_consistent`."""
        return bool(np.all(np.isfinite(self.pi))) and self.min_pseudo_inertia_eigenvalue > margin

    def to_pinocchio(self) -> object:
        """The equivalent ``pinocchio.Inertia``."""
        import pinocchio as pin

        return pin.Inertia.FromDynamicParameters(to_pinocchio_order(self.pi))


def density_weighted_covariance(pi: ArrayLike) -> NDArray[np.float64]:
    """``Sigma = int rho x x^T dV = 0.5 tr(I) 1 - I`` about the frame origin (kg m^2)."""
    return pseudo_inertia(pi)[:3, :3]


def principal_moments(pi: ArrayLike) -> NDArray[np.float64]:
    """Eigenvalues (ascending) of the inertia about the CoM; NaN when ``m <= 0``."""
    body = BodyParameters.from_pi(pi)
    if body.mass <= 0.0:
        return np.full(3, np.nan)
    return np.linalg.eigvalsh(body.inertia_com)


def is_semi_consistent(pi: ArrayLike) -> bool:
    """The classical condition: ``m > 0`` and inertia about the CoM positive definite."""
    moments = principal_moments(pi)
    return bool(np.all(np.isfinite(moments)) and moments[0] > 0.0)


def satisfies_triangle_inequalities(pi: ArrayLike, tolerance: float = 0.0) -> bool:
    """Principal moments obey ``J_i + J_j >= J_k`` (needed for a real density)."""
    j = principal_moments(pi)
    return bool(np.all(np.isfinite(j)) and j[0] + j[1] >= j[2] - tolerance)


def project_to_consistent(pi: ArrayLike, epsilon: float = 0.0) -> NDArray[np.float64]:
    """The nearest ``pi`` with ``J(pi) >= epsilon I``, nearest in the Frobenius norm of ``J``.

    The projection onto the cone is exact: the eigenvalues of ``J`` below ``epsilon`` are
    raised to it. A consistent ``pi`` (with margin ``epsilon``) is returned unchanged.
    """
    values, vectors = np.linalg.eigh(pseudo_inertia(pi))
    if values[0] >= epsilon:
        return np.asarray(pi, dtype=float).copy()
    clipped = (vectors * np.maximum(values, epsilon)) @ vectors.T
    return pi_from_pseudo_inertia(clipped)
