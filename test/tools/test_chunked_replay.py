"""Replay's chunked paths give what the per-message paths give.

MCAP chunks read by ``bags.py`` against rosbags' reader (same messages, same order); blocks
of bag messages decoded at once (:meth:`CdrDecoder.block`, :meth:`BagReader.blocks`)
against the messages decoded one by one; :func:`feed` of blocks against :func:`feed` of the
same messages one at a time (same passes, estimates, contacts and ledger); a block added to
the gatherer against its messages added one by one when it is not clean; the matched filter's
kernel from known knot intervals against the kernel that searches them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from inertial_id.core.gathering.gatherer import JointStateSample, MessageBlock, WrenchSample
from inertial_id.core.signals import fit_projections, hat_kernel_at, second_difference_weights
from inertial_id.core.simulation import Contact
from inertial_id.io.bags import BagReader, mcap_chunks
from inertial_id.io.cdr import CdrDecoder, CdrEncoder
from inertial_id.tools.replay import (
    PROCESS_PERIOD,
    ReplayOptions,
    apply_overrides,
    build_pipeline,
    data_ledger,
    feed,
    load_params,
    resolve_urdf,
)
from inertial_id.tools.synthetic import SimulateOptions, simulate_bag

NAMES = ("a", "b", "c")


@pytest.fixture(scope="module")
def bag(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """8 s at 1 kHz wrenches and 500 Hz joint states, a push at 6 s."""
    return simulate_bag(tmp_path_factory.mktemp("chunked") / "bag", SimulateOptions(
        duration=8.0, contacts=(Contact(6.0, 0.4, (0.0, 4.0, 0.0)),)))


@pytest.fixture(scope="module")
def db3_bag(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """2 s in SQLite storage (read through rosbags)."""
    return simulate_bag(tmp_path_factory.mktemp("chunked") / "db3",
                        SimulateOptions(duration=2.0, storage="db3"))


def test_mcap_chunks_in_rosbags_order(bag: Path) -> None:
    with BagReader(bag) as reader:
        assert reader.topics is not None
        connections = [c for c in reader._reader.connections
                       if c.topic in (reader.topics.joint_states, reader.topics.wrench)]
        chunks = mcap_chunks(reader._reader, connections)
        assert chunks is not None
        got = [m for types, payloads in chunks for m in zip(types, payloads, strict=True)]
        want = [(c.msgtype, raw) for c, _, raw in reader._reader.messages(connections)]
    assert got == want


def test_other_storage_through_rosbags(db3_bag: Path) -> None:
    with BagReader(db3_bag) as reader:
        assert mcap_chunks(reader._reader, reader._reader.connections) is None
        items = list(reader.blocks())
        want = list(reader.messages())
    assert any(isinstance(item, MessageBlock) for item in items)
    _same_messages(_flatten(items), want)


def _flatten(items: list[MessageBlock | JointStateSample | WrenchSample]
             ) -> list[JointStateSample | WrenchSample]:
    return [m for item in items
            for m in (item.messages() if isinstance(item, MessageBlock) else [item])]


def _same_messages(got: list[JointStateSample | WrenchSample],
                   want: list[JointStateSample | WrenchSample]) -> None:
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        assert type(a) is type(b)
        assert a.stamp == b.stamp
        if isinstance(a, WrenchSample):
            assert a.frame_id == b.frame_id
            np.testing.assert_array_equal(a.wrench, b.wrench)
        else:
            assert tuple(a.names) == tuple(b.names)
            for x, y in zip(a[2:], b[2:], strict=True):
                np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("size", [2048, 37])
def test_bag_blocks_hold_the_messages(bag: Path, size: int) -> None:
    with BagReader(bag) as reader:
        items = list(reader.blocks(size))
        want = list(reader.messages())
    assert all(isinstance(item, MessageBlock) for item in items)
    _same_messages(_flatten(items), want)


def test_payloads_of_other_layouts_are_not_one_block() -> None:
    encoder, decoder = CdrEncoder(), CdrDecoder()
    joint = encoder.joint_state(1.0, NAMES, [0.1, 0.2, 0.3], [1.0, 2.0, 3.0])
    wrench = encoder.wrench(1.0005, "ft", np.arange(6.0))
    same = [joint, wrench, encoder.joint_state(1.002, NAMES, [0.4, 0.5, 0.6], [4.0, 5.0, 6.0]),
            encoder.wrench(1.0015, "ft", np.arange(6.0) + 1.0)]
    block = decoder.block([False, True, False, True], same)
    assert block is not None
    _same_messages(block.messages(), [decoder.joint_state(same[0]), decoder.wrench(same[1]),
                                      decoder.joint_state(same[2]), decoder.wrench(same[3])])
    others = {
        "frame": encoder.wrench(1.0015, "tool", np.arange(6.0)),
        "names": encoder.joint_state(1.002, ("a", "b", "d"), [0.4, 0.5, 0.6], [4.0, 5.0, 6.0]),
        # the same length with the velocities moved into the efforts
        "sizes": encoder.joint_state(1.002, NAMES, [0.4, 0.5, 0.6], [], [4.0, 5.0, 6.0]),
        "big endian": b"\x00\x00" + wrench[2:],
    }
    for name, payload in others.items():
        is_wrench = name in ("frame", "big endian")
        kinds = [False, True, is_wrench]
        assert decoder.block(kinds, [joint, wrench, payload]) is None, name


def _run(bag: Path, items: str, size: int = 2048) -> tuple[object, ...]:
    params = load_params(None)
    apply_overrides(ReplayOptions(bag), params)
    with BagReader(bag) as reader:
        pipeline = build_pipeline(params, resolve_urdf(params["kinematics"], reader))
        source = reader.blocks(size) if items == "blocks" else reader.messages()
        counts: list[int] = []
        fed = feed(source, pipeline, PROCESS_PERIOD, counts.append)
    estimate = pipeline.finish()
    assert estimate is not None
    h = pipeline.history
    return (fed.first_stamp, fed.frame, dict(fed.dropped), fed.wrenches, fed.messages, counts,
            h.batch_time, h.solve_time, np.array(h.pi).tolist(), estimate.pi.tolist(),
            [(c.start, c.end) for c in pipeline.online.contacts], data_ledger(fed, pipeline))


def test_feeding_blocks_is_feeding_messages(bag: Path) -> None:
    want = _run(bag, "messages")
    assert want[10], "the push is found"
    assert _run(bag, "blocks") == want
    assert _run(bag, "blocks", 37) == want


def test_an_unclean_block_goes_message_by_message(bag: Path) -> None:
    with BagReader(bag) as reader:
        block = next(item for item in reader.blocks() if isinstance(item, MessageBlock))
    later = np.flatnonzero(block.is_wrench)[5]
    stamps = block.stamps.copy()
    stamps[later] = stamps[later - 2]  # a wrench out of order
    bad = block._replace(stamps=stamps)
    results = []
    for add in ("block", "messages"):
        params = load_params(None)
        apply_overrides(ReplayOptions(bag), params)
        with BagReader(bag) as reader:
            pipeline = build_pipeline(params, resolve_urdf(params["kinematics"], reader))
        dropped = (pipeline.add_block(bad) if add == "block"
                   else pipeline.add_messages(bad.messages()))
        results.append((dict(dropped), pipeline.gathering.synchronizer.buffered))
    assert results[0][0] == results[1][0] == {"wrench_out_of_order": 1}
    for a, b in zip(results[0][1], results[1][1], strict=True):
        np.testing.assert_array_equal(a, b)


def test_kernel_from_known_intervals() -> None:
    rng = np.random.default_rng(3)
    record = np.cumsum(0.002 + 2e-4 * rng.random(300))  # joint stamps with jitter
    starts = np.array([10, 11, 40, 200])
    knots = record[starts[:, None] + np.arange(41)]
    projection, _, _ = fit_projections(knots, 3)
    gamma = second_difference_weights(knots, projection[:, 2, :])
    at = np.sort(rng.uniform(record[0], record[-1], (4, 120)), axis=1)
    at[:, :3] = knots[:, :3]  # on knots, the first one included
    at[:, -1] = knots[:, -1]
    interval = np.searchsorted(record, at, side="right") - 1 - starts[:, None]
    np.testing.assert_array_equal(hat_kernel_at(knots, gamma, at, interval),
                                  hat_kernel_at(knots, gamma, at))
