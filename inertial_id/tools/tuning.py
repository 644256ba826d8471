"""What ``inertial-id tune`` measures: labels, one bag's outcome under a parameter set, scores.

A parameter set is evaluated by replaying a bag (:func:`inertial_id.tools.replay.replay`, the nodes'
parameter file written to a temporary file and loaded as replay loads any) and keeping only
what the scores need (:class:`BagOutcome`). The scores, smaller is better:

- **payload** (bags labelled with ``payload``): the final estimate's relative mass error plus
  its CoM error over :data:`COM_SCALE` (1 % of mass counts as 1 mm of CoM).
- **contacts** (bags labelled with ``contacts``, ``[]`` for none): missed share of the labelled
  contacts + :data:`FALSE_ALARM_COST` per false alarm per hour + the mean onset delay (s)
  times :data:`DELAY_COST`. A detection overlapping a labelled interval widened by
  :data:`CONTACT_TOLERANCE` finds it; one overlapping none is a false alarm.
- **unlabelled** (no bag labelled): held-out wrench prediction. The bag is cut into blocks of
  :data:`BLOCK_S`; each block's raw wrenches are predicted with the last estimate solved
  before the block began (it has not seen them), and the error is the median over samples of
  the norm of ``[force, torque / LEVER]`` (N; the median ignores contacts). It is multiplied by
  the miscalibration of the std: the estimates of m and m c at block ends against the final
  one, ``z = (x_k - x_final) / sqrt(std_k^2 - std_final^2)`` (nested least squares), and
  the factor ``max(r, 1 / r)`` with ``r`` the RMS of z (1 when the std are right).
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from inertial_id.core.errors import InertialIdError

COM_SCALE = 0.1
"""m: a CoM error of COM_SCALE counts as a 100 % mass error (1 mm as 1 %)."""
FALSE_ALARM_COST = 0.01
"""Missed share of contacts one false alarm per hour costs (100 false alarms per hour as
bad as missing every contact)."""
DELAY_COST = 1.0
"""Missed share of contacts one second of mean onset delay costs."""
CONTACT_TOLERANCE = 0.2
"""s a detection may lie outside a labelled contact and still be it."""
BLOCK_S = 2.0
"""s of a block of the unlabelled score."""
LEVER = 0.1
"""m: torques are divided by it to weigh like forces (N) in the prediction error."""
MISSING_ESTIMATE_ERROR = 1.0
"""Payload score of a labelled bag the replay gave no estimate for (a 100 % error)."""


@dataclass(frozen=True)
class Label:
    """What the user knows of a bag: the payload at its end (mass kg, CoM m in the replay
    output's frame), contact intervals (s since the bag's first message; ``()`` none);
    ``None``: not known."""

    mass: float | None = None
    com: tuple[float, float, float] | None = None
    contacts: tuple[tuple[float, float], ...] | None = None

    @property
    def empty(self) -> bool:
        """Nothing is known."""
        return self.mass is None and self.contacts is None


@dataclass(frozen=True)
class BagOutcome:
    """One bag replayed with one parameter set: what the scores need (picklable, small)."""

    bag: str
    error: str | None = None
    mass: float | None = None
    com: tuple[float, ...] | None = None
    contacts: tuple[tuple[float, float], ...] = ()
    duration: float = 0.0
    prediction: tuple[float, ...] = ()
    """Per block after the first: the median prediction error (N)."""
    z: tuple[float, ...] = ()
    """The calibration z values (see the module docstring)."""


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(
            value):
        raise InertialIdError(f"{where}: expected a finite number, got {value!r}")
    return float(value)


def _label(entry: Any, where: str) -> Label:
    if entry is None:
        return Label()
    if not isinstance(entry, Mapping):
        raise InertialIdError(f"{where}: expected a mapping with payload and/or contacts")
    unknown = sorted(set(map(str, entry)) - {"payload", "contacts"})
    if unknown:
        raise InertialIdError(f"{where}: unknown key(s) {', '.join(unknown)} (payload, "
                              "contacts)")
    mass = com = contacts = None
    if entry.get("payload") is not None:
        payload = entry["payload"]
        if not isinstance(payload, Mapping) or "mass" not in payload:
            raise InertialIdError(f"{where}.payload: expected {{mass: KG, com: [X, Y, Z]}}")
        mass = _number(payload["mass"], f"{where}.payload.mass")
        if mass <= 0:
            raise InertialIdError(f"{where}.payload.mass: must be positive, got {mass}")
        if payload.get("com") is not None:
            values = payload["com"]
            if not isinstance(values, list) or len(values) != 3:
                raise InertialIdError(f"{where}.payload.com: expected [X, Y, Z] in m")
            com = tuple(_number(v, f"{where}.payload.com") for v in values)
    if "contacts" in entry:
        items = entry["contacts"] if entry["contacts"] is not None else []
        if not isinstance(items, list):
            raise InertialIdError(f"{where}.contacts: expected a list of [START, END] (s)")
        pairs = []
        for item in items:
            if not isinstance(item, list) or len(item) != 2:
                raise InertialIdError(f"{where}.contacts: expected [START, END], got {item!r}")
            a, b = (_number(v, f"{where}.contacts") for v in item)
            if b < a:
                raise InertialIdError(f"{where}.contacts: [{a}, {b}] ends before it starts")
            pairs.append((a, b))
        contacts = tuple(pairs)
    return Label(mass=mass, com=com, contacts=contacts)  # type: ignore[arg-type]


def load_labels(path: Path, bags: Sequence[Path]) -> dict[str, Label]:
    """``{bag (absolute): Label}`` for every bag, from a labels file::

        bags:
          fleet/r1/a: {payload: {mass: 1.2, com: [0, 0.01, 0.08]}, contacts: [[5.0, 5.4]]}
          fleet/r1/b: {contacts: []}

    Keys are bags, relative to the file's directory or absolute; a bag the file does not name
    is unlabelled; an entry that names no bag given is an error (a typo). Every error is one
    line naming the file and the entry."""
    from inertial_id.tools.replay import read_yaml

    try:
        doc = read_yaml(path, "labels")
    except InertialIdError as exc:  # a YAML error's text spans lines
        raise InertialIdError(" ".join(str(exc).split())) from exc
    entries = doc.get("bags") if isinstance(doc, Mapping) else None
    if not isinstance(entries, Mapping):
        raise InertialIdError(f"{path}: expected a mapping 'bags: {{BAG: {{payload: ..., "
                              "contacts: ...}}}}'")
    base = Path(path).resolve().parent
    given = {str(Path(b).resolve()): str(b) for b in bags}
    labels = {str(b): Label() for b in bags}
    for key, entry in entries.items():
        resolved = str((base / str(key)).resolve())
        if resolved not in given:
            raise InertialIdError(f"{path}: {key}: not one of the bags given")
        labels[given[resolved]] = _label(entry, f"{path}: {key}")
    return labels


# --- one bag under one parameter set (a Dask task) --------------------------------------------

def write_params(doc: Mapping[str, Any], path: Path, header: str = "") -> None:
    """A nodes' parameter file (``{section: {ros__parameters: {...}}}``), with a comment
    ``header``."""
    text = "".join(f"# {line}".rstrip() + "\n" for line in header.splitlines())
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text + yaml.safe_dump(dict(doc), sort_keys=False))
    except OSError as exc:
        raise InertialIdError(f"cannot write {path}: {exc.strerror or exc}") from exc


def evaluate_bag(bag: str, params: Mapping[str, Any], max_dropped: float) -> BagOutcome:
    """Replay ``bag`` with the parameter file ``params`` (written to a temporary file, loaded
    as replay loads any); never raises for a bad bag or parameter value (``error``)."""
    from inertial_id.tools.replay import ReplayOptions, replay

    try:
        with tempfile.TemporaryDirectory(prefix="inertial_id_tune_") as tmp:
            path = Path(tmp) / "params.yaml"
            write_params(params, path)
            result = replay(ReplayOptions(bag=Path(bag), params=path, progress=False,
                                          max_dropped=max_dropped))
    except Exception as exc:  # noqa: BLE001 - a failed replay is this trial's result on the bag
        text = str(exc) if isinstance(exc, InertialIdError) else f"{type(exc).__name__}: {exc}"
        return BagOutcome(bag=bag, error=" ".join(text.split()))
    doc = result.to_yaml()["estimate"]
    times = result.pipeline.history.batch_time
    prediction, z = block_scores(result)
    return BagOutcome(
        bag=bag, mass=None if doc is None else float(doc["mass"]),
        com=None if doc is None else tuple(float(c) for c in doc["com"]),
        contacts=tuple((float(a), float(b)) for a, b in result.contacts),
        duration=(max(times) - result.start_time) if times else 0.0,
        prediction=prediction, z=z)


def block_scores(result: Any) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """The unlabelled score's parts of a :class:`~inertial_id.tools.replay.ReplayResult`: per block
    the median prediction error (N) with the estimate solved before it, and the z values of
    m and m c at block ends against the final estimate."""
    from inertial_id.core.regressor import predicted_wrench

    h = result.pipeline.history
    if not h.sample_time or not h.solve_time:
        return (), ()
    t = np.concatenate(h.sample_time)
    rows = np.concatenate(h.sample_rows)
    solves = np.asarray(h.solve_time)
    sign = result.pipeline.online.identifier.sign
    edges = np.arange(t[0] + BLOCK_S, t[-1], BLOCK_S)
    errors, z = [], []
    final_pi, final_std = h.pi[-1][:4], h.std[-1][:4]
    for begin, end in zip(edges, [*edges[1:], np.inf], strict=True):
        known = np.flatnonzero(solves < begin)
        inside = (t >= begin) & (t < end)
        if not known.size or not inside.any():
            continue
        k = known[-1]
        r = rows[inside]
        residual = r[:, 12:18] - predicted_wrench(h.pi[k], r[:, :6], r[:, 6:12], h.offset[k],
                                                  sign)
        residual[:, 3:] /= LEVER
        errors.append(float(np.median(np.linalg.norm(residual, axis=1))))
        variance = h.std[k][:4] ** 2 - final_std**2
        ok = variance > 0.5 * h.std[k][:4] ** 2  # the final estimate knows clearly more
        z += [float(v) for v in (h.pi[k][:4] - final_pi)[ok] / np.sqrt(variance[ok])]
    return tuple(errors), tuple(z)


# --- scores -------------------------------------------------------------------------------------

@dataclass
class Score:
    """A parameter set's score on some bags (``loss``, smaller is better) and its parts."""

    loss: float
    parts: dict[str, float] = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)
    """Bags whose replay failed (then ``loss`` is inf)."""


def match_contacts(found: Sequence[tuple[float, float]], labelled: Sequence[tuple[float, float]],
                   tolerance: float = CONTACT_TOLERANCE) -> tuple[int, int, list[float]]:
    """(labelled contacts found, false alarms, onset delays of those found (s, signed))."""
    hits, delays = 0, []
    for a, b in labelled:
        starts = [s for s, e in found if s <= b + tolerance and e >= a - tolerance]
        if starts:
            hits += 1
            delays.append(min(starts) - a)
    false = sum(1 for s, e in found
                if not any(s <= b + tolerance and e >= a - tolerance for a, b in labelled))
    return hits, false, delays


def kind_of(labels: Mapping[str, Label]) -> str:
    """``labelled`` when any bag has a label, else ``unlabelled``."""
    return "labelled" if any(not label.empty for label in labels.values()) else "unlabelled"


def score(outcomes: Sequence[BagOutcome], labels: Mapping[str, Label], kind: str) -> Score:
    """The score of one parameter set on these bags' outcomes (module docstring)."""
    failed = [o.bag for o in outcomes if o.error is not None]
    if failed:
        return Score(math.inf, failed=failed)
    if kind == "unlabelled":
        return _unlabelled(outcomes)
    parts: dict[str, float] = {}
    payload = [(o, labels[o.bag]) for o in outcomes if labels[o.bag].mass is not None]
    if payload:
        mass = [abs(o.mass - lb.mass) / lb.mass if o.mass is not None  # type: ignore[operator]
                else MISSING_ESTIMATE_ERROR for o, lb in payload]
        com = [float(np.linalg.norm(np.subtract(o.com, lb.com))) if o.com is not None
               else COM_SCALE * MISSING_ESTIMATE_ERROR for o, lb in payload if lb.com is not None]
        parts["mass_error_percent"] = 100.0 * float(np.mean(mass))
        parts["com_error_mm"] = 1000.0 * float(np.mean(com)) if com else 0.0
        parts["payload"] = float(np.mean(mass)) + parts["com_error_mm"] / 1000.0 / COM_SCALE
    contact = [(o, labels[o.bag]) for o in outcomes if labels[o.bag].contacts is not None]
    if contact:
        hits = false = total = 0
        delays: list[float] = []
        hours = sum(o.duration for o, _ in contact) / 3600.0
        for o, lb in contact:
            h, f, d = match_contacts(o.contacts, lb.contacts or ())
            hits, false, total = hits + h, false + f, total + len(lb.contacts or ())
            delays += d
        parts["recall"] = hits / total if total else 1.0
        parts["false_alarms_per_hour"] = false / hours if hours > 0 else 0.0
        parts["onset_delay_s"] = float(np.mean(delays)) if delays else 0.0
        parts["contacts"] = (1.0 - parts["recall"]
                             + FALSE_ALARM_COST * parts["false_alarms_per_hour"]
                             + DELAY_COST * float(np.mean(np.abs(delays)) if delays else 0.0))
    loss = parts.get("payload", 0.0) + parts.get("contacts", 0.0)
    return Score(loss, parts)


def _unlabelled(outcomes: Sequence[BagOutcome]) -> Score:
    errors = [e for o in outcomes for e in o.prediction]
    z = np.asarray([v for o in outcomes for v in o.z])
    if not errors:
        return Score(math.inf, {"prediction_error_n": math.inf})
    rms = float(np.sqrt(np.mean(z**2))) if z.size else 1.0
    factor = max(rms, 1.0 / rms) if rms > 0 else math.inf
    error = float(np.mean(errors))
    return Score(error * factor, {"prediction_error_n": error, "std_calibration_rms_z": rms})


def split_bags(bags: Sequence[str], holdout: float, seed: int) -> tuple[list[str], list[str]]:
    """(tuning bags, held-out bags): a seeded shuffle, ``holdout`` of them held out (at least
    one when the share is positive and there are two bags or more; at least one to tune on)."""
    if not 0.0 <= holdout < 1.0:
        raise InertialIdError(f"--holdout must be in [0, 1), got {holdout}")
    order = list(bags)
    np.random.default_rng(seed).shuffle(order)
    held = min(len(order) - 1, max(1 if holdout > 0 else 0, round(holdout * len(order))))
    tuning, held_out = order[:len(order) - held], order[len(order) - held:]
    return sorted(tuning), sorted(held_out)

