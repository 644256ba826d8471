"""Shared wiring for the inertial_id nodes: parameters, QoS, stamps, robot description."""

from __future__ import annotations

import math
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import rclpy
from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rcl_interfaces.msg import (
    FloatingPointRange,
    IntegerRange,
    ParameterDescriptor,
    SetParametersResult,
)
from rclpy.clock import Clock, ClockType
from rclpy.context import Context
from rclpy.exceptions import InvalidParameterTypeException, InvalidParameterValueException
from rclpy.executors import Executor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import (
    DurabilityPolicy,
    HistoryPolicy,
    QoSProfile,
    ReliabilityPolicy,
)
from rclpy.signals import SignalHandlerOptions
from rclpy.timer import Timer
from std_msgs.msg import Header, String

from inertial_id.cdr import stamp_parts
from inertial_id.core.errors import InertialIdError
from inertial_id.nodes import compat, stopping
from inertial_id.settings import Param, check_known, validate


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


_ARRAY_TYPES = {"string": Parameter.Type.STRING_ARRAY, "double": Parameter.Type.DOUBLE_ARRAY}
_TYPE_WORDS = {Parameter.Type.BOOL: "true or false", Parameter.Type.INTEGER: "an integer",
               Parameter.Type.DOUBLE: "a number", Parameter.Type.STRING: "a string",
               Parameter.Type.DOUBLE_ARRAY: "a list of numbers",
               Parameter.Type.STRING_ARRAY: "a list of strings"}
INT64_MAX = 2**63 - 1
DOUBLE_MAX = sys.float_info.max


def parameter_type(param: Param) -> Parameter.Type:
    """The ROS parameter type of ``param`` (from its default or ``array_type``)."""
    if param.array_type:
        return _ARRAY_TYPES[param.array_type]
    return Parameter.Type.from_parameter_value(param.default)


def descriptor(param: Param) -> ParameterDescriptor:
    """The descriptor a node declares ``param`` with: description and unit, the range (rqt's
    sliders; a one-sided range ends at the type's largest value), read-only unless the node
    applies a change while running (:attr:`Param.live`)."""
    unit = f" [{param.unit}]" if param.unit else ""
    constraints = param.range_text
    if param.numeric and constraints:
        constraints = "finite, " + constraints
    out = ParameterDescriptor(
        description=param.description + unit, read_only=not param.live,
        additional_constraints=constraints if param.numeric else "",
    )
    kind = parameter_type(param)
    if param.low is None and param.high is None:
        return out
    if kind == Parameter.Type.INTEGER:
        low = -INT64_MAX - 1 if param.low is None else math.ceil(param.low)
        if param.open_low and low == param.low:
            low += 1
        high = INT64_MAX if param.high is None else math.floor(param.high)
        out.integer_range = [IntegerRange(from_value=int(low), to_value=int(high), step=1)]
    elif kind == Parameter.Type.DOUBLE:
        out.floating_point_range = [FloatingPointRange(
            from_value=-DOUBLE_MAX if param.low is None else float(param.low),
            to_value=DOUBLE_MAX if param.high is None else float(param.high), step=0.0)]
    return out


def coerce(param: Param | None, parameter: Parameter) -> Parameter:
    """An integer where a double is expected (``-p publish_rate:=5``, ``ros2 param set ...
    5``) becomes that double; everything else is left to the type check."""
    if param is None:
        return parameter
    kind = parameter_type(param)
    if kind == Parameter.Type.DOUBLE and parameter.type_ == Parameter.Type.INTEGER:
        return Parameter(parameter.name, Parameter.Type.DOUBLE, float(parameter.value))
    if (kind == Parameter.Type.DOUBLE_ARRAY
            and parameter.type_ == Parameter.Type.INTEGER_ARRAY):
        return Parameter(parameter.name, Parameter.Type.DOUBLE_ARRAY,
                         [float(v) for v in parameter.value])
    return parameter


def _plain(value: Any) -> Any:
    """Parameter values as plain Python (rclpy gives arrays as ``array.array``)."""
    if isinstance(value, (list, tuple)) or type(value).__name__ == "array":
        return list(value)
    return value


ApplyFn = Callable[[dict[str, Any], set[str]], None]


class LiveParameters:
    """Runtime changes of a node's parameters (``ros2 param set``, rqt_reconfigure).

    Integers given for doubles are converted (a pre-set callback); read-only parameters and
    wrong types are refused by rclpy with its reason; a new value is checked with
    :meth:`Param.check` and handed, with all current values, to ``apply(values, changed)``,
    which updates the node's live objects or raises :class:`InertialIdError` saying why it
    cannot (then nothing changed). Every rejection is a ``SetParametersResult`` with a reason,
    never an exception in the node.
    """

    def __init__(self, node: Node, params: Sequence[Param], values: dict[str, Any],
                 apply: ApplyFn | None = None) -> None:
        self.node = node
        self.params = {p.name: p for p in params}
        self.values = dict(values)
        self.apply = apply
        self.unexpected = 0  # changes refused for an error apply() did not foresee
        node.add_pre_set_parameters_callback(self._coerce)
        node.add_on_set_parameters_callback(self._on_set)

    def _coerce(self, parameters: list[Parameter]) -> list[Parameter]:
        return [coerce(self.params.get(p.name), p) for p in parameters]

    def _on_set(self, parameters: list[Parameter]) -> SetParametersResult:
        name = self.node.get_name()
        changes: dict[str, Any] = {}
        try:
            for parameter in parameters:
                param = self.params.get(parameter.name)
                if param is None:  # rclpy's own (use_sim_time): rclpy checks them
                    continue
                if not param.live:
                    raise InertialIdError(f"{name}: {param.name} is read-only: restart the node "
                                          "to change it")
                value = _plain(parameter.value)
                param.check(value, name)
                changes[param.name] = value
            if changes:
                values = {**self.values, **changes}
                if self.apply is not None:
                    self.apply(values, set(changes))
                self.values = values
        except InertialIdError as exc:
            return SetParametersResult(successful=False, reason=str(exc))
        except Exception as exc:  # noqa: BLE001 - a refusal with a reason, never a crash
            self.unexpected += 1
            self.node.get_logger().error(f"parameter change failed: {exc!r}")
            return SetParametersResult(successful=False, reason=f"{name}: {exc}")
        for key, value in changes.items():
            self.node.get_logger().info(f"{key} set to {value!r}")
        return SetParametersResult(successful=True)


def _overrides(node: Node) -> dict[str, Parameter]:
    """The values given to ``node`` at start-up (``-p``, a parameter file's sections for this
    node, ``parameter_overrides``), declared or not.

    rclpy has no public accessor for them: the context keeps only the unparsed arguments,
    and ``automatically_declare_parameters_from_overrides`` would declare every name (a
    misspelt one too) without the descriptors; declaring doubles with dynamic typing instead
    would let any type through and lose the type rqt_reconfigure shows."""
    return node._parameter_overrides  # noqa: SLF001 - see the docstring


def _override(node: Node, param: Param) -> Parameter | None:
    """The value given for ``param`` at start-up (:func:`_overrides`), an integer given for
    a double converted in place."""
    overrides = _overrides(node)
    given = overrides.get(param.name)
    if given is not None:
        overrides[param.name] = given = coerce(param, given)
    return given


def declare_param(node: Node, param: Param) -> Any:
    """Declare one parameter (:func:`descriptor`) and return its value; a value of the wrong
    type or out of range is an :class:`InertialIdError` naming the node and what is wanted."""
    given = _override(node, param)
    try:
        if param.array_type:
            parameter = node.declare_parameter(param.name, _ARRAY_TYPES[param.array_type],
                                               descriptor(param))
            if parameter.type_ == Parameter.Type.NOT_SET:
                return list(param.default)
            return _plain(parameter.value)
        return _plain(node.declare_parameter(param.name, param.default,
                                             descriptor(param)).value)
    except (InvalidParameterTypeException, InvalidParameterValueException) as exc:
        value = _plain(given.value) if given is not None else param.default
        param.check(value, node.get_name())  # raises with the message of validate()
        wanted = _TYPE_WORDS.get(parameter_type(param), "of its declared type")
        if isinstance(exc, InvalidParameterTypeException):
            raise InertialIdError(f"{node.get_name()}: {param.name} must be {wanted}, got "
                                  f"{value!r}") from None
        raise InertialIdError(f"{node.get_name()}: {param.name}: {value!r} rejected") from None


class PipelineNode(Node):
    """A pipeline node (gatherer, kinematics, solver): its parameters are declared when it is
    constructed, everything else (model, estimator, publishers, subscriptions, timers,
    services) in :meth:`setup`: at once for a plain start, or at the lifecycle's configure
    transition for a managed one (:mod:`inertial_id.nodes.managed`). Runtime parameter
    changes reach :meth:`apply_parameters` once it is set up (before, they are only stored).
    """

    NAME = ""
    PARAMS: tuple[Param, ...] = ()
    managed = False
    """Set by :func:`inertial_id.nodes.managed.managed`: :meth:`setup` waits for configure."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(self.NAME, **kwargs)
        self.is_set_up = False
        declare_all(self, self.PARAMS, self._apply)
        if not self.managed:
            self.set_up()

    def set_up(self) -> None:
        """:meth:`setup` with the parameters' current values."""
        self.setup(dict(self.live_parameters.values))
        self.is_set_up = True

    def setup(self, values: dict[str, Any]) -> None:
        """Build the node from its parameter values; raise :class:`InertialIdError` with a
        one-line reason when it cannot (a URDF that does not parse, an unknown frame)."""
        raise NotImplementedError

    def apply_parameters(self, values: dict[str, Any], changed: set[str]) -> None:
        """Apply runtime parameter changes (:class:`LiveParameters`); none by default."""

    def _apply(self, values: dict[str, Any], changed: set[str]) -> None:
        if self.is_set_up:
            self.apply_parameters(values, changed)


def declare(node: Node, name: str, default: Any, description: str,
            array_type: Parameter.Type | None = None) -> Any:
    """Declare a read-only parameter with a description and return its value (for tools'
    own nodes; the pipeline's parameters are in :mod:`inertial_id.settings`)."""
    kinds = {v: k for k, v in _ARRAY_TYPES.items()}
    return declare_param(node, Param(name, default, description,
                                     kinds.get(array_type) if array_type else None))


def declare_all(node: Node, params: Sequence[Param],
                apply: ApplyFn | None = None) -> dict[str, Any]:
    """Declare every parameter of a node's table (:mod:`inertial_id.settings`); their values,
    validated (:class:`InertialIdError` saying which is wrong; a name given at start-up that
    the table lacks is refused as replay refuses it, :func:`check_known`). Live parameters
    then change at runtime through ``apply`` (:class:`LiveParameters`;
    ``node.live_parameters``)."""
    check_known(tuple(params), _overrides(node), node.get_name())
    values = {p.name: declare_param(node, p) for p in params}
    validate(tuple(params), values, node.get_name())
    node.live_parameters = LiveParameters(node, params, values, apply)
    return values


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
    return node.create_timer(period_ns(period) * 1e-9, callback,
                             clock=Clock(clock_type=ClockType.STEADY_TIME), autostart=autostart)


def all_finite(msg: Any) -> bool:
    """Every floating-point field of a ROS message (nested messages and arrays included) is
    finite."""
    for name in msg.get_fields_and_field_types():
        value = getattr(msg, name)
        if isinstance(value, float):
            if not math.isfinite(value):
                return False
        elif hasattr(value, "get_fields_and_field_types"):
            if not all_finite(value):
                return False
        elif isinstance(value, (list, tuple)) and value and not isinstance(value[0], str):
            if hasattr(value[0], "get_fields_and_field_types"):
                if not all(all_finite(item) for item in value):
                    return False
            elif not np.isfinite(np.asarray(value, dtype=float)).all():
                return False
        elif isinstance(value, np.ndarray) or type(value).__name__ == "array":
            array = np.asarray(value)
            if array.dtype.kind == "f" and not np.isfinite(array).all():
                return False
    return True


class FiniteGuard:
    """Publishes a message only when every float in it is finite (:func:`all_finite`): a
    controller must never read a NaN or an inf from this package. ``withheld`` counts the
    others by topic."""

    def __init__(self) -> None:
        self.withheld: Counter[str] = Counter()

    def publish(self, publisher: Any, msg: Any) -> bool:
        """Publish ``msg`` on ``publisher`` if it is finite; whether it was."""
        if all_finite(msg):
            publisher.publish(msg)
            return True
        self.withheld[publisher.topic_name] += 1
        return False


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


def spin(executor: Executor, context: Context | None = None,
         until: Callable[[], bool] = stopping.requested) -> None:
    """Spin one event at a time until ``until()`` (by default: SIGINT/SIGTERM, see
    :mod:`inertial_id.nodes.stopping`) or the context shuts down."""
    ok = (context or rclpy.get_default_context()).ok
    while ok() and not until():
        executor.spin_once(timeout_sec=0.1)


def init(args: Sequence[str] | None = None) -> None:
    """``rclpy.init`` without rclpy's signal handlers: ours only set a flag (``stopping``)."""
    stopping.install()
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)


Number = int | float | bool
StatusFn = Callable[[], tuple[bytes, str, dict[str, Number]]]


def diagnostic_value(value: Number) -> str:
    """One diagnostics value as text a plotting tool reads as a number: integers as they
    are, floats to 6 significant digits (``nan``, ``inf`` spelled so), flags as 1 or 0."""
    if isinstance(value, (bool, np.bool_)):
        return "1" if value else "0"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    return f"{float(value):.6g}"


class Diagnostics:
    """Publishes a node's status on ``/diagnostics`` every ``period`` seconds.

    ``status`` returns ``(level, message, values)``: one number per key (counts, quantities
    with their unit in the key, flags as 1/0), so that PlotJuggler and rqt_plot can plot
    every key; the text goes in the message. The name is ``<node>: <what>``.
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
            values=[KeyValue(key=k, value=diagnostic_value(v)) for k, v in values.items()],
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


class UpstreamLoss:
    """Samples lost on the way from the previous node (``lost``), from the running count its
    batches carry (``samples_before``); a count that goes back (the publisher restarted)
    resyncs. ``missed``: what the publisher had sent before the first batch received from it
    (this node started, or its subscription matched, later): never in transit to this node,
    so not a loss, but counted so that the two nodes' ledgers add up."""

    def __init__(self) -> None:
        self.lost = 0
        self.missed = 0
        self._expected: int | None = None

    def update(self, samples_before: int, count: int) -> None:
        """One batch of ``count`` samples, after ``samples_before`` sent earlier."""
        if self._expected is None or samples_before < self._expected:
            self.missed += samples_before
        elif samples_before > self._expected:
            self.lost += samples_before - self._expected
        self._expected = samples_before + count


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
