"""The parameter table's allowed values, lengths and scope, ROS-free: one check
(:meth:`Param.check`) refuses a wrong choice or length in one line naming what is allowed,
wherever a value comes from (node start, ``ros2 param set``, a replay file); the defaults
are the core's; the scope says which mode declares a parameter and what replay reads."""

from __future__ import annotations

import pytest

from inertial_id.core.errors import InertialIdError
from inertial_id.core.gathering.gatherer import GathererSettings
from inertial_id.params.settings import gatherer_settings, kinematics_settings, online_config
from inertial_id.params.spec import ROS_PARAMETERS, offline_values
from inertial_id.params.table import (
    NODE_PARAMS,
    OFFLINE_NODES,
    SOLVER_PARAMS,
    TORQUE_MODES,
    solver_params,
)

ALL = [(node, p) for node, params in NODE_PARAMS.items() for p in params]
CHOICES = [(node, p) for node, p in ALL if p.choices]
LENGTHS = [(node, p) for node, p in ALL if p.length is not None]


def _ids(cases: list) -> list[str]:
    return [f"{node}.{p.name}" for node, p in cases]


@pytest.mark.parametrize(("node", "param"), CHOICES, ids=_ids(CHOICES))
def test_a_wrong_choice_is_refused_in_one_line_naming_the_allowed_values(node, param) -> None:
    for choice in param.choices:
        param.check(choice, node)
    for wrong in ("magic", 3, None, list(param.choices)):
        with pytest.raises(InertialIdError) as info:
            param.check(wrong, node)
        message = str(info.value)
        assert "\n" not in message
        assert message.startswith(f"{node}: {param.name} must be one of "), message
        assert all(choice in message for choice in param.choices if choice), message
        assert message.endswith(f"got {wrong!r}"), message


@pytest.mark.parametrize(("node", "param"), LENGTHS, ids=_ids(LENGTHS))
def test_a_list_of_the_wrong_length_is_refused(node, param) -> None:
    param.check([0.5] * param.length, node)
    for wrong in ([0.5] * (param.length - 1), [0.5] * (param.length + 1), 0.5):
        with pytest.raises(InertialIdError, match=f"^{node}: {param.name} needs "
                                                  f"{param.length} values, got "):
            param.check(wrong, node)


def test_the_settings_refuse_through_the_table() -> None:
    """What the nodes and replay build their settings with refuses a wrong choice or length
    with the table's words (the hand-written checks are gone)."""
    with pytest.raises(InertialIdError, match="^kinematics: gravity needs 3 values"):
        kinematics_settings({"gravity": [0.0, -9.81]})
    with pytest.raises(InertialIdError, match="^solver: method must be one of lmi_sdp, "
                                              "manifold, least_squares, pls, got 'sdp'$"):
        online_config({"method": "sdp"})
    with pytest.raises(InertialIdError, match="^solver: wrench_sign must be one of "):
        online_config({"wrench_sign": "payload-on-sensor"})


def test_every_default_passes_its_own_check_but_the_required_target() -> None:
    """A default outside its choices or of the wrong length is a table mistake; the applier's
    target has none (the node refuses to start without one)."""
    failing = []
    for node, param in ALL:
        try:
            param.check(param.default, node)
        except InertialIdError:
            failing.append(f"{node}.{param.name}")
    assert failing == ["applier.target"]


def test_the_table_defaults_are_the_cores() -> None:
    assert gatherer_settings({}) == GathererSettings()


def test_the_joint_torque_parameters_are_declared_in_their_modes_only() -> None:
    torque = {p.name for p in SOLVER_PARAMS if p.modes}
    assert {"links_method", "links_window", "payload_frame", "links_file"} <= torque
    assert not torque & {p.name for p in solver_params("payload")}
    for mode in TORQUE_MODES:
        assert solver_params(mode) == SOLVER_PARAMS


def test_offline_values_leave_out_node_only_and_ros_parameters_only() -> None:
    """Replay's view of a section: the node-only values and rclpy's own go, a misspelt name
    stays (to be refused)."""
    section = {p.name: p.default for p in NODE_PARAMS["gatherer"]}
    section |= {name: True for name in ROS_PARAMETERS} | {"publish_rat": 5.0}
    kept = offline_values(NODE_PARAMS["gatherer"], section)
    assert set(section) - set(kept) == {"queue_depth", "publish_rate", "realtime_priority",
                                        *ROS_PARAMETERS}
    assert "publish_rat" in kept and "filter_window" in kept
    assert OFFLINE_NODES == ("gatherer", "kinematics", "solver")
