"""``SharePartitionManager``: the share-partitions of this broker and the I/O around them.

Engines (``SharePartition``) are created lazily on first use, initialized from the persister with
the group's reset policy, fed log-batch bounds read at ``next_fetch_offset()``, and every write
they return is persisted before ``complete`` commits it (persist before commit). Parked
ShareFetches wait on futures registered per share-partition; releases, expiries and produce wake
them. Lock deadlines feed the services' single timer.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
import uuid
from collections.abc import Coroutine, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from shareq.coordinators.group import ShareGroupConfig
from shareq.coordinators.group.retry_config import RetryConfig
from shareq.log.batch import LOG_OVERHEAD
from shareq.log.errors import LogError, OffsetOutOfRangeError
from shareq.log.key_hashes import KeyHashIndex
from shareq.log.partition_log import PartitionLog
from shareq.log.share_control import visible_batches
from shareq.log.transactions import stable_batches, subtract_ranges
from shareq.share import (
    AcknowledgementBatch,
    AcknowledgeType,
    AcquiredRecords,
    AcquireMode,
    PendingWrite,
    ResetPolicy,
    ShareConfig,
    SharePartition,
    ShareRequestError,
)
from shareq.share.backoff import RedeliveryBackoff, Trigger
from shareq.share.key_order import KeyView
from shareq.share.persister import PersisterError, SharePartitionKey, refused

from ..errors import persister_error_code

if TYPE_CHECKING:
    from .services import ShareServices

log = logging.getLogger("shareq.share")

_LENGTH = struct.Struct(">qi")  # baseOffset, batchLength


def share_config(group: ShareGroupConfig) -> ShareConfig:
    """The engine's view of a group's configuration: a DLQ topic name turns dead-lettering on
    (records given up on go ARCHIVING, for the ``DeadLetterWriter``)."""
    return ShareConfig(
        record_lock_duration_ms=group.record_lock_duration_ms,
        delivery_count_limit=group.delivery_count_limit,
        max_record_locks=group.partition_max_record_locks,
        dlq_enabled=bool(group.dlq_topic_name),
        renew_enabled=group.renew_acknowledge_enable,
        backoff=redelivery_backoff(group.retry),
        delay_ceiling_ms=group.retry.ceiling_ms,
        window_count=group.retry.window_count,
        durable_counts=group.retry.durable_counts,
    )


def redelivery_backoff(retry: RetryConfig) -> RedeliveryBackoff | None:
    """The engine's backoff for a group's shareq retry configs (None: Kafka's behaviour)."""
    if retry.backoff_ms <= 0:
        return None
    return RedeliveryBackoff(
        base_ms=retry.backoff_ms,
        multiplier=retry.multiplier,
        max_ms=retry.max_ms,
        jitter=retry.jitter,
        on=frozenset(Trigger(t) for t in retry.on),
        ceiling_ms=retry.ceiling_ms,
    )


class Acquired:
    """What one share-partition contributes to a ShareFetch response, and what the log read cost."""

    __slots__ = ("bytes_read", "count", "counted", "ranges", "records")

    def __init__(
        self,
        ranges: tuple[AcquiredRecords, ...],
        records: bytes | memoryview,
        count: int,
        bytes_read: int,
        counted: asyncio.Future[ErrorCode] | None = None,
    ) -> None:
        self.ranges = ranges
        self.records = records
        self.count = count
        self.bytes_read = bytes_read
        self.counted = counted
        """With crash-durable counts: the write of the delivery counts, awaited before the
        records are handed out (not handed out if it fails)."""


NOTHING = Acquired((), b"", 0, 0)


class SharePartitionManager:
    """Share-partition cache keyed by (group, topic id, partition), plus parking and lock expiry."""

    def __init__(self, services: ShareServices) -> None:
        self._services = services
        self._partitions: dict[SharePartitionKey, SharePartition] = {}
        self._loading: dict[SharePartitionKey, asyncio.Future[SharePartition]] = {}
        self._waiters: dict[SharePartitionKey, set[asyncio.Future[None]]] = {}
        self._key_hashes: dict[tuple[uuid.UUID, int], KeyHashIndex] = {}
        """Key hashes of the partitions a key-ordered group reads (made on its first read)."""

    # -- cache ---------------------------------------------------------------------------------

    def __iter__(self) -> Iterator[SharePartition]:
        return iter(list(self._partitions.values()))

    def cached(self, key: SharePartitionKey) -> SharePartition | None:
        return self._partitions.get(key)

    def keys_of_group(self, group_id: str) -> list[SharePartitionKey]:
        return [k for k in self._partitions if k.group_id == group_id]

    def forget(self, key: SharePartitionKey) -> None:
        """Drop a share-partition (its topic or group was deleted)."""
        self._partitions.pop(key, None)
        where = (key.topic_id, key.partition)
        if not any((k.topic_id, k.partition) == where for k in self._partitions):
            self._key_hashes.pop(where, None)
        self.wake(key)

    async def get(self, key: SharePartitionKey) -> SharePartition:
        """The initialized engine of ``key``; raises ``PersisterError`` if its state cannot load."""
        sp = self._partitions.get(key)
        if sp is not None:
            return sp
        loading = self._loading.get(key)
        if loading is not None:
            return await asyncio.shield(loading)
        future: asyncio.Future[SharePartition] = asyncio.get_running_loop().create_future()
        self._loading[key] = future
        started = time.perf_counter()
        try:
            sp = await self._load(key)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: other waiters re-raise it
            raise
        finally:
            self._loading.pop(key, None)
        self._partitions[key] = sp
        self._services.broker.counters.partition_load.observe(time.perf_counter() - started)
        future.set_result(sp)
        partition = self._services.log_partition(key.topic_id, key.partition)
        if partition is not None:  # the log may have moved on while the group was away
            self.update_log_start(sp, partition.log.log_start_offset)
        archiving = sp.archiving_count()
        if archiving:  # persisted ARCHIVING (a crash before ARCHIVED): write them again
            log.info("%s loaded with %d records ARCHIVING: dead-lettering them again", key, archiving)
            self._services.dead_letters.notify(key)
        return sp

    async def _load(self, key: SharePartitionKey) -> SharePartition:
        services = self._services
        group = services.coordinator.group_config(key.group_id)
        sp = SharePartition(key, share_config(group))
        state = await services.persister.read_state(key, leader_epoch=0)
        partition = services.log_partition(key.topic_id, key.partition)
        start = end = 0
        by_time: int | None = None
        reset = ResetPolicy(group.auto_offset_reset.strategy)
        if partition is not None:
            start, end = partition.log.log_start_offset, partition.log.log_end_offset
            if reset is ResetPolicy.BY_DURATION and group.auto_offset_reset.duration_ms is not None:
                found = partition.log.offset_for_timestamp(
                    services.now_ms() - group.auto_offset_reset.duration_ms
                )
                by_time = None if found is None else found.offset
        pending = sp.initialize(
            state, reset=reset, log_start_offset=start, log_end_offset=end, offset_for_timestamp=by_time
        )
        if pending is not None:  # the reset policy chose the SPSO: make it durable first
            await services.persister.write_state(pending.params)
            sp.complete(pending.handle, True, services.now_ms())
        return sp

    # -- acquire -------------------------------------------------------------------------------

    def acquire(
        self,
        sp: SharePartition,
        member: str,
        *,
        max_records: int,
        batch_size: int,
        mode: AcquireMode,
        max_bytes: int,
        now: int,
    ) -> Acquired:
        """Lease records at ``next_fetch_offset()``: returns the ranges and the whole log batches
        overlapping them, sliced from one log read by batch headers (never decoded)."""
        partition = self._services.log_partition(sp.key.topic_id, sp.key.partition)
        if partition is None or max_records <= 0:
            return NOTHING
        plog = partition.log
        sp.mature(now)
        group = self._services.coordinator.group_config(sp.key.group_id)
        by_key = group.ordering == "key"
        reach = max_records
        if by_key:
            # a key-ordered group reads ahead past records whose key is held: as far again as the
            # last acquisition found waiting (twice, so it can grow), within the lookahead
            waiting = sp.key_stats.waiting if sp.key_stats is not None else 0
            reach = max(max_records, min(group.key_lookahead, max_records + 2 * waiting + 64))
        offset = sp.next_fetch_offset()
        if offset < plog.log_start_offset:  # retention or DeleteRecords passed the SPSO
            self.update_log_start(sp, plog.log_start_offset)
            offset = max(sp.next_fetch_offset(), plog.log_start_offset)
        if offset >= plog.log_end_offset:
            return NOTHING
        read = 0
        while True:  # past reads that held share state alone (see share_control.py)
            end = sp.read_end(reach)
            if end is None:  # the window is full: reading would only be thrown away
                return NOTHING
            try:
                data = plog.read(offset, max(max_bytes, 1), end_offset=end)
            except OffsetOutOfRangeError:
                self.update_log_start(sp, plog.log_start_offset)
                return NOTHING
            except LogError:
                log.exception("share fetch read failed on %s", sp.key)
                return NOTHING
            if not data.batches:
                return NOTHING
            read += len(data.records)
            # The in-log persister's control batches are never acquired: they are offsets
            # without a record to deliver, passed without an acknowledgement.
            seen = visible_batches(data.records, data.batches, data.controls, cut=False)
            if seen.batches:
                break
            sp.pass_absent(*seen.hidden[-1])
            offset = sp.next_fetch_offset()
            if offset <= data.batches[-1][1] or offset >= plog.log_end_offset:
                return Acquired((), b"", 0, read)
        batches = seen.batches
        aborted: tuple[tuple[int, int], ...] = ()
        txns = plog.producer_state.txns
        if (txns.ongoing or txns.aborted) and self._read_committed(sp):
            # share.isolation.level=read_committed: acquire below the LSO only; records of
            # aborted transactions are acquired and archived at once (never delivered); markers
            # are handed out as offsets without a record, which clients acknowledge as gaps.
            stable = plog.last_stable_offset
            kept, aborted = stable_batches(data.records, stable, plog.aborted_transactions(offset, stable))
            if seen.hidden:
                visible = set(seen.batches)
                kept = tuple(b for b in kept if b in visible)
            batches = kept
            if not batches:
                return NOTHING
        keys = self._key_view(sp, plog, batches[-1][1]) if by_key else None
        result = sp.acquire(
            member, batches, max_records=max_records, batch_size=batch_size, mode=mode, now=now, keys=keys
        )
        if seen.trailing:  # moves the end offset only if the acquisition reached the run
            sp.pass_absent(*seen.hidden[-1])
        if result.write is not None:
            self.spawn_write(sp, result.write)
        ranges, count = result.records, result.acquired_count
        if aborted and ranges:
            ranges, count = self._archive_aborted(sp, member, ranges, aborted, count, now)
        if result.lock_deadline is not None:
            self._services.schedule(result.lock_deadline)
        # queued now, beside the request's acknowledgements: they share the persister's group commit
        counted = asyncio.ensure_future(self.write(sp, result.counts)) if result.counts is not None else None
        if not ranges:
            return Acquired((), b"", 0, read, counted)
        return Acquired(ranges, slice_batches(data.records, data.batches, ranges), count, read, counted)

    def _key_view(self, sp: SharePartition, plog: PartitionLog, last_read: int) -> KeyView:
        """The key hash of every offset the acquisition needs (``key_view_start``: the SPSO only
        when the engine derives its held keys) through the end offset or ``last_read``."""
        where = (sp.key.topic_id, sp.key.partition)
        index = self._key_hashes.get(where)
        if index is None or index.log is not plog:
            index = self._key_hashes[where] = KeyHashIndex(plog)
        first = sp.key_view_start()
        return KeyView(first, index.hashes(first, max(sp.end_offset - 1, last_read)))

    def _archive_aborted(
        self,
        sp: SharePartition,
        member: str,
        ranges: tuple[AcquiredRecords, ...],
        aborted: tuple[tuple[int, int], ...],
        count: int,
        now: int,
    ) -> tuple[tuple[AcquiredRecords, ...], int]:
        """Archive the acquired records of aborted transactions (as a GAP acknowledgement would)
        and return the ranges left to deliver."""
        kept, removed = subtract_ranges(
            [(r.first_offset, r.last_offset, r.delivery_count) for r in ranges], aborted
        )
        if not removed:
            return ranges, count
        try:
            ack = sp.acknowledge(
                member,
                [
                    AcknowledgementBatch(first_offset=f, last_offset=la, types=(AcknowledgeType.GAP,))
                    for f, la in removed
                ],
                now=now,
            )
        except ShareRequestError:
            log.exception("archiving aborted records failed on %s", sp.key)
            return ranges, count
        if ack.write is not None:
            self.spawn_write(sp, ack.write)
        count -= sum(la - f + 1 for f, la in removed)
        return tuple(
            AcquiredRecords(first_offset=f, last_offset=la, delivery_count=c) for f, la, c in kept
        ), count

    def _read_committed(self, sp: SharePartition) -> bool:
        config = self._services.coordinator.group_config(sp.key.group_id)
        return config.isolation_level == "read_committed"

    def update_log_start(self, sp: SharePartition, log_start: int) -> None:
        """The log of ``sp`` starts at ``log_start``: move its SPSO past records that are gone."""
        pending = sp.update_log_start_offset(log_start, self._services.now_ms())
        if pending is not None:
            self.spawn_write(sp, pending)

    def log_start_moved(self, topic_id: uuid.UUID, partition: int, log_start: int) -> None:
        """Retention deleted segments of a partition: every share group on it moves along."""
        for key, sp in list(self._partitions.items()):
            if key.topic_id == topic_id and key.partition == partition:
                self.update_log_start(sp, log_start)

    # -- acknowledge / writes ------------------------------------------------------------------

    async def acknowledge(
        self,
        sp: SharePartition,
        member: str,
        batches: Sequence[AcknowledgementBatch],
        release_delays: Sequence[tuple[int, int, int]] = (),
    ) -> ErrorCode:
        """Validate, persist, then commit; answers only after the durable write. ``release_delays``:
        ``(first, last, ms)`` a client asked its RELEASEs there to wait (capped by the ceiling)."""
        now = self._services.now_ms()
        try:
            result = sp.acknowledge(member, batches, now=now, release_delays=release_delays)
        except ShareRequestError as exc:
            return exc.error_code
        if result.write is None:
            self._services.schedule_from(sp)
            return ErrorCode.none
        return await self.write(sp, result.write)

    async def stage(
        self,
        sp: SharePartition,
        member: str,
        batches: Sequence[AcknowledgementBatch],
        producer_id: int,
        producer_epoch: int,
    ) -> ErrorCode:
        """Stage a transaction's acknowledgements (TX_PENDING); answers after the durable write."""
        now = self._services.now_ms()
        try:
            pending = sp.stage(
                member, batches, producer_id=producer_id, producer_epoch=producer_epoch, now=now
            )
        except ShareRequestError as exc:
            return exc.error_code
        if pending is None:
            return ErrorCode.none  # already staged by this transaction (a retry)
        return await self.write(sp, pending)

    async def end_transaction(self, producer_id: int, producer_epoch: int, *, commit: bool) -> None:
        """A transaction ended: its marker goes to the state log (durable), then every loaded
        share-partition settles what the transaction staged. Raises ``PersisterError``."""
        services = self._services
        await services.persister.end_transaction(producer_id, producer_epoch, commit=commit)
        now = services.now_ms()
        writes: list[Coroutine[Any, Any, ErrorCode]] = []
        for sp in list(self._partitions.values()):
            if not sp.tx_pending_count():
                continue
            result = sp.end_transaction(producer_id, producer_epoch, commit=commit, now=now)
            if not result.resolved:
                continue
            if result.archiving:
                services.dead_letters.notify(sp.key)
            if result.write is not None:  # aborted records released (owner or lock gone)
                writes.append(self.write(sp, result.write))
            else:
                moved = sp.start_offset_write()  # a commit moved the SPSO: make it durable too
                if moved is not None:
                    writes.append(self.write(sp, moved))
            self.wake(sp.key)
            services.schedule_from(sp)
        if writes:
            await asyncio.gather(*writes)

    def write(self, sp: SharePartition, pending: PendingWrite) -> Coroutine[Any, Any, ErrorCode]:
        """Queue one pending write at the call, then (awaited) complete it once durable.

        Queued at once, a share-partition's writes reach the persister in the order the engine
        made them: each carries the start offset it moves to, and a write queued after a later
        one (a follow-up spawned as a task, say) would move it back over what that one settled.
        """
        try:
            written = self._services.persister.write_state(pending.params)
        except Exception as error:  # a bug: the engine must still hear of the failure
            written = refused(error)
        return self._complete(sp, pending, written)

    async def _complete(
        self, sp: SharePartition, pending: PendingWrite, written: Coroutine[Any, Any, None]
    ) -> ErrorCode:
        """Await the durable write, then commit (or roll back) it; follow-ups are queued."""
        services = self._services
        code = ErrorCode.none
        try:
            await written
            ok = True
        except PersisterError as exc:
            ok = False
            code = persister_error_code(exc)
        except Exception:
            log.exception("share-state write failed for %s", sp.key)
            ok, code = False, ErrorCode.unknown_server_error
        if self._partitions.get(sp.key) is not sp:
            return code  # forgotten meanwhile (topic or group deleted)
        spso = sp.spso
        done = sp.complete(pending.handle, ok, services.now_ms())
        if done.archiving:
            services.dead_letters.notify(sp.key)
        for follow in done.writes:  # includes the SPSO catch-up after writes raced each other
            self.spawn_write(sp, follow)
        # the SPSO moving opens the window; in a key-ordered group any acknowledgement may free a key
        if done.records_released or not ok or done.spso != spso or sp.key_stats is not None:
            self.wake(sp.key)
        services.schedule_from(sp)
        return code

    def spawn_write(self, sp: SharePartition, pending: PendingWrite) -> None:
        self._services.spawn(self.write(sp, pending))

    def release_member(
        self, member: str, keys: Iterable[SharePartitionKey]
    ) -> list[asyncio.Future[ErrorCode]]:
        """Release ``member``'s records on ``keys`` (it left, expired or closed its session)."""
        now = self._services.now_ms()
        futures: list[asyncio.Future[ErrorCode]] = []
        for key in keys:
            sp = self._partitions.get(key)
            if sp is None:
                continue
            pending = sp.release_member(member, now)
            if pending is not None:
                futures.append(asyncio.ensure_future(self.write(sp, pending)))
        return futures

    # -- timers --------------------------------------------------------------------------------

    def next_deadline(self) -> int | None:
        deadlines = [d for sp in self._partitions.values() if (d := sp.next_deadline()) is not None]
        return min(deadlines, default=None)

    def expire(self, now: int) -> None:
        """Release every lock due at ``now`` (each share-partition's write runs as a task)."""
        for sp in list(self._partitions.values()):
            deadline = sp.next_deadline()
            if deadline is not None and deadline <= now:
                if sp.mature(now):  # delayed records are due: parked fetches may take them
                    self.wake(sp.key)
                pending = sp.expire(now)
                if pending is not None:
                    self.spawn_write(sp, pending)

    # -- parking -------------------------------------------------------------------------------

    def park(self, keys: Iterable[SharePartitionKey], waiter: asyncio.Future[None]) -> None:
        for key in keys:
            self._waiters.setdefault(key, set()).add(waiter)

    def unpark(self, keys: Iterable[SharePartitionKey], waiter: asyncio.Future[None]) -> None:
        for key in keys:
            waiters = self._waiters.get(key)
            if waiters is not None:
                waiters.discard(waiter)
                if not waiters:
                    del self._waiters[key]

    def parked(self, key: SharePartitionKey) -> int:
        """How many fetches wait on ``key`` (observable, so tests can wait for a fetch to park)."""
        return len(self._waiters.get(key, ()))

    def wake(self, key: SharePartitionKey) -> None:
        waiters = self._waiters.pop(key, None)
        if waiters:
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)


def slice_batches(
    records: bytes, batches: Sequence[tuple[int, int]], ranges: Sequence[AcquiredRecords]
) -> bytes | memoryview:
    """The bytes of the batches overlapping any acquired range (both sorted by offset): a view of
    ``records`` when they are contiguous (the usual case), else a joined copy."""
    pos = 0
    start = end = -1
    pieces: list[tuple[int, int]] = []
    r = 0
    n = len(ranges)
    view = memoryview(records)
    for first, last in batches:
        size = _LENGTH.unpack_from(records, pos)[1] + LOG_OVERHEAD
        while r < n and ranges[r].last_offset < first:
            r += 1
        if r < n and ranges[r].first_offset <= last:
            if end == pos:
                end = pos + size
            else:
                if start >= 0:
                    pieces.append((start, end))
                start, end = pos, pos + size
        pos += size
    if start >= 0:
        pieces.append((start, end))
    if len(pieces) == 1:
        a, b = pieces[0]
        return records if a == 0 and b == len(records) else view[a:b]
    return b"".join(view[a:b] for a, b in pieces)
