"""The package's messages: generated, importable as inertial_id.msg, and exact over DDS.

Each round-trip test publishes one message with distinctive values for every field from a
separate process and receives it here, so the message goes through serialisation, the
middleware and deserialisation in the generated type support.
"""

from __future__ import annotations

import array
import json
import math
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
MSG_NAMES = ("InertialParameters", "ContactAnomaly", "JointSamples", "SensorSamples")
RECEIVE_TIMEOUT = 15.0  # s, from starting the publisher to receiving its message


def _stamp(sec: int, nanosec: int) -> dict:
    return {"sec": sec, "nanosec": nanosec}


def _header(frame_id: str) -> dict:
    return {"stamp": _stamp(1_712_345_678, 987_654_321), "frame_id": frame_id}


# Values for every field of every message (JSON-safe: Python's float repr round-trips exactly).
# Floats use all 53 bits of mantissa, extreme exponents and signed zero where possible.
SAMPLES: dict[str, dict] = {
    "InertialParameters": {
        "header": _header("ft_sensor"),
        "mass": 1.0 / 3.0,
        "com": {"x": math.pi / 100.0, "y": -math.e / 100.0, "z": 5e-324},
        "inertia_com": [1e-3, -2.5e-5, 3.0e-6, 2.0 / 3.0e3, -0.0, 7.77e-4],
        "pi": [0.1 * (k + 1) - 1.0 / 7.0 for k in range(10)],
        "std": [10.0 ** (-k) / 3.0 for k in range(10)],
        "wrench_offset": [1.5, -2.25, 3.125, -0.0625, 0.03125, -1e300],
        "physically_consistent": True,
        "min_pseudo_inertia_eigenvalue": 2.220446049250313e-16,
        "samples_used": 2**64 - 1,
        "condition_number": 1.7976931348623157e308,
        "method": "sdp/clarabel ✓ µ",
        "converged": True,
        "mass_converged": True,
        "com_converged": False,
        "inertia_converged": True,
        "com_std": [1e-4, 2e-5, math.inf],
        "inertia_com_std": [1e-6 * (k + 1) for k in range(6)],
        "wrench_offset_std": [0.01, 0.02, 0.03, 1e-3, 2e-3, 3e-3],
        "covariance_type": "block_sandwich",
        "setup_error": "wrench sign: the data fit a mass of -1.49 kg",
    },
    "ContactAnomaly": {
        "header": _header("tool0_ft"),
        "monitor_trained": True,
        "t2": 123.456789012345,
        "threshold": 22.457744484825323,
        "confidence": 0.999,
        "contact": True,
        "residual": {
            "force": {"x": -1.0 / 3.0, "y": 2.0 / 7.0, "z": -9.80665},
            "torque": {"x": 1e-9, "y": -0.0, "z": 4.9e-324},
        },
    },
    "JointSamples": {
        "header": _header("ft_sensor"),
        "joint_names": ["shoulder_pan", "elbow", "wrist_3"],
        "stamps": [_stamp(100, 0), _stamp(100, 2_000_000), _stamp(2_147_483_647, 999_999_999)],
        "position": [(k + 1) / 9.0 for k in range(9)],
        "velocity": [-(k + 1) / 11.0 for k in range(9)],
        "acceleration": [(-1.0) ** k * 10.0**k / 13.0 for k in range(9)],
        "wrench": [k / 17.0 - 1.0 for k in range(18)],
        "wrench_raw": [k / 31.0 + 0.5 for k in range(18)],
        "twist": [(k - 9) / 37.0 for k in range(18)],
        "proper_acceleration": [9.81 - k / 41.0 for k in range(18)],
        "acceleration_noise": [1e-6 * (k + 1) / 43.0 for k in range(63)],
        "angular_products": [(k + 3) / 53.0 for k in range(18)],
        "filter_span": 0.0945,
        "samples_before": 2**64 - 1,
        "provisional": True,
    },
    "SensorSamples": {
        "header": _header("ft_sensor"),
        "stamps": [_stamp(7, 1), _stamp(7, 500_000_001)],
        "twist": [(k + 1) / 19.0 for k in range(12)],
        "proper_acceleration": [9.81 * (k - 6) / 23.0 for k in range(12)],
        "wrench": [-(k + 1) / 29.0 for k in range(12)],
        "wrench_raw": [(k + 2) / 37.0 for k in range(12)],
        "acceleration_noise": [(k - 20) / 47.0 for k in range(42)],
        "angular_products": [-(k + 5) / 59.0 for k in range(12)],
        "filter_span": 1.0 / 3.0,
        "samples_before": 123_456_789_012,
        "provisional": False,
    },
}

# Runs in a separate process: publish one message built from JSON values until stdin closes.
PUBLISHER = r"""
import json
import os
import select
import sys
import time

import rclpy
from builtin_interfaces.msg import Time

import inertial_id.msg


def fill(msg, values):
    for name, value in values.items():
        if isinstance(value, dict):
            fill(getattr(msg, name), value)
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            setattr(msg, name, [Time(**v) for v in value])
        else:
            setattr(msg, name, value)


msg_name, topic, values = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
cls = getattr(inertial_id.msg, msg_name)
msg = cls()
fill(msg, values)
rclpy.init()
node = rclpy.create_node("test_messages_publisher")
pub = node.create_publisher(cls, topic, 10)
deadline = time.monotonic() + 60.0
while time.monotonic() < deadline:
    pub.publish(msg)
    ready, _, _ = select.select([sys.stdin], [], [], 0.05)
    if ready and not os.read(sys.stdin.fileno(), 1):
        break  # stdin closed: the test is done
node.destroy_node()
rclpy.shutdown()
"""


def to_plain(value):
    """A message as nested dicts and lists of Python scalars (arrays as lists)."""
    if hasattr(value, "get_fields_and_field_types"):
        return {name: to_plain(getattr(value, name)) for name in value.get_fields_and_field_types()}
    if isinstance(value, np.ndarray | array.array):
        return [x.item() if isinstance(x, np.generic) else x for x in value]
    if isinstance(value, list | tuple):
        return [to_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def assert_same(received, expected, path="msg"):
    """Exact equality, field by field; floats bit for bit (signed zero included)."""
    if isinstance(expected, dict):
        assert set(received) == set(expected), f"{path}: fields {sorted(received)}"
        for name in expected:
            assert_same(received[name], expected[name], f"{path}.{name}")
    elif isinstance(expected, list):
        assert len(received) == len(expected), f"{path}: length {len(received)}"
        for i, (r, e) in enumerate(zip(received, expected, strict=True)):
            assert_same(r, e, f"{path}[{i}]")
    elif isinstance(expected, float):
        assert isinstance(received, float), f"{path}: {type(received).__name__}"
        assert received.hex() == expected.hex(), f"{path}: {received!r} != {expected!r}"
    else:
        assert type(received) is type(expected), f"{path}: {type(received).__name__}"
        assert received == expected, f"{path}: {received!r} != {expected!r}"


def test_package_is_the_source_tree():
    import inertial_id
    import inertial_id.msg

    assert Path(inertial_id.__file__).resolve() == REPO_ROOT / "inertial_id" / "__init__.py"
    # The generated subpackage comes from the CMake install, not from the source tree.
    assert not (REPO_ROOT / "inertial_id" / "msg").exists()
    for name in MSG_NAMES:
        assert hasattr(inertial_id.msg, name)


def test_import_from_outside_the_repository(tmp_path, ros_env):
    """A fresh interpreter elsewhere (no repository on the path by accident) sees one package."""
    code = (
        "import inertial_id, inertial_id.msg\n"
        "from inertial_id.msg import InertialParameters\n"
        "type(InertialParameters).__import_type_support__()\n"
        "print(inertial_id.__file__)\n"
        "print(InertialParameters._TYPE_SUPPORT is not None)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=ros_env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.split()
    assert Path(out[0]).resolve() == REPO_ROOT / "inertial_id" / "__init__.py"
    assert out[1] == "True"


@pytest.fixture(scope="module")
def ros_node():
    rclpy = pytest.importorskip("rclpy")
    from rclpy.executors import SingleThreadedExecutor

    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node("test_messages_subscriber", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    try:
        yield node, executor
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.shutdown(context=context)


@pytest.mark.parametrize("msg_name", MSG_NAMES)
def test_round_trip_between_processes(msg_name, ros_node, ros_env):
    import inertial_id.msg

    node, executor = ros_node
    cls = getattr(inertial_id.msg, msg_name)
    expected = SAMPLES[msg_name]
    assert set(cls.get_fields_and_field_types()) == set(expected), "a field has no test value"

    topic = f"/test_messages/{msg_name}_{uuid.uuid4().hex[:8]}"
    received = []
    sub = node.create_subscription(cls, topic, received.append, 10)
    publisher = subprocess.Popen(
        [sys.executable, "-c", PUBLISHER, msg_name, topic, json.dumps(expected)],
        env=ros_env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + RECEIVE_TIMEOUT
        while not received and time.monotonic() < deadline and publisher.poll() is None:
            executor.spin_once(timeout_sec=0.05)
    finally:
        node.destroy_subscription(sub)
        try:  # communicate() closes the publisher's stdin: it stops and shuts down cleanly
            _, stderr = publisher.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            publisher.kill()
            _, stderr = publisher.communicate()
    assert received, f"no {msg_name} received; publisher stderr:\n{stderr.decode()}"
    assert publisher.returncode == 0, f"publisher failed:\n{stderr.decode()}"
    assert isinstance(received[0], cls)
    assert_same(to_plain(received[0]), expected)
