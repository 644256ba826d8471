"""``inertial-id demo --apply ur``: without ur_msgs one line says what is missing and how to
build it; with the test-only copy the loop runs (apply A, compensated wrench, B mounted,
identified and applied) and the summary matches the simulated truth."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from interface_packages import build

BIN = Path(sys.executable).parent


def _demo(env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "inertial-id"), "demo", "--apply", "ur"], env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)


def test_without_ur_msgs_one_line_names_it_and_how_to_build_it(
        ros_env: dict[str, str]) -> None:
    done = _demo(ros_env, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 1 and "ur_msgs/srv/SetPayload" in lines[0], done.stdout
    assert "python test/interface_packages.py --env" in lines[0]
    assert "Traceback" not in done.stderr, done.stderr


def test_the_demo_applies_both_payloads_and_ends_on_the_second(
        ros_env: dict[str, str]) -> None:
    done = _demo(build().environment(ros_env), timeout=240)
    out = done.stdout
    assert done.returncode == 0, out + done.stderr[-3000:]
    assert "apply loop: 2 payload(s) applied" in out or "apply loop: 3 payload(s)" in out, out
    subtracted = [float(m) for m in re.findall(r"driver subtracts (\S+) kg", out)]
    assert abs(subtracted[0] - 1.5) < 0.015 and abs(subtracted[-1] - 0.8) < 0.008, out  # A, B
    mass = re.search(r"payload mass\s+(\S+) kg \(true (\S+),", out)
    com = re.search(r"CoM .* error (\S+) mm\)", out)
    assert mass and com, out
    assert float(mass[2]) == 0.8 and abs(float(mass[1]) - 0.8) < 0.008, out  # B, 1 %
    assert float(com[1]) < 5.0, out
