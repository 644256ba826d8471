"""A node parameter's definition and its checks, ROS-free: :class:`Param` (name, default,
description, unit, range, allowed values, length, live or read-only, scope), the check of
unknown names and of values, the values offline tools read, and the help text. The tables of
every node's parameters are in :mod:`inertial_id.params.table`; the conversion of their values
into the core's settings in :mod:`inertial_id.params.settings`.
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
    ``choices``: the values a text may take (empty: any text); ``length``: the number of
    entries a list must have (None: any number).
    ``live``: the node applies a new value while it runs (``ros2 param set``); the others
    are read-only (a change needs a restart: the model, the filter, the estimator's kind).

    Scope: the node tables that list a parameter declare it (:mod:`inertial_id.params.table`),
    in the solver ``modes`` listed (empty: every mode); ``offline``: replay and the offline
    tools read it too, else it is the running node's only (publish rates, queue depths,
    the files its services write) and they ignore a value given for it
    (:func:`offline_values`)."""

    name: str
    default: Any
    description: str
    array_type: str | None = None
    low: float | None = None
    high: float | None = None
    open_low: bool = False
    unit: str = ""
    live: bool = False
    choices: tuple[str, ...] = ()
    length: int | None = None
    modes: tuple[str, ...] = ()
    offline: bool = True

    @property
    def numeric(self) -> bool:
        """A number or a list of numbers (not a flag, not text)."""
        return self.array_type == "double" or (
            isinstance(self.default, (int, float)) and not isinstance(self.default, bool))

    @property
    def range_text(self) -> str:
        """The allowed range in words ("" when any finite number goes)."""
        return self._range_text()

    @property
    def allowed_text(self) -> str:
        """What a value may be, in words: its range, its choices, its length ("": anything
        of its type)."""
        choices = f"one of {self._choices_text()}" if self.choices else ""
        length = f"{self.length} values" if self.length is not None else ""
        return ", ".join(part for part in (self._range_text(), choices, length) if part)

    def _range_text(self) -> str:
        low = "" if self.low is None else f"{'>' if self.open_low else '>='} {self.low:g}"
        high = "" if self.high is None else f"<= {self.high:g}"
        return " and ".join(part for part in (low, high) if part)

    def _choices_text(self) -> str:
        return ", ".join(choice or default_text(choice) for choice in self.choices)

    def check(self, value: Any, node: str) -> None:
        """Raise :class:`InertialIdError` saying in one line what is wrong unless ``value``
        is valid: one of :attr:`choices`, :attr:`length` entries long, numbers finite and
        within the range."""
        if self.choices and value not in self.choices:
            raise InertialIdError(f"{node}: {self.name} must be one of "
                                  f"{self._choices_text()}, got {value!r}")
        if self.length is not None and (
                not isinstance(value, (list, tuple)) or len(value) != self.length):
            raise InertialIdError(f"{node}: {self.name} needs {self.length} values, got "
                                  f"{value!r}")
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


def offline_values(params: tuple[Param, ...], values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` without those of the node-only parameters of ``params``
    (:attr:`Param.offline` false) and rclpy's own (:data:`ROS_PARAMETERS`): what replay and
    the offline tools read of a node's section of a parameter file. A name ``params`` does not
    list stays, to be refused as misspelt (:func:`check_known`)."""
    node_only = {p.name for p in params if not p.offline} | ROS_PARAMETERS
    return {name: value for name, value in values.items() if name not in node_only}


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
    allowed values, whether a change applies while the node runs (``live``; the others are
    read-only) and its scope where it is not every mode's and replay's too
    (:func:`scope_text`), then its description."""
    lines = []
    for param in params:
        facts = [f"default {default_text(param.default)}"]
        facts += [f"unit {param.unit}"] if param.unit else []
        facts += [param.allowed_text] if param.allowed_text else []
        facts.append("live" if param.live else "read-only")
        facts += [scope_text(param)] if param.modes or not param.offline else []
        lines.append(f"  {param.name}  ({', '.join(facts)})")
        lines += textwrap.wrap(param.description, 92, initial_indent=" " * 6,
                               subsequent_indent=" " * 6)
    return "\n".join(lines)


def scope_text(param: Param) -> str:
    """Where a parameter counts, in words: ``node and replay`` or ``node only``, and the
    solver modes that declare it."""
    where = "node and replay" if param.offline else "node only"
    return where + (f"; modes {', '.join(param.modes)}" if param.modes else "")


def validate(params: tuple[Param, ...], values: Mapping[str, Any], node: str) -> None:
    """Check every value of ``values`` that ``params`` lists (:meth:`Param.check`)."""
    for param in params:
        if param.name in values:
            param.check(values[param.name], node)

