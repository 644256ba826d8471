"""Parameters of a node from its table (:mod:`inertial_id.params.table`): the descriptors it
declares them with, the values given at start-up and their coercion, validation with one-line
messages, and runtime changes (:class:`LiveParameters`).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Sequence
from typing import Any

from rcl_interfaces.msg import (
    FloatingPointRange,
    IntegerRange,
    ParameterDescriptor,
    SetParametersResult,
)
from rclpy.exceptions import InvalidParameterTypeException, InvalidParameterValueException
from rclpy.node import Node
from rclpy.parameter import Parameter

from inertial_id.core.errors import InertialIdError
from inertial_id.params.spec import Param, check_known, validate

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
    sliders; a one-sided range ends at the type's largest value), the allowed values in words
    (``additional_constraints``: finite numbers, the range, the choices, the length:
    :attr:`Param.allowed_text`), read-only unless the node applies a change while running
    (:attr:`Param.live`)."""
    unit = f" [{param.unit}]" if param.unit else ""
    allowed = param.allowed_text
    out = ParameterDescriptor(
        description=param.description + unit, read_only=not param.live,
        additional_constraints=f"finite, {allowed}" if param.range_text else allowed,
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


def declare(node: Node, name: str, default: Any, description: str,
            array_type: Parameter.Type | None = None) -> Any:
    """Declare a read-only parameter with a description and return its value (for tools'
    own nodes; the pipeline's parameters are in :mod:`inertial_id.params.table`)."""
    kinds = {v: k for k, v in _ARRAY_TYPES.items()}
    return declare_param(node, Param(name, default, description,
                                     kinds.get(array_type) if array_type else None))


def given_value(node: Node, name: str, default: Any) -> Any:
    """The value given to ``node`` for ``name`` at start-up (:func:`_overrides`), before it
    is declared; ``default`` when none is."""
    given = _overrides(node).get(name)
    return default if given is None or given.value is None else _plain(given.value)


def declare_all(node: Node, params: Sequence[Param], apply: ApplyFn | None = None,
                known: Sequence[Param] = ()) -> dict[str, Any]:
    """Declare every parameter of a node's table (:mod:`inertial_id.params.table`); their values,
    validated (:class:`InertialIdError` saying which is wrong; a name given at start-up that
    neither the table nor ``known`` lists is refused as replay refuses it,
    :func:`check_known`). A name only ``known`` lists (the solver's joint-torque parameters
    given to the F/T solver: another mode's) is not declared: it is ignored, with a log line.
    Live parameters then change at runtime through ``apply`` (:class:`LiveParameters`;
    ``node.live_parameters``)."""
    overrides = _overrides(node)
    check_known((*params, *known), overrides, node.get_name())
    declared = {p.name for p in params}
    unused = sorted({p.name for p in known} & set(overrides) - declared)
    if unused:
        node.get_logger().info(f"not used here, ignored: {', '.join(unused)} (parameters of "
                               "another mode)")
    values = {p.name: declare_param(node, p) for p in params}
    validate(tuple(params), values, node.get_name())
    node.live_parameters = LiveParameters(node, params, values, apply)
    return values
