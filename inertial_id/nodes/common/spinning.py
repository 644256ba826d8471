"""Running the nodes: ``rclpy.init`` with the package's own signal handling (:func:`init`),
the executor (:func:`make_executor`) and the loop that spins it until a stop
(:func:`spin`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import rclpy
from rclpy.context import Context
from rclpy.executors import Executor
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions
from rclpy.task import Future

from inertial_id.nodes import compat, stopping


def make_executor(context: Context | None = None) -> Executor:
    """rclpy's EventsExecutor where available, else the SingleThreadedExecutor
    (:func:`inertial_id.nodes.compat.make_executor`: the one place that knows which rclpy
    has which).

    The wait-set executor cannot keep up with a 1 kHz wrench plus 500 Hz joint states in
    Python (measured: 37 % of the wrenches lost, ~1 s latency); the events executor keeps
    all of them with the same nodes (``bench/pipeline_throughput.py``). Drive it with
    :func:`spin` (its own ``spin()`` neither fires timers nor returns on shutdown here).
    """
    return compat.make_executor(context)


CHECK_PERIOD = 0.1
"""s between two looks at ``until()`` and the context while spinning."""


def spin(executor: Executor, context: Context | None = None,
         until: Callable[[], bool] = stopping.requested) -> None:
    """Spin until ``until()`` (by default: SIGINT/SIGTERM, see
    :mod:`inertial_id.nodes.stopping`) or the context shuts down, looking every
    :data:`CHECK_PERIOD`.

    In between, the executor runs every event it gets without coming back to Python: the
    events executor's ``spin_until_future_complete`` on a future that does not complete, with
    a timeout (one ``spin_once`` per event cost a Python loop turn for each of the 1,500
    messages a second a wrist sensor and the joint states bring). A new future each turn:
    rclpy's Python executors add a callback to the future at every call and keep it."""
    ok = (context or rclpy.get_default_context()).ok
    while ok() and not until():
        executor.spin_until_future_complete(Future(), timeout_sec=CHECK_PERIOD)


def init(args: Sequence[str] | None = None) -> None:
    """``rclpy.init`` without rclpy's signal handlers: ours only set a flag (``stopping``)."""
    stopping.install()
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)


def shut_down(executor: Executor | None, nodes: Sequence[Node]) -> None:
    """The end of every process that spun nodes: the executor (if one was made), the nodes,
    then rclpy's context."""
    if executor is not None:
        executor.shutdown(timeout_sec=1.0)
    for node in nodes:
        node.destroy_node()
    rclpy.try_shutdown()
