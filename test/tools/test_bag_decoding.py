"""Replay's fast paths give exactly what the slow ones give.

The CDR decoder of ``bags.py`` against rosbags' deserialiser on random messages (names, frame
ids and array lengths change every field's alignment), and a block of messages added to the
gatherer at once against the same messages added one at a time (drops and resets included).
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inertial_id.core.errors import SampleError
from inertial_id.core.gathering.filter_choice import MIN_SAMPLES
from inertial_id.core.gathering.gatherer import GathererSettings, Gathering, message_kind
from inertial_id.core.gathering.ledger import STAMP_DROPS, drop_key
from inertial_id.core.kinematics import SensorKinematics
from inertial_id.core.samples import JointStateSample, SyncedSamples, WrenchSample
from inertial_id.core.simulation import BUNDLED_SENSOR_FRAME, bundled_urdf_path
from inertial_id.io.bags import (
    JOINT_STATE,
    TYPESTORE,
    WRENCH,
    joint_state_message,
    wrench_message,
)
from inertial_id.io.cdr import (
    SENSOR_FIELDS,
    CdrDecoder,
    CdrEncoder,
    pack_noise,
    stamp_array,
    stamp_parts,
    unpack_noise,
)

NAMES = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=12)
FLOATS = st.floats(allow_nan=False, allow_infinity=False, width=64)
STAMPS = st.floats(0.0, 2e9, allow_nan=False)


def _arrays(draw: st.DrawFn, n: int) -> np.ndarray:
    return np.array(draw(st.lists(FLOATS, min_size=n, max_size=n)), dtype=float)


def _joint_state(draw: st.DrawFn) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray,
                                           float]:
    """Names, positions, velocities, efforts and a stamp; each array is empty or full, which
    changes the alignment of what follows it."""
    names = draw(st.lists(NAMES, max_size=9))
    position, velocity, effort = (_arrays(draw, draw(st.sampled_from([0, len(names)])))
                                  for _ in range(3))
    return names, position, velocity, effort, draw(STAMPS)


@given(st.data())
@settings(max_examples=150, deadline=None)
def test_joint_state_decodes_like_rosbags(data: st.DataObject) -> None:
    names, position, velocity, effort, stamp = _joint_state(data.draw)
    message = joint_state_message(stamp, names, position, velocity)
    message.effort = effort
    message.header.frame_id = data.draw(NAMES)
    raw = TYPESTORE.serialize_cdr(message, JOINT_STATE)
    expected = TYPESTORE.deserialize_cdr(raw, JOINT_STATE)
    decoder = CdrDecoder()
    for _ in range(2):  # the second pass takes the repeated-names shortcut
        sample = decoder.joint_state(bytes(raw))
        assert list(sample.names) == list(expected.name)
        np.testing.assert_array_equal(sample.position, expected.position)
        np.testing.assert_array_equal(sample.velocity, expected.velocity)
        np.testing.assert_array_equal(sample.effort, expected.effort)
        stamp_s = expected.header.stamp.sec + 1e-9 * expected.header.stamp.nanosec
        assert sample.stamp == stamp_s


@given(STAMPS, NAMES, st.lists(FLOATS, min_size=6, max_size=6))
@settings(max_examples=150, deadline=None)
def test_wrench_decodes_like_rosbags(stamp: float, frame: str, values: list[float]) -> None:
    raw = TYPESTORE.serialize_cdr(wrench_message(stamp, frame, np.array(values)), WRENCH)
    expected = TYPESTORE.deserialize_cdr(raw, WRENCH)
    sample = CdrDecoder().wrench(bytes(raw))
    assert sample.frame_id == expected.header.frame_id
    f, t = expected.wrench.force, expected.wrench.torque
    np.testing.assert_array_equal(sample.wrench, [f.x, f.y, f.z, t.x, t.y, t.z])


def test_names_change_between_messages() -> None:
    decoder = CdrDecoder()
    for names in (["a", "b"], ["a", "bb"], ["a", "b"], []):
        raw = bytes(TYPESTORE.serialize_cdr(
            joint_state_message(1.0, names, np.zeros(len(names)), np.zeros(0)), JOINT_STATE))
        assert list(decoder.joint_state(raw).names) == names


@pytest.mark.parametrize("cut", [3, 14, 20, 40])
def test_truncated_payload_raises(cut: int) -> None:
    raw = bytes(TYPESTORE.serialize_cdr(
        joint_state_message(1.0, ["joint_a", "joint_b"], np.ones(2), np.ones(2)), JOINT_STATE))
    with pytest.raises((ValueError, struct.error)):
        CdrDecoder().joint_state(raw[:cut])


# --- blocks against single messages --------------------------------------------------------

def _messages(draw: st.DrawFn, joints: list[str]
              ) -> tuple[list[JointStateSample | WrenchSample], str]:
    """A stream at 1 kHz wrench / 500 Hz joints with occasional defects."""
    n = draw(st.integers(20, 200))
    defect = draw(st.sampled_from(["none", "none", "backwards", "duplicate", "jump", "nan",
                                   "missing_joint", "reordered", "short_wrench"]))
    at = draw(st.integers(0, n - 1))
    out: list[JointStateSample | WrenchSample] = []
    t0 = draw(st.floats(0.0, 100.0))
    for i in range(n):
        t = t0 + 1e-3 * i
        names = tuple(joints)
        wrench = np.sin(np.arange(6) + t)
        if i == at and defect in ("backwards", "duplicate", "jump"):
            t -= {"backwards": 0.0105, "duplicate": 0.001, "jump": 5.0}[defect]
        if i == at and defect == "nan":
            wrench = wrench * np.nan
        if i == at and defect == "short_wrench":
            wrench = wrench[:5]
        if i % 2 == 0:
            position = np.cos(np.arange(len(joints)) + t)
            if i == at and defect == "missing_joint":
                names, position = names[1:], position[1:]
            if i >= at and defect == "reordered":
                names, position = names[::-1], position[::-1]
            out.append(JointStateSample(t, names, position, 0.5 * position))
        out.append(WrenchSample(t, "ft", wrench))
    return out, defect


def _add_one_at_a_time(gathering: Gathering, messages: list, dropped: dict[str, int]) -> None:
    """The gatherer node's path: one message at a time, drops counted by reason."""
    for message in messages:
        counts = [gathering.synchronizer.counters[key] for key in STAMP_DROPS]
        try:
            if not gathering.add(message):
                after = [gathering.synchronizer.counters[key] for key in STAMP_DROPS]
                (reason,) = (k for k, a, b in zip(STAMP_DROPS, counts, after, strict=True)
                             if b == a + 1)
                dropped[reason] = dropped.get(reason, 0) + 1
        except SampleError as exc:
            key = drop_key(message_kind(message), exc)
            dropped[key] = dropped.get(key, 0) + 1


@given(st.data())
@settings(max_examples=60, deadline=None)
def test_blocks_equal_single_messages(data: st.DataObject) -> None:
    options = GathererSettings(window=0.012, use_measured_velocity=data.draw(st.booleans()))
    model = (SensorKinematics(bundled_urdf_path(), BUNDLED_SENSOR_FRAME)
             if data.draw(st.booleans()) else None)  # matched filtering or joints only
    one = Gathering(bundled_urdf_path(), options, model)
    block = Gathering(bundled_urdf_path(), options, model)
    messages, defect = _messages(data.draw, one.joint_names)
    size = data.draw(st.integers(1, 60))
    dropped_one: dict[str, int] = {}
    dropped_block: dict[str, int] = {}
    produced = 0
    for start in range(0, len(messages), size):
        chunk = messages[start:start + size]
        _add_one_at_a_time(one, chunk, dropped_one)
        for key, count in block.add_messages(chunk).items():
            dropped_block[key] = dropped_block.get(key, 0) + count
        a, b = one.pop_ready(), block.pop_ready()
        for field in ("times", "position", "velocity", "acceleration", "wrench", "wrench_raw"):
            np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
        assert a.matched == b.matched == (model is not None and len(b) > 0)
        if b.matched:
            np.testing.assert_array_equal(a.twist, b.twist)
            np.testing.assert_array_equal(a.proper_acceleration, b.proper_acceleration)
        produced += len(b)
    assert dropped_one == dropped_block
    assert one.synchronizer.counters == block.synchronizer.counters
    ledger = one.ledger.dropped()  # both paths count into one ledger alike
    assert ledger == block.ledger.dropped()
    assert all(ledger[key] == count for key, count in dropped_one.items()), (ledger, dropped_one)
    # With the window set, the filter waits only for the joint states that give their rate.
    joint_states = sum(isinstance(m, JointStateSample) for m in messages)
    if defect == "none" and joint_states >= MIN_SAMPLES:
        assert produced > 0


# --- blocks decoded in a buffer ------------------------------------------------------------

_WRENCH_FRAMES = ("ft", "tool")  # the same payload length, other bytes
_JOINT_LAYOUTS = ("abc", "abd", "abc with 2 positions and 4 velocities", "abc, no velocity")


def _block_payload(draw: st.DrawFn, wrench: bool, layout: int) -> bytes:
    """A payload of ``layout`` (:data:`_WRENCH_FRAMES` or :data:`_JOINT_LAYOUTS`): the
    layouts of a kind have the same length but the last joint state's."""
    encoder, stamp = CdrEncoder(), draw(STAMPS)
    if wrench:
        return encoder.wrench(stamp, _WRENCH_FRAMES[layout], _arrays(draw, 6))
    sizes = {2: (2, 4), 3: (3, 0)}.get(layout, (3, 3))  # 2: other sizes, the same length
    return encoder.joint_state(stamp, tuple(_JOINT_LAYOUTS[layout][:3]),
                               _arrays(draw, sizes[0]), _arrays(draw, sizes[1]))


@given(st.data())
@settings(max_examples=200, deadline=None)
def test_a_block_in_a_buffer_is_the_block_of_its_payloads(data: st.DataObject) -> None:
    """:meth:`CdrDecoder.packed_block` (payloads at offsets in one buffer, other bytes
    between them) gives what :meth:`CdrDecoder.block` gives, a block exactly when each kind
    shares one layout and every payload is little-endian CDR, holding the messages."""
    kinds, layouts, payloads = [], [], []
    for _ in range(data.draw(st.integers(0, 12))):
        kinds.append(data.draw(st.booleans()))
        choices = [0, 0, 0, 1] if kinds[-1] else [0, 0, 0, 0, 1, 2, 3]
        layouts.append(data.draw(st.sampled_from(choices)))
        payloads.append(_block_payload(data.draw, kinds[-1], layouts[-1]))
    flavour = data.draw(st.sampled_from(["little endian"] * 4 + ["big endian", "other", "short"]))
    if payloads and flavour != "little endian":
        at = data.draw(st.integers(0, len(payloads) - 1))
        start = {"big endian": b"\x00\x00", "other": b"\x01\x01"}.get(flavour)
        payloads[at] = b"\x00" if start is None else start + payloads[at][2:]
    gaps = [data.draw(st.binary(max_size=5)) for _ in range(len(payloads) + 1)]
    buffer = gaps[0] + b"".join(p + gap for p, gap in zip(payloads, gaps[1:], strict=True))
    lengths = np.array([len(p) for p in payloads], dtype=np.int64)
    offsets = len(gaps[0]) + np.cumsum([0] + [len(p) + len(g) for p, g in
                                               zip(payloads, gaps[1:], strict=True)])[:-1]
    block = CdrDecoder().block(kinds, payloads)
    packed = CdrDecoder().packed_block(np.array(kinds, dtype=bool), buffer,
                                       offsets.astype(np.int64), lengths)
    one_layout = all(len({lay for k, lay in zip(kinds, layouts, strict=True) if k == kind}) <= 1
                     for kind in (True, False))
    assert (block is not None) == (bool(payloads) and flavour == "little endian" and one_layout)
    if block is None:
        assert packed is None
        return
    assert packed is not None
    for a, b in zip(block, packed, strict=True):
        if isinstance(a, np.ndarray):
            assert (a.dtype, a.shape, a.tobytes()) == (b.dtype, b.shape, b.tobytes())
        else:
            assert a == b
    decoder = CdrDecoder()
    for sample, raw, wrench in zip(block.messages(), payloads, kinds, strict=True):
        want = decoder.wrench(raw) if wrench else decoder.joint_state(raw)
        assert type(sample) is type(want) and sample.stamp == want.stamp
        for x, y in zip(sample[1:], want[1:], strict=True):
            np.testing.assert_array_equal(x, y)


# --- encoding ------------------------------------------------------------------------------

@given(st.data())
@settings(max_examples=150, deadline=None)
def test_encoder_writes_what_rosbags_writes_and_rclpy_reads(data: st.DataObject) -> None:
    from rclpy.serialization import deserialize_message
    from sensor_msgs.msg import JointState

    names, position, velocity, effort, stamp = _joint_state(data.draw)
    expected = joint_state_message(stamp, names, position, velocity)
    expected.effort = effort
    raw = CdrEncoder().joint_state(stamp, names, position, velocity, effort)
    assert raw == bytes(TYPESTORE.serialize_cdr(expected, JOINT_STATE))
    # rclpy's own serialiser leaves padding bytes uninitialised: compare what rclpy reads.
    ros = deserialize_message(raw, JointState)
    assert list(ros.name) == names
    assert (ros.header.stamp.sec, ros.header.stamp.nanosec) == stamp_parts(stamp)
    for field, values in (("position", position), ("velocity", velocity), ("effort", effort)):
        np.testing.assert_array_equal(np.asarray(getattr(ros, field)), values)


@given(STAMPS, NAMES, st.lists(FLOATS, min_size=6, max_size=6))
@settings(max_examples=150, deadline=None)
def test_encoded_wrench_round_trips(stamp: float, frame: str, values: list[float]) -> None:
    raw = CdrEncoder().wrench(stamp, frame, values)
    assert raw == bytes(TYPESTORE.serialize_cdr(wrench_message(stamp, frame, np.array(values)),
                                                WRENCH))
    sample = CdrDecoder().wrench(raw)
    assert sample.frame_id == frame
    np.testing.assert_array_equal(sample.wrench, values)
    assert sample.stamp == pytest.approx(stamp, abs=1e-9 * max(1.0, stamp) + 1e-9)


# --- the pipeline's batches ----------------------------------------------------------------

def _batch_typestore() -> object:
    """rosbags' typestore with the package's JointSamples and SensorSamples."""
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    store = get_typestore(Stores.ROS2_KILTED)
    msg_dir = Path(__file__).resolve().parents[2] / "msg"
    for name in ("JointSamples", "SensorSamples"):
        store.register(get_types_from_msg((msg_dir / f"{name}.msg").read_text(),
                                          f"inertial_id/msg/{name}"))
    return store


BATCH_TYPES = _batch_typestore()


def _rosbags_time(stamp: float) -> object:
    sec, nanosec = stamp_parts(stamp)
    return BATCH_TYPES.types["builtin_interfaces/msg/Time"](sec=sec, nanosec=nanosec)


def _rosbags_header(stamp: float, frame: str) -> object:
    return BATCH_TYPES.types["std_msgs/msg/Header"](stamp=_rosbags_time(stamp), frame_id=frame)


def _noise(data: st.DataObject, size: int) -> np.ndarray:
    """(size, 6, 6) symmetric matrices."""
    upper = _arrays(data.draw, size * 36).reshape(size, 6, 6)
    return np.triu(upper) + np.swapaxes(np.triu(upper, 1), 1, 2)


def _batch(data: st.DataObject, n: int, matched: bool = False) -> SyncedSamples:
    size = data.draw(st.integers(1, 12))
    times = np.sort(np.array(data.draw(st.lists(STAMPS, min_size=size, max_size=size))))
    widths = (n, n, n, 6, 6) + ((6, 6) if matched else ())
    noise = _noise(data, size) if matched and data.draw(st.booleans()) else None
    products = _arrays(data.draw, size * 6).reshape(size, 6) if matched else None
    return SyncedSamples(times, *(_arrays(data.draw, size * width).reshape(size, width)
                                  for width in widths), acceleration_noise=noise,
                         angular_products=products)


@given(st.data())
@settings(max_examples=100, deadline=None)
def test_joint_samples_encode_like_rosbags_and_decode_exactly(data: st.DataObject) -> None:
    from rclpy.serialization import deserialize_message

    from inertial_id.msg import JointSamples

    names = data.draw(st.lists(NAMES, max_size=8))
    frame = data.draw(NAMES)
    batch = _batch(data, len(names), data.draw(st.booleans()))
    before = data.draw(st.integers(0, 2**64 - 1))
    span = data.draw(st.floats(0.0, 1.0))
    provisional = data.draw(st.booleans())
    raw = CdrEncoder().joint_samples(batch, names, frame, before, span, provisional)
    empty = np.zeros(0)
    expected = BATCH_TYPES.types["inertial_id/msg/JointSamples"](
        header=_rosbags_header(batch.times[-1], frame), joint_names=names,
        stamps=[_rosbags_time(t) for t in batch.times],
        position=batch.position.ravel(), velocity=batch.velocity.ravel(),
        acceleration=batch.acceleration.ravel(), wrench=batch.wrench.ravel(),
        wrench_raw=batch.wrench_raw.ravel(),
        twist=empty if batch.twist is None else batch.twist.ravel(),
        proper_acceleration=(empty if batch.proper_acceleration is None
                             else batch.proper_acceleration.ravel()),
        acceleration_noise=pack_noise(batch.acceleration_noise),
        angular_products=(empty if batch.angular_products is None
                          else batch.angular_products.ravel()),
        filter_span=span, samples_before=before, provisional=provisional)
    assert raw == bytes(BATCH_TYPES.serialize_cdr(expected, "inertial_id/msg/JointSamples"))
    decoded, decoded_names, decoded_frame, decoded_before, decoded_span, decoded_provisional = (
        CdrDecoder().joint_samples(raw))
    assert (list(decoded_names), decoded_frame, decoded_before, decoded_span,
            decoded_provisional) == (names, frame, before, span, provisional)
    ros = deserialize_message(raw, JointSamples)
    assert (ros.samples_before, ros.filter_span, ros.provisional) == (before, span, provisional)
    np.testing.assert_array_equal(decoded.times,
                                  [s.sec + 1e-9 * s.nanosec for s in ros.stamps])
    for field in ("position", "velocity", "acceleration", "wrench", "wrench_raw"):
        np.testing.assert_array_equal(getattr(decoded, field), getattr(batch, field))
        np.testing.assert_array_equal(np.asarray(getattr(ros, field)),
                                      getattr(batch, field).ravel())
    assert decoded.matched == batch.matched
    for field in ("twist", "proper_acceleration", "angular_products"):
        if batch.matched:
            np.testing.assert_array_equal(getattr(decoded, field), getattr(batch, field))
        assert np.asarray(getattr(ros, field)).size == (6 * len(batch) if batch.matched else 0)
    if batch.acceleration_noise is None:
        assert decoded.acceleration_noise is None and len(ros.acceleration_noise) == 0
    else:  # symmetric matrices travel as their upper triangles and come back whole
        np.testing.assert_array_equal(decoded.acceleration_noise, batch.acceleration_noise)
        np.testing.assert_array_equal(
            unpack_noise(ros.acceleration_noise, len(batch)), batch.acceleration_noise)


@given(st.data())
@settings(max_examples=100, deadline=None)
def test_sensor_samples_encode_like_rosbags_and_decode_exactly(data: st.DataObject) -> None:
    frame = data.draw(NAMES)
    batch = _batch(data, 6)
    fields = dict(zip(SENSOR_FIELDS, (batch.position, batch.velocity, batch.wrench,
                                      batch.wrench_raw), strict=True))
    before = data.draw(st.integers(0, 2**64 - 1))
    noise = _noise(data, len(batch)) if data.draw(st.booleans()) else None
    span = data.draw(st.floats(0.0, 1.0))
    products = batch.acceleration if data.draw(st.booleans()) else None
    provisional = data.draw(st.booleans())
    raw = CdrEncoder().sensor_samples(batch.times, frame, before, noise, span, products,
                                      provisional, **fields)
    expected = BATCH_TYPES.types["inertial_id/msg/SensorSamples"](
        header=_rosbags_header(batch.times[-1], frame),
        stamps=[_rosbags_time(t) for t in batch.times],
        **{name: values.ravel() for name, values in fields.items()},
        acceleration_noise=pack_noise(noise),
        angular_products=np.zeros(0) if products is None else products.ravel(),
        filter_span=span, samples_before=before, provisional=provisional)
    assert raw == bytes(BATCH_TYPES.serialize_cdr(expected, "inertial_id/msg/SensorSamples"))
    samples, decoded_frame, decoded_before, decoded_provisional = CdrDecoder().sensor_samples(raw)
    assert (decoded_frame, decoded_before, samples["filter_span"], decoded_provisional) == (
        frame, before, span, provisional)
    np.testing.assert_array_equal(
        samples["times"], [s + 1e-9 * ns for s, ns in map(stamp_parts, batch.times)])
    for name, values in fields.items():
        np.testing.assert_array_equal(samples[name], values)
    if products is None:
        assert samples["angular_products"] is None
    else:
        np.testing.assert_array_equal(samples["angular_products"], products)
    if noise is None:
        assert samples["acceleration_noise"] is None
    else:
        np.testing.assert_array_equal(samples["acceleration_noise"], noise)


@given(st.lists(STAMPS, max_size=20))
@settings(max_examples=300, deadline=None)
def test_stamp_array_matches_stamp_parts(times: list[float]) -> None:
    parts = stamp_array(times)
    assert [(int(p["sec"]), int(p["nanosec"])) for p in parts] == [stamp_parts(t) for t in times]


def test_truncated_or_inconsistent_batches_raise() -> None:
    batch = SyncedSamples(np.array([1.0, 2.0]), *(np.ones((2, w)) for w in (3, 3, 3, 6, 6)))
    raw = CdrEncoder().joint_samples(batch, ["a", "b", "c"], "ft")
    for cut in (len(raw) - 8, 40, 20):
        with pytest.raises((ValueError, struct.error)):
            CdrDecoder().joint_samples(raw[:cut])
    # Two joint names for three columns: the rows do not add up.
    wrong = CdrEncoder().joint_samples(batch, ["a", "b"], "ft")
    with pytest.raises(ValueError, match="samples of 2"):
        CdrDecoder().joint_samples(wrong)
