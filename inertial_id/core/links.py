"""Identification of a robot's own links from joint torques (or motor efforts).

Conventions
-----------
- Each moving joint ``i`` of the (reduced) chain carries one rigid **body**: its URDF child link
  plus everything rigidly attached to it (fixed-joint children, locked sub-trees), as pinocchio
  merges them. Its parameters ``pi_i`` are in the package order
  ``[m, mcx, mcy, mcz, Ixx, Ixy, Ixz, Iyy, Iyz, Izz]`` **about the origin of joint i's frame, in
  its axes** (for a URDF that is the child link's frame), SI units. The standard vector stacks
  them in pinocchio's joint order: ``pi = [pi_1; ...; pi_n]`` (10 n entries).
- The **own** parameters of the child link are ``pi_i - a_i``, with ``a_i`` the CAD parameters
  of the rest of the body (:attr:`LinkModel.attachments`); the URDF writer writes them.
- Joint model: ``e_j = s_j (Y_j(q, qd, qdd) pi) + F_j(qd) phi_j`` per joint ``j``, with ``e`` the
  measured effort, ``Y`` the joint-torque regressor (gravity included), ``F`` the friction
  regressor (:class:`FrictionModel`) and ``s_j`` the **effort scale**: effort units per N m
  (N for a prismatic joint). A drive gain ``k_j`` (torque per effort unit) is ``1 / s_j``. With
  efforts that already are torques ``s = 1``. Friction ``phi`` is in effort units.
- Drive gains and the scale ambiguity: ``(s, pi, phi) -> (s / a, a pi, phi)`` leaves every
  effort unchanged, so efforts alone never give the absolute scale of ``pi`` when all gains are
  unknown (Traversaro et al. 2013, Gautier and Briot 2011). Something must anchor it: known
  gains (``s`` fixed), a known payload, an F/T sensor, or a CAD prior. Here
  :meth:`LinkIdentification.fit_cad` fits ``s_j`` per joint against the CAD torques, and the
  prior of the constrained estimators then anchors the scale when gains are refined.
- Base parameters (Gautier's numerical method, used by Bonnet et al. 2016): ``Y = Y_b K`` and
  ``pi_b = K pi``; ``Y_b`` has full column rank.

Contents: :class:`LinkIdentification` (data, WLS with sigma %, PLS, the CAD baseline with
fitted drive terms), :class:`ConstrainedLinkEstimator` (SDP / QP with the CAD prior),
:func:`identify` (the estimator) and the result as documents (:func:`estimate_document`,
:func:`link_document`); the workflow the ``identify-links`` command and the solver's
``links`` mode share, with its choices from the data, is
:func:`inertial_id.core.link_selection.identify_links`. The chain model and base
parameters are in :mod:`inertial_id.core.link_model`, friction in
:mod:`inertial_id.core.friction`, writing the URDF in :mod:`inertial_id.core.link_urdf`.
"""


from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace

import cvxpy as cp
import numpy as np
from numpy.typing import ArrayLike, NDArray

from inertial_id.core.errors import SampleError, SolverError
from inertial_id.core.estimators import (
    covariance_factor,
    pseudo_inertia_expression,
    square_root,
)
from inertial_id.core.friction import FrictionModel
from inertial_id.core.link_model import N_PI, BaseParameters, LinkModel, structural_base_parameters
from inertial_id.core.parameters import (
    BodyParameters,
    is_physically_consistent,
    min_pseudo_inertia_eigenvalue,
    pseudo_inertia,
)
from inertial_id.core.pls import pls_components_by_rss, pls_path
from inertial_id.core.statistics import SufficientStatistics

# ------------------------------------------------------------------------------ estimates


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


def _scales(cad: NDArray[np.float64]) -> NDArray[np.float64]:
    """Per-body units of ``pi``: ``[M, ML x3, ML^2 x6]`` from the CAD mass and gyration."""
    out = np.empty_like(cad)
    for i, pi in enumerate(cad):
        mass = max(abs(pi[0]), 0.05)
        length = float(np.clip(np.sqrt(abs(pi[4] + pi[7] + pi[9]) / (2 * mass)), 0.02, 1.0))
        out[i] = np.concatenate(([mass], np.full(3, mass * length), np.full(6, mass * length**2)))
    return out


def _lmi_blocks(scale: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
    """Mass unit and ``T = diag(L, L, L, 1)`` of a body's scaled pseudo-inertia."""
    mass = scale[0]
    length = scale[1] / mass
    return mass, np.array([length, length, length, 1.0])


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


# ----------------------------------------------------------------- constrained estimators


class ConstrainedLinkEstimator:
    """CAD-prior estimate of the standard parameters, physically consistent per link.

    Solves (Wensing et al. 2017, eq. 25; Bonnet et al. 2016, eq. 8)

        min ||A [K pi; phi] - e||^2_W / ||e||^2_W + w sum_i ||(pi_i - pi_CAD,i) / u_i||^2

    with ``u_i`` the units ``[M, ML, ML^2]`` of body ``i`` (CAD mass M and gyration L): the
    data term is relative to the weighted energy of the efforts, so ``prior_weight`` ``w`` is
    unit-free (``1e-3``: moving one parameter by one unit from CAD costs as much as 0.1 % of
    the signal), subject to

    - ``method="sdp"``: ``J(pi_i - a_i) >= epsilon`` (scaled LMI per link, CLARABEL);
    - ``method="qp"`` (Bonnet's QP, OSQP): linear inequalities only, cutting planes
      ``u^T J(pi_i - a_i) u >= epsilon`` (scaled) for directions ``u`` in R^4: the axes
      (``u = e_4`` is Bonnet's ``m_i >= 0``), sampled ``u = (d, 0)`` (``d^T Sigma d >= eps``,
      Bonnet's sampled inertia constraint, here on the density covariance ``Sigma``, which
      also gives the triangle inequalities) and random ones; then, while some ``J`` is not
      positive definite, the eigenvector of its smallest eigenvalue is added as a cut and the
      QP re-solved (an outer approximation converging to the LMI).

    Both may add a CoM box ``c_CAD - margin <= c_i <= c_CAD + margin`` (linear in ``pi``).
    ``consistency="link"`` applies the constraints to the child link alone (``a_i`` = CAD of
    what is rigidly attached, see :class:`LinkModel`), ``"body"`` to the whole body
    (``a_i = 0``). The cvxpy problem is built once with parameters; new statistics or prior
    weights only change their values.
    """

    def __init__(
        self,
        model: LinkModel,
        base: BaseParameters,
        n_friction: int,
        method: str = "sdp",
        prior: ArrayLike | None = None,
        prior_weight: float = 1e-3,
        epsilon: float = 1e-6,
        consistency: str = "link",
        com_margin: float | None = None,
        friction_ridge: float = 1e-9,
        max_cuts: int = 60,
        hold: ArrayLike | None = None,
    ) -> None:
        if method not in ("sdp", "qp"):
            raise SolverError(f"unknown constrained method {method!r}: sdp or qp")
        if consistency not in ("link", "body"):
            raise SolverError(f"consistency must be 'link' or 'body', got {consistency!r}")
        self.model, self.base, self.method = model, base, method
        self.n, self.nf = model.n, n_friction
        self.prior = model.cad.copy() if prior is None else np.asarray(prior, float).reshape(
            model.n, N_PI)
        self.attach = model.attachments if consistency == "link" else np.zeros_like(model.cad)
        self.epsilon, self.max_cuts = epsilon, max_cuts
        self.prior_weight_value = float(prior_weight)
        self.units = _scales(self.prior)
        self._v = cp.Variable(self.n * N_PI)   # pi / units
        self._u = cp.Variable(n_friction)     # phi * friction units
        nx = base.count + n_friction
        self._r = cp.Parameter((nx, nx))
        self._z = cp.Parameter(nx)
        self._prior_root = cp.Parameter(nonneg=True)
        self._prior_target = cp.Parameter(self.n * N_PI)
        self._friction_unit = np.ones(n_friction)
        self._dropped = 0.0
        ks = base.regrouping * self.units.ravel()
        self._ks = ks
        # y = [K pi; phi] as its own variable keeps the parametric product R y small to compile.
        y = cp.Variable(nx)
        objective = (cp.sum_squares(self._r @ y - self._z)
                     + cp.sum_squares(self._prior_root * self._v - self._prior_target)
                     + friction_ridge * cp.sum_squares(self._u))
        constraints = [y == cp.hstack([ks @ self._v, self._u])]
        # Base parameters held at the prior's values (Bonnet: unreliable ones leave the fit).
        self.hold = (np.zeros(base.count, bool) if hold is None
                     else np.asarray(hold, dtype=bool).reshape(base.count))
        self._hold_target = cp.Parameter(int(self.hold.sum()))
        if self.hold.any():
            constraints.append(ks[self.hold] @ self._v == self._hold_target)
        constraints += self._box(com_margin)
        if method == "sdp":
            constraints += self._lmis()
        else:
            constraints += self._cut_constraints()
        self._problem = cp.Problem(cp.Minimize(objective), constraints)

    # -- constraints -----------------------------------------------------------------------

    def _scaled_pi(self, i: int) -> cp.Expression:
        """``(pi_i - a_i)`` as an affine expression of the variable (SI units)."""
        return cp.multiply(self.units[i], self._v[N_PI * i:N_PI * (i + 1)]) - self.attach[i]

    def _lmis(self) -> list:
        out = []
        for i in range(self.n):
            mass, t = _lmi_blocks(self.units[i])
            tinv = np.diag(1.0 / t)
            j = tinv @ pseudo_inertia_expression(self._scaled_pi(i)) @ tinv / mass
            out.append(j - self.epsilon * np.eye(4) >> 0)
        return out

    def _box(self, margin: float | None) -> list:
        if margin is None:
            return []
        out = []
        for i in range(self.n):
            pi = self._scaled_pi(i) + self.attach[i]  # the body: its CAD CoM is the box centre
            mass = self.prior[i, 0]
            if mass <= 0:
                continue
            centre = self.prior[i, 1:4] / mass
            out += [pi[1:4] >= pi[0] * (centre - margin), pi[1:4] <= pi[0] * (centre + margin)]
        return out

    def _cut_constraints(self) -> list:
        """Preallocated cutting planes ``G_i v_i >= h_i`` per link (unused rows inactive)."""
        directions = _initial_directions()
        self._n_initial = len(directions)
        rows = self._n_initial + self.max_cuts
        self._g = [cp.Parameter((rows, N_PI)) for _ in range(self.n)]
        self._h = [cp.Parameter(rows) for _ in range(self.n)]
        self._basis = []
        self._cuts: list[list[NDArray[np.float64]]] = []
        for i in range(self.n):
            mass, t = _lmi_blocks(self.units[i])
            # J_hat(v) = J0 + sum_k v_k E_k, scaled: T^-1 J(units v - a) T^-1 / M.
            tinv = np.diag(1.0 / t)
            e = np.array([tinv @ pseudo_inertia(self.units[i] * np.eye(N_PI)[k]) @ tinv / mass
                          for k in range(N_PI)])
            j0 = -tinv @ pseudo_inertia(self.attach[i]) @ tinv / mass
            self._basis.append((j0, e))
            self._cuts.append(list(directions))
        self._refresh_cuts()
        out = []
        for i in range(self.n):
            v = self._v[N_PI * i:N_PI * (i + 1)]
            out.append(self._g[i] @ v >= self._h[i])
        return out

    def _refresh_cuts(self) -> None:
        rows = self._n_initial + self.max_cuts
        for i in range(self.n):
            j0, e = self._basis[i]
            # Unused rows repeat the first cut: the sparsity pattern never changes.
            cuts = self._cuts[i][:rows]
            cuts = cuts + [cuts[0]] * (rows - len(cuts))
            g = np.zeros((rows, N_PI))
            h = np.zeros(rows)
            for k, u in enumerate(cuts):
                g[k] = np.einsum("a,kab,b->k", u, e, u)
                h[k] = self.epsilon - u @ j0 @ u
            self._g[i].value, self._h[i].value = g, h

    def _scaled_j(self, v: NDArray[np.float64], i: int) -> NDArray[np.float64]:
        j0, e = self._basis[i]
        return j0 + np.einsum("k,kab->ab", v[N_PI * i:N_PI * (i + 1)], e)

    # -- solve -------------------------------------------------------------------------------

    def solve(self, problem: LinkIdentification, joint_sigma: ArrayLike) -> LinkEstimate:
        """The constrained estimate for ``problem`` weighted by ``joint_sigma``."""
        self._hold_target.value = (self.base.regrouping @ self.prior.ravel())[self.hold]
        stats = problem.statistics(joint_sigma)
        energy = stats.energy if stats.energy > 0 else 1.0  # data term relative to e^T W e
        nb = self.base.count
        diag = np.diag(stats.information)[nb:] / energy
        self._friction_unit = 1.0 / np.sqrt(np.where(diag > 0, diag, 1.0))
        scale = np.concatenate((np.ones(nb), self._friction_unit))
        normalised = SufficientStatistics(stats.n_unknowns)
        normalised.information = stats.information / energy * np.outer(scale, scale)
        normalised.moment = stats.moment / energy * scale
        normalised.energy = stats.energy / energy
        normalised.rows = stats.rows
        r, z = square_root(normalised)
        self._r.value, self._z.value = r, z
        self._dropped = normalised.energy - float(z @ z)  # ||Ax - b||^2_W - ||Rx - z||^2
        weight = np.sqrt(self.prior_weight_value)
        self._prior_root.value = weight
        self._prior_target.value = weight * (self.prior / self.units).ravel()
        if self.method == "sdp":
            self._run("CLARABEL")
        else:
            self._cutting_planes()
        v = np.asarray(self._v.value, dtype=float)
        standard = (v * self.units.ravel()).reshape(self.n, N_PI)
        bad = [self.model.link_names[i] for i in range(self.n)
               if not is_physically_consistent(standard[i] - self.attach[i])]
        if bad:
            raise SolverError(f"{self.method} solution not physically consistent for {bad}")
        friction = np.asarray(self._u.value, dtype=float) * self._friction_unit
        x = np.concatenate((self.base.regrouping @ standard.ravel(), friction))
        sigma = np.asarray(joint_sigma, dtype=float)
        return problem._estimate(self.method, x, sigma, standard=standard,
                                 prior_weight=self.prior_weight_value,
                                 held=int(self.hold.sum()))

    @property
    def objective(self) -> float:
        """The last solve's objective: weighted squared residual relative to the weighted
        effort energy, plus the prior term (comparable between solves of the same data)."""
        return float(self._problem.value) + self._dropped

    def set_prior_weight(self, weight: float) -> None:
        """Change the prior weight (no recompilation)."""
        self.prior_weight_value = float(weight)

    def _run(self, solver: str) -> None:
        try:
            if solver == "OSQP":
                self._problem.solve(solver="OSQP", eps_abs=1e-6, eps_rel=1e-6,
                                    max_iter=100000, warm_start=False)
            else:
                self._problem.solve(solver=solver)
        except cp.error.SolverError as exc:
            raise SolverError(f"{solver} failed: {exc}") from exc
        if self._problem.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
            raise SolverError(f"{solver} ended with status {self._problem.status}")

    def _cutting_planes(self) -> None:
        for _ in range(self.max_cuts + 1):
            self._run("OSQP")
            v = np.asarray(self._v.value, dtype=float)
            violated = False
            for i in range(self.n):
                values, vectors = np.linalg.eigh(self._scaled_j(v, i))
                if values[0] < 0.5 * self.epsilon:
                    violated = True
                    if len(self._cuts[i]) < self._n_initial + self.max_cuts:
                        self._cuts[i].append(vectors[:, 0])
            if not violated:
                return
            self._refresh_cuts()
        raise SolverError("QP cutting planes did not reach physical consistency "
                          f"within {self.max_cuts} cuts per link")


def _initial_directions(count: int = 24, seed: int = 7) -> list[NDArray[np.float64]]:
    """Unit vectors of R^4 for the first cuts: the axes, 3D directions (Bonnet's ``d``) and
    random ones."""
    rng = np.random.default_rng(seed)
    axes = list(np.eye(4))
    d = rng.normal(size=(count // 2, 3))
    spatial = [np.concatenate((x / np.linalg.norm(x), [0.0])) for x in d]
    mixed = rng.normal(size=(count - count // 2, 4))
    return axes + spatial + [x / np.linalg.norm(x) for x in mixed]


# ------------------------------------------------------------------------------ workflows


METHODS = ("wls", "pls", "sdp", "qp")


def constrained_solver(
    problem: LinkIdentification,
    method: str = "sdp",
    prior_weight: float = 1e-3,
    consistency: str = "link",
    com_margin: float | None = None,
    epsilon: float = 1e-6,
    max_relative_std: float | None = None,
    joint_sigma: ArrayLike | None = None,
) -> tuple[ConstrainedLinkEstimator, NDArray[np.float64]]:
    """The :class:`ConstrainedLinkEstimator` (sdp or qp) of :func:`identify` for ``problem``
    and its per-joint weights' sigma (effort units): ``joint_sigma``, default the WLS residual
    std per joint; with ``max_relative_std`` (percent) the base parameters of WLS sigma %
    above it are held at CAD (Bonnet). Solve it at other prior weights with
    :meth:`ConstrainedLinkEstimator.set_prior_weight` (no recompilation)."""
    hold = None
    if joint_sigma is None or max_relative_std is not None:
        wls = problem.weighted_least_squares()
        if max_relative_std is not None:
            hold = ~(wls.relative_std[:problem.base.count] <= max_relative_std)
        if joint_sigma is None:
            joint_sigma = wls.joint_sigma
    solver = ConstrainedLinkEstimator(problem.model, problem.base, problem.f.shape[-1],
                                      method, prior_weight=prior_weight,
                                      consistency=consistency, com_margin=com_margin,
                                      epsilon=epsilon, hold=hold)
    return solver, np.asarray(joint_sigma, dtype=float)


def identify(
    problem: LinkIdentification,
    method: str = "sdp",
    prior_weight: float = 1e-3,
    consistency: str = "link",
    com_margin: float | None = None,
    refine_scale: int = 0,
    epsilon: float = 1e-6,
    max_relative_std: float | None = None,
    joint_sigma: ArrayLike | None = None,
    refine_joints: bool | ArrayLike = True,
    tolerance: float = 1e-5,
) -> LinkEstimate:
    """Identify with ``method`` (wls, pls, sdp or qp); returns the estimate.

    wls/pls give base parameters; their standard parameters are the CAD-nearest ones with
    ``K pi = pi_b`` (in CAD units), not necessarily consistent. sdp/qp solve
    :class:`ConstrainedLinkEstimator` (``prior_weight``, ``consistency``, ``com_margin``,
    ``epsilon`` are its options) with the per-joint weights ``1 / joint_sigma^2`` (default:
    the WLS residual std per joint). With ``max_relative_std`` (percent) the base parameters
    whose WLS sigma % exceeds it keep their CAD values (Bonnet et al. 2016: unreliable base
    parameters leave the QP).

    ``refine_scale`` > 0 fits the effort scales of ``refine_joints`` (``True``: all not
    known; or a bool per joint) jointly with ``pi``: effort = ``s_j Y_j pi + F_j phi_j`` is
    bilinear, so it alternates the per-joint least squares of ``(s, phi)`` at fixed ``pi``
    and the constrained fit of ``(pi, phi)`` at fixed ``s``, at most ``refine_scale`` times,
    until an alternation lowers the objective by less than ``tolerance`` (relative). The
    weights stay fixed, so every step lowers the same objective; the prior (or the scales not
    refined) anchors the common scale of ``pi``, see the module docstring. The problem's
    ``effort_scale`` is updated.
    """
    if method not in METHODS:
        raise SolverError(f"unknown method {method!r}: {', '.join(METHODS)}")
    model = problem.model
    if method in ("wls", "pls"):
        est = (problem.weighted_least_squares() if method == "wls"
               else problem.partial_least_squares())
        standard = problem.base.standard_closest(est.base, model.cad.ravel(),
                                                 _scales(model.cad).ravel())
        return replace(est, standard=standard.reshape(model.n, N_PI))
    solver, joint_sigma = constrained_solver(problem, method, prior_weight, consistency,
                                             com_margin, epsilon, max_relative_std,
                                             joint_sigma)
    est = solver.solve(problem, joint_sigma)
    for _ in range(refine_scale):
        before = solver.objective
        problem.effort_scale = problem.fit_cad(est.standard, fit_scale=refine_joints).effort_scale
        est = solver.solve(problem, joint_sigma)
        if before - solver.objective <= tolerance * before:
            break
    return est


# ----------------------------------------------------------------------------- documents


def link_document(model: LinkModel, standard: NDArray[np.float64]) -> dict:
    """Per identified link: own parameters in its link frame (as written to the URDF) and the
    body's ``pi`` about the joint frame with its consistency."""
    out = {}
    for i, link in enumerate(model.link_names):
        own = standard[i] - model.attachments[i]
        body = BodyParameters.from_pi(own)
        entry = {
            "joint": model.joint_names[i],
            "mass": float(body.mass),
            "pi_joint_frame": [float(v) for v in standard[i]],
            "physically_consistent": bool(body.is_physically_consistent()),
            "min_pseudo_inertia_eigenvalue": min_pseudo_inertia_eigenvalue(own),
            "body_physically_consistent": bool(
                BodyParameters.from_pi(standard[i]).is_physically_consistent()),
        }
        if body.mass > 0:
            entry["com"] = [float(v) for v in body.com]
            ic = body.inertia_com
            entry["inertia_com"] = [float(ic[a, b]) for a, b in
                                    ((0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2))]
        out[link] = entry
    return out


def estimate_document(problem: LinkIdentification, estimate: LinkEstimate,
                      max_relative_std: float = 10.0) -> dict:
    """Base parameters with sigma %, friction per joint, effort scales."""
    nb = problem.base.count
    rel, std = estimate.relative_std, estimate.std
    base = [{"name": name, "value": float(estimate.base[k]), "std": float(std[k]),
             "relative_std_percent": float(rel[k]),
             "identifiable": bool(rel[k] <= max_relative_std)}
            for k, name in enumerate(problem.base_names)]
    friction: dict[str, dict[str, float]] = {}
    for k, name in enumerate(problem.friction_names):
        joint, term = name.rsplit(".", 1)
        friction.setdefault(joint, {})[term] = float(estimate.friction[k])
        friction[joint][f"{term}_relative_std_percent"] = float(rel[nb + k])
    names = problem.model.joint_names
    return {
        "base_parameters": base,
        "friction": friction,
        "effort_scale": {n: float(s) for n, s in zip(names, estimate.effort_scale, strict=True)},
        "drive_gain": {n: (float(1.0 / s) if s != 0 else None)
                       for n, s in zip(names, estimate.effort_scale, strict=True)},
        "joint_sigma": {n: float(s) for n, s in zip(names, estimate.joint_sigma, strict=True)},
    }
