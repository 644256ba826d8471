"""``inertial-id excite``: an exciting joint trajectory for payload identification (condition
number of the payload regressor at the F/T sensor frame) or for link identification (Bonnet's
criterion), written as CSV (t in s, then positions, velocities, accelerations per joint) and
YAML. The maths is in :mod:`inertial_id.core.joint_torque.excitation`."""

from __future__ import annotations

import argparse
from pathlib import Path

from inertial_id.core.joint_torque.link_model import LinkModel
from inertial_id.tools.arguments import former_flag, name_value_pair

EXCITE_HELP = """\
Optimise an exciting joint trajectory (finite Fourier series over one period, starting at rest)
within the URDF's position and velocity limits, with RNEA-checked effort limits. Default
criterion: the condition number of the stacked payload regressor at --sensor-frame (F/T
payload identification); with --links, Bonnet's mass-weighted sum of per-link sub-regressor
condition numbers (link identification). Reports the criterion against a random trajectory of
the same period and harmonics, and writes a CSV (t, then position/velocity/acceleration of each
joint) and a YAML (joints, home, amplitudes, phases, period) that the simulator and a robot
driver can play."""


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
    from inertial_id.core.joint_torque.excitation import (
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
