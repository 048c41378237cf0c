"""Reading whole batches out of one segment, and finding a record by timestamp.

A read is one ``os.pread`` from the nearest offset-index entry, a walk over 61-byte headers to the
batch holding the wanted offset, and a cut after the last whole batch that fits. Records are only
decoded by :func:`exact_timestamp`, for the rare ListOffsets-by-time lookup.
"""

from __future__ import annotations

import os
from typing import NamedTuple

from .batch import HEADER, HEADER_SIZE, LOG_OVERHEAD, MAGIC, Compression, TimestampType, read_batch_header
from .errors import CorruptRecordError
from .records import decode_batch
from .segment import H_BASE_OFFSET, H_BATCH_LENGTH, H_LAST_OFFSET_DELTA, H_MAGIC, LogSegment

_MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD


class TimestampOffset(NamedTuple):
    """The first record at or after a searched timestamp."""

    timestamp: int
    offset: int


def read_batches(
    fd: int, seg: LogSegment, offset: int, max_bytes: int, min_one_batch: bool, interval: int
) -> tuple[bytes, tuple[tuple[int, int], ...]] | None:
    """Whole batches of ``seg`` from the one holding ``offset``, at most ``max_bytes`` unless the
    first alone is larger (then it alone, or nothing if not ``min_one_batch``); ``None`` if the
    segment holds no batch at or after ``offset``."""
    end = seg.size
    _, pos = seg.index.lookup(offset - seg.base_offset)
    span = interval + max(max_bytes, HEADER_SIZE)
    chunk = os.pread(fd, min(span, end - pos), pos)
    off = 0
    unpack = HEADER.unpack_from
    while True:  # find the batch holding `offset`
        if off + HEADER_SIZE > len(chunk):
            pos += off
            if pos + HEADER_SIZE > end:
                return None
            chunk, off = os.pread(fd, min(span, end - pos), pos), 0
        h = unpack(chunk, off)
        if h[H_MAGIC] != MAGIC or h[H_BATCH_LENGTH] < _MIN_BATCH_LENGTH:
            raise CorruptRecordError(f"segment {seg.base_offset} is damaged at byte {pos + off}")
        if h[H_BASE_OFFSET] + h[H_LAST_OFFSET_DELTA] >= offset:
            break
        off += h[H_BATCH_LENGTH] + LOG_OVERHEAD
    start = off
    batches: list[tuple[int, int]] = []
    limit = len(chunk)
    while off + HEADER_SIZE <= limit:
        h = unpack(chunk, off)
        size = h[H_BATCH_LENGTH] + LOG_OVERHEAD
        if off + size > limit or off - start + size > max_bytes or h[H_MAGIC] != MAGIC:
            break
        base = h[H_BASE_OFFSET]
        batches.append((base, base + h[H_LAST_OFFSET_DELTA]))
        off += size
    if not batches:
        h = unpack(chunk, start)
        size = h[H_BATCH_LENGTH] + LOG_OVERHEAD
        if not min_one_batch and size > max_bytes:
            return b"", ()
        base = h[H_BASE_OFFSET]
        whole = chunk[start : start + size] if start + size <= limit else os.pread(fd, size, pos + start)
        return whole, ((base, base + h[H_LAST_OFFSET_DELTA]),)
    if start == 0 and off == limit:
        return chunk, tuple(batches)
    return chunk[start:off], tuple(batches)


def exact_timestamp(
    fd: int, pos: int, size: int, timestamp_ms: int, log_start: int
) -> TimestampOffset | None:
    """The first record at or after ``timestamp_ms`` in the batch at ``pos``, not below ``log_start``.

    Compressed and LogAppendTime batches answer with the batch's first offset and max timestamp.
    """
    raw = os.pread(fd, size, pos)
    header = read_batch_header(raw)
    fallback = TimestampOffset(header.max_timestamp, max(header.base_offset, log_start))
    if header.compression is not Compression.NONE:
        return fallback
    if header.timestamp_type is TimestampType.LOG_APPEND_TIME:
        return fallback
    for record in decode_batch(raw, verify_crc=False).records:
        ts = record.timestamp if record.timestamp is not None else -1
        if ts >= timestamp_ms and record.offset >= log_start:
            return TimestampOffset(ts, record.offset)
    return None
