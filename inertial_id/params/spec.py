"""A node parameter's definition and its checks, ROS-free: :class:`Param` (name, default,
description, unit, range, live or read-only), the check of unknown names and of values, and
the help text. The tables of every node's parameters are in :mod:`inertial_id.params.table`;
the conversion of their values into the core's settings in :mod:`inertial_id.params.settings`.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from inertial_id.core.errors import InertialIdError


@dataclass(frozen=True)
class Param:
    """One node parameter: name, default, description; ``array_type`` types an empty list
    (``"string"`` or ``"double"``). Numbers (and the entries of a ``"double"`` list) must be
    finite and within ``[low, high]`` (``low`` excluded with ``open_low``), in ``unit``.
    ``live``: the node applies a new value while it runs (``ros2 param set``); the others
    are read-only (a change needs a restart: the model, the filter, the estimator's kind)."""

    name: str
    default: Any
    description: str
    array_type: str | None = None
    low: float | None = None
    high: float | None = None
    open_low: bool = False
    unit: str = ""
    live: bool = False

    @property
    def numeric(self) -> bool:
        """A number or a list of numbers (not a flag, not text)."""
        return self.array_type == "double" or (
            isinstance(self.default, (int, float)) and not isinstance(self.default, bool))

    @property
    def range_text(self) -> str:
        """The allowed range in words ("" when any finite number goes)."""
        return self._range_text()

    def _range_text(self) -> str:
        low = "" if self.low is None else f"{'>' if self.open_low else '>='} {self.low:g}"
        high = "" if self.high is None else f"<= {self.high:g}"
        return " and ".join(part for part in (low, high) if part)

    def check(self, value: Any, node: str) -> None:
        """Raise :class:`InertialIdError` saying what is wrong unless ``value`` is valid."""
        numbers = value if self.array_type == "double" else [value]
        if isinstance(self.default, bool) or not (
                isinstance(self.default, (int, float)) or self.array_type == "double"):
            return
        for number in numbers:
            if isinstance(number, bool) or not isinstance(number, (int, float)):
                raise InertialIdError(f"{node}: {self.name} must be a number, got {number!r}")
            ok = math.isfinite(number)
            if ok and self.low is not None:
                ok = number > self.low if self.open_low else number >= self.low
            if ok and self.high is not None:
                ok = number <= self.high
            if not ok:
                wanted = " ".join(("a finite number", self._range_text())).strip()
                raise InertialIdError(f"{node}: {self.name} must be {wanted}, got {number!r}")



ROS_PARAMETERS = frozenset({"use_sim_time", "start_type_description_service"})
"""The parameters rclpy declares on every node itself: known to every node, in no table."""

SHARED_PARAMETERS = frozenset({"sensor_frame", "gravity", "locked_joint_names",
                               "locked_joint_positions"})
"""The robot model's parameters (:data:`~inertial_id.params.table.MODEL_PARAMS`): one value for
the whole pipeline, given once in a parameter file's ``/**`` section, which reaches every node.
The nodes that use them declare them; the others (solver, applier) ignore them instead of
refusing them as misspelt (:func:`check_known`)."""


def check_known(params: tuple[Param, ...], names: Iterable[str], node: str) -> None:
    """Raise :class:`InertialIdError` ``<node> has no parameter(s) a, b`` for the ``names``
    that ``params`` does not list (nor :data:`ROS_PARAMETERS`, nor the robot model's
    :data:`SHARED_PARAMETERS`, which a node that does not use them ignores): a misspelt key in
    a parameter file, refused in the same words by a node at start and by replay."""
    unknown = sorted(set(names) - {p.name for p in params} - ROS_PARAMETERS
                     - SHARED_PARAMETERS)
    if unknown:
        raise InertialIdError(f"{node} has no parameter(s) {', '.join(unknown)}")


def with_defaults(params: tuple[Param, ...], values: Mapping[str, Any],
                  node: str = "") -> dict[str, Any]:
    """Defaults overridden by ``values``; an unknown name is an error naming the node
    (:func:`check_known`)."""
    check_known(params, values, node or "node")
    known = {p.name: p.default for p in params}
    known.update({k: v for k, v in values.items() if k in known})
    validate(params, known, node or "node")
    return known


def default_text(value: Any) -> str:
    """A default as it is written in a parameter file."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list):
        return "[" + ", ".join(default_text(v) for v in value) + "]"
    return repr(value)


def parameter_help(params: Iterable[Param]) -> str:
    """The parameters of a table as a help text: per parameter its name, default, unit,
    range and whether a change applies while the node runs (``live``; the others are
    read-only), then its description."""
    lines = []
    for param in params:
        facts = [f"default {default_text(param.default)}"]
        facts += [f"unit {param.unit}"] if param.unit else []
        facts += [param.range_text] if param.range_text else []
        facts.append("live" if param.live else "read-only")
        lines.append(f"  {param.name}  ({', '.join(facts)})")
        lines += textwrap.wrap(param.description, 92, initial_indent=" " * 6,
                               subsequent_indent=" " * 6)
    return "\n".join(lines)


def validate(params: tuple[Param, ...], values: Mapping[str, Any], node: str) -> None:
    """Check every value of ``values`` that ``params`` lists (:meth:`Param.check`)."""
    for param in params:
        if param.name in values:
            param.check(values[param.name], node)

