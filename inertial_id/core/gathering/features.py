"""The sensor-frame features matched filtering smooths, and back.

The regressor ``Y(v, a)`` is linear in ``a_lin + w x v_lin``, in ``alpha`` and in the six
products of the angular velocity ``w_i w_j`` (its only terms in ``w``: ``w x (w x h)`` and
``w x (I w)``); smoothing those (rather than ``a_lin`` and ``w``) keeps the rigid-body equation
exact under the filter (:mod:`inertial_id.core.gathering.synchronizer`). Smoothing ``w`` and
multiplying
the smoothed factors instead misses the kernel-weighted spread of ``w`` over the window, a
bias that grows with the window and the speed (several standard deviations of the estimate
on a fast motion with a 70 ms window).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from inertial_id.core.regressor import angular_products, cross

N_FEATURES = 18
"""Sensor-frame features smoothed by matched filtering: ``[v (6), a_lin + w x v_lin (3),
alpha (3), w products (6)]`` (products in the order of
:func:`~inertial_id.core.regressor.angular_products`)."""


def encode_features(twist: NDArray[np.float64],
                    proper: NDArray[np.float64]) -> NDArray[np.float64]:
    """(N, 6) twist and proper acceleration -> (N, 18) features, linear in what the regressor
    is linear in (module doc)."""
    out = np.empty(twist.shape[:-1] + (N_FEATURES,))
    out[..., :6] = twist
    out[..., 6:9] = proper[..., :3] + cross(twist[..., 3:], twist[..., :3])
    out[..., 9:12] = proper[..., 3:]
    out[..., 12:] = angular_products(twist[..., 3:])
    return out


def decode_features(features: NDArray[np.float64]) -> tuple[
        NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """(N, 18) smoothed features -> twist, proper acceleration and angular-velocity products
    (N, 6) whose regressor has the smoothed ``a_lin + w x v_lin``, ``alpha`` and products
    (see :func:`encode_features`)."""
    twist = features[..., :6].copy()
    proper = np.empty(twist.shape)
    proper[..., :3] = features[..., 6:9] - cross(twist[..., 3:], twist[..., :3])
    proper[..., 3:] = features[..., 9:12]
    return twist, proper, features[..., 12:].copy()
