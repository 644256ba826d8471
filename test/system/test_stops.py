"""Clean stops: SIGINT or SIGTERM at any moment ends every node with exit 0 and nothing but
log lines; a stopped replay writes what it had (``partial: true``) and exits 130; ``play`` and
the demo stop cleanly.

The nodes are stopped by ``bench/stop_soak.py`` (4 rounds here, one per scenario: start-up,
mid-stream, after the stream ended, links mode; docs/robot.md gives a 50-round run).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from bench import stop_soak
from inertial_id.nodes import stopping
from inertial_id.tools import cli

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
BAD_OUTPUT = ("Traceback", "terminate called", "Aborted", "[FATAL]", "error_already_set")


def test_every_node_stops_cleanly_at_random_moments(ros_env: dict[str, str]) -> None:
    outcome = stop_soak.run(rounds=4, seed=7, env=ros_env)
    assert sum(outcome.stops.values()) == 16
    assert not outcome.unclean, "\n\n".join(
        f"{u['node']} ({u['scenario']}, {u['signal']} at {u['at_s']} s): {u['problem']}\n"
        f"{u['output']}" for u in outcome.unclean)


def test_ctrl_c_on_launch_stops_every_node_cleanly(ros_env: dict[str, str]) -> None:
    """SIGINT to every node at once, then again to each within 10 ms (ros2 launch's Ctrl-C)."""
    outcome = stop_soak.run(rounds=2, seed=11, env=ros_env, scenarios=(stop_soak.CTRL_C,))
    assert sum(outcome.stops.values()) == 8
    assert not outcome.unclean, "\n\n".join(
        f"{u['node']} ({u['signal']} at {u['at_s']} s): {u['problem']}\n{u['output']}"
        for u in outcome.unclean)


def test_a_signal_twice_within_the_window_is_one_stop() -> None:
    """The second of two signals milliseconds apart changes nothing; one after the window
    raises ``KeyboardInterrupt`` (the impatient user's way out)."""
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        stopping.install()
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGTERM)
        assert stopping.requested()
        time.sleep(stopping.DUPLICATE_WINDOW)
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.1)  # the handler runs between bytecodes of this thread
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
        stopping.clear()


def test_the_second_signal_is_the_same_stop_even_when_its_handler_runs_late() -> None:
    """ros2 launch's second SIGINT whose handler Python runs after the window (behind a long
    import under load) is still the same stop; a third after the window raises."""
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        stopping.install()
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(stopping.DUPLICATE_WINDOW + 0.05)
        os.kill(os.getpid(), signal.SIGINT)  # late: no KeyboardInterrupt
        time.sleep(0.1)
        assert stopping.requested()
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.1)
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
        stopping.clear()


@pytest.fixture(scope="module")
def bag(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("stops") / "run"
    assert cli.main(["simulate", "--output", str(path), "--duration", "12"]) == 0
    return path


def test_a_stopped_replay_writes_the_estimate_it_had_marked_partial_and_exits_130(
        bag: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture) -> None:
    """Ctrl-C sets the stop flag (:mod:`inertial_id.nodes.stopping`); replay asks for it
    before each stretch of messages up to a pass of its pipeline (every 0.1 s of bag time
    while the filter is chosen, every 5 s after). A complete replay counts the questions;
    the flag is then set at the third last: the last stretches are not replayed."""
    asked = {"n": 0}

    def counted() -> bool:
        asked["n"] += 1
        return False

    monkeypatch.setattr(stopping, "requested", counted)
    monkeypatch.setattr(stopping, "install", lambda: None)
    complete = tmp_path / "complete.yaml"
    assert cli.main(["replay", str(bag), "--no-progress", "--output", str(complete)]) == 0
    whole = yaml.safe_load(complete.read_text())
    assert "partial" not in whole
    capsys.readouterr()
    checks = {"n": 0}

    def requested() -> bool:
        checks["n"] += 1
        return checks["n"] > asked["n"] - 3

    monkeypatch.setattr(stopping, "requested", requested)
    out = tmp_path / "out.yaml"
    code = cli.main(["replay", str(bag), "--no-progress", "--output", str(out)])
    assert code == 130
    doc = yaml.safe_load(out.read_text())
    assert doc["partial"] is True
    assert doc["estimate"] is not None and abs(doc["estimate"]["mass"] - 1.5) < 0.1
    printed = capsys.readouterr()
    assert "PARTIAL" in printed.out and "partial" in printed.err
    # it stopped part-way: the partial estimate rests on fewer samples than the whole bag's
    assert 0.2 * whole["samples_used"] < doc["samples_used"] < whole["samples_used"]


def test_a_replay_stopped_before_any_sample_says_so_and_exits_130(
        bag: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setattr(stopping, "requested", lambda: True)
    monkeypatch.setattr(stopping, "install", lambda: None)
    out = tmp_path / "out.yaml"
    assert cli.main(["replay", str(bag), "--no-progress", "--output", str(out)]) == 130
    assert "before any synchronised sample" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize(("command", "after"), [
    (["play", "{bag}"], 2.5),
    # the demo is stopped once it has printed its first estimate ("  4.0 s  samples   1234
    # mass ..."; before it, a line saying it waits): mid-stream, every node running, an
    # estimate to sum up. That comes after the 4 s of joint states its filter is chosen from,
    # and its nodes take ~3 s to start.
    (["demo", "--duration", "60"], r" s  samples +\d+  mass "),
], ids=["play", "demo"])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_play_and_the_demo_stop_cleanly(bag: Path, ros_env: dict[str, str], command: list[str],
                                        after: float | str, sig: signal.Signals) -> None:
    """Stopped ``after`` s from the start, or once a line of its output matches the pattern
    ``after`` (at most 60 s)."""
    args = [str(BIN / "inertial-id"), *(c.format(bag=bag) for c in command)]
    # Unbuffered, so that each line comes when printed, not when a pipe's buffer fills.
    env = {**ros_env, "PYTHONUNBUFFERED": "1"} if isinstance(after, str) else ros_env
    process = subprocess.Popen(args, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    seen = threading.Event()

    def read() -> None:
        for line in process.stdout:
            lines.append(line)
            if isinstance(after, str) and re.search(after, line):
                seen.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    if isinstance(after, str):
        if not seen.wait(timeout=60.0):
            process.kill()
            reader.join(timeout=10)
            pytest.fail(f"no line with {after!r} in 60 s:\n{''.join(lines)}")
    else:
        time.sleep(after)
    process.send_signal(sig)
    start = time.monotonic()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        raise
    finally:
        reader.join(timeout=10)
    output = "".join(lines)
    assert process.returncode == 0, output
    assert time.monotonic() - start < 10.0
    assert not [b for b in BAD_OUTPUT if b in output], output
    assert "stopped" in output, output


def _stop_script(report_after: float, *lines: str, exit_after: float = 30.0,
                 kill_after: float = 40.0) -> subprocess.CompletedProcess:
    """Run a Python process that installs the stop handlers (dump after ``report_after`` s,
    end after ``exit_after`` s, end whatever holds the interpreter lock after ``kill_after``
    s), sends itself SIGTERM and runs ``lines``."""
    script = "\n".join(("import os, signal, time",
                        "from inertial_id.nodes import stopping",
                        f"stopping.STOP_REPORT_AFTER = {report_after}",
                        f"stopping.STOP_EXIT_AFTER = {exit_after}",
                        f"stopping.STOP_KILL_AFTER = {kill_after}",
                        "stopping.install(bounded=True)",
                        "os.kill(os.getpid(), signal.SIGTERM)",
                        "assert stopping.requested()", *lines))
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60)


def test_a_stop_that_hangs_prints_where_every_thread_is() -> None:
    """A process that has not ended STOP_REPORT_AFTER after the request dumps its stacks."""
    done = _stop_script(0.3, "def stuck_in_cleanup():", "    time.sleep(2.0)",
                        "stuck_in_cleanup()")
    assert done.returncode == 0, done.stderr
    assert "still stopping 0.3 s after the request" in done.stderr, done.stderr
    assert "stuck_in_cleanup" in done.stderr, done.stderr


def test_a_stop_whose_teardown_never_returns_ends_after_the_bound() -> None:
    """Teardown blocked for good (as rclpy's destroy_node once was): the stacks, one line,
    and the process ends at STOP_EXIT_AFTER with status 0, not at the caller's timeout."""
    start = time.monotonic()
    done = _stop_script(0.3, "def blocked_in_teardown():", "    time.sleep(30.0)",
                        "blocked_in_teardown()", "print('not reached')", exit_after=1.5)
    assert time.monotonic() - start < 15.0
    assert done.returncode == 0, done.stderr
    assert "blocked_in_teardown" in done.stderr, done.stderr
    assert "ending the process without the rest of its teardown" in done.stderr
    assert "not reached" not in done.stdout


def test_a_teardown_blocked_in_c_holding_the_interpreter_lock_still_ends() -> None:
    """rclpy's destroy_node blocked for good inside C++ without releasing the interpreter
    lock (a fresh-clone run on Jazzy): no Python thread runs, so the Python bound never
    fires; the C watchdog ends the process with the stacks, exit status 1. ``PyDLL`` calls
    libc's ``sleep`` without releasing the lock, as that teardown did."""
    start = time.monotonic()
    done = _stop_script(0.3, "import ctypes", "def blocked_in_c():",
                        "    ctypes.PyDLL(None).sleep(30)", "blocked_in_c()",
                        "print('not reached')", exit_after=1.0, kill_after=2.0)
    assert time.monotonic() - start < 15.0, done.stderr
    assert done.returncode == 1, done.stderr
    assert "blocked_in_c" in done.stderr, done.stderr
    assert "not reached" not in done.stdout


def test_a_stop_while_the_modules_load_ends_the_process_at_once() -> None:
    """A node executable stopped while it imports (20-28 s under load) ends then, status 0,
    silently, instead of after the imports; a stop before the block ends it as it starts."""
    script = "\n".join(("import os, signal, time",
                        "from inertial_id.nodes import stopping",
                        "stopping.install(bounded=True)",
                        "with stopping.ending_at_once():",
                        "    os.kill(os.getpid(), signal.SIGINT)",
                        "    time.sleep(30.0)",
                        "print('not reached')"))
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60)
    assert time.monotonic() - start < 15.0
    assert done.returncode == 0 and done.stderr == "" and done.stdout == "", done
    before = script.replace("with stopping.ending_at_once():\n    os.kill(os.getpid(), "
                            "signal.SIGINT)", "os.kill(os.getpid(), signal.SIGINT)\n"
                            "with stopping.ending_at_once():")
    assert before != script
    done = subprocess.run([sys.executable, "-c", before], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0 and done.stdout == "", done


def test_signals_after_the_work_ended_do_not_kill_the_process() -> None:
    """ros2 launch's second SIGINT can reach a node executable while Python finalizes, when
    its handlers are back to the defaults (exit status -2): after ``finished`` they are
    ignored. Here another process sends SIGINT every half millisecond from before the end
    (it says so on a pipe, which the process reads before it ends) to well after it."""
    bombard = ("import os, signal, sys, time\n"
               "for k in range(4000):\n"
               "    try:\n"
               "        os.kill(int(sys.argv[1]), signal.SIGINT)\n"
               "    except ProcessLookupError:\n"
               "        break\n"
               "    if k == 10:\n"
               "        sys.stdout.write('x')\n"
               "        sys.stdout.flush()\n"
               "    time.sleep(0.0005)")
    done = _stop_script(5.0, "stopping.finished()", "import subprocess, sys",
                        f"child = subprocess.Popen([sys.executable, '-c', {bombard!r}, "
                        "str(os.getpid())], stdout=subprocess.PIPE)",
                        "assert child.stdout.read(1) == b'x'")
    assert done.returncode == 0, (done.returncode, done.stderr)


def test_a_stop_that_ends_in_time_prints_nothing() -> None:
    done = _stop_script(1.5, "time.sleep(0.5)")
    assert done.returncode == 0 and done.stderr == "", done.stderr

