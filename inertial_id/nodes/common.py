"""Shared wiring for the inertial_id nodes: parameters, QoS, stamps, robot description."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import rclpy
from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.clock import Clock, ClockType
from rclpy.context import Context
from rclpy.executors import Executor, ExternalShutdownException
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import (
    DurabilityPolicy,
    HistoryPolicy,
    QoSProfile,
    ReliabilityPolicy,
)
from rclpy.timer import Timer
from std_msgs.msg import Header, String

from inertial_id.cdr import stamp_parts
from inertial_id.core.errors import InertialIdError
from inertial_id.nodes import compat
from inertial_id.settings import Param, validate


def sensor_qos(depth: int) -> QoSProfile:
    """Sensor-data QoS (best effort, volatile) with a queue deep enough for 1 kHz bursts."""
    return QoSProfile(
        history=HistoryPolicy.KEEP_LAST,
        depth=depth,
        reliability=ReliabilityPolicy.BEST_EFFORT,
        durability=DurabilityPolicy.VOLATILE,
    )


def pipeline_qos(depth: int = 100) -> QoSProfile:
    """Reliable QoS for the batches passed between the pipeline's own nodes."""
    return QoSProfile(
        history=HistoryPolicy.KEEP_LAST, depth=depth, reliability=ReliabilityPolicy.RELIABLE
    )


def latched_qos() -> QoSProfile:
    """Transient-local QoS, as robot_state_publisher uses for ``robot_description``."""
    return QoSProfile(
        history=HistoryPolicy.KEEP_LAST,
        depth=1,
        reliability=ReliabilityPolicy.RELIABLE,
        durability=DurabilityPolicy.TRANSIENT_LOCAL,
    )


def declare(
    node: Node, name: str, default: Any, description: str,
    array_type: Parameter.Type | None = None,
) -> Any:
    """Declare a read-only parameter with a description and return its value.

    ``array_type`` types a parameter whose default is ``[]`` (rclpy cannot infer the type of
    an empty list): it is declared by type, and the default applies when no value is given.
    """
    descriptor = ParameterDescriptor(description=description, read_only=True)
    if array_type is None:
        return node.declare_parameter(name, default, descriptor).value
    parameter = node.declare_parameter(name, array_type, descriptor)
    return default if parameter.type_ == Parameter.Type.NOT_SET else parameter.value


_ARRAY_TYPES = {"string": Parameter.Type.STRING_ARRAY, "double": Parameter.Type.DOUBLE_ARRAY}


def declare_all(node: Node, params: Sequence[Param]) -> dict[str, Any]:
    """Declare every parameter of a node's table (:mod:`inertial_id.settings`); their values,
    validated (:class:`InertialIdError` saying which is wrong)."""
    values = {
        p.name: declare(node, p.name, p.default, p.description,
                        _ARRAY_TYPES[p.array_type] if p.array_type else None)
        for p in params
    }
    validate(tuple(params), values, node.get_name())
    return values


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
    return node.create_timer(period, callback, clock=Clock(clock_type=ClockType.STEADY_TIME),
                             autostart=autostart)


def to_seconds(stamp: Time) -> float:
    """A header stamp in seconds."""
    return stamp.sec + 1e-9 * stamp.nanosec


def to_stamp(seconds: float) -> Time:
    """Seconds to a ``builtin_interfaces/Time``."""
    sec, nanosec = stamp_parts(seconds)
    return Time(sec=sec, nanosec=nanosec)


def check(condition: bool, message: str) -> None:
    """Raise :class:`InertialIdError` with ``message`` unless ``condition`` holds."""
    if not condition:
        raise InertialIdError(message)


class RobotDescription:
    """Gets the URDF for a node: the ``urdf_path`` parameter, else the ``robot_description``
    parameter, else the latched ``robot_description`` topic (calls ``on_ready`` once)."""

    def __init__(self, node: Node, values: dict[str, Any],
                 on_ready: Callable[[str], None]) -> None:
        self._node = node
        self._on_ready = on_ready
        self._subscription = None
        path, text = values["urdf_path"], values["robot_description"]
        if path or text:
            on_ready(path or text)
        else:
            node.get_logger().info("waiting for the URDF on the robot_description topic")
            self._subscription = node.create_subscription(
                String, "robot_description", self._received, latched_qos()
            )

    def _received(self, msg: String) -> None:
        if self._subscription is None:
            return
        try:
            self._on_ready(msg.data)
        except InertialIdError as exc:
            self._node.get_logger().error(f"robot_description rejected: {exc}")
            return
        self._node.destroy_subscription(self._subscription)
        self._subscription = None


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


def spin(executor: Executor, context: Context | None = None) -> None:
    """Spin until the context shuts down (SIGINT/SIGTERM), one event at a time."""
    ok = (context or rclpy.get_default_context()).ok
    while ok():
        executor.spin_once(timeout_sec=0.1)


def run(node_factory: Callable[[], Node], args: Sequence[str] | None = None) -> int:
    """Standard ``main``: init, spin one node, shut down; exit code 1 on a start-up error."""
    rclpy.init(args=args)
    node = None
    try:
        node = node_factory()
        executor = make_executor()
        executor.add_node(node)
        spin(executor)
    except InertialIdError as exc:
        print(f"inertial_id: {exc}", flush=True)
        return 1
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except Exception:
        if rclpy.ok():
            raise
        # A signal shut the context down while a callback was publishing: a normal stop.
    finally:
        if node is not None:
            node.destroy_node()
        if rclpy.ok():
            rclpy.shutdown()
    return 0


StatusFn = Callable[[], tuple[bytes, str, dict[str, str]]]


class Diagnostics:
    """Publishes a node's status on ``/diagnostics`` every ``period`` seconds.

    ``status`` returns ``(level, message, values)``; the name is ``<node>: <what>``.
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
            values=[KeyValue(key=k, value=v) for k, v in values.items()],
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


class DropWatch:
    """Notices a stream that arrives but is mostly dropped (a stall that would otherwise say
    OK): between two checks, more than ``share`` of a kind's messages dropped.

    ``check`` takes the received count per kind and the drop counters (keys
    ``<kind>_<reason>``, cumulative) and returns a one-line warning, or "" when all is well.
    """

    def __init__(self, share: float = 0.5) -> None:
        self.share = share
        self._received: dict[str, int] = {}
        self._dropped: Counter[str] = Counter()

    def check(self, received: dict[str, int], dropped: Counter[str]) -> str:
        """Compare with the previous call; see the class docstring."""
        warnings = []
        for kind, count in received.items():
            new = count - self._received.get(kind, 0)
            reasons = Counter({k: v - self._dropped[k] for k, v in dropped.items()
                               if k.startswith(f"{kind}_") and v > self._dropped[k]})
            lost = sum(reasons.values())
            if new > 0 and lost > self.share * new:
                reason, _ = reasons.most_common(1)[0]
                warnings.append(f"{100.0 * min(lost, new) / new:.0f} % of the {kind} messages "
                                f"dropped since the last status, mostly {reason}")
        self._received = dict(received)
        self._dropped = Counter(dropped)
        return "; ".join(warnings)


class Silence:
    """Tracks when a topic last delivered, in wall time (a silent input is a WARN)."""

    def __init__(self, timeout: float = 1.0) -> None:
        self.timeout = timeout
        self._last: float | None = None
        self.count = 0

    def tick(self) -> None:
        """A message arrived."""
        self._last = time.monotonic()
        self.count += 1

    @property
    def silent(self) -> bool:
        """No message for ``timeout`` seconds (or never)."""
        return self._last is None or time.monotonic() - self._last > self.timeout
