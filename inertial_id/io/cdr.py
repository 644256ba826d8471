"""Fast CDR of ``sensor_msgs/JointState``, ``geometry_msgs/WrenchStamped`` and the
pipeline's batches (``inertial_id/JointSamples``, ``inertial_id/SensorSamples``).

The same bytes arrive from a bag (rosbags hands over the CDR payload) and from a raw rclpy
subscription, so replay and the nodes decode them with one :class:`CdrDecoder` instead of
building message objects (about 5x faster than rosbags' deserialiser and rclpy's);
:class:`CdrEncoder` writes them for a publisher that sends bytes (the simulator's streams and
the batches between gatherer, kinematics and solver, where rclpy's conversion of a Python
message with ``float64[]`` and ``Time[]`` fields cost more than the work on the data).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from numpy.typing import ArrayLike, NDArray

from inertial_id.core.samples import JointStateSample, MessageBlock, SyncedSamples, WrenchSample

TIME = np.dtype([("sec", "<i4"), ("nanosec", "<u4")])
"""``builtin_interfaces/Time`` as CDR lays out the elements of a ``Time[]``."""

SENSOR_FIELDS = ("twist", "proper_acceleration", "wrench", "wrench_raw")
"""The (N, 6) arrays of ``inertial_id/SensorSamples``, in the message's order."""

_UPPER = np.triu_indices(6)


def pack_noise(covariances: NDArray[np.float64] | None) -> NDArray[np.float64]:
    """(N, 6, 6) symmetric covariances -> the ``acceleration_noise`` field: N * 21 values,
    each matrix's upper triangle row by row (empty for None)."""
    if covariances is None:
        return np.zeros(0)
    return np.ascontiguousarray(covariances[:, _UPPER[0], _UPPER[1]]).ravel()


def unpack_noise(values: ArrayLike, count: int) -> NDArray[np.float64] | None:
    """The ``acceleration_noise`` field of ``count`` samples -> (count, 6, 6), or None when it
    is empty (a publisher without errors in variables)."""
    flat = np.asarray(values, dtype=float)
    if flat.size == 0 and count:
        return None
    if flat.size != 21 * count:
        raise ValueError(f"{flat.size} acceleration noise values for {count} samples of 21")
    upper = flat.reshape(count, 21)
    out = np.empty((count, 6, 6))
    out[:, _UPPER[0], _UPPER[1]] = upper
    out[:, _UPPER[1], _UPPER[0]] = upper
    return out


class CdrDecoder:
    """Fast decoding of little-endian CDR ``JointState`` and ``WrenchStamped`` payloads.

    Reads the fields straight from the bytes (``struct`` and ``numpy.frombuffer``) instead of
    building rosbags message objects, about five times faster; the alignment rules are those
    of rosbags' deserialiser (and Fast CDR): primitives aligned to their size relative to the
    payload after the 4-byte encapsulation header, a sequence's elements aligned only when it
    is not empty. Identical joint name lists decode to the same tuple object. Anything other
    than plain little-endian CDR goes through rosbags. Arrays are read-only views of the
    payload. A malformed payload raises ``ValueError`` or ``struct.error``.
    """

    _STAMP = struct.Struct("<iI")
    _COUNT = struct.Struct("<I")
    _WRENCH = struct.Struct("<6d")
    _UINT64 = struct.Struct("<Q")
    _FLOAT64 = struct.Struct("<d")
    _MAX_NAMES = 100_000
    MAX_CACHED_LISTS = 64
    """Distinct joint name lists remembered; the cache starts over when a stream keeps
    sending new ones, so memory stays bounded whatever arrives."""

    def __init__(self) -> None:
        self._names: dict[bytes, tuple[str, ...]] = {}
        self._last_names: tuple[bytes, tuple[str, ...]] = (b"", ())

    @staticmethod
    def little_endian_cdr(raw: bytes) -> bool:
        """True for a plain little-endian CDR payload (encapsulation 0x0001)."""
        return raw[:2] == b"\x00\x01"

    def _header(self, raw: bytes) -> tuple[float, str, int]:
        """Stamp (s), frame id and the payload offset after the header."""
        sec, nanosec = self._STAMP.unpack_from(raw, 4)
        (length,) = self._COUNT.unpack_from(raw, 12)
        if length == 0 or 16 + length > len(raw):
            raise ValueError(f"bad frame_id length {length}")
        return sec + 1e-9 * nanosec, raw[16 : 15 + length].decode(), 12 + length

    def _doubles(self, raw: bytes, pos: int) -> tuple[NDArray[np.float64], int]:
        """A ``float64[]`` sequence at payload offset ``pos``, and the offset after it."""
        pos = (pos + 3) & -4
        (size,) = self._COUNT.unpack_from(raw, 4 + pos)
        pos += 4
        if size:
            pos = (pos + 7) & -8
        values = np.frombuffer(raw, dtype="<f8", count=size, offset=4 + pos)
        return values, pos + 8 * size

    def _name_list(self, raw: bytes, pos: int) -> tuple[tuple[str, ...], int]:
        """A ``string[]`` sequence at payload offset ``pos``, and the offset after it."""
        start = pos = (pos + 3) & -4
        key, names = self._last_names
        if key and raw.startswith(key, 4 + start):  # the same bytes parse the same
            return names, start + len(key)
        (count,) = self._COUNT.unpack_from(raw, 4 + pos)
        if count > self._MAX_NAMES:
            raise ValueError(f"{count} joint names")
        pos += 4
        bounds = []
        for _ in range(count):
            pos = (pos + 3) & -4
            (length,) = self._COUNT.unpack_from(raw, 4 + pos)
            end = 4 + pos + 4 + length
            if length == 0 or end > len(raw) or raw[end - 1] != 0:
                raise ValueError("a joint name runs past the payload or lacks its NUL")
            bounds.append((4 + pos + 4, end - 1))
            pos += 4 + length
        # Only a complete, valid list is cached: a truncated one would be a prefix of the
        # next valid payload and poison every later decode.
        key = raw[4 + start : 4 + pos]
        names = self._names.get(key)
        if names is None:
            names = tuple(raw[a:b].decode() for a, b in bounds)
            if len(self._names) >= self.MAX_CACHED_LISTS:
                self._names.clear()
            self._names[key] = names
        self._last_names = (key, names)
        return names, pos

    def joint_state(self, raw: bytes) -> JointStateSample:
        """A ``sensor_msgs/JointState`` payload."""
        stamp, _, pos = self._header(raw)
        names, pos = self._name_list(raw, pos)
        position, pos = self._doubles(raw, pos)
        velocity, pos = self._doubles(raw, pos)
        effort, _ = self._doubles(raw, pos)
        return JointStateSample(stamp, names, position, velocity, effort)

    def wrench(self, raw: bytes) -> WrenchSample:
        """A ``geometry_msgs/WrenchStamped`` payload."""
        stamp, frame_id, pos = self._header(raw)
        pos = (pos + 7) & -8
        return WrenchSample(stamp, frame_id, np.array(self._WRENCH.unpack_from(raw, 4 + pos)))

    def _sequence_at(self, raw: bytes, pos: int) -> tuple[int, int, int, int]:
        """Where the ``float64[]`` at payload offset ``pos`` lies in ``raw``: the offset of its
        count, its count, the offset of its values, and the payload offset after it (the
        layout of :meth:`_doubles`)."""
        pos = (pos + 3) & -4
        (size,) = self._COUNT.unpack_from(raw, 4 + pos)
        at = 4 + pos
        pos += 4
        if size:
            pos = (pos + 7) & -8
        return at, size, 4 + pos, pos + 8 * size

    def block(self, is_wrench: Sequence[bool], payloads: Sequence[bytes]
              ) -> MessageBlock | None:
        """``JointState`` and ``WrenchStamped`` payloads (``is_wrench``: which is which) in
        arrival order, decoded at once into a :class:`MessageBlock` with the values
        :meth:`joint_state` and :meth:`wrench` would give; None unless every payload is
        plain little-endian CDR and each kind's payloads share one layout (the same length,
        frame id, joint names and sequence sizes: one structured array reads them all)."""
        if len(is_wrench) != len(payloads):
            raise ValueError(f"{len(is_wrench)} kinds for {len(payloads)} payloads")
        lengths = np.fromiter(map(len, payloads), np.int64, len(payloads))
        offsets = np.cumsum(lengths) - lengths
        return self.packed_block(np.array(is_wrench, dtype=bool), b"".join(payloads),
                                 offsets, lengths)

    def packed_block(self, is_wrench: NDArray[np.bool_], buffer: bytes,
                     offsets: NDArray[np.int64], lengths: NDArray[np.int64]
                     ) -> MessageBlock | None:
        """:meth:`block` of the payloads ``buffer[offsets[i] : offsets[i] + lengths[i]]``
        (in ``buffer``, e.g. an MCAP chunk, with no bytes object per payload)."""
        data, kind = np.frombuffer(buffer, np.uint8), np.asarray(is_wrench, dtype=bool)
        if (not offsets.size or np.any(lengths < 2) or np.any(data[offsets] != 0)
                or np.any(data[offsets + 1] != 1)):  # plain little-endian CDR
            return None
        stamps = np.empty(offsets.size)
        frame_id, wrench = "", np.empty((0, 6))
        if np.any(kind):
            at, sizes = offsets[kind], lengths[kind]
            first = buffer[int(at[0]) : int(at[0] + sizes[0])]
            _, frame_id, pos = self._header(first)
            start = 4 + ((pos + 7) & -8)
            parts = (None if start + 48 > len(first) else _packed(
                data, at, sizes, first, [(12, 4 + pos)], [("wrench", 6, start)]))
            if parts is None:
                return None
            stamps[kind] = parts["sec"] + 1e-9 * parts["nanosec"]
            wrench = np.array(parts["wrench"], dtype=float)
        names: tuple[str, ...] = ()
        joints = int(np.count_nonzero(~kind))
        values = [np.empty((joints, 0)) for _ in range(3)]
        if joints:
            at, sizes = offsets[~kind], lengths[~kind]
            first = buffer[int(at[0]) : int(at[0] + sizes[0])]
            _, _, pos = self._header(first)
            names, pos = self._name_list(first, pos)
            spans, fields = [(12, 4 + pos)], []
            for k in range(3):  # position, velocity, effort
                where, size, start, pos = self._sequence_at(first, pos)
                if start + 8 * size > len(first):
                    return None
                spans.append((where, where + 4))
                if size:
                    fields.append((str(k), size, start))
            parts = _packed(data, at, sizes, first, spans, fields)
            if parts is None:
                return None
            stamps[~kind] = parts["sec"] + 1e-9 * parts["nanosec"]
            for name, _, _ in fields:
                values[int(name)] = np.array(parts[name], dtype=float)
        return MessageBlock(kind, stamps, names, *values, frame_id, wrench)

    def _times(self, raw: bytes, pos: int) -> tuple[NDArray[np.float64], int]:
        """A ``builtin_interfaces/Time[]`` at payload offset ``pos`` in seconds (as
        ``sec + 1e-9 * nanosec``), and the offset after it."""
        pos = (pos + 3) & -4
        (size,) = self._COUNT.unpack_from(raw, 4 + pos)
        parts = np.frombuffer(raw, dtype=TIME, count=size, offset=8 + pos)
        return parts["sec"] + 1e-9 * parts["nanosec"], pos + 4 + TIME.itemsize * size

    def _rows(self, raw: bytes, pos: int, count: int, width: int
              ) -> tuple[NDArray[np.float64], int]:
        """A ``float64[]`` of ``count`` rows of ``width`` (row-major), and the offset after."""
        values, pos = self._doubles(raw, pos)
        if values.size != count * width:
            raise ValueError(f"{values.size} values for {count} samples of {width}")
        return values.reshape(count, width), pos

    def joint_samples(self, raw: bytes
                      ) -> tuple[SyncedSamples, tuple[str, ...], str, int, float, bool]:
        """An ``inertial_id/JointSamples`` payload: the batch (joints in the message's order),
        the joint names, the frame id, ``samples_before``, ``filter_span`` (s) and
        ``provisional``."""
        _, frame_id, pos = self._header(raw)
        names, pos = self._name_list(raw, pos)
        times, pos = self._times(raw, pos)
        fields = []
        for width in (len(names),) * 3 + (6, 6):
            values, pos = self._rows(raw, pos, times.size, width)
            fields.append(values)
        matched = []
        for _ in range(2):  # twist, proper_acceleration: empty unless matched filtering
            values, pos = self._doubles(raw, pos)
            matched.append(None if values.size == 0 and times.size else
                           _reshaped(values, times.size))
        values, pos = self._doubles(raw, pos)
        noise = unpack_noise(values, times.size)
        values, pos = self._doubles(raw, pos)
        products = None if values.size == 0 and times.size else _reshaped(values, times.size)
        span, pos = self._float64(raw, pos)
        before, provisional = self._tail(raw, pos)
        return (SyncedSamples(times, *fields, *matched, noise, products), names, frame_id,
                before, span, provisional)

    def sensor_samples(self, raw: bytes
                       ) -> tuple[dict[str, NDArray[np.float64] | float | None], str, int, bool]:
        """An ``inertial_id/SensorSamples`` payload: ``times`` (N,) and ``twist``,
        ``proper_acceleration``, ``wrench``, ``wrench_raw`` (N, 6), ``acceleration_noise``
        ((N, 6, 6) or None) and ``filter_span`` (s) (the keyword arguments of
        :meth:`~inertial_id.core.estimation.online.OnlineEstimator.add`), the frame id,
        ``samples_before`` and ``provisional``."""
        _, frame_id, pos = self._header(raw)
        samples: dict[str, NDArray[np.float64] | None] = {}
        times, pos = self._times(raw, pos)
        samples["times"] = times
        for field in SENSOR_FIELDS:
            samples[field], pos = self._rows(raw, pos, times.size, 6)
        values, pos = self._doubles(raw, pos)
        samples["acceleration_noise"] = unpack_noise(values, times.size)
        values, pos = self._doubles(raw, pos)
        samples["angular_products"] = (None if values.size == 0 and times.size
                                       else _reshaped(values, times.size))
        samples["filter_span"], pos = self._float64(raw, pos)
        return (samples, frame_id, *self._tail(raw, pos))

    def _float64(self, raw: bytes, pos: int) -> tuple[float, int]:
        """The ``float64`` at payload offset ``pos`` (aligned to 8), and the offset after it."""
        pos = (pos + 7) & -8
        (value,) = self._FLOAT64.unpack_from(raw, 4 + pos)
        return float(value), pos + 8

    def _tail(self, raw: bytes, pos: int) -> tuple[int, bool]:
        """The batches' last fields at payload offset ``pos``: ``samples_before`` (``uint64``,
        aligned to 8) and ``provisional`` (``bool``)."""
        pos = (pos + 7) & -8
        (value,) = self._UINT64.unpack_from(raw, 4 + pos)
        if 4 + pos + 8 >= len(raw):
            raise ValueError("the payload ends before its provisional flag")
        return int(value), raw[4 + pos + 8] != 0


def _packed(buffer: NDArray[np.uint8], offsets: NDArray[np.int64], lengths: NDArray[np.int64],
            first: bytes, spans: Sequence[tuple[int, int]],
            fields: Sequence[tuple[str, int, int]]) -> NDArray[np.void] | None:
    """The payloads at ``offsets`` in ``buffer`` as one structured array (header ``sec``,
    ``nanosec`` and ``fields``: name, float64 count, byte offset) if each is as long as
    ``first`` and equal to it on ``spans`` (byte ranges), else None."""
    if not np.all(lengths == len(first)):
        return None
    rows = sliding_window_view(buffer, len(first))[offsets]  # (n, len(first)): row copies
    model = np.frombuffer(first, np.uint8)
    if not all(np.all(rows[:, a:b] == model[a:b]) for a, b in spans):
        return None
    return np.frombuffer(rows, np.dtype({
        "names": ["sec", "nanosec", *(name for name, _, _ in fields)],
        "formats": ["<i4", "<u4", *(("<f8", size) for _, size, _ in fields)],
        "offsets": [4, 8, *(start for _, _, start in fields)], "itemsize": len(first)}))


def _reshaped(values: NDArray[np.float64], count: int) -> NDArray[np.float64]:
    """``count`` rows of 6 (a matched-filtering field of a JointSamples)."""
    if values.size != count * 6:
        raise ValueError(f"{values.size} values for {count} samples of 6")
    return values.reshape(count, 6)


def stamp_parts(seconds: float) -> tuple[int, int]:
    """Seconds to the ``(sec, nanosec)`` of a ``builtin_interfaces/Time``, rounded to 1 ns."""
    sec = int(seconds // 1)
    nanosec = int(round((seconds - sec) * 1e9))
    if nanosec >= 1_000_000_000:
        sec, nanosec = sec + 1, nanosec - 1_000_000_000
    return sec, nanosec


def stamp_array(seconds: ArrayLike) -> NDArray[np.void]:
    """:func:`stamp_parts` of every element, as a :data:`TIME` array."""
    t = np.asarray(seconds, dtype=float).ravel()
    sec = np.floor(t)
    nanosec = np.rint((t - sec) * 1e9)
    carry = nanosec >= 1e9
    out = np.empty(t.size, dtype=TIME)
    out["sec"] = sec + carry
    out["nanosec"] = nanosec - 1e9 * carry
    return out


class CdrEncoder:
    """Little-endian CDR payloads of ``JointState``, ``WrenchStamped``, ``JointSamples`` and
    ``SensorSamples``, byte for byte what rosbags and rclpy serialise (zero padding), built
    with ``struct`` and numpy. rclpy publishes such bytes as they are, which spares a 1 kHz
    publisher the message objects."""

    _HEADER = struct.Struct("<4siII")
    _COUNT = struct.Struct("<I")
    _UINT64 = struct.Struct("<Q")
    _FLOAT64 = struct.Struct("<d")

    def __init__(self) -> None:
        self._names: dict[tuple[str, ...], bytes] = {}

    def _header(self, stamp: float, frame_id: str) -> bytearray:
        frame = frame_id.encode() + b"\x00"
        out = bytearray(self._HEADER.pack(b"\x00\x01\x00\x00", *stamp_parts(stamp), len(frame)))
        out += frame
        return out

    @staticmethod
    def _align(out: bytearray, size: int) -> None:
        out += bytes(-(len(out) - 4) % size)

    def _doubles(self, out: bytearray, values: ArrayLike) -> None:
        data = np.ascontiguousarray(values, dtype="<f8").ravel()
        self._align(out, 4)
        out += self._COUNT.pack(data.size)
        if data.size:
            self._align(out, 8)
            out += data.tobytes()

    def _name_list(self, out: bytearray, names: Sequence[str]) -> None:
        key = tuple(names)
        block = self._names.get(key)
        if block is None:
            encoded = bytearray(self._COUNT.pack(len(key)))
            for name in key:
                encoded += bytes(-len(encoded) % 4)  # the block starts 4-aligned
                text = name.encode() + b"\x00"
                encoded += self._COUNT.pack(len(text)) + text
            if len(self._names) >= CdrDecoder.MAX_CACHED_LISTS:
                self._names.clear()
            block = self._names[key] = bytes(encoded)
        self._align(out, 4)
        out += block

    def joint_state(self, stamp: float, names: Sequence[str], position: ArrayLike,
                    velocity: ArrayLike = (), effort: ArrayLike = ()) -> bytes:
        """A ``sensor_msgs/JointState`` (empty frame id)."""
        out = self._header(stamp, "")
        self._name_list(out, names)
        for values in (position, velocity, effort):
            self._doubles(out, values)
        return bytes(out)

    def wrench(self, stamp: float, frame_id: str, wrench: ArrayLike) -> bytes:
        """A ``geometry_msgs/WrenchStamped``: ``wrench`` = ``[fx, fy, fz, tx, ty, tz]``."""
        out = self._header(stamp, frame_id)
        self._align(out, 8)
        out += np.ascontiguousarray(wrench, dtype="<f8").reshape(6).tobytes()
        return bytes(out)

    def _times(self, out: bytearray, times: ArrayLike) -> None:
        stamps = stamp_array(times)
        self._align(out, 4)
        out += self._COUNT.pack(stamps.size)
        out += stamps.tobytes()

    def joint_samples(self, batch: SyncedSamples, joint_names: Sequence[str],
                      frame_id: str, samples_before: int = 0, filter_span: float = 0.0,
                      provisional: bool = False) -> bytes:
        """An ``inertial_id/JointSamples`` of a non-empty batch (header stamp: its last
        sample's; ``joint_names`` in the batch's column order; ``filter_span`` in s)."""
        out = self._header(float(batch.times[-1]), frame_id)
        self._name_list(out, joint_names)
        self._times(out, batch.times)
        for values in (batch.position, batch.velocity, batch.acceleration, batch.wrench,
                       batch.wrench_raw):
            self._doubles(out, values)
        for values in (batch.twist, batch.proper_acceleration):
            self._doubles(out, () if values is None else values)
        self._doubles(out, pack_noise(batch.acceleration_noise))
        self._doubles(out, () if batch.angular_products is None else batch.angular_products)
        self._float64(out, filter_span)
        self._uint64(out, samples_before)
        out.append(1 if provisional else 0)
        return bytes(out)

    def _uint64(self, out: bytearray, value: int) -> None:
        self._align(out, 8)
        out += self._UINT64.pack(value)

    def _float64(self, out: bytearray, value: float) -> None:
        self._align(out, 8)
        out += self._FLOAT64.pack(value)

    def sensor_samples(self, times: ArrayLike, frame_id: str, samples_before: int = 0,
                       acceleration_noise: NDArray[np.float64] | None = None,
                       filter_span: float = 0.0,
                       angular_products: NDArray[np.float64] | None = None,
                       provisional: bool = False, **fields: NDArray[np.float64]) -> bytes:
        """An ``inertial_id/SensorSamples`` of N > 0 samples: ``times`` (N,) s, the (N, 6)
        arrays named in :data:`SENSOR_FIELDS`, the (N, 6, 6) ``acceleration_noise`` or
        None, ``filter_span`` (s) and the (N, 6) ``angular_products`` or None (header stamp:
        the last sample's)."""
        times = np.asarray(times, dtype=float)
        out = self._header(float(times[-1]), frame_id)
        self._times(out, times)
        for name in SENSOR_FIELDS:
            self._doubles(out, fields[name])
        self._doubles(out, pack_noise(acceleration_noise))
        self._doubles(out, () if angular_products is None else angular_products)
        self._float64(out, filter_span)
        self._uint64(out, samples_before)
        out.append(1 if provisional else 0)
        return bytes(out)
