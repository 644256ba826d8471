"""The pipeline's parameters, in one ROS-free place.

Each node declares exactly the parameters listed here (with these defaults and descriptions),
and offline replay reads the same ``config/*.yaml`` sections through the same functions, so a
parameter file tuned on a bag means the same thing on the robot.
"""

from __future__ import annotations

import math
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
    (``"string"`` or ``"double"``). Numbers (and the entries of a ``"double"`` list) must be
    finite and within ``[low, high]`` (``low`` excluded with ``open_low``)."""

    name: str
    default: Any
    description: str
    array_type: str | None = None
    low: float | None = None
    high: float | None = None
    open_low: bool = False

    def _range_text(self) -> str:
        low = "" if self.low is None else f"{'>' if self.open_low else '>='} {self.low:g}"
        high = "" if self.high is None else f"<= {self.high:g}"
        return " and ".join(part for part in (low, high) if part)

    def check(self, value: Any, node: str) -> None:
        """Raise :class:`InertialIdError` saying what is wrong unless ``value`` is valid."""
        numbers = value if self.array_type == "double" else [value]
        if isinstance(self.default, bool) or not (
                isinstance(self.default, (int, float)) or self.array_type == "double"):
            return
        for number in numbers:
            if isinstance(number, bool) or not isinstance(number, (int, float)):
                raise InertialIdError(f"{node}: {self.name} must be a number, got {number!r}")
            ok = math.isfinite(number)
            if ok and self.low is not None:
                ok = number > self.low if self.open_low else number >= self.low
            if ok and self.high is not None:
                ok = number <= self.high
            if not ok:
                wanted = " ".join(("a finite number", self._range_text())).strip()
                raise InertialIdError(f"{node}: {self.name} must be {wanted}, got {number!r}")


_P, _O, _G = PayloadConfig(), OnlineConfig(), GathererSettings()

URDF_PARAMS = (
    Param("urdf_path", "", "URDF file; empty: use robot_description"),
    Param("robot_description", "", "URDF text; empty: wait for the robot_description topic"),
)

GATHERER_PARAMS = URDF_PARAMS + (
    Param("window", _G.window, "Savitzky-Golay window in joint samples (odd)", low=3),
    Param("lag", _G.lag, "joint samples from a filtered sample to the newest in its window "
          "(0 .. window/2; < 0: half the window, zero phase); sets the filter's delay",
          low=-1),
    Param("polyorder", 3, "Savitzky-Golay polynomial order (>= 2)", low=2),
    Param("use_measured_velocity", False,
          "differentiate JointState.velocity instead of the positions"),
    Param("max_span", 0.5, "s: filter windows spanning more (a gap) are dropped", low=0,
          open_low=True),
    Param("locked_joint_names", [], "URDF joints held still and left out of the model",
          "string"),
    Param("matched_filter", _G.matched, "filter the sensor frame's kinematics (computed at "
          "every joint sample) with the wrench's kernel: no filter bias; needs sensor_frame, "
          "gravity and locked_joint_positions as the kinematics node has them"),
    Param("sensor_frame", "ft_sensor", "matched_filter: URDF frame of the F/T sensor"),
    Param("gravity", list(DEFAULT_GRAVITY), "matched_filter: gravity in the URDF base frame, "
          "m/s^2", "double"),
    Param("locked_joint_positions", [], "matched_filter: positions of the locked joints",
          "double"),
    Param("queue_depth", 500, "subscription queue depth (messages)", low=1),
    Param("publish_rate", 200.0, "at most this many batches per second (Hz); a batch leaves "
          "0.5 ms after new data arrived", low=0, open_low=True),
)

KINEMATICS_PARAMS = URDF_PARAMS + (
    Param("sensor_frame", "ft_sensor", "URDF frame of the F/T sensor's measurement origin"),
    Param("gravity", list(DEFAULT_GRAVITY), "gravity in the URDF base frame, m/s^2", "double"),
    Param("locked_joint_names", [], "URDF joints held still", "string"),
    Param("locked_joint_positions", [], "their positions, rad or m", "double"),
)

LINKS_PARAMS = URDF_PARAMS + (
    Param("mode", "payload", "payload: the F/T payload from sensor_samples; links: the robot's "
          "link parameters and friction from joint_states (JointState.effort)"),
    Param("links_joints", [], "links mode: joints identified (empty: every movable URDF "
          "joint); the others are locked at 0", "string"),
    Param("links_method", "sdp", "links mode: sdp or qp (consistent), wls or pls"),
    Param("links_prior_weight", 1e-2, "links mode: weight of the URDF (CAD) prior", low=0),
    Param("links_fit_gains", False, "links mode: fit a drive gain per joint (efforts not in N m)"),
    Param("links_window", 31, "links mode: Savitzky-Golay window, in kept joint states (odd)",
          low=3),
    Param("links_decimation", 5, "links mode: keep every N-th joint state", low=1),
    Param("links_horizon", 120.0, "links mode: s of joint states the fit uses (the latest)",
          low=0, open_low=True),
    Param("links_solve_period", 10.0, "links mode: s between fits", low=0, open_low=True),
)

SOLVER_PARAMS = LINKS_PARAMS + (
    Param("wrench_sign", _P.wrench_sign, "payload_on_sensor (F/T sensors) or sensor_on_payload"),
    Param("force_noise_std", _P.force_noise_std, "F/T force noise std, N (weights force rows)",
          low=0, open_low=True),
    Param("torque_noise_std", _P.torque_noise_std,
          "F/T torque noise std, N m (weights torque rows)", low=0, open_low=True),
    Param("forgetting_factor", _P.forgetting_factor, "per-sample exponential forgetting in (0, 1]",
          low=0, high=1, open_low=True),
    Param("window_samples", _P.window_samples, "> 0: estimate from the last N samples only",
          low=0),
    Param("method", _P.method, "lmi_sdp or manifold (consistent), least_squares or pls"),
    Param("epsilon", _P.epsilon, "margin of J(pi) >= epsilon I, kg m^2", low=0),
    Param("solve_timeout", 0.2, "s: a slower solve fails and the last estimate stays (0: none)",
          low=0),
    Param("min_samples", _O.min_samples, "samples before the first solve", low=1),
    Param("converged_mass_std", _O.converged_mass_std,
          "relative mass std under which the mass has converged", low=0, open_low=True),
    Param("converged_com_std", _O.converged_com_std,
          "m: CoM std (each axis) under which the CoM has converged", low=0, open_low=True),
    Param("converged_inertia_std", _O.converged_inertia_std,
          "inertia-about-CoM std (each entry) relative to the largest principal moment under "
          "which the inertia has converged", low=0, open_low=True),
    Param("contact_detection", _O.monitor, "run the T^2 contact monitor"),
    Param("confidence", _O.confidence, "T^2 threshold confidence", low=0, high=0.999999999,
          open_low=True),
    Param("training_samples", _O.training_samples,
          "contact-free samples that learn the residual covariance", low=13),
    Param("on_samples", _O.on_samples, "consecutive samples above the threshold start a contact",
          low=1),
    Param("off_samples", _O.off_samples, "consecutive samples below release * threshold end it",
          low=1),
    Param("release", _O.release, "hysteresis factor of the threshold", low=0, high=1,
          open_low=True),
    Param("gate_margin", _O.gate_margin, "s around a contact whose samples are not used", low=0),
    Param("payload_change_after", _O.payload_change_after,
          "s of anomaly taken as a new payload (0: never)", low=0),
    Param("publish_rate", 2.0, "estimates published per second (Hz)", low=0, open_low=True),
    Param("contact_decimation", 10, "publish ~/contact every N samples (and at every change)",
          low=1),
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
    validate(params, known, node or "node")
    return known


def validate(params: tuple[Param, ...], values: Mapping[str, Any], node: str) -> None:
    """Check every value of ``values`` that ``params`` lists (:meth:`Param.check`)."""
    for param in params:
        if param.name in values:
            param.check(values[param.name], node)


def gatherer_settings(values: Mapping[str, Any]) -> GathererSettings:
    """The gatherer's settings from its parameter values."""
    v = with_defaults(GATHERER_PARAMS, values, "gatherer")
    return GathererSettings(int(v["window"]), int(v["polyorder"]),
                            bool(v["use_measured_velocity"]), float(v["max_span"]),
                            tuple(v["locked_joint_names"]), int(v["lag"]),
                            bool(v["matched_filter"]))


def gatherer_kinematics(values: Mapping[str, Any]) -> KinematicsSettings:
    """The kinematic model settings the gatherer's matched filter needs."""
    v = with_defaults(GATHERER_PARAMS, values, "gatherer")
    return kinematics_settings({k: v[k] for k in ("sensor_frame", "gravity",
                                                  "locked_joint_names",
                                                  "locked_joint_positions")})


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
        converged_mass_std=float(v["converged_mass_std"]),
        converged_com_std=float(v["converged_com_std"]),
        converged_inertia_std=float(v["converged_inertia_std"]),
        monitor=bool(v["contact_detection"]),
        confidence=float(v["confidence"]), training_samples=int(v["training_samples"]),
        on_samples=int(v["on_samples"]), off_samples=int(v["off_samples"]),
        release=float(v["release"]), gate_margin=float(v["gate_margin"]),
        payload_change_after=float(v["payload_change_after"]),
    )
