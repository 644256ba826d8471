"""The ``inertial-id`` command."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from inertial_id import __version__
from inertial_id.core.regressor import WRENCH_SIGNS
from inertial_id.tools.arguments import add_engine
from inertial_id.tools.export_tool import add_export_parser, run_export
from inertial_id.tools.links_tool import (
    add_excite_parser,
    add_identify_links_parser,
    run_excite,
    run_identify_links,
)
from inertial_id.tools.torque_tool import (
    add_check_links_parser,
    add_identify_payload_parser,
    run_check_links,
    run_identify_payload,
)
from inertial_id.tools.trends import add_trends_parser, run_trends_command
from inertial_id.tools.tune import add_tune_parser, run_tune_command

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
sigma) and a summary; exits 0 when a physically consistent estimate was published.

--apply ur closes the loop to the robot: the simulator also stands in for a Universal Robots
driver (it serves ur_msgs/srv/SetPayload and, once a payload is set, publishes the wrench
compensated for it), the applier sends it the converged payload, the solver keeps estimating
the whole payload from the compensated wrench, then a second payload is mounted, identified
and applied. Needs ur_msgs (the UR driver's workspace, or the test copy: python
test/interface_packages.py --env); exits 0 when both payloads were applied and the last
estimate is within 1 % and 5 mm of the truth, 2 when ur_msgs is missing.

--identify: identification on demand (docs/on_demand.md). The simulated arm stands at a start
pose drawn by --seed under a simulated joint trajectory controller; the identify node plans
an exciting motion from there, checks it, runs it through FollowJointTrajectory, stops once
the estimate has converged and returns to the start. --output OUT.yaml gets replay's output
contract plus motion: (duration, start, max_excursion, velocity_scale, stopped_because);
--record BAG a bag of /joint_states and /wrench. Needs control_msgs (a ROS install, or the
test copy: python test/interface_packages.py --env); exits 0 when the estimate converged, 2
when control_msgs is missing."""


def _floats(count: int):  # noqa: ANN202 - argparse type factory
    def parse(text: str) -> list[float]:
        values = [float(v) for v in text.replace(",", " ").split()]
        if len(values) != count:
            raise argparse.ArgumentTypeError(f"expected {count} numbers, got {len(values)}")
        return values

    return parse


REPLAY_HELP = """\
Replay a bag (.db3 or .mcap, a ROS 2 bag directory) offline through the same core objects as
the gatherer, kinematics and solver nodes, with the nodes' parameter file. No ROS runtime is
needed. Topics are found by type (sensor_msgs/JointState, geometry_msgs/WrenchStamped) unless
named; the URDF comes from --urdf, the parameter file, or the bag's robot_description. Prints
the final estimate and contacts; --output writes them as YAML (the stable contract), --report
writes plots and a summary. Exit status 0, or 3 when the bag or the parameters are unusable."""

SIMULATE_HELP = """\
Write a synthetic bag of the bundled arm (or any URDF with --urdf and --sensor-frame) moving a
known payload: /joint_states, /wrench (payload-on-sensor convention, with noise and bias),
/robot_description, plus ground_truth.yaml in the bag directory. Contacts and a payload
change can be injected."""

PLAY_HELP = """\
Publish a bag's messages on live ROS 2 topics at their recorded pace (scaled by --rate), with
/clock, so the nodes can be tuned live with use_sim_time:=true."""


def _contact(text: str) -> tuple[float, ...]:
    values = _floats(5)(text)
    if values[1] <= 0:
        raise argparse.ArgumentTypeError("the contact duration must be positive")
    return tuple(values)


def _add_replay(sub: argparse._SubParsersAction) -> None:
    replay = sub.add_parser("replay", help="offline replay of a bag, YAML result and report",
                            description=REPLAY_HELP,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    replay.add_argument("bag", type=Path, help="bag directory (or .mcap/.db3 file)")
    replay.add_argument("--params", type=Path, metavar="YAML",
                        help="the nodes' parameter file (e.g. config/inertial_id.yaml)")
    replay.add_argument("--urdf", help="URDF file (overrides the parameter file and the bag)")
    replay.add_argument("--sensor-frame", help="URDF frame of the F/T sensor")
    replay.add_argument("--output-frame", metavar="FRAME",
                        help="URDF frame rigidly attached to the sensor (e.g. tool0) that "
                             "--output gives the estimate in (default: the sensor frame)")
    replay.add_argument("--joint-states-topic", help="sensor_msgs/JointState topic")
    replay.add_argument("--wrench-topic", help="geometry_msgs/WrenchStamped topic")
    replay.add_argument("--wrench-sign", choices=sorted(WRENCH_SIGNS),
                        help="what the wrench message measures (default payload_on_sensor)")
    replay.add_argument("--output", type=Path, metavar="OUT.yaml",
                        help="write the final estimate and contacts here")
    replay.add_argument("--report", type=Path, metavar="DIR",
                        help="write PNG plots and summary.md into this directory")
    replay.add_argument("--no-progress", action="store_true", help="no progress bar")
    replay.add_argument("--max-dropped", type=float, default=0.01, metavar="SHARE",
                        help="fail (exit 3) when more than this share of the messages is "
                             "unusable: bad stamps, values or joints (default 0.01)")


BATCH_HELP = """\
Replay many bags with the same pipeline as `replay` (payload mode), in parallel on a Dask
cluster: a local one of --workers processes by default, or an existing one (--scheduler
tcp://HOST:PORT; its workers must have inertial_id installed and see the bags and the
parameter file at the same paths). Bags are named, or found under directories and glob
patterns. Writes one row per bag and payload segment to TABLE (.parquet or .csv): robot,
stamps, estimate with std and verdicts, set-up errors, contacts, payload changes, the data
ledger, the filter. A bag that fails is a row with its error; bags already in the table are
skipped, so a stopped batch resumes. See docs/fleet.md. Exit status 0, or 3 when a bag failed
or the input is unusable.

--mode joint-torque (arms without a wrist F/T sensor): per bag, its joint states with efforts
cut into --phase windows after the bag's start; on each, the link identification of
identify-links with the settings of the link model --links (identify-links' output: URDF,
joints, friction model, method, prior weight), its friction coefficients with std and the
residual RMS per joint, and the payload of identify-payload --links; one row per bag and
phase (what `inertial-id trends` reads)."""


def _add_batch(sub: argparse._SubParsersAction) -> None:
    batch = sub.add_parser("batch", help="many bags on a Dask cluster, one table",
                           description=BATCH_HELP,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    batch.add_argument("bags", nargs="+", metavar="BAG",
                       help="bag (directory or .mcap/.db3 file), directory of bags, or glob")
    batch.add_argument("--output", type=Path, required=True, metavar="TABLE",
                       help="the table, .parquet or .csv (rows already there are kept)")
    batch.add_argument("--params", type=Path, metavar="YAML",
                       help="the nodes' parameter file (e.g. config/inertial_id.yaml)")
    batch.add_argument("--manifest", type=Path, metavar="MANIFEST.yaml",
                       help="'robots: {BAG or PATTERN: ROBOT}' (default robot: the name of "
                            "the directory holding the bag)")
    add_engine(batch)
    batch.add_argument("--retry-failed", action="store_true",
                       help="replay again the bags whose rows hold an error")
    batch.add_argument("--no-progress", action="store_true", help="no progress bar")
    batch.add_argument("--max-dropped", type=float, default=0.01, metavar="SHARE",
                       help="a bag fails when more than this share of its messages is "
                            "unusable (default 0.01)")
    torque = batch.add_argument_group("joint-torque mode")
    torque.add_argument("--mode", choices=("payload", "joint-torque"), default="payload",
                        help="payload (the wrist F/T replay, default) or joint-torque (links, "
                             "friction and payload from joint efforts, per phase)")
    torque.add_argument("--links", type=Path, metavar="MODEL.yaml",
                        help="joint-torque: the link model (identify-links' output)")
    torque.add_argument("--urdf", help="joint-torque: the URDF (default: the model's)")
    torque.add_argument("--phase", type=float, default=600.0, metavar="S",
                        help="joint-torque: length of a phase after the bag's start, s "
                             "(default 600)")
    torque.add_argument("--method", choices=("wls", "pls", "sdp", "qp"),
                        help="joint-torque: identification method (default: the model's)")
    torque.add_argument("--payload-frame", metavar="FRAME",
                        help="joint-torque: frame of the payload (default: the last link's)")
    torque.add_argument("--joint-states-topic", metavar="TOPIC",
                        help="joint-torque: the JointState topic (default: the only one)")


def _add_simulate(sub: argparse._SubParsersAction) -> None:
    sim = sub.add_parser("simulate", help="write a synthetic bag with a known payload",
                         description=SIMULATE_HELP,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    sim.add_argument("--output", type=Path, required=True, metavar="BAG",
                     help="bag directory to create")
    sim.add_argument("--duration", type=float, default=30.0, help="seconds (default 30)")
    sim.add_argument("--storage", choices=("mcap", "db3"), default="mcap")
    sim.add_argument("--urdf", help="URDF file (default: the bundled arm)")
    sim.add_argument("--sensor-frame", default="ft_sensor", help="F/T frame of the URDF")
    sim.add_argument("--mass", type=float, default=1.5, help="payload mass, kg")
    sim.add_argument("--com", type=_floats(3), default=[0.012, -0.018, 0.065],
                     metavar="'X Y Z'", help="payload CoM, m, sensor frame")
    sim.add_argument("--inertia", type=_floats(6), metavar="'XX XY XZ YY YZ ZZ'",
                     help="payload inertia about its CoM, kg m^2 (default: a 12x8x16 cm box)")
    sim.add_argument("--offset", type=_floats(6), metavar="'FX FY FZ TX TY TZ'",
                     help="F/T bias, N and N m")
    sim.add_argument("--force-noise", type=float, default=0.08, help="N (default 0.08)")
    sim.add_argument("--torque-noise", type=float, default=0.004, help="N m (default 0.004)")
    sim.add_argument("--contact", type=_contact, action="append", default=[],
                     metavar="'START DURATION FX FY FZ'",
                     help="an external force on the payload (repeatable)")
    sim.add_argument("--payload-change", type=_floats(5), metavar="'TIME MASS CX CY CZ'",
                     help="from TIME on the robot holds another payload")
    sim.add_argument("--driver-payload-at", type=float, metavar="TIME",
                     help="from TIME on the driver subtracts the payload's mass and CoM from "
                          "the wrench (as a UR after an apply), announced on "
                          "/applier/compensation")
    sim.add_argument("--wrench-rate", type=float, default=1000.0, help="Hz (default 1000)")
    sim.add_argument("--joint-state-rate", type=float, default=500.0, help="Hz (default 500)")
    sim.add_argument("--seed", type=int, default=0, help="noise seed")
    _add_sensor_conditions(sim)


def _add_sensor_conditions(sim: argparse.ArgumentParser) -> None:
    """``inertial-id simulate``'s sensor and transport conditions (SensorConditions)."""
    group = sim.add_argument_group("sensor as it is")
    group.add_argument("--drift", type=_floats(6), metavar="'FX FY FZ TX TY TZ'",
                       help="bias drift, N/s and N m/s (default none)")
    group.add_argument("--rezero", type=float, action="append", default=[], metavar="TIME",
                       help="a driver's re-zero at TIME s (repeatable)")
    group.add_argument("--lag", type=_floats(2), default=[0.0, 0.0], metavar="'LOW HIGH'",
                       help="wrench stamped on reception: lag uniform in [LOW, HIGH] s")
    group.add_argument("--quantum", type=_floats(2), default=[0.0, 0.0], metavar="'F T'",
                       help="wrench quantisation, N and N m (default none)")
    group.add_argument("--period-jitter", type=float, default=0.0, metavar="SHARE",
                       help="each wrench period scaled by 1 +- SHARE (irregular rate)")
    group.add_argument("--burst", type=int, default=1, metavar="N",
                       help="wrenches arrive in bursts of N (default 1)")
    group.add_argument("--burst-loss", type=float, default=0.0, metavar="SHARE",
                       help="share of the bursts lost (default 0)")
    group.add_argument("--joint-jitter", type=float, default=0.0, metavar="SECONDS",
                       help="joint state stamps jitter, uniform +- (default 0)")
    group.add_argument("--joint-loss", type=float, default=0.0, metavar="SHARE",
                       help="share of the joint states lost (default 0)")


def _add_play(sub: argparse._SubParsersAction) -> None:
    play = sub.add_parser("play", help="publish a bag on live topics with /clock",
                          description=PLAY_HELP,
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    play.add_argument("bag", type=Path, help="bag directory (or .mcap/.db3 file)")
    play.add_argument("--rate", type=float, default=1.0, help="speed factor (default 1)")
    play.add_argument("--loop", action="store_true", help="start again at the end")
    play.add_argument("--wait", type=float, default=10.0, metavar="SECONDS",
                      help="wait at most this long for a subscriber on every topic before the "
                           "first message, so none is lost to discovery (default 10; 0: none)")


class SubcommandParser(argparse.ArgumentParser):
    """A subcommand's parser that refuses an argument it does not know itself, with its own
    usage (argparse leaves them to ``inertial-id``, which would show the top-level usage)."""

    def parse_known_args(self, args: Sequence[str] | None = None,
                         namespace: argparse.Namespace | None = None,
                         ) -> tuple[argparse.Namespace, list[str]]:
        """:meth:`argparse.ArgumentParser.parse_known_args`; exits with this subcommand's
        usage when an argument is left over."""
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``inertial-id`` and its subcommands."""
    parser = argparse.ArgumentParser(
        prog="inertial-id", description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                parser_class=SubcommandParser)
    demo = sub.add_parser("demo", help="simulated arm + the three nodes, estimate vs truth",
                          description=DEMO_HELP,
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    demo.add_argument("--duration", type=float,
                      help="seconds to run (default: 20; with --apply at most 90, it ends "
                      "when the loop is done)")
    demo.add_argument("--apply", choices=["ur"], default="",
                      help="close the loop: apply to a simulated, compensating UR driver")
    demo.add_argument("--mass", type=float, help="payload mass, kg (default 1.5)")
    demo.add_argument("--com", type=_floats(3), metavar="'X Y Z'",
                      help="payload centre of mass in the sensor frame, m")
    demo.add_argument("--inertia", type=_floats(6), metavar="'XX XY XZ YY YZ ZZ'",
                      help="payload inertia about its CoM, sensor axes, kg m^2")
    demo.add_argument("--wrench-rate", type=float, default=1000.0,
                      help="simulated F/T rate, Hz (default: %(default)s)")
    demo.add_argument("--joint-state-rate", type=float, default=500.0,
                      help="simulated joint state rate, Hz (default: %(default)s)")
    demo.add_argument("--seed", type=int, default=0, help="noise seed (default: %(default)s)")
    demo.add_argument("--identify", action="store_true",
                      help="identification on demand from a start pose drawn by --seed")
    demo.add_argument("--output", type=Path, metavar="OUT.yaml",
                      help="--identify: write the result (replay's contract plus motion:)")
    demo.add_argument("--record", type=Path, metavar="BAG",
                      help="--identify: record /joint_states and /wrench in this bag")
    _add_replay(sub)
    _add_batch(sub)
    add_tune_parser(sub)
    add_trends_parser(sub)
    _add_simulate(sub)
    _add_play(sub)
    add_identify_links_parser(sub)
    add_check_links_parser(sub)
    add_identify_payload_parser(sub)
    add_excite_parser(sub)
    add_export_parser(sub)
    return parser


def _demo(args: argparse.Namespace) -> int:
    from inertial_id.nodes.demo import DemoOptions, run_demo

    duration = args.duration if args.duration is not None else (90.0 if args.apply else 20.0)
    options = DemoOptions(
        duration=duration, apply=args.apply, mass=args.mass, com=args.com, inertia=args.inertia,
        wrench_rate=args.wrench_rate, joint_state_rate=args.joint_state_rate, seed=args.seed,
    )
    if args.identify:
        from inertial_id.nodes.demo_identify import IdentifyDemoOptions, run_identify_demo

        return run_identify_demo(IdentifyDemoOptions(options, args.output, args.record))
    return run_demo(options)


def _replay(args: argparse.Namespace) -> int:
    from inertial_id.nodes import stopping
    from inertial_id.tools.arguments import check_writable
    from inertial_id.tools.replay import (
        ReplayOptions,
        StoppedError,
        replay,
        summary_lines,
        write_yaml,
    )

    if args.output:
        check_writable(args.output)
    if args.report:
        check_writable(args.report, directory=True)
    # Ctrl-C (or SIGTERM) ends the replay where it is: the estimate so far is written,
    # marked partial, and the exit status is 130; a second Ctrl-C stops at once.
    stopping.install()
    try:
        result = replay(ReplayOptions(
            bag=args.bag, params=args.params, urdf=args.urdf, sensor_frame=args.sensor_frame,
            output_frame=args.output_frame,
            joint_states_topic=args.joint_states_topic, wrench_topic=args.wrench_topic,
            wrench_sign=args.wrench_sign, progress=not args.no_progress,
            max_dropped=args.max_dropped, stop=stopping.requested,
        ))
    except StoppedError as exc:
        print(f"inertial-id replay: {exc}", file=sys.stderr)
        return 130
    print("\n".join(summary_lines(result)))
    if args.output:
        write_yaml(result, args.output)
        print(f"wrote {args.output}")
    if args.report:
        from inertial_id.tools.report import write_report

        truth = _ground_truth(args.bag)
        args.report.mkdir(parents=True, exist_ok=True)
        for path in write_report(result, args.report, truth, bag=args.bag):
            print(f"wrote {path}")
    for error in result.setup_errors:
        print(f"inertial-id replay: set-up error: {error}", file=sys.stderr)
    if result.partial:
        print("inertial-id replay: stopped: the output is partial", file=sys.stderr)
        return 130
    return 0 if result.estimate is not None and not result.setup_errors else 3


def _batch(args: argparse.Namespace) -> int:
    # Dask and pyarrow load here, when a batch runs: nothing else needs them.
    from inertial_id.core.errors import InertialIdError
    from inertial_id.tools.arguments import check_writable
    from inertial_id.tools.batch import BatchOptions, run_batch, summary_line

    check_writable(args.output)
    torque = None
    if (args.mode == "joint-torque") != (args.links is not None):
        raise InertialIdError("--mode joint-torque needs --links MODEL.yaml, and --links is "
                              "for --mode joint-torque")
    if args.links is not None:
        from inertial_id.tools.batch_torque import TorqueSettings

        torque = TorqueSettings(str(args.links.resolve()), args.urdf, args.phase, args.method,
                                args.payload_frame, args.joint_states_topic)
    summary = run_batch(BatchOptions(
        inputs=tuple(args.bags), output=args.output, params=args.params,
        manifest=args.manifest, workers=args.workers, scheduler=args.scheduler,
        max_dropped=args.max_dropped, retry_failed=args.retry_failed,
        progress=not args.no_progress, torque=torque,
    ))
    print(summary_line(summary))
    print(f"wrote {args.output}")
    return 3 if summary.failed else 0


def _ground_truth(bag: Path) -> dict | None:
    """The ground truth a synthetic bag carries, if any."""
    import yaml

    path = (bag if bag.is_dir() else bag.parent) / "ground_truth.yaml"
    return yaml.safe_load(path.read_text()) if path.is_file() else None


def _simulate(args: argparse.Namespace) -> int:
    from inertial_id.core.parameters import BodyParameters
    from inertial_id.core.sensor_conditions import SensorConditions
    from inertial_id.core.simulation import DEFAULT_OFFSET, Contact, default_payload
    from inertial_id.tools.synthetic import SimulateOptions, simulate_bag

    inertia = args.inertia or default_payload().inertia_com * args.mass / default_payload().mass
    change = None
    if args.payload_change:
        time_, mass, *com = args.payload_change
        change = (time_, BodyParameters.from_mass_com_inertia(
            mass, com, default_payload().inertia_com * mass / default_payload().mass))
    path = simulate_bag(args.output, SimulateOptions(
        duration=args.duration, wrench_rate=args.wrench_rate,
        joint_state_rate=args.joint_state_rate, urdf=args.urdf, sensor_frame=args.sensor_frame,
        payload=BodyParameters.from_mass_com_inertia(args.mass, args.com, inertia),
        offset=tuple(args.offset or DEFAULT_OFFSET), force_noise_std=args.force_noise,
        torque_noise_std=args.torque_noise,
        contacts=tuple(Contact(c[0], c[1], tuple(c[2:5])) for c in args.contact),
        payload_change=change, driver_payload_at=args.driver_payload_at, seed=args.seed,
        storage=args.storage,
        conditions=SensorConditions(
            drift=tuple(args.drift or (0.0,) * 6), rezero=tuple(args.rezero),
            period_jitter=args.period_jitter, lag=tuple(args.lag), quantum=tuple(args.quantum),
            burst=args.burst, burst_loss=args.burst_loss, joint_jitter=args.joint_jitter,
            joint_loss=args.joint_loss),
    ))
    print(f"wrote {path} ({args.duration:g} s, ground truth in {path / 'ground_truth.yaml'})")
    return 0


def _play(args: argparse.Namespace) -> int:
    from inertial_id.nodes.player import play_bag

    return play_bag(args.bag, rate=args.rate, loop=args.loop, wait=args.wait)


COMMANDS = {"demo": _demo, "replay": _replay, "batch": _batch, "simulate": _simulate,
            "play": _play, "identify-links": run_identify_links, "excite": run_excite,
            "check-links": run_check_links, "identify-payload": run_identify_payload,
            "export": run_export, "tune": run_tune_command, "trends": run_trends_command}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``inertial-id``; exit status 3 on unusable input, with a message."""
    parser = build_parser()
    args = parser.parse_args(argv)
    from inertial_id.core.errors import InertialIdError

    try:
        return COMMANDS[args.command](args)
    except InertialIdError as exc:
        print(f"inertial-id {args.command}: error: {exc}", file=sys.stderr)
        return 3
    except OSError as exc:  # a file the command writes or reads outside the checked paths
        print(f"inertial-id {args.command}: error: {exc}", file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # noqa: BLE001 - one line, not a traceback, for any input
        if os.environ.get("INERTIAL_ID_DEBUG"):
            raise
        print(f"inertial-id {args.command}: internal error, please report it with the input "
              f"(INERTIAL_ID_DEBUG=1 shows the traceback): {type(exc).__name__}: {exc}",
              file=sys.stderr)
        return 4


if __name__ == "__main__":
    sys.exit(main())
