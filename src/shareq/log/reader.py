"""Reading whole batches out of one segment, and finding a record by timestamp.

A read is one ``os.pread`` from the nearest offset-index entry, a walk over 61-byte headers to the
batch holding the wanted offset, and a cut after the last whole batch that fits. Records are only
decoded by :func:`exact_timestamp`, for the rare ListOffsets-by-time lookup.
"""

from __future__ import annotations

import os
from array import array
from bisect import bisect_right
from typing import NamedTuple

from .batch import (
    CONTROL_MASK,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    MIN_BATCH_LENGTH,
    TimestampType,
    read_batch_header,
)
from .errors import CorruptRecordError
from .index import OffsetIndex
from .record_spans import plain_batch, record_spans
from .segment import (
    H_ATTRIBUTES,
    H_BASE_OFFSET,
    H_BATCH_LENGTH,
    H_LAST_OFFSET_DELTA,
    H_MAGIC,
    LogSegment,
)
from .share_control import is_share_control

_CONTROL_KEY_REACH = 32  # bytes past the header that reach a control record's key (is_share_control)


class TimestampOffset(NamedTuple):
    """The first record at or after a searched timestamp."""

    timestamp: int
    offset: int


def read_batches(
    fd: int,
    seg: LogSegment,
    offset: int,
    max_bytes: int,
    min_one_batch: bool,
    interval: int,
    end_offset: int | None = None,
) -> tuple[bytes, tuple[tuple[int, int], ...], tuple[int, ...]] | None:
    """Whole batches of ``seg`` from the one holding ``offset``, at most ``max_bytes`` unless the
    first alone is larger (then it alone, or nothing if not ``min_one_batch``); ``None`` if the
    segment holds no batch at or after ``offset``. With the bytes come each batch's (first, last)
    offsets and the byte positions of the control batches among them (usually none).

    With ``end_offset`` the read also stops at the first indexed batch start beyond it, so it
    covers the batch holding ``end_offset`` and at most one index interval more: a caller that can
    use only so many offsets pays for those, not for ``max_bytes``.

    The returned bytes are exactly what one ``pread`` produced (no second copy) whenever a batch
    boundary known from the index or the segment end lies within ``max_bytes``: the answer may
    then stop up to one index interval short of ``max_bytes``.
    """
    end = seg.size
    index = seg.index
    found = _locate(fd, seg, offset, interval)
    if found is None:
        return None
    start, first_size = found
    if first_size > max_bytes:
        if not min_one_batch:
            return b"", (), ()
        stop = start + first_size
    else:
        limit = start + max_bytes
        stop = end if end <= limit else _boundary_at_or_before(index.positions, limit)
        if stop < start + first_size:
            return _read_trimmed(fd, start, min(limit, end))
    if end_offset is not None and stop > start + first_size:
        after = _boundary_after(index, end_offset - seg.base_offset)
        if after is not None and after < stop:
            stop = max(after, start + first_size)
    chunk = os.pread(fd, stop - start, start)
    return (chunk, *_batch_ranges(chunk, seg.base_offset))


def _locate(fd: int, seg: LogSegment, offset: int, interval: int) -> tuple[int, int] | None:
    """The position and size of the batch of ``seg`` holding ``offset`` (or the first one after
    it), reading headers from the nearest index entry on; ``None`` if there is none."""
    end = seg.size
    _, pos = seg.index.lookup(offset - seg.base_offset)
    unpack = HEADER.unpack_from
    head = b""
    head_pos = pos
    while True:
        if pos + HEADER_SIZE > end:
            return None
        rel = pos - head_pos
        if rel + HEADER_SIZE > len(head):
            head, head_pos, rel = os.pread(fd, min(interval + HEADER_SIZE, end - pos), pos), pos, 0
        h = unpack(head, rel)
        if h[H_MAGIC] != MAGIC or h[H_BATCH_LENGTH] < MIN_BATCH_LENGTH:
            raise CorruptRecordError(f"segment {seg.base_offset} is damaged at byte {pos}")
        if h[H_BASE_OFFSET] + h[H_LAST_OFFSET_DELTA] >= offset:
            return pos, h[H_BATCH_LENGTH] + LOG_OVERHEAD
        pos += h[H_BATCH_LENGTH] + LOG_OVERHEAD


def read_slice(
    fd: int,
    seg: LogSegment,
    offset: int,
    max_bytes: int,
    min_one_batch: bool,
    interval: int,
    end_offset: int,
) -> tuple[bytes, tuple[tuple[int, int], ...], tuple[int, ...], int] | None:
    """The bytes of ``seg`` from the start of the batch holding ``offset``, ``max_bytes`` of them
    (Kafka's ``LogSegment.read``): the last batch may be cut, and a client drops it and fetches
    it again. The first batch comes whole even if larger than ``max_bytes`` (then it alone), or
    nothing if not ``min_one_batch``; ``None`` if the segment holds no batch at or after ``offset``.

    No byte at or beyond ``end_offset`` (the high watermark, or the last stable offset) is
    returned: the slice ends before the first batch whose last offset reaches it, and a cut
    batch reaching it is left out. So is a cut share-state control batch (share_control.py).

    With the bytes come each whole batch's (first, last) offsets, the byte positions of the
    control batches among them, and how many bytes of a cut batch end the slice (0 if none).
    """
    found = _locate(fd, seg, offset, interval)
    if found is None:
        return None
    start, first_size = found
    if first_size > max_bytes:
        if not min_one_batch:
            return b"", (), (), 0
        size = first_size
    else:
        size = min(max_bytes, seg.size - start)
    chunk = os.pread(fd, size, start)
    unpack = HEADER.unpack_from
    ranges: list[tuple[int, int]] = []
    controls: list[int] = []
    off = 0
    limit = len(chunk)
    while off + HEADER_SIZE <= limit:
        h = unpack(chunk, off)
        if h[H_MAGIC] != MAGIC or h[H_BATCH_LENGTH] < MIN_BATCH_LENGTH:
            raise CorruptRecordError(f"segment {seg.base_offset} is damaged at byte {start + off}")
        base = h[H_BASE_OFFSET]
        last = base + h[H_LAST_OFFSET_DELTA]
        if last >= end_offset:
            return chunk[:off], tuple(ranges), tuple(controls), 0
        size = h[H_BATCH_LENGTH] + LOG_OVERHEAD
        if off + size > limit:
            break
        ranges.append((base, last))
        if h[H_ATTRIBUTES] & CONTROL_MASK:
            controls.append(off)
        off += size
    if off < limit and not _tail_visible(fd, start + off, chunk, off, end_offset):
        return chunk[:off], tuple(ranges), tuple(controls), 0
    return chunk, tuple(ranges), tuple(controls), limit - off


def _tail_visible(fd: int, pos: int, chunk: bytes, off: int, end_offset: int) -> bool:
    """Whether the cut batch at ``chunk[off:]`` (at ``pos`` in the file) may go to a client: below
    ``end_offset`` and not share state. Its header is read again from the file when the cut
    leaves less of it than these checks need (rare: a few bytes past a whole batch)."""
    head: bytes = chunk
    if len(chunk) - off < HEADER_SIZE + _CONTROL_KEY_REACH:
        head, off = os.pread(fd, HEADER_SIZE + _CONTROL_KEY_REACH, pos), 0
        if len(head) < HEADER_SIZE:
            return False
    h = HEADER.unpack_from(head, off)
    if h[H_BASE_OFFSET] + h[H_LAST_OFFSET_DELTA] >= end_offset:
        return False
    return not (h[H_ATTRIBUTES] & CONTROL_MASK and is_share_control(head, off))


def _boundary_at_or_before(positions: array[int], limit: int) -> int:
    """The last indexed batch start at or before ``limit`` (0 if none)."""
    i = bisect_right(positions, limit)
    return positions[i - 1] if i else 0


def _boundary_after(index: OffsetIndex, relative_offset: int) -> int | None:
    """The position of the first indexed batch that starts beyond ``relative_offset``, if any."""
    i = bisect_right(index.offsets, relative_offset)
    return index.positions[i] if i < len(index.offsets) else None


def _batch_ranges(chunk: bytes, segment_base: int) -> tuple[tuple[tuple[int, int], ...], tuple[int, ...]]:
    """(first, last) offsets of the whole batches filling ``chunk``, and where the control
    batches among them start (transaction markers, share state: see share_control.py)."""
    unpack = HEADER.unpack_from
    ranges = []
    controls = []
    off = 0
    limit = len(chunk)
    while off < limit:
        h = unpack(chunk, off)
        if h[H_MAGIC] != MAGIC or h[H_BATCH_LENGTH] < MIN_BATCH_LENGTH:
            raise CorruptRecordError(f"segment {segment_base} is damaged in a batch at offset {h[0]}")
        base = h[H_BASE_OFFSET]
        ranges.append((base, base + h[H_LAST_OFFSET_DELTA]))
        if h[H_ATTRIBUTES] & CONTROL_MASK:
            controls.append(off)
        off += h[H_BATCH_LENGTH] + LOG_OVERHEAD
    if off != limit:
        raise CorruptRecordError(f"segment {segment_base}: batch lengths disagree with the index")
    return tuple(ranges), tuple(controls)


def _read_trimmed(
    fd: int, start: int, limit: int
) -> tuple[bytes, tuple[tuple[int, int], ...], tuple[int, ...]]:
    """Read ``[start, limit)`` and keep the whole batches at its front (one extra copy)."""
    chunk = os.pread(fd, limit - start, start)
    unpack = HEADER.unpack_from
    ranges = []
    controls = []
    off = 0
    while off + HEADER_SIZE <= len(chunk):
        h = unpack(chunk, off)
        size = h[H_BATCH_LENGTH] + LOG_OVERHEAD
        if off + size > len(chunk) or h[H_MAGIC] != MAGIC or size < HEADER_SIZE:
            break
        base = h[H_BASE_OFFSET]
        ranges.append((base, base + h[H_LAST_OFFSET_DELTA]))
        if h[H_ATTRIBUTES] & CONTROL_MASK:
            controls.append(off)
        off += size
    return (chunk if off == len(chunk) else chunk[:off]), tuple(ranges), tuple(controls)


def exact_timestamp(
    fd: int, pos: int, size: int, timestamp_ms: int, log_start: int
) -> TimestampOffset | None:
    """The first record at or after ``timestamp_ms`` in the batch at ``pos``, not below ``log_start``.

    A LogAppendTime batch answers with its first offset and max timestamp (every record has it);
    a compressed batch is decompressed to find the record, as Kafka does.
    """
    raw = os.pread(fd, size, pos)
    header = read_batch_header(raw)
    if header.timestamp_type is TimestampType.LOG_APPEND_TIME:
        return TimestampOffset(header.max_timestamp, max(header.base_offset, log_start))
    for record in record_spans(plain_batch(raw)):
        if record.timestamp >= timestamp_ms and record.offset >= log_start:
            return TimestampOffset(record.timestamp, record.offset)
    return None
