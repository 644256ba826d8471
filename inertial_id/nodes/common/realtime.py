"""Real-time scheduling for a node's process: every thread to ``SCHED_FIFO`` at a priority.

A controller that acts on ``~/compensated_wrench`` wants it within a millisecond of the
wrench. On a loaded machine the scheduler, not the node's work, sets that tail: a normal
process is preempted by the others. ``SCHED_FIFO`` is what ros2_control's controller manager
uses for its loop (its ``thread_priority``, 50 by default); the user must be allowed it (an
``rtprio`` limit in ``/etc/security/limits.conf``, or ``CAP_SYS_NICE``). Every thread the
process has gets it, the middleware's receive threads included, and the threads started
later inherit it (Linux's default for new threads).
"""

from __future__ import annotations

import os

MAX_PRIORITY = 99
"""The highest ``SCHED_FIFO`` priority on Linux."""


def set_fifo_priority(priority: int) -> str:
    """Every thread of this process to ``SCHED_FIFO`` at ``priority`` (1 to
    :data:`MAX_PRIORITY`), or back to the normal policy with 0. Returns ``""`` when done,
    otherwise why not in one line (the threads keep what they had)."""
    if not 0 <= priority <= MAX_PRIORITY:
        return f"priority {priority} is not in [0, {MAX_PRIORITY}]"
    if not hasattr(os, "sched_setscheduler"):
        return "real-time scheduling is not available on this system"
    policy = os.SCHED_FIFO if priority else os.SCHED_OTHER
    try:
        threads = [int(tid) for tid in os.listdir("/proc/self/task")]
    except OSError:
        threads = [0]  # no /proc: the calling thread only
    try:
        for tid in threads:
            try:
                os.sched_setscheduler(tid, policy, os.sched_param(priority))
            except ProcessLookupError:  # the thread ended meanwhile
                continue
    except PermissionError:
        return (f"SCHED_FIFO priority {priority} is not permitted for this user (raise its "
                "rtprio limit, e.g. in /etc/security/limits.conf, or grant CAP_SYS_NICE)")
    return ""


def fifo_priority() -> int:
    """The calling thread's ``SCHED_FIFO`` priority (0: another policy)."""
    if not hasattr(os, "sched_getscheduler") or os.sched_getscheduler(0) != os.SCHED_FIFO:
        return 0
    return int(os.sched_getparam(0).sched_priority)
