"""``realtime_priority``: every thread of a node's process, the middleware's included, runs
``SCHED_FIFO`` at the priority given, threads started later too; where the system refuses, one
line says why and nothing changes. Checked in processes of their own (``/proc``), never in
the test runner's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from inertial_id.core.simulation import bundled_urdf_path
from inertial_id.nodes.common.realtime import set_fifo_priority

BIN = Path(sys.executable).parent
SCHED_FIFO = 1  # the policy field of /proc/<pid>/task/<tid>/stat

THREADS = """
import json, threading
from inertial_id.nodes.common.realtime import fifo_priority, set_fifo_priority
seen, go, done = {}, threading.Event(), threading.Event()
def older():
    go.wait()
    seen["older"] = fifo_priority()
    done.set()
threading.Thread(target=older).start()
refused = set_fifo_priority(7)
go.set(); done.wait()
seen["main"] = fifo_priority()
newer = threading.Thread(target=lambda: seen.__setitem__("newer", fifo_priority()))
newer.start(); newer.join()
reset = set_fifo_priority(0)
seen["after_reset"] = fifo_priority()
print(json.dumps({"refused": refused, "reset": reset, **seen}))
"""


def _policies(pid: int) -> list[int]:
    """The scheduling policy of each thread of ``pid`` (field 41 of its ``stat``)."""
    policies = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except OSError:
            continue
        policies.append(int(stat.rsplit(")", 1)[1].split()[38]))
    return policies


def test_every_thread_old_and_new_takes_the_priority_or_the_refusal_is_one_line() -> None:
    result = json.loads(subprocess.run([sys.executable, "-c", THREADS], capture_output=True,
                                       text=True, check=True, timeout=60).stdout)
    if result["refused"]:
        assert "rtprio" in result["refused"] and "\n" not in result["refused"]
        assert (result["main"], result["older"], result["newer"]) == (0, 0, 0)
    else:
        assert (result["main"], result["older"], result["newer"]) == (7, 7, 7)
        assert result["reset"] == "" and result["after_reset"] == 0


def test_a_priority_out_of_range_is_refused_before_anything_changes() -> None:
    assert set_fifo_priority(100) == "priority 100 is not in [0, 99]"
    assert set_fifo_priority(-1) == "priority -1 is not in [0, 99]"


def test_the_gatherer_process_runs_fifo_with_its_middleware_threads(
        ros_env: dict[str, str],
        stop_processes: Callable[[list[subprocess.Popen]], list[str]]) -> None:
    process = subprocess.Popen(
        [str(BIN / "inertial_id_gatherer"), "--ros-args", "-p",
         f"urdf_path:={bundled_urdf_path()}", "-p", "realtime_priority:=5"],
        env=ros_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    policies: list[int] = []
    end, steady_since = time.monotonic() + 30.0, None
    try:  # until every thread is FIFO, or the threads stayed as they are for 3 s (refused)
        while time.monotonic() < end and process.poll() is None:
            now, seen = time.monotonic(), _policies(process.pid)
            if len(seen) > 1 and all(p == SCHED_FIFO for p in seen):
                policies = seen
                break
            if seen != policies or len(seen) < 2:
                policies, steady_since = seen, now
            elif steady_since is not None and now - steady_since > 3.0:
                break
            time.sleep(0.2)
    finally:
        (output,) = stop_processes([process])
    if "realtime_priority not applied" in output:
        assert "rtprio" in output and set(policies) == {0}, output
    else:
        assert len(policies) > 1 and set(policies) == {SCHED_FIFO}, (policies, output)
