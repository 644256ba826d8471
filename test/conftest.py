"""Shared pytest configuration and fixtures."""

import os
import subprocess
from collections.abc import Callable

import pytest
from hypothesis import settings

# Property tests draw the same examples on every run (`derandomize`: seeded from each test
# function), so a run that passes passes again and a landing is not decided by a new draw.
# A draw that once failed stays as an explicit @example. `HYPOTHESIS_PROFILE=explore make test`
# draws afresh on each run, to look for new failures.
settings.register_profile("repeatable", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))

# ROS 2 traffic of the tests stays on this host and in a DDS domain of its own, so parallel runs
# on one machine do not see each other. `make test` sets both variables; these defaults cover a
# bare `python -m pytest`. Set at import time, before any test calls rclpy.init(), which reads
# them from the environment.
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
os.environ.setdefault("ROS_DOMAIN_ID", str(os.getpid() % 100 + 1))


def pytest_sessionstart(session: pytest.Session) -> None:
    """Compile the dedicated SDP solver, or load it from numba's disk cache, before any test:
    the node processes the tests start then find it ready instead of compiling it in the
    background while a test measures them."""
    from inertial_id.core.estimation import sdp

    sdp.warm_up()


@pytest.fixture(scope="session")
def ros_env() -> dict[str, str]:
    """Environment for ROS subprocesses: same discovery range and domain as this process."""
    env = dict(os.environ)
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    env["ROS_DOMAIN_ID"] = os.environ["ROS_DOMAIN_ID"]
    return env


def pytest_report_header() -> str:
    """Which ROS 2 distribution this run tests (the venv's rclpy)."""
    try:
        from inertial_id.nodes.compat import rclpy_version, ros_distro
    except ImportError as exc:
        return f"ROS 2: not importable ({exc})"
    return f"ROS 2 {ros_distro()} (rclpy {'.'.join(map(str, rclpy_version()))})"


@pytest.fixture
def stop_processes() -> Callable[[list[subprocess.Popen]], list[str]]:
    """SIGTERM every process, then wait up to 30 s for each; returns their outputs (a process
    that does not end fails the test with ``TimeoutExpired``)."""
    def stop(processes: list[subprocess.Popen]) -> list[str]:
        for process in processes:
            process.terminate()
        outputs = []
        for process in processes:
            try:
                outputs.append(process.communicate(timeout=30)[0])
            except subprocess.TimeoutExpired:
                # The whole output (communicate again returns all of it), with the stacks the
                # node dumps 10 s into a stop that hangs (inertial_id.nodes.stopping): pytest
                # would truncate it in the traceback.
                process.kill()
                output = process.communicate()[0]
                raise AssertionError(f"{process.args[0]} did not stop within 30 s of SIGTERM; "
                                     f"its output:\n{output}") from None
        return outputs

    return stop
