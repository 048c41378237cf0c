"""The durable log of one partition: append whole batches, read whole batches, recover, retain.

Bytes pass through: an append copies the request's batches into one ``bytearray``, checks each
61-byte header and CRC32C, patches ``baseOffset`` and ``partitionLeaderEpoch`` in place (neither is
covered by the CRC) and hands the buffer to one unbuffered ``os.write``, so an acknowledged append
survives the process being killed. A read is one ``os.pread`` from the nearest sparse-index entry
and a walk over headers. Records are never decoded.

Files in the partition directory (see docs/ARCHITECTURE.md, "Partition logs")::

    00000000000000000000.log         batches, as received with offsets assigned
    00000000000000000000.index       sparse offset index (cache; rebuilt if missing or bad)
    00000000000000000000.timeindex   sparse time index (cache; rebuilt if missing or bad)
    log.checkpoint                   log start offset and recovery point (JSON)
    producer.snapshot                idempotent-producer state at an offset (JSON)
"""

from __future__ import annotations

import os
import shutil
import struct
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from .appender import prepare_append
from .batch import (
    ATTRIBUTES_OFFSET,
    CONTROL_MASK,
    HEADER_SIZE,
    LOG_OVERHEAD,
)
from .checkpoint import CHECKPOINT_FILE, PRODUCER_SNAPSHOT_FILE, Checkpoint, write_checkpoint
from .cleaner import (
    FIRST_DIRTY_FILE,
    AbortedRange,
    CleaningConfig,
    CleaningPlan,
    CleaningResult,
    SegmentFile,
    plan_cleaning,
)
from .config import LogConfig
from .conversion import apply_policy
from .errors import (
    CorruptRecordError,
    LogIOError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
)
from .producer_state import BatchMetadata, ProducerStateManager
from .reader import TimestampOffset, exact_timestamp, read_batches, read_slice
from .records import encode_control_batch
from .recovery import recover
from .segment import (
    H_ATTRIBUTES,
    H_BASE_OFFSET,
    H_BATCH_LENGTH,
    H_LAST_OFFSET_DELTA,
    H_MAX_TIMESTAMP,
    MAX_RELATIVE_OFFSET,
    LogSegment,
    scan_batches,
    scan_headers,
    write_file_atomically,
)
from .share_control import is_share_control
from .transactions import AbortedTxn

__all__ = [
    "CHECKPOINT_FILE",
    "PRODUCER_SNAPSHOT_FILE",
    "AppendInfo",
    "FetchData",
    "PartitionLog",
    "TimestampOffset",
]

LOADED_INDEXES = 2  # older segments per partition whose indexes stay in memory
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")


class AppendInfo(NamedTuple):
    """Where an append landed. ``duplicate`` means an idempotent retry: nothing was written and the
    offsets are those of the original batch. ``log_append_time_ms`` is -1 (CreateTime topics).

    A NamedTuple rather than a frozen dataclass: it is built once per produced batch, and a frozen
    dataclass costs several times more to construct.
    """

    first_offset: int
    last_offset: int
    log_append_time_ms: int
    record_count: int
    duplicate: bool
    log_start_offset: int


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchData:
    """Batches read from the log, with each whole batch's (first, last) offset and the byte
    positions of the control batches among them (for :func:`share_control.visible_batches`).

    ``tail`` is how many bytes at the end of ``records`` are a cut batch (only
    :meth:`PartitionLog.read_slice` cuts one; ``batches`` does not list it)."""

    records: bytes
    batches: tuple[tuple[int, int], ...]
    log_start_offset: int
    log_end_offset: int
    controls: tuple[int, ...] = ()
    tail: int = 0


_SegmentRead = tuple[bytes, tuple[tuple[int, int], ...], tuple[int, ...], int]
"""One segment's read: bytes, whole batches' (first, last), control batch positions, cut tail."""


class PartitionLog:
    """Segments of one partition; only the last (active) one is written and kept open."""

    __slots__ = (
        "_bases",
        "_closed",
        "_data_end",
        "_holds",
        "_loaded",
        "_log_start",
        "_producers",
        "_reader",
        "_recovery",
        "_segments",
        "_unflushed_messages",
        "config",
        "directory",
    )

    def __init__(self, directory: Path, config: LogConfig) -> None:
        self.directory = directory
        self.config = config
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._log_start = 0
        self._producers = ProducerStateManager()
        self._reader: LogSegment | None = None
        self._loaded: list[LogSegment] = []  # older segments whose indexes are in memory, oldest first
        self._recovery = (0, 0, 0)
        self._unflushed_messages = 0
        self._closed = False
        self._holds: dict[str, int] = {}
        self._data_end: int | None = None  # after the last batch that is not share state; lazy

    # -- opening and recovery ---------------------------------------------------------------------

    @classmethod
    def open(cls, directory: Path, config: LogConfig, *, now_ms: int) -> PartitionLog:
        """Create the log in ``directory`` or recover the one there.

        A torn or CRC-failing tail is cut back to the last whole valid batch; missing or implausible
        indexes are rebuilt; producer state comes from the snapshot plus the batch headers after it.
        """
        directory.mkdir(parents=True, exist_ok=True)
        log = cls(directory, config)
        try:
            recover(log, now_ms)
        except OSError as exc:
            log._close_fds()
            raise LogIOError(f"cannot open log in {directory.name}: {exc}") from exc
        return log

    def _rebuild_indexes(self, seg: LogSegment) -> None:
        """Rebuild a segment's indexes from its batch headers (data below the recovery point)."""
        file_size = seg.size
        seg.reset_indexes()
        seg.size = 0
        seg.next_offset = seg.base_offset
        fd = seg.fd if seg.fd >= 0 else seg.open(writable=False)
        try:
            for pos, header in scan_headers(fd, 0, file_size):
                seg.track_header(pos, header, self.config.index_interval_bytes)
        finally:
            if seg is not self._segments[-1]:
                seg.close()
                if self._reader is seg:
                    self._reader = None
        seg.size = file_size
        if seg is not self._segments[-1]:
            seg.seal_time_index()
            seg.write_indexes()

    def _write_checkpoint(self) -> None:
        base, size, offset = self._recovery
        write_checkpoint(
            self.directory,
            Checkpoint(
                log_start_offset=self._log_start,
                recovery_base=base,
                recovery_size=size,
                recovery_offset=offset,
            ),
        )

    def _ensure_indexes(self, seg: LogSegment) -> None:
        """Load (or rebuild) a segment's indexes; keep at most a few older segments' in memory."""
        if seg.indexes_loaded:
            if seg in self._loaded and self._loaded[-1] is not seg:
                self._loaded.remove(seg)
                self._loaded.append(seg)
            return
        if not seg.load_indexes():
            self._rebuild_indexes(seg)
        self._loaded.append(seg)
        self._unload_surplus_indexes()

    def _unload_surplus_indexes(self) -> None:
        while len(self._loaded) > LOADED_INDEXES:
            self._loaded.pop(0).unload_indexes()

    # -- properties ---------------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start

    @property
    def log_end_offset(self) -> int:
        """The offset the next appended record gets (the high watermark on a single node)."""
        return self._segments[-1].next_offset

    @property
    def visible_end_offset(self) -> int:
        """The log end without the share-state control batches at its tail (SHARE_CHECKPOINT,
        SHARE_DELTA): where a reader that has seen every record it can see stands, so lag is
        measured to here. Found once after opening (a walk back over the tail's headers) and kept
        up to date by appends."""
        self._check_open()
        if self._data_end is None:
            self._data_end = self._find_data_end()
        return max(self._data_end, self._log_start)

    @property
    def visible_stable_offset(self) -> int:
        """:attr:`last_stable_offset` without the share-state control batches at the tail (an open
        transaction's first batch holds data, so the LSO is below them or at the log end)."""
        return min(self.last_stable_offset, self.visible_end_offset)

    def _find_data_end(self) -> int:
        """Walk back from the log end, one offset-index interval at a time, to the last batch that
        is not share state; the cost follows the length of the share-state tail."""
        for seg in reversed(self._segments):
            if seg.size == 0:
                continue
            self._ensure_indexes(seg)
            fd = self._read_fd(seg)
            stop = seg.size
            starts = [p for p in seg.index.positions if p < stop]
            if not starts or starts[0] != 0:
                starts.insert(0, 0)
            for start in reversed(starts):
                found = -1
                for pos, h in scan_headers(fd, start, stop):
                    if not h[H_ATTRIBUTES] & CONTROL_MASK or not is_share_control(
                        os.pread(fd, HEADER_SIZE + 32, pos)
                    ):
                        found = h[H_BASE_OFFSET] + h[H_LAST_OFFSET_DELTA] + 1
                if found >= 0:
                    return found
                stop = start
        return self._log_start

    def _note_data(self, buf: bytearray, placed: tuple[tuple[int, int, int, int, int], ...]) -> None:
        """An append landed: move the visible end past its last batch that is not share state."""
        for pos, _, nxt, _, _ in reversed(placed):
            if not buf[pos + ATTRIBUTES_OFFSET + 1] & CONTROL_MASK or not is_share_control(buf, pos):
                self._data_end = nxt
                return

    def segment_extents(self) -> tuple[tuple[int, int, int, Path], ...]:
        """``(base offset, next offset, size in bytes, log file)`` of every segment, oldest first
        (for caches kept beside the segments, such as the key-hash sidecars)."""
        return tuple((seg.base_offset, seg.next_offset, seg.size, seg.log_path) for seg in self._segments)

    def segment_extents_over(self, first: int, last: int) -> tuple[tuple[int, int, int, Path], ...]:
        """``segment_extents`` of the segments holding offsets ``first..last`` only (one search:
        the cost follows the segments asked for, not the segments the log holds)."""
        segments = self._segments
        i = max(bisect_right(self._bases, first) - 1, 0)
        out: list[tuple[int, int, int, Path]] = []
        while i < len(segments) and segments[i].base_offset <= last:
            seg = segments[i]
            out.append((seg.base_offset, seg.next_offset, seg.size, seg.log_path))
            i += 1
        return tuple(out)

    @property
    def size_bytes(self) -> int:
        return sum(seg.size for seg in self._segments)

    @property
    def segment_count(self) -> int:
        return len(self._segments)

    @property
    def producer_state(self) -> ProducerStateManager:
        return self._producers

    @property
    def last_stable_offset(self) -> int:
        """The first offset a read_committed reader may not see yet (the log end if no
        transaction is open)."""
        return self._producers.txns.last_stable_offset(self.log_end_offset)

    def aborted_transactions(self, start: int, end: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping ``[start, end]`` (for read_committed fetches)."""
        txns = self._producers.txns
        txns.prune(self._log_start)
        return txns.aborted_between(start, end)

    def transaction_open(self, producer_id: int) -> bool:
        return self._producers.txns.is_open(producer_id)

    def append_marker(
        self, *, producer_id: int, producer_epoch: int, commit: bool, now_ms: int
    ) -> AppendInfo:
        """Write a COMMIT or ABORT marker (a control batch) ending ``producer_id``'s transaction."""
        return self.append(
            encode_control_batch(
                commit=commit, producer_id=producer_id, producer_epoch=producer_epoch, timestamp=now_ms
            ),
            now_ms=now_ms,
        )

    # -- append -------------------------------------------------------------------------------------

    def append(
        self,
        records: bytes | bytearray | memoryview,
        *,
        now_ms: int,
        leader_epoch: int = 0,
        allow_control: bool = True,
    ) -> AppendInfo:
        """Validate, assign offsets to and durably write one or more whole v2 batches.

        Raises :class:`RecordTooLargeError`, :class:`CorruptRecordError`,
        :class:`OutOfOrderSequenceError`, :class:`InvalidProducerEpochError` or :class:`LogIOError`;
        on any error nothing is written.
        """
        self._check_open()
        total = len(records)
        if total > self.config.max_message_bytes:
            raise RecordTooLargeError(
                f"{total} bytes of records exceed max.message.bytes {self.config.max_message_bytes}"
            )
        if total > self.config.segment_bytes:
            raise RecordTooLargeError(
                f"{total} bytes of records exceed segment.bytes {self.config.segment_bytes}"
            )
        if total < HEADER_SIZE:
            raise CorruptRecordError(f"{total} bytes cannot hold a record batch")
        active = self._segments[-1]
        policy = self.config.policy
        buf = apply_policy(bytearray(records), policy, now_ms, self.directory.name)
        total = len(buf)
        append_time = now_ms if policy.log_append_time else -1
        hw = active.next_offset
        prepared = prepare_append(buf, hw, leader_epoch, self._producers, allow_control=allow_control)
        if isinstance(prepared, BatchMetadata):
            return AppendInfo(
                first_offset=prepared.first_offset,
                last_offset=prepared.last_offset,
                log_append_time_ms=-1,
                record_count=prepared.last_offset - prepared.first_offset + 1,
                duplicate=True,
                log_start_offset=self._log_start,
            )
        first_offset, next_offset = prepared.first_offset, prepared.next_offset
        if active.size > 0 and self._should_roll(active, total, next_offset, now_ms):
            active = self._roll(first_offset, now_ms)
        start = active.size
        self._write(active, memoryview(buf))
        interval = self.config.index_interval_bytes
        for p, base, nxt, size, max_ts in prepared.placed:
            active.track(start + p, base, nxt, size, max_ts, interval)
        if allow_control:
            if self._data_end is not None:
                self._note_data(buf, prepared.placed)
        else:  # a client's batches: never control batches
            self._data_end = next_offset
        for producer_id, epoch, batch in prepared.producers:
            self._producers.update(producer_id, epoch, batch)
        txns = self._producers.txns
        for producer_id, kind, offset in prepared.txns:
            if kind < 0:
                txns.observe_data(producer_id, offset)
            else:
                txns.observe_marker(producer_id, kind, offset, hw)
        flush_every = self.config.flush_interval_messages
        if flush_every is not None:
            self._unflushed_messages += prepared.record_count
            if self._unflushed_messages >= flush_every:
                self._fsync(active)
        return AppendInfo(
            first_offset=first_offset,
            last_offset=next_offset - 1,
            log_append_time_ms=append_time,
            record_count=prepared.record_count,
            duplicate=False,
            log_start_offset=self._log_start,
        )

    def _should_roll(self, active: LogSegment, incoming: int, next_offset: int, now_ms: int) -> bool:
        config = self.config
        return (
            active.size + incoming > config.segment_bytes
            or (config.segment_ms is not None and now_ms - active.created_ms >= config.segment_ms)
            or next_offset - active.base_offset > MAX_RELATIVE_OFFSET
        )

    def _write(self, seg: LogSegment, data: memoryview) -> None:
        """One unbuffered write (looping on short writes); on failure cut the file back."""
        total = len(data)
        try:
            written = os.write(seg.fd, data)
            while written < total:
                written += os.write(seg.fd, data[written:])
        except OSError as exc:
            try:
                os.ftruncate(seg.fd, seg.size)
            except OSError as trunc_exc:
                raise LogIOError(
                    f"append to {seg.log_path.name} failed ({exc}) and could not be undone ({trunc_exc})"
                ) from exc
            raise LogIOError(f"append to {seg.log_path.name} failed: {exc}") from exc

    def _fsync(self, seg: LogSegment) -> None:
        try:
            os.fsync(seg.fd)
        except OSError as exc:
            raise LogIOError(f"fsync of {seg.log_path.name} failed: {exc}") from exc
        self._unflushed_messages = 0

    def _roll(self, base_offset: int, now_ms: int) -> LogSegment:
        """Seal the active segment (fsync, indexes, checkpoint) and start a new one."""
        old = self._segments[-1]
        self._fsync(old)
        old.seal_time_index()
        old.write_indexes()
        old.close()
        self._loaded.append(old)
        self._unload_surplus_indexes()
        new = LogSegment(self.directory, base_offset, created_ms=now_ms)
        new.next_offset = base_offset
        new.reset_indexes()
        new.open(writable=True)
        self._segments.append(new)
        self._bases.append(base_offset)
        self._recovery = (base_offset, 0, base_offset)
        self._write_checkpoint()
        return new

    # -- read ---------------------------------------------------------------------------------------

    def read(
        self, offset: int, max_bytes: int, *, min_one_batch: bool = True, end_offset: int | None = None
    ) -> FetchData:
        """Whole batches from the one containing ``offset``, up to ``max_bytes`` in total.

        The first batch is returned whole even if larger than ``max_bytes`` unless
        ``min_one_batch`` is false. ``end_offset`` bounds the read further: it ends soon after the
        batch holding that offset (within one index interval), whatever ``max_bytes`` allows.
        ``offset == log_end_offset`` gives no records; an offset outside
        ``[log_start_offset, log_end_offset]`` raises :class:`OffsetOutOfRangeError`.
        """
        interval = self.config.index_interval_bytes

        def whole(fd: int, seg: LogSegment) -> _SegmentRead | None:
            data = read_batches(fd, seg, offset, max_bytes, min_one_batch, interval, end_offset)
            return None if data is None else (*data, 0)

        return self._read_segments(offset, whole)

    def read_slice(
        self, offset: int, max_bytes: int, *, min_one_batch: bool = True, end_offset: int | None = None
    ) -> FetchData:
        """What a Fetch returns, as Kafka slices it: ``max_bytes`` of one segment from the start of
        the batch holding ``offset``, the last batch possibly cut (``FetchData.tail``), bytes
        passed through. The first batch comes whole even if larger than ``max_bytes`` unless
        ``min_one_batch`` is false (then nothing). Nothing at or beyond ``end_offset`` (the log
        end by default) is returned, not even part of a batch; nor part of a share-state batch.

        Only for answers to clients, which drop a cut batch and fetch it again: every reader in
        the broker reads whole batches with :meth:`read`. Offsets as for :meth:`read`.
        """
        self._check_open()
        interval = self.config.index_interval_bytes
        leo = self.log_end_offset
        end = leo if end_offset is None else min(end_offset, leo)

        def sliced(fd: int, seg: LogSegment) -> _SegmentRead | None:
            return read_slice(fd, seg, offset, max_bytes, min_one_batch, interval, end)

        return self._read_segments(offset, sliced)

    def _read_segments(
        self, offset: int, read_segment: Callable[[int, LogSegment], _SegmentRead | None]
    ) -> FetchData:
        """``read_segment`` on the segment holding ``offset``, and on the next ones while the offset
        falls in a gap at a segment's end; offsets as for :meth:`read`."""
        self._check_open()
        leo = self.log_end_offset
        if offset == leo:
            return FetchData(records=b"", batches=(), log_start_offset=self._log_start, log_end_offset=leo)
        if offset < self._log_start or offset > leo:
            raise OffsetOutOfRangeError(
                f"offset {offset} is outside the log's range [{self._log_start}, {leo}]"
            )
        i = bisect_right(self._bases, offset) - 1
        while i < len(self._segments):
            seg = self._segments[i]
            self._ensure_indexes(seg)
            data = read_segment(self._read_fd(seg), seg)
            if data is not None:
                records, batches, controls, tail = data
                return FetchData(
                    records=records,
                    batches=batches,
                    log_start_offset=self._log_start,
                    log_end_offset=leo,
                    controls=controls,
                    tail=tail,
                )
            i += 1  # the offset fell in a gap at the end of this segment
        return FetchData(records=b"", batches=(), log_start_offset=self._log_start, log_end_offset=leo)

    def _read_fd(self, seg: LogSegment) -> int:
        """The active segment's descriptor, or the one cached reader of an older segment."""
        if seg.fd >= 0:
            return seg.fd
        if self._reader is not None and self._reader is not seg:
            self._reader.close()
        self._reader = seg
        return seg.open(writable=False)

    # -- timestamps ---------------------------------------------------------------------------------

    def offset_for_timestamp(self, timestamp_ms: int) -> TimestampOffset | None:
        """The first record whose timestamp is at least ``timestamp_ms`` (Kafka ListOffsets).

        Exact for uncompressed batches; for a compressed batch the batch's first offset and maximum
        timestamp are returned (its records are not decompressed). ``None`` if no record is that late.
        Share-state control batches are passed over (their timestamps are the persister's).
        """
        self._check_open()
        for seg in self._segments:
            if seg.next_offset <= self._log_start or seg.size == 0:
                continue
            self._ensure_indexes(seg)
            if seg.max_timestamp < timestamp_ms:
                continue
            rel = seg.time_index.lookup_below(timestamp_ms)
            _, pos = seg.index.lookup(rel)
            fd = self._read_fd(seg)
            for p, h in scan_batches(fd, pos, seg.size, verify_crc=False):
                last = h[H_BASE_OFFSET] + h[H_LAST_OFFSET_DELTA]
                if h[H_MAX_TIMESTAMP] < timestamp_ms or last < self._log_start:
                    continue
                if h[H_ATTRIBUTES] & CONTROL_MASK and is_share_control(os.pread(fd, HEADER_SIZE + 32, p)):
                    continue  # stamped when the share state was written: no record of the user's
                found = exact_timestamp(
                    fd, p, h[H_BATCH_LENGTH] + LOG_OVERHEAD, timestamp_ms, self._log_start
                )
                if found is not None:
                    return found
        return None

    def max_timestamp_offset(self) -> TimestampOffset | None:
        """The record with the largest timestamp (ListOffsets -3, KIP-734): the first segment whose
        maximum is the log's, then the batch that reached it there, then the record in that batch.

        Each segment keeps its maximum timestamp and the batch that reached it, as Kafka's time
        index does; a compressed batch answers with its first offset. ``None`` for an empty log.
        """
        self._check_open()
        best: LogSegment | None = None
        for seg in self._segments:
            if seg.next_offset <= self._log_start or seg.size == 0:
                continue
            self._ensure_indexes(seg)
            if seg.max_timestamp >= 0 and (best is None or seg.max_timestamp > best.max_timestamp):
                best = seg
        if best is None:
            return None
        target = best.offset_of_max_timestamp
        _, pos = best.index.lookup(target - best.base_offset)
        fd = self._read_fd(best)
        for p, h in scan_batches(fd, pos, best.size, verify_crc=False):
            last = h[H_BASE_OFFSET] + h[H_LAST_OFFSET_DELTA]
            if last < target:
                continue
            size = h[H_BATCH_LENGTH] + LOG_OVERHEAD
            return exact_timestamp(fd, p, size, best.max_timestamp, self._log_start)
        return None

    # -- retention ----------------------------------------------------------------------------------

    def set_retention_hold(self, owner: str, offset: int | None) -> None:
        """Keep the log start at or below ``offset`` for ``owner``; ``None`` releases its hold.

        The in-log share-state persister holds each partition at its Earliest Share Offset (the
        lowest Share Checkpoint Offset of the groups on it), so that neither time/size retention
        nor DeleteRecords removes the checkpoint and deltas that recovery reads. Retention then
        deletes only segments wholly below the lowest hold; DeleteRecords past it stops at it.

        Holds live in memory only: they are not written to the log's checkpoint, so whoever sets
        one must set it again after the log is reopened (the persister does so on recovery,
        before the broker's first retention pass). A hold below the log start changes nothing.
        """
        if offset is None:
            self._holds.pop(owner, None)
            return
        if offset < 0:
            raise ValueError(f"a retention hold needs an offset, not {offset}")
        self._holds[owner] = offset

    @property
    def retention_floor(self) -> int | None:
        """The lowest retention hold (the log start never moves past it), or ``None``."""
        return min(self._holds.values()) if self._holds else None

    def advance_log_start(self, offset: int) -> int:
        """Move the log start forward (DeleteRecords); whole segments below it are deleted.

        A retention hold stops the move at the hold: the records below ``offset`` from the hold on
        stay readable, and the returned log start (DeleteRecords' low watermark) says where the
        move stopped. Returns the log start after the move.
        """
        self._check_open()
        leo = self.log_end_offset
        if offset > leo or offset < 0:
            raise OffsetOutOfRangeError(f"cannot move the log start to {offset}: log ends at {leo}")
        floor = self.retention_floor
        if floor is not None and offset > floor:
            offset = floor
        if offset <= self._log_start:
            return self._log_start
        self._log_start = offset
        self._delete_oldest(lambda seg: seg.next_offset <= self._log_start)
        self._write_checkpoint()
        return self._log_start

    def enforce_retention(self, now_ms: int) -> int:
        """Delete old whole segments by ``retention_ms`` and ``retention_bytes`` (never the active
        one); return how many were deleted."""
        self._check_open()
        deleted = self._delete_oldest(lambda seg: seg.next_offset <= self._log_start)
        if "delete" not in self.config.cleanup_policy:
            if deleted:
                self._write_checkpoint()
            return deleted  # compact only: the cleaner, not time or size, removes records
        retention_ms = self.config.retention_ms
        if retention_ms >= 0:
            deleted += self._delete_oldest(lambda seg: now_ms - self._largest_timestamp(seg) > retention_ms)
        retention_bytes = self.config.retention_bytes
        if retention_bytes >= 0:
            excess = self.size_bytes - retention_bytes

            def over(seg: LogSegment) -> bool:
                nonlocal excess
                if excess - seg.size < 0:
                    return False
                excess -= seg.size
                return True

            deleted += self._delete_oldest(over)
        if deleted:
            self._write_checkpoint()
        return deleted

    def _largest_timestamp(self, seg: LogSegment) -> int:
        if not seg.indexes_loaded and seg.peek_max_timestamp() is None:
            self._ensure_indexes(seg)
        return seg.largest_timestamp()

    def _delete_oldest(self, eligible: Callable[[LogSegment], bool]) -> int:
        """Delete segments from the oldest while ``eligible(segment)`` holds, keeping the active one
        and every segment that reaches the lowest retention hold (or is already below the log
        start, whatever the holds: deleting it moves nothing)."""
        deleted = 0
        floor = self.retention_floor
        while len(self._segments) > 1 and eligible(self._segments[0]):
            first = self._segments[0]
            if floor is not None and first.next_offset > floor and first.next_offset > self._log_start:
                break
            seg = self._segments.pop(0)
            self._bases.pop(0)
            if self._reader is seg:
                self._reader = None
            if seg in self._loaded:
                self._loaded.remove(seg)
            seg.delete_files()
            deleted += 1
        if deleted:
            self._log_start = max(self._log_start, self._segments[0].base_offset)
        return deleted

    # -- compaction (see cleaner.py) ----------------------------------------------------------------

    def cleaning_plan(self, config: CleaningConfig, now_ms: int) -> CleaningPlan | None:
        """What the cleaner should rewrite now (``None``: nothing is due)."""
        self._check_open()
        closed = []
        for seg in self._segments[:-1]:
            if seg.next_offset <= self._log_start:
                continue
            closed.append(
                SegmentFile(
                    seg.base_offset, seg.next_offset, seg.log_path, seg.size, self._largest_timestamp(seg)
                )
            )
        if not closed:
            return None
        aborted = tuple(
            AbortedRange(a.producer_id, a.first_offset, a.last_offset)
            for a in self.aborted_transactions(closed[0].base, closed[-1].next_offset - 1)
        )
        return plan_cleaning(
            tuple(closed),
            max(self._first_dirty(), self._log_start),
            config,
            now_ms,
            first_unstable=self.last_stable_offset,
            aborted=aborted,
        )

    def swap_cleaned(self, result: CleaningResult) -> int:
        """Put cleaned segment files in place of the originals; a segment that changed meanwhile
        (deleted by retention, say) keeps its original. Returns how many were swapped."""
        self._check_open()
        swapped = 0
        by_base = {seg.base_offset: seg for seg in self._segments[:-1]}
        for cleaned in result.cleaned:
            seg = by_base.get(cleaned.base)
            if seg is None or seg.size != cleaned.original_size:
                cleaned.cleaned_path.unlink(missing_ok=True)
                continue
            next_offset = seg.next_offset
            seg.close()
            if self._reader is seg:
                self._reader = None
            if seg in self._loaded:
                self._loaded.remove(seg)
            seg.discard_indexes()
            seg.index_path.unlink(missing_ok=True)
            seg.timeindex_path.unlink(missing_ok=True)
            seg.keys_path.unlink(missing_ok=True)
            os.replace(cleaned.cleaned_path, seg.log_path)
            seg.size = cleaned.size
            self._rebuild_indexes(seg)
            seg.next_offset = next_offset
            swapped += 1
        _sync_directory(self.directory)
        write_file_atomically(self.directory / FIRST_DIRTY_FILE, b"%d" % result.next_first_dirty)
        return swapped

    def _first_dirty(self) -> int:
        try:
            return int((self.directory / FIRST_DIRTY_FILE).read_text())
        except (OSError, ValueError):
            return 0

    # -- durability and lifecycle -------------------------------------------------------------------

    def flush(self) -> None:
        """fsync the active segment and record a recovery point, indexes and producer snapshot."""
        self._check_open()
        active = self._segments[-1]
        self._fsync(active)
        active.seal_time_index()
        try:
            active.write_indexes()
            write_file_atomically(
                self.directory / PRODUCER_SNAPSHOT_FILE,
                self._producers.to_json(active.next_offset).encode(),
                sync=False,
            )
            self._recovery = (active.base_offset, active.size, active.next_offset)
            self._write_checkpoint()
        except OSError as exc:
            raise LogIOError(f"cannot write checkpoint files: {exc}") from exc

    def close(self) -> None:
        """Flush and release file descriptors; a clean close lets the next open skip recovery scans."""
        if self._closed:
            return
        try:
            self.flush()
        finally:
            self._close_fds()
            self._closed = True

    def delete(self) -> None:
        """Close without flushing and remove the partition directory."""
        self._close_fds()
        self._closed = True
        shutil.rmtree(self.directory, ignore_errors=True)

    def _close_fds(self) -> None:
        for seg in self._segments:
            seg.close()
        self._reader = None

    def _check_open(self) -> None:
        if self._closed:
            raise LogIOError(f"log in {self.directory.name} is closed")

    def __repr__(self) -> str:
        return (
            f"PartitionLog({self.directory.name}, start={self._log_start}, end={self.log_end_offset}, "
            f"segments={len(self._segments)})"
        )


def _sync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
