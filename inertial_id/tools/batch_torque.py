"""Joint-torque mode of ``inertial-id batch``: per bag, the link identification of
``identify-links`` on each time phase after the bag's start, and the payload of
``identify-payload --links`` on the same phase.

``inertial-id batch BAG... --mode joint-torque --links MODEL.yaml --phase S`` reads each bag's
joint states with efforts (:func:`~inertial_id.io.joint_records.read_joint_bag`), smooths and
differentiates them as identify-links does (Savitzky-Golay, ``window``/``order``), and cuts
them into phases ``[k S, (k + 1) S)`` s after the bag's first joint state. On each phase:

- **friction**: :func:`inertial_id.core.joint_torque.trends.friction_by_phase` (``identify_links``),
with
  the settings of the link model (identify-links' output): its URDF, moving and locked joints,
  friction model (shape, velocity scale, direction memory: fixed, not chosen again per phase,
  so every bag and phase fits the same terms), method and prior weight, its drive gains held.
  Columns ``joints``, ``friction_names``, ``friction``, ``friction_std`` (effort units, N m for
  torques) and ``residual_rms`` (per joint, effort units, of that phase's fit).
- **payload** (models with standard parameters: sdp, qp): identify-payload's estimator
  (:class:`~inertial_id.core.joint_torque.torque_payload.TorquePayloadIdentifier`, the efforts of
  the link model's rigid bodies and offsets and of the phase's own Coulomb and viscous coefficients
  subtracted, so friction changed since the model, warm-up or wear, is not taken for
  payload) gives ``frame``,
  ``mass`` (kg), ``com`` (m), ``inertia_com`` (kg m^2), ``pi``, ``std``, ... about
  ``payload_frame`` (default the last link's frame, so the change of the last link).
  ``trends`` groups rows by this mass (tools).
- **contacts**: check-links' test (:func:`~inertial_id.core.joint_torque.warmup.
  warm_contact_intervals`: the bag's warm-up friction recognised and taken out) on the
  residual of the link model with each phase's payload, over the whole bag; a contact belongs
  to the phase it starts in (``contact_intervals``: s since the bag's first joint state).

With a payload model, the friction and payload of a phase are fitted again on the rows the
first fit explains (:func:`~inertial_id.core.joint_torque.trimming.quiet_rows`, at most three
fits): a push is left out of the fit and stays in the residual the contact test reads
(``samples_used``: the rows of the last fit).

Phases with fewer than 10 rows per joint are left out; the last phase ends with the bag
(``end_s``). ``start_stamp``/``end_stamp``: the phase in stamps (s). A bag that fails is one
row with its one-line error (:func:`inertial_id.tools.batch.torque_bag`, the Dask task, fills the
table's other columns). Nothing here imports Dask or the batch module.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from inertial_id.core.errors import InertialIdError, ModelError

if TYPE_CHECKING:
    from inertial_id.core.joint_torque.link_model import LinkModel
    from inertial_id.core.joint_torque.link_selection import LinkOptions
    from inertial_id.core.joint_torque.torque_payload import LinkTorqueModel

MODE = "joint-torque"
"""The ``--mode`` of this module (the other is ``payload``)."""
DEFAULT_PHASE = 600.0
"""s: default length of a phase."""


@dataclass(frozen=True)
class TorqueSettings:
    """What the joint-torque mode runs: ``links`` the link model (identify-links' YAML,
    absolute path), ``urdf`` a URDF overriding the one it names, ``phase`` the length of a
    phase (s), ``method`` overriding the model's identification method, ``payload_frame``
    the frame the payload is given about, ``window``/``order`` the Savitzky-Golay filter
    (samples; ``None``: 0.24 s at the recording's rate, as identify-links), ``confidence``
    the contact test's T^2 confidence."""

    links: str
    urdf: str | None = None
    phase: float = DEFAULT_PHASE
    method: str | None = None
    payload_frame: str | None = None
    joint_states_topic: str | None = None
    window: int | None = None
    order: int = 3
    confidence: float = 0.9999


@dataclass(frozen=True)
class _Setup:
    model: LinkModel
    options: LinkOptions
    links: LinkTorqueModel | None


def _read_model(path: str) -> dict[str, Any]:
    import yaml

    try:
        doc = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ModelError(f"{path}: cannot read the link model ({exc})") from exc
    missing = [k for k in ("urdf", "joints", "friction_model", "method") if not (
        isinstance(doc, dict) and k in doc)]
    if missing:
        raise ModelError(f"{path}: not a link model of identify-links (no {', '.join(missing)})")
    return doc


def setup(settings: TorqueSettings) -> _Setup:
    """The link model, identification options and (when the model has standard parameters)
    the payload's link model of ``settings``; one :class:`ModelError` line when unusable."""
    from inertial_id.core.joint_torque.friction import FrictionModel
    from inertial_id.core.joint_torque.link_model import LinkModel
    from inertial_id.core.joint_torque.link_selection import LinkOptions
    from inertial_id.core.joint_torque.links import METHODS
    from inertial_id.core.joint_torque.torque_payload import LinkTorqueModel

    if not (settings.phase > 0 and math.isfinite(settings.phase)):
        raise InertialIdError(f"--phase must be > 0 s, got {settings.phase}")
    doc = _read_model(settings.links)
    method = settings.method or str(doc["method"])
    if method not in METHODS:
        raise ModelError(f"unknown method {method!r} (one of {', '.join(METHODS)})")
    try:
        model = LinkModel(settings.urdf or str(doc["urdf"]), joints=list(doc["joints"]),
                          locked=dict(doc.get("locked") or {}))
        friction = FrictionModel.from_settings(doc["friction_model"])
        scale = doc.get("effort_scale") or {}
        # Every gain held (the model's), so no phase fits its own effort scales.
        gains = {n: 1.0 / float(scale.get(n, 1.0)) for n in doc["joints"]}
    except (OSError, KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
        raise ModelError(f"{settings.links}: not a usable link model ({exc})") from exc
    weight = doc.get("prior_weight")
    options = LinkOptions(method=method, prior_weight=None if weight is None else float(weight),
                          friction=friction, known_gain=gains)
    links = LinkTorqueModel.from_file(settings.links, settings.urdf) if "links" in doc else None
    return _Setup(model, options, links)


def phase_rows(bag: str, settings: TorqueSettings, ready: _Setup) -> list[dict[str, Any]]:
    """The columns of one row per phase of ``bag`` (module docstring; :func:`setup` gives
    ``ready``); raises for a bag that cannot be read or identified."""
    from inertial_id.core.errors import SampleError
    from inertial_id.core.joint_torque.link_model import structural_base_parameters
    from inertial_id.io.joint_records import joint_data, read_joint_bag

    model = ready.model
    position, effort = read_joint_bag(bag, settings.joint_states_topic)
    missing = [n for n in model.joint_names if n not in position.names]
    if missing:
        raise SampleError(f"{bag}: no joint states for {', '.join(missing)}")
    data = joint_data(model, position, effort, None, settings.window, settings.order)
    period = float(np.median(np.diff(data.t)))
    options = replace(ready.options, friction=replace(ready.options.friction,
                                                      sample_period=period))
    base = structural_base_parameters(model)
    rows = (data.q, data.qd, data.qdd, data.effort)
    since = data.t - data.t[0]
    end = float(since[-1])
    count = max(1, math.ceil(end / settings.phase))
    found: list[dict[str, Any]] = []
    residuals: list[tuple[NDArray[np.float64], ...]] = []
    for k in range(count):
        a, b = k * settings.phase, (k + 1) * settings.phase
        phase = _phase(data.t, rows, data.valid & (since >= a) & (since < b), (a, b),
                       settings, ready, options, base, period)
        if phase is None:
            continue
        row, residual = phase
        row["end_s"] = min(b, end)
        found.append(row)
        if residual is not None:
            residuals.append(residual)
    if not found:
        raise SampleError(f"{bag}: no phase of {settings.phase:g} s with enough joint "
                          "states to identify")
    contacts = _contacts(residuals, settings.confidence) if residuals else None
    return [_row(k, len(found), float(data.t[0]), columns, contacts)
            for k, columns in enumerate(found)]


def _phase(t: NDArray[np.float64], rows: tuple[NDArray[np.float64], ...],
           mine: NDArray[np.bool_], bounds: tuple[float, float], settings: TorqueSettings,
           ready: _Setup, options: LinkOptions, base: Any, period: float
           ) -> tuple[dict[str, Any], tuple[NDArray[np.float64], ...] | None] | None:
    """One phase (``mine``: its rows; ``bounds``: s since the bag's start): its columns and,
    with a payload model, (s since the start, residual, friction efforts) of every row of it
    for the contact test. The friction and payload are fitted again on the rows the fit
    explains (:func:`~inertial_id.core.joint_torque.trimming.quiet_rows`: a push is left
    out of the fit, not out of the residual) until they no longer change, at most
    :data:`~inertial_id.core.joint_torque.trimming.TRIM_ROUNDS` fits; a trimmed fit short of
    rows keeps the last. None: too few rows for the first fit.

    The friction memory (direction memory, memory at rest) runs over the rows a fit takes, so
    after a row left out it starts from the state it had before the gap; a presliding memory
    settles within its ``x0`` of motion (a row or two at 125 Hz), while the residual is
    computed on the phase's rows in order."""
    from inertial_id.core.joint_torque.trends import friction_by_phase
    from inertial_id.core.joint_torque.trimming import TRIM_ROUNDS, quiet_rows

    used = mine
    phase_rows = tuple(r[mine] for r in rows)
    found: tuple[dict[str, Any], tuple[NDArray[np.float64], ...] | None] | None = None
    for _ in range(TRIM_ROUNDS):
        fitted = friction_by_phase(ready.model, t, rows, [bounds], options, base, used)
        if not fitted:
            return found  # the first fit: too few rows; a trimmed one: the last fit stands
        row = {**fitted[0], "samples_used": int(np.count_nonzero(used))}
        if ready.links is None:
            return row, None
        estimate, residual, friction = _payload(
            ready.links, settings.payload_frame, period, tuple(r[used] for r in rows),
            phase_rows, row["friction"])
        row.update(estimate)
        found = row, (t[mine] - t[0], residual, friction)
        quiet = quiet_rows(residual, period)
        if quiet is None:
            break
        trimmed = mine.copy()
        trimmed[mine] = quiet
        if np.array_equal(trimmed, used):
            break
        used = trimmed
    return found


def _payload(links: LinkTorqueModel, frame: str | None, period: float,
             fit_rows: tuple[NDArray[np.float64], ...], rows: tuple[NDArray[np.float64], ...],
             friction: list[float]
             ) -> tuple[dict[str, Any], NDArray[np.float64], NDArray[np.float64]]:
    """identify-payload's estimate on ``fit_rows`` (q, qd, qdd, effort), the residual of the
    link model with it on ``rows`` and their friction efforts of the model (effort units). The link
    model's rigid bodies and offsets with the phase's own Coulomb and viscous ``friction``
    coefficients (its link identification's, same terms): friction that changed since the
    model was identified (warm-up, wear) stays out of the payload. The phase's offsets are
    not used: with the payload in the links they take up part of its gravity torque."""
    from inertial_id.core.joint_torque.torque_payload import TorquePayloadIdentifier
    from inertial_id.io.calibration import estimate_document

    if len(friction) == links.coefficients.size:
        friction_only = np.tile([t != "offset" for t in links.friction.terms], links.model.n)
        coefficients = np.where(friction_only, friction, links.coefficients)
        links = replace(links, coefficients=coefficients)
    links = links.at_sample_period(period)
    identifier = TorquePayloadIdentifier(links, frame)
    identifier.add(*fit_rows)
    estimate = identifier.solve()
    doc = estimate_document(estimate, identifier.frame)
    keep = ("frame", "mass", "com", "inertia_com", "pi", "std", "com_std", "inertia_com_std",
            "physically_consistent")
    return ({k: doc[k] for k in keep}, identifier.residual(*rows, estimate.pi),
            links.dissipative_efforts(rows[1], rows[2]))


def _contacts(residuals: list[tuple[NDArray[np.float64], ...]],
              confidence: float) -> list[list[float]]:
    """check-links' contact intervals (s since the bag's start) on the phases' residuals,
    the bag's warm-up friction taken out (:mod:`inertial_id.core.joint_torque.warmup`)."""
    from inertial_id.core.joint_torque.warmup import warm_contact_intervals

    since, residual, friction = (np.concatenate(parts) for parts in zip(*residuals, strict=True))
    return warm_contact_intervals(since, residual, friction, confidence)[0]


def _row(k: int, count: int, first: float, columns: dict[str, Any],
         contacts: list[list[float]] | None) -> dict[str, Any]:
    """Phase ``k`` of ``count``: its columns, stamps from the bag's first stamp ``first``
    (s) and the contacts that start in it."""
    row = dict(columns, segment=k, segments=count, start_stamp=first + columns["start_s"],
               end_stamp=first + columns["end_s"])
    if contacts is not None:
        a, b = columns["start_s"], columns["end_s"]
        mine = [c for c in contacts if a <= c[0] < b or (k == count - 1 and c[0] >= b)]
        row.update(contacts=len(mine), contact_intervals=mine)
    return row
