"""The decoders against any bytes: one error type, no state a bad payload can poison, bounded
memory whatever names arrive."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inertial_id.core.errors import DuplicateJointError, SampleError
from inertial_id.core.kinematics import JointMapper
from inertial_id.core.samples import SyncedSamples
from inertial_id.io.cdr import CdrDecoder, CdrEncoder
from inertial_id.nodes.conversions import (
    UndecodableError,
    joint_samples_from_bytes,
    joint_state_from_bytes,
    sensor_samples_from_bytes,
    wrench_from_bytes,
)

NAMES = ("shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint")
ENCODER = CdrEncoder()
JOINT_STATE = ENCODER.joint_state(12.5, NAMES, [0.1, -0.2, 0.3], [1.0, 2.0, 3.0])
WRENCH = ENCODER.wrench(12.5, "ft_sensor", np.arange(6.0))
BATCH = SyncedSamples(np.array([1.0, 1.001]), np.ones((2, 3)), np.zeros((2, 3)),
                      np.zeros((2, 3)), np.ones((2, 6)), np.ones((2, 6)))
JOINT_SAMPLES = ENCODER.joint_samples(BATCH, NAMES, "ft_sensor")
SENSOR_SAMPLES = ENCODER.sensor_samples(BATCH.times, "ft_sensor", twist=np.ones((2, 6)),
                                        proper_acceleration=np.ones((2, 6)),
                                        wrench=np.ones((2, 6)), wrench_raw=np.ones((2, 6)))
DECODERS = {
    "joint_state": (joint_state_from_bytes, JOINT_STATE),
    "wrench": (wrench_from_bytes, WRENCH),
    "joint_samples": (joint_samples_from_bytes, JOINT_SAMPLES),
    "sensor_samples": (sensor_samples_from_bytes, SENSOR_SAMPLES),
}


def _assert_good_joint_state(decoder: CdrDecoder) -> None:
    sample = joint_state_from_bytes(JOINT_STATE, decoder)
    assert tuple(sample.names) == NAMES
    np.testing.assert_array_equal(sample.position, [0.1, -0.2, 0.3])
    np.testing.assert_array_equal(sample.velocity, [1.0, 2.0, 3.0])


@pytest.mark.parametrize("cut", range(8, len(JOINT_STATE)))
def test_a_truncated_joint_state_does_not_poison_the_next_ones(cut: int) -> None:
    """Cut anywhere (inside a joint name too): the cut one is refused or decodes a prefix
    that is itself a whole message, and every valid message after it decodes exactly."""
    decoder = CdrDecoder()
    _assert_good_joint_state(decoder)
    with contextlib.suppress(UndecodableError):
        joint_state_from_bytes(JOINT_STATE[:cut], decoder)
    for _ in range(3):
        _assert_good_joint_state(decoder)


@settings(max_examples=300, deadline=None)
@given(kind=st.sampled_from(sorted(DECODERS)), data=st.data())
def test_any_bytes_raise_one_error_type_and_leave_the_decoder_clean(kind: str,
                                                                     data: st.DataObject) -> None:
    decode, good = DECODERS[kind]
    mutation = data.draw(st.sampled_from(["random", "flip", "cut", "splice"]))
    if mutation == "random":
        raw = data.draw(st.binary(max_size=400))
    elif mutation == "flip":
        at = data.draw(st.integers(0, len(good) - 1))
        raw = good[:at] + bytes([good[at] ^ data.draw(st.integers(1, 255))]) + good[at + 1:]
    elif mutation == "cut":
        raw = good[:data.draw(st.integers(0, len(good)))]
    else:
        raw = good[:data.draw(st.integers(0, len(good)))] + data.draw(st.binary(max_size=64))
    decoder = CdrDecoder()
    decode(good, decoder)
    with contextlib.suppress(UndecodableError):
        decode(raw, decoder)
    assert decode(good, decoder) is not None
    _assert_good_joint_state(decoder)


def test_ever_new_joint_names_keep_the_caches_bounded() -> None:
    decoder, mapper = CdrDecoder(), JointMapper(["a"])
    for k in range(1000):
        names = ("a", f"joint_{k}")
        raw = CdrEncoder().joint_state(float(k), names, [0.0, 1.0])
        assert tuple(joint_state_from_bytes(raw, decoder).names) == names
        mapper.select(names, [0.0, 1.0])
    assert len(decoder._names) <= CdrDecoder.MAX_CACHED_LISTS
    assert len(mapper._cache) <= JointMapper.MAX_CACHED


def test_a_joint_listed_twice_must_agree() -> None:
    mapper = JointMapper(["a", "b"])
    np.testing.assert_array_equal(mapper.select(["a", "b", "a"], [1.0, 2.0, 1.0]), [1.0, 2.0])
    with pytest.raises(DuplicateJointError, match="a"):
        mapper.select(["a", "b", "a"], [1.0, 2.0, 1.5])
    # an extra joint listed twice is none of the model's business
    np.testing.assert_array_equal(mapper.select(["x", "a", "x", "b"], [0, 1, 9, 2]), [1, 2])
    with pytest.raises(SampleError, match="lacks joints b"):
        mapper.select(["a", "a"], [1.0, 1.0])
