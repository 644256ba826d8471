"""A node's status on ``/diagnostics`` (:class:`Diagnostics`, one number per key) and the
recent values it reports percentiles of (:class:`RecentValues`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.node import Node
from std_msgs.msg import Header

from inertial_id.nodes.common.clock import steady_timer

Number = int | float | bool
StatusFn = Callable[[], tuple[bytes, str, dict[str, Number]]]


def diagnostic_value(value: Number) -> str:
    """One diagnostics value as text a plotting tool reads as a number: integers as they
    are, floats to 6 significant digits, flags as 1 or 0 (a status leaves out the values
    that are not finite: :func:`diagnostic_values`)."""
    if isinstance(value, (bool, np.bool_)):
        return "1" if value else "0"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    return f"{float(value):.6g}"


def diagnostic_values(values: dict[str, Number]) -> list[KeyValue]:
    """The key-value pairs of a status: a number that is not finite (the std of a direction
    the data do not determine yet, an estimate's first moments) is left out, so that every
    value on ``/diagnostics`` is a finite number (no figure rather than ``inf``)."""
    return [KeyValue(key=k, value=diagnostic_value(v)) for k, v in values.items()
            if isinstance(v, (bool, np.bool_, int, np.integer)) or np.isfinite(v)]


class Diagnostics:
    """Publishes a node's status on ``/diagnostics`` every ``period`` seconds.

    ``status`` returns ``(level, message, values)``: one number per key (counts, quantities
    with their unit in the key, flags as 1/0), so that PlotJuggler and rqt_plot can plot
    every key (a value that is not finite is left out: :func:`diagnostic_values`); the text
    goes in the message. The name is ``<node>: <what>``.
    """

    def __init__(self, node: Node, what: str, status: StatusFn, period: float = 1.0) -> None:
        self._node = node
        self._name = f"{node.get_name()}: {what}"
        self._status = status
        self.hardware_id = ""
        self._publisher = node.create_publisher(DiagnosticArray, "/diagnostics", 10)
        steady_timer(node, period, self.publish)

    def publish(self) -> None:
        """Publish the current status now."""
        level, message, values = self._status()
        status = DiagnosticStatus(
            level=level, name=self._name, message=message, hardware_id=self.hardware_id,
            values=diagnostic_values(values),
        )
        stamp = self._node.get_clock().now().to_msg()
        self._publisher.publish(DiagnosticArray(header=Header(stamp=stamp), status=[status]))


class RecentValues:
    """The last ``size`` values of a stream in a ring buffer, for percentiles on demand.

    Appending a batch costs one slice copy; ``percentiles`` sorts only when asked (the
    diagnostics' period), so a 1 kHz stream of latencies costs next to nothing.
    """

    def __init__(self, size: int) -> None:
        self._data = np.empty(size)
        self._written = 0

    def __len__(self) -> int:
        return min(self._written, self._data.size)

    def extend(self, values: np.ndarray) -> None:
        """Append a 1-D batch, oldest first."""
        values = values[-self._data.size :]
        start = self._written % self._data.size
        head = min(values.size, self._data.size - start)
        self._data[start : start + head] = values[:head]
        self._data[: values.size - head] = values[head:]
        self._written += values.size

    def percentiles(self, q: Sequence[float]) -> np.ndarray:
        """``numpy.percentile`` of the values held (at least one)."""
        return np.percentile(self._data[: len(self)], q)
