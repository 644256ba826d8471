"""A target's fields (:mod:`inertial_id.core.handoff`) as the request the robot's software takes.

The drivers' interface packages (``ur_msgs``, ``franka_msgs``, ``xarm_msgs``) are loaded by
name at run time, so the package installs and runs without them and uses whatever version the
robot has. Their generations differ (UR's ``SetPayload``: the classic ``mass`` and
``center_of_gravity``; the 2026 extension's ``ixx ... iyz`` and ``transition_time``; 7.0's
``payload``), so the request is filled by introspection (``get_fields_and_field_types``): the
fields the installed type has are set, and the ones it lacks are named, so that the node can
say what the robot will not receive. A controller's parameters become an
``rcl_interfaces/srv/SetParameters`` request.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

from rcl_interfaces.msg import Parameter as ParameterMsg
from rclpy.parameter import Parameter

from inertial_id.core.errors import InertialIdError
from inertial_id.core.estimate import Estimate
from inertial_id.core.handoff import TARGETS, Options, Target

INERTIA_FIELD = re.compile(r"(^|\.)(i[xyz]{2}|load_inertia)$")
"""A request field that carries the inertia (UR's ``ixx``..., Franka's ``load_inertia``)."""


def service_type(name: str) -> Any:
    """The service class of ``name`` (``ur_msgs/srv/SetPayload``); :class:`InertialIdError`
    naming it when its package is not installed."""
    package, kind, service = name.split("/")
    try:
        return getattr(importlib.import_module(f"{package}.{kind}"), service)
    except (ImportError, AttributeError) as exc:
        raise InertialIdError(f"{name} is not installed ({exc}): source the workspace that "
                              f"has {package}") from None


def request_fields(request_class: Any) -> set[str]:
    """The dotted names of every leaf field of a request type (``center_of_gravity.x``)."""
    names = set()
    for name, kind in request_class.get_fields_and_field_types().items():
        sub = _message_class(request_class, name, kind)
        names.update({f"{name}.{n}" for n in request_fields(sub)} if sub else {name})
    return names


def _message_class(owner: Any, name: str, kind: str) -> Any:
    """The class of a nested message field, or None for a primitive or an array."""
    if "/" not in kind or kind.startswith("sequence<") or kind.endswith("]"):
        return None
    return type(getattr(owner(), name))


def _leaves(fields: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` as ``{"a.b": 1}``."""
    out: dict[str, Any] = {}
    for key, value in fields.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(_leaves(value, f"{name}."))
        else:
            out[name] = value
    return out


def fitting_fields(target: Target, request_class: Any, estimate: Estimate,
                   options: Options) -> dict[str, Any]:
    """``estimate``'s fields for ``target``'s service as the installed request takes them:
    of the targets with that service type (``ur`` and ``ur7``), the one whose fields the
    request has most of (``target`` on a tie)."""
    kind = target.service[1]
    have = request_fields(request_class)
    scored = [(len(have & set(_leaves(fields))), t is target, fields)
              for t in TARGETS.values() if t.service[1] == kind
              for fields in (t.fields(estimate, options),)]
    return max(scored, key=lambda s: s[:2])[2]


def fill(request: Any, fields: Mapping[str, Any]) -> list[str]:
    """Set every leaf of ``fields`` (nested mappings for nested messages) that ``request``
    has; the dotted names of those it lacks. ``transition_time`` in seconds goes into a
    ``builtin_interfaces/Duration`` when the type has one there."""
    missing = []
    for name, value in _leaves(fields).items():
        owner, *path = [request, *name.split(".")]
        for part in path[:-1]:
            owner = getattr(owner, part, None)
        leaf = path[-1]
        if owner is None or leaf not in owner.get_fields_and_field_types():
            missing.append(name)
            continue
        current = getattr(owner, leaf)
        if hasattr(current, "sec") and hasattr(current, "nanosec"):  # a Duration
            whole = int(value)
            current.sec, current.nanosec = whole, int(round((value - whole) * 1e9))
        elif isinstance(value, Sequence):
            setattr(owner, leaf, [float(v) for v in value])
        else:
            setattr(owner, leaf, type(current)(value))
    return missing


def refusal(response: Any) -> str:
    """Why a driver refused a request ("" when it accepted): ``success`` false (UR, Franka,
    with ``error`` or ``message``), or ``ret`` not 0 (xArm)."""
    fields = response.get_fields_and_field_types()
    said = next((getattr(response, k) for k in ("error", "message") if k in fields), "")
    if "success" in fields and not response.success:
        return said or "success: false"
    if "ret" in fields and response.ret != 0:
        return f"ret {response.ret}" + (f": {said}" if said else "")
    return ""


def parameter_messages(fields: Mapping[str, Any], prefix: str = "") -> list[ParameterMsg]:
    """The controller's parameters (nested mappings joined with dots under ``prefix``) as
    ``rcl_interfaces/msg/Parameter``: numbers as doubles, lists as double arrays, text."""
    base = f"{prefix.strip('.')}." if prefix.strip(".") else ""
    out = []
    for name, value in _leaves(fields, base).items():
        if isinstance(value, Sequence) and not isinstance(value, str):
            value = [float(v) for v in value]
        elif not isinstance(value, str):
            value = float(value)
        out.append(Parameter(name, value=value).to_parameter_msg())
    return out
