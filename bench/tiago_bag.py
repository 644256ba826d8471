#!/usr/bin/env python3
"""Convert the real TIAGo ``calibration_weight`` recording into a ROS 2 bag.

The recording (``shared/data/tiago``, see its README) is a TIAGo arm moving with an added
weight in its Hey5 hand: joint positions (torso lift + arm 1..7) and the wrist F/T, exported
as two CSV files on the same clock and the same rows at about 100 Hz. This writes the bag the
payload pipeline reads on a robot:

- ``/joint_states`` (``sensor_msgs/JointState``): ``torso_lift_joint``, ``arm_1_joint`` ..
  ``arm_7_joint`` positions; no velocities (the recording's are driver-filtered), so the
  velocity array is empty;
- ``/wrist_ft`` (``geometry_msgs/WrenchStamped``, frame ``wrist_ft_link``): force N, torque
  N m, as exported (not bias compensated);
- ``/robot_description`` (``std_msgs/String``): the URDF text, once, before the data.

Header stamps (and log times) are a fixed epoch plus the CSV's ``t``.

    python bench/tiago_bag.py --output /tmp/tiago_weight                # mcap
    python bench/tiago_bag.py --output out_db3 --storage db3 --seconds 5
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from inertial_id.core.errors import InertialIdError
from inertial_id.io.bags import (
    JOINT_STATE,
    STRING,
    WRENCH,
    joint_state_message,
    string_message,
    wrench_message,
    write_bag,
)

DEFAULT_DATA_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "tiago"
"""``shared/data/tiago`` next to the repository (override with ``--data``)."""
RUN = "calibration_weight"
URDF_NAME = "tiago_48_hey5.urdf"
JOINT_NAMES = ("torso_lift_joint", *(f"arm_{i}_joint" for i in range(1, 8)))
SENSOR_FRAME = "wrist_ft_link"
EPOCH = 1625146020.0
"""2021-07-01T13:27:00Z, the session's start (protocol.yaml id 2021-07-01-1327)."""
JOINT_TOPIC = "/joint_states"
WRENCH_TOPIC = "/wrist_ft"
DESCRIPTION_TOPIC = "/robot_description"
WRENCH_COLUMNS = tuple(f"wrist_ft_{kind}_{axis}" for kind in ("force", "torque")
                       for axis in "XYZ")


@dataclass(frozen=True)
class Recording:
    """The run as arrays: ``t`` (N,) s since the first stamp, ``position`` (N, 8) in
    :data:`JOINT_NAMES` order (m, rad), ``wrench`` (N, 6) ``[fx, fy, fz, tx, ty, tz]`` (N, N m,
    frame ``wrist_ft_link``), and the URDF text."""

    t: NDArray[np.float64]
    position: NDArray[np.float64]
    wrench: NDArray[np.float64]
    urdf: str

    def __len__(self) -> int:
        return int(self.t.size)


def _read_csv(path: Path, columns: tuple[str, ...]) -> tuple[NDArray[np.float64],
                                                             NDArray[np.float64]]:
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file (give --data, the folder of the "
                                "TIAGo data set)")
    header = [c.strip() for c in path.read_text().splitlines()[0].split(",")]
    try:
        index = [header.index(c) for c in columns]
    except ValueError as exc:
        raise ValueError(f"{path}: expected columns {columns}, got {header}") from exc
    table = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)
    # Row slices must be C-contiguous for the CDR serialiser (see test_tiago.py).
    return table[:, header.index("t")].copy(), np.ascontiguousarray(table[:, index])


def load_recording(data: Path = DEFAULT_DATA_DIR, seconds: float | None = None) -> Recording:
    """Read the ``calibration_weight`` run (optionally only its first ``seconds``)."""
    data = Path(data)
    t, position = _read_csv(data / RUN / "tiago_position.csv",
                            tuple(f"- {n}_position" for n in JOINT_NAMES))
    tw, wrench = _read_csv(data / RUN / "tiago_wrist_ft.csv", WRENCH_COLUMNS)
    if t.shape != tw.shape or not np.array_equal(t, tw):
        raise ValueError(f"{data / RUN}: position and wrist_ft rows are not on the same clock")
    if np.any(np.diff(t) <= 0):
        raise ValueError(f"{data / RUN}: stamps are not strictly increasing")
    if seconds is not None:
        keep = t <= t[0] + seconds
        t, position, wrench = t[keep], position[keep], wrench[keep]
    return Recording(t, position, wrench, (data / URDF_NAME).read_text())


def bag_messages(recording: Recording, epoch: float = EPOCH
                 ) -> Iterator[tuple[str, str, float, Any]]:
    """``(topic, type, log time, message)`` in time order; the URDF comes first."""
    empty = np.zeros(0)
    yield DESCRIPTION_TOPIC, STRING, epoch + recording.t[0], string_message(recording.urdf)
    for t, q, w in zip(recording.t, recording.position, recording.wrench, strict=True):
        stamp = epoch + float(t)
        yield JOINT_TOPIC, JOINT_STATE, stamp, joint_state_message(stamp, list(JOINT_NAMES),
                                                                   q, empty)
        yield WRENCH_TOPIC, WRENCH, stamp, wrench_message(stamp, SENSOR_FRAME, w)


def convert(output: Path, data: Path = DEFAULT_DATA_DIR, storage: str = "mcap",
            seconds: float | None = None, epoch: float = EPOCH) -> Recording:
    """Write the bag directory ``output`` (must not exist); returns what was written."""
    recording = load_recording(data, seconds)
    write_bag(output, bag_messages(recording, epoch), storage=storage)
    return recording


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", type=Path, required=True, help="bag directory to create")
    parser.add_argument("--storage", choices=("mcap", "db3"), default="mcap")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA_DIR,
                        help="the TIAGo data folder (default: shared/data/tiago next to the "
                        "repository)")
    parser.add_argument("--seconds", type=float, default=None,
                        help="only the first SECONDS of the run")
    args = parser.parse_args(argv)
    try:
        recording = convert(args.output, args.data, args.storage, args.seconds)
    except (OSError, ValueError, InertialIdError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    span = recording.t[-1] - recording.t[0]
    print(f"{args.output}: {len(recording)} joint states and {len(recording)} wrenches over "
          f"{span:.2f} s, 1 robot_description ({args.storage})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
