"""BuiltinPersister: share-partition state in the local ``__share_group_state`` topic.

Each state-topic partition is a ``PartitionLog`` plus a ``ShareCoordinatorShard``. A request runs
the shard's handler, appends the records it returns, makes them durable, and only then answers.

**Group commit** is ``group_commit``'s: one flusher task drains the request queues in cycles. A
cycle runs the handlers of every queued request in arrival order, replaying each result into its
shard at the offset the append will give it, appends one record batch per state partition, fsyncs
the touched logs in worker threads, and then completes the cycle's requests; in group mode the
next cycle is handled and appended while the previous fsync runs. No request is answered before
its records are durable. When no cycle is in flight a shard's state is exactly what its log holds;
only then does pruning run. Reads of a share-partition with queued or in-flight records wait
behind them; other reads answer at once.

**Flush modes** (``FlushMode``: ``fsync``, ``group`` by default, ``none``) are described there.
If an append or fsync fails, the cycle's requests fail with KAFKA_STORAGE_ERROR and that state
partition refuses further requests (its shard may be ahead of its log) until the persister is
reopened, which reloads it from the log.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from shareq.coordinators.share.loader import ShardLoader
from shareq.coordinators.share.placement import partition_for
from shareq.coordinators.share.records import (
    RecordType,
    ShareSnapshot,
    ShareTxnStage,
    StateRecord,
    StateRecordError,
    encode_key,
    encode_record,
    encode_value,
)
from shareq.coordinators.share.shard import (
    CoordinatorResult,
    ShareCoordinatorConfig,
    ShareCoordinatorShard,
)
from shareq.share.persister import PersisterError, SharePartitionKey

from .group_commit import CommitPartition, GroupCommit, KeyInfo, append_limit, wall_clock_ms
from .group_commit import FlushMode as FlushMode
from .group_commit import Handler as Handler
from .segment_sync import ActiveSegmentSync
from .state_log import MAX_BATCH_BYTES, KeyValue, batches_end_offset, encode_batches, iter_records

STATE_TOPIC = "__share_group_state"
_READ_CHUNK = 4 * 1024 * 1024


class StateLog(Protocol):
    """What the persister needs of a partition log (``shareq.log.partition_log.PartitionLog``)."""

    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    def append(self, records: bytes, *, now_ms: int) -> Any: ...

    def read(self, offset: int, max_bytes: int) -> Any: ...

    def advance_log_start(self, offset: int) -> Any: ...

    def flush(self) -> Any: ...

    def close(self) -> Any: ...


LogForPartition = Callable[[int], StateLog]
"""Opens (or returns) the log of one state-topic partition."""


class _StatePartition(CommitPartition):
    """One state-topic partition; its log is opened by ``load``."""

    __slots__ = ("index", "prune_due")

    def __init__(self, index: int, config: ShareCoordinatorConfig) -> None:
        super().__init__(f"{STATE_TOPIC}-{index}", index, ShareCoordinatorShard(index, config), None, None)
        self.index = index
        self.prune_due = False


class _KeyInfo(KeyInfo[_StatePartition]):
    """Per share-partition, besides its state partition and in-flight count: its encoded keys."""

    __slots__ = ("key", "snapshot_key", "update_key")

    def __init__(self, key: SharePartitionKey, part: _StatePartition) -> None:
        super().__init__(part)
        self.key = key
        self.snapshot_key = encode_key(RecordType.SNAPSHOT, key)
        self.update_key = encode_key(RecordType.UPDATE, key)


class BuiltinPersister(GroupCommit[_StatePartition, _KeyInfo]):
    """The ``Persister`` protocol on local state-topic partition logs (see module docstring)."""

    log_noun = "the state log"

    def __init__(
        self,
        log_for_partition: LogForPartition,
        *,
        config: ShareCoordinatorConfig | None = None,
        flush_mode: FlushMode = FlushMode.GROUP,
        clock_ms: Callable[[], int] = wall_clock_ms,
    ) -> None:
        super().__init__(config=config, flush_mode=flush_mode, clock_ms=clock_ms, sync_name="state-fsync")
        self._log_for_partition = log_for_partition
        self._partitions = [
            _StatePartition(i, self.config) for i in range(self.config.state_topic_num_partitions)
        ]
        self._last_prune_ms: int | None = None
        self._key_info: dict[SharePartitionKey, _KeyInfo] = {}

    @classmethod
    def in_directory(
        cls,
        directory: Path,
        *,
        segment_bytes: int = 8 * 1024 * 1024,
        config: ShareCoordinatorConfig | None = None,
        flush_mode: FlushMode = FlushMode.GROUP,
        clock_ms: Callable[[], int] = wall_clock_ms,
    ) -> BuiltinPersister:
        """A persister whose partition logs live in ``directory/__share_group_state-<n>``.

        The state topic keeps everything until pruned (no time or size retention); small segments
        let pruning free space in whole segments.
        """
        from shareq.log.config import LogConfig
        from shareq.log.partition_log import PartitionLog

        log_config = LogConfig(
            segment_bytes=segment_bytes, segment_ms=None, retention_ms=-1, retention_bytes=-1
        )

        def open_log(partition: int) -> StateLog:
            path = Path(directory) / f"{STATE_TOPIC}-{partition}"
            return PartitionLog.open(path, log_config, now_ms=clock_ms())

        return cls(open_log, config=config, flush_mode=flush_mode, clock_ms=clock_ms)

    # -- lifecycle -----------------------------------------------------------------------------

    async def load(self) -> None:
        """Open and replay every state partition; until one is loaded its requests fail with
        COORDINATOR_LOAD_IN_PROGRESS."""
        self._ensure_flusher()
        for part in self._partitions:
            if part.shard.loaded:
                continue
            part.log = self._log_for_partition(part.index)
            part.sync = ActiveSegmentSync(part.log)
            await self._replay_log(part)
            part.shard.complete_load()

    async def _replay_log(self, part: _StatePartition) -> None:
        """Feed the log's records to a ``ShardLoader`` in chunks, then rebuild the shard from it."""
        log = part.log
        assert log is not None
        loader = ShardLoader()
        offset = log.log_start_offset
        end = log.log_end_offset
        try:
            while offset < end:
                data = bytes(log.read(offset, _READ_CHUNK).records)
                if not data:
                    break
                loader.feed(iter_records(data, min_offset=offset))
                # Past the chunk's last batch even if it held nothing at or above ``offset``.
                offset = max(offset, loader.next_offset or 0, batches_end_offset(data))
                await asyncio.sleep(0)  # let the server breathe between chunks
            loader.finish(part.shard)
        except StateRecordError as exc:
            raise PersisterError(ErrorCode.kafka_storage_error, f"{STATE_TOPIC}-{part.index} {exc}") from None

    def _close_partitions(self) -> None:
        """Close the logs (the flusher has stopped)."""
        for part in self._partitions:
            part.close_sync()
            if part.log is not None:
                part.log.close()
                part.log = None

    # -- housekeeping --------------------------------------------------------------------------

    def next_deadline(self) -> int | None:
        """When ``tick`` next has work (ms since the epoch), or None."""
        deadlines = [
            d for p in self._partitions if p.shard.loaded and (d := p.shard.next_deadline()) is not None
        ]
        if self._last_prune_ms is not None:
            deadlines.append(self._last_prune_ms + self.config.state_topic_prune_interval_ms)
        elif any(p.shard.loaded for p in self._partitions):
            deadlines.append(self._clock_ms())
        return min(deadlines, default=None)

    async def tick(self, now_ms: int | None = None) -> None:
        """Write due cold-partition snapshots and, when the prune interval has passed, prune."""
        now = self._clock_ms() if now_ms is None else now_ms
        waits = []
        for part in self._partitions:
            if part.shard.loaded and not part.failed:
                deadline = part.shard.next_deadline()
                if deadline is not None and deadline <= now:
                    waits.append(self._enqueue(part, None, lambda shard, t: _cold(shard, t)))
        if waits:
            await asyncio.gather(*waits)
        if (
            self._last_prune_ms is None
            or now >= self._last_prune_ms + self.config.state_topic_prune_interval_ms
        ):
            self._last_prune_ms = now
            await self.prune()

    async def prune(self) -> None:
        """Advance each state partition's log start to its shard's prune offset (between cycles)."""
        for part in self._partitions:
            if part.shard.loaded and not part.failed:
                part.prune_due = True
                self._idle_work_due = True
        await self._enqueue_barrier()

    def state_partition(self, key: SharePartitionKey) -> int:
        """The state-topic partition holding ``key``."""
        return self._info(key).part.index

    def _info(self, key: SharePartitionKey) -> _KeyInfo:
        info = self._key_info.get(key)
        if info is None:
            part = self._partitions[partition_for(key, self.config.state_topic_num_partitions)]
            info = _KeyInfo(key, part)
            self._key_info[key] = info
        return info

    # -- group-commit hooks ----------------------------------------------------------------------

    def _locate(self, key: SharePartitionKey) -> _KeyInfo:
        info = self._key_info.get(key)  # the hot path: one call less than through _info
        if info is None:
            info = self._info(key)
        self._usable(info.part)
        return info

    def _partition_list(self) -> Iterable[_StatePartition]:
        return self._partitions

    def _refusal(self, part: _StatePartition) -> PersisterError | None:
        if part.failed:
            return PersisterError(ErrorCode.kafka_storage_error, ErrorCode.kafka_storage_error.name)
        if part.log is None:
            return PersisterError(
                ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_load_in_progress.name
            )
        return None

    def _stage_records(
        self,
        part: _StatePartition,
        info: _KeyInfo | None,
        records: tuple[StateRecord, ...],
        out: list[KeyValue],
        base: int,
        now: int,
    ) -> None:
        """Replay each record, then encode it; a request's own key is encoded once per key."""
        shard = part.shard
        for record in records:
            shard.replay(record.key, record.value, base + len(out))
            value = record.value
            if info is None or (record.key is not info.key and record.key != info.key):
                out.append(encode_record(record))
            elif value is None:
                out.append((info.snapshot_key, None))
            elif isinstance(value, ShareSnapshot):
                out.append((info.snapshot_key, encode_value(value)))
            elif isinstance(value, ShareTxnStage):
                out.append(encode_record(record))
            else:
                out.append((info.update_key, encode_value(value)))

    def _append(self, part: _StatePartition, out: list[KeyValue], now: int) -> None:
        """The cycle's records of one state partition as v2 batches (one unless they are large)."""
        log = part.log
        assert log is not None
        for data in encode_batches(out, timestamp=now, max_batch_bytes=append_limit(log, MAX_BATCH_BYTES)):
            log.append(data, now_ms=now)
            self.bytes_appended += len(data)

    async def _enqueue_barrier(self) -> None:
        """Wait until the flusher has passed a cycle boundary (and so run any due prunes)."""
        part = self._partitions[0]
        await self._enqueue(part, None, lambda _shard, _now: CoordinatorResult(records=(), response=None))

    async def _idle_work(self) -> None:
        """Prune between cycles (shards equal their logs): move log starts, then checkpoint the
        logs."""
        pruned: list[StateLog] = []
        self._idle_work_due = False
        for part in self._partitions:
            if not part.prune_due:
                continue
            part.prune_due = False
            if part.log is None or part.failed:
                continue
            offset = part.shard.prune_offset()
            if offset > part.log.log_start_offset:
                part.log.advance_log_start(offset)
                if part.sync is not None:
                    part.sync.forget()
            pruned.append(part.log)
        if pruned and self.flush_mode is not FlushMode.NONE:
            await asyncio.get_running_loop().run_in_executor(None, _flush_all, pruned)


def _cold(shard: ShareCoordinatorShard, now: int) -> CoordinatorResult[None]:
    return CoordinatorResult(records=shard.cold_snapshots(now), response=None)


def _flush_all(logs: list[StateLog]) -> None:
    for log in logs:
        log.flush()
