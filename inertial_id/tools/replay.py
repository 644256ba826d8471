"""Offline replay of a bag through the same core objects as the nodes.

``inertial-id replay BAG`` reads joint states and wrenches with :mod:`inertial_id.io.bags`,
builds the gatherer, kinematics and solver objects from the nodes' parameter file (the
tables of :mod:`inertial_id.params.table`, read by :mod:`inertial_id.params.settings`) and runs them
as a :class:`~inertial_id.core.pipeline.PayloadPipeline`, solving every ``1 / publish_rate``
seconds of bag time like the solver node under simulated time, but at most
:data:`SOLVE_RATE_CAP` times per bag second (the node solves after a batch, as often as
``solve_share`` allows; the final estimate, solved from all the data, does not depend on
it). The result is written as the YAML contract of DESIGN.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from tqdm import tqdm

from inertial_id.core.errors import InertialIdError
from inertial_id.core.estimate import Estimate
from inertial_id.core.estimation.stage import SOLVE_SHARE
from inertial_id.core.frames import OutputFrame, pi_in_frame
from inertial_id.core.gathering.gatherer import Gathering
from inertial_id.core.parameters import vector_from_symmetric
from inertial_id.core.pipeline import PayloadPipeline
from inertial_id.core.timepolicy import JUMP, OUT_OF_RANGE
from inertial_id.io.bags import BagError, BagReader
from inertial_id.io.calibration import estimate_document
from inertial_id.params.settings import (
    MODEL_NODES,
    gatherer_settings,
    initial_payload,
    kinematics_settings,
    online_estimator,
    shared_model,
)
from inertial_id.params.spec import offline_values
from inertial_id.params.table import NODE_PARAMS, OFFLINE_NODES
from inertial_id.tools.feeding import (
    PROCESS_PERIOD,
    SETTLED_PERIOD,
    data_ledger,
    feed,
)


class StoppedError(InertialIdError):
    """The replay was stopped (Ctrl-C) before it had anything to write."""


MAX_DROPPED_SHARE = 0.01
"""Default share of messages dropped for their stamps or values above which replay fails."""
PIPELINE_NODES = OFFLINE_NODES
"""The nodes replay runs (gatherer, kinematics, solver), whose sections it reads."""


@dataclass(frozen=True)
class ReplayOptions:
    """What to replay and how; ``None`` leaves the parameter file's (or default) value."""

    bag: Path
    params: Path | None = None
    urdf: str | None = None
    sensor_frame: str | None = None
    output_frame: str | None = None
    """URDF frame the output YAML gives the estimate in (the solver's ``output_frame``)."""
    joint_states_topic: str | None = None
    wrench_topic: str | None = None
    wrench_sign: str | None = None
    progress: bool = True
    max_dropped: float = MAX_DROPPED_SHARE
    stop: Callable[[], bool] | None = None
    """Checked between messages: when it returns True the replay ends where it is and the
    result is ``partial`` (the CLI's Ctrl-C)."""


@dataclass
class ReplayResult:
    """The final estimate, contacts (s since the first message) and what was processed."""

    estimate: Estimate | None
    frame: str
    start_time: float
    contacts: list[tuple[float, float]]
    payload_changes: list[float]
    samples_used: int
    samples_processed: int
    pipeline: PayloadPipeline
    dropped: dict[str, int] = field(default_factory=dict)
    ledger: dict[str, Any] = field(default_factory=dict)
    setup_errors: list[str] = field(default_factory=list)
    partial: bool = False
    """Stopped before the end of the bag (Ctrl-C): the estimate of the messages read."""
    output: OutputFrame = field(default_factory=lambda: OutputFrame(None, ""))
    """The frame the output YAML gives the estimate in (``estimate`` stays in ``frame``)."""

    def to_yaml(self) -> dict[str, Any]:
        """The replay output contract (DESIGN.md), in the output frame."""
        doc: dict[str, Any] = {"estimate": None}
        if self.estimate is not None:
            doc["estimate"] = estimate_document(*self.output.express(self.estimate, self.frame))
        doc["contacts"] = [[round(float(a), 4), round(float(b), 4)] for a, b in self.contacts]
        doc["samples_used"] = self.samples_used
        doc["ledger"] = self.ledger
        doc["setup_errors"] = list(self.setup_errors)
        choice = self.pipeline.gathering.choice
        doc["filter"] = None if choice is None else {
            **choice.as_dict(), "switches": self.pipeline.gathering.watch.switches}
        gathering = self.pipeline.gathering
        tracker = gathering.delay_tracker
        doc["wrench_delay"] = {
            "applied": float(gathering.wrench_delay),
            "estimate": None if gathering.stamp_delay is None else gathering.stamp_delay.as_dict(),
            "tracked": None if tracker is None else tracker.latest.as_dict(),
            "corrections": 0 if tracker is None else tracker.corrections}
        doc["bias"] = self.bias_document()
        doc["open_anomalies"] = [
            [round(a.start - self.start_time, 4), round(a.resolved_at - self.start_time, 4),
             a.resolution] for a in self.pipeline.online.open_anomalies]
        if self.partial:  # a complete replay keeps DESIGN.md's keys exactly
            doc["partial"] = True
        return doc


    def bias_document(self) -> dict[str, Any]:
        """The F/T bias over the run: the steps recognised (s since the first message) and,
        when the drift is modelled, its rate and std (N/s, N m/s; sensor frame) at ``time``
        (s since the first message), the time of the estimate's ``wrench_offset``."""
        online = self.pipeline.online
        doc: dict[str, Any] = {"steps": [round(t - self.start_time, 4)
                                         for t in online.bias_steps]}
        drift = None if self.estimate is None else self.estimate.drift
        if drift is not None:
            doc.update(drift=[float(x) for x in drift.rate],
                       drift_std=[float(x) for x in drift.std],
                       time=round(drift.time - self.start_time, 4))
        return doc


OTHER_NODES = tuple(node for node in NODE_PARAMS if node not in PIPELINE_NODES)
"""Nodes a parameter file may configure beside the pipeline's (simulator, applier: their
parameters are all node-only); replay leaves their sections."""


def read_yaml(path: Path, what: str) -> Any:
    """A YAML file's document (an empty file: ``{}``); unreadable, :class:`InertialIdError`
    naming ``what`` and the file."""
    try:
        return yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise InertialIdError(f"cannot read {what} {path}: {exc}") from exc


def load_params(path: Path | None) -> dict[str, dict[str, Any]]:
    """``{node: {parameter: value}}`` from a nodes' parameter file (``ros__parameters``)."""
    if path is None:
        return {}
    doc = read_yaml(path, "parameter file")
    if not isinstance(doc, Mapping):
        raise InertialIdError(f"{path}: expected node sections with ros__parameters")
    out: dict[str, dict[str, Any]] = {}
    for node, section in doc.items():
        if not isinstance(section, Mapping) or "ros__parameters" not in section:
            raise InertialIdError(f"{path}: section {node!r} has no ros__parameters")
        name = str(node).lstrip("/").split("/")[-1]
        targets = PIPELINE_NODES if name == "**" else (name,)
        if name not in (*PIPELINE_NODES, "**", *OTHER_NODES):
            raise InertialIdError(f"{path}: unknown node {node!r}; the pipeline's nodes are "
                                  f"{', '.join(PIPELINE_NODES)}")
        for target in targets:
            out.setdefault(target, {}).update(section["ros__parameters"])
    return out


def apply_overrides(options: ReplayOptions, params: dict[str, dict[str, Any]]) -> None:
    """Command-line overrides into the parameters (every pipeline node gets a section)."""
    for node in PIPELINE_NODES:
        params.setdefault(node, {})
    if options.urdf is not None:
        params["gatherer"]["urdf_path"] = params["kinematics"]["urdf_path"] = options.urdf
    if options.sensor_frame is not None:  # the robot model's: both nodes that use it
        for node in MODEL_NODES:
            params[node]["sensor_frame"] = options.sensor_frame
    if options.output_frame is not None:
        params["solver"]["output_frame"] = options.output_frame
    if options.wrench_sign is not None:
        params["solver"]["wrench_sign"] = options.wrench_sign


def resolve_urdf(params: dict[str, Any], bag: BagReader) -> str:
    """The URDF: ``urdf_path`` or ``robot_description`` of the kinematics parameters, else the
    bag's ``robot_description``."""
    urdf = params.get("urdf_path") or params.get("robot_description") or bag.robot_description()
    if not urdf:
        raise InertialIdError(f"{bag.path}: no URDF: give --urdf (the bag has no "
                              "robot_description)")
    return urdf


SOLVE_RATE_CAP = 2.0
"""Solves per second of bag time at most: the estimates a 2 Hz subscriber would see, and the
contact monitor's residuals against an estimate at most 0.5 s old (5 ms in the node). At
10 Hz the solves took 8.0 of replay's 51.9 us of CPU per sample (595 solves in a 60 s bag,
``bench/replay_speed.py``): replay's speed target leaves no room for the node's 200 Hz."""


def build_pipeline(params: dict[str, dict[str, Any]], urdf: str) -> PayloadPipeline:
    """The pipeline of the three nodes from their parameters (see :mod:`settings`), without
    the node-only ones (:func:`~inertial_id.params.spec.offline_values`: the table's scope);
    the robot model's parameters are one value for the gatherer and the kinematics
    (:func:`~inertial_id.params.settings.shared_model`)."""
    model = shared_model(params)
    solver, kinematics, gatherer = (offline_values(NODE_PARAMS[node], params[node])
                                    for node in ("solver", "kinematics", "gatherer"))
    try:
        settings = (gatherer_settings(gatherer | model), kinematics_settings(kinematics | model),
                    online_estimator(solver, initial_payload(solver)[0]))
        rate = float(solver.get("publish_rate", SOLVE_RATE_CAP))  # checked by the table
        share = float(solver.get("solve_share", SOLVE_SHARE))
    except (TypeError, ValueError) as exc:
        raise InertialIdError(f"bad parameter value: {exc}") from exc
    return PayloadPipeline(
        Gathering(urdf, settings[0]), settings[1].model(urdf), settings[2],
        solve_period=1.0 / min(rate, SOLVE_RATE_CAP), solve_share=share,
    )


def replay(options: ReplayOptions) -> ReplayResult:
    """Run the pipeline over the bag; raises :class:`InertialIdError` on anything unusable."""
    if not 0.0 <= options.max_dropped <= 1.0:
        raise InertialIdError(f"the share of messages allowed to be dropped must be in [0, 1], "
                              f"got {options.max_dropped}")
    params = load_params(options.params)
    apply_overrides(options, params)
    with BagReader(options.bag, options.joint_states_topic, options.wrench_topic) as bag:
        pipeline = build_pipeline(params, resolve_urdf(params["kinematics"], bag))
        sensor, model = pipeline.kinematics.sensor_frame, pipeline.kinematics.model
        announcements = bag.announcements()
        pipeline.announce([replace(a, frame=sensor, pi=pi_in_frame(a.pi, a.frame, sensor, model))
                           for a in announcements])
        bar = tqdm(total=bag.message_count, unit="msg", disable=not options.progress,
                   desc=f"replay {options.bag.name}", leave=False)
        fed = feed(bag.blocks(), pipeline, PROCESS_PERIOD, bar.update, options.stop,
                   SETTLED_PERIOD)
        bar.close()
        total = fed.messages if fed.stopped else bag.message_count
    _check_dropped(options.bag, fed.dropped, total, options.max_dropped,
                   pipeline.gathering.ledger.last_error)
    estimate = pipeline.finish()
    if pipeline.samples == 0:
        if fed.stopped:
            raise StoppedError(f"{options.bag}: stopped after {fed.messages} messages, before "
                               "any synchronised sample: nothing to write")
        raise BagError(f"{options.bag}: no synchronised samples: joint states and wrenches "
                       "do not overlap in time")
    start = fed.first_stamp
    online = pipeline.online
    frame = fed.frame or pipeline.kinematics.sensor_frame
    output = OutputFrame(pipeline.kinematics.model, str(params["solver"].get("output_frame", "")))
    if estimate is not None:
        output.express(estimate, frame)  # a frame the URDF lacks fails before anything is written
    return ReplayResult(
        estimate=estimate,
        frame=frame,
        start_time=start,
        contacts=[(c.start - start, c.end - start) for c in online.contacts],
        payload_changes=[t - start for t in online.payload_changes],
        samples_used=int(round(online.samples)),
        samples_processed=pipeline.samples,
        pipeline=pipeline,
        dropped=dict(fed.dropped),
        ledger=data_ledger(fed, pipeline),
        setup_errors=[p.message for p in online.setup_problems],
        partial=fed.stopped,
        output=output,
    )


_STAMP_REASONS = {
    JUMP: "stamps jumped away from the stream (a glitch, or joint states and wrenches "
          "stamped by different clocks)",
    OUT_OF_RANGE: "stamps not finite, negative or beyond what a ROS Time holds",
    "out_of_order": "stamps out of order or repeated",
}
DROP_REASONS = {f"{kind}_{reason}": f"{label} {text}"
                for kind, label in (("joint_state", "joint state"), ("wrench", "wrench"))
                for reason, text in _STAMP_REASONS.items()} | {
    "joint_state_spike": "joint state farther from the one before than the joints can move "
                         "(URDF velocity limits): a spike"}
"""What each drop reason of :data:`~inertial_id.core.gathering.ledger.MESSAGE_DROPS` means."""


def _check_dropped(bag: Path, dropped: Mapping[str, int], total: int,
                   max_share: float, errors: Mapping[str, str]) -> None:
    count = sum(dropped.values())
    if total and count > max_share * total:
        worst = max(dropped, key=dropped.__getitem__)
        reason = DROP_REASONS.get(worst) or errors.get(worst, worst)
        raise BagError(f"{bag}: {count} of {total} messages unusable "
                       f"({100.0 * count / total:.1f} % > {100.0 * max_share:g} %), mostly: "
                       f"{reason} ({dropped[worst]} times)")


def write_yaml(result: ReplayResult, path: Path) -> None:
    """Write :meth:`ReplayResult.to_yaml` to ``path`` (creating its directory)."""
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(yaml.safe_dump(result.to_yaml(), sort_keys=False))
    except OSError as exc:
        raise InertialIdError(f"cannot write {path}: {exc.strerror or exc}") from exc


def summary_lines(result: ReplayResult) -> list[str]:
    """A short human-readable summary of a replay."""
    e = result.estimate
    ledger = result.ledger
    lines = [f"SET-UP ERROR: {error}" for error in result.setup_errors]
    if result.partial:
        lines.append("PARTIAL: stopped before the end of the bag; the estimate of the "
                     "messages read")
    lines += [f"samples processed {result.samples_processed}, used {result.samples_used}"
             + (f" ({100.0 * ledger['used_share']:.1f} % of {ledger['wrenches']} wrenches)"
                if ledger.get("wrenches") else "")]
    choice = result.pipeline.gathering.choice
    if choice is not None:
        lines.append(choice.summary())
    if result.pipeline.gathering.stamp_delay is not None:
        lines.append(result.pipeline.gathering.stamp_delay.summary())
    if e is None:
        return [*lines, "no estimate (too few samples?)"]
    std = e.std
    v = result.pipeline.online.verdicts
    converged = {True: "converged", False: "not converged"}
    lines += [
        f"mass   {e.body.mass:.4f} kg (sigma {std[0]:.2g}, {converged[v.mass]})",
        "CoM    [" + ", ".join(f"{c:.4f}" for c in e.body.com) + "] m (sigma ["
        + ", ".join(f"{c:.2g}" for c in e.com_std) + f"], {converged[v.com]}), sensor frame "
        f"{result.frame}",
        "I_com  [" + ", ".join(f"{c:.3g}" for c in vector_from_symmetric(e.body.inertia_com))
        + f"] kg m^2 (xx xy xz yy yz zz; {converged[v.inertia]})",
        "offset [" + ", ".join(f"{v:.3f}" for v in e.offset) + "] N, N m",
        f"physically consistent {e.physically_consistent} (min eig J "
        f"{e.min_eigenvalue:.2e}), condition number {e.condition_number:.1f}",
        f"contacts {len(result.contacts)}"
        + "".join(f"\n  {a:8.3f} .. {b:8.3f} s" for a, b in result.contacts),
    ]
    moved, frame = result.output.express(e, result.frame)
    if frame != result.frame:
        lines.append(f"CoM    [{', '.join(f'{c:.4f}' for c in moved.body.com)}] m in {frame} "
                     f"(the output frame)")
    if result.payload_changes:
        lines.append("payload changes at " + ", ".join(f"{t:.2f} s"
                                                       for t in result.payload_changes))
    if result.dropped:
        lines.append("dropped: " + "; ".join(f"{k} x{v}" for k, v in result.dropped.items()))
    if np.any(~np.asarray(result.pipeline.history.consistent, dtype=bool)):
        lines.append("warning: some intermediate estimates were not physically consistent")
    return lines
