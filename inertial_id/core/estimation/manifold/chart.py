"""The manifold ``(m, c, Q, L)`` of fully physically consistent rigid bodies (Traversaro et al.
2016) and its local chart: ``pi`` of a point and back, the chart's Jacobian and curvature, and
the retraction of a chart step.

Mass ``m`` in kg, centre of mass ``c`` in m, principal axes ``Q`` (columns, det +1) and central
second moments ``L`` in kg m^2, all in the sensor frame; ``pi`` in the package order about the
sensor origin. The chart around ``(m0, c0, Q0, L0)`` is ``m = m0 (1 + s_m)``,
``h = m c = m0 (c0 + s_c)``, ``Q = Q0 expm([s_Q]x)``, ``L = L0 (1 + s_L)``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from inertial_id.core.errors import InertialIdError
from inertial_id.core.estimate import N_PI
from inertial_id.core.parameters import skew

# P maps the second moments L to the principal moments of inertia, J_principal = P L.
_P = np.array([[0.0, 1.0, 1.0], [1.0, 0.0, 1.0], [1.0, 1.0, 0.0]])
# (row, col) of [xx, xy, xz, yy, yz, zz], the order of the inertia entries of pi.
_VECH_ROWS = np.array([0, 0, 0, 1, 1, 2])
_VECH_COLS = np.array([0, 1, 2, 1, 2, 2])
_BASIS = np.eye(3)
_BASIS.setflags(write=False)
_BASIS_SKEW = np.array([skew(e) for e in _BASIS])


class ManifoldPoint(NamedTuple):
    """``(m, c, Q, L)``: mass (kg), CoM (m), principal axes (columns of ``Q``, det +1) and
    central second moments of mass along them (kg m^2); all in the sensor frame."""

    mass: float
    com: NDArray[np.float64]
    rotation: NDArray[np.float64]
    moments: NDArray[np.float64]


def _vech(matrices: NDArray[np.float64]) -> NDArray[np.float64]:
    """``[xx, xy, xz, yy, yz, zz]`` of a (..., 3, 3) stack of symmetric matrices."""
    return matrices[..., _VECH_ROWS, _VECH_COLS]


def rotation_exp(delta: ArrayLike) -> NDArray[np.float64]:
    """``expm([delta]x)`` by the Rodrigues formula (``delta`` a rotation vector, rad)."""
    delta = np.asarray(delta, dtype=float)
    angle = float(np.linalg.norm(delta))
    k = skew(delta)
    if angle < 1e-8:
        return _BASIS + k + 0.5 * k @ k
    return (
        _BASIS
        + (np.sin(angle) / angle) * k
        + ((1.0 - np.cos(angle)) / angle**2) * k @ k
    )


def _orthonormalize(q: NDArray[np.float64]) -> NDArray[np.float64]:
    """One Bjorck step towards the nearest rotation: removes the rounding drift of products of
    rotations (first order in ``q^T q - 1``, which is ~1e-16 here)."""
    return q @ (1.5 * _BASIS - 0.5 * q.T @ q)


def pi_from_manifold(m: float, c: ArrayLike, Q: ArrayLike, L: ArrayLike) -> NDArray[np.float64]:
    """``pi`` (package order, about the sensor origin) of the manifold point ``(m, c, Q, L)``.

    ``I_O = Q diag(P L) Q^T - m [c]x [c]x`` (Traversaro et al. 2016, Sec. III-B): mass in kg,
    CoM in m, ``Q`` principal axes (columns) in the sensor frame, ``L`` in kg m^2. Fully
    physically consistent whenever ``m >= 0`` and ``L >= 0``; ``J(pi)`` is positive definite
    when both are strictly positive.
    """
    c = np.asarray(c, dtype=float)
    q = np.asarray(Q, dtype=float)
    moments = np.asarray(L, dtype=float)
    inertia_com = (q * (_P @ moments)) @ q.T
    cx = skew(c)
    inertia_origin = inertia_com - m * cx @ cx
    return np.concatenate(([m], m * c, _vech(inertia_origin)))


def manifold_from_pi(
    pi: ArrayLike, min_mass: float = 0.0, min_moment: float = 0.0
) -> ManifoldPoint:
    """``(m, c, Q, L)`` of ``pi``, clipped onto the manifold when ``pi`` is not consistent.

    ``c = h / m``; ``Q`` and ``L`` are the eigenvectors (ascending eigenvalues, det +1) and
    eigenvalues of the central second moment ``Sigma_C = tr(I_C)/2 1 - I_C``, which share
    their eigenvectors with ``I_C``. Clipping: ``m`` is raised to ``min_mass`` and ``L`` to
    ``min_moment``, which replaces ``Sigma_C`` by its nearest (Frobenius) matrix with
    eigenvalues ``>= min_moment``. A mass ``<= 0`` has no centre of mass: then ``c = 0`` and
    ``Sigma_C`` is taken from the inertia about the origin. Exact (the inverse of
    :func:`pi_from_manifold`) on consistent ``pi`` with ``m > 0``.
    """
    pi = np.asarray(pi, dtype=float)
    if pi.shape != (N_PI,) or not np.all(np.isfinite(pi)):
        raise InertialIdError(f"pi must be 10 finite numbers, got {pi!r}")
    m = float(pi[0])
    c = pi[1:4] / m if m > 0.0 else np.zeros(3)
    inertia_origin = np.empty((3, 3))
    inertia_origin[_VECH_ROWS, _VECH_COLS] = pi[4:]
    inertia_origin[_VECH_COLS, _VECH_ROWS] = pi[4:]
    cx = skew(c)
    inertia_com = inertia_origin + max(m, 0.0) * cx @ cx
    sigma = 0.5 * np.trace(inertia_com) * _BASIS - inertia_com
    moments, q = np.linalg.eigh(sigma)
    if np.linalg.det(q) < 0:
        q[:, 2] *= -1.0
    return ManifoldPoint(max(m, min_mass), c, q, np.maximum(moments, min_moment))


def pseudo_inertia_trace(point: ManifoldPoint) -> float:
    """``tr J = m (1 + |c|^2) + sum(L)`` of a manifold point (its scale, kg and kg m^2)."""
    return float(point.mass * (1.0 + point.com @ point.com) + np.sum(point.moments))


def manifold_jacobian(point: ManifoldPoint) -> NDArray[np.float64]:
    """``d pi / d s`` (10 x 10) at ``s = 0`` of the chart around ``point`` (module docstring).

    Columns ``[s_m, s_c (3), s_Q (3), s_L (3)]`` of the chart ``m = m0 (1 + s_m)``,
    ``h = m0 (c0 + s_c)``, ``Q = Q0 expm([s_Q]x)``, ``L = L0 (1 + s_L)``, in which ``pi`` is
    linear in everything but ``Q`` and the parallel-axis term ``-[h]x^2 / m``. Uses
    ``[a]x [b]x = b a^T - (a . b) 1`` and ``Q diag(P e_k) Q^T = 1 - q_k q_k^T``.
    """
    m, c, q, moments = point
    jac = np.zeros((N_PI, 10))
    # s_m at fixed h: m d/dm of [m, h, vech(I_C - [h]x^2 / m)].
    jac[0, 0] = m
    jac[4:, 0] = _vech(m * (np.outer(c, c) - (c @ c) * _BASIS))
    # s_c: h = m0 (c0 + s_c), parallel-axis term with d[c]x^2/dc_k = c e_k^T + e_k c^T - 2 c_k 1.
    jac[1:4, 1:4] = m * _BASIS
    outer = c[None, :, None] * _BASIS[:, None, :]
    diagonal = c[:, None, None] * _BASIS[None]
    jac[4:, 1:4] = _vech(-m * (outer + outer.transpose(0, 2, 1) - 2.0 * diagonal)).T
    # Q exp([d]x): d I_C = Q ([e_k]x D - D [e_k]x) Q^T, entries (E_k)_ab (D_b - D_a).
    d = _P @ moments
    local = _BASIS_SKEW * (d[None, None, :] - d[None, :, None])
    jac[4:, 4:7] = _vech(q @ local @ q.T).T
    # s_L: L_k Q diag(P e_k) Q^T = L_k (1 - q_k q_k^T).
    axes = q.T[:, :, None] * q.T[:, None, :]
    jac[4:, 7:10] = _vech(moments[:, None, None] * (_BASIS - axes)).T
    return jac


def symmetric_weights(weights: NDArray[np.float64]) -> NDArray[np.float64]:
    """``Gamma`` with ``tr(Gamma I) = weights . vech(I)`` for every symmetric ``I``."""
    g = np.empty((3, 3))
    g[_VECH_ROWS, _VECH_COLS] = weights
    g[_VECH_COLS, _VECH_ROWS] = weights
    return 0.5 * (g + np.diag(np.diag(g)))


def manifold_curvature(point: ManifoldPoint, weights: ArrayLike) -> NDArray[np.float64]:
    """Hessian (10 x 10) of ``weights . pi`` at the point, in the chart coordinates of
    :func:`manifold_jacobian`.

    These are the second-order terms of the parametrization itself: the parallel-axis term
    ``-m0 [c0 + s_c]x^2 / (1 + s_m)`` and the rotation of the principal axes. Nonzero blocks:
    (m, m), (m, c), (c, c), (Q, Q), (Q, L). With ``Gamma`` the symmetric matrix of the inertia
    weights and ``Gamma' = Q^T Gamma Q``.
    """
    m, c, q, moments = point
    w = np.asarray(weights, dtype=float)
    gamma = symmetric_weights(w[4:])
    trace = np.trace(gamma)
    hess = np.zeros((10, 10))
    # (m, m): -2 m tr(Gamma [c]x^2); (m, c): m tr(Gamma d[c]x^2/dc_k).
    hess[0, 0] = -2.0 * m * (c @ gamma @ c - (c @ c) * trace)
    hess[0, 1:4] = hess[1:4, 0] = 2.0 * m * (gamma @ c - trace * c)
    # (c, c): -m tr(Gamma (E_k E_l + E_l E_k)) with E_k E_l = e_l e_k^T - d_kl 1.
    hess[1:4, 1:4] = -2.0 * m * (gamma - trace * _BASIS)
    # (Q, Q): exp(K) D exp(-K) = D + [K, D] + (K^2 D + D K^2)/2 - K D K + O(K^3).
    gamma_p = q.T @ gamma @ q
    d = _P @ moments
    sym = 0.5 * (d[:, None] + d[None, :]) * gamma_p  # (D Gamma' + Gamma' D) / 2
    # tr(Gamma' E_i D E_j) = sum (E_i D)_an (E_j Gamma')_na.
    sandwich = np.einsum("ian,jna->ij", _BASIS_SKEW * d, _BASIS_SKEW @ gamma_p)
    hess[4:7, 4:7] = 2.0 * sym - 2.0 * np.trace(sym) * _BASIS - sandwich - sandwich.T
    # (Q, L): tr(Gamma' (E_i D_k - D_k E_i)) with D_k = L_k (1 - e_k e_k^T): 2 L_k (E_i Gamma')_kk.
    hess[4:7, 7:10] = 2.0 * moments[None, :] * np.einsum("ika,ak->ik", _BASIS_SKEW, gamma_p)
    hess[7:10, 4:7] = hess[4:7, 7:10].T
    return hess


def retract(point: ManifoldPoint, step: ArrayLike, floor: float = 0.0) -> ManifoldPoint:
    """The point at chart coordinates ``step`` (see :func:`manifold_jacobian`) from ``point``.

    ``m`` and ``L`` change by ``m s_m`` and ``L_k s_k``, clipped at ``floor`` (a projection onto
    ``[floor, inf)``); the first moment ``h = m c`` changes by ``m0 s_c``; ``Q`` is
    right-multiplied by ``expm([s_Q]x)`` and re-orthonormalised.
    """
    s = np.asarray(step, dtype=float)
    mass = max(point.mass * (1.0 + float(s[0])), floor)
    first_moment = point.mass * (point.com + s[1:4])
    moments = np.maximum(point.moments * (1.0 + s[7:10]), floor)
    rotation = _orthonormalize(point.rotation @ rotation_exp(s[4:7]))
    return ManifoldPoint(mass, first_moment / mass, rotation, moments)
