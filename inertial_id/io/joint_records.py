"""Joint recordings for the joint-torque commands: tables of joint values read from CSV files
(``t`` in s, then one column per joint) or from a bag's sensor_msgs/JointState messages
(header stamps), and their positions smoothed and differentiated (Savitzky-Golay on the
stamps) into the link model's joint order (:class:`JointData`: rad, rad/s, rad/s^2, m ... for
prismatic joints; efforts in the recording's units).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from inertial_id.core.errors import SampleError
from inertial_id.core.joint_torque.link_model import LinkModel
from inertial_id.core.signals import savitzky_golay


@dataclass(frozen=True)
class JointTable:
    """A CSV of joint values: ``t`` (N,), joint names, ``values`` (N, joints)."""

    t: NDArray[np.float64]
    names: list[str]
    values: NDArray[np.float64]


_KINDS = ("_position", "_velocity", "_effort", "_acceleration")


def joint_name(header: str) -> str:
    """``- arm_1_joint_position`` -> ``arm_1_joint``."""
    name = header.strip()
    if name.startswith("- "):
        name = name[2:].strip()
    for kind in _KINDS:
        if name.endswith(kind):
            return name[: -len(kind)]
    return name


def read_joint_csv(path: str | Path) -> JointTable:
    """Read a joint CSV (``t`` first, one column per joint; :class:`SampleError` if unusable)."""
    path = Path(path)
    try:
        header = path.read_text().splitlines()[0].split(",")
        table = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)
    except (OSError, IndexError, ValueError) as exc:
        raise SampleError(f"{path}: cannot read a joint CSV ({exc})") from exc
    if header[0].strip() != "t" or table.shape[1] != len(header):
        raise SampleError(f"{path}: expected a 't' column then one column per joint")
    if not np.all(np.isfinite(table)):
        raise SampleError(f"{path}: contains NaN or inf")
    if np.any(np.diff(table[:, 0]) <= 0):
        raise SampleError(f"{path}: stamps are not strictly increasing")
    return JointTable(table[:, 0].copy(), [joint_name(h) for h in header[1:]],
                      np.ascontiguousarray(table[:, 1:]))


def read_joint_bag(path: str | Path, topic: str | None = None
                   ) -> tuple[JointTable, JointTable]:
    """Positions and efforts of the joint states in a bag (``topic``, or its only
    sensor_msgs/JointState topic), as two tables on the header stamps.

    The joints are those of the first message with one effort per joint; messages with other
    names (e.g. a gripper's own joint states) are skipped, as are stamps that do not increase
    (:class:`SampleError` when fewer than 2 messages remain)."""
    from inertial_id.io.bags import BagReader

    stamps: list[float] = []
    positions: list[NDArray[np.float64]] = []
    efforts: list[NDArray[np.float64]] = []
    names: tuple[str, ...] | None = None
    with BagReader(path, joint_states_topic=topic, joint_states_only=True) as reader:
        for sample in reader.messages():
            if names is None and len(sample.effort) == len(sample.names) > 0:
                names = tuple(sample.names)
            if (names is None or tuple(sample.names) != names
                    or len(sample.effort) != len(names) or len(sample.position) != len(names)
                    or (stamps and sample.stamp <= stamps[-1])):
                continue
            stamps.append(sample.stamp)
            positions.append(np.asarray(sample.position, dtype=float))
            efforts.append(np.asarray(sample.effort, dtype=float))
    if names is None or len(stamps) < 2:
        raise SampleError(f"{path}: no joint states with one effort per joint")
    t = np.asarray(stamps)
    return (JointTable(t, list(names), np.array(positions)),
            JointTable(t, list(names), np.array(efforts)))


def _aligned(table: JointTable, reference: JointTable, what: str) -> NDArray[np.float64]:
    """``table``'s values in ``reference``'s joint order, checking the clocks match."""
    if table.t.shape != reference.t.shape or not np.allclose(table.t, reference.t, atol=1e-6):
        raise SampleError(f"the {what} CSV is not on the position CSV's rows and clock")
    index = {n: i for i, n in enumerate(table.names)}
    missing = [n for n in reference.names if n not in index]
    if missing:
        raise SampleError(f"the {what} CSV lacks joints {', '.join(missing)}")
    return table.values[:, [index[n] for n in reference.names]]


@dataclass(frozen=True)
class JointData:
    """Joint trajectories in the model's joint order: ``q, qd, qdd, effort`` (N, nv)."""

    t: NDArray[np.float64]
    q: NDArray[np.float64]
    qd: NDArray[np.float64]
    qdd: NDArray[np.float64]
    effort: NDArray[np.float64]
    valid: NDArray[np.bool_]  # rows away from the record's ends (full filter windows)
    window: int  # samples of the Savitzky-Golay window used (odd)

    def rows(self, start: int, stop: int) -> tuple[NDArray[np.float64], ...]:
        """``q, qd, qdd, effort`` of rows ``[start, stop)`` that are valid."""
        return self.rows_in([(start, stop)])

    def rows_in(self, ranges: Sequence[tuple[int, int]]) -> tuple[NDArray[np.float64], ...]:
        """``q, qd, qdd, effort`` of the valid rows inside any of ``ranges`` (``[start,
        stop)`` each), in time order (the ranges' rows concatenated)."""
        keep = self.mask(ranges) & self.valid
        return self.q[keep], self.qd[keep], self.qdd[keep], self.effort[keep]

    def mask(self, ranges: Sequence[tuple[int, int]]) -> NDArray[np.bool_]:
        """Rows (valid or not) inside any of ``ranges`` (``[start, stop)`` each)."""
        keep = np.zeros(self.t.size, bool)
        for start, stop in ranges:
            keep[start:stop] = True
        return keep


WINDOW_SECONDS = 0.24
"""s spanned by the default Savitzky-Golay window of the joint-torque commands: 31 samples at
125 Hz, 241 at 1 kHz. A window in samples at every rate (31 was the default) left the Panda's
1 kHz accelerations noise (0.031 s): every model's error 2.5-3.5 N m on joints 1-3."""


def window_samples(t: NDArray[np.float64], order: int = 3,
                   seconds: float = WINDOW_SECONDS) -> int:
    """The odd number of samples nearest to ``seconds`` at the mean period of the stamps
    ``t`` (s; the mean, not the median: the Panda's 1 kHz stamps jitter from 0.84 to 1.25 ms
    and the median of a stretch of them was 0.97 ms), at least ``order + 2`` and at most the
    record (odd)."""
    period = float(t[-1] - t[0]) / (t.size - 1) if t.size > 1 else 0.0
    n = int(round(seconds / period)) if period > 0 else order + 2
    n = max(n, order + 2)
    n = min(n, t.size if t.size % 2 else t.size - 1)
    return n if n % 2 else n + 1 if n + 1 <= t.size else n - 1


def joint_data(model: LinkModel, position: JointTable, effort: JointTable,
               velocity: JointTable | None = None, window: int | None = None, order: int = 3
               ) -> JointData:
    """Smooth and differentiate positions (Savitzky-Golay on the stamps, ``window`` samples,
    odd; ``None``: :func:`window_samples`, :data:`WINDOW_SECONDS` at the record's rate),
    order by model."""
    window = window or window_samples(position.t, order)
    index = model.order(position.names)
    raw = position.values[:, index]
    effort_values = _aligned(effort, position, "effort")[:, index]
    q = savitzky_golay(position.t, raw, window, order, 0)
    qd = savitzky_golay(position.t, raw, window, order, 1)
    qdd = savitzky_golay(position.t, raw, window, order, 2)
    if velocity is not None:
        qd = _aligned(velocity, position, "velocity")[:, index]
    valid = np.zeros(position.t.size, bool)
    valid[window // 2: position.t.size - window // 2] = True
    return JointData(position.t, q, qd, qdd, effort_values, valid, window)
