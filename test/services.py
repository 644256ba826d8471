"""Calling a ROS service of another process from a test, robust to discovery.

``wait_for_service`` sees only the server. Until the server has also discovered the client's
reply reader (seconds on a loaded machine, for a process just started), the reply is lost and
the call never completes; the remedy is to ask again. On Jazzy's Fast DDS, discovery between
two participants has also, about once in 20 runs, never completed for a whole minute while
both processes ran (the other process's node was even listed); every attempt here therefore
uses a participant of its own (a new context), which discovers the server afresh.
"""

from __future__ import annotations

import time
from typing import Any

import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node


def call_until_answered(srv_type: Any, name: str, request: Any, timeout: float = 60.0,
                        per_attempt: float = 20.0, per_try: float = 5.0) -> Any:
    """The answer of service ``name`` (type ``srv_type``) to ``request``.

    Each attempt (a fresh context, node and client) waits up to ``per_attempt`` s for the
    server and asks every ``per_try`` s within it; attempts go on until ``timeout`` s have
    passed (AssertionError then, naming the service)."""
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        answer = _attempt(srv_type, name, request, min(per_attempt, left), per_try)
        if answer is not None:
            return answer
    raise AssertionError(f"{name}: no answer in {timeout:.0f} s")


def _attempt(srv_type: Any, name: str, request: Any, budget: float,
             per_try: float) -> Any | None:
    """One attempt from a participant of its own: the answer, or None after ``budget`` s."""
    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        node = Node("service_probe", context=context)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        client = node.create_client(srv_type, name)
        end = time.monotonic() + budget
        if not client.wait_for_service(timeout_sec=budget):
            return None
        while (left := end - time.monotonic()) > 0:
            future = client.call_async(request)
            executor.spin_until_future_complete(future, timeout_sec=min(per_try, left))
            if future.done():
                return future.result()
            client.remove_pending_request(future)
        return None
    finally:
        rclpy.shutdown(context=context)
