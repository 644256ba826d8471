"""``inertial-id export``: a saved estimate as what a robot driver or controller takes.

The targets and their fields are in :mod:`inertial_id.core.handoff`; the frame change is
:func:`inertial_id.core.frames.express_in_frame`. This module reads the file, picks the frame,
and prints (or writes) the request or the parameter YAML.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from inertial_id.core.errors import InertialIdError
from inertial_id.core.estimate import Estimate
from inertial_id.core.frames import express_in_frame, frame_placement
from inertial_id.core.handoff import FLANGE_FRAME, TARGETS, Options, Target
from inertial_id.core.kinematics import load_urdf_model
from inertial_id.io.calibration import load

EXPORT_HELP = f"""\
Print what a robot driver or controller takes for the identified payload, in its frame and
units, from a replay output (`inertial-id replay --output`) or a saved calibration (~/save):
exactly the service request fields, or the controller's parameter YAML in --params-file form,
with a comment naming the interface, each unit and the frame. Nothing is sent.

Targets:
{chr(10).join(f"  {t.name:21s}{t.interface}" for t in TARGETS.values())}

Frames: ur, ur7, franka and xarm take the CoG from the tool flange (--frame, default
{FLANGE_FRAME}; e.g. fr3_link8 on a Franka, link_eef on an xArm) and the inertia about the CoG in
the flange's axes. The other targets take the frame the estimate was saved in (the F/T sensor's,
unless the solver's output_frame was set) unless --frame names another. Another frame needs the
URDF (--urdf) holding both frames, rigidly attached: the CoM, the inertia about it and the
offset are re-expressed exactly. Exit status 0, or 3 when the file, the URDF or a frame is
unusable.

A UR with a payload set compensates its published wrench for it: identifying on afterwards sees
only what is left (about 0 kg when the payload was right)."""


def add_export_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add ``export`` to the ``inertial-id`` subcommands."""
    p = subparsers.add_parser("export", help="the payload as a driver's request or a "
                              "controller's parameters", description=EXPORT_HELP,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("calibration", type=Path, metavar="CALIBRATION.yaml",
                   help="replay output or saved calibration")
    p.add_argument("--to", required=True, choices=list(TARGETS), help="the target")
    p.add_argument("--urdf", help="URDF file holding the estimate's frame and --frame")
    p.add_argument("--frame", help=f"frame to express the payload in (default {FLANGE_FRAME} "
                   "for the flange targets, else the estimate's frame)")
    p.add_argument("--node", default="/**", help="node name of the parameter YAML, written "
                   "fully qualified (ft_filter: /ft_filter; default /**: any node)")
    p.add_argument("--prefix", default="", metavar="NAMESPACE",
                   help="dotted parameter namespace in the node (e.g. a filter chain's "
                   "'sensor_filter_chain.filter1.params')")
    p.add_argument("--transition-time", type=float, default=0.0, metavar="SECONDS",
                   help="UR's transition time to the new payload (default 0)")
    p.add_argument("--output", type=Path, metavar="FILE", help="write here instead of stdout")
    return p


def expressed_in(estimate: Estimate, frame: str, target_frame: str,
                 urdf: str | None) -> Estimate:
    """``estimate`` (saved in ``frame``) in ``target_frame``, through ``urdf`` if they differ."""
    if target_frame == frame:
        return estimate
    if not frame:
        raise InertialIdError("the file does not name the frame of its estimate")
    if urdf is None:
        raise InertialIdError(f"the estimate is in {frame!r} and the target takes "
                              f"{target_frame!r}: give --urdf (the robot's URDF)")
    return express_in_frame(estimate,
                            frame_placement(load_urdf_model(urdf), frame, target_frame))


def _nested(prefix: str, fields: dict[str, Any]) -> dict[str, Any]:
    for part in reversed([p for p in prefix.split(".") if p]):
        fields = {part: fields}
    return fields


def export_text(estimate: Estimate, frame: str, target: Target, options: Options,
                node: str = "/**", prefix: str = "") -> str:
    """The commented YAML of ``target`` for ``estimate``, already expressed in
    ``options.frame`` (saved in ``frame``)."""
    fields = target.fields(estimate, options)
    # The node's fully qualified name, as `ros2 param dump` writes it: Jazzy's rclpy does not
    # match a file's "ft_filter" to the node /ft_filter (Kilted's does).
    key = node if node.startswith("/") else f"/{node}"
    document = ({key: {"ros__parameters": _nested(prefix, fields)}} if target.parameters
                else fields)
    body = estimate.body
    header = [
        f"# {target.interface}",
        f"# units: {target.units.format(frame=options.frame)}",
        f"# estimate: {body.mass:.6g} kg (std {estimate.std[0]:.2g}), CoM ["
        + ", ".join(f"{c:.6g}" for c in body.com) + "] m (std ["
        + ", ".join(f"{s:.2g}" for s in estimate.com_std) + f"]) in {options.frame}"
        + (f", from {frame}" if frame != options.frame else ""),
    ]
    if not np.all(np.isfinite(estimate.com_std)):
        header.append("# WARNING: part of the CoM was not determined by the data")
    return "\n".join(header) + "\n" + yaml.safe_dump(document, sort_keys=False)


def run_export(args: argparse.Namespace) -> int:
    """Run ``export``; 0 on success (errors raise :class:`InertialIdError`: exit 3)."""
    estimate, frame = load(args.calibration)
    target = TARGETS[args.to]
    target_frame = args.frame or (FLANGE_FRAME if target.flange else frame)
    options = Options(frame=target_frame, transition_time=args.transition_time)
    text = export_text(expressed_in(estimate, frame, target_frame, args.urdf), frame, target,
                       options, node=args.node, prefix=args.prefix)
    if args.output is None:
        sys.stdout.write(text)
        return 0
    try:
        args.output.write_text(text)
    except OSError as exc:
        raise InertialIdError(f"cannot write {args.output}: {exc.strerror or exc}") from exc
    print(f"wrote {args.output}", file=sys.stderr)
    return 0
