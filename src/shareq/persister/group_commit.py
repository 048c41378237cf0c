"""GroupCommit: the write cycle both share-state persisters run, whatever log holds their records.

Each persister keeps its state in some partitions (``__share_group_state``'s, or the user
partitions themselves), each a log plus a ``ShareCoordinatorShard``. A request is a shard handler;
it is queued on its partition and answered only once the records it wrote are durable.

**Group commit.** One flusher task drains the queues in cycles. A cycle runs the handlers of every
queued request in arrival order, replaying each result into its shard at the offset the append
will give it (so a second write to the same share-partition in the same cycle sees the first, as
in Kafka's coordinator runtime), appends the cycle's records per partition, fsyncs the touched
partitions' active segments in worker threads (``SyncWorkers``), and then completes the cycle's
requests. Requests arriving during the fsync share the next one; in group mode that next cycle is
already handled and appended while the previous fsync runs (its answers still wait for its own
fsync). No request is answered before its records are durable. Reads of a share-partition with
queued or in-flight requests wait behind them; other reads answer at once.

**Flush modes** (``FlushMode``) and what a successful write survives:

* ``fsync`` -- one request per cycle, one fsync each: process crash and power loss; slowest.
* ``group`` (default) -- concurrent requests share an fsync: process crash and power loss.
* ``none`` -- appended (OS write) but never fsynced by the persister: a process crash, not a
  power loss or kernel crash (the page cache may be lost).

If an append or fsync fails, the cycle's requests fail with KAFKA_STORAGE_ERROR and that partition
refuses further requests (its shard may be ahead of its log) until the persister is reopened.

What a persister adds (the hooks): how a share-partition's partition is found (``_locate``), why a
partition cannot take requests (``_refusal``), how a handler's records become the partition's log
records (``_stage_records``) and are appended (``_append``), and what follows durability
(``_durable``) or needs every shard to equal its log (``_idle_work``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Generic, TypeVar

from kio.schema.errors import ErrorCode

from shareq.coordinators.share.records import StateRecord
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
    refused,
)

from .segment_sync import ActiveSegmentSync
from .sync_workers import SyncWorkers

_SYNC_THREADS = 8


class FlushMode(StrEnum):
    FSYNC = "fsync"
    GROUP = "group"
    NONE = "none"


Handler = Callable[[ShareCoordinatorShard, int], CoordinatorResult[Any]]


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


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


class CommitPartition:
    """A partition holding share state: its shard, log, queue and durability handle.

    ``label`` names it in errors; ``order`` is the order in which a cycle stages partitions.
    """

    __slots__ = ("failed", "label", "log", "order", "queue", "shard", "sync")

    def __init__(
        self, label: str, order: int, shard: ShareCoordinatorShard, log: Any, sync: ActiveSegmentSync | None
    ) -> None:
        self.label = label
        self.order = order
        self.shard = shard
        self.log = log
        self.sync = sync
        self.queue: list[Request[Any]] = []
        self.failed = False

    def close_sync(self) -> None:
        if self.sync is not None:
            self.sync.close()


P = TypeVar("P", bound=CommitPartition)


class KeyInfo(Generic[P]):
    """Per share-partition: its partition and how many of its requests are queued or in flight.

    Found once per request and carried by it, so that answering it needs no lookup (the built-in
    persister keys them by ``SharePartitionKey``, whose uuid is costly to hash; the in-log one by
    group within the partition). A read of the share-partition waits behind its queued writes while
    ``in_flight`` is not zero.
    """

    __slots__ = ("in_flight", "part")

    def __init__(self, part: P) -> None:
        self.part = part
        self.in_flight = 0


K = TypeVar("K", bound=KeyInfo[Any])


@dataclass(slots=True)
class Request(Generic[K]):
    info: K | None
    handle: Handler
    future: asyncio.Future[Any]


Staged = list[tuple[Request[K], Any]]
"""A partition's requests of one cycle, each with its outcome (a response or an exception)."""


@dataclass(slots=True)
class Cycle(Generic[P, K]):
    """Requests handled together: per partition the outcomes to give, and the logs appended to."""

    staged: list[tuple[P, Staged[K]]] = field(default_factory=list)
    touched: list[P] = field(default_factory=list)


class GroupCommit(Generic[P, K]):
    """The queues, the flusher and the ``Persister`` protocol methods on top of them."""

    # Named in errors: "<log> failed", "<log> assigned unexpected offsets".
    log_noun = "the log"

    def __init__(
        self,
        *,
        config: ShareCoordinatorConfig | None,
        flush_mode: FlushMode,
        clock_ms: Callable[[], int],
        sync_name: str,
    ) -> None:
        self.config = config or ShareCoordinatorConfig()
        self.flush_mode = FlushMode(flush_mode)
        self._clock_ms = clock_ms
        self._wakeup = asyncio.Event()
        self._flusher: asyncio.Task[None] | None = None
        self._closed = False
        # The partitions with queued requests, and whether idle work is due: a cycle looks at
        # these, not at every partition, a few times per write.
        self._queued: list[P] = []
        self._idle_work_due = False
        # fsyncs of different partitions run side by side so the filesystem can share journal
        # commits between them.
        self._sync_pool = SyncWorkers(_SYNC_THREADS, sync_name)
        # For metrics: WriteShareGroupState calls, their latency (queued to durable, seconds) and
        # what went into the logs.
        self.writes = 0
        self.write_latency = Histogram()
        self.bytes_appended = 0
        self.records_appended = 0

    # -- hooks -----------------------------------------------------------------------------------

    def _locate(self, key: SharePartitionKey) -> K:
        """The key's info, its partition able to take requests (else ``PersisterError``)."""
        raise NotImplementedError

    def _partition_list(self) -> Iterable[P]:
        """Every partition the persister has open."""
        raise NotImplementedError

    def _live(self, part: P) -> bool:
        """Whether the partition is still the one it was opened on (not deleted or recreated):
        only then do its staged transaction entries count and may it take requests."""
        return True

    def _refusal(self, part: P) -> PersisterError | None:
        """Why ``part`` cannot take this cycle's requests, or None."""
        raise NotImplementedError

    def _stage_records(
        self,
        part: P,
        info: K | None,
        records: tuple[StateRecord, ...],
        out: list[Any],
        base: int,
        now: int,
    ) -> None:
        """Replay one handler's records into the shard and add their log records to ``out``; the
        first record of ``out`` lands at offset ``base``, and each takes one offset."""
        raise NotImplementedError

    def _append(self, part: P, out: list[Any], now: int) -> None:
        """Append ``out`` to the partition's log (raising ``LogError`` or ``OSError``)."""
        raise NotImplementedError

    def _durable(self, touched: list[P]) -> None:
        """The cycle's appends to ``touched`` are durable (failed partitions included)."""

    async def _idle_work(self) -> None:
        """Work that needs every shard equal to its log: run when no cycle is in flight."""

    def _close_partitions(self) -> None:
        """Release the partitions once the flusher has stopped."""

    # -- lifecycle -----------------------------------------------------------------------------

    async def close(self) -> None:
        """Finish queued work, stop the flusher and release the partitions."""
        self._closed = True
        self._wakeup.set()
        if self._flusher is not None:
            await self._flusher
        self._close_partitions()
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

    def write_state(self, params: WriteStateParams) -> Coroutine[Any, Any, None]:
        def handle(shard: ShareCoordinatorShard, now: int) -> CoordinatorResult[ErrorCode]:
            return shard.handle_write(params, now_ms=now)

        started = time.perf_counter()
        try:
            info = self._locate(params.key)
            queued = self._enqueue(info.part, info, handle)  # queued now: in the order of the calls
        except PersisterError as error:
            return refused(error)  # refused: raised when awaited, like a failed write
        return self._written(queued, started)

    async def _written(self, queued: asyncio.Future[Any], started: float) -> None:
        response = await queued
        self.writes += 1
        self.write_latency.observe(time.perf_counter() - started)
        if response is not ErrorCode.none:
            unwrap(response)

    async def delete_state(self, key: SharePartitionKey) -> None:
        await self._submit(key, lambda shard, _now: shard.handle_delete(key))

    async def read_state(self, key: SharePartitionKey, *, leader_epoch: int) -> ShareState | None:
        info = self._locate(key)
        if not info.in_flight:
            result = info.part.shard.handle_read(key, leader_epoch=leader_epoch)
            if not result.records:
                return unwrap(result.response).state  # type: ignore[no-any-return]
        response = unwrap(
            await self._enqueue(
                info.part, info, lambda shard, _now: shard.handle_read(key, leader_epoch=leader_epoch)
            )
        )
        return response.state  # type: ignore[no-any-return]

    async def read_state_summary(self, key: SharePartitionKey) -> ShareStateSummary | None:
        info = self._locate(key)
        if not info.in_flight:
            return unwrap(info.part.shard.handle_read_summary(key).response).summary  # type: ignore[no-any-return]
        response = unwrap(
            await self._enqueue(info.part, info, lambda shard, _now: shard.handle_read_summary(key))
        )
        return response.summary  # type: ignore[no-any-return]

    async def end_transaction(self, producer_id: int, producer_epoch: int, *, commit: bool) -> None:
        """Write the transaction's marker to every partition holding entries it staged (durable
        before this returns); partitions without any write nothing."""
        waits = []
        for part in list(self._partition_list()):
            if not self._live(part):
                continue  # the partition was deleted, and what was staged on it with it
            self._usable(part)
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
        for part in self._partition_list():
            if part.shard.loaded:
                for pid, n in part.shard.pending_producers().items():
                    out[pid] = out.get(pid, 0) + n
        return out

    # -- requests ------------------------------------------------------------------------------

    @staticmethod
    def _usable(part: CommitPartition) -> None:
        """Raise unless the partition takes requests: failed, or not loaded yet."""
        if part.failed:
            raise PersisterError(ErrorCode.kafka_storage_error, f"{part.label} failed")
        if not part.shard.loaded:
            raise PersisterError(ErrorCode.coordinator_load_in_progress, f"{part.label} loading")

    async def _submit(self, key: SharePartitionKey, handle: Handler) -> Any:
        info = self._locate(key)
        return unwrap(await self._enqueue(info.part, info, handle))

    def _enqueue(self, part: P, info: K | None, handle: Handler) -> asyncio.Future[Any]:
        if self._closed:
            raise PersisterError(ErrorCode.coordinator_not_available, "the persister is closed")
        self._ensure_flusher()
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if not part.queue:
            self._queued.append(part)
        part.queue.append(Request(info, handle, future))
        if info is not None:
            info.in_flight += 1
        self._wakeup.set()
        return future

    # -- the flusher ---------------------------------------------------------------------------

    async def _flush_loop(self) -> None:
        """Stage a cycle, then finish the previous one; in group mode the next cycle's handlers
        and appends run while the previous cycle's fsync is under way in worker threads."""
        previous: tuple[Cycle[P, K], asyncio.Future[None]] | None = None
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
            if self._idle_work_due:
                await self._idle_work()  # nothing in flight: every shard equals its log
                continue
            if self._closed:
                return
            await self._wakeup.wait()
            self._wakeup.clear()

    def _stage_cycle(self) -> Cycle[P, K]:
        """Run queued handlers, replay their records and append them (no waiting)."""
        now = self._clock_ms()
        one_only = self.flush_mode is FlushMode.FSYNC
        cycle: Cycle[P, K] = Cycle()
        queued = self._queued
        if len(queued) > 1:
            queued.sort(key=_order)  # partitions in a fixed order, as they were always staged
        for part in queued:
            if one_only:
                batch, part.queue = part.queue[:1], part.queue[1:]
            else:
                batch, part.queue = part.queue, []
            done: Staged[K] = []
            cycle.staged.append((part, done))
            refusal = self._refusal(part)
            if refusal is not None:
                done += [(req, refusal) for req in batch]
                continue
            if not self._stage_partition(part, batch, done, cycle, now):
                continue  # its append failed: in fsync mode the next partition may go instead
            if one_only:
                break
        self._queued = [part for part in queued if part.queue]  # fsync mode leaves some queued
        return cycle

    def _stage_partition(
        self, part: P, batch: list[Request[K]], done: Staged[K], cycle: Cycle[P, K], now: int
    ) -> bool:
        """Handle, replay and append one partition's batch; False if its append failed."""
        log = part.log
        base: int = log.log_end_offset
        out: list[Any] = []
        stage = self._stage_records
        shard = part.shard
        for req in batch:
            try:
                result = req.handle(shard, now)
            except Exception as exc:  # a bug in a handler must not kill the flusher
                done.append((req, exc))
                continue
            if error_of(result.response) == ErrorCode.none:
                stage(part, req.info, result.records, out, base, now)
            done.append((req, result.response))
        if not out:
            return True
        try:
            self._append(part, out, now)
            if log.log_end_offset != base + len(out):
                raise LogError(f"{self.log_noun} assigned unexpected offsets")
        except (LogError, OSError) as exc:
            self._fail(part, done, exc)
            return False
        self.records_appended += len(out)
        cycle.touched.append(part)
        return True

    def _start_sync(self, cycle: Cycle[P, K]) -> asyncio.Future[None]:
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

    def _finish_cycle(self, cycle: Cycle[P, K]) -> None:
        """Answer the cycle's requests (its records are durable, or their partition failed)."""
        if cycle.touched:
            self._durable(cycle.touched)
        for part, done in cycle.staged:
            if part.failed:
                self._fail(part, done, OSError(f"{self.log_noun} failed"))
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
    def _fail(part: CommitPartition, done: Staged[Any], exc: BaseException) -> None:
        part.failed = True
        error = PersisterError(ErrorCode.kafka_storage_error, f"{part.label}: {exc}")
        done[:] = [(req, outcome if isinstance(outcome, PersisterError) else error) for req, outcome in done]


def append_limit(log: Any, ceiling: int) -> int:
    """The largest run one append may carry: within ``ceiling`` and the log's segment and message
    limits."""
    config = getattr(log, "config", None)
    if config is None:
        return ceiling
    return min(ceiling, int(config.segment_bytes), int(config.max_message_bytes))


def _order(part: CommitPartition) -> int:
    return part.order


def _sync_parts(parts: list[CommitPartition]) -> None:
    for part in parts:
        try:
            if part.sync is None:
                raise OSError("the log is closed")
            part.sync()
        except Exception:
            part.failed = True  # read by the loop thread only after this job completes
