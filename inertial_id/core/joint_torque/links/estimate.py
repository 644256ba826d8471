"""An identified model of a robot's links (:class:`LinkEstimate`) and its uncertainty.

``base`` are the base parameters ``K pi`` (SI units), ``friction`` the friction/offset
coefficients (effort units), ``effort_scale`` ``s_j`` (effort units per N m); the covariance is
over ``[base; friction]``. :func:`correlation_times` measures how coloured a residual is (in
samples), which :class:`~inertial_id.core.joint_torque.links.identification.LinkIdentification` uses
to keep
sigma % honest. The joint model and frames are in :mod:`inertial_id.core.joint_torque.links`.
"""


from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from inertial_id.core.parameters import is_physically_consistent


@dataclass(frozen=True)
class LinkEstimate:
    """An identified model of the chain.

    ``base`` are the base parameters ``K pi`` (SI units), ``friction`` the friction/offset
    coefficients (effort units, :class:`FrictionModel` order), ``effort_scale`` ``s_j``
    (effort per N m), ``covariance`` over ``[base; friction]`` from the weighted residual,
    ``standard`` the per-body ``pi`` (n, 10; joint frames) when the method gives them,
    ``joint_sigma`` the per-joint residual std used as weights (effort units).
    """

    method: str
    base: NDArray[np.float64]
    friction: NDArray[np.float64]
    effort_scale: NDArray[np.float64]
    covariance: NDArray[np.float64]
    joint_sigma: NDArray[np.float64]
    standard: NDArray[np.float64] | None = None
    info: dict = field(default_factory=dict)

    @property
    def std(self) -> NDArray[np.float64]:
        """Standard deviation of ``[base; friction]``."""
        return np.sqrt(np.clip(np.diag(self.covariance), 0.0, None))

    @property
    def relative_std(self) -> NDArray[np.float64]:
        """sigma % of ``[base; friction]`` (Bonnet et al.: > 10 % is poorly identified)."""
        x = np.concatenate((self.base, self.friction))
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(x != 0.0, 100.0 * self.std / np.abs(x), np.inf)

    @property
    def solution(self) -> NDArray[np.float64]:
        """``[base; friction]``."""
        return np.concatenate((self.base, self.friction))

    def link_consistency(self, attachments: NDArray[np.float64] | None = None
                         ) -> list[bool]:
        """Per body: ``J(pi_i - a_i)`` positive definite (``attachments`` None: the bodies)."""
        if self.standard is None:
            return []
        a = np.zeros_like(self.standard) if attachments is None else attachments
        return [is_physically_consistent(p) for p in self.standard - a]


def correlation_times(residual: NDArray[np.float64], window: float = 5.0
                      ) -> NDArray[np.float64]:
    """Integrated autocorrelation time (samples, >= 1) of each column of ``residual`` (N, k).

    ``t = 1 + 2 sum_{l=1}^{M} rho(l)`` with Sokal's window: the smallest ``M >= window t``.
    """
    r = np.asarray(residual, dtype=float)
    n = r.shape[0]
    r = r - r.mean(axis=0)
    spectrum = np.fft.rfft(r, 2 * n, axis=0)
    acov = np.fft.irfft(np.abs(spectrum) ** 2, axis=0)[:n]
    out = np.ones(r.shape[1])
    for j in range(r.shape[1]):
        if acov[0, j] <= 0:
            continue
        rho = acov[:, j] / acov[0, j]
        cumulative = 1.0 + 2.0 * np.cumsum(rho[1:])
        lags = np.arange(1, n)
        stop = np.flatnonzero(lags >= window * cumulative)
        out[j] = max(float(cumulative[stop[0]] if stop.size else cumulative[-1]), 1.0)
    return out
