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

``--ctrl-c`` runs only the fifth scenario, Ctrl-C on ``ros2 launch``: at a random moment (half
the rounds during start-up, 0.2-1.5 s, half mid-stream, 2-6 s), SIGINT to every node at once
(the terminal's, to the process group), then to each node again within 10 ms (launch's own).

    python bench/stop_soak.py --rounds 50          # the numbers in docs/robot.md
    python bench/stop_soak.py --rounds 50 --ctrl-c
    python bench/stop_soak.py --rounds 4 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
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


@dataclass
class Outcome:
    """Stops per node and the unclean ones (node, scenario, signal, what went wrong)."""

    stops: Counter[str] = field(default_factory=Counter)
    by_scenario: Counter[str] = field(default_factory=Counter)
    unclean: list[dict[str, object]] = field(default_factory=list)
    deferred: int = 0  # signals held back until the process had its handler

    def to_json(self) -> dict[str, object]:
        return {"stops": dict(self.stops), "by_scenario": dict(self.by_scenario),
                "unclean": self.unclean, "deferred": self.deferred}


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


def _args(node: str, scenario: str) -> list[str]:
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
    return out


def _stop_times(scenario: str, rng: random.Random) -> dict[str, float]:
    """Seconds after the start at which each node gets its signal."""
    if scenario == "startup":
        return {n: rng.uniform(0.0, 1.5) for n in NODES}
    if scenario == CTRL_C:
        low, high = rng.choice(((0.2, 1.5), (2.0, 6.0)))
        return dict.fromkeys(NODES, rng.uniform(low, high))
    if scenario == "after_stream":
        end = rng.uniform(3.0, 5.0)
        return {n: end if n == "simulator" else end + rng.uniform(0.0, 3.0) for n in NODES}
    return {n: rng.uniform(2.0, 6.0) for n in NODES}


def one_round(scenario: str, rng: random.Random, env: dict[str, str],
              outcome: Outcome) -> None:
    """Start the four nodes, stop each at its moment, check how each ended."""
    times = _stop_times(scenario, rng)
    signals = {n: signal.SIGINT if scenario == CTRL_C
               else rng.choice((signal.SIGINT, signal.SIGTERM)) for n in NODES}
    start = time.monotonic()
    processes = {n: subprocess.Popen(_args(n, scenario), env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True) for n in NODES}
    for node in sorted(NODES, key=times.__getitem__):
        time.sleep(max(0.0, start + times[node] - time.monotonic()))
        if not handler_installed(processes[node].pid):
            # The first tens of ms of a process (interpreter start-up, the ROS wheels'
            # re-exec) run no code of the package: a signal there takes its default action.
            outcome.deferred += 1
            deadline = time.monotonic() + 10.0
            while not handler_installed(processes[node].pid) and time.monotonic() < deadline:
                time.sleep(0.005)
        processes[node].send_signal(signals[node])
    if scenario == CTRL_C:
        sent = time.monotonic()
        again = {n: rng.uniform(0.0, LAUNCH_SIGNAL_WITHIN) for n in NODES}
        for node in sorted(NODES, key=again.__getitem__):
            time.sleep(max(0.0, sent + again[node] - time.monotonic()))
            processes[node].send_signal(signal.SIGINT)
    for node, process in processes.items():
        try:
            output, _ = process.communicate(timeout=STOP_TIMEOUT)
            problem = (f"exit status {process.returncode}" if process.returncode != 0 else "")
            bad = [b for b in BAD_OUTPUT if b in output]
            if bad:
                problem = (problem + "; " if problem else "") + f"printed {', '.join(bad)}"
        except subprocess.TimeoutExpired:
            process.kill()
            output, _ = process.communicate()
            problem = f"still running {STOP_TIMEOUT:g} s after the signal"
        outcome.stops[node] += 1
        outcome.by_scenario[scenario] += 1
        if problem:
            outcome.unclean.append({
                "node": node, "scenario": scenario, "signal": signals[node].name,
                "at_s": round(times[node], 3), "problem": problem, "output": output[-2000:]})


def run(rounds: int, seed: int = 0, env: dict[str, str] | None = None,
        scenarios: tuple[str, ...] = SCENARIOS) -> Outcome:
    """``rounds`` rounds, ``scenarios`` in turn."""
    rng = random.Random(seed)
    env = dict(env or os.environ)
    env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    outcome = Outcome()
    for k in range(rounds):
        one_round(scenarios[k % len(scenarios)], rng, env, outcome)
    return outcome


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--ctrl-c", action="store_true",
                        help="only Ctrl-C on ros2 launch: SIGINT to all, again within 10 ms")
    args = parser.parse_args()
    start = time.monotonic()
    outcome = run(args.rounds, args.seed, scenarios=(CTRL_C,) if args.ctrl_c else SCENARIOS)
    print(f"{args.rounds} rounds in {time.monotonic() - start:.0f} s; stops per node "
          f"{dict(outcome.stops)}; per scenario {dict(outcome.by_scenario)}")
    print(f"unclean stops: {len(outcome.unclean)}; signals deferred until the handler was "
          f"installed (first tens of ms of a process): {outcome.deferred}")
    for u in outcome.unclean:
        print(f"  {u['node']} ({u['scenario']}, {u['signal']} at {u['at_s']} s): {u['problem']}")
    if args.json:
        args.json.write_text(json.dumps(outcome.to_json(), indent=1))
    return 0 if not outcome.unclean else 1


if __name__ == "__main__":
    sys.exit(main())
