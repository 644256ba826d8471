"""The constrained estimators of the links' standard parameters: a CAD prior and physical
consistency per link (:class:`ConstrainedLinkEstimator`, SDP with CLARABEL or Bonnet's QP with
cutting planes, OSQP).

Each body's ``pi_i`` is about the origin of joint i's frame, in its axes (SI units), see
:mod:`inertial_id.core.joint_torque.links`; the solver works on ``pi_i / u_i`` with the per-body
units
``u_i`` of :func:`body_units`.
"""


from __future__ import annotations

import cvxpy as cp
import numpy as np
from numpy.typing import ArrayLike, NDArray

from inertial_id.core.errors import SolverError
from inertial_id.core.estimation.estimators import pseudo_inertia_expression, square_root
from inertial_id.core.joint_torque.link_model import N_PI, BaseParameters, LinkModel
from inertial_id.core.joint_torque.links.estimate import LinkEstimate
from inertial_id.core.joint_torque.links.identification import LinkIdentification
from inertial_id.core.parameters import is_physically_consistent, pseudo_inertia
from inertial_id.core.statistics import SufficientStatistics


def body_units(cad: NDArray[np.float64]) -> NDArray[np.float64]:
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
        self.units = body_units(self.prior)
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
