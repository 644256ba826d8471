"""Shared wiring for the inertial_id nodes: parameters, QoS, stamps, robot description.

Contents, one module per concept: :mod:`~inertial_id.nodes.common.parameters` (descriptors,
values given at start-up, validation, live changes), :mod:`~inertial_id.nodes.common.node`
(:class:`PipelineNode`, the set-up check), :mod:`~inertial_id.nodes.common.qos` (QoS
profiles), :mod:`~inertial_id.nodes.common.clock` (stamps, timers),
:mod:`~inertial_id.nodes.common.finite` (no NaN or inf published),
:mod:`~inertial_id.nodes.common.diagnostics` (``/diagnostics``),
:mod:`~inertial_id.nodes.common.streams` (dropped, lost and silent inputs),
:mod:`~inertial_id.nodes.common.description` (the URDF), :mod:`~inertial_id.nodes.common.
spinning` (init, executor, spin); the public names are importable from this package.
"""

from inertial_id.nodes.common.batches import BatchLink
from inertial_id.nodes.common.clock import (
    period_ns,
    set_period,
    steady_timer,
    to_seconds,
    to_stamp,
)
from inertial_id.nodes.common.description import RobotDescription
from inertial_id.nodes.common.diagnostics import (
    Diagnostics,
    Number,
    RecentValues,
    StatusFn,
    diagnostic_value,
)
from inertial_id.nodes.common.finite import FiniteGuard, all_finite
from inertial_id.nodes.common.node import PipelineNode, check
from inertial_id.nodes.common.parameters import (
    DOUBLE_MAX,
    INT64_MAX,
    ApplyFn,
    LiveParameters,
    coerce,
    declare,
    declare_all,
    declare_param,
    descriptor,
    given_value,
    parameter_type,
)
from inertial_id.nodes.common.qos import latched_qos, pipeline_qos, sensor_qos
from inertial_id.nodes.common.spinning import init, make_executor, shut_down, spin
from inertial_id.nodes.common.streams import DropWatch, Silence, UpstreamLoss

__all__ = ["ApplyFn", "BatchLink", "DOUBLE_MAX", "Diagnostics", "DropWatch", "FiniteGuard",
           "INT64_MAX", "LiveParameters", "Number", "PipelineNode", "RecentValues",
           "RobotDescription", "Silence", "StatusFn", "UpstreamLoss", "all_finite", "check",
           "coerce", "declare", "declare_all", "declare_param", "descriptor", "diagnostic_value",
           "given_value", "init", "latched_qos", "make_executor", "parameter_type", "period_ns",
           "pipeline_qos", "sensor_qos", "set_period", "shut_down", "spin", "steady_timer",
           "to_seconds", "to_stamp"]
