"""The one place that knows which rclpy has what (inertial_id/nodes/compat.py)."""

from __future__ import annotations

import sys
from importlib.metadata import PackageNotFoundError, version

import pytest
import rclpy
from rclpy.executors import SingleThreadedExecutor

from inertial_id.nodes import common, compat


def _installed(name: str) -> bool:
    try:
        version(name)
    except PackageNotFoundError:
        return False
    return True


def test_the_distribution_is_told_from_the_rclpy_that_is_imported() -> None:
    # Each development environment holds one distribution's wheels: ros-jazzy-rclpy or
    # ros-rclpy 9 (Kilted) -- never both.
    expected = "jazzy" if _installed("ros-jazzy-rclpy") else "kilted"
    assert compat.ros_distro() == expected
    assert compat.rclpy_version()[0] == {"jazzy": 7, "kilted": 9}[expected]
    assert ".".join(map(str, compat.rclpy_version())) == version("ros-rclpy")


def test_the_nodes_get_the_events_executor_on_both_distributions() -> None:
    # Both tested distributions ship it (Jazzy's wheels are >= 7.1.4): the nodes must not
    # fall back to the slow executor there.
    assert compat.rclpy_version() >= compat.EVENTS_EXECUTOR_SINCE_JAZZY
    assert compat.events_executor_class() is not None
    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        executor = common.make_executor(context)
        assert not isinstance(executor, SingleThreadedExecutor)
        assert type(executor).__name__ == "EventsExecutor"
    finally:
        rclpy.shutdown(context=context)


def test_without_the_events_executor_the_nodes_fall_back_and_say_so(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # An rclpy older than 7.1.4 (Jazzy before April 2025) has no rclpy.experimental.
    monkeypatch.setitem(sys.modules, "rclpy.experimental", None)
    monkeypatch.setattr(compat, "_warned", False)
    warnings: list[str] = []

    class Logger:
        def warning(self, text: str) -> None:
            warnings.append(text)

    monkeypatch.setattr(compat, "get_logger", lambda name: Logger())
    assert compat.events_executor_class() is None
    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        assert isinstance(common.make_executor(context), SingleThreadedExecutor)
        assert isinstance(common.make_executor(context), SingleThreadedExecutor)
    finally:
        rclpy.shutdown(context=context)
    assert len(warnings) == 1 and "EventsExecutor" in warnings[0] and "7.1.4" in warnings[0]
