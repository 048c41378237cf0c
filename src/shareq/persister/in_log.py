"""InLogPersister: share-partition state in the share-partition's own topic-partition (seed 004).

Each user topic-partition carries the state of every share group on it as control batches of two
types, SHARE_CHECKPOINT (a group's whole state) and SHARE_DELTA (what one write changed), whose
payload is ``share_control``'s. Per partition a ``ShareCoordinatorShard`` (the state model the
built-in persister uses, keyed by group) decides what a request writes: a checkpoint on
initialization, every ``snapshot_update_records_per_snapshot`` deltas, when the combined state is
no bigger than the delta, when a group's chain of deltas passes ``chain_max_bytes``, or when its
checkpoint lies more than ``checkpoint_max_log_bytes`` of log (or ``checkpoint_max_distance``
offsets) behind the log end, which bounds what recovery reads; otherwise a delta chained to the
previous record by its offset. ACQUIRED is never written.

**Group commit and flush modes** are ``group_commit``'s, as for the built-in persister: one
flusher drains the queued requests in cycles, appends one run of control batches per touched
partition (offsets are known before the append: every control batch holds one record and nothing
else appends between), fsyncs the touched partitions' active segments in worker threads and only
then answers. ``fsync`` takes one request per cycle, ``group`` shares fsyncs and stages the next
cycle during one, ``none`` never fsyncs.

After a cycle is durable each group's **retention hold** (``PartitionLog.set_retention_hold``,
owner the group id, offset its Share Checkpoint Offset) follows its newest checkpoint, and the
**share snapshot file** is rewritten once the log has grown by ``checkpoint_max_log_bytes`` since
the last time (a stale one only makes recovery scan from older checkpoints); deleting a group's
state writes a
tombstone checkpoint and releases its hold. Recovery (``in_log_recovery``) never scans from the
log start. Idle groups whose checkpoint falls far behind the log end get a fresh copy of it on the
periodic tick, so that recovery scans and retention holds stay near the log end.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from shareq.coordinators.share.records import (
    MARKER_KEY,
    ShareSnapshot,
    ShareTxnMarker,
    ShareTxnStage,
    ShareUpdate,
    StateRecord,
)
from shareq.coordinators.share.shard import (
    CoordinatorResult,
    ShareCoordinatorConfig,
    ShareCoordinatorShard,
    fold_updates,
)
from shareq.log.errors import LogError
from shareq.log.records import encode_share_control_batch
from shareq.share.persister import PersisterError, SharePartitionKey

from . import share_control as sc
from .group_commit import (
    CommitPartition,
    FlushMode,
    GroupCommit,
    Handler,
    KeyInfo,
    append_limit,
    unwrap,
    wall_clock_ms,
)
from .in_log_recovery import GroupPosition, SnapshotFile, recover, write_snapshot_file
from .segment_sync import ActiveSegmentSync
from .share_control import ControlKind, ShareControl, ShareControlError

log = logging.getLogger("shareq.share")

CHAIN_MAX_BYTES = 256 * 1024
CHECKPOINT_MAX_DISTANCE = 100_000
CHECKPOINT_MAX_LOG_BYTES = 256 * 1024
SCAN_BOUND_BYTES = 64 * 1024 * 1024
_APPEND_MAX_BYTES = 512 * 1024

PartitionId = tuple[uuid.UUID, int]
LogFor = Callable[[uuid.UUID, int], Any]
"""The log of a topic-partition (a ``PartitionLog``), or None when it does not exist."""


class _LogPartition(CommitPartition):
    """One topic-partition's share state: its shard, chains, queue and durability handles."""

    __slots__ = (
        "chain_bytes",
        "checkpoint_size",
        "directory",
        "file_dirty",
        "file_end",
        "file_size",
        "groups",
        "holds_due",
        "id",
        "infos",
        "released",
    )

    def __init__(self, pid: PartitionId, log_: Any, config: ShareCoordinatorConfig, order: int) -> None:
        super().__init__(
            f"share state of {pid[0]}-{pid[1]}",
            order,
            ShareCoordinatorShard(pid[1], config),
            log_,
            ActiveSegmentSync(log_),
        )
        self.id = pid
        directory = getattr(log_, "directory", None)
        self.directory = Path(directory) if directory is not None else None
        self.groups: dict[str, GroupPosition] = {}
        self.chain_bytes: dict[str, int] = {}
        # the log's size when the group's checkpoint was written (0 after a restart: the first
        # write of each group then checkpoints, so the next recovery reads little)
        self.checkpoint_size: dict[str, int] = {}
        self.holds_due: set[str] = set()
        self.released: set[str] = set()
        self.file_dirty = False
        self.file_end = -1
        self.file_size = 0  # the log's size when the snapshot file was last written
        self.infos: dict[str, KeyInfo[_LogPartition]] = {}  # per group: requests queued or in flight

    def key(self, group: str) -> SharePartitionKey:
        return SharePartitionKey(group_id=group, topic_id=self.id[0], partition=self.id[1])

    def info(self, group: str) -> KeyInfo[_LogPartition]:
        info = self.infos.get(group)
        if info is None:
            info = self.infos[group] = KeyInfo(self)
        return info

    def busy(self, group: str) -> bool:
        """Requests of the group are queued or in flight."""
        info = self.infos.get(group)
        return info is not None and info.in_flight > 0


class InLogPersister(GroupCommit[_LogPartition, KeyInfo[_LogPartition]]):
    """The ``Persister`` protocol on control records in the user partitions (module docstring)."""

    log_noun = "the partition log"

    def __init__(
        self,
        log_for: LogFor,
        list_partitions: Callable[[], Iterable[PartitionId]],
        *,
        config: ShareCoordinatorConfig | None = None,
        flush_mode: FlushMode = FlushMode.GROUP,
        clock_ms: Callable[[], int] = wall_clock_ms,
        chain_max_bytes: int = CHAIN_MAX_BYTES,
        checkpoint_max_distance: int = CHECKPOINT_MAX_DISTANCE,
        checkpoint_max_log_bytes: int = CHECKPOINT_MAX_LOG_BYTES,
        scan_bound_bytes: int = SCAN_BOUND_BYTES,
    ) -> None:
        super().__init__(
            config=config, flush_mode=flush_mode, clock_ms=clock_ms, sync_name="share-state-fsync"
        )
        self._log_for = log_for
        self._list_partitions = list_partitions
        self.chain_max_bytes = chain_max_bytes
        self.checkpoint_max_distance = checkpoint_max_distance
        self.checkpoint_max_log_bytes = checkpoint_max_log_bytes
        self.scan_bound_bytes = scan_bound_bytes
        self._parts: dict[PartitionId, _LogPartition] = {}
        self._opened = 0  # partitions opened so far: a cycle stages them in that order
        self._last_tick_ms: int | None = None
        # recovery figures of the last load
        self.recovered_bytes_read = 0
        self.rebuilt_snapshot_files = 0

    # -- lifecycle -----------------------------------------------------------------------------

    async def load(self) -> None:
        """Recover every existing partition (so that retention holds are set before retention
        runs); partitions created later start empty when first used."""
        self._ensure_flusher()
        for pid in list(self._list_partitions()):
            if pid not in self._parts:
                self._open(pid)
                await asyncio.sleep(0)

    def _open(self, pid: PartitionId) -> _LogPartition:
        log_ = self._log_for(*pid)
        if log_ is None:
            raise PersisterError(ErrorCode.unknown_topic_or_partition, f"no partition {pid[0]}-{pid[1]}")
        self._opened += 1
        part = _LogPartition(pid, log_, self.config, self._opened)
        self._parts[pid] = part
        try:
            found, rebuilt, read, lost = recover(log_, part.directory, scan_bound_bytes=self.scan_bound_bytes)
        except (ShareControlError, LogError) as exc:
            log.error("share state of partition %s-%d cannot be recovered: %s", pid[0], pid[1], exc)
            part.failed = True
            return part
        self.recovered_bytes_read += read
        for group in lost:
            log.warning(
                "share group %s has share state on %s-%d with no checkpoint within %d bytes of the log "
                "end: it starts over from its reset policy",
                group,
                pid[0],
                pid[1],
                self.scan_bound_bytes,
            )
        records: list[tuple[int, SharePartitionKey, ShareControl]] = []
        for group, chain in found.items():
            if chain.deleted:
                continue
            part.groups[group] = chain.position
            part.chain_bytes[group] = sum(40 + 19 * len(c.states) for _, c in chain.records[1:])
            key = part.key(group)
            records.extend((offset, key, c) for offset, c in chain.records)
        records.sort(key=lambda r: r[0])
        shard = part.shard
        for offset, key, c in records:
            value = sc.to_value(c)
            shard.replay(MARKER_KEY if c.kind is ControlKind.TXN_END else key, value, offset)
        shard.restore_next_offset(log_.log_end_offset)
        shard.complete_load()
        for group, pos in part.groups.items():
            _hold(log_, group, pos.checkpoint_offset)
        if rebuilt:
            self.rebuilt_snapshot_files += 1
            self._write_file(part)
        else:
            part.file_end = -1  # unknown: rewritten at the next tick or close
        return part

    def _close_partitions(self) -> None:
        """Write the snapshot files (the logs stay open: they belong to the broker)."""
        for part in self._parts.values():
            if not part.failed and self._live(part):
                self._try_write_file(part)
            part.close_sync()

    def _try_write_file(self, part: _LogPartition) -> None:
        """``_write_file``, a failure only logged: a stale or missing file costs recovery a scan."""
        try:
            self._write_file(part)
        except OSError:
            log.warning("cannot write the share snapshot file of %s-%d", *part.id, exc_info=True)

    def _write_file(self, part: _LogPartition) -> None:
        if part.directory is None:
            return
        end = part.log.log_end_offset
        write_snapshot_file(
            part.directory,
            SnapshotFile(end_offset=end, groups={g: dataclasses.replace(p) for g, p in part.groups.items()}),
        )
        part.file_dirty = False
        part.file_end = end
        part.file_size = getattr(part.log, "size_bytes", 0)

    # -- Persister protocol (the rest is ``GroupCommit``'s) ----------------------------------------

    async def delete_state(self, key: SharePartitionKey) -> None:
        try:
            info = self._locate(key)
        except PersisterError as exc:
            if exc.error_code == ErrorCode.unknown_topic_or_partition:
                return  # the topic is gone, and its share state with it
            raise
        unwrap(await self._enqueue(info.part, info, lambda shard, _now: shard.handle_delete(key)))

    def state_partition(self, key: SharePartitionKey) -> int:
        """A transaction's share-state participant label: the share-partition's own partition."""
        return key.partition

    def checkpoint_offset(self, key: SharePartitionKey) -> int | None:
        """The group's Share Checkpoint Offset on the key's partition (None without state)."""
        part = self._parts.get((key.topic_id, key.partition))
        pos = None if part is None else part.groups.get(key.group_id)
        return None if pos is None else pos.checkpoint_offset

    # -- housekeeping --------------------------------------------------------------------------

    def next_deadline(self) -> int | None:
        if self._last_tick_ms is None:
            return self._clock_ms() if self._parts else None
        return self._last_tick_ms + self.config.state_topic_prune_interval_ms

    async def tick(self, now_ms: int | None = None) -> None:
        """Re-checkpoint idle groups far behind the log end; refresh stale snapshot files."""
        now = self._clock_ms() if now_ms is None else now_ms
        self._last_tick_ms = now
        waits = []
        for part in list(self._parts.values()):
            if part.failed or not self._live(part):
                continue
            leo = part.log.log_end_offset
            far = [g for g in part.groups if self._far(part, g) and not part.busy(g)]
            for group in far:
                waits.append(self._enqueue(part, part.info(group), _recheckpoint(part.key(group))))
            if not far and part.file_end != leo:
                self._try_write_file(part)
        if waits:
            await asyncio.gather(*waits, return_exceptions=True)

    # -- group-commit hooks ----------------------------------------------------------------------

    def _partition(self, key: SharePartitionKey) -> _LogPartition:
        pid = (key.topic_id, key.partition)
        part = self._parts.get(pid)
        if part is not None and self._log_for(*pid) is not part.log:
            self._parts.pop(pid, None)  # the topic was deleted (or recreated)
            part.close_sync()
            part = None
        if part is None:
            if self._log_for(*pid) is None:
                raise PersisterError(ErrorCode.unknown_topic_or_partition, f"no partition {pid[0]}-{pid[1]}")
            part = self._open(pid)
        self._usable(part)
        return part

    def _locate(self, key: SharePartitionKey) -> KeyInfo[_LogPartition]:
        return self._partition(key).info(key.group_id)

    def _partition_list(self) -> Iterable[_LogPartition]:
        return self._parts.values()

    def _live(self, part: _LogPartition) -> bool:
        return self._log_for(*part.id) is part.log

    def _refusal(self, part: _LogPartition) -> PersisterError | None:
        if part.failed:
            return PersisterError(ErrorCode.kafka_storage_error, "share state failed")
        if not self._live(part):
            return PersisterError(ErrorCode.unknown_topic_or_partition, "the partition was deleted")
        return None

    def _stage_records(
        self,
        part: _LogPartition,
        info: KeyInfo[_LogPartition] | None,
        records: tuple[StateRecord, ...],
        out: list[bytes],
        base: int,
        now: int,
    ) -> None:
        """One control batch per control record, tracked and replayed at the offset it will get."""
        for record in records:
            for key, value, control in self._controls(part, record, now):
                offset = base + len(out)
                payload = sc.encode(control)
                out.append(encode_share_control_batch(control.control_type, payload, timestamp=now))
                self._track(part, control, offset, len(payload))
                part.shard.replay(key, value, offset)

    def _append(self, part: _LogPartition, out: list[bytes], now: int) -> None:
        """The cycle's control batches, joined into appends of at most the append limit."""
        log_ = part.log
        chunk: list[bytes] = []
        size = 0
        limit = append_limit(log_, _APPEND_MAX_BYTES)
        for data in out:
            if chunk and size + len(data) > limit:
                log_.append(b"".join(chunk), now_ms=now)
                chunk, size = [], 0
            chunk.append(data)
            size += len(data)
        log_.append(b"".join(chunk), now_ms=now)
        self.bytes_appended += sum(len(d) for d in out)

    def _controls(
        self, part: _LogPartition, record: StateRecord, now: int
    ) -> list[tuple[SharePartitionKey, Any, ShareControl]]:
        """The control records standing for one share coordinator record (a marker becomes one
        delta per group holding entries of that producer), each with the key and value to replay."""
        value = record.value
        if isinstance(value, ShareTxnMarker):
            out = []
            for key in part.shard.keys():  # noqa: SIM118 (a method, not a dict)
                state = part.shard.state(key)
                pos = part.groups.get(key.group_id)
                if state is None or pos is None:
                    continue
                if any(p.producer_id == value.producer_id for p in state.pending_txn_batches):
                    out.append(
                        (
                            MARKER_KEY,
                            value,
                            sc.from_txn_end(key.group_id, pos.checkpoint_epoch, value, pos.last_offset),
                        )
                    )
            return out
        key = record.key
        group = key.group_id
        pos = part.groups.get(group)
        if value is None:
            return [(key, None, sc.tombstone(group, 0 if pos is None else pos.checkpoint_epoch + 1))]
        if isinstance(value, ShareSnapshot):
            return [(key, value, sc.from_snapshot(group, value))]
        assert pos is not None  # an update or stage follows a snapshot of the same epoch
        if isinstance(value, ShareTxnStage):
            return [(key, value, sc.from_stage(group, value, pos.last_offset))]
        assert isinstance(value, ShareUpdate)
        if part.chain_bytes.get(group, 0) >= self.chain_max_bytes or self._far(part, group):
            current = part.shard.current(key)
            if current is not None:
                merged = fold_updates(current, [value])
                snap = dataclasses.replace(
                    merged, snapshot_epoch=current.snapshot_epoch + 1, write_timestamp=now
                )
                return [(key, snap, sc.from_snapshot(group, snap))]
        return [(key, value, sc.from_update(group, value, pos.last_offset))]

    def _far(self, part: _LogPartition, group: str) -> bool:
        """The group's checkpoint is far enough behind the log end to write a new one."""
        pos = part.groups[group]
        log_ = part.log
        if log_.log_end_offset - pos.checkpoint_offset > self.checkpoint_max_distance:
            return True
        size = getattr(log_, "size_bytes", None)
        return size is not None and size - part.checkpoint_size.get(group, 0) > self.checkpoint_max_log_bytes

    @staticmethod
    def _track(part: _LogPartition, control: ShareControl, offset: int, size: int) -> None:
        group = control.group_id
        if control.kind is ControlKind.TOMBSTONE:
            part.groups.pop(group, None)
            part.chain_bytes.pop(group, None)
            part.checkpoint_size.pop(group, None)
            part.holds_due.discard(group)
            part.released.add(group)
            part.file_dirty = True
        elif control.checkpoint:
            part.groups[group] = GroupPosition(offset, offset, control.checkpoint_epoch)
            part.chain_bytes[group] = 0
            part.checkpoint_size[group] = getattr(part.log, "size_bytes", 0)
            part.holds_due.add(group)
            part.released.discard(group)
            part.file_dirty = True
        else:
            pos = part.groups[group]
            pos.last_offset = offset
            part.chain_bytes[group] = part.chain_bytes.get(group, 0) + size

    def _durable(self, touched: list[_LogPartition]) -> None:
        """Durable now: move retention holds, rewrite snapshot files."""
        for part in touched:
            if part.failed:
                continue
            for group in part.holds_due:
                pos = part.groups.get(group)
                if pos is not None:
                    _hold(part.log, group, pos.checkpoint_offset)
            for group in part.released:
                _hold(part.log, group, None)
            part.holds_due.clear()
            part.released.clear()
            # A stale file costs recovery only the scan from its older checkpoints, so it is
            # rewritten once the log has grown by a checkpoint distance, not after every checkpoint.
            if part.file_dirty and (
                getattr(part.log, "size_bytes", 0) - part.file_size > self.checkpoint_max_log_bytes
            ):
                self._try_write_file(part)


def _recheckpoint(key: SharePartitionKey) -> Handler:
    """A fresh checkpoint of ``key``'s current state at the log end (nothing if it has none)."""

    def handle(shard: ShareCoordinatorShard, now: int) -> CoordinatorResult[ErrorCode]:
        current = shard.current(key)
        if current is None:
            return CoordinatorResult(records=(), response=ErrorCode.none)
        snap = dataclasses.replace(current, snapshot_epoch=current.snapshot_epoch + 1, write_timestamp=now)
        return CoordinatorResult(records=(StateRecord(key=key, value=snap),), response=ErrorCode.none)

    return handle


def _hold(log_: Any, group: str, offset: int | None) -> None:
    """Keep retention and DeleteRecords below the group's checkpoint (when the log supports it)."""
    setter = getattr(log_, "set_retention_hold", None)
    if setter is not None:
        setter(group, offset)
