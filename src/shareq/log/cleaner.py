"""Log compaction (``cleanup.policy=compact``): the latest record per key is kept, offsets never change.

Three steps, as Kafka's cleaner takes them:

1. :func:`plan_cleaning` (pure, on the event loop) picks what to clean from the partition's
   segment list, its *first dirty offset* (where the last cleaning stopped) and the topic's
   configs: nothing unless the dirty share of the closed segments reaches
   ``min.cleanable.dirty.ratio`` (or a dirty record is older than ``max.compaction.lag.ms``);
   segments younger than ``min.compaction.lag.ms`` and the active segment are never cleaned.
2. :func:`clean` (file I/O only, run off the event loop in a worker process) maps each key of the dirty
   range to its latest offset, in a key index of at most ``max_map_entries`` entries (16-byte
   digests, as Kafka's dedupe buffer): when it is full the mapped range ends there and the rest
   stays dirty for the next round. It then rewrites every segment from the log start up to the end
   of the mapped range into ``<base>.cleaned``, fsynced: a batch keeps its base offset and last
   offset delta, loses the records a later one of the same key replaced and the tombstones older
   than the delete horizon, and records without a key (written while the topic was not compacted;
   Kafka's cleaner drops them as invalid); a batch that keeps everything is copied byte for byte, one
   that keeps nothing disappears. Control batches are kept.
3. ``PartitionLog.swap_cleaned`` (on the event loop) replaces each segment by its cleaned file with
   one ``os.replace`` after removing its index files, so a crash leaves every segment either whole
   and old or whole and cleaned; opening a log removes leftover ``.cleaned`` files.
"""

from __future__ import annotations

import hashlib
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from crc32c import crc32c

from .batch import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    CONTROL_MASK,
    CRC_OFFSET,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    TRANSACTIONAL_MASK,
)
from .record_spans import plain_batch, record_spans
from .segment import H_BASE_OFFSET, H_BATCH_LENGTH, H_LAST_OFFSET_DELTA, scan_batches

CLEANED_SUFFIX = ".cleaned"
RECORDS_COUNT_OFFSET = 57
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
FIRST_DIRTY_FILE = "cleaner.checkpoint"
ENTRY_BYTES = 24  # what one key-index entry costs in Kafka's dedupe buffer (16-byte digest + offset)


@dataclass(frozen=True, slots=True)
class SegmentFile:
    base: int
    next_offset: int
    path: Path
    size: int
    largest_timestamp: int


@dataclass(frozen=True, slots=True, kw_only=True)
class CleaningConfig:
    min_cleanable_ratio: float = 0.5
    min_lag_ms: int = 0
    max_lag_ms: int = 2**63 - 1
    delete_retention_ms: int = 86_400_000
    max_map_entries: int = 128 * 1024 * 1024 // ENTRY_BYTES


@dataclass(frozen=True, slots=True)
class AbortedRange:
    """An aborted transaction's data on this partition: ``producer_id``'s batches in
    ``[first_offset, last_offset]``."""

    producer_id: int
    first_offset: int
    last_offset: int


@dataclass(frozen=True, slots=True)
class CleaningPlan:
    """Segments to rewrite (log start up to the last dirty cleanable one), the first dirty offset,
    the time below which a latest tombstone is dropped, and the key-index cap."""

    segments: tuple[SegmentFile, ...]
    first_dirty: int
    delete_horizon_ms: int
    max_map_entries: int
    aborted: tuple[AbortedRange, ...] = ()


@dataclass(frozen=True, slots=True)
class CleanedSegment:
    base: int
    original_size: int
    cleaned_path: Path
    size: int


@dataclass(frozen=True, slots=True)
class CleaningResult:
    cleaned: tuple[CleanedSegment, ...]
    next_first_dirty: int  # where the next cleaning starts mapping
    dirty_bytes: int  # bytes of the dirty range mapped
    records_kept: int
    records_removed: int


def dirty_ratio(segments: tuple[SegmentFile, ...], first_dirty: int) -> float:
    """Dirty bytes over all bytes of the closed segments given."""
    total = sum(s.size for s in segments)
    dirty = sum(s.size for s in segments if s.next_offset > first_dirty)
    return dirty / total if total else 0.0


def plan_cleaning(
    closed: tuple[SegmentFile, ...],
    first_dirty: int,
    config: CleaningConfig,
    now_ms: int,
    *,
    first_unstable: int | None = None,
    aborted: tuple[AbortedRange, ...] = (),
) -> CleaningPlan | None:
    """What to clean now, or ``None``. ``closed`` lists the segments from the log start, the
    active one excluded; ``first_unstable`` is the last stable offset (a transaction still open
    there may yet abort, so nothing from its segment on is cleaned, as in Kafka); ``aborted`` the
    aborted transactions, whose data is neither mapped nor kept."""
    # Only a prefix can be cleaned: a segment too young, or one reaching into an open
    # transaction, stops the range there.
    prefix: list[SegmentFile] = []
    for segment in closed:
        if now_ms - segment.largest_timestamp < config.min_lag_ms:
            break
        if first_unstable is not None and segment.next_offset > first_unstable:
            break
        prefix.append(segment)
    dirty = [s for s in prefix if s.next_offset > first_dirty and s.size > 0]
    if not dirty:
        return None
    overdue = any(now_ms - s.largest_timestamp >= config.max_lag_ms for s in dirty)
    if not overdue and dirty_ratio(tuple(closed), first_dirty) < config.min_cleanable_ratio:
        return None
    return CleaningPlan(
        segments=tuple(prefix),
        first_dirty=first_dirty,
        delete_horizon_ms=now_ms - config.delete_retention_ms,
        max_map_entries=max(1, config.max_map_entries),
        aborted=tuple(
            a for a in aborted if a.last_offset >= prefix[0].base and a.first_offset < prefix[-1].next_offset
        ),
    )


def clean(plan: CleaningPlan) -> CleaningResult:
    """Map the dirty range, then write each segment's cleaned copy next to it (no swap)."""
    aborted = _AbortedIndex(plan.aborted)
    latest, map_end, dirty_bytes = _build_map(plan, aborted)
    token = os.urandom(4).hex()  # a cleaning cut short elsewhere never writes into this one's files
    cleaned: list[CleanedSegment] = []
    kept = removed = 0
    for segment in plan.segments:
        if segment.base >= map_end:
            break
        target = segment.path.with_suffix(f".{token}{CLEANED_SUFFIX}")
        changed, size = False, 0
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            for batch in _batches(segment):  # written as it goes: memory follows one batch
                new, k, r = _filter_batch(batch, latest, map_end, plan.delete_horizon_ms, aborted)
                kept, removed = kept + k, removed + r
                changed |= new is not batch
                _write_all(fd, new)
                size += len(new)
            if changed:
                os.fsync(fd)
        finally:
            os.close(fd)
        if not changed:
            target.unlink()
            continue
        cleaned.append(CleanedSegment(segment.base, segment.size, target, size))
    return CleaningResult(tuple(cleaned), map_end, dirty_bytes, kept, removed)


def _digest(key: bytes) -> bytes:
    return hashlib.blake2b(key, digest_size=16).digest()


class _AbortedIndex:
    """Whether a transactional data batch belongs to an aborted transaction."""

    def __init__(self, aborted: tuple[AbortedRange, ...]) -> None:
        self._by_producer: dict[int, list[AbortedRange]] = {}
        for a in aborted:
            self._by_producer.setdefault(a.producer_id, []).append(a)

    def holds(self, header: tuple[int, ...]) -> bool:
        if not header[5] & TRANSACTIONAL_MASK or header[5] & CONTROL_MASK:
            return False
        ranges = self._by_producer.get(header[9])
        base = header[H_BASE_OFFSET]
        return bool(ranges) and any(a.first_offset <= base <= a.last_offset for a in ranges or ())


def _build_map(plan: CleaningPlan, aborted: _AbortedIndex) -> tuple[dict[bytes, int], int, int]:
    """Key digest -> latest offset over the dirty range, the offset where mapping stopped, and the
    bytes mapped."""
    latest: dict[bytes, int] = {}
    map_end = plan.first_dirty
    mapped = 0
    for segment in plan.segments:
        if segment.next_offset <= plan.first_dirty:
            continue
        for batch in _batches(segment):
            header = HEADER.unpack_from(batch, 0)
            last = header[H_BASE_OFFSET] + header[H_LAST_OFFSET_DELTA]
            if last < plan.first_dirty:
                continue
            if header[5] & CONTROL_MASK or aborted.holds(header):
                map_end = last + 1  # a marker, or data no reader will see: nothing to map
                continue
            keyed = [(_digest(r[3]), r[2]) for r in record_spans(plain_batch(batch)) if r[3] is not None]
            fresh = sum(1 for d, _o in keyed if d not in latest)
            if latest and len(latest) + fresh > plan.max_map_entries:
                return latest, map_end, mapped
            for digest, offset in keyed:
                if offset >= plan.first_dirty:
                    latest[digest] = offset
            map_end = last + 1
            mapped += len(batch)
        map_end = max(map_end, segment.next_offset)
    return latest, map_end, mapped


def _batches(segment: SegmentFile) -> Iterator[bytes]:
    """The segment's whole batches, read one at a time (memory follows one batch)."""
    fd = os.open(segment.path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        for pos, header in scan_batches(fd, 0, segment.size, verify_crc=False):
            yield os.pread(fd, header[H_BATCH_LENGTH] + LOG_OVERHEAD, pos)
    finally:
        os.close(fd)


def _filter_batch(
    batch: bytes, latest: dict[bytes, int], map_end: int, horizon_ms: int, aborted: _AbortedIndex
) -> tuple[bytes, int, int]:
    """The batch without the records compaction removes: ``batch`` itself if none, else a new
    uncompressed batch (same base offset and last offset delta) or ``b""``. An aborted
    transaction's batch goes whole (its marker stays)."""
    header = HEADER.unpack_from(batch, 0)
    attributes = header[5]
    if attributes & CONTROL_MASK or header[H_BASE_OFFSET] >= map_end:
        return batch, header[12], 0
    if aborted.holds(header):
        return b"", 0, header[12]
    plain = plain_batch(batch)
    spans = record_spans(plain)
    keep = [r for r in spans if _retained(r[2], r[3], r[4], r[5], latest, map_end, horizon_ms)]
    if len(keep) == len(spans):
        return batch, len(keep), 0
    removed = len(spans) - len(keep)
    if not keep:
        return b"", 0, removed
    # Kept records are copied as they are: same base offset and base timestamp, so their deltas hold.
    out = bytearray(plain[:HEADER_SIZE])
    for record in keep:
        out += plain[record[0] : record[1]]
    _I32.pack_into(out, 8, len(out) - LOG_OVERHEAD)
    _I16.pack_into(out, ATTRIBUTES_OFFSET, attributes & ~COMPRESSION_MASK)
    _I32.pack_into(out, RECORDS_COUNT_OFFSET, len(keep))
    out[CRC_OFFSET : CRC_OFFSET + 4] = crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]).to_bytes(4, "big")
    return bytes(out), len(keep), removed


def _retained(
    offset: int,
    key: bytes | None,
    timestamp: int,
    tombstone: bool,
    latest: dict[bytes, int],
    map_end: int,
    horizon_ms: int,
) -> bool:
    if offset >= map_end:
        return True
    if key is None:
        return False  # written while the topic was not compacted: Kafka's cleaner drops it as invalid
    newest = latest.get(_digest(key))
    if newest is not None and offset < newest:
        return False  # a later record of the same key replaced it
    if tombstone:  # the key's latest record is a tombstone
        return timestamp >= horizon_ms
    return True


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
