"""Parameters as ROS 2 users expect them: described (unit, range for rqt's sliders), read-only
only where a change needs a restart, tunables applied while the node runs, an integer accepted
for a double, and no value of any type able to hurt a node (hypothesis, in-process).
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import pytest
import rclpy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from node_harness import Harness
from rcl_interfaces.msg import SetParametersResult
from rclpy.node import Node
from rclpy.parameter import Parameter
from recordings import Recording

from inertial_id.core.errors import InertialIdError
from inertial_id.core.estimation.anomaly import T2Monitor
from inertial_id.core.simulation import bundled_urdf_path
from inertial_id.nodes.common import period_ns
from inertial_id.nodes.gatherer import Gatherer
from inertial_id.nodes.identify import Identify
from inertial_id.nodes.kinematics import Kinematics
from inertial_id.nodes.simulator import Simulator
from inertial_id.nodes.solver import Solver
from inertial_id.params.settings import online_config
from inertial_id.params.table import JOINT_TORQUE_PARAMS, NODE_PARAMS, solver_params

URDF = bundled_urdf_path()
CLASSES = {"gatherer": Gatherer, "kinematics": Kinematics, "solver": Solver,
           "simulator": Simulator, "identify": Identify}


@pytest.fixture
def context() -> Iterator[rclpy.Context]:
    context = rclpy.Context()
    rclpy.init(context=context)
    yield context
    rclpy.shutdown(context=context)


def make(name: str, context: rclpy.Context, **values: object) -> Node:
    urdf = {} if name in ("solver", "simulator") else {"urdf_path": URDF}
    overrides = [Parameter(k, value=v) for k, v in {**urdf, **values}.items()]
    return CLASSES[name](context=context, parameter_overrides=overrides)


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_every_parameter_is_described_with_unit_range_and_read_only_flag(
        name: str, context: rclpy.Context) -> None:
    node = make(name, context)
    for param in getattr(node, "declared_params", lambda: NODE_PARAMS[name])():
        d = node.describe_parameter(param.name)
        assert d.description.startswith(param.description), param.name
        if param.numeric:
            assert param.unit and d.description.endswith(f"[{param.unit}]"), param.name
        assert d.read_only == (not param.live), param.name
        if param.low is not None or param.high is not None:
            if isinstance(param.default, float):
                (r,) = d.floating_point_range
                assert r.from_value == (param.low if param.low is not None else -math.inf) or (
                    param.low is None and r.from_value < -1e300), param.name
                assert r.to_value == param.high or (param.high is None and r.to_value > 1e300)
            elif isinstance(param.default, int) and not param.array_type:
                (r,) = d.integer_range
                assert r.from_value >= param.low, param.name
        assert param.range_text in d.additional_constraints, param.name
        assert param.allowed_text in d.additional_constraints, param.name
    node.destroy_node()


def test_restart_only_parameters_are_read_only_and_tunables_are_not() -> None:
    live = {p.name for p in NODE_PARAMS["solver"] if p.live}
    assert {"confidence", "on_samples", "off_samples", "release", "force_noise_std",
            "torque_noise_std", "converged_mass_std", "converged_com_std",
            "converged_inertia_std", "publish_rate", "contact_decimation",
            "forgetting_factor", "gate_margin"} <= live
    assert not live & {"urdf_path", "wrench_sign", "method", "window_samples", "mode"}
    gatherer = {p.name for p in NODE_PARAMS["gatherer"] if p.live}
    assert gatherer == {"publish_rate", "realtime_priority"}
    assert not any(p.live for p in NODE_PARAMS["kinematics"] + NODE_PARAMS["simulator"])


def test_the_ft_solver_declares_no_joint_torque_parameters_and_ignores_them(
        context: rclpy.Context) -> None:
    """links_*, payload_frame and links_file belong to the joint-torque modes: the F/T solver
    does not declare them, and a file that still gives them to it does not stop it (replay
    takes them too); a misspelt name still does."""
    joint_torque = {p.name for p in JOINT_TORQUE_PARAMS}
    assert {"links_method", "links_decimation", "payload_frame", "links_file"} <= joint_torque
    assert not joint_torque & {p.name for p in solver_params("payload")}
    given = {"links_method": "qp", "links_decimation": 3, "payload_frame": "tool0"}
    solver = make("solver", context, **given)
    try:
        assert not any(solver.has_parameter(name) for name in joint_torque)
        assert solver.online is not None and solver.has_parameter("confidence")
    finally:
        solver.destroy_node()
    online_config(given)  # replay's solver section
    links = make("solver", context, mode="links", links_method="qp")
    try:
        assert all(links.has_parameter(name) for name in joint_torque)
        assert links.get_parameter("links_method").value == "qp"
    finally:
        links.destroy_node()
    with pytest.raises(InertialIdError, match="solver has no parameter.s. links_methd"):
        make("solver", context, links_methd="qp")


def test_a_wrong_choice_or_length_stops_a_node_in_one_line(context: rclpy.Context) -> None:
    """The table's allowed values, checked at start (and by ``ros2 param set``,
    :func:`test_links_mode_tunables`)."""
    with pytest.raises(InertialIdError, match="^solver: method must be one of lmi_sdp, "
                                              "manifold, least_squares, pls, got 'sdp'$"):
        make("solver", context, method="sdp")
    with pytest.raises(InertialIdError, match="^kinematics: gravity needs 3 values, got "):
        make("kinematics", context, gravity=[0.0, -9.81])


def test_an_integer_is_accepted_for_a_double(context: rclpy.Context) -> None:
    """``-p publish_rate:=5`` used to end in InvalidParameterTypeException."""
    solver = make("solver", context, publish_rate=5, force_noise_std=1)
    assert solver.get_parameter("publish_rate").type_ == Parameter.Type.DOUBLE
    assert solver.get_parameter("publish_rate").value == 5.0
    assert solver.stage.solve_period == 0.2
    kinematics = make("kinematics", context, gravity=[0, 0, -10])
    assert kinematics.settings.gravity == (0.0, 0.0, -10.0)
    (result,) = solver.set_parameters([Parameter("confidence", value=1)])  # out of range
    assert not result.successful
    (result,) = solver.set_parameters([Parameter("publish_rate", value=4)])
    assert result.successful and solver.get_parameter("publish_rate").value == 4.0
    for node in (solver, kinematics):
        node.destroy_node()


def test_a_value_of_the_wrong_type_at_start_up_is_one_line(context: rclpy.Context) -> None:
    with pytest.raises(InertialIdError, match="solver: publish_rate must be a number, got 'x'"):
        make("solver", context, publish_rate="x")


def test_tunables_change_the_live_objects(context: rclpy.Context) -> None:
    solver = make("solver", context)
    before = solver.online
    results = solver.set_parameters([
        Parameter("confidence", value=0.99), Parameter("on_samples", value=5),
        Parameter("off_samples", value=20), Parameter("release", value=0.5),
        Parameter("force_noise_std", value=0.2), Parameter("converged_mass_std", value=0.02),
        Parameter("gate_margin", value=0.1), Parameter("forgetting_factor", value=0.9999),
        Parameter("contact_decimation", value=3), Parameter("publish_rate", value=10.0),
    ])
    assert all(r.successful for r in results), [r.reason for r in results]
    online = solver.online
    assert online is before  # same data, new settings
    assert online.config.confidence == 0.99 and online.monitor.confidence == 0.99
    assert (online.monitor.on_samples, online.monitor.off_samples) == (5, 20)
    assert online.monitor.release == 0.5
    assert online.config.payload.force_noise_std == 0.2
    assert online.identifier.config.forgetting_factor == 0.9999
    assert online.config.converged_mass_std == 0.02 and online.config.gate_margin == 0.1
    assert solver.contacts.decimation == 3
    assert solver.stage.solve_period == 0.1
    gatherer = make("gatherer", context)
    (result,) = gatherer.set_parameters([Parameter("publish_rate", value=50.0)])
    assert result.successful and gatherer.pacer.rate == 50.0
    for node in (solver, gatherer):
        node.destroy_node()


@pytest.mark.parametrize(("name", "value", "reason"), [
    ("confidence", 1.5, "out of range"),
    ("confidence", float("nan"), "out of range"),
    ("publish_rate", 0.0, "publish_rate must be a finite number > 0"),
    ("release", "high", "Wrong parameter type"),
    ("urdf_path", "/tmp/robot.urdf", "read-only"),
    ("method", "least_squares", "read-only"),
    ("training_samples", 5, "out of range"),
])
def test_a_bad_value_is_refused_with_a_reason_and_the_old_one_kept(
        context: rclpy.Context, name: str, value: object, reason: str) -> None:
    solver = make("solver", context)
    old = solver.get_parameter(name).value
    (result,) = solver.set_parameters([Parameter(name, value=value)])
    assert not result.successful and reason in result.reason, result.reason
    assert solver.get_parameter(name).value == old
    assert solver.online.config.confidence == 0.999
    solver.destroy_node()


def test_links_mode_tunables(context: rclpy.Context) -> None:
    solver = make("solver", context, mode="links", urdf_path=URDF)
    (ok,) = solver.set_parameters([Parameter("links_method", value="qp")])
    (bad,) = solver.set_parameters([Parameter("links_method", value="magic")])
    (period,) = solver.set_parameters([Parameter("links_solve_period", value=2)])
    assert ok.successful and solver.joint_mode.stream.options.method == "qp"
    assert not bad.successful and "links_method must be one of" in bad.reason
    assert period.successful and solver.joint_mode.timer.timer_period_ns == 2_000_000_000
    solver.destroy_node()


def test_a_trained_monitor_threshold_follows_the_confidence() -> None:
    rng = np.random.default_rng(0)
    monitor = T2Monitor(training_samples=200)
    monitor.update(np.arange(200.0), rng.normal(size=(200, 6)))
    assert monitor.ready
    low = monitor.threshold
    monitor.reconfigure(0.9999, 200, 3, 10, 0.7)
    assert monitor.threshold > low
    with pytest.raises(InertialIdError):
        monitor.reconfigure(1.0, 200, 3, 10, 0.7)
    assert monitor.confidence == 0.9999  # unchanged by the refused one


# ----------------------------------------------------------------------------------------------
# any value of any type on any parameter of any node (hypothesis)

VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1), st.floats(), st.text(),
    st.lists(st.booleans(), max_size=4), st.lists(st.integers(-(2**63), 2**63 - 1), max_size=7),
    st.lists(st.floats(), max_size=7), st.lists(st.text(), max_size=4),
    st.lists(st.binary(min_size=1, max_size=1), max_size=4),
    # near the valid ranges, where most of the live code runs
    st.floats(-2.0, 2.0), st.integers(-3, 2000), st.floats(1e-12, 1e6),
)


def typed(name: str, node: str) -> st.SearchStrategy:
    """Values of the parameter's own type, mostly near or in its range (and just outside)."""
    param = {p.name: p for p in NODE_PARAMS[node]}.get(name)
    if param is None or isinstance(param.default, bool):
        return st.booleans()
    if param.array_type == "double" or isinstance(param.default, list):
        return st.lists(st.floats(-20, 20), max_size=7)
    if isinstance(param.default, str):
        return st.sampled_from(["sdp", "qp", "wls", "pls", "x", param.default])
    low = -10.0 if param.low is None else param.low
    high = 10 * max(abs(low), 1.0, abs(param.default)) if param.high is None else param.high
    if isinstance(param.default, int):
        return st.integers(int(low) - 1, int(high) + 1)
    return st.one_of(st.floats(low, high), st.sampled_from([low, high, param.default * 2]),
                     st.floats(min_value=high, exclude_min=True))


def _value(node: Node, name: str) -> object:
    return node._parameters[name].value  # noqa: SLF001 - also an array declared without value


def _check_set(node: Node, name: str, value: object) -> None:
    old = _value(node, name)
    try:
        parameter = Parameter(name, value=value)
    except (TypeError, ValueError):
        return  # not a parameter value at all: rclpy refuses it before the node
    results = node.set_parameters([parameter])
    assert len(results) == 1 and isinstance(results[0], SetParametersResult)
    if results[0].successful:
        new = _value(node, name)
        assert new == value or (isinstance(value, (int, list)) and np.allclose(new, value))
    else:
        assert results[0].reason
        current = _value(node, name)
        assert current is old or current == old or (
            isinstance(old, float) and math.isnan(old) and math.isnan(current))


@pytest.fixture(scope="module")
def live_pipeline() -> Iterator[tuple[Harness, Recording]]:
    data = Recording(6.0)
    h = Harness()
    h.stream(data, 0.0, 2.5)
    h.settle()
    try:
        yield h, data
    finally:
        h.close()


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(which=st.sampled_from(["gatherer", "kinematics", "solver"]), data=st.data())
def test_any_value_on_any_pipeline_parameter_is_accepted_or_refused_cleanly(
        live_pipeline: tuple[Harness, Recording], which: str, data: st.DataObject) -> None:
    h, _ = live_pipeline
    node = h.nodes[which]
    names = sorted(node._parameters)  # noqa: SLF001 - every declared parameter, rclpy's too
    name = data.draw(st.sampled_from(names))
    _check_set(node, name, data.draw(st.one_of(VALUES, typed(name, which))))
    h.spin(0.01)


def test_the_pipeline_lives_on_after_the_random_parameters(
        live_pipeline: tuple[Harness, Recording]) -> None:
    """Runs after the hypothesis test (file order): every node still reports, and nothing
    inconsistent was published; no change failed in a way apply() did not foresee."""
    h, data = live_pipeline
    h.stream(data, 2.5, 6.0)
    h.fresh_diagnostics(timeout=10.0)
    h.assert_nothing_inconsistent()
    for node in h.nodes.values():
        assert node.live_parameters.unexpected == 0


@pytest.mark.parametrize("mode", ["links", "simulator"])
@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_value_on_links_mode_and_simulator_parameters(
        context: rclpy.Context, mode: str, data: st.DataObject) -> None:
    node = (make("simulator", context) if mode == "simulator"
            else make("solver", context, mode="links", urdf_path=URDF))
    try:
        names = sorted(node._parameters)  # noqa: SLF001
        name = data.draw(st.sampled_from(names))
        kind = "simulator" if mode == "simulator" else "solver"
        _check_set(node, name, data.draw(st.one_of(VALUES, typed(name, kind))))
        assert node.live_parameters.unexpected == 0
    finally:
        node.destroy_node()


def test_timer_periods_stay_within_int64() -> None:
    """float(2**63 - 1) rounds up to 2**63, which rcl on Jazzy refuses."""
    assert period_ns(9223372037.0) == 2**63 - 1
    assert period_ns(1e300) == 2**63 - 1
    assert period_ns(0.0) == 1 and period_ns(0.5) == 500_000_000
