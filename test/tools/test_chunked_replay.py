"""Replay's chunked paths give what the per-message paths give.

MCAP chunks read by ``bags.py`` against rosbags' reader (same messages, same order); blocks
of bag messages decoded at once (:meth:`CdrDecoder.block`, :meth:`BagReader.blocks`)
against the messages decoded one by one; :func:`feed` of blocks against :func:`feed` of the
same messages one at a time (same passes, estimates, contacts and ledger); a block added to
the gatherer against its messages added one by one when it is not clean; the matched filter's
kernel from known knot intervals against the kernel that searches them. The compiled walk
over an MCAP chunk's records against the Python walk on random record streams (truncated ones
included), and chunks with records past their end or log times outside their range.
"""

from __future__ import annotations

import shutil
import struct
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inertial_id.core.samples import JointStateSample, MessageBlock, WrenchSample
from inertial_id.core.signals import fit_projections, hat_kernel_at, second_difference_weights
from inertial_id.core.simulation import Contact
from inertial_id.io import mcap_scan
from inertial_id.io.bags import BagError, BagReader, mcap_chunks
from inertial_id.io.cdr import CdrDecoder, CdrEncoder
from inertial_id.io.mcap_scan import ChunkMessages, scan_messages, scan_messages_python
from inertial_id.tools.feeding import PROCESS_PERIOD, data_ledger, feed
from inertial_id.tools.replay import (
    ReplayOptions,
    apply_overrides,
    build_pipeline,
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


# --- MCAP chunks -------------------------------------------------------------------------

_U64 = 2**64 - 1


@st.composite
def _record_stream(draw: st.DrawFn) -> bytes:
    """Records of a chunk: messages (a few channels, log times 0..40 or near the uint64
    limit), other records, message records shorter than their header, lengths near the
    uint64 limit, and possibly cut anywhere."""
    parts = []
    for _ in range(draw(st.integers(0, 10))):
        kind = draw(st.sampled_from(["message", "message", "other", "short", "huge"]))
        if kind == "message":
            stamp = draw(st.integers(0, 40) | st.integers(_U64 - 3, _U64))
            body = struct.pack("<HIQQ", draw(st.integers(0, 3) | st.just(65535)),
                               draw(st.integers(0, 2**32 - 1)), stamp,
                               draw(st.integers(0, _U64))) + draw(st.binary(max_size=24))
        elif kind == "short":  # a message header cut by the chunk's end when it is last
            size = draw(st.sampled_from([0, 20, 21]) | st.integers(0, 21))
            body = draw(st.binary(min_size=size, max_size=size))
        else:
            body = draw(st.binary(max_size=30))
        opcode = 0x05 if kind in ("message", "short") else draw(st.integers(0, 255))
        length = draw(st.integers(_U64 - 40, _U64)) if kind == "huge" else len(body)
        parts.append(struct.pack("<BQ", opcode, length) + body)
    data = b"".join(parts)
    if draw(st.booleans()):  # cut: often by a few bytes, where a record just overruns
        data = data[: max(0, len(data) - draw(st.integers(1, 10) | st.integers(0, len(data))))]
    return data


def _outcome(scan: Callable[[bytes, int, int], ChunkMessages], data: bytes, first: int,
             last: int) -> object:
    """What a walk gives: its arrays as lists with their dtypes, or its error."""
    try:
        found = scan(data, first, last)
    except Exception as exc:
        return type(exc), str(exc)
    return [(field.dtype.str, field.tolist()) for field in found]


def _compiled_walk(data: bytes, first: int, last: int) -> ChunkMessages | None:
    """The compiled walk alone (None where it stops: the Python walk raises there)."""
    scan = mcap_scan.compiled_scan()
    assert scan is not None, "numba is a dependency"
    room = len(data) // 9 + 1
    out = ChunkMessages(*(np.empty(room, np.int64) for _ in range(3)),
                        np.empty(room, np.uint64))
    count = scan(np.frombuffer(data, np.uint8), np.uint64(first), np.uint64(last), *out)
    return None if count < 0 else out.take(slice(count))


@given(_record_stream(), st.integers(0, 40) | st.just(_U64), st.integers(0, 40) | st.just(_U64))
@settings(max_examples=400, deadline=None)
def test_compiled_record_walk_is_the_python_walk(data: bytes, first: int, last: int) -> None:
    want = _outcome(scan_messages_python, data, first, last)
    compiled = _compiled_walk(data, first, last)
    if isinstance(want, tuple):  # the Python walk raises: the compiled one stops
        assert compiled is None
    else:
        assert compiled is not None
        assert _outcome(lambda *_: compiled, data, first, last) == want
    assert _outcome(scan_messages, data, first, last) == want


def test_blocks_without_numba_are_the_same(bag: Path, monkeypatch: pytest.MonkeyPatch
                                           ) -> None:
    with BagReader(bag) as reader:
        compiled = list(reader.blocks(37))
    monkeypatch.setattr(mcap_scan, "_COMPILED", [None])
    with BagReader(bag) as reader:
        plain = list(reader.blocks(37))
    _same_items(plain, compiled)


def _same_items(got: list[MessageBlock | JointStateSample | WrenchSample],
                want: list[MessageBlock | JointStateSample | WrenchSample]) -> None:
    """The same blocks and messages: types, values, dtypes and shapes."""
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        assert type(a) is type(b)
        for x, y in zip(a, b, strict=True):
            if isinstance(x, np.ndarray):
                assert (x.dtype, x.shape, x.tobytes()) == (y.dtype, y.shape, y.tobytes())
            else:
                assert x == y


@pytest.mark.parametrize("size", [2048, 37, 1])
def test_chunk_blocks_are_the_blocks_of_the_payloads(bag: Path, size: int) -> None:
    """Decoding in the chunk's bytes gives what decoding its payloads as bytes gives."""
    with BagReader(bag) as reader:
        assert reader.topics is not None
        connections = [c for c in reader._reader.connections
                       if c.topic in (reader.topics.joint_states, reader.topics.wrench)]
        got = list(reader.blocks(size))
        decoder = CdrDecoder()
        want = [item for types, payloads in reader.payloads(connections, size)
                for item in reader._decode(decoder, types, payloads)]
    _same_items(got, want)


def _patched(bag: Path, target: Path, patch: Callable[[bytearray, Any], None]) -> Path:
    """A copy of ``bag`` with its first chunk's records changed by ``patch(records, chunk)``
    (the chunk's checksum updated)."""
    shutil.copytree(bag, target)
    (file,) = target.glob("*.mcap")
    with BagReader(target) as reader:
        storage = reader._reader.readers[0].storage.storages[0]
        chunk = min(storage.chunks, key=lambda c: c.chunk_start_offset)
    content = bytearray(file.read_bytes())
    start = chunk.chunk_start_offset + 9 + 40 + len(chunk.compression)
    assert chunk.compression == ""
    records = content[start : start + chunk.uncompressed_size]
    patch(records, chunk)
    content[start : start + len(records)] = records
    struct.pack_into("<I", content, chunk.chunk_start_offset + 9 + 24, zlib.crc32(records))
    file.write_bytes(bytes(content))
    return target


def _message_records(records: bytearray) -> list[int]:
    """Where the message records of a chunk start."""
    found, pos = [], 0
    while pos < len(records):
        opcode, length = struct.unpack_from("<BQ", records, pos)
        if opcode == 0x05:
            found.append(pos)
        pos += 9 + length
    return found


def test_log_times_outside_the_chunk_are_skipped_and_order_is_stable(
        bag: Path, tmp_path: Path) -> None:
    def patch(records: bytearray, chunk: Any) -> None:
        at = _message_records(records)
        struct.pack_into("<Q", records, at[10] + 15, chunk.message_end_time + 1)
        struct.pack_into("<Q", records, at[20] + 15, chunk.message_start_time - 1)
        late = struct.unpack_from("<Q", records, at[31] + 15)
        struct.pack_into("<Q", records, at[30] + 15, *late)  # same log times, stable order
        struct.pack_into("<Q", records, at[40] + 15, *late)  # out of order

    patched = _patched(bag, tmp_path / "times", patch)
    test_mcap_chunks_in_rosbags_order(patched)
    with BagReader(bag) as reader, BagReader(patched) as changed:
        assert len(_flatten(list(changed.blocks()))) == len(list(reader.messages())) - 2
        _same_messages(_flatten(list(changed.blocks(37))), list(changed.messages()))


@pytest.mark.parametrize("defect", ["past the chunk", "header cut"])
def test_a_record_past_its_chunk_fails(bag: Path, tmp_path: Path, defect: str) -> None:
    def patch(records: bytearray, chunk: Any) -> None:
        at = _message_records(records)
        if defect == "past the chunk":
            struct.pack_into("<Q", records, at[50] + 1, len(records))
        else:  # the next-to-last record ends 5 bytes before the chunk does
            struct.pack_into("<Q", records, at[-2] + 1, len(records) - at[-2] - 9 - 5)

    patched = _patched(bag, tmp_path / "bag", patch)
    message = ("truncated MCAP record at" if defect == "past the chunk"
               else "cannot read the bag: unpack_from requires")
    with BagReader(patched) as reader, pytest.raises(BagError, match=message):
        list(reader.blocks())
