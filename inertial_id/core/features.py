"""The sensor-frame features matched filtering smooths, and back.

The regressor ``Y(v, a)`` is linear in the twist ``v``, in ``a_lin + w x v_lin`` and in
``alpha``; smoothing those (rather than ``a_lin``) keeps the Coriolis term exact under the
filter (:mod:`inertial_id.core.synchronizer`).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from inertial_id.core.regressor import cross

N_FEATURES = 12
"""Sensor-frame features smoothed by matched filtering: ``[v (6), a_lin + w x v_lin (3),
alpha (3)]``."""


def encode_features(twist: NDArray[np.float64],
                    proper: NDArray[np.float64]) -> NDArray[np.float64]:
    """(N, 6) twist and proper acceleration -> (N, 12) features, linear in what the regressor
    is linear in: ``Y(v, a)`` depends on ``a`` only through ``a_lin + w x v_lin`` and
    ``alpha``, so smoothing these (rather than ``a_lin``) keeps the Coriolis term exact; only
    the products of the angular velocity (``w x (w x .)``) are smoothed as products of
    smoothed factors."""
    out = np.empty(twist.shape[:-1] + (N_FEATURES,))
    out[..., :6] = twist
    out[..., 6:9] = proper[..., :3] + cross(twist[..., 3:], twist[..., :3])
    out[..., 9:] = proper[..., 3:]
    return out


def decode_features(features: NDArray[np.float64]
                    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(N, 12) smoothed features -> twist and proper acceleration whose regressor has the
    smoothed ``a_lin + w x v_lin`` and ``alpha`` (see :func:`encode_features`)."""
    twist = features[..., :6].copy()
    proper = np.empty(twist.shape)
    proper[..., :3] = features[..., 6:9] - cross(twist[..., 3:], twist[..., :3])
    proper[..., 3:] = features[..., 9:]
    return twist, proper
