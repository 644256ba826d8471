"""The core's settings from the nodes' parameter values, ROS-free.

The nodes and offline replay turn the values of their parameters (the tables of
:mod:`inertial_id.params.table`, checked by :mod:`inertial_id.params.spec`) into the core's
settings objects through these same functions, so a parameter file tuned on a bag means the
same thing on the robot.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inertial_id.core.applying import GateSettings
from inertial_id.core.errors import InertialIdError
from inertial_id.core.estimate import Estimate
from inertial_id.core.estimation.online import OnlineConfig, OnlineEstimator
from inertial_id.core.estimation.payload import PayloadConfig
from inertial_id.core.gathering.gatherer import GathererSettings
from inertial_id.core.handoff import TARGETS
from inertial_id.core.kinematics import SensorKinematics
from inertial_id.io import calibration
from inertial_id.params.spec import with_defaults
from inertial_id.params.table import (
    APPLIER_PARAMS,
    GATHERER_PARAMS,
    KINEMATICS_PARAMS,
    MODEL_PARAMS,
    SOLVER_PARAMS,
)

MODEL_NODES = ("gatherer", "kinematics")
"""The nodes that declare the robot model's parameters (:data:`MODEL_PARAMS`)."""


def gatherer_settings(values: Mapping[str, Any]) -> GathererSettings:
    """The gatherer's settings from its parameter values."""
    v = with_defaults(GATHERER_PARAMS, values, "gatherer")
    return GathererSettings(
        window=float(v["filter_window"]), polyorder=int(v["polyorder"]),
        use_measured_velocity=bool(v["use_measured_velocity"]), max_span=float(v["max_span"]),
        locked_joint_names=tuple(v["locked_joint_names"]), delay=float(v["filter_delay"]),
        matched=bool(v["matched_filter"]), errors_in_variables=bool(v["errors_in_variables"]),
        decision_time=float(v["filter_decision_time"]),
        estimate_wrench_delay=bool(v["estimate_wrench_delay"]),
        wrench_delay=float(v["wrench_delay"]))


def gatherer_kinematics(values: Mapping[str, Any]) -> KinematicsSettings:
    """The kinematic model settings the gatherer's matched filter needs."""
    v = with_defaults(GATHERER_PARAMS, values, "gatherer")
    return kinematics_settings({p.name: v[p.name] for p in MODEL_PARAMS})


def shared_model(sections: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The robot model's parameters (:data:`MODEL_PARAMS`: sensor frame, gravity in m/s^2 in
    the URDF base frame, locked joints and their positions in rad or m) given to the gatherer
    and the kinematics node in ``sections`` (``{node: {name: value}}``), as one value each
    for both: a value given to one of them (a ``/**`` section gives it to both) is the
    pipeline's. A name given to both with different values is an :class:`InertialIdError`:
    the two nodes would compute with different models."""
    out: dict[str, Any] = {}
    for param in MODEL_PARAMS:
        given = {node: sections[node][param.name] for node in MODEL_NODES
                 if param.name in sections.get(node, {})}
        values = list(given.values())
        if any(value != values[0] for value in values[1:]):
            raise InertialIdError(
                f"{param.name} differs between the nodes ("
                + ", ".join(f"{node}: {value!r}" for node, value in given.items())
                + "): give it once, in the parameter file's /** section")
        if values:
            out[param.name] = values[0]
    return out


@dataclass(frozen=True)
class KinematicsSettings:
    """Model settings of the kinematics node (see :class:`SensorKinematics`)."""

    sensor_frame: str
    gravity: tuple[float, float, float]
    locked_joints: dict[str, float]

    def model(self, urdf: str) -> SensorKinematics:
        """The sensor kinematics of ``urdf`` with these settings."""
        return SensorKinematics(urdf, self.sensor_frame, self.gravity, self.locked_joints)


def kinematics_settings(values: Mapping[str, Any]) -> KinematicsSettings:
    """The kinematics node's settings from its parameter values."""
    v = with_defaults(KINEMATICS_PARAMS, values, "kinematics")
    names, positions = list(v["locked_joint_names"]), list(v["locked_joint_positions"])
    if len(names) != len(positions):
        raise InertialIdError(
            f"{len(names)} locked_joint_names but {len(positions)} locked_joint_positions")
    return KinematicsSettings(str(v["sensor_frame"]), tuple(float(g) for g in v["gravity"]),
                              dict(zip(names, (float(p) for p in positions), strict=True)))


def initial_payload(values: Mapping[str, Any]) -> tuple[Estimate | None, str]:
    """The saved payload named by ``initial_payload_file`` and the frame it was saved in
    (``(None, "")`` when no file is named); raises :class:`InertialIdError` for a file that
    cannot be used."""
    path = str(values.get("initial_payload_file", "") or "")
    if not path:
        return None, ""
    return calibration.load(Path(path).expanduser())


def gate_settings(values: Mapping[str, Any]) -> GateSettings:
    """The applier's gates from its parameter values."""
    v = with_defaults(APPLIER_PARAMS, values, "applier")
    return GateSettings(stable_s=float(v["stable_s"]), change_std=float(v["change_std"]),
                        min_interval=float(v["min_interval"]))


def wrench_compensated(values: Mapping[str, Any]) -> bool:
    """Whether the applier's target publishes the wrench compensated for what was applied
    (``wrench_after_apply``; ``target``: the target's own behaviour)."""
    v = with_defaults(APPLIER_PARAMS, values, "applier")
    choice = v["wrench_after_apply"]
    if choice == "target":
        target = TARGETS.get(v["target"])
        return bool(target and target.compensates_wrench)
    return choice == "compensated"


def online_estimator(values: Mapping[str, Any],
                     initial: Estimate | None = None) -> OnlineEstimator:
    """The solver's estimator from its parameter values, started from a saved ``initial``
    payload (:func:`initial_payload`; :meth:`OnlineEstimator.start_from`) when given."""
    online = OnlineEstimator(online_config(values, initial))
    if initial is not None:
        online.start_from(initial)
    return online


def online_config(values: Mapping[str, Any], initial: Estimate | None = None) -> OnlineConfig:
    """The solver's core configuration from its parameter values (validated by the core);
    with a saved ``initial`` payload (:func:`initial_payload`) as the estimate's prior."""
    v = with_defaults(SOLVER_PARAMS, values, "solver")
    prior = {} if initial is None else {
        "prior": tuple(float(x) for x in initial.pi),
        "prior_weight": float(v["initial_payload_weight"])}
    payload = PayloadConfig(
        wrench_sign=v["wrench_sign"], force_noise_std=float(v["force_noise_std"]),
        torque_noise_std=float(v["torque_noise_std"]),
        forgetting_factor=float(v["forgetting_factor"]),
        window_samples=int(v["window_samples"]), method=v["method"],
        epsilon=float(v["epsilon"]),
        solve_timeout=float(v["solve_timeout"]) or None,
        dedicated_solver=bool(v["dedicated_solver"]), bias_drift=bool(v["bias_drift"]),
        bias_drift_prior=float(v["bias_drift_prior"]),
        **prior,
    )
    return OnlineConfig(
        payload=payload, min_samples=int(v["min_samples"]),
        converged_mass_std=float(v["converged_mass_std"]),
        converged_com_std=float(v["converged_com_std"]),
        converged_inertia_std=float(v["converged_inertia_std"]),
        monitor=bool(v["contact_detection"]),
        confidence=float(v["confidence"]), training_samples=int(v["training_samples"]),
        training_time=float(v["training_time"]),
        on_samples=int(v["on_samples"]), off_samples=int(v["off_samples"]),
        release=float(v["release"]), gate_margin=float(v["gate_margin"]),
        payload_change_after=float(v["payload_change_after"]),
        open_anomaly_after=float(v["open_anomaly_after"]),
        bias_drift_warn=float(v["bias_drift_warn"]),
    )
