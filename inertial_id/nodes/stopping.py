"""Clean stops on SIGINT and SIGTERM: a flag, never an exception inside a callback.

rclpy's own signal handling shuts the context down from the signal handler and lets Python
raise ``KeyboardInterrupt`` wherever the main thread happens to be, which may be inside a
callback that rclpy's C++ executor code called: an exception there can end the process with
``terminate called after throwing an instance of 'pybind11::error_already_set'`` (seen in 3
of 21 stops after a played bag), and a callback publishing on a context already shut down
printed ``[FATAL] Exception in ... callback``. Here the first SIGINT/SIGTERM only sets a flag;
the spin loop looks at it between callbacks and the node then ends normally (exit 0), so a
stop waits for the callback running (a solve: up to ``solve_timeout``). The second signal,
and any within :data:`DUPLICATE_WINDOW` of the first, is the same stop delivered twice and
changes nothing: Ctrl-C on ``ros2 launch`` sends SIGINT to the whole process group and launch then
sends its own to every node, milliseconds apart (the nodes share launch's process group), and
a ``KeyboardInterrupt`` raised by that second one inside ``publisher.publish`` in a timer
printed ``[FATAL] Exception in 'timers' callback`` in 1 of 3 such stops. A later one (a third, after
the window) raises ``KeyboardInterrupt`` (the impatient user's way out). Once a node
executable's work has ended after a request, further signals are ignored (:func:`finished`):
Python's finalization would otherwise meet them with the default action. A process still
running :data:`STOP_REPORT_AFTER` seconds after the request prints every thread's Python stack
to stderr, so a stop that hangs says where; a node executable still running
:data:`STOP_EXIT_AFTER` seconds after it says so in one line and ends (exit status 0: the node's
work ended with the request; ``replay``, which writes its results after a stop, is not
bounded). That bound is for teardown that never returns: in about 1 of 30 full test suites a
node's ``destroy_node`` blocked in rclpy's ``destroy_when_not_in_use`` (the middleware's node
teardown) for good. That call holds the interpreter lock, so no Python thread can run while it
blocks (a fresh-clone run on Jazzy: the stacks came, the exit at 20 s never did): the last
resort is :mod:`faulthandler`'s own watchdog, a C thread, which :data:`STOP_KILL_AFTER` seconds
after the request prints the stacks and ends the process with exit status 1 (a teardown that
failed) whatever holds the lock.

This module imports nothing heavy, so the node executables (:mod:`inertial_id.entry_points`)
install the handlers before importing rclpy, pinocchio and cvxpy (a stop during those imports
is a clean stop too).
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

STOP_REPORT_AFTER = 3.0
"""s after a stop request after which a process still running dumps its threads' stacks."""

STOP_EXIT_AFTER = 4.0
"""s after a stop request after which a process still running ends without finishing."""

STOP_KILL_AFTER = 4.5
"""s after a stop request after which a node executable ends even if a C call holds the
interpreter lock (exit status 1; :mod:`faulthandler`'s watchdog thread): within the 5 s after
which ``ros2 launch`` escalates to SIGTERM."""

DUPLICATE_WINDOW = 0.5
"""s after a stop request within which another signal is the same request (module docstring)."""

_requested: list[tuple[int, float]] = []  # (signal, time.monotonic() when it came)
_timers: list[threading.Timer] = []
_bounded: list[bool] = []
_at_once: list[bool] = []  # inside ending_at_once()


def _report() -> None:
    """The stop did not end in :data:`STOP_REPORT_AFTER` s: say where every thread is."""
    sys.stderr.write(f"inertial_id: still stopping {STOP_REPORT_AFTER:g} s after the request "
                     "(where each thread is, below)\n")
    sys.stderr.flush()
    faulthandler.dump_traceback(all_threads=True)


def _exit_now() -> None:
    """The stop did not end in :data:`STOP_EXIT_AFTER` s (the stacks are above): end."""
    sys.stderr.write(f"inertial_id: still stopping {STOP_EXIT_AFTER:g} s after the request "
                     "(stacks above): ending the process without the rest of its teardown\n")
    sys.stderr.flush()
    os._exit(0)


def _handle(signum: int, _frame: FrameType | None) -> None:
    now = time.monotonic()
    if _requested:
        # The second signal of all is the same stop whenever Python runs its handler: a
        # handler runs only between bytecodes, so behind a long import under load it can run
        # well over the window after the signal came (a ros2 launch Ctrl-C then ended a
        # starting node by KeyboardInterrupt, exit status -2).
        _requested.append((signum, now))
        if len(_requested) == 2 or now - _requested[0][1] < DUPLICATE_WINDOW:
            return
        raise KeyboardInterrupt
    _requested.append((signum, now))
    if _at_once:
        _end_at_once()
    if not _bounded:
        faulthandler.dump_traceback_later(STOP_REPORT_AFTER)
        return
    faulthandler.dump_traceback_later(STOP_KILL_AFTER, exit=True)
    for after, action in ((STOP_REPORT_AFTER, _report), (STOP_EXIT_AFTER, _exit_now)):
        timer = threading.Timer(after, action)
        timer.daemon = True
        timer.start()
        _timers.append(timer)


def _end_at_once() -> None:
    """End the process now, exit status 0, without Python's finalization: ``SystemExit``
    raised inside a C extension's initialisation became an ``ImportError`` with a traceback,
    and during finalization the signal handlers are back to their defaults, so launch's
    second SIGINT, milliseconds later, killed the process (exit status -2; a Ctrl-C soak:
    71 of 200 stops)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


@contextmanager
def ending_at_once() -> Iterator[None]:
    """A block in which a stop request ends the process at once, exit status 0 (a node
    executable importing rclpy, pinocchio and cvxpy: nothing is running yet that a stop
    should wait for). Under load those imports took 20-28 s of wall time (2 s of CPU), and a
    Ctrl-C then waited for all of them; a request made before the block ends it as it
    starts."""
    if _requested:
        _end_at_once()
    _at_once.append(True)
    try:
        yield
    finally:
        _at_once.clear()


def finished() -> None:
    """A node executable's work ended after a stop request (its nodes destroyed, rclpy shut
    down): from here to the process's end SIGINT and SIGTERM are ignored. Python's
    finalization puts the handlers it set back to the defaults, so launch's second SIGINT,
    arriving then, killed the process (exit status -2: 1 of 8 stops of a Ctrl-C test on
    Jazzy); a signal set to be ignored stays ignored. Only the node executables'
    (``install(bounded=True)``): a test process keeps its Ctrl-C."""
    if _requested and _bounded:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_IGN)


def install(bounded: bool = False) -> None:
    """Let SIGINT and SIGTERM request a stop (main thread only; idempotent). ``bounded``
    (the node executables): end the process :data:`STOP_EXIT_AFTER` s after a request."""
    if bounded and not _bounded:
        _bounded.append(True)
    for sig in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(sig) is not _handle:
            signal.signal(sig, _handle)


def requested() -> bool:
    """Whether a stop was requested."""
    return bool(_requested)


def clear() -> None:
    """Forget a request (tests running several nodes' ``main`` in one process)."""
    _requested.clear()
    faulthandler.cancel_dump_traceback_later()
    while _timers:
        _timers.pop().cancel()
