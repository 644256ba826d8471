"""The payload from joint torques, for arms that measure joint torques (or motor currents) but
carry no wrist F/T sensor.

Model, per sample and joint ``j`` (model joint order):

    e_j = s_j (tau_links,j(q, qd, qdd) + [J_f(q)^T Y(v_f, a_f) pi]_j) + F_j(qd) phi_j + noise

- ``tau_links`` and the friction ``F phi`` are the arm's own torques, from a **known** link
  model (:class:`LinkTorqueModel`: the URDF's inertials, or those ``inertial-id
  identify-links`` wrote, with its friction, offsets and effort scales ``s``);
- ``pi`` are the payload's 10 parameters in the package order, about the origin of the
  **payload frame** ``f`` (a URDF frame rigidly attached to the last link: the flange, a tool
  frame) in its axes, the same convention as the F/T path; ``Y(v_f, a_f)`` is the Newton-Euler
  regressor at that frame (its twist and proper acceleration) and ``J_f`` its Jacobian in its
  own axes, so ``J_f^T Y pi`` is the torque needed to move the payload. Adding ``pi`` to the
  last body's parameters (moved to its joint frame) gives the same torques; the test checks
  this against pinocchio's RNEA;
- the rows ``s_j [J_f^T Y]_j`` are weighted by ``1 / sigma_j^2`` (the link model's per-joint
  residual std) and accumulated in the payload's :class:`SufficientStatistics` with the F/T
  offset columns fixed at zero; the estimate is the payload estimator's
  (:class:`ConsistentEstimator`, ``J(pi) >= epsilon``), its covariance the block-robust one
  (``score_block`` consecutive samples per block), so the std stays honest with coloured
  torque residuals.

A loaded recording alone trusts the link model's friction and offsets. With an unloaded
recording of the same trajectory, :func:`paired_difference` aligns the two in time
(:func:`time_shift`, cross-correlation of the joint velocities) and subtracts them sample by
sample, so the arm's own torques **and the link model's error of them** cancel;
:func:`identify_paired_payload` fits the payload to that difference with each run's own
friction and offsets (their change fitted alongside). The older way,
:meth:`LinkTorqueModel.refit_drive_terms` (friction and offsets re-fitted on the unloaded run,
the rigid bodies kept), leaves the rigid-body model's error in the loaded run, where the
payload fit turns it into a phantom mass.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from numpy.typing import ArrayLike, NDArray

from inertial_id.core.anomaly import TRIM_CONFIDENCE, T2Monitor, T2Result
from inertial_id.core.errors import ModelError, SampleError, SolverError
from inertial_id.core.estimators import N_UNKNOWNS, ConsistentEstimator, Estimate
from inertial_id.core.friction import FrictionModel
from inertial_id.core.kinematics import SensorKinematics
from inertial_id.core.link_model import N_PI, LinkModel
from inertial_id.core.online import OnlineConfig, StepResult, Verdicts, verdicts
from inertial_id.core.regressor import regressor
from inertial_id.core.signals import savitzky_golay
from inertial_id.core.statistics import SufficientStatistics

N_OFFSET = N_UNKNOWNS - N_PI


@dataclass(frozen=True)
class LinkTorqueModel:
    """A known model of an arm's own efforts: ``e = s (Y pi_links) + F(qd) phi``.

    ``standard`` (n, 10): each body's ``pi`` about its joint frame (:mod:`.links` convention);
    ``friction``/``coefficients``: the friction model and its coefficients (effort units);
    ``effort_scale`` ``s`` (effort per N m); ``joint_sigma`` (effort units): the residual std
    per joint, the weights' scale.
    """

    model: LinkModel
    standard: NDArray[np.float64]
    friction: FrictionModel
    coefficients: NDArray[np.float64]
    effort_scale: NDArray[np.float64]
    joint_sigma: NDArray[np.float64]

    @classmethod
    def from_urdf(cls, urdf: str, joints: list[str] | None = None,
                  locked: Mapping[str, float] | None = None,
                  joint_sigma: ArrayLike | None = None,
                  drive_gains: Mapping[str, float] | None = None) -> LinkTorqueModel:
        """The URDF's inertials, no friction; efforts in N m, or in drive units for the joints
        of ``drive_gains`` (N m per effort unit: ``s = 1 / gain``)."""
        model = LinkModel(urdf, joints=joints, locked=locked)
        gains = dict(drive_gains or {})
        unknown = sorted(set(gains) - set(model.joint_names))
        if unknown or any(not g > 0 for g in gains.values()):
            raise ModelError(f"drive gains must be > 0 and for moving joints; got {gains}")
        scale = np.array([1.0 / gains.get(n, 1.0) for n in model.joint_names])
        none = FrictionModel(coulomb="none", viscous=False, offset=False)
        sigma = np.ones(model.n) if joint_sigma is None else np.asarray(joint_sigma, float)
        return cls(model, model.cad.copy(), none, np.zeros(0), scale, sigma)

    @classmethod
    def from_document(cls, doc: Mapping[str, Any], urdf: str | None = None) -> LinkTorqueModel:
        """From the YAML document ``inertial-id identify-links`` writes (its ``urdf`` unless
        ``urdf`` is given; the method must have given standard parameters: sdp, qp)."""
        if "links" not in doc:
            raise ModelError("the link model has no 'links' (identify it with sdp or qp)")
        model = LinkModel(urdf or str(doc["urdf"]), joints=list(doc["joints"]),
                          locked=dict(doc.get("locked", {})))
        if list(doc["joints"]) != model.joint_names:
            raise ModelError(f"the link model's joints {doc['joints']} are not the URDF's "
                             f"chain {model.joint_names}")
        by_joint = {entry["joint"]: entry["pi_joint_frame"] for entry in doc["links"].values()}
        standard = np.array([by_joint[name] for name in model.joint_names], dtype=float)
        friction = FrictionModel.from_settings(doc["friction_model"])
        coefficients = np.array([doc["friction"][joint][term]
                                 for joint in model.joint_names for term in friction.terms],
                                dtype=float)
        scale = np.array([doc["effort_scale"][n] for n in model.joint_names], dtype=float)
        sigma = np.array([doc["joint_sigma"][n] for n in model.joint_names], dtype=float)
        if not (np.all(np.isfinite(scale)) and np.all(scale != 0)
                and np.all(np.isfinite(sigma)) and np.all(sigma > 0)):
            raise ModelError("the link model's effort scales must be finite and non-zero, its "
                             "joint sigmas finite and positive")
        return cls(model, standard, friction, coefficients, scale, sigma)

    @classmethod
    def from_file(cls, path: str | Path, urdf: str | None = None) -> LinkTorqueModel:
        """:meth:`from_document` of a YAML file; one :class:`ModelError` line for a file that
        cannot be read or is not a usable link model."""
        path = Path(path).expanduser()
        try:
            doc = yaml.safe_load(path.read_text(encoding="utf-8"))
            if not isinstance(doc, dict):
                raise ModelError("not a YAML mapping")
            return cls.from_document(doc, urdf)
        except (OSError, UnicodeDecodeError, yaml.YAMLError, KeyError, TypeError, ValueError,
                AttributeError, ModelError) as exc:
            raise ModelError(f"{path}: not a usable link model ({type(exc).__name__}: {exc})"
                             ) from exc

    def at_sample_period(self, period: float) -> LinkTorqueModel:
        """The same model for rows ``period`` s apart (the step of a direction-memory friction
        state; without memory the model itself)."""
        if not self.friction.memory:
            return self
        return replace(self, friction=replace(self.friction, sample_period=float(period)))

    def efforts(self, q: ArrayLike, qd: ArrayLike, qdd: ArrayLike,
                initial: ArrayLike | None = None) -> NDArray[np.float64]:
        """Predicted efforts (N, nv) of the arm alone; rows in time order when the friction
        has direction memory, continuing from its state ``initial`` (default 0)."""
        return self.rigid_efforts(q, qd, qdd) + self.friction_efforts(qd, qdd, initial)

    def rigid_efforts(self, q: ArrayLike, qd: ArrayLike, qdd: ArrayLike) -> NDArray[np.float64]:
        """The rigid-body part of the efforts, ``s (Y pi_links)`` (N, nv)."""
        rigid = np.einsum("njp,p->nj", self.model.regressor(q, qd, qdd), self.standard.ravel())
        return self.effort_scale * rigid

    def friction_efforts(self, qd: ArrayLike, qdd: ArrayLike,
                         initial: ArrayLike | None = None) -> NDArray[np.float64]:
        """The friction and offset part of the efforts (N, nv) (``initial``: the direction
        memory's state before the first row, see :meth:`efforts`)."""
        if self.coefficients.size == 0:
            return np.zeros_like(np.atleast_2d(np.asarray(qd, dtype=float)))
        return np.einsum("njf,f->nj", self.friction.regressor(qd, qdd, initial),
                         self.coefficients)

    @property
    def drive_friction(self) -> FrictionModel:
        """The friction model to fit on new data: the model's own, or viscous + smooth
        Coulomb (``tanh(qd / 0.03)``) + offset when it has none."""
        if self.coefficients.size:
            return self.friction
        return FrictionModel(coulomb="symmetric", smooth=True, velocity_threshold=0.03)

    def refit_drive_terms(self, q: ArrayLike, qd: ArrayLike, qdd: ArrayLike,
                          effort: ArrayLike, friction: FrictionModel | None = None
                          ) -> LinkTorqueModel:
        """The same rigid bodies, friction/offsets (``friction``, default the model's own
        or viscous + smooth Coulomb + offset when it has none) re-fitted per joint by least
        squares on an unloaded recording, and ``joint_sigma`` from its residual."""
        friction = friction or self.drive_friction
        q, qd, qdd, effort = self.model.batch(q, qd, qdd, effort)
        rigid = self.rigid_efforts(q, qd, qdd)
        columns = friction.regressor(qd, qdd)
        per_joint = len(friction.terms)
        coefficients = np.zeros(self.model.n * per_joint)
        sigma = np.zeros(self.model.n)
        for j in range(self.model.n):
            cols = slice(j * per_joint, (j + 1) * per_joint)
            a = columns[:, j, cols]
            target = effort[:, j] - rigid[:, j]
            coefficients[cols] = np.linalg.lstsq(a, target, rcond=None)[0]
            residual = target - a @ coefficients[cols]
            sigma[j] = np.sqrt(np.mean(residual ** 2))
        return replace(self, friction=friction, coefficients=coefficients,
                       joint_sigma=np.maximum(sigma, 1e-12))


class TorquePayloadIdentifier:
    """Accumulates joint samples of the loaded arm and estimates the payload (see the module
    docstring). ``frame``: the payload frame (a URDF frame after the last moving joint; None:
    the last moving joint's child link, so ``pi`` is the change of the last link's parameters);
    ``epsilon``, ``prior``, ``prior_weight``, ``dedicated`` (the compiled SDP solver, else
    cvxpy): the payload estimator's options; ``score_block``: samples per block of the
    block-robust covariance."""

    def __init__(self, links: LinkTorqueModel, frame: str | None = None, epsilon: float = 1e-8,
                 prior: ArrayLike | None = None, prior_weight: float = 1e-9,
                 score_block: int = 250, dedicated: bool = True) -> None:
        self.links = links
        frame = frame or links.model.link_names[-1]
        self.kinematics = SensorKinematics(links.model.urdf, frame,
                                           locked_joints=links.model.locked)
        if self.kinematics.joint_names != links.model.joint_names:
            raise ModelError(f"the payload frame's chain {self.kinematics.joint_names} is not "
                             f"the link model's {links.model.joint_names}")
        self.frame = frame
        self.score_block = int(score_block)
        self.estimator = ConsistentEstimator(epsilon=epsilon, prior=prior,
                                             prior_weight=prior_weight,
                                             known_offset=np.zeros(N_OFFSET),
                                             dedicated=dedicated)
        self.reset()

    def reset(self) -> None:
        """Forget the accumulated statistics (a new payload)."""
        self.statistics = SufficientStatistics(N_UNKNOWNS, score_block=self.score_block)

    def rows(self, q: ArrayLike, qd: ArrayLike, qdd: ArrayLike) -> NDArray[np.float64]:
        """``s_j [J_f^T Y(v_f, a_f)]_j``: (N, nv, 10), effort units per unit of ``pi``."""
        return self._jacobians_and_rows(q, qd, qdd)[1]

    def _jacobians_and_rows(self, q: ArrayLike, qd: ArrayLike, qdd: ArrayLike
                            ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        twist, proper = self.kinematics.compute(q, qd, qdd)
        jacobians = self.kinematics.jacobians(q)
        torque = np.einsum("nki,nkp->nip", jacobians,
                           regressor(np.atleast_2d(twist), np.atleast_2d(proper)))
        return jacobians, self.links.effort_scale[None, :, None] * torque

    def terms(self, q: ArrayLike, qd: ArrayLike, qdd: ArrayLike, effort: ArrayLike,
              initial: ArrayLike | None = None) -> tuple[NDArray[np.float64], ...]:
        """For (N, nv) samples (model joint order, time order): the payload frame's Jacobians
        (N, 6, nv), the rows (:meth:`rows`) and the targets ``e - e_links`` (N, nv), the arm
        computed once for all three; ``initial``: the link friction's direction-memory state
        before the first row (:meth:`LinkTorqueModel.efforts`)."""
        q, qd, qdd, effort = self.links.model.batch(q, qd, qdd, effort)
        if not all(np.all(np.isfinite(a)) for a in (q, qd, qdd, effort)):
            raise SampleError("joint data contain NaN or inf")
        jacobians, rows = self._jacobians_and_rows(q, qd, qdd)
        return jacobians, rows, effort - self.links.efforts(q, qd, qdd, initial)

    def add(self, q: ArrayLike, qd: ArrayLike, qdd: ArrayLike, effort: ArrayLike,
            initial: ArrayLike | None = None) -> None:
        """Accumulate (N, nv) samples in time order (model joint order; ``initial``: see
        :meth:`terms`)."""
        _, rows, target = self.terms(q, qd, qdd, effort, initial)
        self.add_rows(rows, target)

    def add_rows(self, rows: NDArray[np.float64], target: NDArray[np.float64]) -> None:
        """Accumulate rows and targets of :meth:`terms` (time order), in blocks of
        ``score_block`` samples."""
        n, nv = target.shape
        weights = np.tile(self.links.joint_sigma ** -2.0, n)
        padded = np.concatenate((rows, np.zeros(rows.shape[:2] + (N_OFFSET,))), axis=-1)
        step = self.score_block if self.score_block > 0 else n
        for start in range(0, n, step):
            chunk = slice(start, start + step)
            count = padded[chunk].shape[0]
            self.statistics.add(padded[chunk].reshape(-1, N_UNKNOWNS),
                                target[chunk].reshape(-1), weights[:count * nv], count)

    def solve(self) -> Estimate:
        """The consistent payload estimate (offset fixed at zero) with its covariance."""
        return self.estimator.solve(self.statistics)

    def residual(self, q: ArrayLike, qd: ArrayLike, qdd: ArrayLike, effort: ArrayLike,
                 pi: ArrayLike) -> NDArray[np.float64]:
        """Measured minus predicted efforts (N, nv) with the payload ``pi``."""
        _, rows, target = self.terms(q, qd, qdd, effort)
        return target - rows @ np.asarray(pi, dtype=float)


def time_shift(t_a: ArrayLike, x_a: ArrayLike, t_b: ArrayLike, x_b: ArrayLike,
               max_shift: float) -> float:
    """The shift ``d`` (s) that best aligns two recordings of the same motion, ``x_b(t + d)
    ~ x_a(t)``: the peak of the normalised cross-correlation of ``x`` (N, k), e.g. joint
    velocities (the products summed over the columns and the overlapping samples, divided by
    the square root of both overlaps' energies, so a shorter overlap is not penalised),
    within ``|d| <= max_shift``, refined between grid points by a parabola. Both are
    resampled (linearly) onto one grid of the finer median step; each column is made
    zero-mean first. Stamps ``t_a``, ``t_b`` (s) ascending, each on its own
    clock (the start of either record may be anywhere)."""
    t_a, t_b = np.asarray(t_a, dtype=float), np.asarray(t_b, dtype=float)
    x_a = np.atleast_2d(np.asarray(x_a, dtype=float).T).T
    x_b = np.atleast_2d(np.asarray(x_b, dtype=float).T).T
    step = min(float(np.median(np.diff(t_a))), float(np.median(np.diff(t_b))))
    if not step > 0 or x_a.shape[1] != x_b.shape[1]:
        raise SampleError("two recordings with increasing stamps and the same columns needed")
    grid_a = np.arange(t_a[0], t_a[-1], step)
    grid_b = np.arange(t_b[0], t_b[-1], step)
    a = np.column_stack([np.interp(grid_a, t_a, c) for c in x_a.T])
    b = np.column_stack([np.interp(grid_b, t_b, c) for c in x_b.T])
    a, b = a - a.mean(axis=0), b - b.mean(axis=0)
    size = 1 << int(np.ceil(np.log2(a.shape[0] + b.shape[0])))
    # c[m] = sum_n a[n] b[n + m]: b's sample m after a's start matches a's first sample.
    c = np.fft.irfft(np.conj(np.fft.rfft(a, size, axis=0)) * np.fft.rfft(b, size, axis=0),
                     size, axis=0).sum(axis=1)
    lags = np.arange(size)
    lags = np.where(lags < size - a.shape[0] + 1, lags, lags - size)  # negative lags wrap
    # Overlap of lag m: a's samples [lo, hi) with b's [lo + m, hi + m).
    lo = np.clip(-lags, 0, a.shape[0])
    hi = np.clip(b.shape[0] - lags, lo, a.shape[0])
    energy_a = np.concatenate(([0.0], np.cumsum(np.sum(a * a, axis=1))))
    energy_b = np.concatenate(([0.0], np.cumsum(np.sum(b * b, axis=1))))
    energy = ((energy_a[hi] - energy_a[lo])
              * (energy_b[np.clip(hi + lags, 0, b.shape[0])]
                 - energy_b[np.clip(lo + lags, 0, b.shape[0])]))
    c = np.where(energy > 0, c / np.sqrt(np.where(energy > 0, energy, 1.0)), -np.inf)
    # x_b(grid_b[m]) ~ x_a(grid_a[0]): d = grid_b[0] + m step - grid_a[0].
    shifts = grid_b[0] + lags * step - grid_a[0]
    allowed = np.flatnonzero(np.abs(shifts) <= max_shift)
    if allowed.size == 0:
        raise SampleError(f"no shift within {max_shift} s aligns the two recordings")
    k = allowed[np.argmax(c[allowed])]
    left, right = c[(k - 1) % size], c[(k + 1) % size]
    curvature = left - 2.0 * c[k] + right
    offset = 0.5 * (left - right) / curvature if np.isfinite(curvature) and curvature < 0 else 0.0
    return float(shifts[k] + np.clip(offset, -0.5, 0.5) * step)


@dataclass(frozen=True)
class PairedDifference:
    """A loaded recording minus an unloaded one of the same trajectory, sample by sample.

    ``shift`` (s): the unloaded run's sample at ``t + shift`` (its own clock) is paired with
    the loaded run's at ``t`` (:func:`time_shift`); ``t, q, qd, qdd`` (N, nv): the loaded
    run's rows whose partner lies inside the unloaded record; ``difference`` (N, nv, effort
    units): loaded minus unloaded effort (linearly interpolated), minus the link model's
    rigid-body difference between the two states (second order: the runs follow the same
    path), so the arm's own torques and the model's error of them cancel.
    """

    shift: float
    t: NDArray[np.float64]
    q: NDArray[np.float64]
    qd: NDArray[np.float64]
    qdd: NDArray[np.float64]
    difference: NDArray[np.float64]


def paired_difference(links: LinkTorqueModel, loaded: tuple[NDArray[np.float64], ...],
                      unloaded: tuple[NDArray[np.float64], ...], max_shift: float = 1.0
                      ) -> PairedDifference:
    """:class:`PairedDifference` of two recordings ``(t, q, qd, qdd, effort)`` (model joint
    order, stamps in s on each run's own clock), aligned on the joint velocities within
    ``max_shift`` s."""
    t, q, qd, qdd, effort = (np.asarray(a, dtype=float) for a in loaded)
    tu, *others = (np.asarray(a, dtype=float) for a in unloaded)
    shift = time_shift(t, qd, tu, others[1], max_shift)
    inside = (t + shift >= tu[0]) & (t + shift <= tu[-1])
    if inside.sum() < 2:
        raise SampleError("the loaded and unloaded recordings do not overlap once aligned")
    t, q, qd, qdd, effort = (a[inside] for a in (t, q, qd, qdd, effort))
    qu, qdu, qddu, effort_u = (np.column_stack([np.interp(t + shift, tu, c) for c in a.T])
                               for a in others)
    difference = (effort - effort_u
                  - (links.rigid_efforts(q, qd, qdd) - links.rigid_efforts(qu, qdu, qddu)))
    return PairedDifference(shift, t, q, qd, qdd, difference)


def identify_paired_payload(identifier: TorquePayloadIdentifier, pair: PairedDifference
                            ) -> Estimate:
    """The payload from a :class:`PairedDifference` (``e_loaded - e_unloaded = s J_f^T Y pi +
    F(qd) dphi``): each run keeps its own friction and offsets, so their change ``dphi`` (the
    link model's friction terms per joint, :attr:`LinkTorqueModel.drive_friction`) is
    projected out of the rows and the difference per joint first (least squares on the
    loaded run's velocities; the payload fit on what is left is the joint fit's). The
    weights are the per-joint residual std of an unconstrained fit of what is left; the
    identifier's statistics are replaced by these rows, the estimate is its solve."""
    links = identifier.links
    rows = identifier.rows(pair.q, pair.qd, pair.qdd)
    nuisance = links.drive_friction.regressor(pair.qd, pair.qdd)
    per_joint = nuisance.shape[-1] // links.model.n
    rows_left, target_left = np.empty_like(rows), np.empty_like(pair.difference)
    for j in range(links.model.n):
        f = nuisance[:, j, j * per_joint:(j + 1) * per_joint]
        both = np.column_stack((rows[:, j], pair.difference[:, j]))
        left = both - f @ np.linalg.lstsq(f, both, rcond=None)[0]
        rows_left[:, j], target_left[:, j] = left[:, :-1], left[:, -1]
    pi = np.linalg.lstsq(rows_left.reshape(-1, N_PI), target_left.ravel(), rcond=None)[0]
    sigma = np.sqrt(np.mean((target_left - rows_left @ pi) ** 2, axis=0))
    identifier.links = replace(links, joint_sigma=np.maximum(sigma, 1e-12))
    identifier.reset()
    identifier.add_rows(rows_left, target_left)
    return identifier.solve()


class TorquePayloadStream:
    """The live form of :class:`TorquePayloadIdentifier`: joint states (stamp, positions,
    efforts; model order) arrive one by one; :meth:`process` smooths and differentiates the
    pending ones with a Savitzky-Golay filter of ``window`` samples (``order``) on their stamps
    and adds every sample whose window is complete to the statistics, keeping the last
    ``window - 1`` states for the next call. Each state enters the statistics once, so the
    cost per state is constant however long the stream runs (cumulative estimate). A link
    friction with direction memory is carried from one chunk to the next (its state and step
    follow the stream).
    """

    def __init__(self, identifier: TorquePayloadIdentifier, window: int = 31,
                 order: int = 3) -> None:
        if window % 2 == 0 or window <= order:
            raise SampleError(f"the window must be odd and longer than the order, got {window}")
        self.identifier = identifier
        self.window, self.order = int(window), int(order)
        self._t: list[float] = []
        self._q: list[NDArray[np.float64]] = []
        self._e: list[NDArray[np.float64]] = []
        self._done = 0  # samples of the buffer already in the statistics
        self._direction: NDArray[np.float64] | None = None  # memory state after the last chunk
        self.samples = 0
        self.period = float("nan")  # s, median spacing of the states seen in the last window

    def push(self, stamp: float, q: ArrayLike, effort: ArrayLike) -> None:
        """One joint state; stamps must increase (:class:`SampleError` otherwise)."""
        if self._t and stamp <= self._t[-1]:
            raise SampleError(f"stamp {stamp:.6f} s is not after the previous one")
        self._t.append(float(stamp))
        self._q.append(np.asarray(q, dtype=float))
        self._e.append(np.asarray(effort, dtype=float))

    def ready(self) -> tuple[NDArray[np.float64], ...] | None:
        """The pending samples whose filter window is complete, smoothed and differentiated:
        ``(t, q, qd, qdd, effort, initial)`` (None when there are none), ``initial`` the link
        friction's direction-memory state before the first row (None without memory); each
        sample is returned once, and the buffer keeps only the last ``window - 1`` states."""
        half = self.window // 2
        n = len(self._t)
        ready = n - half  # samples [done, ready) have a full centred window
        if n < self.window or ready <= self._done:
            return None
        t, q, e = np.array(self._t), np.array(self._q), np.array(self._e)
        self.period = float(np.median(np.diff(t)))
        start = max(self._done, half)
        rows = slice(start, ready)
        smooth = [savitzky_golay(t, q, self.window, self.order, d)[rows] for d in (0, 1, 2)]
        keep = max(ready - half, 0)  # the next window needs the last `window - 1` states
        del self._t[:keep], self._q[:keep], self._e[:keep]
        self._done = ready - keep
        initial = self._direction
        friction = self.identifier.links.friction
        if friction.memory:
            friction = replace(friction, sample_period=self.period)
            self.identifier.links = replace(self.identifier.links, friction=friction)
            self._direction = friction.direction(smooth[1], initial)[-1]
        return (t[rows], *smooth, e[rows], initial)

    def add(self, q: ArrayLike, qd: ArrayLike, qdd: ArrayLike, effort: ArrayLike,
            initial: ArrayLike | None = None) -> None:
        """Add samples (from :meth:`ready`, with its ``initial``) to the statistics."""
        q = np.atleast_2d(np.asarray(q, dtype=float))
        if q.shape[0]:
            self.identifier.add(q, qd, qdd, effort, initial)
            self.samples += q.shape[0]

    def add_rows(self, rows: NDArray[np.float64], target: NDArray[np.float64]) -> None:
        """Add rows and targets (:meth:`TorquePayloadIdentifier.terms` of ready samples,
        possibly a subset) to the statistics."""
        if target.shape[0]:
            self.identifier.add_rows(rows, target)
            self.samples += target.shape[0]

    def process(self) -> int:
        """Add every ready sample (:meth:`ready`); returns how many were added."""
        chunk = self.ready()
        if chunk is None:
            return 0
        self.add(*chunk[1:])
        return chunk[0].size

    def reset(self) -> None:
        """Forget the statistics and the pending states (a new payload)."""
        self.identifier.reset()
        self._t, self._q, self._e = [], [], []
        self._done = self.samples = 0
        self._direction = None


MIN_CONTACT = 0.1
"""s above the T^2 threshold before a joint-torque contact starts, and below before it ends:
on the real Panda recording shorter debounces flagged 30-230 ms of model error at velocity
reversals as contacts (:func:`inertial_id.core.anomaly.contact_intervals`)."""
GATE = 0.05
"""s around a contact whose samples stay out of the estimate."""
HOLD = MIN_CONTACT + 2 * GATE
"""s a sample waits before it enters the statistics (a contact is confirmed by then)."""


class TorquePayloadOnline:
    """The live joint-torque payload with contact monitoring (the joint-torque counterpart of
    :class:`inertial_id.core.online.OnlineEstimator`).

    Each :meth:`step` takes the stream's ready samples; once an estimate whose mass has
    converged exists, their joint residual ``e - e_links - s J^T Y pi`` feeds a Hotelling
    :class:`T2Monitor` with one component per joint (trained on the first
    ``config.training_samples`` residuals, trimmed at
    :data:`~inertial_id.core.anomaly.TRIM_CONFIDENCE`, then flagging with a
    :data:`MIN_CONTACT` debounce in both directions, the ``confidence`` of ``config``).
    Samples wait :data:`HOLD` s and enter the statistics unless they are within :data:`GATE` s
    of a contact (its debounce included). The external wrench is the least-squares ``w``
    with ``s J_f^T w = -residual`` (exact for 6 joints), on the payload, in the payload
    frame.

    **Adaptive baseline.** A contact longer than ``relearn_after`` s is taken for a new level
    of the residual (a stiction offset left after a push, a drifting torque sensor): the
    monitor learns its baseline again from the following samples (event
    ``baseline_relearned``; they stay out of the statistics while it does), and from then on
    the change of the baseline's mean is subtracted from the efforts before they enter the
    statistics (:attr:`offset`, effort units per joint). A new payload is not such a level
    (its torques vary with the pose): call :meth:`reset` for one.
    ``config``: :class:`OnlineConfig` (min_samples, the verdicts' thresholds, monitor,
    confidence, training_samples).
    """

    def __init__(self, stream: TorquePayloadStream, config: OnlineConfig,
                 relearn_after: float = 3.0) -> None:
        self.stream = stream
        self.config = config
        self.relearn_after = float(relearn_after)
        self.reset()

    @property
    def verdicts(self) -> Verdicts:
        """The current estimate's verdicts (:func:`inertial_id.core.online.verdicts`)."""
        return verdicts(self.estimate, self.config)

    def _new_monitor(self) -> T2Monitor:
        period = self.stream.period if self.stream.period > 0 else 0.01
        steps = max(1, int(round(MIN_CONTACT / period)))
        return T2Monitor(confidence=self.config.confidence,
                         training_samples=self.config.training_samples,
                         components=self.stream.identifier.links.model.n,
                         on_samples=steps, off_samples=steps,
                         trim_confidence=TRIM_CONFIDENCE)

    def step(self) -> StepResult | None:
        """Process the stream's ready samples (None when there are none): a
        :class:`~inertial_id.core.online.StepResult` whose ``residual`` is the external wrench
        on the payload (N, 6; zeros before an estimate; for an F/T sensor reporting
        ``payload_on_sensor`` the F/T residual is that same wrench), and whose events are
        ``"monitor_trained"``, ``"contact_start"``, ``"contact_end"``,
        ``"baseline_relearned"``."""
        chunk = self.stream.ready()
        if chunk is None:
            return None
        t, q, qd, qdd, effort, initial = chunk
        jacobians, rows, target = self.stream.identifier.terms(q, qd, qdd, effort, initial)
        n = t.size
        events: list[str] = []
        t2, contact = np.zeros(n), np.zeros(n, dtype=bool)
        threshold, wrench = float("inf"), np.zeros((n, 6))
        if not self.config.monitor:
            self.monitor = None  # switched off: no stale contact may hold samples back
        # The monitor starts once the mass has converged and then keeps watching: a push that
        # spoils the estimate must not switch off the test that keeps it out.
        watching = self.config.monitor and self.estimate is not None and (
            self.monitor is not None or self.verdicts.mass)
        if watching:
            residual = target - rows @ self.estimate.pi
            wrench = self._external_wrench(jacobians, residual)
            if self.monitor is None:
                self.monitor = self._new_monitor()
            elif self.monitor.confidence != self.config.confidence:
                m = self.monitor
                m.reconfigure(self.config.confidence, m.training_samples, m.on_samples,
                              m.off_samples, m.release)
            result, watched = self._watch(t, residual)
            t2, contact, threshold = result.t2, result.contact, result.threshold
            events += watched
        self._hold((t, rows, target), watching)
        return StepResult(t, wrench, t2, contact, threshold, events)

    def _watch(self, t: NDArray[np.float64], residual: NDArray[np.float64]
               ) -> tuple[T2Result, list[str]]:
        """Run the monitor on one chunk; record contact intervals (gaps in the statistics)
        and relearn the baseline after a lasting contact. Returns its result and the
        events."""
        monitor = self.monitor
        assert monitor is not None
        events = []
        was_ready, was_in = monitor.ready, monitor.in_contact
        before = len(monitor.intervals)
        result = monitor.update(t, residual)
        if monitor.ready and not was_ready:
            events.append("monitor_trained")
            if self._baseline is None:
                self._baseline = monitor.mean.copy()
            else:  # after a relearning: the level change is an effort offset from now on
                self.offset = monitor.mean - self._baseline
        ended = monitor.intervals[before:]
        started = len(ended) + int(monitor.in_contact) - int(was_in)
        events += ["contact_start"] * started
        events += ["contact_end"] * len(ended)
        self.contacts += started
        self._gaps += [(c.start, c.end) for c in ended]
        start = monitor.contact_start
        if start is not None and t[-1] - start > self.relearn_after:
            self._gaps.append((start, float(t[-1])))
            monitor.reset()
            self._relearning_since = float(t[-1])
            events.append("baseline_relearned")
        if self._relearning_since is not None and monitor.ready:
            self._gaps.append((self._relearning_since, float(t[-1])))
            self._relearning_since = None
        return result, events

    def _hold(self, chunk: tuple[NDArray[np.float64], ...], watching: bool) -> None:
        """Samples wait :data:`HOLD` s before entering the statistics, so those of a contact's
        debounce (above the threshold before the contact is confirmed) and within
        :data:`GATE` s of it, and those of a baseline being relearned, are left out."""
        self._held.append(chunk)
        t, rows, target = (np.concatenate(parts) for parts in zip(*self._held, strict=True))
        due = t < t[-1] - HOLD
        running = self.monitor.candidate_start if (watching and self.monitor) else None
        if running is not None:
            due &= t < running - GATE
        if self._relearning_since is not None:
            due &= t < self._relearning_since - GATE
        keep = due.copy()
        for start, end in self._gaps:
            keep &= ~((t >= start - GATE) & (t <= end + GATE))
        self.stream.add_rows(rows[keep], target[keep] - self.offset)
        rest = ~due
        self._held = [(t[rest], rows[rest], target[rest])] if rest.any() else []
        if self._gaps and t[-1] - self._gaps[-1][1] > HOLD + GATE:
            self._gaps = [g for g in self._gaps if g[1] + GATE >= t[-1] - HOLD]

    def _external_wrench(self, jacobians: NDArray[np.float64],
                         residual: NDArray[np.float64]) -> NDArray[np.float64]:
        """Per sample the least-squares ``w`` with ``s J_f^T w = -residual`` (N, 6), from the
        payload frame's Jacobians (N, 6, nv): the residual is in effort units, the wrench in
        N and N m."""
        torque = residual / self.stream.identifier.links.effort_scale
        jt = np.swapaxes(jacobians, 1, 2)  # (N, nv, 6)
        return np.array([-np.linalg.lstsq(a, r, rcond=None)[0]
                         for a, r in zip(jt, torque, strict=True)])

    def solve(self) -> Estimate | None:
        """A new estimate once ``min_samples`` are in (kept when consistent; a failure raises
        and the last one stays); None before."""
        if self.stream.samples < self.config.min_samples:
            return None
        estimate = self.stream.identifier.solve()
        if not estimate.physically_consistent:
            raise SolverError("the estimate is not physically consistent")
        self.estimate = estimate
        return estimate

    def reset(self) -> None:
        """Start over (a new payload): statistics, estimate, monitor and baseline."""
        self.stream.reset()
        self.estimate: Estimate | None = None
        self.monitor: T2Monitor | None = None
        self.contacts = 0
        self.offset = np.zeros(self.stream.identifier.links.model.n)
        self._baseline: NDArray[np.float64] | None = None
        self._relearning_since: float | None = None
        self._held: list[tuple[NDArray[np.float64], ...]] = []
        self._gaps: list[tuple[float, float]] = []  # contact intervals, stamps (s)
