"""Clean stops on SIGINT and SIGTERM: a flag, never an exception inside a callback.

rclpy's own signal handling shuts the context down from the signal handler and lets Python
raise ``KeyboardInterrupt`` wherever the main thread happens to be, which may be inside a
callback that rclpy's C++ executor code called: an exception there can end the process with
``terminate called after throwing an instance of 'pybind11::error_already_set'`` (seen in 3
of 21 stops after a played bag), and a callback publishing on a context already shut down
printed ``[FATAL] Exception in ... callback``. Here the first SIGINT/SIGTERM only sets a flag;
the spin loop looks at it between callbacks and the node then ends normally (exit 0), so a
stop waits for the callback running (a solve: up to ``solve_timeout``). A second signal
while stopping raises ``KeyboardInterrupt`` (the impatient user's way out). A process still
running :data:`STOP_REPORT_AFTER` seconds after the request prints every thread's Python stack
to stderr (``faulthandler``: it works while a thread holds the GIL), so a stop that hangs says
where.

This module imports nothing heavy, so the node executables install the handlers before
importing rclpy, pinocchio and cvxpy (a stop during those imports is a clean stop too).
"""

from __future__ import annotations

import faulthandler
import signal
from types import FrameType

STOP_REPORT_AFTER = 10.0
"""s after a stop request after which a process still running dumps its threads' stacks."""

_requested: list[int] = []


def _handle(signum: int, _frame: FrameType | None) -> None:
    if _requested:
        raise KeyboardInterrupt
    _requested.append(signum)
    faulthandler.dump_traceback_later(STOP_REPORT_AFTER)


def install() -> None:
    """Let SIGINT and SIGTERM request a stop (main thread only; idempotent)."""
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


def main(node: str) -> int:
    """Entry point of the node executables: handlers first, then the node module."""
    install()
    from importlib import import_module

    return import_module(f"inertial_id.nodes.{node}").main()


RUN_UNTIL_STOPPED = ("play", "demo", "replay")
"""``inertial-id`` commands that run until stopped: their handlers go in before the imports."""


def cli() -> int:
    """Entry point of ``inertial-id``: for the commands that run until stopped, the handlers
    first (a stop while numpy, pinocchio and rclpy load is then a clean stop, not a kill);
    the others keep Python's Ctrl-C."""
    import sys

    if len(sys.argv) > 1 and sys.argv[1] in RUN_UNTIL_STOPPED:
        install()
    from inertial_id.cli import main as cli_main

    return cli_main()


def gatherer() -> int:
    return main("gatherer")


def kinematics() -> int:
    return main("kinematics")


def solver() -> int:
    return main("solver")


def simulator() -> int:
    return main("simulator")
