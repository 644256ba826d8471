"""Calling a ROS service of another process from a test, robust to discovery.

``wait_for_service`` sees only the server. Until the server has also discovered the client's
reply reader (seconds on a loaded machine, for a process just started), the reply is lost and
the call never completes; the remedy is to ask again."""

from __future__ import annotations

from typing import Any

from rclpy.client import Client
from rclpy.executors import Executor


def call_until_answered(executor: Executor, client: Client, request: Any,
                        timeout: float = 60.0, per_try: float = 5.0) -> Any:
    """The service's answer to ``request``: waits up to ``timeout`` s for the server, then
    asks every ``per_try`` s until answered within ``timeout`` s (AssertionError else)."""
    assert client.wait_for_service(timeout_sec=timeout), client.srv_name
    for _ in range(max(1, round(timeout / per_try))):
        future = client.call_async(request)
        executor.spin_until_future_complete(future, timeout_sec=per_try)
        if future.done():
            return future.result()
        client.remove_pending_request(future)
    raise AssertionError(f"{client.srv_name}: no answer in {timeout:.0f} s")
