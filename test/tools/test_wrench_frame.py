"""A stray wrench in another frame than the stream's is dropped and counted in the core.

:class:`~inertial_id.core.gathering.gatherer.Gathering` drops it (``wrench_other_frame``) on its
per-message path (the gatherer node) and on its block path (replay), and replay's ledger
counts it. No rclpy.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from inertial_id.core.gathering.gatherer import FrameFollower, GathererSettings, Gathering
from inertial_id.core.gathering.ledger import OTHER_FRAME, OtherFrameError, drop_key
from inertial_id.core.samples import JointStateSample, WrenchSample
from inertial_id.core.simulation import BUNDLED_SENSOR_FRAME, bundled_urdf_path
from inertial_id.io import bags
from inertial_id.tools.replay import ReplayOptions, replay
from inertial_id.tools.synthetic import START_TIME

JOINTS = ("shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint",
          "wrist_2_joint", "wrist_3_joint")
WRENCH = np.array([1.0, 2.0, -15.0, 0.1, 0.2, 0.0])  # N, N m
STRAY = "tool0"
SETTINGS = GathererSettings(window=0.08, delay=0.004, matched=False)


def _stray(k: int) -> bool:
    """Whether the k-th wrench is in the stray frame (about 1 in 100, never the first)."""
    return k % 97 == 50


def _events(duration: float) -> Iterator[tuple[float, int, int]]:
    """(s, kind 0: joint state at 500 Hz / 1: wrench at 1 kHz, index within the kind)."""
    joints = [(t, 0) for t in np.arange(0.0, duration, 2e-3)]
    wrenches = [(t, 1) for t in np.arange(0.0, duration, 1e-3)]
    counts = [0, 0]
    for t, kind in sorted(joints + wrenches):
        yield float(t), kind, counts[kind]
        counts[kind] += 1


def _position(t: float) -> np.ndarray:
    return 0.3 * np.sin(np.pi * t + np.arange(len(JOINTS)))  # rad


def _messages(duration: float, strays: bool) -> list[JointStateSample | WrenchSample]:
    """Joint states and wrenches in arrival order; with ``strays`` some wrenches are in
    another frame, without them those wrenches are left out."""
    out: list[JointStateSample | WrenchSample] = []
    for t, kind, k in _events(duration):
        if kind == 0:
            out.append(JointStateSample(t, JOINTS, _position(t), np.zeros(len(JOINTS))))
        elif not _stray(k):
            out.append(WrenchSample(t, BUNDLED_SENSOR_FRAME, WRENCH))
        elif strays:
            out.append(WrenchSample(t, STRAY, WRENCH))
    return out


def _strays(duration: float) -> int:
    return sum(1 for _, kind, k in _events(duration) if kind == 1 and _stray(k))


def _gathering() -> Gathering:
    return Gathering(Path(bundled_urdf_path()).read_text(), SETTINGS)


def test_a_stray_frame_wrench_is_dropped_and_counted_one_message_at_a_time() -> None:
    gathering = _gathering()
    gathering.add(JointStateSample(0.0, JOINTS, _position(0.0), np.zeros(len(JOINTS))))
    assert gathering.add(WrenchSample(0.0, BUNDLED_SENSOR_FRAME, WRENCH)) is not None
    stray = WrenchSample(1e-3, STRAY, WRENCH)
    with pytest.raises(OtherFrameError, match=f"'{STRAY}'") as info:
        gathering.add(stray)
    assert drop_key("wrench", info.value) == OTHER_FRAME == "wrench_other_frame"
    assert gathering.ledger.refused == {OTHER_FRAME: 1}
    assert gathering.wrench_frame == BUNDLED_SENSOR_FRAME  # one stray does not relabel
    assert gathering.wrenches_held == 1


@pytest.mark.parametrize("block", [1, 7, 5000], ids=["one", "small", "whole"])
def test_blocks_drop_stray_frame_wrenches_as_the_node_does(block: int) -> None:
    """add_messages (replay) drops and counts the strays; the samples are those of the same
    messages without them, and those of the per-message path (the node)."""
    duration = 2.0
    with_strays, clean = _messages(duration, True), _messages(duration, False)
    blocks, dropped = _gathering(), 0
    node = _gathering()
    for start in range(0, len(with_strays), block):
        counted = blocks.add_messages(with_strays[start:start + block])
        assert set(counted) <= {OTHER_FRAME}, counted
        dropped += counted[OTHER_FRAME]
    node_dropped = 0
    for message in with_strays:
        try:
            node.add(message)
        except OtherFrameError:
            node_dropped += 1
    reference = _gathering()
    assert not reference.add_messages(clean)
    assert dropped == node_dropped == _strays(duration) > 10
    assert STRAY in blocks.ledger.last_error[OTHER_FRAME]
    assert blocks.ledger.wrench_samples() == node.ledger.wrench_samples()
    expected = reference.pop_ready()
    assert len(expected) > 0.9 * (duration - 0.2) * 1000 - _strays(duration)
    for gathering in (blocks, node):
        got = gathering.pop_ready()
        np.testing.assert_array_equal(got.times, expected.times)
        np.testing.assert_array_equal(got.wrench, expected.wrench)
        assert gathering.wrench_frame == BUNDLED_SENSOR_FRAME


def test_the_stream_follows_a_frame_that_stays() -> None:
    follower = FrameFollower(switch_after=3)
    assert [follower.accept(f) for f in ("ft", STRAY, STRAY, STRAY, "ft")] == [
        True, False, False, True, False]
    assert follower.frame == STRAY


def _bag_messages(duration: float) -> Iterator[tuple[str, str, float, Any]]:
    urdf = Path(bundled_urdf_path()).read_text()
    yield "/robot_description", bags.STRING, START_TIME, bags.string_message(urdf)
    for t, kind, k in _events(duration):
        stamp, log = START_TIME + t, START_TIME + t + 1e-4
        if kind == 0:
            yield ("/joint_states", bags.JOINT_STATE, log, bags.joint_state_message(
                stamp, list(JOINTS), _position(t), np.zeros(len(JOINTS))))
        else:
            frame = STRAY if _stray(k) else BUNDLED_SENSOR_FRAME
            yield "/wrench", bags.WRENCH, log, bags.wrench_message(stamp, frame, WRENCH)


def test_replay_drops_stray_frame_wrenches_and_its_ledger_counts_them(tmp_path: Path) -> None:
    duration = 2.0
    bag = tmp_path / "strays"
    bags.write_bag(bag, _bag_messages(duration), "mcap")
    result = replay(ReplayOptions(bag, progress=False))
    strays = _strays(duration)
    assert result.dropped[OTHER_FRAME] == strays
    ledger = result.ledger
    assert ledger["gatherer_dropped"][OTHER_FRAME] == strays
    assert ledger["wrenches"] == duration * 1000
    assert (sum(ledger["gatherer_dropped"].values()) + ledger["gatherer_held"]
            + ledger["synchronised"]) == ledger["wrenches"], ledger
    assert result.frame == BUNDLED_SENSOR_FRAME
