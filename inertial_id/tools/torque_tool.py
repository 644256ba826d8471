"""``inertial-id check-links`` and ``inertial-id identify-payload``: a link model checked on a
recording it never saw, and the payload from joint torques (arms without a wrist F/T sensor).
The maths is in :mod:`inertial_id.core.joint_torque.torque_payload`,
:mod:`inertial_id.core.joint_torque.links` and
:mod:`inertial_id.core.estimation.anomaly`; this module reads bags, runs them and writes results."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from numpy.typing import NDArray

from inertial_id.core.errors import ModelError, SampleError
from inertial_id.core.joint_torque.link_pair_gains import refit_pair_gains
from inertial_id.core.joint_torque.torque_payload import (
    LinkTorqueModel,
    TorquePayloadIdentifier,
    identify_paired_payload,
    paired_difference,
)
from inertial_id.core.joint_torque.warmup import warm_contact_intervals
from inertial_id.io.calibration import estimate_document
from inertial_id.io.joint_records import joint_data, read_joint_bag
from inertial_id.tools.arguments import add_bag, former_flag, name_value_pair, required_bag

CHECK_HELP = """\
Check a link model (the YAML `inertial-id identify-links --output` writes) on a recording it
was not identified on: per joint the RMS of measured minus predicted effort and the relative
error 100 |e - e_hat| / |e| (%), and the contacts found in the residual (Hotelling T^2 per
sample, the contact-free covariance learned robustly from the whole recording, so a recording
that starts with a push is fine; a contact is 0.1 s above the threshold; a cold drive's
warm-up friction, up to 30 % of the friction fading after the start, is recognised and taken
out first, JSON key warm_up). --compare-urdf adds
the same for the URDF's own inertials (rigid body only: a URDF has no friction). Positions
are smoothed and differentiated with a Savitzky-Golay filter as in identify-links. The
model's friction is the one it names (a direction memory, if chosen, runs over this
recording in time order at its own sample period)."""

PAYLOAD_HELP = """\
Identify a payload from joint torques, for arms without a wrist F/T sensor: its 10 inertial
parameters about the origin of --payload-frame (a URDF frame on the last link: the flange or a
tool frame; by default the last link's frame, so they are the change of its parameters),
physically consistent (pseudo-inertia LMI), with a std from the block-robust covariance. The
arm's own torques come from a link model (--links, from identify-links, with its friction
and offsets) or from the URDF's inertials (--urdf alone: no friction, so give an --unloaded
recording). With --unloaded BAG (the same arm without the payload, the same trajectory) the
two recordings are aligned in time (cross-correlation of the joint velocities, within
--max-shift s of their starts) and subtracted sample by sample, so the arm's own torques and
the link model's error of them cancel; each recording keeps its own friction and offsets (their
change is fitted alongside the payload). The payload loads every joint, so the pair also
tells the drive gains' ratios: --pair-gains auto (default) fits them with the payload when
that predicts held-out time blocks of the pair better, their geometric mean held at the link
model's (a model's known gains are held instead); the common scale, which sets the mass, is
never in the efforts. --pair-method refit instead re-fits friction and
offsets on the unloaded recording and keeps the rigid bodies (the arm model's error then stays
in the payload). Writes the replay's YAML layout (estimate:
mass, com, inertia_com, pi, std, com_std, inertia_com_std, ...)."""


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--joint-states-topic", metavar="TOPIC",
                   help="the JointState topic (default: the bag's only one)")
    p.add_argument("--window", type=int, default=None,
                   help="Savitzky-Golay window, samples, odd (default: the odd count nearest "
                        "to 0.24 s at the recording's rate, 31 at 125 Hz, 241 at 1 kHz)")
    p.add_argument("--order", type=int, default=3, help="Savitzky-Golay order (default 3)")


def add_check_links_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add ``check-links`` to the ``inertial-id`` subcommands."""
    p = subparsers.add_parser(
        "check-links", help="per-joint torque error of a link model on a new recording",
        description=CHECK_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", type=Path, metavar="MODEL.yaml", help="identify-links' output")
    add_bag(p, "JointState with efforts")
    p.add_argument("--urdf", help="the URDF (default: the one the model names)")
    p.add_argument("--compare-urdf", action="store_true",
                   help="also score the URDF's own inertials")
    former_flag(p, "--json", p.add_argument("--output", type=Path, metavar="OUT.json",
                                            help="write the results here"))
    p.add_argument("--confidence", type=float, default=0.9999,
                   help="T^2 confidence of the contact test (default 0.9999)")
    _common(p)
    return p


def add_identify_payload_parser(subparsers: argparse._SubParsersAction
                                ) -> argparse.ArgumentParser:
    """Add ``identify-payload`` to the ``inertial-id`` subcommands."""
    p = subparsers.add_parser(
        "identify-payload", help="the payload from joint torques (no F/T sensor)",
        description=PAYLOAD_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_bag(p, "the arm with the payload")
    p.add_argument("--unloaded", type=Path, metavar="BAG",
                   help="the same arm and trajectory without the payload (see --pair-method)")
    p.add_argument("--pair-method", choices=("difference", "refit"), default="difference",
                   help="with --unloaded: fit the payload to the aligned sample-by-sample "
                   "difference (default), or re-fit friction and offsets on the unloaded "
                   "recording and fit the loaded one")
    p.add_argument("--pair-gains", choices=("auto", "fit", "model"), default="auto",
                   help="with --unloaded (difference): the drive gains' ratios fitted with the "
                   "payload (the payload loads every joint), their geometric mean held at the "
                   "link model's unless the model has known gains; auto (default) keeps the "
                   "model's gains or fits them, whichever predicts held-out time blocks of "
                   "the pair better")
    p.add_argument("--max-shift", type=float, default=10.0, metavar="S",
                   help="with --unloaded: largest time shift between the two recordings' "
                   "starts the alignment searches, s (default 10)")
    p.add_argument("--links", type=Path, metavar="MODEL.yaml",
                   help="link model from identify-links (default: the URDF's inertials)")
    p.add_argument("--urdf", help="the URDF (required without --links)")
    p.add_argument("--locked", type=name_value_pair, nargs="*", default=[],
                   metavar="NAME=VALUE",
                   help="with --urdf alone: hold these joints at these positions (rad, m) and "
                   "leave them out, e.g. a gripper's fingers (a --links model has its own)")
    p.add_argument("--drive-gain", type=name_value_pair, nargs="*", default=[], metavar="NAME=K",
                   help="with --urdf alone: efforts of these joints are in drive units "
                   "(e.g. A), K N m per unit (a --links model carries its own gains)")
    former_flag(p, "--frame", p.add_argument(
        "--payload-frame", dest="frame", metavar="FRAME",
        help="a URDF frame on the last link (flange, tool) the payload is given in, as the "
        "solver's payload_frame; default: the last link's own frame"))
    p.add_argument("--output", type=Path, metavar="OUT.yaml", help="write the estimate here")
    _common(p)
    return p


def load_link_model(args: argparse.Namespace) -> LinkTorqueModel:
    """The link model of ``--links`` (with ``--urdf`` overriding its path) or the URDF's."""
    path = getattr(args, "links", None) or getattr(args, "model", None)
    if path is not None and (getattr(args, "drive_gain", None) or getattr(args, "locked", None)):
        raise ModelError("--drive-gain and --locked are for --urdf alone: a --links model has "
                         "its own gains and locked joints")
    if path is None:
        if not args.urdf:
            raise ModelError("give --links MODEL.yaml or --urdf URDF")
        return LinkTorqueModel.from_urdf(args.urdf, locked=dict(getattr(args, "locked", [])),
                                         drive_gains=dict(getattr(args, "drive_gain", [])))
    return LinkTorqueModel.from_file(path, args.urdf)


def read_rows(links: LinkTorqueModel, bag: Path, args: argparse.Namespace
              ) -> tuple[NDArray[np.float64], ...]:
    """The bag's joint states in the model's joint order, smoothed and differentiated:
    ``(t, q, qd, qdd, effort)`` of the rows with full filter windows, ``t`` in s since the
    bag's first joint state (the first rows, within half a window of it, are left out)."""
    position, effort = read_joint_bag(bag, args.joint_states_topic)
    missing = [n for n in links.model.joint_names if n not in position.names]
    if missing:
        raise SampleError(f"{bag}: no joint states for {', '.join(missing)}")
    data = joint_data(links.model, position, effort, None, args.window, args.order)
    v = data.valid
    return data.t[v] - data.t[0], data.q[v], data.qd[v], data.qdd[v], data.effort[v]


def _scores(effort: NDArray[np.float64], predicted: NDArray[np.float64]
            ) -> tuple[list[float], list[float | None]]:
    """Per joint the RMS of the residual and ``100 |e - e_hat| / |e|`` (None for a joint
    whose efforts are all zero: JSON has no NaN)."""
    residual = effort - predicted
    rms = np.sqrt(np.mean(residual ** 2, axis=0))
    norm = np.linalg.norm(effort, axis=0)
    relative = [float(100.0 * r / n) if n > 0 else None
                for r, n in zip(np.linalg.norm(residual, axis=0), norm, strict=True)]
    return rms.tolist(), relative


def run_check_links(args: argparse.Namespace) -> int:
    """Run ``check-links``; 0 on success."""
    bag = required_bag(args)
    links = load_link_model(args)
    t, q, qd, qdd, effort = read_rows(links, bag, args)
    links = links.at_sample_period(float(np.median(np.diff(t))))
    predicted = links.efforts(q, qd, qdd)
    rms, relative = _scores(effort, predicted)
    contacts, warm = warm_contact_intervals(t, effort - predicted,
                                            links.dissipative_efforts(qd, qdd), args.confidence)
    doc: dict[str, Any] = {"joints": links.model.joint_names, "rms": rms,
                           "relative_error_percent": relative, "contacts": contacts,
                           "warm_up": {"share": warm.share.tolist(),
                                       "level": warm.level.tolist(),
                                       "time_constant_s": warm.time_constant},
                           "samples": int(t.size)}
    if args.compare_urdf:
        urdf = LinkTorqueModel.from_urdf(links.model.urdf, links.model.joint_names,
                                         links.model.locked)
        doc["urdf_rms"], doc["urdf_relative_error_percent"] = _scores(
            effort, urdf.efforts(q, qd, qdd))
    print(f"{'joint':<22}{'rms':>10}{'error %':>10}" + ("  urdf rms" if args.compare_urdf
                                                       else ""))
    for j, name in enumerate(doc["joints"]):
        extra = f"{doc['urdf_rms'][j]:>10.4g}" if args.compare_urdf else ""
        error = "-" if relative[j] is None else f"{relative[j]:.2f}"
        print(f"{name:<22}{rms[j]:>10.4g}{error:>10}{extra}")
    print(f"contacts: {doc['contacts'] or 'none'}")
    if args.output:
        args.output.write_text(json.dumps(doc, indent=2) + "\n")
        print(f"wrote {args.output}")
    return 0


def _own_clock(rows: tuple[NDArray[np.float64], ...]) -> tuple[NDArray[np.float64], ...]:
    """``(t, q, qd, qdd, effort)`` with ``t`` counted from the recording's first row (s)."""
    return (rows[0] - rows[0][0], *rows[1:])


def _known_gains(args: argparse.Namespace, links: LinkTorqueModel) -> NDArray[np.bool_]:
    """Per joint whether its drive gain is known: a --links model's ``known_gains``, else
    --drive-gain with --urdf."""
    path = getattr(args, "links", None)
    names = (yaml.safe_load(Path(path).read_text()).get("known_gains", []) if path
             else [name for name, _ in getattr(args, "drive_gain", [])])
    return np.array([n in names for n in links.model.joint_names])


def _print_pair_gains(gains: dict) -> None:
    """The pair's gain choice and its held-out scores."""
    for row in gains["candidates"]:
        print(f"  drive gains {row['gains']:<7} held-out RMS score {row['score']:.5g}")
    print("drive gains from the pair (" + gains["mode"] + "): effort scales "
          + " ".join(f"{s:.4g}" for s in gains["effort_scale"].values()))


def run_identify_payload(args: argparse.Namespace) -> int:
    """Run ``identify-payload``; 0 on success."""
    bag = required_bag(args)
    links = load_link_model(args)
    loaded = _own_clock(read_rows(links, bag, args))
    links = links.at_sample_period(float(np.median(np.diff(loaded[0]))))
    pair: dict[str, Any] = {}
    if args.unloaded is not None:
        unloaded = _own_clock(read_rows(links, args.unloaded, args))
        if args.pair_method == "refit":
            links = links.refit_drive_terms(*unloaded[1:])
        pair["method"] = args.pair_method
    identifier = TorquePayloadIdentifier(links, args.frame)
    if pair.get("method") == "difference":
        difference = paired_difference(links, loaded, unloaded, args.max_shift)
        factors, table = refit_pair_gains(identifier, difference, args.pair_gains,
                                          _known_gains(args, links))
        if not np.allclose(factors, 1.0):
            links = replace(links, effort_scale=links.effort_scale * factors)
            identifier.links = links
            difference = paired_difference(links, loaded, unloaded, args.max_shift)
        pair["gains"] = {"mode": args.pair_gains,
                         "effort_scale": dict(zip(links.model.joint_names,
                                                  links.effort_scale.tolist(), strict=True)),
                         "factors": factors.tolist(), "candidates": table}
        _print_pair_gains(pair["gains"])
        estimate = identify_paired_payload(identifier, difference)
        samples = difference.t.size
        pair["shift_s"] = difference.shift
        print(f"unloaded recording aligned {difference.shift * 1e3:+.1f} ms after the loaded "
              f"one's start; {samples} paired samples")
    else:
        identifier.add(*loaded[1:])
        estimate = identifier.solve()
        samples = loaded[0].size
    frame = identifier.kinematics.sensor_frame
    doc = {"estimate": estimate_document(estimate, frame),
           "samples_used": int(samples),
           "source": "joint_torques",
           **({"unloaded": pair} if pair else {}),
           "joints": links.model.joint_names,
           "joint_sigma": dict(zip(links.model.joint_names,
                                   [float(s) for s in identifier.links.joint_sigma],
                                   strict=True))}
    e = doc["estimate"]
    print(f"payload at {frame}: mass {e['mass']:.4g} +- {e['std'][0]:.2g} kg, CoM "
          f"[{', '.join(f'{c:.4g}' for c in e['com'])}] +- "
          f"[{', '.join(f'{c:.2g}' for c in e['com_std'])}] m, "
          f"consistent {e['physically_consistent']}")
    if args.output:
        args.output.write_text(yaml.safe_dump(doc, sort_keys=False))
        print(f"wrote {args.output}")
    return 0
