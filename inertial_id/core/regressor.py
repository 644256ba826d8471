"""Newton-Euler regressor of a rigid body and the F/T measurement model.

Spatial vectors are ``[linear; angular]`` in the body (sensor) frame. With the body twist
``v = [v_lin; w]`` and the proper acceleration ``a_g = [a_lin - R^T g; alpha]`` (spatial body
acceleration minus gravity, see :mod:`inertial_id.core.kinematics`),

    Y(v, a_g) pi = M a_g + v x* M v

is the wrench ``[f; tau]`` (about the frame origin) that the sensor applies to the body.
A physical F/T sensor reports the opposite, the wrench the body exerts on the sensor, plus a
constant bias: ``w = s Y pi + offset`` with ``s = -1`` (:data:`PAYLOAD_ON_SENSOR`, the default)
or ``s = +1`` (:data:`SENSOR_ON_PAYLOAD`).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from inertial_id.core.errors import InertialIdError, SampleError
from inertial_id.core.parameters import symmetric_from_vector

PAYLOAD_ON_SENSOR = -1.0
"""Sign of the measured wrench when the sensor reports what the payload exerts on it."""
SENSOR_ON_PAYLOAD = 1.0
"""Sign of the measured wrench when the sensor reports what it applies to the payload."""

WRENCH_SIGNS = {"payload_on_sensor": PAYLOAD_ON_SENSOR, "sensor_on_payload": SENSOR_ON_PAYLOAD}


def wrench_sign(name: str) -> float:
    """The sign ``s`` of the measurement model for a convention name."""
    try:
        return WRENCH_SIGNS[name]
    except KeyError:
        raise InertialIdError(
            f"unknown wrench sign convention {name!r}; use one of {sorted(WRENCH_SIGNS)}"
        ) from None


def cross(a: NDArray[np.float64], b: NDArray[np.float64]) -> NDArray[np.float64]:
    """``a x b`` along the last axis (length 3), broadcast; ``numpy.cross``'s arithmetic
    without its per-call axis handling, which dominated small batches."""
    a0, a1, a2 = a[..., 0], a[..., 1], a[..., 2]
    b0, b1, b2 = b[..., 0], b[..., 1], b[..., 2]
    out = np.empty(np.broadcast_shapes(a.shape, b.shape))
    out[..., 0] = a1 * b2 - a2 * b1
    out[..., 1] = a2 * b0 - a0 * b2
    out[..., 2] = a0 * b1 - a1 * b0
    return out


def _cross_matrices(x: NDArray[np.float64]) -> NDArray[np.float64]:
    """Batch of skew matrices, (N, 3) -> (N, 3, 3)."""
    out = np.zeros(x.shape[:-1] + (3, 3))
    out[..., 0, 1], out[..., 0, 2] = -x[..., 2], x[..., 1]
    out[..., 1, 0], out[..., 1, 2] = x[..., 2], -x[..., 0]
    out[..., 2, 0], out[..., 2, 1] = -x[..., 1], x[..., 0]
    return out


def _inertia_action(x: NDArray[np.float64]) -> NDArray[np.float64]:
    """``L(x)`` with ``L(x) [Ixx, Ixy, Ixz, Iyy, Iyz, Izz] = I x``, batched (N, 3) -> (N, 3, 6)."""
    out = np.zeros(x.shape[:-1] + (3, 6))
    x0, x1, x2 = x[..., 0], x[..., 1], x[..., 2]
    out[..., 0, 0], out[..., 0, 1], out[..., 0, 2] = x0, x1, x2
    out[..., 1, 1], out[..., 1, 3], out[..., 1, 4] = x0, x1, x2
    out[..., 2, 2], out[..., 2, 4], out[..., 2, 5] = x0, x1, x2
    return out


PRODUCT_PAIRS = ((0, 0), (1, 1), (2, 2), (0, 1), (0, 2), (1, 2))
"""The angular-velocity products ``w_i w_j`` the regressor uses, in this order:
``[wx^2, wy^2, wz^2, wx wy, wx wz, wy wz]``."""


def angular_products(w: ArrayLike) -> NDArray[np.float64]:
    """(..., 3) angular velocities (rad/s) -> (..., 6) products ``w_i w_j`` ((rad/s)^2) in
    the order of :data:`PRODUCT_PAIRS`."""
    w = np.asarray(w, dtype=float)
    return np.stack([w[..., i] * w[..., j] for i, j in PRODUCT_PAIRS], axis=-1)


def _quadratic_basis() -> NDArray[np.float64]:
    """(6, 6, 10): the regressor's terms in the angular velocity, ``w x (w x .)`` in the force
    rows' first-moment columns and ``w x (I w)`` in the torque rows' inertia columns, per
    product of :data:`PRODUCT_PAIRS` (they are bilinear in ``w``)."""
    def part(w: NDArray[np.float64]) -> NDArray[np.float64]:
        wx = _cross_matrices(w)
        y = np.zeros((6, 10))
        y[:3, 1:4] = wx @ wx
        y[3:, 4:] = wx @ _inertia_action(w)
        return y

    unit = np.eye(3)
    basis = np.empty((6, 6, 10))
    for k, (i, j) in enumerate(PRODUCT_PAIRS):
        basis[k] = (part(unit[i]) if i == j
                    else part(unit[i] + unit[j]) - part(unit[i]) - part(unit[j]))
    return basis


QUADRATIC_BASIS = _quadratic_basis()
"""``Y``'s part quadratic in ``w`` is ``sum_k p_k QUADRATIC_BASIS[k]`` with ``p`` the products
(:func:`angular_products`)."""


def _products(twist: NDArray[np.float64], products: ArrayLike | None) -> NDArray[np.float64]:
    """The given products (checked against the twist's batch shape) or the twist's own."""
    if products is None:
        return angular_products(twist[..., 3:])
    p = np.asarray(products, dtype=float)
    if p.shape != twist.shape:
        raise InertialIdError(f"angular-velocity products {p.shape} must be {twist.shape}")
    return p


def _acceleration_basis() -> NDArray[np.float64]:
    """(6, 6, 10): the regressor's terms linear in ``[a_lin + w x v_lin; alpha]``, per
    component: ``a`` in the force rows' mass column and ``-a x`` in the torque rows'
    first-moment columns, ``alpha x`` in the force rows' first-moment columns and ``I alpha``
    in the torque rows' inertia columns."""
    basis = np.zeros((6, 6, 10))
    for k, unit in enumerate(np.eye(3)):
        basis[k, :3, 0] = unit
        basis[k, 3:, 1:4] = -_cross_matrices(unit)
        basis[3 + k, :3, 1:4] = _cross_matrices(unit)
        basis[3 + k, 3:, 4:] = _inertia_action(unit)
    return basis


LINEAR_BASIS = np.concatenate((_acceleration_basis(), QUADRATIC_BASIS)).reshape(12, 60)
"""``Y`` is ``[a_lin + w x v_lin, alpha, products]`` (12 per sample) times this, reshaped to
(6, 10): every term of the regressor is linear in those features."""


def regressor(twist: ArrayLike, proper_acceleration: ArrayLike,
              products: ArrayLike | None = None) -> NDArray[np.float64]:
    """The Newton-Euler regressor ``Y(v, a_g)``.

    Accepts one sample (6-vectors, returns 6x10) or a batch ((N, 6) arrays, returns N x 6 x 10).
    Columns follow ``pi = [m, mcx, mcy, mcz, Ixx, Ixy, Ixz, Iyy, Iyz, Izz]``; rows ``[f; tau]``.
    ``products`` (like the twist): the angular-velocity products of :data:`PRODUCT_PAIRS` to
    use (matched filtering smooths them on their own, :mod:`inertial_id.core.gathering.features`);
    None: the twist's ``w_i w_j``. One matrix product of the batch's features with
    :data:`LINEAR_BASIS`.
    """
    features = regressor_features(twist, proper_acceleration, products)
    return (features @ LINEAR_BASIS).reshape(features.shape[:-1] + (6, 10))


def regressor_features(twist: ArrayLike, proper_acceleration: ArrayLike,
                       products: ArrayLike | None = None,
                       out: NDArray[np.float64] | None = None) -> NDArray[np.float64]:
    """The 12 features per sample that :data:`LINEAR_BASIS` maps to the regressor:
    ``[a_lin + w x v_lin (m/s^2), alpha (rad/s^2), products ((rad/s)^2)]``, sensor frame,
    from (..., 6) twists ``[v_lin; w]`` and proper accelerations ``[a_lin - R^T g; alpha]``
    (``products``: see :func:`regressor`). ``out``: a (..., 12) array (or a view of one) to
    write them into instead of a new one.
    """
    v = np.asarray(twist, dtype=float)
    a = np.asarray(proper_acceleration, dtype=float)
    if v.shape != a.shape or v.shape[-1] != 6:
        raise InertialIdError(f"twist {v.shape} and acceleration {a.shape} must be (..., 6)")
    p = _products(v, products)
    features = np.empty(v.shape[:-1] + (12,)) if out is None else out
    # Classical-like term a + w x v appears in both the force and the torque rows.
    np.add(a[..., :3], cross(v[..., 3:], v[..., :3]), out=features[..., :3])
    features[..., 3:6] = a[..., 3:]
    features[..., 6:] = p
    return features


GRAM_SIZE = 19
"""Columns of the per-batch matrix :func:`batch_gram` takes the Gram matrix of:
``[features (12), 1, wrench (6)]``."""
GRAM_ONES = 12
"""Index of the column of ones in :func:`batch_gram`'s matrix (features are 0-11)."""
GRAM_WRENCH = slice(13, 19)
"""Columns of the wrench ``[fx, fy, fz, tx, ty, tz]`` in :func:`batch_gram`'s matrix."""


def batch_gram(twist: ArrayLike, proper_acceleration: ArrayLike, wrench: ArrayLike,
               products: ArrayLike | None = None,
               tau: ArrayLike | None = None) -> NDArray[np.float64]:
    """``Z^T Z`` (19, 19) of a batch, ``Z = [features, 1, wrench]`` (N, 19) per sample:
    the :func:`regressor_features` (sensor frame, m/s^2, rad/s^2, (rad/s)^2), a column of ones
    and the measured wrench ``[fx, fy, fz, tx, ty, tz]`` (N, N m; sensor frame). It holds the
    features' Gram matrix, their column sums, the features-times-wrench products, the wrench's
    sums and second moments, and N: all that :class:`BatchNormalEquations` needs, in
    ``O(19^2 N)`` instead of the ``(6N, 16)`` rows of :func:`measurement_matrix`.

    (N, 6) inputs (a single 6-vector is one sample); the wrench must have as many samples as
    the twists (:class:`~inertial_id.core.errors.SampleError` otherwise). A NaN or inf in any
    input shows on the diagonal (``Z^T Z`` of a column with one is not finite).
    With ``tau`` (N,) (s, each sample's time from a reference: a drifting bias,
    :mod:`inertial_id.core.estimation.drift`) ``Z`` has it as a last column: (20, 20).
    """
    v = np.atleast_2d(np.asarray(twist, dtype=float))
    w = np.atleast_2d(np.asarray(wrench, dtype=float))
    if w.ndim != 2 or w.shape[1] != 6 or w.shape[0] != v.shape[0]:
        raise SampleError(f"wrenches {w.shape} must be (N, 6) for twists {v.shape}")
    z = np.empty((w.shape[0], GRAM_SIZE + (tau is not None)))
    if tau is not None:
        z[:, GRAM_SIZE] = tau
    regressor_features(v, np.atleast_2d(np.asarray(proper_acceleration, dtype=float)),
                       None if products is None else np.atleast_2d(products),
                       out=z[:, :GRAM_ONES])
    z[:, GRAM_ONES] = 1.0
    z[:, GRAM_WRENCH] = w
    return z.T @ z


def gram_samples(gram: NDArray[np.float64]) -> int:
    """N, the samples of a :func:`batch_gram` (the sum of its column of ones);
    :class:`~inertial_id.core.errors.SampleError` when a NaN or inf shows on its diagonal."""
    if not np.isfinite(np.diagonal(gram)).all():
        raise SampleError("regressor rows or measurements contain NaN or inf")
    return int(round(gram[GRAM_ONES, GRAM_ONES]))

class BatchNormalEquations:
    """The normal equations of a batch's rows ``w = [s Y, I6] [pi; offset]`` with fixed row
    weights, from its :func:`batch_gram` alone.

    The unknowns are ``x = [pi; offset]`` with ``pi = [m, mcx, mcy, mcz, Ixx, Ixy, Ixz, Iyy,
    Iyz, Izz]`` (kg, kg m, kg m^2; sensor frame, inertia about its origin) and the offset
    ``[fx, fy, fz, tx, ty, tz]`` (N, N m); ``sign`` is the wrench sign ``s`` and
    ``row_weights`` (6,) the weights ``w_r`` of the rows ``[fx, fy, fz, tx, ty, tz]`` of every
    sample (a zero leaves that row out: force rows alone are ``[wf, wf, wf, 0, 0, 0]``).

    Every row is linear in ``z = [features, 1]`` (13 per sample): the rows of sample ``n`` are
    ``A[n, r, :] = sum_f z[n, f] E[f, r, :]`` with ``E[f, r, :10] = s LINEAR_BASIS[f, r, :]``
    and ``E[12, r, 10 + r] = 1``. Hence ``A^T W A = sum_fg (Z^T Z)[f, g] K[f, g]`` with the
    constant ``K[f, g, a, b] = sum_r w_r E[f, r, a] E[g, r, b]``, ``A^T W b [a] =
    sum_fr (Z^T wrench)[f, r] w_r E[f, r, a]`` and ``b^T W b = sum_r w_r (wrench^T
    wrench)[r, r]``: equal to forming them from :func:`measurement_matrix`'s rows, to
    rounding.
    """

    def __init__(self, sign: float, row_weights: ArrayLike) -> None:
        weights = np.asarray(row_weights, dtype=float)
        if weights.shape != (6,):
            raise InertialIdError(f"row weights must be (6,), got {weights.shape}")
        self.sign = float(sign)
        self.row_weights = weights.copy()
        rows = np.zeros((13, 6, 16))
        rows[:12, :, :10] = self.sign * LINEAR_BASIS.reshape(12, 6, 10)
        rows[12, :, 10:] = np.eye(6)
        weighted = rows * weights[None, :, None]
        self.rows = rows
        """``E[f, r, :]`` (13, 6, 16): each ``z`` entry's rows, unweighted."""
        self._information = np.einsum("fra,grb->fgab", weighted, rows).reshape(169, 256)
        self._moment = weighted.reshape(78, 16)
        self.weighted_rows = weighted
        """``w_r E[f, r, :]`` (13, 6, 16): each ``z`` entry's weighted rows."""

    def __call__(self, gram: NDArray[np.float64]) -> tuple[NDArray[np.float64],
                                                           NDArray[np.float64], float]:
        """``(A^T W A (16, 16), A^T W b (16,), b^T W b)`` of the batch whose
        :func:`batch_gram` is ``gram``; the information is exactly symmetric."""
        information = (gram[:13, :13].reshape(169) @ self._information).reshape(16, 16)
        information = 0.5 * (information + information.T)
        moment = gram[:13, GRAM_WRENCH].reshape(78) @ self._moment
        energy = float(np.diagonal(gram)[GRAM_WRENCH] @ self.row_weights)
        return information, moment, energy


def normal_equations(
    twist: ArrayLike, proper_acceleration: ArrayLike, wrench: ArrayLike,
    row_weights: ArrayLike, sign: float = PAYLOAD_ON_SENSOR, products: ArrayLike | None = None,
) -> tuple[NDArray[np.float64], NDArray[np.float64], float]:
    """``(A^T W A, A^T W b, b^T W b)`` of a batch's rows (:func:`measurement_matrix`) with
    per-axis weights ``row_weights`` (6,) and targets the wrenches (N, 6): one-off
    :class:`BatchNormalEquations` of :func:`batch_gram` (keep the former for many batches)."""
    return BatchNormalEquations(sign, row_weights)(
        batch_gram(twist, proper_acceleration, wrench, products))


def measurement_matrix(
    twist: ArrayLike, proper_acceleration: ArrayLike, sign: float = PAYLOAD_ON_SENSOR,
    products: ArrayLike | None = None,
) -> NDArray[np.float64]:
    """Rows of ``w = [s Y, I6] [pi; offset]`` for a batch: (N, 6) inputs -> (6N, 16).

    The unknowns are ``x = [pi (10); offset (6)]``; the rows are the N samples' wrenches
    ``[fx, fy, fz, tx, ty, tz]`` stacked in order; ``products``: see :func:`regressor`.
    """
    y = regressor(np.atleast_2d(twist), np.atleast_2d(proper_acceleration),
                  None if products is None else np.atleast_2d(products))
    n = y.shape[0]
    a = np.empty((n, 6, 16))
    a[:, :, :10] = sign * y
    a[:, :, 10:] = np.eye(6)
    return a.reshape(6 * n, 16)


def noise_information_basis(row_weights: ArrayLike) -> NDArray[np.float64]:
    """``B`` (6, 6, 16, 16) with ``E[dA^T W dA] = sum_jk C_jk B[j, k]`` for the rows of
    :func:`measurement_matrix` of one sample whose ``[a_lin + w x v_lin; alpha]`` carries
    zero-mean noise of covariance ``C`` (6, 6); ``W = diag(row_weights)`` (6,) over
    ``[fx, fy, fz, tx, ty, tz]``.

    ``Y(v, a)`` is affine in the acceleration with the part ``sum_j a_j Y(0, e_j)`` (the
    twist's terms do not involve it), so the noise enters the rows as ``sum_j da_j Y(0, e_j)``;
    the wrench sign squares away and the offset's columns carry no noise.
    """
    y = regressor(np.zeros((6, 6)), np.eye(6))  # (6 components, 6 rows, 10)
    rows = np.zeros((6, 6, 16))
    rows[:, :, :10] = y
    return np.einsum("jra,r,krb->jkab", rows, np.asarray(row_weights, dtype=float), rows)


def predicted_wrench(
    pi: ArrayLike,
    twist: ArrayLike,
    proper_acceleration: ArrayLike,
    offset: ArrayLike | None = None,
    sign: float = PAYLOAD_ON_SENSOR,
    products: ArrayLike | None = None,
) -> NDArray[np.float64]:
    """The wrench the sensor should read, ``s Y(v, a_g) pi + offset`` (shape of the inputs;
    ``products``: see :func:`regressor`).

    Evaluated as Newton-Euler, ``f = m a + alpha x h + w x (w x h)`` and
    ``tau = I alpha + w x (I w) + h x a`` with ``a = a_lin + w x v_lin``, ``h = m c`` and
    ``I`` about the origin, which is ``Y pi`` without building ``Y``.
    """
    v = np.asarray(twist, dtype=float)
    acc = np.asarray(proper_acceleration, dtype=float)
    if v.shape != acc.shape or v.shape[-1] != 6:
        raise InertialIdError(f"twist {v.shape} and acceleration {acc.shape} must be (..., 6)")
    p = np.asarray(pi, dtype=float)
    h, inertia = p[1:4], symmetric_from_vector(p[4:10])
    w, alpha = v[..., 3:], acc[..., 3:]
    a = acc[..., :3] + cross(w, v[..., :3])
    wrench = _products(v, products) @ (QUADRATIC_BASIS @ p)  # w x (w x h), w x (I w)
    wrench[..., :3] += p[0] * a + cross(alpha, h)
    wrench[..., 3:] += alpha @ inertia + cross(h, a)
    wrench *= sign
    return wrench if offset is None else wrench + np.asarray(offset, dtype=float)
