"""Trends over calendar time from the batch table: payload mass per tool, contact rate, and
a drift test of each joint's friction that compares like with like.

Friction changes more with temperature and load than with wear (Bittencourt et al., 2010-2014),
so a trend test of friction coefficients identified in recordings months apart only compares
estimates made under the same conditions:

- **Phase**: the same time segment after the bag's start (``start_s``/``end_s`` of the row,
  rounded to ``phase_tolerance`` s), so a coefficient identified in the first minutes of a
  recording (a cold drive) is compared only with others identified in the first minutes.
- **Payload**: the same tool, a cluster of the row's identified ``mass`` (:func:`tools`;
  rows without a mass form their own class).

Each such class is a stratum; the test is the **stratified (seasonal) Mann-Kendall test**
(Hirsch, Slack and Smith 1982): Kendall's ``S`` of the coefficient against time summed over
the strata, its variance (with ties) summed likewise, a two-sided normal p-value with a
continuity correction. Its size is the **stratified Theil-Sen slope**: the median of every
within-stratum pairwise slope of the coefficient divided by its stratum's median level, in %
of that level per month, with Sen's confidence interval from the variance of ``S``. The
p-values of one robot's joints and coefficients are corrected together (Holm-Bonferroni), so
``alpha`` is the family-wise false-alarm level per robot. Recordings are taken as independent
(no serial correlation between bags is modelled).

Units: times are stamps in s (the table's), slopes per month of :data:`MONTH` s; masses kg;
friction in the effort units of the link model (N m for torques). Nothing here imports ROS.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.stats import norm

from inertial_id.core.errors import InertialIdError

if TYPE_CHECKING:
    from inertial_id.core.joint_torque.friction import FrictionModel
    from inertial_id.core.joint_torque.link_model import BaseParameters, LinkModel
    from inertial_id.core.joint_torque.link_selection import LinkOptions
    from inertial_id.core.joint_torque.links import LinkEstimate

MONTH = 30.4375 * 86400.0
"""s in a month (a Gregorian year / 12)."""
COULOMB_TERMS = ("fc", "fc+", "fc-")
"""Friction terms tested as Coulomb levels (:attr:`FrictionModel.terms`)."""
TESTED_TERMS = (*COULOMB_TERMS, "fv")
"""Every friction term tested for drift (Coulomb and viscous; offsets are not friction)."""
REQUIRED = ("robot", "bag", "segment", "error", "start_stamp", "start_s", "end_s", "mass",
            "contacts")
"""Columns every trend needs; friction needs ``friction_names`` and ``friction`` too."""
FRICTION = ("friction_names", "friction")


@dataclass(frozen=True)
class TrendOptions:
    """``alpha``: family-wise false-alarm level per robot (Holm across its tests);
    ``min_drift``: % per month below which a significant trend is not flagged;
    ``phase_tolerance``: s to which ``start_s``/``end_s`` are rounded to form phases;
    ``tool_tolerance`` (kg) and ``tool_share``: two masses are one tool when they differ by
    less than the larger of the two."""

    alpha: float = 0.05
    min_drift: float = 0.0
    phase_tolerance: float = 1.0
    tool_tolerance: float = 0.05
    tool_share: float = 0.05


@dataclass(frozen=True)
class TrendTest:
    """A stratified Mann-Kendall test and Theil-Sen slope of one series (module docstring).
    ``slope``: units per month; ``percent``, ``low``, ``high``: % of the stratum level per
    month, with the (1 - alpha) confidence interval; ``p``: two-sided p-value before
    correction; ``n``: points in strata of at least two."""

    n: int
    strata: int
    s: float
    variance: float
    z: float
    p: float
    slope: float
    percent: float
    low: float
    high: float


@dataclass
class DriftResult:
    """The drift test of one coefficient of one joint of one robot (effort units)."""

    joint: str
    term: str
    test: TrendTest
    level: float
    p_adjusted: float = 1.0
    flagged: bool = False
    strata: list[str] = field(default_factory=list)

    def document(self) -> dict[str, Any]:
        """Plain values for trends.json."""
        return {"joint": self.joint, "term": self.term, "level": self.level,
                **asdict(self.test), "p_adjusted": self.p_adjusted, "flagged": self.flagged,
                "strata_names": self.strata}


# --- statistics -----------------------------------------------------------------------------

def _kendall(t: NDArray[np.float64], y: NDArray[np.float64]) -> tuple[float, float]:
    """Mann-Kendall ``S`` and its variance under no trend, with ties in ``y`` and ``t``."""
    n = t.size
    i, j = np.triu_indices(n, 1)
    s = float(np.sum(np.sign(t[j] - t[i]) * np.sign(y[j] - y[i])))
    variance = n * (n - 1) * (2 * n + 5) / 18.0
    for values in (y, t):
        _, counts = np.unique(values, return_counts=True)
        variance -= float(np.sum(counts * (counts - 1) * (2 * counts + 5))) / 18.0
    return s, max(variance, 0.0)


def trend_test(groups: Iterable[tuple[ArrayLike, ArrayLike]],
               alpha: float = 0.05) -> TrendTest:
    """Stratified Mann-Kendall test and Theil-Sen slope of ``groups``, each ``(t, y)`` with
    ``t`` in s and ``y`` in any unit (module docstring)."""
    s_total = variance = 0.0
    slopes: list[NDArray[np.float64]] = []
    relative: list[NDArray[np.float64]] = []
    n = strata = 0
    for t, y in groups:
        t, y = np.asarray(t, dtype=float), np.asarray(y, dtype=float)
        if t.size < 2:
            continue
        s, v = _kendall(t, y)
        s_total += s
        variance += v
        n += t.size
        strata += 1
        i, j = np.triu_indices(t.size, 1)
        dt = (t[j] - t[i]) / MONTH
        keep = dt != 0
        slope = (y[j] - y[i])[keep] / dt[keep]
        slopes.append(slope)
        level = float(np.median(y))
        relative.append(100.0 * slope / abs(level) if level != 0 else np.full(slope.size, np.nan))
    if variance > 0:
        z = (s_total - math.copysign(1.0, s_total)) / math.sqrt(variance) if s_total else 0.0
        p = float(2 * norm.sf(abs(z)))
    else:
        z, p = 0.0, 1.0
    every = np.concatenate(slopes) if slopes else np.empty(0)
    rel = np.sort(np.concatenate(relative)) if relative else np.empty(0)
    if rel.size == 0:
        return TrendTest(n, strata, s_total, variance, z, p, math.nan, math.nan, math.nan,
                         math.nan)
    c = float(norm.ppf(1 - alpha / 2)) * math.sqrt(variance)
    lower = int(np.clip(round((rel.size - c) / 2) - 1, 0, rel.size - 1))  # as scipy
    upper = int(np.clip(round((rel.size + c) / 2), 0, rel.size - 1))
    return TrendTest(n, strata, s_total, variance, z, p, float(np.median(every)),
                     float(np.median(rel)), float(rel[lower]), float(rel[upper]))


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values (reject where adjusted <= the family-wise level)."""
    p = np.asarray(pvalues, dtype=float)
    order = np.argsort(p)
    adjusted = np.empty_like(p)
    running = 0.0
    for rank, k in enumerate(order):
        running = max(running, min(1.0, (p.size - rank) * p[k]))
        adjusted[k] = running
    return adjusted.tolist()


def friction_columns(joints: Sequence[str], friction: FrictionModel, estimate: LinkEstimate,
                     rms: ArrayLike) -> dict[str, list]:
    """The joint-torque columns of a batch row from a link identification: ``joints``,
    ``friction_names`` (``joint.term``), ``friction`` and ``friction_std`` (effort units,
    :attr:`LinkEstimate.friction` order) and ``residual_rms`` per joint (effort units)."""
    count = estimate.friction.size
    return {"joints": list(joints), "friction_names": friction.names(joints),
            "friction": estimate.friction.tolist(),
            "friction_std": estimate.std[-count:].tolist(),
            "residual_rms": np.asarray(rms, dtype=float).tolist()}


def friction_by_phase(model: LinkModel, t: ArrayLike, rows: Sequence[ArrayLike],
                      phases: Sequence[tuple[float, float]], options: LinkOptions,
                      base: BaseParameters | None = None, valid: ArrayLike | None = None
                      ) -> list[dict[str, Any]]:
    """The links identified (:func:`~inertial_id.core.joint_torque.link_selection.identify_links`)
    on each phase ``[a, b)`` s since ``t[0]`` of one recording: per phase that has data, its
    ``start_s``/``end_s`` (s) and :func:`friction_columns`. ``rows`` = (q, qd, qdd, effort)
    in model joint order, one per stamp of ``t`` (s); ``valid`` masks rows to leave out."""
    from inertial_id.core.joint_torque.link_selection import identify_links

    t = np.asarray(t, dtype=float)
    since = t - t[0]
    keep = np.ones(t.size, bool) if valid is None else np.asarray(valid, dtype=bool)
    out = []
    for a, b in phases:
        mine = keep & (since >= a) & (since < b)
        if np.count_nonzero(mine) < 10 * len(model.joint_names):
            continue  # too short a phase to identify
        problem, _, estimate = identify_links(
            model, tuple(np.asarray(r)[mine] for r in rows), options, base)
        out.append({"start_s": float(a), "end_s": float(b), **friction_columns(
            model.joint_names, problem.friction_model, estimate, problem.rms(estimate))})
    return out


# --- the table --------------------------------------------------------------------------------

def check_columns(columns: Iterable[str], friction: bool = False) -> None:
    """One-line error naming the first missing column the trends need."""
    have = set(columns)
    for name in (*REQUIRED, *(FRICTION if friction else ())):
        if name not in have:
            raise InertialIdError(f"the table has no column {name!r}: not a batch table")


def bag_start(row: Mapping[str, Any]) -> float:
    """Stamp (s) of the bag's first message, from a row's ``start_stamp - start_s``."""
    return float(row["start_stamp"]) - float(row["start_s"])


def good_rows(rows: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Rows without an error and with their times (failed bags have none)."""
    out = []
    for row in rows:
        if row["error"] is None and row["start_stamp"] is not None and row["start_s"] is not None:
            out.append(row)
    return out


def tools(masses: Sequence[float], options: TrendOptions) -> list[int]:
    """Tool index of each mass (kg): sorted masses split where neighbours differ by more
    than ``max(tool_tolerance, tool_share * mass)``; tool 0 is the lightest."""
    order = np.argsort(masses)
    label = [0] * len(masses)
    current, previous = 0, None
    for k in order:
        m = float(masses[k])
        if previous is not None and m - previous > max(options.tool_tolerance,
                                                       options.tool_share * abs(m)):
            current += 1
        label[k] = current
        previous = m
    return label


def tool_names(rows: Sequence[Mapping[str, Any]], options: TrendOptions) -> list[str]:
    """Per row: ``"tool N (M kg)"`` by :func:`tools`, or ``"no mass"`` when it has none."""
    index = [k for k, r in enumerate(rows) if r["mass"] is not None]
    labels = tools([float(rows[k]["mass"]) for k in index], options)
    medians: dict[int, list[float]] = defaultdict(list)
    for k, label in zip(index, labels, strict=True):
        medians[label].append(float(rows[k]["mass"]))
    names = ["no mass"] * len(rows)
    for k, label in zip(index, labels, strict=True):
        names[k] = f"tool {label} ({np.median(medians[label]):.3g} kg)"
    return names


def phase_name(row: Mapping[str, Any], tolerance: float) -> str:
    """The row's time segment after the bag's start, rounded to ``tolerance`` s."""
    a = round(float(row["start_s"]) / tolerance) * tolerance
    b = round(float(row["end_s"]) / tolerance) * tolerance if row["end_s"] is not None else a
    return f"{a:g}-{b:g} s"


# --- the three trends -------------------------------------------------------------------------

def payload_trends(rows: Sequence[Mapping[str, Any]], options: TrendOptions
                   ) -> dict[str, Any]:
    """Per tool: its points ``(stamp s, mass kg, bag, segment)``, median mass and a
    build-up test (kg per month; Holm across the robot's tools). Joint-torque rows (with
    ``friction_names``: one per phase, the mass from joint torques, which carries the phase's
    unmodelled friction such as warm-up) are compared within their phase (stratified test);
    payload-mode rows (one per payload segment) within their tool only."""
    rows = [r for r in rows if r["mass"] is not None]
    names = tool_names(rows, options)
    series: dict[str, list[tuple[float, float, str, int]]] = defaultdict(list)
    strata: dict[str, list[str]] = defaultdict(list)
    for row, name in zip(rows, names, strict=True):
        series[name].append((float(row["start_stamp"]), float(row["mass"]), str(row["bag"]),
                             int(row["segment"])))
        strata[name].append(phase_name(row, options.phase_tolerance)
                            if row.get("friction_names") else "all")
    out = {}
    for name, points in sorted(series.items()):
        groups: dict[str, list[tuple[float, float]]] = defaultdict(list)
        for point, stratum in zip(points, strata[name], strict=True):
            groups[stratum].append(point[:2])
        test = trend_test([(np.array([p[0] for p in g]), np.array([p[1] for p in g]))
                           for _, g in sorted(groups.items())], options.alpha)
        m = np.array([p[1] for p in points])
        out[name] = {"mass": float(np.median(m)), "points": [list(p) for p in points],
                     "test": asdict(test)}
    adjusted = holm([v["test"]["p"] for v in out.values()]) if out else []
    for value, p in zip(out.values(), adjusted, strict=True):
        value["p_adjusted"] = p
        value["flagged"] = bool(p <= options.alpha and
                                abs(value["test"]["percent"]) >= options.min_drift)
    return out


def contact_trends(rows: Sequence[Mapping[str, Any]], options: TrendOptions
                   ) -> dict[str, Any]:
    """Per bag: its start (stamp s), recorded hours (of its segments), contacts and rate
    (contacts per hour); with a trend test of the rate (per hour per month, not corrected,
    for reading only)."""
    bags: dict[str, dict[str, Any]] = {}
    for row in rows:
        bag = bags.setdefault(str(row["bag"]), {"bag": str(row["bag"]), "start": bag_start(row),
                                                "first": math.inf, "last": -math.inf,
                                                "contacts": 0})
        bag["first"] = min(bag["first"], float(row["start_s"]))
        bag["last"] = max(bag["last"], float(row["end_s"] if row["end_s"] is not None
                                             else row["start_s"]))
        bag["contacts"] += int(row["contacts"] or 0)
    points = []
    for bag in sorted(bags.values(), key=lambda b: b["start"]):
        hours = (bag["last"] - bag["first"]) / 3600.0
        points.append({"bag": bag["bag"], "start": bag["start"], "hours": hours,
                       "contacts": bag["contacts"],
                       "rate": bag["contacts"] / hours if hours > 0 else None})
    usable = [p for p in points if p["rate"] is not None]
    test = trend_test([(np.array([p["start"] for p in usable]),
                        np.array([p["rate"] for p in usable]))], options.alpha)
    hours = sum(p["hours"] for p in points)
    return {"bags": points, "hours": hours, "contacts": sum(p["contacts"] for p in points),
            "test": asdict(test)}


def friction_points(rows: Sequence[Mapping[str, Any]], options: TrendOptions
                    ) -> list[dict[str, Any]]:
    """One point per row and tested friction coefficient: ``joint``, ``term``, ``value``
    (effort units), ``time`` (stamp s of the row's segment start), ``bag``, ``phase``,
    ``tool`` and ``stratum`` (phase and tool)."""
    rows = [r for r in rows if r.get("friction_names") and r.get("friction")]
    names = tool_names(rows, options)
    points = []
    for row, tool in zip(rows, names, strict=True):
        if len(row["friction_names"]) != len(row["friction"]):
            raise InertialIdError(f"bag {row['bag']}: friction_names and friction differ in "
                                  "length")
        phase = phase_name(row, options.phase_tolerance)
        for name, value in zip(row["friction_names"], row["friction"], strict=True):
            joint, _, term = str(name).rpartition(".")
            if term in TESTED_TERMS and value is not None and math.isfinite(value):
                points.append({"joint": joint, "term": term, "value": float(value),
                               "time": float(row["start_stamp"]), "bag": str(row["bag"]),
                               "phase": phase, "tool": tool, "stratum": f"{phase}, {tool}"})
    return points


def drift_tests(points: Sequence[Mapping[str, Any]], options: TrendOptions,
                stratify: bool = True) -> list[DriftResult]:
    """The drift test of each (joint, term) of one robot's :func:`friction_points`, Holm
    across them; ``stratify`` False pools every phase and tool (what an uncontrolled
    comparison would say: for checks, not for reports)."""
    series: dict[tuple[str, str], dict[str, list[tuple[float, float]]]] = defaultdict(
        lambda: defaultdict(list))
    for p in points:
        key = p["stratum"] if stratify else "all"
        series[(p["joint"], p["term"])][key].append((p["time"], p["value"]))
    results = []
    for (joint, term), strata in series.items():
        groups = [(np.array([v[0] for v in s]), np.array([v[1] for v in s]))
                  for _, s in sorted(strata.items())]
        test = trend_test(groups, options.alpha)
        level = float(np.median(np.concatenate([g[1] for g in groups])))
        results.append(DriftResult(joint, term, test, level,
                                   strata=[k for k, s in sorted(strata.items()) if len(s) > 1]))
    for result, p in zip(results, holm([r.test.p for r in results]), strict=True):
        result.p_adjusted = p
        result.flagged = bool(p <= options.alpha and math.isfinite(result.test.percent)
                              and abs(result.test.percent) >= options.min_drift)
    return results


def robot_trends(rows: Sequence[Mapping[str, Any]], options: TrendOptions
                 ) -> dict[str, dict[str, Any]]:
    """Per robot: ``payload`` (:func:`payload_trends`), ``contacts``
    (:func:`contact_trends`), ``friction`` (points and :func:`drift_tests`), bags and rows."""
    by_robot: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    failed: dict[str, int] = defaultdict(int)
    for row in rows:
        by_robot[str(row["robot"])].append(row)
        failed[str(row["robot"])] += row["error"] is not None
    out = {}
    for robot, mine in sorted(by_robot.items()):
        good = good_rows(mine)
        points = friction_points(good, options)
        out[robot] = {
            "rows": len(mine), "failed_rows": failed[robot],
            "bags": len({r["bag"] for r in good}),
            "payload": payload_trends(good, options),
            "contacts": contact_trends(good, options),
            "friction": {"points": points,
                         "tests": [r.document() for r in drift_tests(points, options)]},
        }
    return out
