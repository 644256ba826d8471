"""Stop the nodes at random moments, with SIGINT or SIGTERM, and count the unclean stops.

Each round starts the simulator and the three pipeline nodes as four processes (as
``ros2 launch`` would) and stops every one of them at its own random moment in one of four
scenarios: during start-up (0-1.5 s after the start), mid-stream (2-6 s), after the stream
ended (the simulator stopped first, the others 0-3 s later) and, for the solver, in ``links``
mode. The solver solves at 20 Hz from 200 samples on, so many stops land in a solve. A stop
is clean when the process exits with status 0 within 15 s and prints no traceback, abort or
``[FATAL]``. A signal due before the process installed its handler (its first tens of ms:
interpreter start-up and the ROS wheels' re-exec, where no code of the package runs yet) is
held back until it has, and counted as ``deferred``.

``--pipelines 2 --load 2 --signal SIGINT`` is the stop of two namespaced pipelines on a loaded
machine: each round starts the four nodes twice, in ``/p0`` and ``/p1`` (``-r __ns:=``), beside
two busy processes (a Python loop each, as many as this machine has cores), and stops each node
with SIGINT; ``--settle 15`` puts the stops after start-up 15 s later, once the nodes have
imported their modules under that load. Every stop's time from the signal to the process's
exit is recorded (median, p99, largest); a stop over :data:`GONE_WITHIN` s fails the run
(``ros2 launch`` escalates to SIGTERM then), and the output of those over :data:`SLOW` s is
kept in the JSON (a node still stopping 3 s after the request prints its threads' stacks).

``--ctrl-c`` runs only the fifth scenario, Ctrl-C on ``ros2 launch``: at a random moment (half
the rounds during start-up, 0.2-1.5 s, half mid-stream, 2-6 s), SIGINT to every node at once
(the terminal's, to the process group), then to each node again within 10 ms (launch's own).

    python bench/stop_soak.py --rounds 50          # the numbers in docs/robot.md
    python bench/stop_soak.py --rounds 50 --ctrl-c
    python bench/stop_soak.py --rounds 12 --pipelines 2 --load 2 --signal SIGINT --settle 15
    python bench/stop_soak.py --rounds 4 --json out.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

BIN = Path(sys.executable).parent
SCENARIOS = ("startup", "streaming", "after_stream", "links")
CTRL_C = "ctrl_c"
LAUNCH_SIGNAL_WITHIN = 0.010
"""s after the process group's SIGINT within which launch's own reaches each node."""
NODES = ("simulator", "gatherer", "kinematics", "solver")
BAD_OUTPUT = ("Traceback", "terminate called", "Aborted", "[FATAL]", "error_already_set",
              "Segmentation fault")
STOP_TIMEOUT = 15.0
GONE_WITHIN = 5.0
"""s after its signal by which a node must have exited (``ros2 launch`` then sends SIGTERM)."""
SLOW = 2.0
"""s after its signal after which a stop's output is kept (a stop still running 3 s after
its request prints every thread's stack: where it waits)."""
BUSY = "while True: pass"


@dataclass
class Outcome:
    """Stops per node and the unclean ones (node, scenario, signal, what went wrong)."""

    stops: Counter[str] = field(default_factory=Counter)
    by_scenario: Counter[str] = field(default_factory=Counter)
    unclean: list[dict[str, object]] = field(default_factory=list)
    deferred: int = 0  # signals held back until the process had its handler
    seconds: list[float] = field(default_factory=list)  # signal to exit, each stop
    slow: list[dict[str, object]] = field(default_factory=list)  # over SLOW s: where it was

    def to_json(self) -> dict[str, object]:
        return {"stops": dict(self.stops), "by_scenario": dict(self.by_scenario),
                "unclean": self.unclean, "deferred": self.deferred,
                "stop_seconds": [round(x, 3) for x in self.seconds], "slow": self.slow}

    def summary(self) -> str:
        """The stop times: median, 99th percentile and largest, s."""
        if not self.seconds:
            return "no stops"
        ordered = sorted(self.seconds)
        p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
        return (f"signal to exit: median {ordered[len(ordered) // 2]:.2f} s, p99 {p99:.2f} s, "
                f"max {ordered[-1]:.2f} s; over {GONE_WITHIN:g} s: "
                f"{sum(x > GONE_WITHIN for x in ordered)}")


def handler_installed(pid: int) -> bool:
    """Whether process ``pid`` catches SIGTERM (``inertial_id.nodes.stopping`` is installed;
    Linux: the SigCgt mask of /proc/PID/status). A process that ended counts as ready."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True
    for line in status.splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (signal.SIGTERM - 1) & 1)
    return True


def _args(node: str, scenario: str, namespace: str = "") -> list[str]:
    params = {
        "simulator": ["wrench_rate:=500.0", "joint_state_rate:=250.0"],
        "gatherer": ["publish_rate:=100.0"],
        "kinematics": [],
        "solver": ["min_samples:=200", "publish_rate:=20.0"],
    }[node]
    if node in ("gatherer", "kinematics") or (node == "solver" and scenario == "links"):
        from inertial_id.core.simulation import bundled_urdf_path

        params = [*params, f"urdf_path:={bundled_urdf_path()}"]
    if node == "solver" and scenario == "links":
        params = [*params, "mode:=links", "links_solve_period:=1.0"]
    out = [str(BIN / f"inertial_id_{node}"), "--ros-args"]
    for p in params:
        out += ["-p", p]
    return out + (["-r", f"__ns:=/{namespace}"] if namespace else [])


def _stop_times(scenario: str, rng: random.Random, settle: float = 0.0) -> dict[str, float]:
    """Seconds after the start at which each node gets its signal (``settle`` s later than
    the scenario says, except during start-up)."""
    if scenario == "startup":
        return {n: rng.uniform(0.0, 1.5) for n in NODES}
    if scenario == CTRL_C:
        low, high = rng.choice(((0.2, 1.5), (2.0, 6.0)))
        return dict.fromkeys(NODES, rng.uniform(low, high))
    if scenario == "after_stream":
        end = settle + rng.uniform(3.0, 5.0)
        return {n: end if n == "simulator" else end + rng.uniform(0.0, 3.0) for n in NODES}
    return {n: settle + rng.uniform(2.0, 6.0) for n in NODES}


def one_round(scenario: str, rng: random.Random, env: dict[str, str], outcome: Outcome,
              namespaces: tuple[str, ...] = ("",), only: signal.Signals | None = None,
              settle: float = 0.0) -> None:
    """Start the four nodes (in each of ``namespaces``), stop each at its moment (with
    ``only``, else SIGINT or SIGTERM at random), check how each ended and when."""
    names = [(ns, n) for ns in namespaces for n in NODES]
    times = {(ns, n): t for ns in namespaces
             for n, t in _stop_times(scenario, rng, settle).items()}
    signals = {k: signal.SIGINT if scenario == CTRL_C else only
               or rng.choice((signal.SIGINT, signal.SIGTERM)) for k in names}
    with contextlib.ExitStack() as stack:
        logs = {k: stack.enter_context(tempfile.TemporaryFile("w+")) for k in names}
        start = time.monotonic()
        processes = {k: subprocess.Popen(_args(k[1], scenario, k[0]), env=env, stdout=logs[k],
                                         stderr=subprocess.STDOUT, text=True) for k in names}
        sent: dict[tuple[str, str], float] = {}
        for key in sorted(names, key=times.__getitem__):
            time.sleep(max(0.0, start + times[key] - time.monotonic()))
            if not handler_installed(processes[key].pid):
                # The first tens of ms of a process (interpreter start-up, the ROS wheels'
                # re-exec) run no code of the package: a signal there takes its default action.
                outcome.deferred += 1
                deadline = time.monotonic() + 10.0
                while not handler_installed(processes[key].pid) and time.monotonic() < deadline:
                    time.sleep(0.005)
            processes[key].send_signal(signals[key])
            sent[key] = time.monotonic()
        if scenario == CTRL_C:
            again_at = time.monotonic()
            again = {k: rng.uniform(0.0, LAUNCH_SIGNAL_WITHIN) for k in names}
            for key in sorted(names, key=again.__getitem__):
                time.sleep(max(0.0, again_at + again[key] - time.monotonic()))
                processes[key].send_signal(signal.SIGINT)
        ended = _wait(processes, sent)
        for key, process in processes.items():
            logs[key].seek(0)
            output = logs[key].read()
            outcome.stops[key[1]] += 1
            outcome.by_scenario[scenario] += 1
            seconds = ended[key] - sent[key] if key in ended else None
            if seconds is not None:
                outcome.seconds.append(seconds)
                if seconds > SLOW:
                    outcome.slow.append({"node": "/".join(filter(None, key)),
                                         "scenario": scenario, "seconds": round(seconds, 3),
                                         "output": output[-6000:]})
            problem = _problem(process.returncode, output, seconds)
            if problem:
                outcome.unclean.append({
                    "node": "/".join(filter(None, key)), "scenario": scenario,
                    "signal": signals[key].name, "at_s": round(times[key], 3),
                    "problem": problem, "output": output[-4000:]})


def _wait(processes: dict[tuple[str, str], subprocess.Popen],
          sent: dict[tuple[str, str], float]) -> dict[tuple[str, str], float]:
    """Poll until every process exited or :data:`STOP_TIMEOUT` s passed since its signal (then
    killed); returns when each exited (``time.monotonic()``)."""
    ended: dict[tuple[str, str], float] = {}
    while len(ended) < len(processes):
        now = time.monotonic()
        for key, process in processes.items():
            if key in ended:
                continue
            if process.poll() is not None:
                ended[key] = now
            elif now - sent[key] > STOP_TIMEOUT:
                process.kill()
                process.wait()
                ended[key] = float("inf")
        time.sleep(0.01)
    return {k: t for k, t in ended.items() if t != float("inf")}


def _problem(returncode: int | None, output: str, seconds: float | None) -> str:
    """What went wrong with one stop ("" for a clean one); ``seconds`` from the signal to the
    exit (None: killed after :data:`STOP_TIMEOUT` s; how long a stop took is not judged here:
    the command line fails a run with stops over :data:`GONE_WITHIN` s)."""
    if seconds is None:
        return f"still running {STOP_TIMEOUT:g} s after the signal"
    problems = [f"exit status {returncode}"] if returncode != 0 else []
    bad = [b for b in BAD_OUTPUT if b in output]
    if bad:
        problems.append(f"printed {', '.join(bad)}")
    return "; ".join(problems)


def run(rounds: int, seed: int = 0, env: dict[str, str] | None = None,
        scenarios: tuple[str, ...] = SCENARIOS, pipelines: int = 1, load: int = 0,
        only: signal.Signals | None = None, settle: float = 0.0) -> Outcome:
    """``rounds`` rounds, ``scenarios`` in turn; ``pipelines`` > 1: that many namespaced
    pipelines per round; ``load`` busy processes running throughout; ``only``: the one
    signal sent; ``settle``: s added to the stop times after start-up (on a loaded machine
    the nodes take that long to import their modules and start)."""
    rng = random.Random(seed)
    env = dict(env or os.environ)
    env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    namespaces = tuple(f"p{k}" for k in range(pipelines)) if pipelines > 1 else ("",)
    outcome = Outcome()
    busy = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(load)]
    try:
        for k in range(rounds):
            one_round(scenarios[k % len(scenarios)], rng, env, outcome, namespaces, only,
                      settle)
    finally:
        for process in busy:
            process.kill()
            process.wait()
    return outcome


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--ctrl-c", action="store_true",
                        help="only Ctrl-C on ros2 launch: SIGINT to all, again within 10 ms")
    parser.add_argument("--pipelines", type=int, default=1,
                        help="pipelines per round, each in its own namespace (default 1)")
    parser.add_argument("--load", type=int, default=0,
                        help="busy processes running throughout (default 0)")
    parser.add_argument("--signal", choices=("any", "SIGINT", "SIGTERM"), default="any",
                        help="the signal each node gets (default any: one of the two at random)")
    parser.add_argument("--settle", type=float, default=0.0,
                        help="s added to the stop times after start-up (default 0)")
    args = parser.parse_args()
    start = time.monotonic()
    outcome = run(args.rounds, args.seed, scenarios=(CTRL_C,) if args.ctrl_c else SCENARIOS,
                  pipelines=args.pipelines, load=args.load,
                  only=None if args.signal == "any" else signal.Signals[args.signal],
                  settle=args.settle)
    print(f"{args.rounds} rounds in {time.monotonic() - start:.0f} s; stops per node "
          f"{dict(outcome.stops)}; per scenario {dict(outcome.by_scenario)}")
    print(f"unclean stops: {len(outcome.unclean)}; signals deferred until the handler was "
          f"installed (first tens of ms of a process): {outcome.deferred}")
    print(outcome.summary())
    for u in outcome.unclean:
        print(f"  {u['node']} ({u['scenario']}, {u['signal']} at {u['at_s']} s): {u['problem']}")
    if args.json:
        args.json.write_text(json.dumps(outcome.to_json(), indent=1))
    for u in outcome.unclean:
        print(f"--- {u['node']} ({u['scenario']}): {u['problem']}\n{u['output']}")
    late = sum(x > GONE_WITHIN for x in outcome.seconds)
    return 0 if not (outcome.unclean or late) else 1


if __name__ == "__main__":
    sys.exit(main())
