"""``inertial-id identify-links`` and ``inertial-id excite``: link identification from joint
efforts, and exciting trajectories. The maths is in :mod:`inertial_id.core.links` and
:mod:`inertial_id.core.excitation`; this module reads files, runs them and writes results."""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml
from numpy.typing import NDArray

from inertial_id.core.errors import InertialIdError, SampleError
from inertial_id.core.friction import COULOMB_MODELS, FrictionModel
from inertial_id.core.link_model import LinkModel, structural_base_parameters
from inertial_id.core.link_selection import (
    PRESLIDING,
    PRIOR_WEIGHTS,
    LinkOptions,
    identify_links,
    memory_candidates,
)
from inertial_id.core.link_urdf import identified_urdf
from inertial_id.core.links import (
    METHODS,
    LinkIdentification,
    estimate_document,
    link_document,
)
from inertial_id.core.signals import savitzky_golay

IDENTIFY_HELP = """\
Identify the inertial parameters of a robot's links from joint positions and efforts (joint
torques or motor currents), with friction, offsets and optionally drive gains.

Input: a bag (BAG) with sensor_msgs/JointState carrying efforts (a torque-sensing arm's
joint_states, or the simulator's), or CSV files with a `t` column (s) and one column per joint,
named like the TIAGo export (`- arm_1_joint_position`, `- arm_1_joint_effort`; a plain
`arm_1_joint_position` works too).
Joints missing from the CSV are locked (at 0 unless --locked gives a position). Velocities and
accelerations come from Savitzky-Golay differentiation of the positions (zero phase); a
driver's velocity (--velocity) is used only when given, and a filtered one lags.

Model per joint j: effort_j = s_j * (Y_j pi) + friction_j, with Y the joint-torque regressor
(pinocchio), pi the 10 inertial parameters of each body about its joint frame, friction =
Coulomb + viscous + offset, and s_j the effort scale (effort per N m; 1 when efforts are
torques, fitted per joint against the URDF's CAD torques with --fit-gains: efforts alone only
give pi up to a common scale, which the CAD prior anchors).

Chosen from the data unless given (cross-validation on --folds contiguous time blocks of the
training rows, a guard of one filter window around each held-out block; score: geometric
mean over joints of the held-out effort RMS): whether Coulomb friction keeps the direction
of the last motion through rest (--direction-memory; a joint held still while others move
keeps its friction level, which a dead band predicts as zero) and the prior weight
(--prior-weight, sdp/qp). The choices and their scores are printed and written to the YAML;
check-links, identify-payload and the nodes apply the friction model the YAML names.

Methods: wls (weighted least squares on the base parameters, sigma % per base parameter),
pls (partial least squares), sdp (least squares + CAD prior subject to J(pi_i) >= 0 for each
link: physically consistent, CLARABEL), qp (the same prior with linear constraints: mass,
optional CoM box, cutting planes of J >= 0; OSQP). Writes a YAML summary (--output) and the
URDF with the identified links' <inertial> replaced (--output-urdf)."""

EXCITE_HELP = """\
Optimise an exciting joint trajectory (finite Fourier series over one period, starting at rest)
within the URDF's position and velocity limits, with RNEA-checked effort limits. Default
criterion: the condition number of the stacked payload regressor at --sensor-frame (F/T
payload identification); with --links, Bonnet's mass-weighted sum of per-link sub-regressor
condition numbers (link identification). Reports the criterion against a random trajectory of
the same period and harmonics, and writes a CSV (t, then position/velocity/acceleration of each
joint) and a YAML (joints, home, amplitudes, phases, period) that the simulator and a robot
driver can play."""


# --------------------------------------------------------------------------------- input


@dataclass(frozen=True)
class JointTable:
    """A CSV of joint values: ``t`` (N,), joint names, ``values`` (N, joints)."""

    t: NDArray[np.float64]
    names: list[str]
    values: NDArray[np.float64]


_KINDS = ("_position", "_velocity", "_effort", "_acceleration")


def joint_name(header: str) -> str:
    """``- arm_1_joint_position`` -> ``arm_1_joint``."""
    name = header.strip()
    if name.startswith("- "):
        name = name[2:].strip()
    for kind in _KINDS:
        if name.endswith(kind):
            return name[: -len(kind)]
    return name


def read_joint_csv(path: str | Path) -> JointTable:
    """Read a joint CSV (``t`` first, one column per joint; :class:`SampleError` if unusable)."""
    path = Path(path)
    try:
        header = path.read_text().splitlines()[0].split(",")
        table = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)
    except (OSError, IndexError, ValueError) as exc:
        raise SampleError(f"{path}: cannot read a joint CSV ({exc})") from exc
    if header[0].strip() != "t" or table.shape[1] != len(header):
        raise SampleError(f"{path}: expected a 't' column then one column per joint")
    if not np.all(np.isfinite(table)):
        raise SampleError(f"{path}: contains NaN or inf")
    if np.any(np.diff(table[:, 0]) <= 0):
        raise SampleError(f"{path}: stamps are not strictly increasing")
    return JointTable(table[:, 0].copy(), [joint_name(h) for h in header[1:]],
                      np.ascontiguousarray(table[:, 1:]))


def read_joint_bag(path: str | Path, topic: str | None = None
                   ) -> tuple[JointTable, JointTable]:
    """Positions and efforts of the joint states in a bag (``topic``, or its only
    sensor_msgs/JointState topic), as two tables on the header stamps.

    The joints are those of the first message with one effort per joint; messages with other
    names (e.g. a gripper's own joint states) are skipped, as are stamps that do not increase
    (:class:`SampleError` when fewer than 2 messages remain)."""
    from inertial_id.bags import BagReader

    stamps: list[float] = []
    positions: list[NDArray[np.float64]] = []
    efforts: list[NDArray[np.float64]] = []
    names: tuple[str, ...] | None = None
    with BagReader(path, joint_states_topic=topic, joint_states_only=True) as reader:
        for sample in reader.messages():
            if names is None and len(sample.effort) == len(sample.names) > 0:
                names = tuple(sample.names)
            if (names is None or tuple(sample.names) != names
                    or len(sample.effort) != len(names) or len(sample.position) != len(names)
                    or (stamps and sample.stamp <= stamps[-1])):
                continue
            stamps.append(sample.stamp)
            positions.append(np.asarray(sample.position, dtype=float))
            efforts.append(np.asarray(sample.effort, dtype=float))
    if names is None or len(stamps) < 2:
        raise SampleError(f"{path}: no joint states with one effort per joint")
    t = np.asarray(stamps)
    return (JointTable(t, list(names), np.array(positions)),
            JointTable(t, list(names), np.array(efforts)))


def _aligned(table: JointTable, reference: JointTable, what: str) -> NDArray[np.float64]:
    """``table``'s values in ``reference``'s joint order, checking the clocks match."""
    if table.t.shape != reference.t.shape or not np.allclose(table.t, reference.t, atol=1e-6):
        raise SampleError(f"the {what} CSV is not on the position CSV's rows and clock")
    index = {n: i for i, n in enumerate(table.names)}
    missing = [n for n in reference.names if n not in index]
    if missing:
        raise SampleError(f"the {what} CSV lacks joints {', '.join(missing)}")
    return table.values[:, [index[n] for n in reference.names]]


@dataclass(frozen=True)
class JointData:
    """Joint trajectories in the model's joint order: ``q, qd, qdd, effort`` (N, nv)."""

    t: NDArray[np.float64]
    q: NDArray[np.float64]
    qd: NDArray[np.float64]
    qdd: NDArray[np.float64]
    effort: NDArray[np.float64]
    valid: NDArray[np.bool_]  # rows away from the record's ends (full filter windows)

    def rows(self, start: int, stop: int) -> tuple[NDArray[np.float64], ...]:
        """``q, qd, qdd, effort`` of rows ``[start, stop)`` that are valid."""
        keep = np.zeros(self.t.size, bool)
        keep[start:stop] = True
        keep &= self.valid
        return self.q[keep], self.qd[keep], self.qdd[keep], self.effort[keep]


def joint_data(model: LinkModel, position: JointTable, effort: JointTable,
               velocity: JointTable | None = None, window: int = 31, order: int = 3
               ) -> JointData:
    """Smooth and differentiate positions (Savitzky-Golay on the stamps), order by model."""
    index = model.order(position.names)
    raw = position.values[:, index]
    effort_values = _aligned(effort, position, "effort")[:, index]
    q = savitzky_golay(position.t, raw, window, order, 0)
    qd = savitzky_golay(position.t, raw, window, order, 1)
    qdd = savitzky_golay(position.t, raw, window, order, 2)
    if velocity is not None:
        qd = _aligned(velocity, position, "velocity")[:, index]
    valid = np.zeros(position.t.size, bool)
    valid[window // 2: position.t.size - window // 2] = True
    return JointData(position.t, q, qd, qdd, effort_values, valid)


# --------------------------------------------------------------------------------- output


def name_value_pair(text: str) -> tuple[str, float]:
    name, _, value = text.partition("=")
    try:
        return name.strip(), float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}") from None


def former_flag(parser: argparse.ArgumentParser, flag: str, action: argparse.Action) -> None:
    """Accept ``flag``, a former name of ``action``'s option, as that option; it is not
    shown in ``--help``."""
    parser.add_argument(flag, dest=action.dest, type=action.type, nargs=action.nargs,
                        default=action.default, help=argparse.SUPPRESS)


def add_bag(parser: argparse.ArgumentParser, text: str) -> None:
    """The recording a command reads, given as replay and play take theirs: the positional
    ``BAG`` (``text`` describes it); ``--bag BAG``, its former spelling, is accepted until
    the next release (so its help says). Read it with :func:`given_bag`."""
    parser.add_argument("bag", nargs="?", type=Path, metavar="BAG", help=text)
    parser.add_argument("--bag", dest="former_bag", type=Path, metavar="BAG",
                        help="deprecated, accepted until the next release: give BAG without "
                        "--bag")


def given_bag(args: argparse.Namespace) -> Path | None:
    """The bag of :func:`add_bag`, either spelling; ``None`` without one."""
    if args.bag is not None and args.former_bag is not None:
        raise SampleError("give the BAG once (--bag is its former spelling)")
    return args.bag if args.bag is not None else args.former_bag


def required_bag(args: argparse.Namespace) -> Path:
    """The bag of a command that cannot do without one (:func:`add_bag`)."""
    bag = given_bag(args)
    if bag is None:
        raise SampleError("give the BAG to read")
    return bag


def _rms(names: Sequence[str], values: NDArray[np.float64]) -> dict[str, float]:
    return {n: float(v) for n, v in zip(names, values, strict=True)}


# ------------------------------------------------------------------------- identify-links


def add_identify_links_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add ``identify-links`` to the ``inertial-id`` subcommands."""
    p = subparsers.add_parser(
        "identify-links", help="identify link inertias, friction and gains from joint efforts",
        description=IDENTIFY_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--urdf", required=True, help="the robot's URDF (CAD prior and kinematics)")
    add_bag(p, "read positions and efforts from this bag's joint states instead of CSV files")
    p.add_argument("--joint-states-topic", metavar="TOPIC",
                   help="with BAG: the JointState topic (default: the bag's only one)")
    p.add_argument("--position", type=Path, metavar="CSV",
                   help="joint positions: t, then one column per joint (rad, m)")
    p.add_argument("--effort", type=Path, metavar="CSV",
                   help="joint efforts on the same rows (N m, N, or motor units with "
                   "--fit-gains)")
    p.add_argument("--velocity", type=Path, metavar="CSV",
                   help="use these velocities instead of differentiating the positions")
    p.add_argument("--train-rows", type=int, nargs=2, metavar=("A", "B"),
                   help="identify on rows [A, B) only (zero-based); other rows are reported "
                   "as validation")
    p.add_argument("--locked", type=name_value_pair, nargs="*", default=[], metavar="NAME=VALUE",
                   help="lock these joints at these positions (every joint absent from the "
                   "CSV is locked, at 0 by default)")
    p.add_argument("--method", choices=METHODS, default="sdp",
                   help="wls, pls, sdp (LMI per link, default) or qp (linear constraints)")
    p.add_argument("--output", type=Path, metavar="OUT.yaml",
                   help="write base parameters, sigma %%, friction, gains, RMS, links")
    p.add_argument("--output-urdf", type=Path, metavar="OUT.urdf",
                   help="write the URDF with the identified links' <inertial> replaced")
    p.add_argument("--window", type=int, default=31,
                   help="Savitzky-Golay window, samples, odd (default 31)")
    p.add_argument("--order", type=int, default=3, help="Savitzky-Golay order (default 3)")
    p.add_argument("--friction", choices=COULOMB_MODELS, default="symmetric",
                   help="Coulomb model: symmetric + offset (default; equals asymmetric "
                   "levels fc +/- offset), asymmetric (fc+, fc-: needs rest samples to be "
                   "separable from the offset), none")
    p.add_argument("--no-viscous", action="store_true", help="no viscous friction")
    p.add_argument("--no-offset", action="store_true", help="no effort offset")
    p.add_argument("--armature", action="store_true",
                   help="add a reflected rotor inertia per joint (Ia qdd)")
    p.add_argument("--velocity-threshold", type=float, default=2e-3,
                   help="|qd| below which Coulomb friction is taken as zero (default 0.002); "
                   "with --smooth-coulomb the velocity scale v0 of tanh(qd / v0)")
    p.add_argument("--smooth-coulomb", action="store_true",
                   help="Coulomb friction as tanh(qd / v0) instead of a dead band")
    p.add_argument("--direction-memory", choices=("auto", "on", "off"), default="auto",
                   help="Coulomb friction keeps the direction of the last motion through "
                   "rest (presliding state; |qd| <= v0 leaves it alone): auto (default) "
                   "chooses from the data, on, off (the dead band or tanh alone)")
    p.add_argument("--presliding", type=float, metavar="X0",
                   help="presliding displacement of the direction memory, rad or m (default: "
                   f"with auto the best of {', '.join(f'{x:g}' for x in PRESLIDING)}, with on "
                   f"{PRESLIDING[0]:g})")
    p.add_argument("--fit-gains", action="store_true",
                   help="efforts are not torques: fit each joint's effort scale against the "
                   "CAD torques first")
    former_flag(p, "--known-gain", p.add_argument(
        "--drive-gain", type=name_value_pair, nargs="*", default=[],
        metavar="NAME=K", help="drive gains that are known (N m or N per effort unit): kept "
        "when fitting; one known gain anchors the scale of pi"))
    p.add_argument("--refine-gains", type=int, default=0, metavar="N",
                   help="sdp/qp: at most N alternations fitting the effort scales jointly "
                   "with the inertials (default 0: the CAD fit's scales)")
    p.add_argument("--prior-weight", type=float,
                   help="sdp/qp: weight of ||(pi - pi_CAD)/units||^2 relative to the "
                   "weighted effort energy (default: the best of "
                   f"{', '.join(f'{w:g}' for w in PRIOR_WEIGHTS)} by cross-validation)")
    p.add_argument("--folds", type=int, default=5,
                   help="time blocks of the cross-validation that chooses what is not given "
                   "(default 5)")
    p.add_argument("--max-relative-std", type=float, default=10.0,
                   help="sdp/qp: base parameters with sigma %% above this keep their CAD "
                   "values (Bonnet); 0 disables (default 10)")
    p.add_argument("--coloured-residuals", action="store_true",
                   help="correct sigma %% for the residuals' autocorrelation time")
    p.add_argument("--consistency", choices=("link", "body"), default="link",
                   help="constrain each URDF link alone (rigid attachments at CAD, default) "
                   "or the whole body that moves with the joint")
    p.add_argument("--com-margin", type=float, metavar="M",
                   help="sdp/qp: keep each body's CoM within M metres of the CAD CoM (box)")
    return p


def joint_tables(args: argparse.Namespace) -> tuple[JointTable, JointTable]:
    """Positions and efforts from the bag or from ``--position`` and ``--effort``."""
    bag = given_bag(args)
    if bag is not None:
        if args.position or args.effort:
            raise SampleError("give either a BAG or --position and --effort, not both")
        return read_joint_bag(bag, args.joint_states_topic)
    if not (args.position and args.effort):
        raise SampleError("give a BAG, or --position and --effort")
    return read_joint_csv(args.position), read_joint_csv(args.effort)


def _locks(model_joints: Sequence[str], csv_joints: Sequence[str],
           locked: Sequence[tuple[str, float]]) -> tuple[list[str], dict[str, float]]:
    lock = dict(locked)
    moving = [n for n in csv_joints if n in model_joints and n not in lock]
    return moving, lock


def run_identify_links(args: argparse.Namespace) -> int:
    """Run ``identify-links``; 0 on success (errors raise :class:`InertialIdError`)."""
    begin = time.perf_counter()
    position, effort = joint_tables(args)
    velocity = read_joint_csv(args.velocity) if args.velocity else None
    from inertial_id.core.kinematics import load_urdf_model, urdf_text

    text = urdf_text(args.urdf)
    names = list(load_urdf_model(text).names)[1:]
    moving, lock = _locks(names, position.names, args.locked)
    if not moving:
        raise SampleError("none of the CSV's joints is a joint of the URDF")
    model = LinkModel(text, joints=moving, locked=lock)
    data = joint_data(model, position, effort, velocity, args.window, args.order)
    n = data.t.size
    start, stop = args.train_rows or (0, n)
    if not 0 <= start < stop <= n:
        raise SampleError(f"--train-rows must satisfy 0 <= A < B <= {n}")
    period = float(np.median(np.diff(data.t)))
    friction = FrictionModel(args.friction, not args.no_viscous, not args.no_offset,
                             args.velocity_threshold, args.armature, args.smooth_coulomb,
                             sample_period=period)
    base = structural_base_parameters(model)
    candidates = _friction_candidates(friction, args)
    options = LinkOptions(args.method, args.prior_weight, candidates[0], args.fit_gains,
                          dict(args.drive_gain), args.refine_gains, args.max_relative_std,
                          args.consistency, args.com_margin, args.coloured_residuals,
                          friction_candidates=candidates,
                          folds=args.folds, guard=args.window)
    problem, cad, estimate = identify_links(model, data.rows(start, stop), options, base)
    friction = problem.friction_model
    urdf_path = Path(args.urdf)
    doc = {"method": args.method,
           "urdf": str(urdf_path.resolve()) if urdf_path.is_file() else str(args.urdf),
           "joints": model.joint_names,
           "locked": {k: float(v) for k, v in model.locked.items()},
           "train_rows": [int(start), int(stop)], "samples": problem.samples,
           "friction_model": friction.settings(),
           "prior_weight": estimate.info.get("prior_weight"),
           "choices": _choices(estimate.info["selection"], args),
           "torque_rms": _rms(model.joint_names, problem.rms(estimate)),
           "torque_rms_cad": _rms(model.joint_names, problem.rms(cad))}
    doc.update(estimate_document(problem, estimate, args.max_relative_std or 10.0))
    if estimate.standard is not None:
        doc["links"] = link_document(model, estimate.standard)
        doc["all_links_consistent"] = all(v["physically_consistent"]
                                          for v in doc["links"].values())
    others = np.ones(n, bool)
    others[start:stop] = False
    if np.any(others & data.valid):
        # The whole record, then its rows outside training: a friction state with memory
        # enters them with the history of the rows before.
        whole = LinkIdentification(model, *data.rows(0, n), friction, base)
        held = whole.subset(others[data.valid])
        doc["validation_rms"] = _rms(model.joint_names, held.rms(estimate))
        doc["validation_rms_cad"] = _rms(model.joint_names, held.rms(cad))
    doc["seconds"] = round(time.perf_counter() - begin, 3)
    _print_summary(model, doc)
    if args.output:
        args.output.write_text(yaml.safe_dump(doc, sort_keys=False))
        print(f"wrote {args.output}")
    if args.output_urdf:
        if estimate.standard is None:
            raise InertialIdError("this method gave no standard parameters to write")
        args.output_urdf.write_text(identified_urdf(model, estimate.standard))
        print(f"wrote {args.output_urdf}")
    return 0


def _friction_candidates(friction: FrictionModel, args: argparse.Namespace
                         ) -> tuple[FrictionModel, ...]:
    """The friction models ``--direction-memory`` leaves to choose from (one: the model)."""
    presliding = (args.presliding,) if args.presliding is not None else PRESLIDING
    if args.direction_memory == "off" or friction.coulomb == "none":
        return (friction,)
    if args.direction_memory == "on":
        return (friction.with_presliding(presliding[0]),)
    return memory_candidates(friction, presliding)


def _choices(selection: dict[str, list[dict]], args: argparse.Namespace) -> dict:
    """What was chosen from the data (the cross-validation tables) and what was given."""
    out: dict[str, dict] = {}
    for name, given in (("friction", args.direction_memory != "auto"),
                        ("prior_weight", args.prior_weight is not None)):
        if name in selection:
            out[name] = {"source": "cross-validation", "folds": args.folds,
                         "guard_rows": args.window, "candidates": selection[name]}
        else:
            out[name] = {"source": "option" if given else "not applicable"}
    return out


def _print_summary(model: LinkModel, doc: dict) -> None:
    print(f"{doc['method']}: {doc['samples']} samples, {len(doc['base_parameters'])} base "
          f"parameters ({sum(b['identifiable'] for b in doc['base_parameters'])} with "
          f"sigma <= threshold), {doc['seconds']:.1f} s")
    f = doc["friction_model"]
    memory = f"direction memory x0 {f['presliding']:g}" if f["presliding"] else "no memory"
    weight = doc["prior_weight"]
    print(f"friction: {f['coulomb']} Coulomb, {memory} "
          f"({doc['choices']['friction']['source']}); prior weight "
          f"{'-' if weight is None else f'{weight:g}'} "
          f"({doc['choices']['prior_weight']['source']})")
    for name, key, label in (("friction", "presliding", "direction memory x0"),
                             ("prior_weight", "prior_weight", "prior weight")):
        for row in doc["choices"][name].get("candidates", []):
            print(f"  {label} {row[key]:<8g} held-out score {row['score']:.5g}")
    print(f"{'joint':24s} {'RMS id':>10s} {'RMS CAD':>10s}")
    for j in model.joint_names:
        print(f"{j:24s} {doc['torque_rms'][j]:10.4g} {doc['torque_rms_cad'][j]:10.4g}")
    if "all_links_consistent" in doc:
        print(f"all links physically consistent: {doc['all_links_consistent']}")


# --------------------------------------------------------------------------------- excite


def add_excite_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add ``excite`` to the ``inertial-id`` subcommands."""
    p = subparsers.add_parser("excite", help="optimise an exciting trajectory (payload or links)",
                              description=EXCITE_HELP,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--urdf", help="robot URDF (default: the bundled arm)")
    p.add_argument("--sensor-frame", default="ft_sensor",
                   help="F/T sensor frame for the payload criterion (default ft_sensor)")
    p.add_argument("--links", action="store_true",
                   help="optimise for link identification (Bonnet's criterion) instead")
    p.add_argument("--joints", nargs="*", metavar="NAME",
                   help="joints that move (default: all); the others are locked")
    p.add_argument("--locked", type=name_value_pair, nargs="*", default=[], metavar="NAME=VALUE",
                   help="positions of locked joints (default 0)")
    p.add_argument("--duration", type=float, default=10.0,
                   help="period of the trajectory, s (default 10)")
    p.add_argument("--harmonics", type=int, default=4, help="Fourier harmonics (default 4)")
    p.add_argument("--budget", type=int, default=1500,
                   help="criterion evaluations (default 1500)")
    former_flag(p, "--rate", p.add_argument("--sample-rate", type=float, default=100.0,
                                            help="CSV sample rate, Hz (100)"))
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--output", type=Path, metavar="OUT.csv|OUT.yaml",
                   help="write OUT.csv and OUT.yaml (same stem)")
    return p


def run_excite(args: argparse.Namespace) -> int:
    """Run ``excite``; 0 on success."""
    from inertial_id.core.excitation import (
        excite_links,
        excite_payload,
        write_trajectory_csv,
        write_trajectory_yaml,
    )
    from inertial_id.core.kinematics import SensorKinematics
    from inertial_id.core.simulation import bundled_urdf_path

    urdf = args.urdf or bundled_urdf_path()
    options = {"budget": args.budget, "seed": args.seed}
    if args.links:
        model = LinkModel(urdf, joints=args.joints, locked=dict(args.locked))
        result = excite_links(model, args.duration, args.harmonics, **options)
    else:
        model = LinkModel(urdf, joints=args.joints, locked=dict(args.locked))
        kinematics = SensorKinematics(model.urdf, args.sensor_frame, locked_joints=model.locked)
        result = excite_payload(kinematics, args.duration, args.harmonics, **options)
    print(f"{result.criterion}: optimised {result.value:.4g}, random {result.random_value:.4g}"
          f" ({result.evaluations} evaluations, {result.seconds:.1f} s)")
    for key, value in result.extra.items():
        print(f"{key}: {value:.4g}")
    print(f"max |qd|/limit {result.max_velocity_ratio:.3f}, "
          f"max |tau|/limit {result.max_effort_ratio:.3f} (URDF inertias)")
    if args.output:
        stem = args.output.with_suffix("")
        csv_path = write_trajectory_csv(stem.with_suffix(".csv"), result.trajectory,
                                        result.joint_names, rate=args.sample_rate)
        yaml_path = write_trajectory_yaml(stem.with_suffix(".yaml"), result)
        print(f"wrote {csv_path} and {yaml_path}")
    return 0
