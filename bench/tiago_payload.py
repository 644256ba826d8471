#!/usr/bin/env python3
"""Real-robot check of the whole payload pipeline on the TIAGo ``calibration_weight`` run.

Builds the bag with ``bench/tiago_bag.py`` (unless ``--bag`` is given), replays it with the
nodes' parameter file ``bench/tiago_params.yaml`` through :func:`inertial_id.tools.replay.replay`
(the same core objects as the nodes), and reports the payload below ``wrist_ft_link``
(mass, CoM, inertia about the CoM, sigma %), the F/T bias, physical consistency, the residual
wrench of the final estimate on every synchronised sample, and the T^2 contacts (none
expected: nothing touched the robot). Cross-checks, each independent of the replay:

- static-only fit: rest phases (all joint speeds below ``--rest-speed`` for at least
  ``--rest-min`` s), their median wrench and mean gravity direction in the sensor frame, and
  linear least squares for mass, first moment and bias (gravity only; see :func:`gravity_fit`);
- quasi-static fit: the same gravity-only model on every sample (the authors' kind of fit);
- the URDF's links below the sensor (mass, CoM in the sensor frame, with pinocchio);
- lag between the topics: residual RMS of a least-squares fit with the wrench shifted by
  ``k`` samples, and the cross-correlation of the measured and predicted wrench rates;
- Savitzky-Golay window, sensor-frame orientation and wrench-sign checks; a delete-one-block
  jackknife of the estimate (the residual is coloured, so the solver's sigma is optimistic).

    python bench/tiago_payload.py                          # builds the bag in a temp dir
    python bench/tiago_payload.py --bag BAG --json out.json --report out_dir
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pinocchio as pin
from numpy.typing import NDArray

# The converter module sits next to this script; make it importable however this is run.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: `bench` as a package

from bench.tiago_bag import DEFAULT_DATA_DIR, WRENCH_TOPIC, convert  # noqa: E402
from inertial_id.core.errors import InertialIdError  # noqa: E402
from inertial_id.core.estimate import Estimate  # noqa: E402
from inertial_id.core.estimation.estimators import (  # noqa: E402
    ConsistentEstimator,
    least_squares,
)
from inertial_id.core.estimation.payload import PayloadConfig, PayloadIdentifier  # noqa: E402
from inertial_id.core.gathering.ledger import OtherFrameError  # noqa: E402
from inertial_id.core.kinematics import SensorKinematics, load_urdf_model  # noqa: E402
from inertial_id.core.parameters import skew, vector_from_symmetric  # noqa: E402
from inertial_id.core.regressor import measurement_matrix, predicted_wrench  # noqa: E402
from inertial_id.core.signals import savitzky_golay  # noqa: E402
from inertial_id.core.statistics import SufficientStatistics  # noqa: E402
from inertial_id.io.bags import BagReader, JointStateSample  # noqa: E402
from inertial_id.params.settings import kinematics_settings, online_config  # noqa: E402
from inertial_id.tools.replay import (  # noqa: E402
    ReplayOptions,
    ReplayResult,
    build_pipeline,
    load_params,
    replay,
)

DEFAULT_PARAMS = Path(__file__).resolve().parent / "tiago_params.yaml"
AUTHORS_MASS = 1.28
"""kg: the data set authors' quasi-static F/T fit with the weight (README)."""
AUTHORS_HAND_MASS = 0.79
"""kg: their fit without the weight (the hand-only F/T run is not in the data set)."""
WRENCH_NAMES = ("fx", "fy", "fz", "tx", "ty", "tz")
UNITS = ("N", "N", "N", "N m", "N m", "N m")


# --- samples ------------------------------------------------------------------------------


@dataclass
class Samples:
    """Synchronised samples as the pipeline makes them (gatherer + kinematics), whole run.

    ``t`` (N,) header stamps s; joints (N, n) in the model order; ``twist``, ``proper``
    (N, 6) sensor frame; ``static_proper`` (N, 6) the proper acceleration with the joints
    frozen (``[R^T (-g); 0]``, gravity only); ``wrench`` filtered like the joints, ``wrench_raw``
    as measured (N, 6).
    """

    t: NDArray[np.float64]
    position: NDArray[np.float64]
    velocity: NDArray[np.float64]
    acceleration: NDArray[np.float64]
    twist: NDArray[np.float64]
    proper: NDArray[np.float64]
    static_proper: NDArray[np.float64]
    wrench: NDArray[np.float64]
    wrench_raw: NDArray[np.float64]


@dataclass
class RawStreams:
    """The bag's messages as arrays (joint stamps/positions in model order, wrenches)."""

    joint_t: NDArray[np.float64]
    position: NDArray[np.float64]
    wrench_t: NDArray[np.float64]
    wrench: NDArray[np.float64]
    urdf: str


def read_bag(bag: Path, params: dict[str, dict[str, Any]]) -> tuple[RawStreams, Samples,
                                                                    SensorKinematics]:
    """Run the bag through the gatherer and kinematics built from ``params`` (no solver)."""
    with BagReader(bag, wrench_topic=WRENCH_TOPIC) as reader:
        urdf = reader.robot_description()
        if urdf is None:
            raise InertialIdError(f"{bag}: no robot_description")
        pipeline = build_pipeline(copy.deepcopy(params), urdf)
        gathering, kin = pipeline.gathering, pipeline.kinematics
        jt, jq, wt, ww = [], [], [], []
        for message in reader.messages():
            if isinstance(message, JointStateSample):
                gathering.add_joint_state(message.stamp, message.names, message.position)
                jt.append(message.stamp)
                jq.append(gathering.mapper.select(message.names, message.position))
            else:
                try:  # a stray wrench in another frame is dropped, as by the node and replay
                    gathering.add(message)
                except OtherFrameError:
                    continue
                wt.append(message.stamp)
                ww.append(message.wrench)
    batch = gathering.pop_ready()
    twist, proper = kin.compute(batch.position, batch.velocity, batch.acceleration)
    zeros = np.zeros_like(batch.position)
    _, static = kin.compute(batch.position, zeros, zeros)
    samples = Samples(batch.times, batch.position, batch.velocity, batch.acceleration, twist,
                      proper, static, batch.wrench, batch.wrench_raw)
    raw = RawStreams(np.asarray(jt), np.asarray(jq), np.asarray(wt), np.asarray(ww), urdf)
    return raw, samples, kin


def residual_rms(residual: NDArray[np.float64]) -> list[float]:
    """RMS per axis of (N, 6) residuals."""
    return [float(v) for v in np.sqrt(np.mean(residual**2, axis=0))]


def ls_fit(twist: NDArray[np.float64], proper: NDArray[np.float64],
           wrench: NDArray[np.float64], config: PayloadConfig) -> tuple[Estimate,
                                                                        NDArray[np.float64]]:
    """Unconstrained weighted least squares of ``[pi; offset]`` and its (N, 6) residual."""
    identifier = PayloadIdentifier(PayloadConfig(
        wrench_sign=config.wrench_sign, force_noise_std=config.force_noise_std,
        torque_noise_std=config.torque_noise_std, method="least_squares"))
    identifier.add(twist, proper, wrench)
    estimate = identifier.estimate()
    return estimate, wrench - predicted_wrench(estimate.pi, twist, proper, estimate.offset,
                                               identifier.sign)


# --- static and quasi-static cross-checks -------------------------------------------------


def rest_phases(t: NDArray[np.float64], velocity: NDArray[np.float64], speed: float,
                min_duration: float) -> list[tuple[int, int]]:
    """``[start, stop)`` index ranges where every joint speed stays below ``speed``."""
    still = np.max(np.abs(velocity), axis=1) < speed
    edges = np.diff(np.concatenate(([0], still.astype(int), [0])))
    starts, stops = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    return [(int(a), int(b)) for a, b in zip(starts, stops, strict=True)
            if t[b - 1] - t[a] >= min_duration]


def gravity_fit(gravity_reaction: NDArray[np.float64], wrench: NDArray[np.float64],
                sign: float = -1.0) -> dict[str, Any]:
    """Mass, first moment and F/T bias from static wrenches, by linear least squares.

    ``gravity_reaction`` (K, 3) is the proper acceleration of the sensor at rest,
    ``u = R^T (-g)`` (``R`` the sensor orientation in the base frame, ``g`` gravity there):
    what an accelerometer on the sensor reads. At rest the regressor reduces to
    ``Y pi = [m u; h x u]`` (the wrench the sensor applies to the payload to hold it), so
    with ``s = -1`` (message = wrench the payload exerts on the sensor, DESIGN.md)

        f   = s m u + b_f         = m R^T g + b_f        (the payload's weight, pulling)
        tau = s (h x u) + b_tau   = h x (R^T g) + b_tau  (its moment about the sensor origin)

    The force rows fix ``(m, b_f)``, the torque rows ``(h, b_tau)``. ``h`` along the
    direction in which the gravity directions do not vary is unobservable (two poses leave
    one direction free): the minimum-norm solution is returned with ``torque_rank`` and that
    direction.
    """
    u = np.asarray(gravity_reaction, dtype=float)
    w = np.asarray(wrench, dtype=float)
    k = len(u)
    a_f = np.zeros((3 * k, 4))
    a_t = np.zeros((3 * k, 6))
    for i in range(k):
        a_f[3 * i:3 * i + 3, 0] = sign * u[i]
        a_f[3 * i:3 * i + 3, 1:] = np.eye(3)
        a_t[3 * i:3 * i + 3, :3] = sign * -skew(u[i])  # h x u = -u x h
        a_t[3 * i:3 * i + 3, 3:] = np.eye(3)
    x_f, _, rank_f, _ = np.linalg.lstsq(a_f, w[:, :3].reshape(-1), rcond=None)
    x_t, _, rank_t, _ = np.linalg.lstsq(a_t, w[:, 3:].reshape(-1), rcond=None)
    _, _, vt = np.linalg.svd(a_t, full_matrices=False)
    mass, h = float(x_f[0]), x_t[:3]
    r_f = w[:, :3].reshape(-1) - a_f @ x_f
    r_t = w[:, 3:].reshape(-1) - a_t @ x_t
    dof_f = 3 * k - 4
    mass_std = float("nan")
    if dof_f > 0:
        cov = np.linalg.inv(a_f.T @ a_f) * (r_f @ r_f) / dof_f
        mass_std = float(np.sqrt(cov[0, 0]))
    out: dict[str, Any] = {
        "mass": mass, "mass_std": mass_std,
        "first_moment": [float(v) for v in h],
        "com": [float(v) for v in h / mass] if mass != 0 else None,
        "wrench_offset": [float(v) for v in np.concatenate((x_f[1:], x_t[3:]))],
        "force_rank": int(rank_f), "torque_rank": int(rank_t),
        "residual_rms": residual_rms(np.column_stack((r_f.reshape(-1, 3),
                                                      r_t.reshape(-1, 3)))),
    }
    if rank_t < 6:
        free = vt[-1, :3]
        out["unobservable_com_direction"] = [float(v) for v in free / np.linalg.norm(free)]
    return out


def static_fit(samples: Samples, speed: float, min_duration: float, margin: float = 0.1,
               sign: float = -1.0) -> dict[str, Any]:
    """Gravity-only fit on the rest phases' medians; see :func:`gravity_fit`."""
    t = samples.t
    phases = rest_phases(t, samples.velocity, speed, min_duration)
    rows_u, rows_w, described = [], [], []
    for a, b in phases:
        inner = np.flatnonzero((t[a:b] >= t[a] + margin) & (t[a:b] <= t[b - 1] - margin)) + a
        u = samples.static_proper[inner, :3].mean(axis=0)
        w = np.median(samples.wrench_raw[inner], axis=0)
        rows_u.append(u)
        rows_w.append(w)
        described.append({"start": float(t[a] - t[0]), "end": float(t[b - 1] - t[0]),
                          "samples": int(inner.size),
                          "gravity_direction": [float(v) for v in u / np.linalg.norm(u)],
                          "wrench_median": [float(v) for v in w],
                          "wrench_std": [float(v) for v in samples.wrench_raw[inner].std(0)]})
    out: dict[str, Any] = {"phases": described, "rest_speed": speed,
                           "rest_min_duration": min_duration}
    if len(phases) < 2:
        out["error"] = f"{len(phases)} rest phase(s): at least 2 are needed"
        return out
    out.update(gravity_fit(np.asarray(rows_u), np.asarray(rows_w), sign))
    u = np.asarray(rows_u) / np.linalg.norm(rows_u, axis=1)[:, None]
    spread = max(np.degrees(np.arccos(np.clip(u[i] @ u[j], -1, 1)))
                 for i in range(len(u)) for j in range(i + 1, len(u)))
    out["max_angle_between_gravity_directions_deg"] = float(spread)
    return out


# --- URDF ---------------------------------------------------------------------------------


def _floats(text: str | None, n: int = 3) -> NDArray[np.float64]:
    return np.array([float(x) for x in text.split()]) if text else np.zeros(n)


def urdf_below(urdf: str, sensor_frame: str, positions: dict[str, float] | None = None
               ) -> dict[str, Any]:
    """Mass, CoM and inertia (sensor frame) of the URDF links below ``sensor_frame``.

    Walks the URDF tree from the sensor link, places every link's ``<inertial>`` in the
    sensor frame with pinocchio's forward kinematics of the full model (joints at
    ``positions``, others at neutral), and sums them; also with the sensor link's own
    inertial included (which part of a sensor's own mass a reading includes depends on where
    its strain gauges sit).
    """
    root = ET.fromstring(urdf)
    children: dict[str, list[str]] = {}
    for joint in root.findall("joint"):
        children.setdefault(joint.find("parent").get("link"), []).append(
            joint.find("child").get("link"))

    def below(link: str) -> list[str]:
        return [x for c in children.get(link, []) for x in (c, *below(c))]

    model = load_urdf_model(urdf)
    data = model.createData()
    q = pin.neutral(model)
    for name, value in (positions or {}).items():
        if model.existJointName(name):
            joint = model.joints[model.getJointId(name)]
            if joint.nq == 2:
                q[joint.idx_q:joint.idx_q + 2] = np.cos(value), np.sin(value)
            else:
                q[joint.idx_q] = value
    pin.framesForwardKinematics(model, data, q)
    sensor = data.oMf[model.getFrameId(sensor_frame)]

    def inertia_of(name: str) -> pin.Inertia | None:
        inertial = root.find(f"link[@name='{name}']/inertial")
        if inertial is None:
            return None
        origin = inertial.find("origin")
        xyz = _floats(origin.get("xyz") if origin is not None else None)
        rpy = _floats(origin.get("rpy") if origin is not None else None)
        i = inertial.find("inertia")
        g = {k: float(i.get(k, 0.0)) for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")}
        tensor = np.array([[g["ixx"], g["ixy"], g["ixz"]], [g["ixy"], g["iyy"], g["iyz"]],
                           [g["ixz"], g["iyz"], g["izz"]]])
        placement = sensor.actInv(data.oMf[model.getFrameId(name)]) * pin.SE3(
            pin.rpy.rpyToMatrix(*rpy), xyz)
        return placement.act(pin.Inertia(float(inertial.find("mass").get("value")),
                                         np.zeros(3), tensor))

    links = below(sensor_frame)
    total = pin.Inertia.Zero()
    for name in links:
        inertia = inertia_of(name)
        if inertia is not None:
            total += inertia
    own = inertia_of(sensor_frame)
    with_sensor = total + own if own is not None else total
    return {
        "links": len(links),
        "mass": float(total.mass), "com": [float(v) for v in total.lever],
        "inertia_com": [float(v) for v in vector_from_symmetric(total.inertia)],
        "sensor_link_mass": float(own.mass) if own is not None else 0.0,
        "mass_with_sensor_link": float(with_sensor.mass),
        "com_with_sensor_link": [float(v) for v in with_sensor.lever],
    }


# --- lag, filtering, frame ----------------------------------------------------------------


def _parabola_vertex(x: NDArray[np.float64], y: NDArray[np.float64], i: int) -> float:
    """Vertex abscissa of the parabola through the points around index ``i``."""
    if i == 0 or i == len(x) - 1:
        return float(x[i])
    c = np.polyfit(x[i - 1:i + 2], y[i - 1:i + 2], 2)
    return float(-c[1] / (2 * c[0])) if c[0] != 0 else float(x[i])


def lag_analysis(samples: Samples, config: PayloadConfig, max_shift: int) -> dict[str, Any]:
    """Residual RMS vs wrench shift, and the cross-correlation lag of the wrench rates.

    A shift ``k > 0`` pairs the wrench sample ``i + k`` with the kinematics of sample ``i``:
    the best ``k`` is how many samples the wrench lags the joint positions.
    """
    n = len(samples.t)
    period = float(np.median(np.diff(samples.t)))
    shifts = np.arange(-max_shift, max_shift + 1)
    inner = np.arange(max_shift, n - max_shift)
    f_std, t_std = config.force_noise_std, config.torque_noise_std
    rows = []
    for k in shifts:
        estimate, r = ls_fit(samples.twist[inner], samples.proper[inner],
                             samples.wrench[inner + k], config)
        weighted = np.sqrt(np.mean((r[:, :3] / f_std) ** 2) + np.mean((r[:, 3:] / t_std) ** 2))
        rows.append({"shift": int(k), "seconds": float(k * period),
                     "mass": float(estimate.pi[0]), "residual_rms": residual_rms(r),
                     "weighted_rms": float(weighted)})
    score = np.array([r["weighted_rms"] for r in rows])
    best = int(np.argmin(score))
    # Cross-correlation of the rates (the slow gravity part would make a flat peak).
    estimate, _ = ls_fit(samples.twist, samples.proper, samples.wrench, config)
    predicted = predicted_wrench(estimate.pi, samples.twist, samples.proper, estimate.offset,
                                 -1.0 if config.wrench_sign == "payload_on_sensor" else 1.0)
    dm = np.gradient(samples.wrench, samples.t, axis=0)
    dp = np.gradient(predicted, samples.t, axis=0)
    dm = (dm - dm.mean(0)) / dm.std(0)
    dp = (dp - dp.mean(0)) / dp.std(0)
    corr = np.array([np.mean(np.sum(dm[inner + k] * dp[inner], axis=1)) / 6 for k in shifts])
    peak = int(np.argmax(corr))
    return {
        "period": period, "shifts": rows,
        "best_shift_samples": _parabola_vertex(shifts.astype(float), score, best),
        "best_shift_seconds": _parabola_vertex(shifts.astype(float), score, best) * period,
        "xcorr": [float(c) for c in corr],
        "xcorr_shift_samples": _parabola_vertex(shifts.astype(float), -corr, peak),
        "xcorr_shift_seconds": _parabola_vertex(shifts.astype(float), -corr, peak) * period,
    }


def window_sensitivity(raw: RawStreams, kin: SensorKinematics, config: PayloadConfig,
                       windows: list[int], order: int) -> list[dict[str, Any]]:
    """Least-squares estimate and residual with other Savitzky-Golay windows (offline)."""
    if not np.array_equal(raw.joint_t, raw.wrench_t):
        return []  # the offline shortcut needs the two streams on the same stamps
    out = []
    for window in windows:
        q, qd, qdd = (savitzky_golay(raw.joint_t, raw.position, window, order, d)
                      for d in (0, 1, 2))
        w = savitzky_golay(raw.wrench_t, raw.wrench, window, order, 0)
        twist, proper = kin.compute(q, qd, qdd)
        cut = slice(window // 2, -(window // 2))  # the pipeline drops the edges too
        estimate, r = ls_fit(twist[cut], proper[cut], w[cut], config)
        sign = -1.0 if config.wrench_sign == "payload_on_sensor" else 1.0
        raw_r = raw.wrench[cut] - predicted_wrench(estimate.pi, twist[cut], proper[cut],
                                                   estimate.offset, sign)
        out.append({"window": window, "seconds": float(window * np.median(np.diff(raw.joint_t))),
                    "mass": float(estimate.pi[0]), "com": [float(v) for v in estimate.body.com],
                    "residual_rms_filtered": residual_rms(r),
                    "residual_rms_raw": residual_rms(raw_r)})
    return out


def _rotated(wrench: NDArray[np.float64], rotation: NDArray[np.float64]) -> NDArray[np.float64]:
    out = wrench.copy()
    out[:, :3] = wrench[:, :3] @ rotation.T
    out[:, 3:] = wrench[:, 3:] @ rotation.T
    return out


def frame_check(samples: Samples, config: PayloadConfig, raw: RawStreams,
                params: dict[str, dict[str, Any]], degrees: int = 4) -> dict[str, Any]:
    """Is ``wrist_ft_link`` the frame the wrench is expressed in?

    Rotates the measured wrench by small angles about each sensor axis and refits: the
    residual should be smallest at zero. Also fits with the kinematics of a rotated URDF
    frame (``wrist_ft_tool_link``) and with the opposite wrench sign.
    """
    f_std, t_std = config.force_noise_std, config.torque_noise_std

    def score(wrench: NDArray[np.float64], twist: NDArray[np.float64] = samples.twist,
              proper: NDArray[np.float64] = samples.proper,
              cfg: PayloadConfig = config) -> tuple[float, float]:
        estimate, r = ls_fit(twist, proper, wrench, cfg)
        return (float(np.sqrt(np.mean((r[:, :3] / f_std) ** 2)
                              + np.mean((r[:, 3:] / t_std) ** 2))), float(estimate.pi[0]))

    angles = np.arange(-degrees, degrees + 1, dtype=float)
    best = {}
    for axis in range(3):
        values = []
        for a in angles:
            rotvec = np.zeros(3)
            rotvec[axis] = np.radians(a)
            values.append(score(_rotated(samples.wrench, pin.exp3(rotvec)))[0])
        values = np.asarray(values)
        best["xyz"[axis]] = _parabola_vertex(angles, values, int(np.argmin(values)))
    out: dict[str, Any] = {"best_rotation_deg": best,
                           "weighted_rms": score(samples.wrench)[0]}
    settings = kinematics_settings({k: v for k, v in params["kinematics"].items()
                                    if k not in ("urdf_path", "robot_description")})
    other = SensorKinematics(raw.urdf, "wrist_ft_tool_link", settings.gravity,
                             settings.locked_joints)
    twist, proper = other.compute(samples.position, samples.velocity, samples.acceleration)
    rms, mass = score(samples.wrench, twist, proper)
    out["wrist_ft_tool_link"] = {"weighted_rms": rms, "mass": mass}
    flipped = PayloadConfig(wrench_sign="sensor_on_payload", force_noise_std=f_std,
                            torque_noise_std=t_std)
    rms, mass = score(samples.wrench, cfg=flipped)
    out["sensor_on_payload"] = {"weighted_rms": rms, "mass": mass}
    return out


def jackknife(samples: Samples, config: PayloadConfig, blocks: int = 10) -> dict[str, Any]:
    """Delete-one-block jackknife std of ``pi`` over ``blocks`` contiguous time blocks.

    The residual is coloured (vibration, slow sensor drift), so the solver's sigma, which
    assumes white residuals, is optimistic; this one is not.
    """
    stats = []
    sign = -1.0 if config.wrench_sign == "payload_on_sensor" else 1.0
    weights = np.repeat([config.force_noise_std**-2, config.torque_noise_std**-2], 3)
    for part in np.array_split(np.arange(len(samples.t)), blocks):
        s = SufficientStatistics(16)
        a = measurement_matrix(samples.twist[part], samples.proper[part], sign)
        s.add(a, samples.wrench[part].reshape(-1), np.tile(weights, part.size), part.size)
        stats.append(s)
    solver = ConsistentEstimator(epsilon=config.epsilon)
    estimates = []
    for leave in range(blocks):
        total = SufficientStatistics(16)
        for i, s in enumerate(stats):
            if i != leave:
                total.merge(s)
        estimates.append(solver.solve(total).pi if config.method == "lmi_sdp"
                         else least_squares(total).pi)
    pis = np.asarray(estimates)
    std = np.sqrt((blocks - 1) / blocks * np.sum((pis - pis.mean(0)) ** 2, axis=0))
    coms = pis[:, 1:4] / pis[:, :1]
    com_std = np.sqrt((blocks - 1) / blocks * np.sum((coms - coms.mean(0)) ** 2, axis=0))
    return {"blocks": blocks, "std": [float(v) for v in std],
            "com_std": [float(v) for v in com_std]}



def noise_at_rest(samples: Samples, speed: float, min_duration: float,
                  margin: float = 0.5) -> dict[str, Any] | None:
    """F/T noise in the longest rest phase: std per axis, and its white (sample-to-sample)
    part ``std(diff) / sqrt(2)``."""
    phases = rest_phases(samples.t, samples.velocity, speed, min_duration)
    if not phases:
        return None
    a, b = max(phases, key=lambda p: samples.t[p[1] - 1] - samples.t[p[0]])
    t = samples.t
    keep = np.flatnonzero((t[a:b] >= t[a] + margin) & (t[a:b] <= t[b - 1] - margin)) + a
    w = samples.wrench_raw[keep]
    return {"start": float(t[keep[0]] - t[0]), "end": float(t[keep[-1]] - t[0]),
            "std": [float(v) for v in w.std(axis=0)],
            "white_std": [float(v) for v in np.diff(w, axis=0).std(axis=0) / np.sqrt(2)]}


def monitor_summary(result: ReplayResult, residual: NDArray[np.float64] | None = None,
                    times: NDArray[np.float64] | None = None) -> dict[str, Any]:
    """When the T^2 monitor was trained, its threshold, the largest T^2 it saw afterwards,
    and how many samples' final residuals (``residual``, (N, 6)) exceed the threshold under
    its learned covariance (single samples; a contact needs ``on_samples`` in a row)."""
    h = result.pipeline.history
    threshold = np.asarray(h.batch_threshold, dtype=float)
    trained = np.flatnonzero(np.isfinite(threshold))
    if trained.size == 0:
        return {"trained_at": None}
    t2 = np.asarray(h.batch_t2_max, dtype=float)[trained]
    out = {"trained_at": float(h.batch_time[trained[0]] - result.start_time),
           "threshold": float(threshold[trained[-1]]), "max_t2": float(t2.max()),
           "max_t2_at": float(h.batch_time[trained[int(np.argmax(t2))]] - result.start_time)}
    monitor = result.pipeline.online.monitor
    if monitor.ready and times is not None:
        final = monitor.t2(residual)
        above = final > monitor.threshold
        after = times - result.start_time >= out["trained_at"]
        out["final_residual_samples_above"] = int(np.count_nonzero(above & after))
        runs = np.diff(np.flatnonzero(np.diff(np.concatenate(([0], above & after, [0])))))
        out["final_residual_longest_run_above"] = int(runs[::2].max()) if runs.size else 0
        out["final_residual_max_t2"] = float(final[after].max())
        out["final_residual_samples_above_before_training"] = int(np.count_nonzero(
            above & ~after))
        out["final_residual_above_before_training_at"] = [
            float(v) for v in times[above & ~after][[0, -1]] - result.start_time
        ] if np.any(above & ~after) else []
    return out


# --- output -------------------------------------------------------------------------------


def write_plot(path: Path, samples: Samples, predicted: NDArray[np.float64],
               contacts: list[tuple[float, float]]) -> Path:
    """Measured (raw and filtered) vs predicted wrench over time, one panel per axis."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    t = samples.t - samples.t[0]
    figure = Figure(figsize=(11, 13))
    FigureCanvasAgg(figure)
    axes = figure.subplots(6, 1, sharex=True)
    for i, ax in enumerate(axes):
        ax.plot(t, samples.wrench_raw[:, i], color="0.75", lw=0.5, label="measured")
        ax.plot(t, samples.wrench[:, i], color="tab:blue", lw=0.7, label="measured, filtered")
        ax.plot(t, predicted[:, i], color="tab:orange", lw=1.0, label="predicted (final)")
        for a, b in contacts:
            ax.axvspan(a, b, color="tab:red", alpha=0.2, lw=0)
        ax.set_ylabel(f"{WRENCH_NAMES[i]} ({UNITS[i]})")
        ax.grid(alpha=0.3)
    axes[0].legend(loc="upper right", fontsize=8, ncol=3)
    axes[0].set_title("TIAGo calibration_weight: wrist F/T measured vs predicted by the final "
                      "estimate (incl. bias)")
    axes[-1].set_xlabel("time since the first message (s)")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    return path


def _vec(values: Any, scale: float = 1.0, spec: str = "7.2f") -> str:
    return "[" + ", ".join(format(scale * float(v), spec) for v in values) + "]"


def print_report(doc: dict[str, Any]) -> None:
    """Human-readable summary of :func:`analyse`'s document."""
    e, s, qs, u = doc, doc["static_fit"], doc["quasi_static_fit"], doc["urdf_below_sensor"]
    sd = doc["relative_std_percent"]
    print("\nPayload below wrist_ft_link (sensor frame; CoM in mm)")
    print(f"  dynamic (replay, {doc['method']}): mass {e['mass']:.4f} kg "
          f"(sigma {sd[0]:.2f} %, jackknife {doc['jackknife']['std'][0]:.4f} kg)")
    print(f"    CoM {_vec(e['com'], 1e3, '7.1f')} mm  (jackknife std "
          f"{_vec(doc['jackknife']['com_std'], 1e3, '4.1f')} mm)")
    print(f"    inertia about CoM [xx xy xz yy yz zz] {_vec(e['inertia_com'], 1, '.4f')} kg m^2")
    print(f"    sigma % of pi {_vec(sd, 1, '.2g')}")
    jk = 100 * np.asarray(doc["jackknife"]["std"]) / np.abs(np.asarray(doc["pi"]))
    print(f"    jackknife % of pi {_vec(jk, 1, '.2g')}  (inertia not identifiable here)")
    print(f"    F/T bias {_vec(e['wrench_offset'], 1, '.3f')} N, N m")
    print(f"    physically consistent {e['physically_consistent']} (min eig J "
          f"{e['min_pseudo_inertia_eigenvalue']:.2e}; unconstrained LS min eig "
          f"{doc['least_squares']['min_pseudo_inertia_eigenvalue']:.2e})")
    print(f"    residual RMS raw      {_vec(e['residual_rms'], 1, '.3f')}")
    print(f"    residual RMS filtered {_vec(e['residual_rms_filtered'], 1, '.3f')}")
    m = doc["monitor"]
    if m.get("trained_at") is None:
        print(f"    T^2 contacts {e['contacts'] or 'none'}; the monitor was never trained")
    else:
        print(f"    T^2 contacts {e['contacts'] or 'none'}; monitor trained at "
              f"{m['trained_at']:.1f} s, threshold {m['threshold']:.1f}, max T^2 after "
              f"{m['max_t2']:.1f}")
    if "final_residual_samples_above" in m:
        print(f"    final residual under the learned covariance: "
              f"{m['final_residual_samples_above']} single samples above the threshold after "
              f"training (max {m['final_residual_max_t2']:.1f}, longest run "
              f"{m['final_residual_longest_run_above']}); before training "
              f"{m['final_residual_samples_above_before_training']} at "
              f"{_vec(m['final_residual_above_before_training_at'], 1, '.1f')} s")
    print("\n  mass comparison (kg) and CoM (mm)")
    rows = [("dynamic (this replay)", e["mass"], e["com"]),
            (f"static, {len(s['phases'])} rest phases*", s.get("mass"), s.get("com")),
            ("quasi-static, all samples", qs["mass"], qs["com"]),
            ("authors' quasi-static fit", AUTHORS_MASS, None),
            ("URDF links below sensor", u["mass"], u["com"]),
            ("URDF incl. sensor link", u["mass_with_sensor_link"], u["com_with_sensor_link"])]
    for name, mass, com in rows:
        mass_s = f"{mass:7.4f}" if mass is not None else "    n/a"
        com_s = _vec(com, 1e3, "6.1f") if com is not None else ""
        print(f"    {name:28s} {mass_s}  {com_s}")
    if s.get("torque_rank", 6) < 6:
        print(f"    * torque rank {s['torque_rank']}/6: the CoM along "
              f"{_vec(s['unobservable_com_direction'], 1, '.2f')} is unobservable from "
              f"{len(s['phases'])} poses {s['max_angle_between_gravity_directions_deg']:.0f} deg "
              "apart; its CoM is the minimum-norm one")
    print(f"    static bias {_vec(s.get('wrench_offset', []), 1, '.3f')}")
    print(f"    quasi-static bias {_vec(qs['wrench_offset'], 1, '.3f')}")
    lag = doc["lag"]
    print("\n  lag (wrench vs joints), residual of an LS fit vs wrench shift:")
    for row in lag["shifts"]:
        print(f"    {row['shift']:+3d} ({1e3 * row['seconds']:+6.1f} ms) weighted RMS "
              f"{row['weighted_rms']:.4f}  mass {row['mass']:.4f}")
    print(f"    best shift {lag['best_shift_samples']:+.2f} samples "
          f"({1e3 * lag['best_shift_seconds']:+.1f} ms); rate cross-correlation peak "
          f"{lag['xcorr_shift_samples']:+.2f} samples ({1e3 * lag['xcorr_shift_seconds']:+.1f} ms)")
    print("\n  Savitzky-Golay window (offline LS):")
    for row in doc["window_sensitivity"]:
        print(f"    {row['window']:3d} ({row['seconds']:.2f} s) mass {row['mass']:.4f} CoM "
              f"{_vec(row['com'], 1e3, '6.1f')} raw RMS {_vec(row['residual_rms_raw'], 1, '.3f')}")
    f = doc["frame_check"]
    rotation = ", ".join(f"{k} {v:+.1f}" for k, v in f["best_rotation_deg"].items())
    print(f"\n  frame: best extra rotation of the wrench about {rotation} deg; "
          f"weighted RMS {f['weighted_rms']:.3f} vs {f['wrist_ft_tool_link']['weighted_rms']:.3f}"
          f" with wrist_ft_tool_link, {f['sensor_on_payload']['weighted_rms']:.3f} (mass "
          f"{f['sensor_on_payload']['mass']:.3f}) with the other wrench sign")
    n = doc["noise_at_rest"]
    if n:
        print(f"  noise at rest {n['start']:.1f}-{n['end']:.1f} s: std "
              f"{_vec(n['std'], 1, '.4f')}, white part {_vec(n['white_std'], 1, '.4f')}")
    print(f"\n  runtime: replay {doc['runtime']['replay']:.1f} s, total "
          f"{doc['runtime']['total']:.1f} s")


def analyse(bag: Path, params_path: Path, rest_speed: float, rest_min: float,
            max_shift: int, windows: list[int], progress: bool = True
            ) -> tuple[dict[str, Any], Samples, NDArray[np.float64], ReplayResult]:
    """Replay and every cross-check; the JSON document, samples, prediction and result."""
    start = time.perf_counter()
    result = replay(ReplayOptions(bag, params=params_path, wrench_topic=WRENCH_TOPIC,
                                  progress=progress))
    replay_time = time.perf_counter() - start
    estimate = result.estimate
    if estimate is None:
        raise InertialIdError(f"{bag}: no estimate (too few samples?)")
    params = load_params(params_path)
    solver = {k: v for k, v in params.get("solver", {}).items()
              if k not in ("publish_rate", "contact_decimation")}
    config = online_config(solver).payload
    sign = -1.0 if config.wrench_sign == "payload_on_sensor" else 1.0
    raw, samples, kin = read_bag(bag, params)
    predicted = predicted_wrench(estimate.pi, samples.twist, samples.proper, estimate.offset,
                                 sign)
    ls_estimate, _ = ls_fit(samples.twist, samples.proper, samples.wrench, config)
    doc: dict[str, Any] = result.to_yaml()["estimate"]
    doc.update({
        "residual_rms": residual_rms(samples.wrench_raw - predicted),
        "contacts": [[a, b] for a, b in result.to_yaml()["contacts"]],
        "residual_rms_filtered": residual_rms(samples.wrench - predicted),
        "relative_std_percent": [float(v) for v in estimate.relative_std],
        "min_pseudo_inertia_eigenvalue": float(estimate.min_eigenvalue),
        "condition_number": float(estimate.condition_number),
        "method": estimate.method,
        "samples_used": result.samples_used,
        "samples_processed": result.samples_processed,
        "duration": float(samples.t[-1] - samples.t[0]),
        "monitor": monitor_summary(result, samples.wrench_raw - predicted, samples.t),
        "least_squares": {
            "mass": float(ls_estimate.pi[0]), "com": [float(v) for v in ls_estimate.body.com],
            "pi": [float(v) for v in ls_estimate.pi],
            "min_pseudo_inertia_eigenvalue": float(ls_estimate.min_eigenvalue)},
        "static_fit": static_fit(samples, rest_speed, rest_min, sign=sign),
        "quasi_static_fit": gravity_fit(samples.static_proper[:, :3], samples.wrench_raw, sign),
        "urdf_below_sensor": urdf_below(raw.urdf, kin.sensor_frame,
                                        kinematics_settings({
                                            k: v for k, v in params["kinematics"].items()
                                            if k not in ("urdf_path", "robot_description")
                                        }).locked_joints),
        "authors_mass": AUTHORS_MASS, "authors_hand_mass": AUTHORS_HAND_MASS,
        "lag": lag_analysis(samples, config, max_shift),
        "window_sensitivity": window_sensitivity(raw, kin, config, windows,
                                                 int(params["gatherer"].get("polyorder", 3))),
        "frame_check": frame_check(samples, config, raw, params),
        "jackknife": jackknife(samples, config),
        "noise_at_rest": noise_at_rest(samples, rest_speed, rest_min),
    })
    doc["runtime"] = {"replay": replay_time, "total": time.perf_counter() - start}
    return doc, samples, predicted, result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bag", type=Path, help="bag from tiago_bag.py (default: build one "
                        "in a temporary directory)")
    parser.add_argument("--json", type=Path, help="write the numbers to this JSON file")
    parser.add_argument("--report", type=Path, help="directory for the plots (and "
                        "inertial_id.tools.report's report when available)")
    parser.add_argument("--params", type=Path, default=DEFAULT_PARAMS)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA_DIR,
                        help="the TIAGo data folder (when building the bag)")
    parser.add_argument("--seconds", type=float, help="only the first SECONDS of the run "
                        "(when building the bag)")
    parser.add_argument("--rest-speed", type=float, default=0.01,
                        help="rad/s (m/s): every joint slower than this is at rest")
    parser.add_argument("--rest-min", type=float, default=0.5, help="s: shortest rest phase")
    parser.add_argument("--max-shift", type=int, default=6, help="samples, lag analysis")
    parser.add_argument("--windows", default="11,21,31,41,61",
                        help="Savitzky-Golay windows to compare (comma separated)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    windows = [int(w) for w in args.windows.split(",") if w.strip()]
    try:
        with tempfile.TemporaryDirectory(prefix="tiago_bag_") as tmp:
            bag = args.bag
            if bag is None:
                bag = Path(tmp) / "tiago_calibration_weight"
                convert(bag, args.data, "mcap", args.seconds)
            doc, samples, predicted, result = analyse(
                bag, args.params, args.rest_speed, args.rest_min, args.max_shift, windows,
                progress=not args.quiet)
            doc["bag"] = str(args.bag) if args.bag is not None else "temporary"
            if args.report is not None:
                args.report.mkdir(parents=True, exist_ok=True)
                written = [write_plot(args.report / "wrench_fit.png", samples, predicted,
                                      [tuple(c) for c in doc["contacts"]])]
                try:
                    from inertial_id.tools.report import write_report
                except ImportError:
                    print("inertial_id.tools.report is not available: only wrench_fit.png written")
                else:
                    written += write_report(result, args.report, bag=bag)
                doc["report_files"] = [p.name for p in written]
    except (OSError, ValueError, InertialIdError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.json is not None:
        args.json.write_text(json.dumps(doc, indent=1))
    print_report(doc)
    if args.json is not None:
        print(f"wrote {args.json}")
    if args.report is not None:
        print(f"report in {args.report}: {', '.join(doc['report_files'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
