"""What differs between the ROS 2 distributions the nodes run on, in one place.

Tested: Jazzy (rclpy 7.1.6 wheels) and Kilted (rclpy 9.1.2 wheels), the whole test suite on
each (``make test``, ``make test ROS_DISTRO=jazzy``). The nodes' rclpy API is the same on both
(``create_timer(..., autostart=False)``, steady-clock timers, raw subscriptions, serialized
publishing); what differs:

* ``rclpy.experimental.EventsExecutor``: Kilted has it; Jazzy only since rclpy 7.1.4 (April
  2025, a backport). An older Jazzy install gets the SingleThreadedExecutor, which cannot keep
  up with a 1 kHz wrench in Python (the project measured the live pipeline's p99 at 84 ms
  instead of 27 ms with it):
  :func:`make_executor` logs that once so a robot user knows to update ``ros-jazzy-rclpy``.
* Discovery: Jazzy's Fast DDS 2.14 took longer than Kilted's 3.2 for the pipeline's processes
  to find each other (not an API difference; see ``bench/fault_soak.py``).
"""

from __future__ import annotations

import re
from functools import cache

from rclpy.context import Context
from rclpy.executors import Executor, SingleThreadedExecutor
from rclpy.logging import get_logger

# rclpy's major version per distribution (rclpy's own numbering).
_DISTROS = {7: "jazzy", 9: "kilted"}
# The first Jazzy rclpy with the EventsExecutor.
EVENTS_EXECUTOR_SINCE_JAZZY = (7, 1, 4)


@cache
def rclpy_version() -> tuple[int, ...]:
    """rclpy's version: from the wheel's metadata (``ros-rclpy``) or the installed
    ``share/rclpy/package.xml`` of an apt or source install; ``()`` when neither says."""
    from importlib.metadata import PackageNotFoundError, version

    text = ""
    try:
        text = version("ros-rclpy")
    except PackageNotFoundError:
        try:
            from ament_index_python.packages import get_package_share_directory

            xml = get_package_share_directory("rclpy") + "/package.xml"
            with open(xml, encoding="utf-8") as f:
                match = re.search(r"<version>([^<]+)</version>", f.read())
            text = match.group(1) if match else ""
        except Exception:  # noqa: BLE001 - no index, no file: unknown
            text = ""
    return tuple(int(p) for p in re.findall(r"\d+", text)[:3])


def ros_distro() -> str:
    """``jazzy``, ``kilted``, ... from rclpy's version (not from ``$ROS_DISTRO``, which says
    what was sourced, not what is imported); ``unknown`` when it cannot be told."""
    version = rclpy_version()
    return _DISTROS.get(version[0], "unknown") if version else "unknown"


def events_executor_class() -> type | None:
    """rclpy's EventsExecutor (a factory function in the wheels), or None where it is missing."""
    try:
        from rclpy.experimental import EventsExecutor
    except ImportError:
        return None
    return EventsExecutor


_warned = False


def make_executor(context: Context | None = None) -> Executor:
    """rclpy's EventsExecutor where available, else the SingleThreadedExecutor (with one
    warning: the pipeline's rates need the events executor)."""
    global _warned
    events = events_executor_class()
    if events is not None:
        return events(context=context)
    if not _warned:
        _warned = True
        version = ".".join(map(str, rclpy_version())) or "unknown"
        since = ".".join(map(str, EVENTS_EXECUTOR_SINCE_JAZZY))
        get_logger("inertial_id").warning(
            f"rclpy {version} has no rclpy.experimental.EventsExecutor (Jazzy has it from "
            f"{since}): using the SingleThreadedExecutor, which cannot keep up with a 1 kHz "
            "wrench; update rclpy")
    return SingleThreadedExecutor(context=context)
