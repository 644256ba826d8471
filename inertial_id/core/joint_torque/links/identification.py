"""One data set of a chain and its unconstrained estimators (:class:`LinkIdentification`).

The joint model ``e_j = s_j (Y_j pi) + F_j phi_j`` (see :mod:`inertial_id.core.joint_torque.links`)
in base parameters: regressors in the model's joint order, per-joint Gram matrices of
``[Y_b, F, e]`` (so re-weighting costs no pass over the data), weighted least squares with
sigma % (Bonnet et al. 2016), partial least squares (Traversaro et al. 2013) and the CAD
baseline with fitted drive terms. Joint data in rad, rad/s, rad/s^2 (m ... for prismatic
joints), efforts in the measurement's units.
"""


from __future__ import annotations

import copy
from dataclasses import replace

import numpy as np
from numpy.typing import ArrayLike, NDArray

from inertial_id.core.errors import SampleError, SolverError
from inertial_id.core.estimate import covariance_factor
from inertial_id.core.estimation.pls import pls_components_by_rss, pls_path
from inertial_id.core.joint_torque.friction import FrictionModel
from inertial_id.core.joint_torque.link_model import (
    BaseParameters,
    LinkModel,
    structural_base_parameters,
)
from inertial_id.core.joint_torque.links.estimate import LinkEstimate, correlation_times
from inertial_id.core.statistics import SufficientStatistics


class LinkIdentification:
    """One data set of a chain: regressors, base parameters, friction; the estimators.

    ``q, qd, qdd, effort`` are (N, nv) in the model's joint order (rad, rad/s, rad/s^2; m ...
    for prismatic joints; effort in the measurement's units). ``effort_scale`` is ``s`` (effort
    per N m, default 1: efforts are torques). ``base`` defaults to the structural base
    parameters of the model. ``mask`` (N, nv) selects the equations the estimators use (e.g.
    leave out a joint's samples at rest, where Coulomb friction is undetermined); predictions
    cover every sample. ``correlated_residuals`` corrects the covariance (and sigma %) for
    coloured residuals, see :meth:`_estimate`. ``known_scale`` (bool per joint) marks the
    effort scales that are known (e.g. one reference gain, which anchors the common scale):
    fitting and refinement leave them unchanged.
    """

    def __init__(
        self,
        model: LinkModel,
        q: ArrayLike,
        qd: ArrayLike,
        qdd: ArrayLike,
        effort: ArrayLike,
        friction: FrictionModel | None = None,
        base: BaseParameters | None = None,
        effort_scale: ArrayLike | None = None,
        mask: ArrayLike | None = None,
        correlated_residuals: bool = False,
        known_scale: ArrayLike | None = None,
    ) -> None:
        self.model = model
        # Joints whose effort scale is known: fit_cad and the refinement keep theirs.
        self.known_scale = (np.zeros(model.n, bool) if known_scale is None
                            else np.asarray(known_scale, dtype=bool).reshape(model.n))
        self.correlated_residuals = correlated_residuals
        self.friction_model = friction or FrictionModel()
        self.base = base or structural_base_parameters(model)
        q, qd, qdd, effort = model.batch(q, qd, qdd, effort)
        if not all(np.all(np.isfinite(a)) for a in (q, qd, qdd, effort)):
            raise SampleError("joint data contain NaN or inf")
        self.effort, self.qd, self.qdd = effort, qd, qdd
        self.yb = self.base.base_regressor(model.regressor(q, qd, qdd))
        self.f = self.friction_model.regressor(qd, qdd)
        self.effort_scale = (np.ones(model.n) if effort_scale is None
                             else np.asarray(effort_scale, dtype=float).copy())
        self.mask = (np.ones(effort.shape, bool) if mask is None
                     else np.asarray(mask, dtype=bool).reshape(effort.shape))
        self._accumulate()
        self.friction_names = self.friction_model.names(model.joint_names)
        self.base_names = self.base.expressions(model.parameter_names)

    def _accumulate(self) -> None:
        """Per-joint Gram matrices of ``[Y_b, F, e]`` over the masked samples, and counts."""
        augmented = np.concatenate((self.yb, self.f, self.effort[..., None]), axis=-1)
        self._gram = np.array([augmented[self.mask[:, j], j].T @ augmented[self.mask[:, j], j]
                               for j in range(self.model.n)])
        self._counts = self.mask.sum(axis=0).astype(float)

    def subset(self, index: ArrayLike) -> LinkIdentification:
        """The same problem on the samples ``index`` (integer indices or a boolean mask of
        length N), e.g. a cross-validation fold: regressors are sliced, not recomputed (a
        friction state with memory stays the one computed over the whole record); the effort
        scales and options are copied."""
        rows = np.arange(self.samples)[np.asarray(index)]
        out = copy.copy(self)
        for name in ("effort", "qd", "qdd", "yb", "f", "mask"):
            setattr(out, name, getattr(self, name)[rows])
        out.effort_scale = self.effort_scale.copy()
        out._accumulate()
        return out

    def with_friction(self, friction: FrictionModel) -> LinkIdentification:
        """The same data with another friction model (the rigid-body regressor is shared)."""
        out = copy.copy(self)
        out.friction_model = friction
        out.f = friction.regressor(self.qd, self.qdd)
        out.friction_names = friction.names(self.model.joint_names)
        out.effort_scale = self.effort_scale.copy()
        out._accumulate()
        return out

    @property
    def samples(self) -> int:
        """Number of samples N."""
        return int(self.effort.shape[0])

    @property
    def n_unknowns(self) -> int:
        """Base parameters plus friction coefficients."""
        return self.base.count + self.f.shape[-1]

    # -- linear algebra ------------------------------------------------------------------

    def _scaling(self, effort_scale: NDArray[np.float64] | None) -> NDArray[np.float64]:
        """Per joint, the column scaling ``[s_j (base); 1 (friction)]``: (nv, n_b + n_f)."""
        s = self.effort_scale if effort_scale is None else np.asarray(effort_scale, float)
        d = np.ones((self.model.n, self.n_unknowns))
        d[:, :self.base.count] = s[:, None]
        return d

    def rows(self, effort_scale: NDArray[np.float64] | None = None
             ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Rows ``A`` (N nv, n_b + n_f) and targets ``b`` (N nv,), sample-major."""
        a = np.concatenate((self.yb, self.f), axis=-1) * self._scaling(effort_scale)[None]
        return a.reshape(-1, a.shape[-1]), self.effort.reshape(-1)

    def statistics(self, joint_sigma: ArrayLike,
                   effort_scale: NDArray[np.float64] | None = None) -> SufficientStatistics:
        """Weighted statistics with row weights ``1 / sigma_j^2`` per joint.

        Built from per-joint Gram matrices of ``[Y_b, F, e]`` computed once, so re-weighting
        or a new effort scale costs O(nv n^2), not a pass over the data.
        """
        w = np.asarray(joint_sigma, dtype=float) ** -2
        d = self._scaling(effort_scale)
        n = self.n_unknowns
        stats = SufficientStatistics(n)
        g = self._gram
        stats.information = np.einsum("j,ja,jab,jb->ab", w, d, g[:, :n, :n], d)
        stats.moment = np.einsum("j,ja,ja->a", w, d, g[:, :n, n])
        stats.energy = float(w @ g[:, n, n])
        stats.rows = float(self._counts.sum())
        stats.samples = float(self.samples)
        return stats

    def predict(self, estimate: LinkEstimate) -> NDArray[np.float64]:
        """Predicted efforts (N, nv) of an estimate."""
        rigid = np.einsum("njb,b->nj", self.yb, estimate.base)
        return estimate.effort_scale * rigid + np.einsum("njf,f->nj", self.f, estimate.friction)

    def rms(self, estimate: LinkEstimate) -> NDArray[np.float64]:
        """Per-joint RMS of measured minus predicted effort."""
        return np.sqrt(np.mean((self.effort - self.predict(estimate)) ** 2, axis=0))

    def _joint_sigma(self, x: NDArray[np.float64],
                     effort_scale: NDArray[np.float64] | None = None) -> NDArray[np.float64]:
        """Per-joint residual std at ``x`` (from the Gram matrices)."""
        d = self._scaling(effort_scale)
        xa = np.concatenate((d * x[None, :], -np.ones((self.model.n, 1))), axis=1)
        squares = np.clip(np.einsum("ja,jab,jb->j", xa, self._gram, xa), 0.0, None)
        dof = np.maximum(self._counts - self.n_unknowns / self.model.n, 1.0)
        sigma = np.sqrt(squares / dof)
        rms = np.sqrt(self._gram[:, -1, -1] / np.maximum(self._counts, 1.0))
        # Noiseless joints: a floor keeps the weights finite (relative to the effort's size).
        return np.maximum(sigma, 1e-9 * np.maximum(rms, 1e-12))

    def _estimate(self, method: str, x: NDArray[np.float64], sigma: NDArray[np.float64],
                  standard: NDArray[np.float64] | None = None,
                  effort_scale: NDArray[np.float64] | None = None,
                  **info: object) -> LinkEstimate:
        """Package ``x = [pi_b; phi]`` with its covariance.

        White residuals give ``s^2 (A^T W A)^-1``. Residuals of filtered, sampled efforts are
        coloured, which makes that optimistic by about each joint's integrated
        autocorrelation time ``t_j`` (in samples); with :attr:`correlated_residuals` the
        covariance is the sandwich ``s^2 H^-1 (sum_j t_j H_j) H^-1`` (``H_j`` joint j's share
        of ``H = A^T W A``), so sigma % stay honest.
        """
        scale = self.effort_scale if effort_scale is None else effort_scale
        stats = self.statistics(sigma, scale)
        dof = max(stats.rows - self.n_unknowns, 1.0)
        factor = covariance_factor(stats.information)
        finite = np.where(np.isinf(factor), 0.0, factor)
        times = np.ones(self.model.n)
        if self.correlated_residuals:
            times = correlation_times(self._residual(x, scale))
            d = self._scaling(scale)
            w = np.asarray(sigma, dtype=float) ** -2
            meat = np.einsum("j,ja,jab,jb->ab", w * times, d, self._gram[:, :-1, :-1], d)
            finite = finite @ meat @ finite
        covariance = np.where(np.isinf(factor), np.inf, stats.residual(x) / dof * finite)
        nb = self.base.count
        return LinkEstimate(method, x[:nb].copy(), x[nb:].copy(), np.array(scale, float),
                            covariance, sigma, standard,
                            dict(info, correlation_time=times.tolist()))

    def _residual(self, x: NDArray[np.float64], scale: NDArray[np.float64]
                  ) -> NDArray[np.float64]:
        """Measured minus predicted effort (N, nv), zero outside the mask."""
        nb = self.base.count
        rigid = np.einsum("njb,b->nj", self.yb, x[:nb])
        predicted = scale * rigid + np.einsum("njf,f->nj", self.f, x[nb:])
        return np.where(self.mask, self.effort - predicted, 0.0)

    # -- estimators ------------------------------------------------------------------------

    def _solve_normal(self, stats: SufficientStatistics) -> NDArray[np.float64]:
        """Least squares from the statistics: column-scaled pseudo-inverse (eigenvalues below
        1e-12 of the largest are dropped: unexcited directions get zero)."""
        diag = np.diag(stats.information)
        d = np.sqrt(np.where(diag > 0, diag, 1.0))
        values, vectors = np.linalg.eigh(stats.information / np.outer(d, d))
        keep = values > 1e-12 * max(values[-1], 0.0)
        y = vectors[:, keep] @ ((vectors[:, keep].T @ (stats.moment / d)) / values[keep])
        return y / d

    def weighted_least_squares(self) -> LinkEstimate:
        """Bonnet et al. (2016) eq. (7): WLS of ``[pi_b; phi]``, weights from a first OLS pass
        (``1 / sigma_j^2``, ``sigma_j`` the joint's residual std)."""
        if self._counts.sum() < self.n_unknowns:
            raise SolverError(f"{self._counts.sum():.0f} equations cannot determine "
                              f"{self.n_unknowns} unknowns")
        x = self._solve_normal(self.statistics(np.ones(self.model.n)))
        sigma = self._joint_sigma(x)
        x = self._solve_normal(self.statistics(sigma))
        return self._estimate("wls", x, sigma)

    def partial_least_squares(self, n_components: int | None = None,
                              tolerance: float = 1e-3) -> LinkEstimate:
        """PLS on the weighted statistics (Traversaro et al. 2013), ``n_components`` latent
        variables (default: the fewest within ``tolerance`` of the LS residual)."""
        sigma = self.weighted_least_squares().joint_sigma
        stats = self.statistics(sigma)
        if n_components is None:
            n_components = pls_components_by_rss(stats, tolerance)
        x = pls_path(stats, n_components)[-1]
        return self._estimate("pls", x, sigma, components=int(n_components))

    def fit_cad(self, cad: NDArray[np.float64] | None = None,
                fit_scale: bool | ArrayLike = True) -> LinkEstimate:
        """The CAD model made fair: CAD inertials (or ``cad``), friction/offsets and the effort
        scales ``s_j`` fitted per joint by least squares on these data.

        ``fit_scale``: ``True`` fits every scale not marked known, ``False`` none, a bool per
        joint those joints (known ones never). ``info["effort_scale_relative_std"]`` is the
        sigma % of each fitted scale (NaN when not fitted), from the per-joint least squares,
        times the residual's correlation time when :attr:`correlated_residuals`.
        """
        cad = self.model.cad if cad is None else np.asarray(cad, dtype=float)
        base = self.base.regrouping @ cad.ravel()
        rigid = np.einsum("njb,b->nj", self.yb, base)
        scale = self.effort_scale.copy()
        friction = np.zeros(self.f.shape[-1])
        fitted = np.broadcast_to(np.asarray(fit_scale, dtype=bool), (self.model.n,))
        fitted = fitted & ~self.known_scale
        scale_factor = np.full(self.model.n, np.nan)  # [(A^T A)^-1]_00 of a fitted scale
        for j in range(self.model.n):
            rows = self.mask[:, j]
            cols = np.flatnonzero(np.any(self.f[rows, j, :] != 0, axis=0))
            a = self.f[rows, j][:, cols]
            target = self.effort[rows, j]
            if fitted[j]:
                a = np.column_stack((rigid[rows, j], a))
                scale_factor[j] = covariance_factor(a.T @ a)[0, 0]
            else:
                target = target - scale[j] * rigid[rows, j]
            coef = np.linalg.lstsq(a, target, rcond=None)[0]
            if fitted[j]:
                scale[j], coef = coef[0], coef[1:]
            friction[cols] = coef
        x = np.concatenate((base, friction))
        sigma = self._joint_sigma(x, scale)
        estimate = self._estimate("cad", x, sigma, standard=cad.copy(), effort_scale=scale)
        times = np.asarray(estimate.info["correlation_time"])
        with np.errstate(divide="ignore", invalid="ignore"):
            relative = 100.0 * sigma * np.sqrt(scale_factor * times) / np.abs(scale)
        return replace(estimate, info={**estimate.info,
                                       "effort_scale_relative_std": relative.tolist()})
