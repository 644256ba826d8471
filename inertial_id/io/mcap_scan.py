"""The message records of a decompressed MCAP chunk, found without an object per record.

An MCAP chunk holds records one after another, each an opcode (1 byte), a length (uint64
little endian) and that many bytes; a message record (opcode 0x05) starts with its channel id
(uint16), sequence (uint32), log time and publish time (uint64 ns), then the CDR payload.
:func:`scan_messages` walks them with a loop compiled by numba (cached on disk beside this
file or in ``NUMBA_CACHE_DIR``) and returns arrays of the messages' channel ids, payload
offsets and lengths and log times; :func:`scan_messages_python` is the same walk in Python,
the fallback without numba and the reference a test holds the compiled loop to. A chunk the
compiled loop cannot walk to its end (a truncated record) goes through the Python walk, which
raises what :mod:`inertial_id.io.bags` always raised: ``BagError("truncated MCAP record
...")``, or ``struct.error`` for a record header cut short.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable, Collection
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from inertial_id.core.errors import InertialIdError

_RECORD = struct.Struct("<BQ")  # opcode, length
_MESSAGE = struct.Struct("<HIQQ")  # channel id, sequence, log time, publish time (ns)
_MESSAGE_OPCODE = 0x05
_MESSAGE_HEADER = 22  # _MESSAGE.size, as a number the compiled loop can read
_PAYLOAD = 9 + _MESSAGE_HEADER  # a message record's payload offset from the record's start


class TruncatedRecord(InertialIdError):
    """A chunk's record runs past the chunk."""


class ChunkMessages(NamedTuple):
    """Message records of a chunk: channel ids, payload offsets and lengths in the chunk's
    bytes, log times (ns)."""

    channel: NDArray[np.int64]
    offset: NDArray[np.int64]
    length: NDArray[np.int64]
    log_time: NDArray[np.uint64]

    def take(self, index: slice | NDArray[np.intp] | NDArray[np.bool_]) -> ChunkMessages:
        """The messages ``index`` selects (a slice, integer positions or a mask)."""
        return ChunkMessages(*(field[index] for field in self))


def scan_messages_python(data: bytes, first: int, last: int) -> ChunkMessages:
    """The message records of ``data`` (a decompressed chunk) whose log time lies in
    ``[first, last]`` (those outside are skipped, as rosbags reads a chunk), in record order.
    A record running past the chunk raises :class:`TruncatedRecord` naming its offset; a
    record header or message header cut short by the chunk's end raises ``struct.error``. A
    message record shorter than its header has an empty payload (the next bytes are read as
    the rest of its header)."""
    found: list[tuple[int, int, int, int]] = []
    pos, end = 0, len(data)
    while pos < end:
        opcode, length = _RECORD.unpack_from(data, pos)
        if pos + 9 + length > end:
            raise TruncatedRecord(f"truncated MCAP record at {pos} of a chunk")
        if opcode == _MESSAGE_OPCODE:
            channel, _, log_time, _ = _MESSAGE.unpack_from(data, pos + 9)
            if first <= log_time <= last:
                found.append((channel, pos + _PAYLOAD, max(0, length - _MESSAGE_HEADER),
                              log_time))
        pos += 9 + length
    columns = list(zip(*found, strict=True)) or [(), (), (), ()]
    return ChunkMessages(*(np.array(values, dtype=np.int64) for values in columns[:3]),
                         np.array(columns[3], dtype=np.uint64))


def _scan(data: NDArray[np.uint8], first: np.uint64, last: np.uint64,
          channel: NDArray[np.int64], offset: NDArray[np.int64], length: NDArray[np.int64],
          log_time: NDArray[np.uint64]) -> int:
    """:func:`scan_messages_python`'s walk into the output arrays (room for one message
    per 9 bytes): the number of messages found, or -1 where the Python walk raises.
    Unsigned and signed integers are never mixed (numba would make floats of them)."""
    end = data.shape[0]
    pos = 0
    count = 0
    while pos < end:
        if end - pos < 9:
            return -1
        size = np.uint64(0)  # little endian
        for k in range(8):
            size |= np.uint64(data[pos + 1 + k]) << np.uint64(8 * k)
        if size > np.uint64(end - pos - 9):
            return -1
        if data[pos] == _MESSAGE_OPCODE:
            if pos + _PAYLOAD > end:
                return -1
            stamp = np.uint64(0)
            for k in range(8):
                stamp |= np.uint64(data[pos + 15 + k]) << np.uint64(8 * k)
            if first <= stamp <= last:
                channel[count] = np.int64(data[pos + 9]) | (np.int64(data[pos + 10]) << 8)
                offset[count] = pos + _PAYLOAD
                length[count] = max(np.int64(size) - _MESSAGE_HEADER, 0)
                log_time[count] = stamp
                count += 1
        pos += 9 + np.int64(size)
    return count


_COMPILED: list[Callable[..., int] | None] = []
_LOCK = threading.Lock()


def compiled_scan() -> Callable[..., int] | None:
    """:func:`_scan` compiled (numba; compiled or loaded from the disk cache at the first
    call, then kept), or None without numba."""
    with _LOCK:
        if not _COMPILED:
            _COMPILED.append(_compile())
    return _COMPILED[0]


def _compile() -> Callable[..., int] | None:
    try:
        import numba
    except ImportError:
        return None
    types = numba.types
    data = types.Array(types.uint8, 1, "C", readonly=True)
    i8, u8 = types.Array(types.int64, 1, "C"), types.Array(types.uint64, 1, "C")
    signature = types.int64(data, types.uint64, types.uint64, i8, i8, i8, u8)
    return numba.njit(signature, cache=True, nogil=True)(_scan)  # type: ignore[no-any-return]


def scan_messages(data: bytes, first: int, last: int) -> ChunkMessages:
    """:func:`scan_messages_python`, compiled where numba is installed (the same arrays; a
    chunk the compiled walk stops in goes through the Python walk, which raises)."""
    scan = compiled_scan()
    if scan is None or not (0 <= first < 2**64 and 0 <= last < 2**64):
        return scan_messages_python(data, first, last)
    room = len(data) // 9 + 1
    out = ChunkMessages(np.empty(room, np.int64), np.empty(room, np.int64),
                        np.empty(room, np.int64), np.empty(room, np.uint64))
    count = scan(np.frombuffer(data, np.uint8), np.uint64(first), np.uint64(last), *out)
    if count < 0:
        return scan_messages_python(data, first, last)
    return out.take(slice(count))


def chunk_messages(data: bytes, first: int, last: int, channels: Collection[int]
                   ) -> ChunkMessages:
    """:func:`scan_messages` of ``channels`` only, sorted stably by log time."""
    found = scan_messages(data, first, last)
    found = found.take(np.isin(found.channel, np.fromiter(channels, np.int64, len(channels))))
    return found.take(np.argsort(found.log_time, kind="stable"))
