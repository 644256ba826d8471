"""The pipeline's parameters, in one ROS-free place: one table per node.

Each node declares exactly the parameters listed here (with these defaults and descriptions),
and offline replay reads the same ``config/*.yaml`` sections through the same functions
(:mod:`inertial_id.params.settings`), so a parameter file tuned on a bag means the same thing on the
robot. Units are SI (the ``unit`` of each :class:`~inertial_id.params.spec.Param`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from inertial_id.core.applying import GateSettings
from inertial_id.core.estimation.online import OnlineConfig
from inertial_id.core.estimation.payload import METHODS, NOISE_STD_RANGE, PayloadConfig
from inertial_id.core.estimation.stage import SOLVE_SHARE
from inertial_id.core.gathering.gatherer import GathererSettings
from inertial_id.core.handoff import TARGETS
from inertial_id.core.joint_torque.link_selection import LinkOptions
from inertial_id.core.joint_torque.links import METHODS as LINK_METHODS
from inertial_id.core.joint_torque.torque_payload.stream import TorquePayloadStream
from inertial_id.core.kinematics import DEFAULT_GRAVITY
from inertial_id.core.regressor import WRENCH_SIGNS
from inertial_id.params.spec import Param, default_text, scope_text

_P, _O, _G, _L = PayloadConfig(), OnlineConfig(), GathererSettings(), LinkOptions()


def defaults(function: Callable[..., Any]) -> dict[str, Any]:
    """The default values of the keyword arguments of a core function or class (a
    dataclass's fields), where a core default exists without an instance to read it from."""
    return {name: p.default for name, p in inspect.signature(function).parameters.items()
            if p.default is not inspect.Parameter.empty}


def scoped(params: tuple[Param, ...], **scope: Any) -> tuple[Param, ...]:
    """``params`` with the same ``scope`` (:class:`Param`'s ``modes``, ``offline``): the
    parameters of the solver's joint-torque modes, of a node no offline tool runs."""
    return tuple(replace(p, **scope) for p in params)

URDF_PARAMS = (
    Param("urdf_path", "", "URDF file; empty: use robot_description"),
    Param("robot_description", "", "URDF text; empty: wait for the robot_description topic"),
)

MODEL_PARAMS = (
    Param("sensor_frame", "ft_sensor", "URDF frame of the F/T sensor's measurement origin "
          "(one value for the pipeline: give it once, in the parameter file's /** section)"),
    Param("gravity", list(DEFAULT_GRAVITY), "gravity in the URDF base frame (one value for "
          "the pipeline, in the /** section)", "double", unit="m/s^2", length=3),
    Param("locked_joint_names", [], "URDF joints held still and left out of the model (one "
          "value for the pipeline, in the /** section)", "string"),
    Param("locked_joint_positions", [], "their positions (one value for the pipeline, in the "
          "/** section)", "double", unit="rad or m"),
)
"""The robot model: declared by the two nodes that use it, the gatherer (its joints, and the
sensor frame's kinematics for the matched filter) and the kinematics node (the frame check
and the kinematics without the matched filter), read by replay once for both
(:func:`inertial_id.params.settings.shared_model`). Their names are
:data:`~inertial_id.params.spec.SHARED_PARAMETERS`: the other nodes ignore them."""

GATHERER_PARAMS = URDF_PARAMS + MODEL_PARAMS + (
    Param("filter_window", _G.window, "s spanned by the Savitzky-Golay window; 0: chosen "
          "from the first filter_decision_time of joint states (least acceleration error, "
          "gain near 1 in the motion's band)", low=0, unit="s"),
    Param("filter_delay", _G.delay, "s a filtered sample may wait for later joint states "
          "(the lag; < 0: half the window, zero phase)", low=-1, unit="s"),
    Param("filter_decision_time", _G.decision_time, "s of joint states held to choose the "
          "filter (filter_window 0)", low=0, open_low=True, unit="s"),
    Param("estimate_wrench_delay", _G.estimate_wrench_delay, "matched_filter: estimate from "
          "the held data how late the wrench stamps are behind the joint states' and, with "
          "clear evidence, correct every wrench stamp by it; then keep estimating it on the "
          "released samples and correct again whenever the evidence is clear"),
    Param("wrench_delay", _G.wrench_delay, "s subtracted from every wrench stamp (the wrench "
          "stamps' known delay; the estimate adds to it)", low=-0.5, high=0.5, unit="s"),
    Param("polyorder", _G.polyorder, "Savitzky-Golay polynomial order (>= 2)", low=2, unit="1"),
    Param("use_measured_velocity", _G.use_measured_velocity,
          "differentiate JointState.velocity instead of the positions"),
    Param("max_span", _G.max_span, "s: filter windows spanning more (a gap) are dropped", low=0,
          open_low=True, unit="s"),
    Param("matched_filter", _G.matched, "filter the sensor frame's kinematics (computed at "
          "every joint sample) with the wrench's kernel: no filter bias; uses sensor_frame, "
          "gravity and the locked joints, the kinematics node's values"),
    Param("errors_in_variables", _G.errors_in_variables, "matched_filter: estimate the "
          "joints' position noise and send the covariance it leaves in the sensor frame's "
          "acceleration, so the solver removes the bias it gives least squares"),
    Param("queue_depth", 500, "subscription queue depth (messages)", low=1, unit="messages",
          offline=False),
    Param("publish_rate", 200.0, "batches per second at most (Hz), on average and 10 % "
          "over, so that a driver publishing at this rate gets one batch per cycle; a batch "
          "leaves 0.5 ms after new data arrived", low=0, open_low=True, high=10000, unit="Hz",
          live=True, offline=False),
    Param("realtime_priority", 0, "SCHED_FIFO priority of every thread of the process (1-99; "
          "0: the scheduler it was started with), for ~/compensated_wrench within a ms on a "
          "loaded machine; needs an rtprio limit or CAP_SYS_NICE (else a warning and the "
          "normal scheduler)", low=0, high=99, unit="1", live=True, offline=False),
)

KINEMATICS_PARAMS = URDF_PARAMS + MODEL_PARAMS

TORQUE_MODES = ("links", "payload_from_torques")
"""The solver's joint-torque modes (no F/T sensor)."""

SOLVER_MODE = Param(
    "mode", "payload", "payload: the F/T payload from sensor_samples; links: the robot's "
    "link parameters and friction from joint_states (JointState.effort); "
    "payload_from_torques: the payload from joint_states' efforts (no F/T sensor)",
    choices=("payload", *TORQUE_MODES))

JOINT_TORQUE_PARAMS = scoped((
    Param("payload_frame", "", "payload_from_torques: URDF frame on the last link the payload "
          "is given in (flange, tool frame); empty: the last link's frame"),
    Param("links_file", "", "payload_from_torques: the link model identify-links wrote "
          "(friction, offsets, gains); empty: the URDF's inertials, no friction"),
    Param("links_joints", [], "links mode: joints identified (empty: every movable URDF "
          "joint); the others are locked at 0", "string"),
    Param("links_method", _L.method, "links mode: sdp or qp (consistent), wls or pls",
          live=True, choices=LINK_METHODS),
    Param("links_prior_weight", 1e-2, "links mode: weight of the URDF (CAD) prior", low=0,
          unit="1", live=True),
    Param("links_fit_gains", _L.fit_gains, "links mode: fit a drive gain per joint (efforts "
          "not in N m)", live=True),
    Param("links_window", defaults(TorquePayloadStream)["window"], "links and "
          "payload_from_torques: Savitzky-Golay window, in kept joint states (odd)", low=3,
          unit="samples"),
    Param("links_decimation", 5, "links and payload_from_torques: keep every N-th joint state",
          low=1, unit="samples", live=True),
    Param("links_horizon", 120.0, "links mode: s of joint states the fit uses (the latest)",
          low=0, open_low=True, unit="s", live=True),
    Param("links_solve_period", 10.0, "links mode: s between fits", low=0, open_low=True,
          unit="s", live=True),
), modes=TORQUE_MODES)
"""The parameters of the solver's joint-torque modes (``mode`` links or payload_from_torques):
the F/T solver (``mode`` payload) does not declare them (:func:`solver_params`) and ignores a
value given for one, with a log line naming it."""

SOLVER_PARAMS = URDF_PARAMS + (SOLVER_MODE,) + JOINT_TORQUE_PARAMS + (
    Param("wrench_sign", _P.wrench_sign, "payload_on_sensor (F/T sensors) or sensor_on_payload",
          choices=tuple(WRENCH_SIGNS)),
    Param("force_noise_std", _P.force_noise_std, "F/T force noise std, N (weights force rows; "
          "a change applies to new samples)", low=NOISE_STD_RANGE[0], high=NOISE_STD_RANGE[1],
          unit="N", live=True),
    Param("torque_noise_std", _P.torque_noise_std,
          "F/T torque noise std, N m (weights torque rows; a change applies to new samples)",
          low=NOISE_STD_RANGE[0], high=NOISE_STD_RANGE[1], unit="N m", live=True),
    Param("forgetting_factor", _P.forgetting_factor, "per-sample exponential forgetting in (0, 1]",
          low=0, high=1, open_low=True, unit="1", live=True),
    Param("window_samples", _P.window_samples, "> 0: estimate from the last N samples only",
          low=0, unit="samples"),
    Param("method", _P.method, "lmi_sdp or manifold (consistent), least_squares or pls",
          choices=METHODS),
    Param("epsilon", _P.epsilon, "margin of J(pi) >= epsilon I, kg m^2", low=0, unit="kg m^2",
          live=True),
    Param("solve_timeout", 0.2, "s: a slower cvxpy solve fails and the last estimate stays "
          "(0: none; the dedicated solver's iterations are bounded)", low=0, unit="s",
          live=True),
    Param("dedicated_solver", _P.dedicated_solver, "lmi_sdp: the compiled interior-point/"
          "Newton solver (prepared in the background at start; cvxpy until it is ready)",
          live=True),
    Param("min_samples", _O.min_samples, "samples before the first solve", low=1,
          unit="samples", live=True),
    Param("converged_mass_std", _O.converged_mass_std,
          "relative mass std under which the mass has converged", low=0, open_low=True,
          unit="1", live=True),
    Param("converged_com_std", _O.converged_com_std,
          "m: CoM std (each axis) under which the CoM has converged", low=0, open_low=True,
          unit="m", live=True),
    Param("converged_inertia_std", _O.converged_inertia_std,
          "inertia-about-CoM std (each entry) relative to the largest principal moment under "
          "which the inertia has converged", low=0, open_low=True, unit="1", live=True),
    Param("contact_detection", _O.monitor, "run the T^2 contact monitor", live=True),
    Param("confidence", _O.confidence, "T^2 threshold confidence", low=0, high=0.999999999,
          open_low=True, unit="1", live=True),
    Param("training_samples", _O.training_samples,
          "contact-free samples that learn the residual covariance (a change applies to the "
          "next training: after a reset or a payload change)", low=13, unit="samples",
          live=True),
    Param("training_time", _O.training_time,
          "s: the training also ends once its contact-free samples span this long (with at "
          "least 50 of them), so a slow wrench stream trains as soon as a fast one; 0: by "
          "training_samples only", low=0, unit="s", live=True),
    Param("on_samples", _O.on_samples, "consecutive samples above the threshold start a contact",
          low=1, unit="samples", live=True),
    Param("off_samples", _O.off_samples, "consecutive samples below release * threshold end it",
          low=1, unit="samples", live=True),
    Param("release", _O.release, "hysteresis factor of the threshold", low=0, high=1,
          open_low=True, unit="1", live=True),
    Param("gate_margin", _O.gate_margin, "s around a contact whose samples are not used", low=0,
          unit="s", live=True),
    Param("payload_change_after", _O.payload_change_after,
          "s of anomaly taken as a new payload (0: never)", low=0, unit="s", live=True),
    Param("publish_rate", 200.0, "at most this many estimates per second (Hz): one after "
          "a batch of samples, up to this rate, as solve_share allows (and 1 Hz without "
          "data)", low=0,
          open_low=True, high=1000, unit="Hz", live=True),
    Param("solve_share", SOLVE_SHARE, "a solve (and the estimate published) also waits for "
          "new samples of this share of those the estimate holds, an event (a contact, a "
          "bias step) or 0.5 s: the solves thin out as the data grow, to 2 a second (0: one "
          "every batch, up to publish_rate)", low=0, high=1, unit="1", live=True),
    Param("contact_decimation", 10, "publish ~/contact every N samples (and at every change)",
          low=1, unit="samples", live=True, offline=False),
    Param("calibration_file", "", "where ~/save writes the estimate (YAML, replay --output "
          "layout) and a URDF <inertial> beside it; empty: $ROS_HOME/inertial_id/<node>.yaml",
          live=True, offline=False),
    Param("output_frame", "", "URDF frame rigidly attached to the sensor (tool0, a tool "
          "centre point) that ~/parameters, ~/inertia, ~/markers and ~/save give the payload "
          "in (pi, CoM, inertia about the CoM, std, offset); empty: the sensor frame; needs "
          "the URDF (urdf_path, robot_description)"),
    Param("initial_payload_file", "", "a saved calibration or replay output to start from: "
          "published until the data give an estimate, and the estimate's prior"),
    Param("initial_payload_weight", 1e-4, "weight of that prior relative to the diagonal of "
          "the data's information (1e-4 moved a 1.5 kg estimate 0.8 g towards a saved 0.8 kg "
          "in a test; it keeps what the saved payload knows of directions the motion does not "
          "excite)", low=0, unit="1", live=True),
    Param("bias_drift", True, "model the F/T bias as drifting linearly in time "
          "(temperature): the offset published is the bias now, and its drift rate is "
          "estimated"),
    Param("bias_drift_prior", _P.bias_drift_prior, "N/s: std of the drift rate's zero-mean "
          "prior (torque: a tenth of it in N m/s; 0: none); it keeps a slow change of "
          "posture in the first seconds from being read as drift, and data of a minute "
          "outweigh it", low=0, unit="N/s", live=True),
    Param("bias_drift_warn", _O.bias_drift_warn, "N/s: /diagnostics warns when the "
          "estimated force drift exceeds this (torque: a tenth of it in N m/s; 0: never)",
          low=0, unit="N/s",
          live=True),
    Param("open_anomaly_after", _O.open_anomaly_after, "s: a contact not ended after this "
          "long is reported open and resolved (a bias step, a new payload, or unexplained: "
          "the contact monitor relearns), so no data are gated for ever (0: never)", low=0,
          unit="s", live=True),
)
"""Every parameter of the solver, in any mode (``--help``, replay's solver section)."""

_A = GateSettings()

WRENCH_AFTER_APPLY = ("target", "compensated", "uncompensated")
"""The values of the applier's ``wrench_after_apply``."""

APPLIER_PARAMS = scoped(URDF_PARAMS + (
    Param("target", "", "where the payload goes: " + ", ".join(TARGETS) + " (inertial-id "
          "export's names; required)", choices=tuple(TARGETS)),
    Param("destination", "", "the driver's service, or the controller node whose parameters "
          "are set; empty: the target's usual one"),
    Param("parameter_prefix", "", "dotted namespace of the parameters in the controller node "
          "(a filter chain's 'sensor_filter_chain.filter1.params')"),
    Param("frame", "", "frame the target gets the payload in; empty: tool0 for ur, ur7, franka "
          "and xarm, else the estimate's frame; another frame than the estimate's needs the "
          "URDF (urdf_path, robot_description)"),
    Param("transition_time", 0.0, "UR: s to move to the new payload", low=0, unit="s",
          live=True),
    Param("auto_apply", False, "apply by itself when every gate passes (else only ~/apply)",
          live=True),
    Param("dry_run", False, "log the request instead of sending it", live=True),
    Param("stable_s", _A.stable_s, "s the estimate must stay converged, contact-free and "
          "within change_std of itself before an automatic apply", low=0, unit="s", live=True),
    Param("change_std", _A.change_std, "an automatic apply needs a change from the last "
          "applied payload larger than this many std (any entry)", low=0, unit="1", live=True),
    Param("min_interval", _A.min_interval, "s between two automatic applies (or attempts)",
          low=0, unit="s", live=True),
    Param("service_timeout", 5.0, "s to wait for the driver's or controller's answer", low=0,
          open_low=True, unit="s", live=True),
    Param("applied_file", "", "where what was applied is saved (a calibration with an "
          "'applied' section); empty: $ROS_HOME/inertial_id/<namespace_node>.yaml", live=True),
    Param("wrench_after_apply", "target", "the F/T wrench the solver reads once a payload is "
          "applied: compensated (for the applied payload, as a UR driver publishes it: the "
          "applier then tells the solver, on ~/compensation, what to add back), "
          "uncompensated, or target (compensated for ur and ur7, uncompensated for the "
          "others)", choices=WRENCH_AFTER_APPLY),
), offline=False)
"""The applier's parameters: the running node's only (no offline tool applies)."""


def _simulator_params() -> tuple[Param, ...]:
    from inertial_id.core.parameters import vector_from_symmetric
    from inertial_id.core.simulation import (
        BUNDLED_HOME,
        BUNDLED_SENSOR_FRAME,
        DEFAULT_OFFSET,
        FourierTrajectory,
        PayloadSimulation,
        default_payload,
    )

    payload, sim, motion = default_payload(), defaults(PayloadSimulation), defaults(
        FourierTrajectory.random)
    return scoped((
        Param("urdf_path", "", "URDF file; empty: the bundled arm6_ft arm"),
        Param("sensor_frame", BUNDLED_SENSOR_FRAME, "F/T sensor frame"),
        Param("home", list(BUNDLED_HOME), "trajectory centre", "double", unit="rad"),
        Param("payload_mass", payload.mass, "payload mass", low=0, open_low=True, unit="kg"),
        Param("payload_com", payload.com.tolist(), "payload CoM, sensor frame", "double",
              unit="m", length=3),
        Param("payload_inertia", vector_from_symmetric(payload.inertia_com).tolist(),
              "[ixx, ixy, ixz, iyy, iyz, izz] about the CoM", "double", unit="kg m^2",
              length=6),
        Param("wrench_offset", list(DEFAULT_OFFSET), "F/T bias", "double", unit="N, N m",
              length=6),
        Param("contacts", [], "flat [start_s, duration_s, fx, fy, fz] per contact", "double",
              unit="s, s, N, N, N"),
        Param("wrench_sign", _P.wrench_sign, "convention of the wrench",
              choices=tuple(WRENCH_SIGNS)),
        Param("wrench_rate", 1000.0, "F/T rate", low=0, open_low=True, high=1e5, unit="Hz"),
        Param("joint_state_rate", 500.0, "joint state rate", low=0, open_low=True, high=1e5,
              unit="Hz"),
        Param("payload_change_time", -1.0, "s after start when the payload changes (< 0: "
              "never; ~/change_payload changes it on request)", unit="s"),
        Param("driver", "", "ur: serve a UR driver's /io_and_status_controller/set_payload "
              "(ur_msgs/srv/SetPayload, which must be installed) and, as that driver does, "
              "publish the wrench compensated for the payload set; empty: no driver service",
              choices=("", "ur")),
        Param("payload_change_mass", 0.8, "new payload mass", low=0, open_low=True, unit="kg"),
        Param("payload_change_com", [0.0, 0.03, 0.09], "new payload CoM", "double", unit="m",
              length=3),
        Param("payload_change_inertia", [0.002, 0.0, 0.0, 0.002, 0.0, 0.001],
              "new payload inertia about its CoM", "double", unit="kg m^2", length=6),
        Param("amplitude", motion["amplitude"], "max joint excursion", low=0, unit="rad"),
        Param("period", motion["period"], "trajectory period", low=0, open_low=True, unit="s"),
        Param("max_velocity", motion["max_velocity"], "max joint speed", low=0, open_low=True,
              unit="rad/s"),
        Param("trajectory_seed", 1, "seed of the Fourier coefficients", low=0, high=2**32 - 1,
              unit="1"),
        Param("force_noise_std", sim["force_noise_std"], "F/T force noise", low=0, unit="N"),
        Param("torque_noise_std", sim["torque_noise_std"], "F/T torque noise", low=0, unit="N m"),
        Param("joint_noise_std", sim["joint_noise_std"], "encoder noise", low=0, unit="rad"),
        Param("effort_noise_std", sim["effort_noise_std"], "joint torque noise", low=0, unit="N m"),
        Param("coulomb_friction", sim["coulomb_friction"], "joint Coulomb friction "
              "(tanh(qd / 0.03))", low=0, unit="N m"),
        Param("viscous_friction", sim["viscous_friction"], "joint viscous friction", low=0,
              unit="N m s/rad"),
        Param("seed", sim["seed"], "noise seed", low=0, high=2**32 - 1, unit="1"),
        Param("queue_depth", 500, "publisher queue depth", low=1, unit="messages"),
        Param("tick", 0.005, "publishing period", low=0, open_low=True, unit="s"),
    ), offline=False)


def solver_params(mode: str) -> tuple[Param, ...]:
    """The parameters a solver in ``mode`` declares: those of :data:`SOLVER_PARAMS` (every
    mode's) whose :attr:`~Param.modes` include it or are every mode's: without
    :data:`JOINT_TORQUE_PARAMS` in the F/T mode ``payload``, all of them in the joint-torque
    modes (which also run the payload estimator's configuration)."""
    return tuple(p for p in SOLVER_PARAMS if not p.modes or mode in p.modes)


SIMULATOR_TRAJECTORY_PARAMS = scoped((
    Param("follow_trajectory", False, "stand at home and move only along the goals of "
          "<controller>/follow_joint_trajectory (control_msgs/action/FollowJointTrajectory), "
          "as a robot under a joint trajectory controller"),
    Param("controller", "joint_trajectory_controller", "follow_trajectory: the controller's "
          "name (its action is <controller>/follow_joint_trajectory)"),
    Param("tracking_lag", 0.03, "follow_trajectory: s the arm follows its set point late",
          low=0, high=1, unit="s"),
    Param("contacts_from_motion", False, "follow_trajectory: the contacts' start times count "
          "from the start of the first goal's motion (a push during an identification)"),
), offline=False)
"""The simulator standing in for a robot under ros2_control's joint_trajectory_controller."""

SIMULATOR_PARAMS = _simulator_params() + SIMULATOR_TRAJECTORY_PARAMS
"""The simulator's parameters: all read-only (a new payload or trajectory is a new run)."""

IDENTIFY_PARAMS = scoped(URDF_PARAMS + MODEL_PARAMS + (
    Param("controller", "joint_trajectory_controller", "the joint trajectory controller that "
          "runs the motion (its action <controller>/follow_joint_trajectory, "
          "control_msgs/action/FollowJointTrajectory)"),
    Param("flange_frame", "tool0", "URDF frame whose origin a goal's box and floor bound"),
    Param("acceleration_limits", [10.0], "the joints' acceleration limits (one value or one "
          "per joint; a URDF has none: take them from the robot's joint_limits.yaml)",
          "double", unit="rad/s^2"),
    Param("velocity_fraction", 0.4, "default share of the URDF velocity limits", low=0,
          high=1, open_low=True, unit="1", live=True),
    Param("acceleration_fraction", 0.3, "default share of acceleration_limits", low=0, high=1,
          open_low=True, unit="1", live=True),
    Param("max_excursion", [0.5], "default rad each joint may move from where it stands (one "
          "value or one per joint)", "double", unit="rad", live=True),
    Param("max_duration", 10.0, "default s of motion at most", low=0, open_low=True, high=120,
          unit="s", live=True),
    Param("harmonics", 3, "Fourier harmonics of the motion", low=1, high=8, unit="1",
          live=True),
    Param("budget", 300, "criterion evaluations of the motion's design", low=10,
          high=100000, unit="1", live=True),
    Param("point_rate", 25.0, "points per second of the trajectory sent", low=1, high=1000,
          unit="Hz", live=True),
    Param("joint_state_timeout", 0.5, "s: an older joint state is no start to plan from",
          low=0, open_low=True, unit="s", live=True),
    Param("joint_state_wait", 5.0, "s a goal waits for a fresh joint state of every model "
          "joint (one started with the nodes: their discovery) before it is refused", low=0,
          unit="s", live=True),
    Param("server_timeout", 3.0, "s to wait for the controller's and the solver's servers",
          low=0, open_low=True, unit="s", live=True),
), offline=False)
"""The identification-on-demand node (the Identify action; docs/on_demand.md)."""

NODE_PARAMS = {"gatherer": GATHERER_PARAMS, "kinematics": KINEMATICS_PARAMS,
               "solver": SOLVER_PARAMS, "simulator": SIMULATOR_PARAMS,
               "applier": APPLIER_PARAMS, "identify": IDENTIFY_PARAMS}

OFFLINE_NODES = tuple(node for node, params in NODE_PARAMS.items()
                      if any(p.offline for p in params))
"""The nodes whose parameter file sections replay reads (those with a parameter not
node-only: the pipeline's gatherer, kinematics and solver)."""


def reference_markdown() -> str:
    """The parameter reference page (``docs/parameters.md``) written from :data:`NODE_PARAMS`:
    per node a table of name, default, unit, allowed values (range, choices, length), live or
    read-only, scope (:func:`~inertial_id.params.spec.scope_text`), description. The docs
    test regenerates it and fails when the page and the table differ."""
    lines = ["# Parameters", "",
             "Every node's parameters, generated from the parameter table "
             "(`inertial_id/params/table.py`) by `python -m inertial_id.params.table > "
             "docs/parameters.md`; the suite fails when this page and the table differ. "
             "**live**: `ros2 param set` applies a new value while the node runs; "
             "**read-only**: a change needs a restart. The same checks run at node start, "
             "on `ros2 param set`, on a replay parameter file and on a command-line flag. "
             "**scope**: *node and replay* parameters mean the same in a replay parameter "
             "file; replay ignores a value given for a *node only* one (and the sections of "
             "the simulator and the applier); *modes*: the solver modes that declare it. "
             "`inertial_id_<node> --help` prints the same list.", ""]
    for node, params in NODE_PARAMS.items():
        lines += [f"## {node}", "",
                  "| name | default | unit | allowed | changes | scope | description |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        for p in params:
            cells = (f"`{p.name}`", f"`{default_text(p.default)}`", p.unit, p.allowed_text,
                     "live" if p.live else "read-only", scope_text(p), p.description)
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    print(reference_markdown(), end="")
