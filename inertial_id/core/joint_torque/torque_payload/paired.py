"""The payload from a loaded and an unloaded recording of the same trajectory: aligned in time
(:func:`time_shift`, cross-correlation of the joint velocities; s, each run on its own clock)
and subtracted sample by sample (:func:`paired_difference`), so the arm's own torques and the
link model's error of them cancel; :func:`identify_paired_payload` fits the payload to the
difference with each run's own friction and offsets (effort units).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import ArrayLike, NDArray

from inertial_id.core.errors import SampleError
from inertial_id.core.estimate import Estimate
from inertial_id.core.joint_torque.link_model import N_PI
from inertial_id.core.joint_torque.torque_payload.identifier import TorquePayloadIdentifier
from inertial_id.core.joint_torque.torque_payload.model import LinkTorqueModel


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
