"""ROS 2 bags (.db3 and .mcap) without a ROS runtime, through ``rosbags``.

Reading yields the messages the pipeline needs in log-time order — joint states, wrenches and
an optional URDF on ``robot_description`` — with topics found by type when not named.
Writing produces a bag of the same topics (used by ``inertial-id simulate``). Every problem
(no such bag, a truncated file, a missing topic, no messages) is a :class:`BagError` that
names the bag and what is wrong.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from rosbags.highlevel import AnyReader
from rosbags.interfaces import Connection
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore

from inertial_id.cdr import CdrDecoder, stamp_parts
from inertial_id.core.errors import InertialIdError
from inertial_id.core.gathering import JointStateSample, MessageBlock, WrenchSample

JOINT_STATE = "sensor_msgs/msg/JointState"
WRENCH = "geometry_msgs/msg/WrenchStamped"
STRING = "std_msgs/msg/String"
CLOCK = "rosgraph_msgs/msg/Clock"
TYPESTORE = get_typestore(Stores.ROS2_KILTED)
BLOCK_MESSAGES = 2048
"""Messages :meth:`BagReader.blocks` decodes at once (2 s of a 1 kHz wrench and 500 Hz joint
states at most)."""


class BagError(InertialIdError):
    """A bag cannot be read or lacks what the pipeline needs."""


@dataclass(frozen=True)
class BagTopics:
    """The topics replay reads: joint states, wrench (None when only joint states are read),
    and the URDF if the bag has one."""

    joint_states: str
    wrench: str | None
    robot_description: str | None = None


def _seconds(stamp: Any) -> float:
    return stamp.sec + 1e-9 * stamp.nanosec


def _pick(connections: list[Connection], msgtype: str, topic: str | None, what: str,
          bag: Path) -> str:
    available = sorted({f"{c.topic} ({c.msgtype})" for c in connections})
    if topic is not None:
        if not any(c.topic == topic for c in connections):
            raise BagError(f"{bag}: no topic {topic}; topics: {', '.join(available) or 'none'}")
        return topic
    found = sorted({c.topic for c in connections if c.msgtype == msgtype})
    if not found:
        raise BagError(f"{bag}: no {what} topic of type {msgtype}; topics: "
                       f"{', '.join(available) or 'none'}")
    if len(found) > 1:
        raise BagError(f"{bag}: several {msgtype} topics ({', '.join(found)}): choose one")
    return found[0]


class BagReader:
    """Opens a bag and iterates over the pipeline's messages; use as a context manager."""

    def __init__(self, path: str | Path, joint_states_topic: str | None = None,
                 wrench_topic: str | None = None, joint_states_only: bool = False) -> None:
        """``joint_states_only``: read the joint states (with efforts) and no wrench, for
        arms without a wrist F/T sensor."""
        self.path = Path(path)
        self.joint_states_only = joint_states_only
        if not self.path.exists():
            raise BagError(f"{self.path}: no such bag")
        try:
            self._reader = AnyReader([self.path], default_typestore=TYPESTORE)
        except Exception as exc:  # rosbags raises several types for what is not a bag
            raise BagError(f"{self.path}: not a bag (a .db3/.mcap bag directory or file): "
                           f"{exc}") from exc
        self._requested = (joint_states_topic, wrench_topic)
        self.topics: BagTopics | None = None

    def __enter__(self) -> BagReader:
        try:
            self._reader.open()
        except Exception as exc:  # rosbags raises several types for damaged bags
            raise BagError(f"{self.path}: cannot open the bag: {exc}") from exc
        connections = list(self._reader.connections)
        joint, wrench = self._requested
        described = sorted({c.topic for c in connections if c.msgtype == STRING
                            and c.topic.endswith("robot_description")})
        self.topics = BagTopics(
            _pick(connections, JOINT_STATE, joint, "joint state", self.path),
            None if self.joint_states_only
            else _pick(connections, WRENCH, wrench, "wrench", self.path),
            described[0] if described else None,
        )
        if self.message_count == 0:
            what = "joint state" if self.joint_states_only else "joint state or wrench"
            raise BagError(f"{self.path}: the bag has no {what} messages")
        return self

    def __exit__(self, *exc: object) -> None:
        self._reader.close()

    def _connections(self) -> list[Connection]:
        assert self.topics is not None
        wanted = {self.topics.joint_states, self.topics.wrench, self.topics.robot_description}
        return [c for c in self._reader.connections if c.topic in wanted]

    @property
    def message_count(self) -> int:
        """Joint state and wrench messages in the bag."""
        assert self.topics is not None
        wanted = {self.topics.joint_states, self.topics.wrench}
        return sum(c.msgcount for c in self._reader.connections if c.topic in wanted)

    @property
    def duration(self) -> float:
        """Seconds between the first and the last message (log time)."""
        return (self._reader.end_time - self._reader.start_time) * 1e-9

    def robot_description(self) -> str | None:
        """The first URDF published in the bag, if any."""
        assert self.topics is not None
        if self.topics.robot_description is None:
            return None
        conns = [c for c in self._reader.connections if c.topic == self.topics.robot_description]
        for connection, _, raw in self._reader.messages(connections=conns):
            return self._reader.deserialize(raw, connection.msgtype).data
        return None

    def messages(self) -> Iterator[JointStateSample | WrenchSample]:
        """Joint states and wrenches in log-time order."""
        for item in self.blocks(1):
            if isinstance(item, MessageBlock):
                yield from item.messages()
            else:
                yield item

    def blocks(self, size: int = BLOCK_MESSAGES
               ) -> Iterator[MessageBlock | JointStateSample | WrenchSample]:
        """:meth:`messages`, up to ``size`` at a time decoded at once into a
        :class:`MessageBlock` (no object per message) where their payloads allow it
        (:meth:`CdrDecoder.block`), else one by one; log-time order throughout."""
        assert self.topics is not None
        conns = [c for c in self._connections() if c.topic != self.topics.robot_description]
        decoder = CdrDecoder()
        types: list[str] = []
        payloads: list[bytes] = []
        try:
            for connection, _, raw in self._reader.messages(connections=conns):
                types.append(connection.msgtype)
                payloads.append(raw)
                if len(payloads) >= size:
                    yield from self._decode(decoder, types, payloads)
                    types, payloads = [], []
            yield from self._decode(decoder, types, payloads)
        except BagError:
            raise
        except Exception as exc:  # a truncated or corrupt bag fails part-way
            raise BagError(f"{self.path}: cannot read the bag: {exc}") from exc

    def _decode(self, decoder: CdrDecoder, types: Sequence[str], payloads: Sequence[bytes]
                ) -> Iterator[MessageBlock | JointStateSample | WrenchSample]:
        """One block of payloads (``types``: their message types; any but a joint state is
        read as a wrench): decoded at once, or one by one when they do not share a layout or
        one is malformed (which then fails)."""
        kinds = [msgtype != JOINT_STATE for msgtype in types]
        if len(payloads) > 1:
            try:
                block = decoder.block(kinds, payloads)
            except (ValueError, struct.error):
                block = None
            if block is not None:
                yield block
                return
        for wrench, msgtype, raw in zip(kinds, types, payloads, strict=True):
            if CdrDecoder.little_endian_cdr(raw):
                yield decoder.wrench(raw) if wrench else decoder.joint_state(raw)
            else:
                yield self._deserialize(raw, msgtype)

    def _deserialize(self, raw: bytes, msgtype: str) -> JointStateSample | WrenchSample:
        """Any CDR flavour, through rosbags' message objects."""
        msg = self._reader.deserialize(raw, msgtype)
        if msgtype == JOINT_STATE:
            return JointStateSample(_seconds(msg.header.stamp), tuple(msg.name),
                                    np.asarray(msg.position, dtype=float),
                                    np.asarray(msg.velocity, dtype=float),
                                    np.asarray(msg.effort, dtype=float))
        f, t = msg.wrench.force, msg.wrench.torque
        return WrenchSample(_seconds(msg.header.stamp), msg.header.frame_id,
                            np.array([f.x, f.y, f.z, t.x, t.y, t.z]))


def _header(stamp: float, frame_id: str = "") -> Any:
    t = TYPESTORE.types
    sec, nanosec = stamp_parts(stamp)
    return t["std_msgs/msg/Header"](
        stamp=t["builtin_interfaces/msg/Time"](sec=sec, nanosec=nanosec), frame_id=frame_id,
    )


def joint_state_message(stamp: float, names: list[str], position: NDArray[np.float64],
                        velocity: NDArray[np.float64],
                        effort: NDArray[np.float64] | None = None) -> Any:
    """A rosbags ``sensor_msgs/JointState`` (no efforts unless given)."""
    return TYPESTORE.types[JOINT_STATE](
        header=_header(stamp), name=list(names),
        position=np.ascontiguousarray(position, dtype=float),
        velocity=np.ascontiguousarray(velocity, dtype=float),
        effort=np.ascontiguousarray(np.zeros(0) if effort is None else effort, dtype=float),
    )


def wrench_message(stamp: float, frame_id: str, wrench: NDArray[np.float64]) -> Any:
    """A rosbags ``geometry_msgs/WrenchStamped``."""
    t = TYPESTORE.types
    vector = t["geometry_msgs/msg/Vector3"]
    w = [float(x) for x in wrench]
    return t[WRENCH](header=_header(stamp, frame_id), wrench=t["geometry_msgs/msg/Wrench"](
        force=vector(x=w[0], y=w[1], z=w[2]), torque=vector(x=w[3], y=w[4], z=w[5])))


def string_message(text: str) -> Any:
    """A rosbags ``std_msgs/String``."""
    return TYPESTORE.types[STRING](data=text)


def write_bag(path: str | Path, messages: Iterable[tuple[str, str, float, Any]],
              storage: str = "mcap") -> None:
    """Write ``(topic, msgtype, log time s, message)`` in order to a new bag directory."""
    plugins = {"mcap": StoragePlugin.MCAP, "db3": StoragePlugin.SQLITE3,
               "sqlite3": StoragePlugin.SQLITE3}
    if storage not in plugins:
        raise BagError(f"unknown bag storage {storage!r}: use mcap or db3")
    path = Path(path)
    if path.exists():
        raise BagError(f"{path}: already exists")
    connections: dict[str, Connection] = {}
    with Writer(path, version=9, storage_plugin=plugins[storage]) as writer:
        for topic, msgtype, t, msg in messages:
            if topic not in connections:
                connections[topic] = writer.add_connection(topic, msgtype, typestore=TYPESTORE)
            writer.write(connections[topic], int(round(t * 1e9)),
                         TYPESTORE.serialize_cdr(msg, msgtype))
