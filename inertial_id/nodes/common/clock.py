"""Time on the nodes: header stamps to seconds and back, timer periods, timers on the steady
clock.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

from builtin_interfaces.msg import Time
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rclpy.timer import Timer

from inertial_id.io.cdr import stamp_parts
from inertial_id.nodes.common.parameters import INT64_MAX


def to_seconds(stamp: Time) -> float:
    """A header stamp in seconds."""
    return stamp.sec + 1e-9 * stamp.nanosec


def to_stamp(seconds: float) -> Time:
    """Seconds to a ``builtin_interfaces/Time``."""
    sec, nanosec = stamp_parts(seconds)
    return Time(sec=sec, nanosec=nanosec)


def period_ns(seconds: float) -> int:
    """A timer period in nanoseconds, at least 1 ns and at most what rcl holds (a rate of
    1e-300 Hz is a timer that never fires, not an overflow)."""
    # Clamp as integers: float(INT64_MAX) rounds up to 2**63, one past what rcl holds.
    nanoseconds = float(seconds) * 1e9
    if not nanoseconds < INT64_MAX:
        return INT64_MAX
    return max(1, int(nanoseconds))


def set_period(timer: Timer, seconds: float) -> None:
    """Change a running timer's period (it restarts from now)."""
    timer.timer_period_ns = period_ns(seconds)
    timer.reset()


def steady_timer(node: Node, period: float, callback: Callable[[], None],
                 autostart: bool = True) -> Timer:
    """A timer on the steady clock: ``period`` seconds of wall time, whatever ``use_sim_time``.

    The nodes' timers pace work (solves, batches, diagnostics), not data: data carry their own
    header stamps. Timers on the ROS clock are also wrong under simulated time with rclpy's
    EventsExecutor: while such a timer is due, every ``/clock`` message (1 kHz from a bag
    player) queues one more dispatch of it, and each dispatch advances it by a period. After
    a 0.3 s callback the solver's 1 Hz diagnostics fired 11 times in 30 ms and then fell
    silent for 11 s of bag time. Without ``/clock`` at all they would never fire.
    """
    return node.create_timer(period_ns(period) * 1e-9, _no_arguments(callback),
                             clock=Clock(clock_type=ClockType.STEADY_TIME), autostart=autostart)


NO_ARGUMENTS = inspect.Signature()


def _no_arguments(callback: Callable[[], None]) -> Callable[[], None]:
    """``callback`` behind a function whose signature is known: rclpy's executors read a
    timer callback's signature at every call (to pass a ``TimerInfo`` to those that take
    one), which costs 17 us for a bound method and 3 us with ``__signature__`` set; the
    gatherer's batch timer fires up to 200 times a second."""

    def fire() -> None:
        callback()

    fire.__signature__ = NO_ARGUMENTS  # type: ignore[attr-defined]
    return fire
