"""The one ledger of a gathering's drops (:mod:`inertial_id.core.gathering.ledger`): the
messages refused before the synchronizer and the synchronizer's own counters, read live,
under the keys the node's diagnostics and replay's data ledger show."""

from __future__ import annotations

import contextlib
from collections import Counter

import numpy as np
import pytest

from inertial_id.core.errors import DuplicateJointError, SampleError
from inertial_id.core.gathering.gatherer import Gathering
from inertial_id.core.gathering.ledger import OTHER_FRAME, DropLedger, OtherFrameError, drop_key
from inertial_id.core.samples import JointStateSample, WrenchSample
from inertial_id.core.simulation import bundled_urdf_path
from inertial_id.core.timepolicy import RESETS


def test_keys_name_the_kind_and_the_errors_reason() -> None:
    assert drop_key("wrench", SampleError("nan")) == "wrench_invalid"
    assert drop_key("joint_state", DuplicateJointError("j1")) == "joint_state_duplicate_joints"
    assert drop_key("wrench", OtherFrameError("tool")) == OTHER_FRAME == "wrench_other_frame"


def test_the_ledger_adds_refusals_to_the_synchronizers_counters_read_live() -> None:
    counters: Counter[str] = Counter()
    ledger = DropLedger()
    ledger.track(counters)
    assert ledger.refuse("wrench_invalid", "NaN in the wrench") == "wrench_invalid"
    ledger.refuse("joint_state_before_urdf", "no URDF yet")
    counters.update({"wrench_gap": 2, "joint_state_gap": 3, "joint_state_spike": 1,
                     RESETS: 4})
    assert ledger.dropped() == {"wrench_gap": 2, "joint_state_gap": 3,
                                "joint_state_spike": 1, "wrench_invalid": 1,
                                "joint_state_before_urdf": 1}
    assert ledger.resets == 4
    assert ledger.wrench_samples() == {"wrench_gap": 2, "joint_state_gap": 3,
                                       "wrench_invalid": 1}
    assert "joint_state_gap" not in ledger.by_kind_prefix()
    assert ledger.last_error["wrench_invalid"] == "NaN in the wrench"


def test_a_gathering_counts_what_add_refuses_before_raising() -> None:
    """The node's path (one message, an exception) and replay's (a block, a count) leave
    the same ledger."""
    one, block = Gathering(bundled_urdf_path()), Gathering(bundled_urdf_path())
    names = one.joint_names
    messages = [JointStateSample(0.0, names, np.zeros(len(names)), np.zeros(len(names))),
                WrenchSample(0.0, "ft", np.zeros(6)),
                WrenchSample(1e-3, "ft", np.full(6, np.nan)),
                JointStateSample(2e-3, [*names, names[0]], [0.0] * len(names) + [1.0],
                                 [0.0] * (len(names) + 1))]
    for message in messages:
        with contextlib.suppress(SampleError):
            one.add(message)
    block.add_messages(messages)
    assert one.ledger.refused == block.ledger.refused == {
        "wrench_invalid": 1, "joint_state_duplicate_joints": 1}
    with pytest.raises(SampleError):
        one.add(WrenchSample(3e-3, "ft", np.ones(5)))
    assert one.ledger.refused["wrench_invalid"] == 2
