"""The pipeline's parameters, in one ROS-free place.

Each node declares exactly the parameters listed here (with these defaults and descriptions),
and offline replay reads the same ``config/*.yaml`` sections through the same functions, so a
parameter file tuned on a bag means the same thing on the robot.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from inertial_id.core.errors import InertialIdError
from inertial_id.core.gathering import GathererSettings
from inertial_id.core.kinematics import DEFAULT_GRAVITY, SensorKinematics
from inertial_id.core.online import OnlineConfig
from inertial_id.core.payload import PayloadConfig


@dataclass(frozen=True)
class Param:
    """One node parameter: name, default, description; ``array_type`` types an empty list
    (``"string"`` or ``"double"``)."""

    name: str
    default: Any
    description: str
    array_type: str | None = None


_P, _O, _G = PayloadConfig(), OnlineConfig(), GathererSettings()

URDF_PARAMS = (
    Param("urdf_path", "", "URDF file; empty: use robot_description"),
    Param("robot_description", "", "URDF text; empty: wait for the robot_description topic"),
)

GATHERER_PARAMS = URDF_PARAMS + (
    Param("window", _G.window, "Savitzky-Golay window in joint samples (odd)"),
    Param("lag", _G.lag, "joint samples from a filtered sample to the newest in its window "
          "(0 .. window/2; < 0: half the window, zero phase); sets the filter's delay"),
    Param("polyorder", 3, "Savitzky-Golay polynomial order (>= 2)"),
    Param("use_measured_velocity", False,
          "differentiate JointState.velocity instead of the positions"),
    Param("max_span", 0.5, "s: filter windows spanning more (a gap) are dropped"),
    Param("locked_joint_names", [], "URDF joints held still and left out of the model",
          "string"),
    Param("queue_depth", 500, "subscription queue depth (messages)"),
    Param("publish_rate", 200.0, "at most this many batches per second (Hz); a batch leaves "
          "0.5 ms after new data arrived"),
)

KINEMATICS_PARAMS = URDF_PARAMS + (
    Param("sensor_frame", "ft_sensor", "URDF frame of the F/T sensor's measurement origin"),
    Param("gravity", list(DEFAULT_GRAVITY), "gravity in the URDF base frame, m/s^2"),
    Param("locked_joint_names", [], "URDF joints held still", "string"),
    Param("locked_joint_positions", [], "their positions, rad or m", "double"),
)

LINKS_PARAMS = URDF_PARAMS + (
    Param("mode", "payload", "payload: the F/T payload from sensor_samples; links: the robot's "
          "link parameters and friction from joint_states (JointState.effort)"),
    Param("links_joints", [], "links mode: joints identified (empty: every movable URDF "
          "joint); the others are locked at 0", "string"),
    Param("links_method", "sdp", "links mode: sdp or qp (consistent), wls or pls"),
    Param("links_prior_weight", 1e-2, "links mode: weight of the URDF (CAD) prior"),
    Param("links_fit_gains", False, "links mode: fit a drive gain per joint (efforts not in N m)"),
    Param("links_window", 31, "links mode: Savitzky-Golay window, in kept joint states (odd)"),
    Param("links_decimation", 5, "links mode: keep every N-th joint state"),
    Param("links_horizon", 120.0, "links mode: s of joint states the fit uses (the latest)"),
    Param("links_solve_period", 10.0, "links mode: s between fits"),
)

SOLVER_PARAMS = LINKS_PARAMS + (
    Param("wrench_sign", _P.wrench_sign, "payload_on_sensor (F/T sensors) or sensor_on_payload"),
    Param("force_noise_std", _P.force_noise_std, "F/T force noise std, N (weights force rows)"),
    Param("torque_noise_std", _P.torque_noise_std,
          "F/T torque noise std, N m (weights torque rows)"),
    Param("forgetting_factor", _P.forgetting_factor, "per-sample exponential forgetting in (0, 1]"),
    Param("window_samples", _P.window_samples, "> 0: estimate from the last N samples only"),
    Param("method", _P.method, "lmi_sdp or manifold (consistent), least_squares or pls"),
    Param("epsilon", _P.epsilon, "margin of J(pi) >= epsilon I, kg m^2"),
    Param("solve_timeout", 0.2, "s: a slower solve fails and the last estimate stays (0: none)"),
    Param("min_samples", _O.min_samples, "samples before the first solve"),
    Param("converged_mass_std", _O.converged_mass_std,
          "relative mass std under which the estimate has converged"),
    Param("contact_detection", _O.monitor, "run the T^2 contact monitor"),
    Param("confidence", _O.confidence, "T^2 threshold confidence"),
    Param("training_samples", _O.training_samples,
          "contact-free samples that learn the residual covariance"),
    Param("on_samples", _O.on_samples, "consecutive samples above the threshold start a contact"),
    Param("off_samples", _O.off_samples, "consecutive samples below release * threshold end it"),
    Param("release", _O.release, "hysteresis factor of the threshold"),
    Param("gate_margin", _O.gate_margin, "s around a contact whose samples are not used"),
    Param("payload_change_after", _O.payload_change_after,
          "s of anomaly taken as a new payload (0: never)"),
    Param("publish_rate", 2.0, "estimates published per second (Hz)"),
    Param("contact_decimation", 10, "publish ~/contact every N samples (and at every change)"),
)

NODE_PARAMS = {"gatherer": GATHERER_PARAMS, "kinematics": KINEMATICS_PARAMS,
               "solver": SOLVER_PARAMS}


def with_defaults(params: tuple[Param, ...], values: Mapping[str, Any],
                  node: str = "") -> dict[str, Any]:
    """Defaults overridden by ``values``; an unknown name is an error naming the node."""
    known = {p.name: p.default for p in params}
    unknown = sorted(set(values) - set(known) - {"use_sim_time"})
    if unknown:
        raise InertialIdError(f"{node or 'node'} has no parameter(s) {', '.join(unknown)}")
    known.update({k: v for k, v in values.items() if k in known})
    return known


def gatherer_settings(values: Mapping[str, Any]) -> GathererSettings:
    """The gatherer's settings from its parameter values."""
    v = with_defaults(GATHERER_PARAMS, values, "gatherer")
    return GathererSettings(int(v["window"]), int(v["polyorder"]),
                            bool(v["use_measured_velocity"]), float(v["max_span"]),
                            tuple(v["locked_joint_names"]), int(v["lag"]))


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
    if len(v["gravity"]) != 3:
        raise InertialIdError("gravity needs 3 values")
    return KinematicsSettings(str(v["sensor_frame"]), tuple(float(g) for g in v["gravity"]),
                              dict(zip(names, (float(p) for p in positions), strict=True)))


def online_config(values: Mapping[str, Any]) -> OnlineConfig:
    """The solver's core configuration from its parameter values (validated by the core)."""
    v = with_defaults(SOLVER_PARAMS, values, "solver")
    payload = PayloadConfig(
        wrench_sign=v["wrench_sign"], force_noise_std=float(v["force_noise_std"]),
        torque_noise_std=float(v["torque_noise_std"]),
        forgetting_factor=float(v["forgetting_factor"]),
        window_samples=int(v["window_samples"]), method=v["method"],
        epsilon=float(v["epsilon"]),
        solve_timeout=float(v["solve_timeout"]) or None,
    )
    return OnlineConfig(
        payload=payload, min_samples=int(v["min_samples"]),
        converged_mass_std=float(v["converged_mass_std"]), monitor=bool(v["contact_detection"]),
        confidence=float(v["confidence"]), training_samples=int(v["training_samples"]),
        on_samples=int(v["on_samples"]), off_samples=int(v["off_samples"]),
        release=float(v["release"]), gate_margin=float(v["gate_margin"]),
        payload_change_after=float(v["payload_change_after"]),
    )
