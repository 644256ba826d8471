"""Exciting joint trajectories: optimised finite Fourier series within the URDF's limits.

A trajectory is a :class:`~inertial_id.core.simulation.FourierTrajectory`
``q_i(t) = q0_i + sum_l A_il sin(l w t + phi_il)`` (``w = 2 pi / period``, one period is the
whole motion, so it loops smoothly). :class:`FourierSpace` maps unconstrained decision
variables to trajectories that are feasible by construction:

- every joint starts at rest, ``qd(0) = qdd(0) = 0`` (the coefficients are projected so), and
  a robot driver moves to ``q(0)`` first;
- positions stay inside ``[lower, upper]`` shrunk by ``margin`` of the range on each side, and
  ``|qd| <= velocity_fraction * velocity limit``: each joint's series is affinely scaled to fit.

Effort limits are checked with pinocchio's RNEA on the URDF's (CAD) inertias and penalised.

Criteria (smaller is better), evaluated on ``samples`` points of one period:

- payload (F/T sensor frame): the condition number of the stacked measurement matrix
  ``[s Y(v, a_g), 1_6]`` of :func:`~inertial_id.core.regressor.measurement_matrix` (unknowns
  ``[pi; offset]``), columns scaled to unit norm;
- links (Bonnet et al. 2016, eq. 12): ``J_exc = sum_i M_i cond(W_b,i)``, the CAD mass of
  body ``i`` times the condition number of the columns of the stacked base regressor that
  belong to it (column-scaled).

:func:`optimise_excitation` minimises a criterion with a bounded number of evaluations
(scipy L-BFGS-B with finite differences) from the best of a few random starts, and reports it
against the first random trajectory (same period, harmonics and limits).
"""

from __future__ import annotations

import csv
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pinocchio as pin
import scipy.optimize
import yaml
from numpy.typing import ArrayLike, NDArray

from inertial_id.core.errors import InertialIdError, ModelError
from inertial_id.core.joint_torque.link_model import (
    BaseParameters,
    LinkModel,
    structural_base_parameters,
)
from inertial_id.core.kinematics import SensorKinematics
from inertial_id.core.regressor import PAYLOAD_ON_SENSOR, measurement_matrix
from inertial_id.core.simulation import FourierTrajectory

Criterion = Callable[[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]], float]


def scaled_condition(a: NDArray[np.float64]) -> float:
    """Condition number of ``a`` (rows, cols) with unit-norm columns (inf if rank-deficient)."""
    a = np.asarray(a, dtype=float).reshape(-1, a.shape[-1])
    norms = np.linalg.norm(a, axis=0)
    if np.any(norms == 0.0):
        return float("inf")
    s = np.linalg.svd(a / norms, compute_uv=False)
    return float(s[0] / s[-1]) if s[-1] > 0 else float("inf")


# ----------------------------------------------------------------------- trajectory space


@dataclass(frozen=True)
class JointLimits:
    """Per-joint position (rad or m), velocity and effort limits (N m or N)."""

    lower: NDArray[np.float64]
    upper: NDArray[np.float64]
    velocity: NDArray[np.float64]
    effort: NDArray[np.float64]

    @classmethod
    def from_model(cls, model: pin.Model) -> JointLimits:
        """From a pinocchio model of 1-DoF joints; continuous joints get ``[-pi, pi]``."""
        lower, upper = [], []
        for joint in model.joints[1:]:
            if joint.nq == 2:
                lower.append(-np.pi)
                upper.append(np.pi)
            else:
                lower.append(model.lowerPositionLimit[joint.idx_q])
                upper.append(model.upperPositionLimit[joint.idx_q])
        limits = cls(np.array(lower), np.array(upper), np.asarray(model.velocityLimit, float),
                     np.asarray(model.effortLimit, float))
        bad = ~(np.isfinite(limits.lower) & np.isfinite(limits.upper)
                & (limits.upper > limits.lower) & (limits.velocity > 0))
        if np.any(bad):
            names = [model.names[i + 1] for i in np.flatnonzero(bad)]
            raise ModelError(f"joints without usable position/velocity limits: {names}")
        return limits


class FourierSpace:
    """Feasible Fourier trajectories from decision variables ``x`` (see the module docstring).

    ``x = [c (n), a (n H), b (n H)]``: ``c`` in [0, 1] places each joint's motion within its
    range, ``a``/``b`` in [-1, 1] are raw sine/cosine coefficients of harmonics 1..H.
    """

    def __init__(self, limits: JointLimits, period: float, harmonics: int,
                 margin: float = 0.05, velocity_fraction: float = 0.9,
                 grid: int | None = None, acceleration: ArrayLike | None = None) -> None:
        if period <= 0 or harmonics < 1:
            raise InertialIdError("the period must be positive and harmonics at least 1")
        self.limits, self.period, self.harmonics = limits, float(period), int(harmonics)
        self.n = limits.lower.size
        span = limits.upper - limits.lower
        self.lower = limits.lower + margin * span
        self.upper = limits.upper - margin * span
        self.vmax = velocity_fraction * limits.velocity
        self.amax = np.broadcast_to(np.inf if acceleration is None else acceleration,
                                    (self.n,)).astype(float)
        self.t = np.linspace(0.0, self.period, grid or max(40 * harmonics, 200), endpoint=False)
        self.l = np.arange(1, harmonics + 1, dtype=float)
        self.omega = 2 * np.pi / self.period

    @property
    def size(self) -> int:
        """Number of decision variables."""
        return self.n * (1 + 2 * self.harmonics)

    @property
    def bounds(self) -> list[tuple[float, float]]:
        """Box bounds of the decision variables."""
        return [(0.0, 1.0)] * self.n + [(-1.0, 1.0)] * (2 * self.n * self.harmonics)

    def random(self, rng: np.random.Generator) -> NDArray[np.float64]:
        """Random decision variables (uniform, coefficients decaying as 1/l)."""
        coefficients = rng.uniform(-1, 1, (2, self.n, self.harmonics)) / self.l
        return np.concatenate((rng.uniform(0.2, 0.8, self.n), coefficients.ravel()))

    def shape(self, x: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64],
                                            NDArray[np.float64], NDArray[np.float64]]:
        """The unscaled motion of ``x`` on the grid: sine and cosine coefficients (n, H),
        projected so that each joint starts at rest, its positions (T, n) and the largest
        gain (n,) that keeps each joint's speed and acceleration within their bounds."""
        x = np.asarray(x, dtype=float)
        a, b = x[self.n:].reshape(2, self.n, self.harmonics)
        a = a - np.outer(a @ self.l, self.l) / (self.l @ self.l)          # qd(0) = 0
        l2 = self.l**2
        b = b - np.outer(b @ l2, l2) / (l2 @ l2)                           # qdd(0) = 0
        arg = np.outer(self.t, self.l) * self.omega                       # (T, H)
        sine, cosine = np.sin(arg), np.cos(arg)
        r = sine @ a.T + cosine @ b.T                                      # (T, n)
        rd = (cosine * self.l) @ a.T - (sine * self.l) @ b.T               # / omega
        rdd = (sine * l2) @ a.T + (cosine * l2) @ b.T                      # / -omega^2
        peak_v = np.abs(rd).max(axis=0) * self.omega
        peak_a = np.abs(rdd).max(axis=0) * self.omega**2
        with np.errstate(divide="ignore", invalid="ignore"):
            gain = np.minimum(np.where(peak_v > 0, self.vmax / peak_v, 0.0),
                              np.where(peak_a > 0, self.amax / peak_a, 0.0))
        return a, b, r, gain

    def compose(self, home: NDArray[np.float64], a: NDArray[np.float64],
                b: NDArray[np.float64], gain: NDArray[np.float64]) -> FourierTrajectory:
        """``home + gain * (a sin + b cos)`` as a :class:`FourierTrajectory`."""
        sine, cosine = a * gain[:, None], b * gain[:, None]
        return FourierTrajectory(home, np.hypot(sine, cosine), np.arctan2(cosine, sine),
                                 self.period)

    def trajectory(self, x: ArrayLike) -> FourierTrajectory:
        """The feasible trajectory of ``x``."""
        a, b, r, gain = self.shape(x)
        c = np.asarray(x, dtype=float)[:self.n]
        lo, hi = r.min(axis=0), r.max(axis=0)
        extent = hi - lo
        with np.errstate(divide="ignore", invalid="ignore"):
            gain = np.where(extent > 1e-12,
                            np.minimum(gain, (self.upper - self.lower) / extent), 0.0)
        home = self.lower + np.clip(c, 0, 1) * (self.upper - self.lower - gain * extent) \
            - gain * lo
        return self.compose(home, a, b, gain)


# ------------------------------------------------------------------------------ criteria


def payload_criterion(kinematics: SensorKinematics, sign: float = PAYLOAD_ON_SENSOR
                      ) -> Criterion:
    """Scaled condition number of the stacked payload measurement matrix at the sensor."""

    def criterion(q: NDArray[np.float64], qd: NDArray[np.float64],
                  qdd: NDArray[np.float64]) -> float:
        twist, proper = kinematics.compute(q, qd, qdd)
        return scaled_condition(measurement_matrix(twist, proper, sign))

    return criterion


def link_groups(model: LinkModel, base: BaseParameters) -> list[NDArray[np.intp]]:
    """Base-parameter columns of each body (Bonnet's sub-regressors), empty ones dropped."""
    owner = base.link_of(model.n)
    return [np.flatnonzero(owner == i) for i in range(model.n) if np.any(owner == i)]


def links_criterion(model: LinkModel, base: BaseParameters | None = None) -> Criterion:
    """Bonnet et al. (2016) eq. (12): ``sum_i M_i cond(W_b,i)`` over the bodies."""
    base = base or structural_base_parameters(model)
    owner = base.link_of(model.n)
    groups = [(float(model.cad[i, 0]), np.flatnonzero(owner == i)) for i in range(model.n)]
    groups = [(m, cols) for m, cols in groups if cols.size]

    def criterion(q: NDArray[np.float64], qd: NDArray[np.float64],
                  qdd: NDArray[np.float64]) -> float:
        yb = base.base_regressor(model.regressor(q, qd, qdd)).reshape(-1, base.count)
        return float(sum(m * scaled_condition(yb[:, cols]) for m, cols in groups))

    return criterion


def links_condition(model: LinkModel, base: BaseParameters | None = None) -> Criterion:
    """Scaled condition number of the whole stacked base regressor (for reporting)."""
    base = base or structural_base_parameters(model)

    def criterion(q: NDArray[np.float64], qd: NDArray[np.float64],
                  qdd: NDArray[np.float64]) -> float:
        return scaled_condition(base.base_regressor(model.regressor(q, qd, qdd)))

    return criterion


# ----------------------------------------------------------------------------- optimiser


@dataclass(frozen=True)
class ExcitationResult:
    """An optimised trajectory, its criterion and that of a random one of the same form."""

    trajectory: FourierTrajectory
    joint_names: list[str]
    criterion: str
    value: float
    random_value: float
    evaluations: int
    seconds: float
    max_velocity_ratio: float
    max_effort_ratio: float
    random_trajectory: FourierTrajectory
    extra: dict = field(default_factory=dict)


def effort_ratio(model: pin.Model, limits: JointLimits, trajectory: FourierTrajectory,
                 t: NDArray[np.float64], configuration: Callable) -> float:
    """Largest ``|tau_j| / effort_limit_j`` along the trajectory (RNEA, URDF inertias)."""
    q, qd, qdd = trajectory(t)
    data = model.createData()
    tau = np.array([pin.rnea(model, data, configuration(a), b, c)
                    for a, b, c in zip(q, qd, qdd, strict=True)])
    limit = np.where(limits.effort > 0, limits.effort, np.inf)
    return float(np.max(np.abs(tau) / limit))


def optimise_excitation(
    space: FourierSpace,
    criterion: Criterion,
    joint_names: Sequence[str],
    name: str,
    model: pin.Model,
    configuration: Callable,
    budget: int = 1500,
    starts: int = 8,
    samples: int = 100,
    seed: int = 0,
    effort_fraction: float = 1.0,
) -> ExcitationResult:
    """Minimise ``criterion`` over ``space`` with at most ``budget`` evaluations.

    The first of ``starts`` random points is the reference random trajectory; the best start
    seeds L-BFGS-B (finite differences) for the rest of the budget. A trajectory whose RNEA
    torques exceed ``effort_fraction`` of a limit is penalised by the square of the excess.
    """
    begin = time.perf_counter()
    t = np.linspace(0.0, space.period, samples, endpoint=False)
    check_t = t[:: max(1, samples // 50)]
    calls = {"n": 0}
    best: dict[str, object] = {"f": np.inf, "x": None}

    def objective(x: NDArray[np.float64]) -> float:
        if calls["n"] >= budget:
            return float(best["f"]) + 1.0  # out of budget: stay put
        calls["n"] += 1
        trajectory = space.trajectory(x)
        value = criterion(*trajectory(t))
        excess = effort_ratio(model, space.limits, trajectory, check_t, configuration)
        excess = max(excess / effort_fraction - 1.0, 0.0)
        value = value * (1.0 + 100.0 * excess**2) if np.isfinite(value) else 1e12
        if value < best["f"]:
            best["f"], best["x"] = value, np.array(x, dtype=float)
        return float(value)

    rng = np.random.default_rng(seed)
    candidates = [space.random(rng) for _ in range(max(starts, 1))]
    values = [objective(x) for x in candidates]
    random_x = candidates[0]
    random_value = criterion(*space.trajectory(random_x)(t))
    start = candidates[int(np.argmin(values))]
    remaining = budget - calls["n"]
    if remaining > space.size + 1:
        scipy.optimize.minimize(objective, start, method="L-BFGS-B", bounds=space.bounds,
                                options={"maxfun": remaining, "eps": 1e-4})
    x = best["x"]
    trajectory = space.trajectory(x)
    value = criterion(*trajectory(t))
    fine = np.linspace(0.0, space.period, 20 * samples, endpoint=False)
    _, qd, _ = trajectory(fine)
    velocity = float(np.max(np.abs(qd) / space.limits.velocity))
    efforts = effort_ratio(model, space.limits, trajectory, t, configuration)
    return ExcitationResult(trajectory, list(joint_names), name, value, random_value,
                            calls["n"], time.perf_counter() - begin, velocity, efforts,
                            space.trajectory(random_x))


def excite_payload(kinematics: SensorKinematics, period: float = 10.0, harmonics: int = 4,
                   **options: object) -> ExcitationResult:
    """Exciting trajectory for payload identification at the kinematics' sensor frame."""
    limits = JointLimits.from_model(kinematics.model)
    space = FourierSpace(limits, period, harmonics)
    return optimise_excitation(space, payload_criterion(kinematics), kinematics.joint_names,
                               "payload_condition_number", kinematics.model,
                               kinematics.configuration, **options)


def excite_links(model: LinkModel, period: float = 10.0, harmonics: int = 4,
                 base: BaseParameters | None = None, **options: object) -> ExcitationResult:
    """Exciting trajectory for link identification (Bonnet's ``J_exc``)."""
    base = base or structural_base_parameters(model)
    limits = JointLimits.from_model(model.model)
    space = FourierSpace(limits, period, harmonics)
    result = optimise_excitation(space, links_criterion(model, base), model.joint_names,
                                 "bonnet_mass_weighted_condition", model.model,
                                 model.kinematics.configuration, **options)
    total = links_condition(model, base)
    t = np.linspace(0.0, period, int(options.get("samples", 100)), endpoint=False)
    result.extra.update(condition_number=total(*result.trajectory(t)),
                        random_condition_number=total(*result.random_trajectory(t)))
    return result


# --------------------------------------------------------------------------------- files


def write_trajectory_csv(path: str | Path, trajectory: FourierTrajectory,
                         joint_names: Sequence[str], duration: float | None = None,
                         rate: float = 100.0) -> Path:
    """CSV with ``t`` then ``<joint>_position``, ``<joint>_velocity``, ``<joint>_acceleration``
    for every joint (s, rad or m, and their derivatives), sampled at ``rate`` Hz."""
    duration = trajectory.period if duration is None else duration
    t = np.arange(0.0, duration + 0.5 / rate, 1.0 / rate)
    q, qd, qdd = trajectory(t)
    header = ["t"] + [f"{n}_{kind}" for kind in ("position", "velocity", "acceleration")
                      for n in joint_names]
    path = Path(path)
    with path.open("w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(header)
        for row in np.column_stack((t, q, qd, qdd)):
            writer.writerow([f"{v:.9g}" for v in row])
    return path


def trajectory_document(result: ExcitationResult) -> dict:
    """The YAML content: a ``FourierTrajectory`` (joints, home, amplitudes, phases, period)
    plus what it was optimised for."""
    traj = result.trajectory
    q0, _, _ = traj(np.zeros(1))
    doc = {
        "trajectory": {
            "type": "fourier",
            "formula": "q_i(t) = home_i + sum_l amplitudes_il sin(l 2 pi t / period + "
                       "phases_il)",
            "joints": list(result.joint_names),
            "period": float(traj.period),
            "home": [float(v) for v in traj.home],
            "amplitudes": traj.amplitudes.tolist(),
            "phases": traj.phases.tolist(),
            "start": [float(v) for v in q0[0]],
        },
        "criterion": {
            "name": result.criterion,
            "optimised": float(result.value),
            "random": float(result.random_value),
            "evaluations": int(result.evaluations),
            "seconds": round(float(result.seconds), 3),
        },
        "limits": {
            "max_velocity_ratio": float(result.max_velocity_ratio),
            "max_effort_ratio": float(result.max_effort_ratio),
        },
    }
    doc["criterion"].update({k: float(v) for k, v in result.extra.items()})
    return doc


def write_trajectory_yaml(path: str | Path, result: ExcitationResult) -> Path:
    """Write :func:`trajectory_document` as YAML."""
    path = Path(path)
    path.write_text(yaml.safe_dump(trajectory_document(result), sort_keys=False))
    return path


def load_trajectory_yaml(path: str | Path) -> tuple[FourierTrajectory, list[str]]:
    """A trajectory written by :func:`write_trajectory_yaml` and its joint names."""
    try:
        doc = yaml.safe_load(Path(path).read_text())["trajectory"]
        traj = FourierTrajectory(np.asarray(doc["home"], float),
                                 np.asarray(doc["amplitudes"], float),
                                 np.asarray(doc["phases"], float), float(doc["period"]))
        return traj, list(doc["joints"])
    except (OSError, KeyError, TypeError, yaml.YAMLError) as exc:
        raise InertialIdError(f"{path}: not an exciting-trajectory file ({exc})") from exc
