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
from rosbags.rosbag2 import StoragePlugin, Writer, storage_mcap
from rosbags.typesys import Stores, get_typestore

from inertial_id.core.errors import InertialIdError
from inertial_id.core.estimation.compensation import Announcement
from inertial_id.core.samples import JointStateSample, MessageBlock, WrenchSample
from inertial_id.io.cdr import CdrDecoder, stamp_parts
from inertial_id.io.compensation_topic import read_announcements, register
from inertial_id.io.mcap_scan import ChunkMessages, TruncatedRecord, chunk_messages

JOINT_STATE = "sensor_msgs/msg/JointState"
WRENCH = "geometry_msgs/msg/WrenchStamped"
STRING = "std_msgs/msg/String"
CLOCK = "rosgraph_msgs/msg/Clock"
TYPESTORE = get_typestore(Stores.ROS2_KILTED)
register(TYPESTORE)  # the applier's ~/compensation, written by simulate, read by replay
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

    def announcements(self) -> list[Announcement]:
        """The applier's ``~/compensation`` announcements in the bag, in log-time order
        (:func:`~inertial_id.io.compensation_topic.read_announcements`; [] without any)."""
        return read_announcements(self._reader)

    def robot_description(self) -> str | None:
        """The first URDF published in the bag, if any."""
        assert self.topics is not None
        if self.topics.robot_description is None:
            return None
        conns = [c for c in self._reader.connections if c.topic == self.topics.robot_description]
        chunks = mcap_chunks(self._reader, conns)  # the first chunk holding it, when it can
        messages = (((msgtype, raw) for types, payloads in chunks
                     for msgtype, raw in zip(types, payloads, strict=True))
                    if chunks is not None else
                    ((c.msgtype, raw) for c, _, raw in self._reader.messages(connections=conns)))
        for msgtype, raw in messages:
            return self._reader.deserialize(raw, msgtype).data
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
        (:meth:`CdrDecoder.block`), else one by one; log-time order throughout. An MCAP
        file's chunks are decoded where they lie (:func:`mcap_messages`,
        :meth:`CdrDecoder.packed_block`): the blocks of :meth:`payloads`, with no bytes
        object per message."""
        assert self.topics is not None
        conns = [c for c in self._connections() if c.topic != self.topics.robot_description]
        decoder = CdrDecoder()
        try:
            chunks = mcap_messages(self._reader, conns)
            if chunks is None:
                for types, payloads in self._rosbags_payloads(conns, size):
                    yield from self._decode(decoder, types, payloads)
                return
            for data, found, channels in chunks:
                yield from self._decode_chunk(decoder, data, found, channels, size)
        except BagError:
            raise
        except Exception as exc:  # a truncated or corrupt bag fails part-way
            raise BagError(f"{self.path}: cannot read the bag: {exc}") from exc

    def payloads(self, connections: Sequence[Connection], size: int
                 ) -> Iterator[tuple[list[str], list[bytes]]]:
        """The messages of ``connections`` in log-time order as lists of at most ``size``
        message types and CDR payloads: read here chunk by chunk from an MCAP file whose
        chunks follow each other in log time (:func:`mcap_chunks`: the order rosbags gives,
        without an object per message), else through rosbags' reader."""
        chunks = mcap_chunks(self._reader, connections)
        if chunks is None:
            yield from self._rosbags_payloads(connections, size)
            return
        for types, payloads in chunks:
            for start in range(0, len(payloads), size):
                yield types[start : start + size], payloads[start : start + size]

    def _rosbags_payloads(self, connections: Sequence[Connection], size: int
                          ) -> Iterator[tuple[list[str], list[bytes]]]:
        """:meth:`payloads` through rosbags' reader."""
        types: list[str] = []
        payloads: list[bytes] = []
        for connection, _, raw in self._reader.messages(connections=connections):
            types.append(connection.msgtype)
            payloads.append(raw)
            if len(payloads) >= size:
                yield types, payloads
                types, payloads = [], []
        if payloads:
            yield types, payloads

    def _decode_chunk(self, decoder: CdrDecoder, data: bytes, found: ChunkMessages,
                      channels: dict[int, str], size: int
                      ) -> Iterator[MessageBlock | JointStateSample | WrenchSample]:
        """:meth:`_decode` of one MCAP chunk's messages (``found`` in ``data``; ``channels``:
        channel id: message type) ``size`` at a time, from the chunk's bytes."""
        wrenches = [channel for channel, msgtype in channels.items() if msgtype != JOINT_STATE]
        is_wrench = np.isin(found.channel, np.array(wrenches, dtype=np.int64))
        for start in range(0, len(found.channel), size):
            part = found.take(slice(start, start + size))
            kinds = is_wrench[start : start + size].copy()
            if len(kinds) > 1:
                try:
                    block = decoder.packed_block(kinds, data, part.offset, part.length)
                except (ValueError, struct.error):
                    block = None
                if block is not None:
                    yield block
                    continue
            yield from self._one_by_one(decoder, kinds.tolist(), _chunk_types(part, channels),
                                        _chunk_payloads(data, part))

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
        yield from self._one_by_one(decoder, kinds, types, payloads)

    def _one_by_one(self, decoder: CdrDecoder, kinds: Sequence[bool], types: Sequence[str],
                    payloads: Sequence[bytes]
                    ) -> Iterator[JointStateSample | WrenchSample]:
        """:meth:`_decode`'s messages one by one (``kinds``: which are wrenches)."""
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


_MCAP_CRC = struct.Struct("<I")


def _mcap_source(reader: AnyReader, connections: Sequence[Connection]
                 ) -> tuple[Any, list[Any], dict[int, str]] | None:
    """The MCAP reader, its chunks in file order and the channels of ``connections``
    (channel id: message type) that :func:`mcap_chunks` reads, or None."""
    try:
        (bag,) = reader.readers
        (storage,) = bag.storage.storages
        if bag.storage.metadata.compression_mode == "message":
            return None
        wanted = {(c.topic, c.msgtype) for c in connections}
        channels = {c.id: c.msgtype for c in storage.connections
                    if (c.topic, c.msgtype) in wanted}
        chunks = sorted(storage.chunks, key=lambda chunk: chunk.chunk_start_offset)
        needed = storage_mcap.McapReader, storage_mcap.decompress, storage_mcap.read_exact
    except (AttributeError, TypeError, ValueError):  # another reader or rosbags version
        return None
    if (not isinstance(storage, needed[0]) or storage.bio is None or not chunks
            or any(a.message_end_time > b.message_start_time
                   for a, b in zip(chunks, chunks[1:], strict=False))):
        return None
    return storage, chunks, channels


def mcap_chunks(reader: AnyReader, connections: Sequence[Connection]
                ) -> Iterator[tuple[list[str], list[bytes]]] | None:
    """The messages of ``connections`` chunk by chunk (message types, CDR payloads; each
    chunk's sorted by log time, stably, as rosbags does) when the bag is one indexed MCAP
    file read by rosbags' ``McapReader`` (the reader objects of rosbags 0.11), its
    messages not compressed one by one and its chunks following each other in log time
    (then rosbags' merge of the chunks is their concatenation); None otherwise."""
    found = mcap_messages(reader, connections)
    if found is None:
        return None
    return ((_chunk_types(messages, channels), _chunk_payloads(data, messages))
            for data, messages, channels in found)


def _chunk_types(messages: ChunkMessages, channels: dict[int, str]) -> list[str]:
    """The message types of ``messages`` (``channels``: channel id: message type)."""
    return [channels[channel] for channel in messages.channel.tolist()]


def _chunk_payloads(data: bytes, messages: ChunkMessages) -> list[bytes]:
    """The payloads of ``messages`` (in ``data``), one bytes object each."""
    return [data[a : a + n] for a, n in zip(messages.offset.tolist(),
                                            messages.length.tolist(), strict=True)]


def mcap_messages(reader: AnyReader, connections: Sequence[Connection]
                  ) -> Iterator[tuple[bytes, ChunkMessages, dict[int, str]]] | None:
    """:func:`mcap_chunks` as each chunk's bytes, where its messages lie in them
    (:func:`~inertial_id.io.mcap_scan.chunk_messages`: in log-time order) and the channels
    read (channel id: message type); None where :func:`mcap_chunks` is None."""
    source = _mcap_source(reader, connections)
    return None if source is None else _read_mcap_chunks(*source)


def _read_mcap_chunks(storage: Any, chunks: Sequence[Any], channels: dict[int, str]
                      ) -> Iterator[tuple[bytes, ChunkMessages, dict[int, str]]]:
    """:func:`mcap_messages`' reading: each chunk's message records (opcode 0x05) of
    ``channels`` (channel id: message type), the chunk read and checked as rosbags does;
    messages with a log time outside the chunk's are skipped, as rosbags reads them."""
    bio, decompress, read_exact = storage.bio, storage_mcap.decompress, storage_mcap.read_exact
    for chunk in chunks:
        if not any(chunk.channel_count.get(channel, 0) for channel in channels):
            continue
        bio.seek(chunk.chunk_start_offset + 9 + 24)
        (crc,) = _MCAP_CRC.unpack(read_exact(bio, 4))
        bio.seek(chunk.chunk_start_offset + 9 + 40 + len(chunk.compression))
        data = decompress(read_exact(bio, chunk.compressed_size), chunk.compression,
                          chunk.uncompressed_size, crc)
        try:
            found = chunk_messages(data, chunk.message_start_time, chunk.message_end_time,
                                   channels)
        except TruncatedRecord as exc:
            raise BagError(str(exc)) from exc
        yield data, found, channels


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
    """Write ``(topic, msgtype, log time s, message)`` in order to a new bag directory (a
    message given as ``bytes`` is written as it is: CDR already)."""
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
            data = msg if isinstance(msg, bytes) else TYPESTORE.serialize_cdr(msg, msgtype)
            writer.write(connections[topic], int(round(t * 1e9)), data)
