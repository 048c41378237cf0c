"""Columnar decoding of fetched v2 record batches, straight into Arrow arrays.

A task wants a few runs of offsets out of whatever batches a Fetch returns, and reads millions of
records. A Python loop over records (what a general consumer does) costs more than the rest of the
read path together, so Python here works per batch and numpy per record:

1. Record starts are chained by their length varints. One vectorised guess (every record the size
   of the first, what a producer of fixed-size records writes) is checked exactly against the
   bytes; otherwise a short Python loop walks the lengths.
2. Every field is then decoded for all records of a buffer at once (zigzag varints read at an array
   of positions), headers one header index at a time.
3. Keys, values and header fields become Arrow arrays by slicing the fetched bytes: a zero-copy
   binary array over alternating field and gap spans, then one ``take`` of the wanted fields.

Compressed batches are inflated with the client's codecs (each its own buffer); control batches are
skipped; CRCs are checked; a record whose fields do not add up to its length is corrupt.
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from shareq.log.batch import HEADER_SIZE, LOG_OVERHEAD, Compression, crc_ok, read_batch_header
from shareq.log.errors import CorruptRecordError
from shareq.log.records import read_varint

from .offsets import Run
from .schema import ArrowBuilder, Columns

_LENGTH = struct.Struct(">qi")
_CONTROL = 0x20
_LOG_APPEND_TIME = 0x08
_MAX_VARINT_BYTES = 10


def _inflate(buf: bytes, pos: int, size: int, codec: int) -> bytes:
    from shareq.client.records import decompress

    return decompress(Compression(codec), bytes(buf[pos + HEADER_SIZE : pos + size]))


class RunCursor:
    """The task's runs as arrays: which offsets are wanted, with which delivery count."""

    __slots__ = ("_counts", "_firsts", "_lasts", "done", "first_list", "last_list")

    def __init__(self, runs: Sequence[Run]) -> None:
        self.first_list = [r[0] for r in runs]
        self.last_list = [r[1] for r in runs]
        self._firsts = np.array(self.first_list, dtype=np.int64)
        self._lasts = np.array(self.last_list, dtype=np.int64)
        self._counts = np.array([r[2] for r in runs], dtype=np.int32)
        self.done = not runs

    def wants_any(self, first: int, last: int) -> bool:
        """Whether a run holds an offset of ``first..last``."""
        i = bisect.bisect_left(self.last_list, first)
        return i < len(self.first_list) and self.first_list[i] <= last

    def select(self, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(indices of the wanted ``offsets``, their delivery counts); marks the cursor done once
        an offset reaches the last run's end."""
        if not len(self._lasts) or not len(offsets):
            return np.empty(0, np.int64), np.empty(0, np.int32)
        run = np.searchsorted(self._lasts, offsets, side="left")
        inside = run < len(self._lasts)
        run_in = np.minimum(run, len(self._lasts) - 1)
        wanted = np.flatnonzero(inside & (self._firsts[run_in] <= offsets))
        if offsets.max() >= self._lasts[-1]:
            self.done = True
        return wanted, self._counts[run_in[wanted]]


@dataclass(slots=True)
class _Segment:
    """Uncompressed record bytes and where each record's body (after its length varint) lies,
    with the fields of its batch header repeated per record."""

    buf: bytes
    bodies: list[np.ndarray] = field(default_factory=list)
    lengths: list[np.ndarray] = field(default_factory=list)
    batch_fields: list[tuple[int, int, int, bool, int]] = field(default_factory=list)


def decode_into(
    blob: bytes, cursor: RunCursor, builder: ArrowBuilder, *, share: bool, position: int
) -> tuple[int, int, int]:
    """Append the wanted records of ``blob`` (those in the cursor's runs at or after ``position``)
    to ``builder``.

    Returns ``(next fetch offset, records appended, bytes of the batches up to that offset)``; the
    next offset stays at ``position`` when the blob holds no whole batch.
    """
    pos = 0
    end = len(blob)
    next_offset = position
    used = 0
    # Segments in log order: consecutive plain batches share the fetched bytes, each compressed
    # batch has its inflated bytes.
    segments: list[_Segment] = []
    plain: _Segment | None = None
    while pos + LOG_OVERHEAD <= end:
        _base, length = _LENGTH.unpack_from(blob, pos)
        size = length + LOG_OVERHEAD
        if pos + size > end or size < HEADER_SIZE:
            break  # a truncated trailing batch: fetch it again from its start
        header = read_batch_header(blob, pos)
        if cursor.last_list and header.base_offset > cursor.last_list[-1]:
            break  # past the task's last offset: neither checked nor decoded
        last_offset = header.base_offset + header.last_offset_delta
        next_offset = max(next_offset, last_offset + 1)
        used = pos + size
        if (
            header.attributes & _CONTROL
            or last_offset < position
            or header.records_count <= 0
            or not cursor.wants_any(header.base_offset, last_offset)
        ):
            pos += size
            continue
        if not crc_ok(blob, pos, header):
            raise CorruptRecordError(f"batch at offset {header.base_offset} fails its CRC32C check")
        codec = header.attributes & 0x07
        if codec:
            segment = _Segment(_inflate(blob, pos, size, codec))
            segments.append(segment)
            plain = None
            first, limit = 0, len(segment.buf)
        else:
            if plain is None:
                plain = _Segment(blob)
                segments.append(plain)
            segment, first, limit = plain, pos + HEADER_SIZE, pos + size
        bodies, lengths = _record_bodies(segment.buf, first, limit, header.records_count)
        segment.bodies.append(bodies)
        segment.lengths.append(lengths)
        segment.batch_fields.append(
            (
                len(bodies),
                header.base_offset,
                header.base_timestamp,
                bool(header.attributes & _LOG_APPEND_TIME),
                header.max_timestamp,
            )
        )
        pos += size
    added = 0
    for segment in segments:
        added += _decode_segment(segment, cursor, builder, share=share, position=position)
    return next_offset, added, used


def _record_bodies(buf: bytes, p: int, end: int, count: int) -> tuple[np.ndarray, np.ndarray]:
    """(start of each record's body, its length) for the ``count`` records from ``p``.

    Records of one size come in runs (a producer's fixed-size records, timestamp deltas that grow
    a byte now and then), so from each record a run of that size is guessed and checked exactly
    with numpy: a record there has the same length varint bytes. Where sizes change from record to
    record, a plain loop walks a stretch before guessing again."""
    u8 = np.frombuffer(buf, dtype=np.uint8)
    bodies = np.empty(count, dtype=np.int64)
    lengths = np.empty(count, dtype=np.int64)
    i = 0
    window = 64
    while i < count:
        if p >= end:
            raise CorruptRecordError("a batch holds fewer records than its header says")
        length, body = read_varint(buf, p)
        if length < 0 or body + length > end:
            raise CorruptRecordError("record length runs past the end of its batch")
        prefix = body - p
        stride = prefix + length
        k = min(window, count - i, (end - p) // stride)
        run = 1
        if k > 1:
            starts = p + stride * np.arange(k, dtype=np.int64)
            same = u8[starts] == u8[p]
            for j in range(1, prefix):
                same &= u8[starts + j] == u8[p + j]
            run = k if same.all() else int(np.argmin(same))
        bodies[i : i + run] = p + prefix + stride * np.arange(run, dtype=np.int64)
        lengths[i : i + run] = length
        i += run
        p += stride * run
        if run == k:
            window *= 2
        elif run < 8:
            window = 64
            i, p = _walk(buf, p, end, i, min(count, i + 32), bodies, lengths)
    return bodies, lengths


def _walk(
    buf: bytes, p: int, end: int, i: int, stop: int, bodies: np.ndarray, lengths: np.ndarray
) -> tuple[int, int]:
    """Records ``i`` up to ``stop`` one by one; returns the next index and position."""
    for i in range(i, stop):  # noqa: B020 - the loop continues the caller's index
        b = buf[p] if p < end else 0
        if b < 0x80:
            length, body = (b >> 1) ^ -(b & 1), p + 1
        elif p + 1 < end and buf[p + 1] < 0x80:
            v = (b & 0x7F) | (buf[p + 1] << 7)
            length, body = (v >> 1) ^ -(v & 1), p + 2
        else:
            length, body = read_varint(buf, p)
        if length < 0 or body + length > end:
            raise CorruptRecordError("record length runs past the end of its batch")
        bodies[i], lengths[i] = body, length
        p = body + length
    return stop, p


def _varints(u8: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray | int]:
    """(zigzag varint values, their sizes in bytes) at each of ``pos``; reads past the buffer see
    its last byte (the caller checks each record's fields end at its length). The common case, a
    field whose varints are all one byte, costs two passes over the records."""
    b = u8.take(pos, mode="clip")
    if not len(b) or b.max() < 0x80:
        small = b.astype(np.int64)
        return (small >> 1) ^ -(small & 1), 1
    value = (b & 0x7F).astype(np.uint64)
    size = np.ones(len(pos), dtype=np.int64)
    more = np.flatnonzero(b & 0x80)
    shift = 7
    while len(more):
        if shift >= 7 * _MAX_VARINT_BYTES:
            raise CorruptRecordError("a varint runs over ten bytes")
        b = u8.take(pos[more] + size[more], mode="clip")
        value[more] |= (b & 0x7F).astype(np.uint64) << np.uint64(shift)
        size[more] += 1
        more = more[(b & 0x80) != 0]
        shift += 7
    signed = (value >> np.uint64(1)).view(np.int64) ^ -(value & np.uint64(1)).view(np.int64)
    return signed, size


def _spans(buf: Any, starts: np.ndarray, lengths: np.ndarray, take: np.ndarray, arrow_type: Any) -> Any:
    """The spans ``buf[start:start+length]`` at indices ``take`` as one Arrow binary/string array
    (length -1 is null). Spans are in buffer order and do not overlap, so one zero-copy array holds
    them alternating with the gaps between them, and ``take`` copies out the wanted ones."""
    import pyarrow as pa

    n = len(take)
    wanted = lengths[take]
    if n == 0 or wanted.max() < 0:  # nothing to copy (keys are often all null)
        return pa.nulls(n, arrow_type)
    stops = starts + np.maximum(lengths, 0)
    bounds = np.empty(2 * len(starts), dtype=np.int32 if len(buf) < 2**31 else np.int64)
    bounds[0::2] = starts
    bounds[1::2] = stops
    big = pa.large_binary() if bounds.dtype == np.int64 else pa.binary()
    every = pa.Array.from_buffers(big, len(bounds) - 1, [None, pa.py_buffer(bounds), buf])
    out = every.take(pa.array(2 * take))
    valid = wanted >= 0
    if not valid.all():
        bitmap = pa.py_buffer(np.packbits(valid, bitorder="little"))
        out = pa.Array.from_buffers(out.type, n, [bitmap, *out.buffers()[1:]], offset=out.offset)
    if out.type != arrow_type:
        try:
            out = out.cast(arrow_type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise CorruptRecordError(f"record field is not valid {arrow_type}: {exc}") from exc
    return out


def _decode_segment(
    segment: _Segment, cursor: RunCursor, builder: ArrowBuilder, *, share: bool, position: int
) -> int:
    import pyarrow as pa

    buf = segment.buf
    u8 = np.frombuffer(buf, dtype=np.uint8)
    bodies = np.concatenate(segment.bodies)
    limits = bodies + np.concatenate(segment.lengths)
    fields = np.array(segment.batch_fields, dtype=np.int64).reshape(-1, 5)
    per_batch = fields[:, 0]

    p = bodies + 1  # record attributes
    ts_delta, size = _varints(u8, p)
    p += size
    offset_delta, size = _varints(u8, p)
    p += size
    key_len, size = _varints(u8, p)
    key_start = p + size
    value_len, size = _varints(u8, key_start + np.maximum(key_len, 0))
    value_start = key_start + np.maximum(key_len, 0) + size
    header_count, size = _varints(u8, value_start + np.maximum(value_len, 0))
    p = value_start + np.maximum(value_len, 0) + size
    if (key_len < -1).any() or (value_len < -1).any() or (header_count < 0).any():
        raise CorruptRecordError("negative field length in a record")

    # Headers, one header index at a time over the records that have that many.
    n_headers = int(header_count.sum())
    header_spans = np.empty((4, n_headers), dtype=np.int64)  # name start/len, value start/len
    header_first = np.zeros(len(bodies) + 1, dtype=np.int64)
    np.cumsum(header_count, out=header_first[1:])
    h = 0
    while n_headers and (having := np.flatnonzero(header_count > h)).size:
        at = p[having]
        name_len, size = _varints(u8, at)
        name_start = at + size
        hv_len, size = _varints(u8, name_start + np.maximum(name_len, 0))
        hv_start = name_start + np.maximum(name_len, 0) + size
        if (name_len < 0).any() or (hv_len < -1).any():
            raise CorruptRecordError("negative header length in a record")
        slot = header_first[having] + h
        header_spans[:, slot] = (name_start, name_len, hv_start, hv_len)
        p[having] = hv_start + np.maximum(hv_len, 0)
        h += 1
    if not np.array_equal(p, limits):
        raise CorruptRecordError("record length does not match its fields")

    offsets = np.repeat(fields[:, 1], per_batch) + offset_delta
    wanted, counts = cursor.select(offsets)
    if position > 0 and len(wanted):
        keep = offsets[wanted] >= position
        if not keep.all():
            wanted, counts = wanted[keep], counts[keep]
    if not len(wanted):
        return 0
    log_append = np.repeat(fields[:, 3].astype(bool), per_batch)[wanted]
    timestamps = np.where(
        log_append,
        np.repeat(fields[:, 4], per_batch)[wanted],
        np.repeat(fields[:, 2], per_batch)[wanted] + ts_delta[wanted],
    )
    sch = builder.arrow_schema
    arrow_buf = pa.py_buffer(buf)
    headers = None
    if builder.has_headers:
        per_record = header_count[wanted]
        list_offsets = np.zeros(len(wanted) + 1, dtype=np.int32)
        np.cumsum(per_record, out=list_offsets[1:])
        flat = np.repeat(header_first[wanted] - list_offsets[:-1], per_record) + np.arange(
            list_offsets[-1], dtype=np.int64
        )
        element = sch.field("headers").type.value_type
        names = _spans(arrow_buf, header_spans[0], header_spans[1], flat, element.field("key").type)
        values = _spans(arrow_buf, header_spans[2], header_spans[3], flat, element.field("value").type)
        structs = pa.StructArray.from_arrays([names, values], fields=list(element))
        headers = pa.ListArray.from_arrays(pa.array(list_offsets), structs, type=sch.field("headers").type)
    builder.add(
        Columns(
            keys=_spans(arrow_buf, key_start, key_len, wanted, sch.field("key").type),
            values=_spans(arrow_buf, value_start, value_len, wanted, sch.field("value").type),
            offsets=offsets[wanted],
            timestamps_ms=timestamps,
            timestamp_types=log_append.astype(np.int32),
            delivery_counts=counts if share else None,
            headers=headers,
        )
    )
    return len(wanted)
