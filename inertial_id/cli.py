"""The ``inertial-id`` command."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

DESCRIPTION = """\
Identify the inertial parameters (mass, centre of mass, inertia) of a payload carried
behind a wrist force/torque sensor, keeping them physically consistent.

The ROS 2 nodes (gatherer, kinematics, solver, simulator) run with `ros2 run inertial_id
<node>` or `ros2 launch inertial_id inertial_id.launch.xml`; this command bundles the tools
around them."""

DEMO_HELP = """\
Run the embedded demo: a simulated 6-DoF arm (bundled URDF) moves a known payload along an
exciting trajectory and publishes joint states and a noisy, biased F/T wrench; the gatherer,
kinematics and solver nodes run in the same process and estimate the payload online. Prints
the estimate against the truth as it converges (mass %, CoM mm, inertia %, consistency,
sigma) and a summary; exits 0 when a physically consistent estimate was published."""


def _floats(count: int):  # noqa: ANN202 - argparse type factory
    def parse(text: str) -> list[float]:
        values = [float(v) for v in text.replace(",", " ").split()]
        if len(values) != count:
            raise argparse.ArgumentTypeError(f"expected {count} numbers, got {len(values)}")
        return values

    return parse


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``inertial-id`` and its subcommands."""
    parser = argparse.ArgumentParser(
        prog="inertial-id", description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    demo = sub.add_parser("demo", help="simulated arm + the three nodes, estimate vs truth",
                          description=DEMO_HELP,
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    demo.add_argument("--duration", type=float, default=20.0,
                      help="seconds to run (default: %(default)s)")
    demo.add_argument("--mass", type=float, help="payload mass, kg (default 1.5)")
    demo.add_argument("--com", type=_floats(3), metavar="'X Y Z'",
                      help="payload centre of mass in the sensor frame, m")
    demo.add_argument("--inertia", type=_floats(6), metavar="'XX XY XZ YY YZ ZZ'",
                      help="payload inertia about its CoM, sensor axes, kg m^2")
    demo.add_argument("--wrench-rate", type=float, default=500.0,
                      help="simulated F/T rate, Hz (default: %(default)s)")
    demo.add_argument("--joint-state-rate", type=float, default=250.0,
                      help="simulated joint state rate, Hz (default: %(default)s)")
    demo.add_argument("--seed", type=int, default=0, help="noise seed (default: %(default)s)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``inertial-id``."""
    args = build_parser().parse_args(argv)
    if args.command == "demo":
        from inertial_id.nodes.demo import DemoOptions, run_demo

        return run_demo(DemoOptions(
            duration=args.duration, mass=args.mass, com=args.com, inertia=args.inertia,
            wrench_rate=args.wrench_rate, joint_state_rate=args.joint_state_rate,
            seed=args.seed,
        ))
    raise AssertionError(f"unhandled command {args.command}")


if __name__ == "__main__":
    sys.exit(main())
