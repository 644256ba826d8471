"""Link identification fed live (:class:`LinkStream`): the solver node's ``links`` mode and
``inertial-id identify-links`` both fit through :func:`fit_links` and write its
:meth:`LinkFit.document`.

Joint states (header stamp in s; positions in rad or m and efforts in N m, N or motor units, in
the message's joint order) are checked and put in the model's joint order, every
``decimation``-th one of the last ``horizon`` s is kept, and a fit smooths and differentiates
the positions with a Savitzky-Golay filter of ``window`` states on their stamps (the filter's
edges left out) and identifies the links (base parameters, friction and offsets, the URDF's
inertials as the prior, per-link ``J(pi) >= 0`` for sdp/qp).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from inertial_id.core.errors import InertialIdError, SampleError
from inertial_id.core.joint_torque.link_model import BaseParameters, LinkModel
from inertial_id.core.joint_torque.link_selection import LinkOptions, identify_links
from inertial_id.core.joint_torque.links import (
    LinkEstimate,
    LinkIdentification,
    estimate_document,
    link_document,
)
from inertial_id.core.kinematics import JointMapper, load_urdf_model, movable_joint_names
from inertial_id.core.parameters import BodyParameters
from inertial_id.core.samples import JointStateSample
from inertial_id.core.signals import savitzky_golay
from inertial_id.core.timepolicy import StampPolicy

MIN_STATES = 200
"""Kept joint states before the first fit (and at least three filter windows)."""
ORDER = 3
"""Savitzky-Golay polynomial order of the live fits."""


def checked_state(sample: JointStateSample, mapper: JointMapper, policy: StampPolicy,
                  last: float | None) -> tuple[float, NDArray[np.float64],
                                               NDArray[np.float64], bool]:
    """A joint state with efforts -> ``(stamp, q, effort, jumped)`` in the mapper's joint
    order. ``jumped``: the stamps restarted (a bag played again, a clock reset): the caller
    starts over, and ``last`` no longer applies. :class:`SampleError` for NaN/inf, missing
    joints, a stamp jumping away from the stream or not after ``last`` (s)."""
    q = mapper.select(sample.names, sample.position)
    effort = mapper.select(sample.names, sample.effort)
    if not (np.all(np.isfinite(q)) and np.all(np.isfinite(effort))):
        raise SampleError("NaN or inf in the positions or efforts")
    accepted, jumped = policy.accept(sample.stamp)
    if not accepted:
        raise SampleError(f"stamp {sample.stamp:.3f} s jumps away from the stream")
    if last is not None and not jumped and sample.stamp <= last:
        raise SampleError("stamp not after the previous one")
    return sample.stamp, q, effort, jumped


@dataclass(frozen=True)
class LinkFit:
    """One identification: the problem (its rows, friction model, base parameters), the CAD
    model with its fitted drive terms and the estimate."""

    model: LinkModel
    problem: LinkIdentification
    cad: LinkEstimate
    estimate: LinkEstimate

    @property
    def own(self) -> NDArray[np.float64]:
        """Each identified link's own ``pi`` (n, 10; the papers' order) about its link
        frame's origin, in its axes; :class:`InertialIdError` when the method gave no
        standard parameters."""
        if self.estimate.standard is None:
            raise InertialIdError(f"{self.estimate.method} gave no standard parameters")
        return self.estimate.standard - self.model.attachments

    def rms(self, cad: bool = False) -> dict[str, float]:
        """Effort RMS per joint of the estimate (``cad``: of the CAD model), effort units."""
        values = self.problem.rms(self.cad if cad else self.estimate)
        return {n: float(v) for n, v in zip(self.model.joint_names, values, strict=True)}

    def document(self, max_relative_std: float) -> dict[str, Any]:
        """What ``identify-links`` writes and the ``links`` mode publishes: joints, samples,
        friction model, torque RMS (identified and CAD), base parameters with sigma %
        (identifiable up to ``max_relative_std`` %), friction, effort scales and, with
        standard parameters, the links and whether all are physically consistent."""
        doc: dict[str, Any] = {"joints": list(self.model.joint_names),
                               "samples": self.problem.samples,
                               "friction_model": self.problem.friction_model.settings(),
                               "torque_rms": self.rms(), "torque_rms_cad": self.rms(cad=True)}
        doc.update(estimate_document(self.problem, self.estimate, max_relative_std))
        if self.estimate.standard is not None:
            doc["links"] = link_document(self.model, self.estimate.standard)
            doc["all_links_consistent"] = all(v["physically_consistent"]
                                              for v in doc["links"].values())
        return doc


def fit_links(model: LinkModel, rows: tuple[NDArray[np.float64], ...], options: LinkOptions,
              base: BaseParameters | None = None) -> LinkFit:
    """Identify the links on ``rows`` = (q, qd, qdd, effort), model joint order, time order
    (:func:`~inertial_id.core.joint_torque.link_selection.identify_links`)."""
    return LinkFit(model, *identify_links(model, rows, options, base))


def link_model(urdf: str, joints: Sequence[str] = ()) -> LinkModel:
    """The link model of ``joints`` (empty: every movable joint of the URDF text ``urdf``);
    the other movable joints are locked at 0. :class:`InertialIdError` for a joint that is
    not movable."""
    movable = movable_joint_names(load_urdf_model(urdf))
    chosen = list(joints) or movable
    unknown = sorted(set(chosen) - set(movable))
    if unknown:
        raise InertialIdError(f"links_joints not movable in the URDF: {', '.join(unknown)}")
    return LinkModel(urdf, joints=chosen, locked={n: 0.0 for n in movable if n not in chosen})


class LinkStream:
    """The links mode without ROS (module docstring): :meth:`due` says whether an arriving
    joint state is one to keep (every ``decimation``-th), :meth:`add` checks it and keeps it
    for ``horizon`` s (a restart of the stamps starts over), :meth:`fit` identifies on the
    kept states (``window``: Savitzky-Golay states, odd) and keeps a fit only when every link
    is physically consistent. Counts: ``arrived``, ``rejected``, ``fits``."""

    def __init__(self, model: LinkModel, options: LinkOptions, window: int,
                 decimation: int = 1, horizon: float = float("inf")) -> None:
        self.model = model
        self.options = options
        self.window = int(window)
        self.decimation = max(1, int(decimation))
        self.horizon = float(horizon)
        self.mapper = JointMapper(model.joint_names)
        self.policy = StampPolicy()
        self.states: deque[tuple[float, NDArray[np.float64], NDArray[np.float64]]] = deque()
        self.arrived = self.rejected = self.fits = 0
        self.last: LinkFit | None = None

    def due(self) -> bool:
        """Count an arriving joint state; whether it is one to keep (every
        ``decimation``-th, the first included)."""
        self.arrived += 1
        return (self.arrived - 1) % self.decimation == 0

    def add(self, sample: JointStateSample) -> None:
        """Keep one joint state (:func:`checked_state`; :class:`SampleError`, counted in
        ``rejected``, leaves the kept states as they were)."""
        last = self.states[-1][0] if self.states else None
        try:
            stamp, q, effort, jumped = checked_state(sample, self.mapper, self.policy, last)
        except SampleError:
            self.rejected += 1
            raise
        if jumped:
            self.states.clear()
        self.states.append((stamp, q, effort))
        while self.states and self.states[0][0] < stamp - self.horizon:
            self.states.popleft()

    @property
    def stamp(self) -> float | None:
        """The last kept state's stamp, s."""
        return self.states[-1][0] if self.states else None

    def rows(self) -> tuple[NDArray[np.float64], ...]:
        """(q, qd, qdd, effort) of the kept states, filtered, without the filter's edges."""
        t = np.array([s[0] for s in self.states])
        q = np.array([s[1] for s in self.states])
        effort = np.array([s[2] for s in self.states])
        smooth = [savitzky_golay(t, q, self.window, ORDER, d) for d in (0, 1, 2)]
        inner = slice(self.window // 2, t.size - self.window // 2)
        return tuple(a[inner] for a in (*smooth, effort))

    def fit(self) -> LinkFit | None:
        """Identify on the kept states (None before :data:`MIN_STATES` and three windows);
        :class:`InertialIdError` when it fails or a link is not physically consistent (the
        last fit stays)."""
        if len(self.states) < max(MIN_STATES, 3 * self.window):
            return None
        fit = fit_links(self.model, self.rows(), self.options)
        bad = [name for name, pi in zip(self.model.link_names, fit.own, strict=True)
               if not BodyParameters.from_pi(pi).is_physically_consistent()]
        if bad:
            raise InertialIdError(f"links not physically consistent: {', '.join(bad)}")
        self.fits += 1
        self.last = fit
        return fit
