"""``inertial-id identify-links``: link identification from joint efforts. The maths is in
:mod:`inertial_id.core.joint_torque.links` and :mod:`inertial_id.core.joint_torque.link_selection`,
the recordings are
read by :mod:`inertial_id.io.joint_records`; this module runs them and writes results (a YAML
summary, the identified URDF). ``excite`` is in :mod:`inertial_id.tools.excite_tool`; its
parser and runner stay importable from here for the command line."""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import yaml
from numpy.typing import NDArray

from inertial_id.core.errors import InertialIdError, SampleError
from inertial_id.core.joint_torque.friction import COULOMB_MODELS, FrictionModel
from inertial_id.core.joint_torque.link_gains import GAIN_STDS
from inertial_id.core.joint_torque.link_model import LinkModel, structural_base_parameters
from inertial_id.core.joint_torque.link_selection import (
    PRESLIDING,
    PRIOR_WEIGHTS,
    VELOCITY_SCALES,
    LinkOptions,
    coulomb_candidates,
    memory_candidates,
)
from inertial_id.core.joint_torque.link_stream import fit_links
from inertial_id.core.joint_torque.link_urdf import identified_urdf
from inertial_id.core.joint_torque.links import METHODS, LinkIdentification
from inertial_id.io.joint_records import JointTable, joint_data, read_joint_bag, read_joint_csv
from inertial_id.tools.arguments import add_bag, former_flag, given_bag, name_value_pair
from inertial_id.tools.excite_tool import add_excite_parser, run_excite

__all__ = ["IDENTIFY_HELP", "add_excite_parser", "add_identify_links_parser", "joint_tables",
           "run_excite", "run_identify_links"]


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
mean over joints of the held-out effort RMS): the shape of the Coulomb term (a dead band at
0.002, or tanh(qd / v0) with v0 from a grid, then narrowed down; unless --velocity-threshold
or --smooth-coulomb is given), whether it keeps the direction of the last motion through rest
(--direction-memory; a joint held still while others move keeps its friction level, which a
dead band predicts as zero), the prior weight (--prior-weight, sdp/qp) and how far the drive
gains not known move from their nominal values (--gain-std: a prior on each gain, their
geometric mean held at the nominal one, since efforts never fix the common scale). The choices and
their scores are printed and written to the YAML; check-links, identify-payload and the
nodes apply the friction model the YAML names.

Methods: wls (weighted least squares on the base parameters, sigma % per base parameter),
pls (partial least squares), sdp (least squares + CAD prior subject to J(pi_i) >= 0 for each
link: physically consistent, CLARABEL), qp (the same prior with linear constraints: mass,
optional CoM box, cutting planes of J >= 0; OSQP). Writes a YAML summary (--output) and the
URDF with the identified links' <inertial> replaced (--output-urdf)."""


DEAD_BAND = 2e-3
"""rad/s or m/s: the dead band of the Coulomb term when ``--velocity-threshold`` is not given
(one candidate of the shape chosen from the data)."""


def _rms(names: Sequence[str], values: NDArray[np.float64]) -> dict[str, float]:
    return {n: float(v) for n, v in zip(names, values, strict=True)}


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
    p.add_argument("--train-rows", type=int, nargs=2, metavar=("A", "B"), action="append",
                   help="identify on rows [A, B) only (zero-based; repeat for several "
                   "ranges, e.g. around a held-out block); other rows are reported as "
                   "validation")
    p.add_argument("--locked", type=name_value_pair, nargs="*", default=[], metavar="NAME=VALUE",
                   help="lock these joints at these positions (every joint absent from the "
                   "CSV is locked, at 0 by default)")
    p.add_argument("--method", choices=METHODS, default="sdp",
                   help="wls, pls, sdp (LMI per link, default) or qp (linear constraints)")
    p.add_argument("--output", type=Path, metavar="OUT.yaml",
                   help="write base parameters, sigma %%, friction, gains, RMS, links")
    p.add_argument("--output-urdf", type=Path, metavar="OUT.urdf",
                   help="write the URDF with the identified links' <inertial> replaced")
    p.add_argument("--window", type=int, default=None,
                   help="Savitzky-Golay window, samples, odd (default: the odd count nearest "
                        "to 0.24 s at the recording's rate, 31 at 125 Hz, 241 at 1 kHz)")
    p.add_argument("--order", type=int, default=3, help="Savitzky-Golay order (default 3)")
    p.add_argument("--friction", choices=COULOMB_MODELS, default="symmetric",
                   help="Coulomb model: symmetric + offset (default; equals asymmetric "
                   "levels fc +/- offset), asymmetric (fc+, fc-: needs rest samples to be "
                   "separable from the offset), none")
    p.add_argument("--no-viscous", action="store_true", help="no viscous friction")
    p.add_argument("--no-offset", action="store_true", help="no effort offset")
    p.add_argument("--armature", action="store_true",
                   help="add a reflected rotor inertia per joint (Ia qdd)")
    p.add_argument("--velocity-threshold", type=float,
                   help="|qd| below which Coulomb friction is taken as zero; with "
                   "--smooth-coulomb the velocity scale v0 of tanh(qd / v0) (default: chosen "
                   f"from the data: the dead band at {DEAD_BAND:g} or tanh with v0 from "
                   f"{', '.join(f'{v:g}' for v in VELOCITY_SCALES)}, then narrowed down)")
    p.add_argument("--smooth-coulomb", action="store_true",
                   help="Coulomb friction as tanh(qd / v0), not a dead band (v0 chosen "
                   "from the data unless --velocity-threshold is given)")
    p.add_argument("--direction-memory", choices=("auto", "on", "off"), default="auto",
                   help="Coulomb friction keeps the direction of the last motion through "
                   "rest (presliding state; |qd| <= v0 leaves it alone), or only once a "
                   "joint has stood still 0.5 s (memory at rest): auto (default) chooses "
                   "from the data, keeping a memory when no record rests; on (presliding); "
                   "off (the dead band or tanh alone)")
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
    p.add_argument("--gain-std", type=_gain_std, default=None, metavar="STD|auto",
                   help="refine the drive gains not known jointly with the links under a "
                   "prior of this relative std around their nominal values, their geometric "
                   "mean held at the nominal one unless a --drive-gain anchors it; 0 keeps "
                   "the nominal gains (default auto: the best of 0, "
                   f"{', '.join(f'{g:g}' for g in GAIN_STDS)} by the held-out score)")
    p.add_argument("--refine-gains", type=int, default=0, metavar="N",
                   help="sdp/qp: at most N alternations fitting every effort scale not known "
                   "jointly with the inertials, no prior (replaces the --gain-std choice; "
                   "default 0)")
    p.add_argument("--prior-weight", type=float,
                   help="sdp/qp: weight of ||(pi - pi_CAD)/units||^2 relative to the "
                   "weighted effort energy (default: the best of "
                   f"{', '.join(f'{w:g}' for w in PRIOR_WEIGHTS)} by cross-validation)")
    p.add_argument("--folds", type=int, default=5,
                   help="time blocks of the cross-validation that chooses what is not given "
                   "(default 5)")
    p.add_argument("--held-out", type=Path, nargs="+", default=[], metavar="BAG",
                   help="other recordings of the same arm, nothing held (e.g. the unloaded "
                   "run of a loaded/unloaded pair): what is not given is chosen by the fit on "
                   "the whole training record predicting these instead of by time blocks, "
                   "and the direction memory's x0 is narrowed down too")
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


def _gain_std(text: str) -> float | None:
    """``--gain-std``: a relative std >= 0, or None for ``auto``."""
    if text == "auto":
        return None
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"--gain-std must be >= 0 or auto, not {text}")
    return value


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
    window = data.window  # the held-out recordings are filtered alike; the guard rows
    n = data.t.size
    ranges = _train_ranges(args.train_rows, n)
    period = float(np.median(np.diff(data.t)))
    threshold = args.velocity_threshold
    friction = FrictionModel(args.friction, not args.no_viscous, not args.no_offset,
                             DEAD_BAND if threshold is None else threshold, args.armature,
                             args.smooth_coulomb and threshold is not None,
                             sample_period=period)
    base = structural_base_parameters(model)
    candidates = _friction_candidates(friction, args)
    options = LinkOptions(args.method, args.prior_weight, candidates[0], args.fit_gains,
                          dict(args.drive_gain), args.refine_gains, args.max_relative_std,
                          args.consistency, args.com_margin, args.coloured_residuals,
                          friction_candidates=candidates,
                          folds=args.folds, guard=window,
                          refine_friction=_shape_chosen(args, friction),
                          held_out=_held_out_rows(model, args, window),
                          presliding_given=args.presliding is not None,
                          gain_std=args.gain_std, units_from_data=True)
    fit = fit_links(model, data.rows_in(ranges), options, base)
    problem, cad, estimate = fit.problem, fit.cad, fit.estimate
    friction = problem.friction_model
    urdf_path = Path(args.urdf)
    doc = {"method": args.method,
           "urdf": str(urdf_path.resolve()) if urdf_path.is_file() else str(args.urdf),
           "locked": {k: float(v) for k, v in model.locked.items()},
           "train_rows": [[int(a), int(b)] for a, b in ranges],
           "prior_weight": estimate.info.get("prior_weight"),
           "gain_std": estimate.info.get("gain_std"),
           "gain_anchor": _gain_anchor(args, estimate.info.get("gain_std")),
           "known_gains": [name for name, _ in args.drive_gain],
           "choices": _choices(estimate.info["selection"], args, window)}
    doc.update(fit.document(args.max_relative_std or 10.0))
    others = ~data.mask(ranges)
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


def _train_ranges(given: Sequence[Sequence[int]] | None, n: int) -> list[tuple[int, int]]:
    """The ``--train-rows`` ranges ``[A, B)`` in time order (default: the whole record of
    ``n`` rows); each must lie in the record and they must not overlap."""
    ranges = sorted((int(a), int(b)) for a, b in given) if given else [(0, n)]
    for a, b in ranges:
        if not 0 <= a < b <= n:
            raise SampleError(f"--train-rows {a} {b}: each range must satisfy "
                              f"0 <= A < B <= {n}")
    for (_, b), (a, _) in zip(ranges[:-1], ranges[1:], strict=True):
        if a < b:
            raise SampleError(f"--train-rows ranges overlap (row {a} is in two)")
    return ranges


def _held_out_rows(model: LinkModel, args: argparse.Namespace, window: int
                   ) -> tuple[tuple[NDArray[np.float64], ...], ...]:
    """(q, qd, qdd, effort) of each ``--held-out`` bag, read and filtered as the training's
    (``window``: its filter's samples)."""
    out = []
    for bag in args.held_out:
        position, effort = read_joint_bag(bag, args.joint_states_topic)
        data = joint_data(model, position, effort, None, window, args.order)
        out.append(data.rows(0, data.t.size))
    return tuple(out)


def _friction_candidates(friction: FrictionModel, args: argparse.Namespace
                         ) -> tuple[FrictionModel, ...]:
    """The friction models ``--direction-memory`` leaves to choose from (one: the model)."""
    presliding = (args.presliding,) if args.presliding is not None else PRESLIDING
    if args.direction_memory == "off":
        presliding = None
    elif args.direction_memory == "on":
        presliding = presliding[:1]
    if _shape_chosen(args, friction):
        candidates = coulomb_candidates(friction, dead_band=not args.smooth_coulomb,
                                        presliding=presliding, at_rest=_at_rest(args))
        return tuple(c for c in candidates if presliding is None or c.memory
                     or args.direction_memory != "on")
    if presliding is None or friction.coulomb == "none":
        return (friction,)
    if args.direction_memory == "on":
        return (friction.with_presliding(presliding[0]),)
    return memory_candidates(friction, presliding, at_rest=_at_rest(args))


def _at_rest(args: argparse.Namespace) -> bool:
    """Whether the memory at rest only is a candidate: with ``--direction-memory auto`` and
    no ``--presliding`` (either asks for the presliding memory)."""
    return args.direction_memory == "auto" and args.presliding is None


def _shape_chosen(args: argparse.Namespace, friction: FrictionModel) -> bool:
    """Whether the Coulomb term's shape (dead band or tanh, its v0) is left to the data."""
    return args.velocity_threshold is None and friction.coulomb != "none"


def _choices(selection: dict[str, list[dict]], args: argparse.Namespace, window: int
             ) -> dict:
    """What was chosen from the data (the cross-validation tables) and what was given
    (``window``: the filter's samples, the cross-validation's guard rows)."""
    out: dict[str, dict] = {}
    shape_given = args.velocity_threshold is not None or args.friction == "none"
    for name, given in (("friction", args.direction_memory != "auto" and shape_given),
                        ("prior_weight", args.prior_weight is not None),
                        ("drive_gains", args.gain_std is not None or args.refine_gains > 0)):
        if name in selection and args.held_out:
            out[name] = {"source": "held-out recordings",
                         "recordings": [str(b) for b in args.held_out],
                         "candidates": selection[name]}
        elif name in selection:
            out[name] = {"source": "cross-validation", "folds": args.folds,
                         "guard_rows": window, "candidates": selection[name]}
        else:
            out[name] = {"source": "option" if given else "not applicable"}
    if "rest" in selection:
        out["friction"]["rest"] = selection["rest"][0]
    out["effort_unit"] = ({"source": "option (--fit-gains)"} if args.fit_gains else
                          {"source": "CAD fit", "joints": selection.get("effort_unit", [])})
    return out


def _gain_anchor(args: argparse.Namespace, gain_std: float | None) -> str:
    """What holds the common scale of the drive gains (the YAML's ``gain_anchor``)."""
    if args.refine_gains > 0:
        return "CAD prior (--refine-gains)"
    if not gain_std:
        return "nominal gains, not refined"
    if args.drive_gain:
        return "known gains: " + ", ".join(name for name, _ in args.drive_gain)
    return "geometric mean of the nominal gains"


def _memory_text(friction: dict) -> str:
    """A friction model's memory (its settings) in words."""
    if friction["presliding"]:
        return f"direction memory x0 {friction['presliding']:g}"
    if friction.get("rest_time"):
        return f"memory at rest after {friction['rest_time']:g} s"
    return "no memory"


def _print_summary(model: LinkModel, doc: dict) -> None:
    print(f"{doc['method']}: {doc['samples']} samples, {len(doc['base_parameters'])} base "
          f"parameters ({sum(b['identifiable'] for b in doc['base_parameters'])} with "
          f"sigma <= threshold), {doc['seconds']:.1f} s")
    f = doc["friction_model"]
    memory = _memory_text(f)
    shape = ("tanh(qd / v0)" if f["smooth"] else "dead band") + f" v0 {f['velocity_threshold']:.3g}"
    weight = doc["prior_weight"]
    print(f"friction: {f['coulomb']} Coulomb, {shape}, {memory} "
          f"({doc['choices']['friction']['source']}); prior weight "
          f"{'-' if weight is None else f'{weight:g}'} "
          f"({doc['choices']['prior_weight']['source']})")
    rest = doc["choices"]["friction"].get("rest")
    if rest and rest["memory_only"]:
        print("  no joint rests after moving in these records: direction memory kept "
              "(the data cannot refute it)")
    fitted = [row["joint"] for row in doc["choices"]["effort_unit"].get("joints", [])
              if row["fitted"]]
    if fitted:
        print(f"effort scales fitted to the CAD model (the nominal ones cannot explain the "
              f"efforts): {', '.join(fitted)}")
    for row in doc["choices"]["friction"].get("candidates", []):
        print(f"  {'tanh' if row['smooth'] else 'dead band'} v0 {row['velocity_threshold']:<8.3g}"
              f" {_memory_text(row):<28} held-out score {row['score']:.5g}")
    for row in doc["choices"]["prior_weight"].get("candidates", []):
        print(f"  prior weight {row['prior_weight']:<8g} held-out score {row['score']:.5g}")
    gain_std = doc["gain_std"]
    print(f"drive gains: prior std {'-' if gain_std is None else f'{gain_std:g}'} "
          f"({doc['choices']['drive_gains']['source']}; common scale: {doc['gain_anchor']}): "
          + " ".join("-" if g is None else f"{g:.4g}" for g in doc["drive_gain"].values()))
    for row in doc["choices"]["drive_gains"].get("candidates", []):
        print(f"  gain prior std {row['gain_std']:<8g} held-out RMS score {row['score']:.5g}")
    print(f"{'joint':24s} {'RMS id':>10s} {'RMS CAD':>10s}")
    for j in model.joint_names:
        print(f"{j:24s} {doc['torque_rms'][j]:10.4g} {doc['torque_rms_cad'][j]:10.4g}")
    if "all_links_consistent" in doc:
        print(f"all links physically consistent: {doc['all_links_consistent']}")
