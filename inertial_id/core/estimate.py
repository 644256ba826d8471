"""An estimate of ``x = [pi (10); offset (6)]`` with its uncertainty (:class:`Estimate`): how
a solution is packaged with its covariance (:func:`make_estimate`), the regressor's condition
number and which entries of ``pi`` the data determine (:func:`identifiability`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np
from numpy.typing import ArrayLike, NDArray

from inertial_id.core.covariance import (
    com_jacobian,
    derived_covariance,
    inertia_com_jacobian,
    robust_covariance,
    std_from_covariance,
)
from inertial_id.core.parameters import PI_NAMES, BodyParameters
from inertial_id.core.statistics import SufficientStatistics

N_PI = 10
N_OFFSET = 6
N_UNKNOWNS = N_PI + N_OFFSET


@dataclass(frozen=True)
class BiasDrift:
    """The drift of the F/T bias: ``rate`` (6,) N/s and N m/s (sensor frame), its ``std``,
    at ``time`` (s, the stamp of the latest sample: the estimate's offset is the bias then)."""

    rate: NDArray[np.float64]
    std: NDArray[np.float64]
    time: float


CARRIED = ("_std", "com_covariance", "com_std", "inertia_com_std")
"""The derived uncertainty :meth:`Estimate.carried_to` keeps (cached properties)."""


@dataclass(frozen=True)
class Estimate:
    """An estimate of the payload parameters and the F/T offset, with its uncertainty.

    ``body`` holds ``pi`` in the sensor frame about its origin; ``offset`` is the F/T bias
    ``[fx, fy, fz, tx, ty, tz]``; ``covariance`` is 16x16 over ``[pi; offset]`` (SI units,
    sensor frame); ``covariance_type`` says how it was computed (see :func:`make_estimate`);
    ``condition_number`` is that of the column-scaled regressor; ``min_eigenvalue`` is the
    smallest eigenvalue of ``J(pi)`` (positive means physically consistent).

    Immutable: its arrays are read-only, and the derived quantities below are computed once
    (a node publishes them after each solve).
    """

    body: BodyParameters
    offset: NDArray[np.float64]
    covariance: NDArray[np.float64]
    samples: float
    condition_number: float
    method: str
    covariance_type: str = "classical"
    drift: BiasDrift | None = None
    """The bias's drift rate when it is modelled (:mod:`inertial_id.core.estimation.drift`;
    ``offset`` is then the bias at its time), else None."""

    def __post_init__(self) -> None:
        for name in ("offset", "covariance"):
            object.__setattr__(self, name, _read_only(getattr(self, name)))

    @property
    def pi(self) -> NDArray[np.float64]:
        """``[m, mcx, mcy, mcz, Ixx, Ixy, Ixz, Iyy, Iyz, Izz]`` about the sensor origin."""
        return self.body.pi

    @cached_property
    def _std(self) -> NDArray[np.float64]:
        return _read_only(std_from_covariance(self.covariance))

    @property
    def std(self) -> NDArray[np.float64]:
        """Standard deviation of each entry of ``pi`` (kg, kg m, kg m^2)."""
        return self._std[:N_PI]

    @property
    def offset_std(self) -> NDArray[np.float64]:
        """Standard deviation of each entry of the offset (N, N m)."""
        return self._std[N_PI:]

    @cached_property
    def com_covariance(self) -> NDArray[np.float64]:
        """3x3 covariance of the CoM (m^2, sensor frame), delta method."""
        return _read_only(derived_covariance(com_jacobian(self.pi),
                                             self.covariance[:N_PI, :N_PI]))

    @cached_property
    def com_std(self) -> NDArray[np.float64]:
        """Standard deviation of the CoM ``[cx, cy, cz]`` (m, sensor frame), delta method."""
        return _read_only(std_from_covariance(self.com_covariance))

    @cached_property
    def inertia_com_std(self) -> NDArray[np.float64]:
        """Standard deviation of the inertia about the CoM, ``[Ixx, Ixy, Ixz, Iyy, Iyz, Izz]``
        (kg m^2, sensor axes), delta method."""
        jac = inertia_com_jacobian(self.pi)
        return _read_only(std_from_covariance(derived_covariance(
            jac, self.covariance[:N_PI, :N_PI])))

    @property
    def relative_std(self) -> NDArray[np.float64]:
        """``std / |pi|`` in percent (sigma %), inf where the parameter is zero."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.pi != 0.0, 100.0 * self.std / np.abs(self.pi), np.inf)

    @property
    def min_eigenvalue(self) -> float:
        """Smallest eigenvalue of the pseudo-inertia of ``pi``."""
        return self.body.min_pseudo_inertia_eigenvalue

    @property
    def physically_consistent(self) -> bool:
        """``J(pi)`` positive definite."""
        return self.body.is_physically_consistent()

    def carried_to(self, x: ArrayLike, samples: float,
                   drift: BiasDrift | None = None) -> Estimate:
        """An estimate of new parameters ``x = [pi; offset]`` (from ``samples`` samples; with
        ``drift``, the new drift rate) that carries this one's uncertainty unchanged: its
        covariance, condition number and the std derived from them (of the CoM and of the
        inertia about it, as computed at this estimate's parameters). For a solve between
        two refreshes of the uncertainty (:data:`~inertial_id.core.estimation.stage.
        UNCERTAINTY_PERIOD`): what the last refresh said, at most that period old."""
        x = np.asarray(x, dtype=float)
        carried = replace(self, body=BodyParameters.from_pi(x[:N_PI]),
                          offset=x[N_PI:].copy(), samples=samples, drift=drift)
        for name in CARRIED:
            carried.__dict__[name] = getattr(self, name)
        return carried


def _read_only(array: ArrayLike) -> NDArray[np.float64]:
    """A read-only float copy of ``array``; ``array`` itself when it is one already (owns
    its data, cannot be written: what this returned before), so that estimates that carry
    another's uncertainty share its covariance (:meth:`Estimate.carried_to`)."""
    if (isinstance(array, np.ndarray) and array.dtype == np.float64 and array.base is None
            and not array.flags.writeable):
        return array
    out = np.array(array, dtype=float)
    out.setflags(write=False)
    return out


def _scaled_eigh(information: NDArray[np.float64]
                 ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Eigenvalues and eigenvectors of ``A^T W A`` with unit-norm columns, and the column
    norms ``d`` (a zero one counted as 1: its unknown is not excited)."""
    d = np.sqrt(np.clip(np.diag(information), 0.0, None))
    d[d == 0.0] = 1.0
    values, vectors = np.linalg.eigh(information / np.outer(d, d))
    return values, vectors, d


def _condition(information: NDArray[np.float64], values: NDArray[np.float64]) -> float:
    """The condition number from the column-scaled eigenvalues ``values`` of
    ``information``: inf when a column is zero or an eigenvalue not positive."""
    if values[0] <= 0 or np.any(np.diag(information) <= 0.0):
        return float("inf")
    return float(np.sqrt(values[-1] / values[0]))


def scaled_condition_number(information: NDArray[np.float64]) -> float:
    """Condition number of the regressor with unit-norm columns, from ``A^T W A``."""
    return _condition(information, _scaled_eigh(information)[0])


def covariance_factor(information: NDArray[np.float64]) -> NDArray[np.float64]:
    """``(A^T W A)^-1``, with infinite variance for unknowns the data do not determine.

    Eigen-directions with eigenvalues below 1e-12 of the largest (in column-scaled units) are
    unexcited; any unknown with a component along one gets an infinite variance instead of
    the zero a pseudo-inverse would report.
    """
    return _factor(*_scaled_eigh(information))


def _factor(values: NDArray[np.float64], vectors: NDArray[np.float64],
            d: NDArray[np.float64]) -> NDArray[np.float64]:
    """:func:`covariance_factor` from :func:`_scaled_eigh`."""
    keep = values > 1e-12 * max(values[-1], 0.0)
    inverse = (vectors[:, keep] / values[keep]) @ vectors[:, keep].T / np.outer(d, d)
    undetermined = np.abs(vectors[:, ~keep]).max(axis=1, initial=0.0) > 1e-6
    inverse[np.diag_indices_from(inverse)] = np.where(undetermined, np.inf,
                                                      np.diag(inverse))
    return inverse


def make_estimate(
    stats: SufficientStatistics, x: NDArray[np.float64], method: str, offset_known: bool = False
) -> Estimate:
    """Package a solution ``x = [pi; offset]`` with its covariance.

    With block scores in ``stats`` (:attr:`SufficientStatistics.scores`) the covariance is the
    block-robust sandwich ``H^-1 (sum_j g_j g_j^T) H^-1`` of :mod:`inertial_id.core.covariance`
    with each variance corrected for its residual scores' shrinkage (a design effect per
    unknown on the classical matrix while
    there are fewer than :data:`~inertial_id.core.covariance.MIN_BLOCKS_PER_UNKNOWN` blocks
    per unknown); without,
    the classical ``sigma^2 (A^T W A)^-1`` with ``sigma^2 = residual / (rows - n)``, which
    assumes white noise; for statistics corrected for the rows' noise
    (:meth:`~inertial_id.core.statistics.SufficientStatistics.corrected`, ``H_c = A^T W A -
    E[dA^T W dA]``) it is ``sigma^2 H_c^-1 A^T W A H_c^-1`` (to first order in the noise's
    share), with the data's residual: that noise is part of the equation error.
    ``covariance_type`` says which.

    The scores are evaluated at ``x`` whatever produced it. When the LMI is active (``x`` on
    the boundary of the consistent set), the reported covariance is therefore that of the
    unconstrained linearisation at the constrained estimate: it ignores that the constraint
    truncates the distribution, so it over-states the spread towards the infeasible side and
    is not a confidence set for the truncated estimator; the residual's extra misfit at a
    boundary point enters the scores and inflates it slightly.

    With ``offset_known`` only ``pi`` was estimated: its covariance comes from the ``pi``
    block and the offset's is zero. Unknowns the data do not determine get infinite variance.
    """
    n = N_PI if offset_known else N_UNKNOWNS
    dof = max(stats.rows - n, 1.0)
    sigma2 = stats.residual(x) / dof
    eigen = _scaled_eigh(stats.information[:n, :n])
    factor = _factor(*eigen)
    undetermined = np.isinf(np.diag(factor))
    bread = np.where(np.isinf(factor), 0.0, factor)
    if stats.removed_noise.any():  # the score's variance is sigma^2 times the data's A^T W A
        bread_classical = bread @ stats.data_information[:n, :n] @ bread
    else:
        bread_classical = bread
    block, kind = sigma2 * bread_classical, "classical"
    scores = stats.scores
    if scores is not None and scores.effective_blocks > 1.0:
        meat = scores.meat(np.asarray(x, dtype=float))[:n, :n]
        padded = np.zeros((N_UNKNOWNS, N_UNKNOWNS))
        padded[:n, :n] = bread
        leverage = scores.leverage(padded)[:n, :n]
        block, kind = robust_covariance(bread, meat, leverage, scores, block)
    block[undetermined, :] = 0.0
    block[:, undetermined] = 0.0
    block[undetermined, undetermined] = np.inf
    covariance = np.zeros((N_UNKNOWNS, N_UNKNOWNS))
    covariance[:n, :n] = block
    return Estimate(
        body=BodyParameters.from_pi(x[:N_PI]),
        offset=x[N_PI:].copy(),
        covariance=covariance,
        samples=stats.samples,
        condition_number=_condition(stats.information[:n, :n], eigen[0]),
        method=method,
        covariance_type=kind,
    )


def identifiability(estimate: Estimate, max_relative_std: float = 10.0) -> dict[str, bool]:
    """Which entries of ``pi`` the data determine: std below ``max_relative_std`` percent.

    Entries near zero (products of inertia, an on-axis CoM) would have an unbounded sigma %,
    so each std is compared with the scale of its kind: ``m`` for the mass, ``m L`` for the
    first moments and ``m L^2`` for the inertia, ``L`` the larger of the CoM distance and the
    radius of gyration about the origin (at least 1 cm).
    """
    pi = estimate.pi
    mass = abs(pi[0]) or 1.0
    gyration = np.sqrt(abs(pi[4] + pi[7] + pi[9]) / (2.0 * mass))
    length = float(max(np.linalg.norm(pi[1:4]) / mass, gyration, 0.01))
    scale = np.concatenate(([mass], np.full(3, mass * length), np.full(6, mass * length**2)))
    relative = 100.0 * estimate.std / scale
    return {name: bool(r < max_relative_std) for name, r in zip(PI_NAMES, relative, strict=True)}
