"""BuiltinPersister: share-partition state in the local ``__share_group_state`` topic.

Each state-topic partition is a ``PartitionLog`` plus a ``ShareCoordinatorShard``. A request runs
the shard's handler, appends the records it returns, makes them durable, and only then answers.

**Group commit.** One flusher task drains the request queues in cycles. A cycle runs the handlers
of every queued request in arrival order, replaying each result into its shard at the offset the
append will give it (so a second write to the same share-partition in the same cycle sees the
first, as in Kafka's coordinator runtime), appends one record batch per state partition, fsyncs the
touched logs in worker threads, and then completes the cycle's requests. Requests arriving during
the fsync share the next one; in group mode that next cycle is already handled and appended while
the previous fsync runs (its answers still wait for its own fsync). No request is answered
before its records are durable. When no cycle is in flight a shard's state is exactly what its
log holds; only then does pruning run. Reads of a share-partition with queued or in-flight
records wait behind them; other reads answer at once.

**Flush modes** (``FlushMode``) and what a successful write survives:

* ``fsync`` -- one request per cycle, one fsync each: process crash and power loss; slowest.
* ``group`` (default) -- concurrent requests share an fsync: process crash and power loss.
* ``none`` -- appended (OS write) but never fsynced by the persister: a process crash, not a
  power loss or kernel crash (the page cache may be lost).

If an append or fsync fails, the cycle's requests fail with KAFKA_STORAGE_ERROR and that state
partition refuses further requests (its shard may be ahead of its log) until the persister is
reopened, which reloads it from the log.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from shareq.coordinators.share.loader import ShardLoader
from shareq.coordinators.share.placement import partition_for
from shareq.coordinators.share.records import (
    RecordType,
    ShareSnapshot,
    ShareTxnStage,
    StateRecordError,
    encode_key,
    encode_record,
    encode_value,
)
from shareq.coordinators.share.shard import (
    CoordinatorResult,
    ReadResult,
    ReadSummaryResult,
    ShareCoordinatorConfig,
    ShareCoordinatorShard,
)
from shareq.histogram import Histogram
from shareq.log.errors import LogError
from shareq.share.persister import (
    PersisterError,
    SharePartitionKey,
    ShareState,
    ShareStateSummary,
    WriteStateParams,
)

from .segment_sync import ActiveSegmentSync
from .state_log import MAX_BATCH_BYTES, KeyValue, batches_end_offset, encode_batches, iter_records
from .sync_workers import SyncWorkers

STATE_TOPIC = "__share_group_state"
_READ_CHUNK = 4 * 1024 * 1024
_SYNC_THREADS = 8


class FlushMode(StrEnum):
    FSYNC = "fsync"
    GROUP = "group"
    NONE = "none"


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

Handler = Callable[[ShareCoordinatorShard, int], CoordinatorResult[Any]]


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class _KeyInfo:
    """Per share-partition: its state partition, requests queued or in flight, encoded keys.

    Looked up once per request: hashing a ``SharePartitionKey`` (a uuid inside) is costly.
    """

    __slots__ = ("in_flight", "key", "partition", "snapshot_key", "update_key")

    def __init__(self, key: SharePartitionKey, partition: int) -> None:
        self.key = key
        self.partition = partition
        self.in_flight = 0
        self.snapshot_key = encode_key(RecordType.SNAPSHOT, key)
        self.update_key = encode_key(RecordType.UPDATE, key)


@dataclass(slots=True)
class _Request:
    info: _KeyInfo | None
    handle: Handler
    future: asyncio.Future[Any]


class _StatePartition:
    __slots__ = ("failed", "index", "log", "prune_due", "queue", "shard", "sync")

    def __init__(self, index: int, config: ShareCoordinatorConfig) -> None:
        self.index = index
        self.shard = ShareCoordinatorShard(index, config)
        self.log: StateLog | None = None
        self.sync: ActiveSegmentSync | None = None
        self.queue: list[_Request] = []
        self.failed = False
        self.prune_due = False


@dataclass(slots=True)
class _Cycle:
    """Requests handled together: per partition the outcomes to give, and the logs appended to."""

    staged: list[tuple[_StatePartition, list[tuple[_Request, Any]]]] = field(default_factory=list)
    touched: list[_StatePartition] = field(default_factory=list)


def error_of(response: object) -> ErrorCode:
    """The error a shard's response carries (``none`` for a plain result)."""
    if isinstance(response, ErrorCode):
        return response
    if isinstance(response, ReadResult | ReadSummaryResult):
        return response.error
    return ErrorCode.none


def unwrap(response: Any) -> Any:
    """``response``, or the :class:`PersisterError` its error code stands for."""
    error = error_of(response)
    if error != ErrorCode.none:
        raise PersisterError(error, error.name)
    return response


class BuiltinPersister:
    """The ``Persister`` protocol on local state-topic partition logs (see module docstring)."""

    def __init__(
        self,
        log_for_partition: LogForPartition,
        *,
        config: ShareCoordinatorConfig | None = None,
        flush_mode: FlushMode = FlushMode.GROUP,
        clock_ms: Callable[[], int] = wall_clock_ms,
    ) -> None:
        self.config = config or ShareCoordinatorConfig()
        self.flush_mode = FlushMode(flush_mode)
        self._log_for_partition = log_for_partition
        self._clock_ms = clock_ms
        self._partitions = [
            _StatePartition(i, self.config) for i in range(self.config.state_topic_num_partitions)
        ]
        self._wakeup = asyncio.Event()
        self._flusher: asyncio.Task[None] | None = None
        self._closed = False
        self._last_prune_ms: int | None = None
        self._key_info: dict[SharePartitionKey, _KeyInfo] = {}
        # The state partitions with queued requests, and whether prunes are due: a cycle looks
        # at these, not at every state partition (50 by default), a few times per write.
        self._queued: list[_StatePartition] = []
        self._prunes_due = False
        # fsyncs of different partitions run side by side so the filesystem can share journal
        # commits between them.
        self._sync_pool = SyncWorkers(_SYNC_THREADS, "state-fsync")
        # For metrics: WriteShareGroupState calls, their latency (queued to durable, seconds) and
        # what went into the state log.
        self.writes = 0
        self.write_latency = Histogram()
        self.bytes_appended = 0
        self.records_appended = 0

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

    async def close(self) -> None:
        """Finish queued work, stop the flusher and close the logs."""
        self._closed = True
        self._wakeup.set()
        if self._flusher is not None:
            await self._flusher
        for part in self._partitions:
            if part.sync is not None:
                part.sync.close()
            if part.log is not None:
                part.log.close()
                part.log = None
        self._sync_pool.shutdown()

    def _ensure_flusher(self) -> None:
        if self._flusher is None:
            self._flusher = asyncio.get_running_loop().create_task(self._flush_loop())

    # -- Persister protocol --------------------------------------------------------------------

    async def initialize_state(self, key: SharePartitionKey, *, state_epoch: int, start_offset: int) -> None:
        def handle(shard: ShareCoordinatorShard, now: int) -> CoordinatorResult[ErrorCode]:
            return shard.handle_initialize(
                key, state_epoch=state_epoch, start_offset=start_offset, now_ms=now
            )

        await self._submit(key, handle)

    async def write_state(self, params: WriteStateParams) -> None:
        def handle(shard: ShareCoordinatorShard, now: int) -> CoordinatorResult[ErrorCode]:
            return shard.handle_write(params, now_ms=now)

        # The hot path: _submit inlined (one coroutine frame less per write).
        started = time.perf_counter()
        info = self._info(params.key)
        response = await self._enqueue(self._partition(info), info, handle)
        self.writes += 1
        self.write_latency.observe(time.perf_counter() - started)
        if response is not ErrorCode.none:
            unwrap(response)

    async def delete_state(self, key: SharePartitionKey) -> None:
        await self._submit(key, lambda shard, _now: shard.handle_delete(key))

    async def read_state(self, key: SharePartitionKey, *, leader_epoch: int) -> ShareState | None:
        info = self._info(key)
        part = self._partition(info)
        if not info.in_flight:
            result = part.shard.handle_read(key, leader_epoch=leader_epoch)
            if not result.records:
                return unwrap(result.response).state  # type: ignore[no-any-return]
        response = await self._submit(
            key, lambda shard, _now: shard.handle_read(key, leader_epoch=leader_epoch)
        )
        return response.state  # type: ignore[no-any-return]

    async def read_state_summary(self, key: SharePartitionKey) -> ShareStateSummary | None:
        info = self._info(key)
        part = self._partition(info)
        if not info.in_flight:
            return unwrap(part.shard.handle_read_summary(key).response).summary  # type: ignore[no-any-return]
        response = await self._submit(key, lambda shard, _now: shard.handle_read_summary(key))
        return response.summary  # type: ignore[no-any-return]

    async def end_transaction(self, producer_id: int, producer_epoch: int, *, commit: bool) -> None:
        """Write the transaction's marker record to every state partition holding entries it
        staged (durable before this returns); partitions without any write nothing."""
        waits = []
        for part in self._partitions:
            if part.failed:
                raise PersisterError(ErrorCode.kafka_storage_error, f"{STATE_TOPIC}-{part.index} failed")
            if not part.shard.loaded:
                raise PersisterError(
                    ErrorCode.coordinator_load_in_progress, f"{STATE_TOPIC}-{part.index} loading"
                )
            if producer_id in part.shard.pending_producers():
                waits.append(
                    self._enqueue(
                        part,
                        None,
                        lambda shard, _now: shard.handle_marker(producer_id, producer_epoch, commit=commit),
                    )
                )
        for outcome in await asyncio.gather(*waits, return_exceptions=True):
            if isinstance(outcome, BaseException):
                raise outcome

    def pending_producers(self) -> dict[int, int]:
        """Producer ids holding staged acknowledgements, with their record counts."""
        out: dict[int, int] = {}
        for part in self._partitions:
            if part.shard.loaded:
                for pid, n in part.shard.pending_producers().items():
                    out[pid] = out.get(pid, 0) + n
        return out

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
                self._prunes_due = True
        await self._enqueue_barrier()

    def state_partition(self, key: SharePartitionKey) -> int:
        """The state-topic partition holding ``key``."""
        return self._info(key).partition

    def _info(self, key: SharePartitionKey) -> _KeyInfo:
        info = self._key_info.get(key)
        if info is None:
            info = _KeyInfo(key, partition_for(key, self.config.state_topic_num_partitions))
            self._key_info[key] = info
        return info

    # -- the flusher ---------------------------------------------------------------------------

    def _partition(self, info: _KeyInfo) -> _StatePartition:
        part = self._partitions[info.partition]
        if part.failed:
            raise PersisterError(ErrorCode.kafka_storage_error, f"{STATE_TOPIC}-{part.index} failed")
        if not part.shard.loaded:
            raise PersisterError(
                ErrorCode.coordinator_load_in_progress, f"{STATE_TOPIC}-{part.index} loading"
            )
        return part

    async def _submit(self, key: SharePartitionKey, handle: Handler) -> Any:
        info = self._info(key)
        return unwrap(await self._enqueue(self._partition(info), info, handle))

    def _enqueue(self, part: _StatePartition, info: _KeyInfo | None, handle: Handler) -> asyncio.Future[Any]:
        if self._closed:
            raise PersisterError(ErrorCode.coordinator_not_available, "the persister is closed")
        self._ensure_flusher()
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if not part.queue:
            self._queued.append(part)
        part.queue.append(_Request(info, handle, future))
        if info is not None:
            info.in_flight += 1
        self._wakeup.set()
        return future

    async def _enqueue_barrier(self) -> None:
        """Wait until the flusher has passed a cycle boundary (and so run any due prunes)."""
        part = self._partitions[0]
        await self._enqueue(part, None, lambda _shard, _now: CoordinatorResult(records=(), response=None))

    async def _flush_loop(self) -> None:
        """Stage a cycle, then finish the previous one; in group mode the next cycle's handlers
        and appends run while the previous cycle's fsync is under way in worker threads."""
        previous: tuple[_Cycle, asyncio.Future[None]] | None = None
        while True:
            cycle = self._stage_cycle() if self._queued else None
            if previous is not None:
                await previous[1]
                self._finish_cycle(previous[0])
                previous = None
            if cycle is not None:
                sync = self._start_sync(cycle)
                if self.flush_mode is FlushMode.GROUP:
                    previous = (cycle, sync)
                    await asyncio.sleep(0)  # let the writers just answered queue their next requests
                    continue
                await sync
                self._finish_cycle(cycle)
                continue
            if self._prunes_due:
                await self._run_prunes()  # nothing in flight: every shard equals its log
                continue
            if self._closed:
                return
            await self._wakeup.wait()
            self._wakeup.clear()

    async def _run_prunes(self) -> None:
        """Between cycles (shards equal their logs): move log starts, then checkpoint the logs."""
        pruned: list[StateLog] = []
        self._prunes_due = False
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

    def _stage_cycle(self) -> _Cycle:
        """Run queued handlers, replay their records and append them (no waiting)."""
        now = self._clock_ms()
        one_only = self.flush_mode is FlushMode.FSYNC
        cycle = _Cycle()
        queued = self._queued
        if len(queued) > 1:
            queued.sort(key=_index)  # state partitions in index order, as they were always staged
        for part in queued:
            if one_only:
                batch, part.queue = part.queue[:1], part.queue[1:]
            else:
                batch, part.queue = part.queue, []
            done: list[tuple[_Request, Any]] = []
            cycle.staged.append((part, done))
            if part.failed or part.log is None:
                error = (
                    ErrorCode.kafka_storage_error if part.failed else ErrorCode.coordinator_load_in_progress
                )
                done += [(req, PersisterError(error, error.name)) for req in batch]
                continue
            records: list[KeyValue] = []
            base = part.log.log_end_offset
            for req in batch:
                try:
                    result = req.handle(part.shard, now)
                except Exception as exc:  # a bug in a handler must not kill the flusher
                    done.append((req, exc))
                    continue
                if error_of(result.response) == ErrorCode.none:
                    info = req.info
                    for record in result.records:
                        part.shard.replay(record.key, record.value, base + len(records))
                        value = record.value
                        if info is None or (record.key is not info.key and record.key != info.key):
                            records.append(encode_record(record))
                        elif value is None:
                            records.append((info.snapshot_key, None))
                        elif isinstance(value, ShareSnapshot):
                            records.append((info.snapshot_key, encode_value(value)))
                        elif isinstance(value, ShareTxnStage):
                            records.append(encode_record(record))
                        else:
                            records.append((info.update_key, encode_value(value)))
                done.append((req, result.response))
            if records:
                try:
                    limit = _append_limit(part.log)
                    for data in encode_batches(records, timestamp=now, max_batch_bytes=limit):
                        part.log.append(data, now_ms=now)
                        self.bytes_appended += len(data)
                    self.records_appended += len(records)
                    if part.log.log_end_offset != base + len(records):
                        raise LogError("the state log assigned unexpected offsets")
                except (LogError, OSError) as exc:
                    self._fail(part, done, exc)
                    continue
                cycle.touched.append(part)
            if one_only:
                break
        self._queued = [part for part in queued if part.queue]  # fsync mode leaves some queued
        return cycle

    def _start_sync(self, cycle: _Cycle) -> asyncio.Future[None]:
        """fsync the cycle's partitions in worker threads; failures mark their partitions."""
        loop = asyncio.get_running_loop()
        if not cycle.touched or self.flush_mode is FlushMode.NONE:
            done: asyncio.Future[None] = loop.create_future()
            done.set_result(None)
            return done
        # A few threads, each fsyncing a share of the partitions: parallel enough for the disk,
        # without paying a thread hand-off per partition.
        chunks = [cycle.touched[i::_SYNC_THREADS] for i in range(min(_SYNC_THREADS, len(cycle.touched)))]
        syncs = [self._sync_pool.submit(i, _sync_parts, chunk) for i, chunk in enumerate(chunks)]
        if len(syncs) == 1:  # the usual cycle: one partition touched, no gathering task needed
            return syncs[0]

        async def wait() -> None:
            await asyncio.gather(*syncs)

        return asyncio.ensure_future(wait())

    def _finish_cycle(self, cycle: _Cycle) -> None:
        """Answer the cycle's requests (its records are durable, or their partition failed)."""
        for part, done in cycle.staged:
            if part.failed:
                self._fail(part, done, OSError("the state log failed"))
            for req, outcome in done:
                if req.info is not None:
                    req.info.in_flight -= 1
                if req.future.done():
                    continue
                if isinstance(outcome, BaseException):
                    req.future.set_exception(outcome)
                else:
                    req.future.set_result(outcome)

    @staticmethod
    def _fail(part: _StatePartition, done: list[tuple[_Request, Any]], exc: BaseException) -> None:
        part.failed = True
        error = PersisterError(ErrorCode.kafka_storage_error, f"{STATE_TOPIC}-{part.index}: {exc}")
        done[:] = [(req, outcome if isinstance(outcome, PersisterError) else error) for req, outcome in done]


def _append_limit(log: StateLog) -> int:
    """The largest batch one append may carry: within the log's segment and message limits."""
    config = getattr(log, "config", None)
    if config is None:
        return MAX_BATCH_BYTES
    return min(MAX_BATCH_BYTES, int(config.segment_bytes), int(config.max_message_bytes))


def _index(part: _StatePartition) -> int:
    return part.index


def _cold(shard: ShareCoordinatorShard, now: int) -> CoordinatorResult[None]:
    return CoordinatorResult(records=shard.cold_snapshots(now), response=None)


def _sync_parts(parts: list[_StatePartition]) -> None:
    for part in parts:
        try:
            if part.sync is None:
                raise OSError("the state log is closed")
            part.sync()
        except Exception:
            part.failed = True  # read by the loop thread only after this job completes


def _flush_all(logs: list[StateLog]) -> None:
    for log in logs:
        log.flush()
