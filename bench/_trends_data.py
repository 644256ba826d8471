"""Simulated joint-torque recordings spread over months, for `inertial-id trends`' friction
drift test (bench/trends.py and test/tools/test_trends.py).

One motor-current arm (:class:`inertial_id.core.joint_torque.current_arm.MotorCurrentArm`, the
bundled URDF, seed 4) runs the same exciting program in every recording, one recording every
``spacing_days`` (± ``jitter_days``). On top of the arm's own friction ``f`` (Coulomb and
viscous, N m) each recording has

- **warm-up**: friction ``(1 + warmup exp(-t / warmup_time)) f``, ``t`` s since the
  recording's start (a cold drive; time compressed: minutes of a real drive are seconds here);
- **load**: the Coulomb level times ``1 + load m``, ``m`` the tool's mass (kg); the first half
  of the recordings hold a 2.5 kg tool, the second half a 0.5 kg one;
- **drift** (wear), only when asked: joint ``drift_joint``'s Coulomb level times
  ``1 + drift months``, months since the first recording;
- **longer recordings later**: recording ``k`` lasts ``phases`` windows of ``PHASE`` s at the
  end of the series and one at its start, so a friction estimate over a whole recording falls
  over the months (more of it warm) and a lighter tool arrives halfway: both confound a naive
  comparison.

Each recording's links are identified on each window (phase) of ``PHASE`` s after its start by
:func:`inertial_id.core.joint_torque.trends.friction_by_phase` (``identify_links``, the
identify-links workflow; velocities and accelerations by ``joint_data``'s Savitzky-Golay filter, as
identify-links does), giving batch-table rows (``inertial_id.tools.batch.COLUMNS``): in memory
(:func:`table_rows`, the row's mass the simulated tool's), or from the bags
(:func:`write_bags`, stamped by the schedule) through ``inertial-id batch --mode joint-torque``
with the link model of :func:`reference_model` (bench/trends.py), which runs the same
``friction_by_phase`` and identifies the mass from the joint torques.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from inertial_id.core.joint_torque.current_arm import (
    MotorCurrentArm,
    Push,
    random_pushes,
    trajectory,
)
from inertial_id.core.joint_torque.friction import FrictionModel
from inertial_id.core.joint_torque.link_model import LinkModel, structural_base_parameters
from inertial_id.core.joint_torque.link_selection import LinkOptions
from inertial_id.core.joint_torque.trends import (
    MONTH,
    TrendOptions,
    drift_tests,
    friction_by_phase,
    friction_points,
)
from inertial_id.core.parameters import BodyParameters
from inertial_id.core.simulation import bundled_urdf_path
from inertial_id.io.joint_records import JointTable, joint_data

ARM_SEED = 4
PHASE = 10.0
"""s: the length of one identification window (phase)."""
FIRST = 1_767_225_600.0
"""Stamp of the first recording (2026-01-01 UTC)."""
JOINT_STATE_TOPIC = "/joint_states"


@dataclass(frozen=True)
class Series:
    """One robot's recordings (module docstring). ``drift``: fraction of the first Coulomb
    level per month; ``warmup``: extra friction share at a recording's start; ``load``:
    extra Coulomb share per kg; ``push_force``: people pushing the flange in every recording
    (:func:`pushes_of`, N; 0: none)."""

    recordings: int = 12
    spacing_days: float = 30.0
    jitter_days: float = 6.0
    drift: float = 0.0
    drift_joint: int = 2
    warmup: float = 0.3
    warmup_time: float = 8.0
    load: float = 0.03
    phases: int = 3
    tools: tuple[float, float] = (2.5, 0.5)
    seed: int = 0
    push_force: float = 0.0


def schedule(series: Series) -> list[dict[str, Any]]:
    """Per recording: ``stamp`` (s), ``months`` since the first, ``phases`` recorded,
    ``mass`` of the tool (kg) and the noise ``seed``."""
    rng = np.random.default_rng([series.seed, 11])
    out = []
    for k in range(series.recordings):
        day = k * series.spacing_days + (rng.uniform(-1, 1) * series.jitter_days if k else 0.0)
        stamp = FIRST + day * 86400.0
        phases = 1 + (k * series.phases) // series.recordings
        mass = series.tools[0] if k < series.recordings // 2 else series.tools[1]
        out.append({"stamp": stamp, "months": (stamp - FIRST) / MONTH, "phases": phases,
                    "mass": mass, "seed": 1000 * series.seed + k})
    return out


def tool(mass: float) -> BodyParameters:
    """A tool of ``mass`` kg, its CoM 8 cm out along the flange axis."""
    return BodyParameters.from_mass_com_inertia(mass, [0.0, 0.01, 0.08],
                                                np.diag([2e-3, 2e-3, 1e-3]) * mass)


def pushes_of(series: Series, entry: dict[str, Any]) -> tuple[Push, ...]:
    """The recording's pushes: ``random_pushes`` over a tenth of it, ``push_force / 2`` to
    ``push_force`` N (none when ``push_force`` is 0)."""
    if series.push_force <= 0:
        return ()
    return random_pushes(entry["phases"] * PHASE, entry["seed"], share=0.1,
                         force=series.push_force)


def record(arm: MotorCurrentArm, series: Series, entry: dict[str, Any]
           ) -> dict[str, NDArray[np.float64]]:
    """One recording (``MotorCurrentArm.record`` plus the warm-up's extra friction)."""
    coulomb = arm.coulomb * (1 + series.load * entry["mass"])
    coulomb[series.drift_joint] *= 1 + series.drift * entry["months"]
    worn = replace(arm, coulomb=coulomb)
    program = trajectory(arm.home, seed=5)
    rec = worn.record(program, entry["phases"] * PHASE, tool(entry["mass"]),
                      pushes_of(series, entry), seed=entry["seed"])
    _, qd, _ = program(rec["t"])
    cold = series.warmup * np.exp(-rec["t"] / series.warmup_time)
    rec["effort"] = rec["effort"] + worn.gain_error * cold[:, None] * worn.friction(
        qd, float(rec["t"][1] - rec["t"][0]))
    return rec


class Identifier:
    """The arm's CAD link model, its base parameters and the identification options (once)."""

    def __init__(self, method: str = "wls") -> None:
        self.arm = MotorCurrentArm.random(bundled_urdf_path(), seed=ARM_SEED)
        self.model = LinkModel(bundled_urdf_path())
        self.base = structural_base_parameters(self.model)
        friction = FrictionModel("symmetric", smooth=True, velocity_threshold=0.02,
                                 sample_period=1.0 / 125.0)
        self.options = LinkOptions(method=method, prior_weight=None if method == "sdp"
                                   else 0.0, friction=friction)

    def rows(self, position: JointTable, effort: JointTable,
             phases: list[tuple[float, float]]) -> list[dict[str, Any]]:
        """``friction_by_phase`` on joint positions and efforts (rad, N m; stamps in s), as
        identify-links reads them from a bag (``read_joint_bag``)."""
        data = joint_data(self.model, position, effort)
        return friction_by_phase(self.model, data.t, (data.q, data.qd, data.qdd, data.effort),
                                 phases, self.options, self.base, data.valid)


def tables(arm: MotorCurrentArm, rec: dict[str, NDArray[np.float64]]
           ) -> tuple[JointTable, JointTable]:
    """A recording's positions and efforts as the tables ``read_joint_bag`` gives."""
    names = arm.joint_names
    return (JointTable(rec["t"], list(names), rec["position"]),
            JointTable(rec["t"], list(names), rec["effort"]))


def phases_of(entry: dict[str, Any], whole: bool = False) -> list[tuple[float, float]]:
    """The recording's windows of ``PHASE`` s (``whole``: one window over all of it)."""
    if whole:
        return [(0.0, entry["phases"] * PHASE)]
    return [(j * PHASE, (j + 1) * PHASE) for j in range(entry["phases"])]


def bag_rows(robot: str, k: int, entry: dict[str, Any], found: list[dict[str, Any]]
             ) -> list[dict[str, Any]]:
    """Batch rows of recording ``k``'s phases, dated by the schedule."""
    out = []
    for j, columns in enumerate(found):
        row = empty_row(robot, f"/bags/{robot}/rec{k:02d}")
        row.update(columns, segment=j, segments=len(found), mass=entry["mass"],
                   start_stamp=entry["stamp"] + columns["start_s"],
                   end_stamp=entry["stamp"] + columns["end_s"])
        out.append(row)
    return out


def empty_row(robot: str, bag: str) -> dict[str, Any]:
    """A batch row with every column null but its identity."""
    from inertial_id.tools.batch import COLUMNS

    row: dict[str, Any] = dict.fromkeys(COLUMNS)
    row.update(robot=robot, bag=bag, contacts=0)
    return row


def table_rows(series: Series, robot: str, identifier: Identifier,
               whole: bool = False) -> list[dict[str, Any]]:
    """The series' batch rows: one per recording and phase (``whole``: one per recording,
    identified over all of it, the uncontrolled comparison)."""
    out = []
    for k, entry in enumerate(schedule(series)):
        rec = record(identifier.arm, series, entry)
        found = identifier.rows(*tables(identifier.arm, rec), phases_of(entry, whole))
        out += bag_rows(robot, k, entry, found)
    return out


def injected(rows: list[dict[str, Any]], series: Series, options: TrendOptions
             ) -> float:
    """The injected drift as `trends` reports it (% of each stratum's median level per
    month): the same stratified Theil-Sen slope on the noise-free drifting Coulomb level
    ``1 + drift months`` at the rows' times and strata (the load and warm-up factors are
    constant within a stratum and cancel)."""
    joint = MotorCurrentArm.random(bundled_urdf_path(), seed=ARM_SEED).joint_names[
        series.drift_joint]
    points = [dict(p, value=1 + series.drift * (p["time"] - FIRST) / MONTH)
              for p in friction_points(rows, options) if (p["joint"], p["term"]) == (joint, "fc")]
    return drift_tests(points, options)[0].test.percent


def write_bags(series: Series, robot: str, identifier: Identifier, folder: Path) -> list[Path]:
    """The recordings as bags, ``folder/ROBOT/recKK``: their joint states (positions, rad;
    velocities, rad/s; efforts, N m) stamped from the schedule's ``stamp`` (s), so a batch
    table dates each recording as the schedule does."""
    from inertial_id.io.bags import JOINT_STATE, joint_state_message, write_bag

    names = identifier.arm.joint_names
    paths = []
    for k, entry in enumerate(schedule(series)):
        rec = record(identifier.arm, series, entry)
        stamps = entry["stamp"] + rec["t"]
        path = folder / robot / f"rec{k:02d}"
        write_bag(path, ((JOINT_STATE_TOPIC, JOINT_STATE, float(t) + 1e-4, joint_state_message(
            float(t), names, rec["position"][i], rec["velocity"][i], rec["effort"][i]))
            for i, t in enumerate(stamps)))
        paths.append(path)
    return paths


def reference_model(identifier: Identifier, folder: Path, method: str = "sdp") -> Path:
    """``folder/model.yaml``: ``inertial-id identify-links`` on a 30 s recording of the arm
    holding nothing (no warm-up, no wear) with its defaults, as a fleet would run it (the
    friction model and prior weight chosen by its cross-validation: on this arm a tanh
    Coulomb with direction memory); sdp gives the links the payload identification of the
    batch needs. (With the friction of :class:`Identifier` forced, no direction memory, the
    model misses the arm's friction held at rest, and the batch's contact test flags it.)"""
    from inertial_id.tools.cli import main
    from inertial_id.tools.synthetic import write_current_bag

    empty = {"phases": 3, "mass": 1e-6, "months": 0.0, "seed": 999}
    rec = record(identifier.arm, Series(warmup=0.0, load=0.0), empty)
    bag = write_current_bag(folder / "unloaded", identifier.arm, rec, tool(1e-6))
    model = folder / "model.yaml"
    status = main(["identify-links", str(bag), "--urdf", bundled_urdf_path(), "--method", method,
                   "--output", str(model)])
    if status:
        raise RuntimeError(f"identify-links exit status {status}")
    return model
