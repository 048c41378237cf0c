"""``DeadLetterWriter``: the asyncio task that copies ARCHIVING records to share groups' DLQ topics.

Off the ShareFetch path: a committed write that made records ARCHIVING (they are durable by then)
marks its share-partition in the ``DeadLetterPlanner``; this one task takes the due share-partitions
in turn, validates the group's DLQ topic (``check_target``), creates it when missing and allowed,
reads the source records only when the group copies them (the one place the broker decodes a batch,
compressed ones inflated), appends the dead letters to DLQ partition ``source partition mod count``
in batches that fit the topic's ``max.message.bytes``, and only then persists ARCHIVED. A failed
append (the disk, say) is retried after a backoff, the records staying ARCHIVING; a refusal by the
validation or a record too large for the DLQ topic archives without a DLQ record, logged and
counted. A crash between the DLQ append and the ARCHIVED write writes the records again after the
restart (at least once).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from bisect import bisect_left
from dataclasses import dataclass
from itertools import groupby
from operator import itemgetter
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from shareq.client.records import iter_record_batches
from shareq.log.batch import HEADER_SIZE
from shareq.log.errors import LogError, OffsetOutOfRangeError, RecordTooLargeError
from shareq.log.records import (
    TAIL_OVERHEAD,
    Record,
    encode_headers,
    encode_record_tail,
    encode_tails_batch,
)
from shareq.share import SharePartition
from shareq.share.dead_letter import (
    HEADER_OFFSET,
    DeadLetterPlanner,
    DlqRefusal,
    DlqTopicView,
    cause_of,
    check_target,
    dlq_partition,
    dlq_record_headers,
)
from shareq.share.persister import SharePartitionKey
from shareq.topic_configs import DLQ_GROUP_ENABLE

if TYPE_CHECKING:
    from .services import ShareServices

log = logging.getLogger("shareq.share.dlq")

MAX_RECORDS_PER_ROUND = 2_000
"""Dead letters one share-partition contributes to one round (one ARCHIVED write)."""
_READ_BYTES = 1 << 20
_LENGTH = [bytes(((n << 1),)) for n in range(32)]
"""The varint length prefix of an offset's decimal text (at most 20 digits)."""
_HEADER_COUNT = len(dlq_record_headers(topic="", partition=0, offset=0, group="", delivery_count=0, cause=""))


@dataclass(slots=True)
class DlqStats:
    """Per group, since the broker started: Kafka's three DLQ metrics and shareq's silent-loss count."""

    records: int = 0
    """``DeadLetterQueueRecordCount``: dead letters written."""
    produce_requests: int = 0
    """``DeadLetterQueueTotalProduceRequests``: appends to a DLQ partition."""
    failed_produce_requests: int = 0
    """``DeadLetterQueueFailedProduceRequests``: appends that failed (retried later)."""
    archived_without_record: int = 0
    """Records archived without a DLQ record: refused by the validation, or too large."""


class DeadLetterWriter:
    """One task writing every share group's dead letters; ``notify(key)`` when a share-partition
    has ARCHIVING records."""

    def __init__(self, services: ShareServices) -> None:
        self._services = services
        self.planner: DeadLetterPlanner[SharePartitionKey] = DeadLetterPlanner()
        self.stats: dict[str, DlqStats] = {}
        self.dead_lettered: dict[SharePartitionKey, int] = {}
        """Records written to the DLQ per share-partition, since the broker started."""
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._rounds: set[asyncio.Task[None]] = set()
        self._busy: set[SharePartitionKey] = set()
        self._again: set[SharePartitionKey] = set()
        self._random = random.Random()

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        tasks = [*self._rounds, *([self._task] if self._task is not None else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._task = None

    def notify(self, key: SharePartitionKey) -> None:
        self.planner.mark(key, self._services.now_ms())
        self._wake.set()

    def group_stats(self, group: str) -> DlqStats:
        stats = self.stats.get(group)
        if stats is None:
            stats = self.stats[group] = DlqStats()
        return stats

    async def _run(self) -> None:
        services = self._services
        while True:
            keys = self.planner.due(services.now_ms())
            for key in keys:  # one task per share-partition: none waits for another's state flush
                if key in self._busy:
                    self._again.add(key)  # written again once the round under way is done
                    continue
                self._busy.add(key)
                task = asyncio.ensure_future(self._round(key))
                self._rounds.add(task)
                task.add_done_callback(self._rounds.discard)
            self._wake.clear()
            deadline = self.planner.next_deadline()
            timeout = None if deadline is None else max(deadline - services.now_ms(), 0) / 1000.0
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)

    async def _round(self, key: SharePartitionKey) -> None:
        try:
            await self._process(key)
        except Exception:  # a bug must not stop every group's dead letters
            log.exception("dead-letter write failed for %s", key)
            self.planner.failed(key, self._services.now_ms(), self._random.uniform(-1, 1))
            self._wake.set()
        finally:
            self._busy.discard(key)
            if key in self._again:
                self._again.discard(key)
                self.notify(key)

    async def _process(self, key: SharePartitionKey) -> None:
        services = self._services
        sp = services.partitions.cached(key)
        source = services.broker.topics.by_id(key.topic_id)
        if sp is None or source is None:
            self.planner.forget(key)
            return
        ranges = sp.archiving_spans(MAX_RECORDS_PER_ROUND)
        if not ranges:
            self.planner.written(key)
            return
        group = services.coordinator.group_config(key.group_id)
        stats = self.group_stats(key.group_id)
        count = sum(last - first + 1 for first, last, _ in ranges)
        broker = services.broker
        name = group.dlq_topic_name
        topic = broker.topics.get(name) if name else None
        verdict = check_target(
            group=key.group_id,
            topic=name,
            source_topic=source.name,
            prefix=str(broker.config["errors.deadletterqueue.topic.name.prefix"] or ""),
            auto_create=bool(broker.config["errors.deadletterqueue.auto.create.topics.enable"]),
            view=DlqTopicView(
                exists=topic is not None,
                opted_in=topic is not None and topic.configs.get(DLQ_GROUP_ENABLE, "false").lower() == "true",
            ),
        )
        if isinstance(verdict, DlqRefusal):
            log.warning("%s (%d records archived without a DLQ record)", verdict.message, count)
            stats.archived_without_record += count
            await self._archive(sp, key, ranges)
            return
        if verdict.create:
            try:
                broker.create_topic(
                    name, -1, {DLQ_GROUP_ENABLE: "true", "message.timestamp.type": "CreateTime"}
                )
                log.info("created DLQ topic %s for share group %s", name, key.group_id)
            except Exception as error:  # created meanwhile, or cannot be: try again later
                if broker.topics.get(name) is None:
                    log.warning("cannot create DLQ topic %s: %s", name, error)
                    self._failed(key, stats)
                    return
            topic = broker.topics.get(name)
        assert topic is not None
        partition = broker.partition(name, dlq_partition(key.partition, topic.partitions))
        if partition is None:
            self._failed(key, stats)
            return
        sources = self._read(key, ranges) if group.dlq_copy_record else {}
        tails = dead_letter_tails(key, source.name, ranges, sources, group.delivery_count_limit)
        limit = partition.log.config.max_message_bytes - HEADER_SIZE
        now = services.now_ms()
        written = 0
        too_large = 0
        for chunk in _chunks(tails, limit):
            try:
                partition.log.append(encode_tails_batch(chunk, base_timestamp=now), now_ms=now)
                stats.produce_requests += 1
                written += len(chunk)
            except RecordTooLargeError as error:
                if len(chunk) > 1:  # the estimate was short: one record per append
                    for tail in chunk:
                        try:
                            partition.log.append(encode_tails_batch([tail], base_timestamp=now), now_ms=now)
                            stats.produce_requests += 1
                            written += 1
                        except RecordTooLargeError:
                            too_large += 1
                else:
                    log.warning(
                        "dead letter of share group %s larger than DLQ topic %s allows (%s): "
                        "archived without a DLQ record",
                        key.group_id,
                        name,
                        error,
                    )
                    too_large += 1
            except LogError as error:
                log.warning("DLQ append to %s failed, retrying: %s", name, error)
                partition.notify()
                self._failed(key, stats)
                return
        partition.notify()
        stats.records += written
        stats.archived_without_record += too_large
        self.dead_lettered[key] = self.dead_lettered.get(key, 0) + written
        await self._archive(sp, key, ranges)

    async def _archive(
        self, sp: SharePartition, key: SharePartitionKey, ranges: list[tuple[int, int, int]]
    ) -> None:
        """Persist ARCHIVED for ``ranges``; more ARCHIVING records mean another round."""
        services = self._services
        pending = sp.dead_lettered_spans([(first, last) for first, last, _ in ranges])
        if pending is not None:
            code = await services.partitions.write(sp, pending)
            if code != ErrorCode.none:
                self._failed(key, self.group_stats(key.group_id))
                return
        self.planner.written(key)
        if services.partitions.cached(key) is sp and sp.archiving_spans(1):
            self.notify(key)

    def _failed(self, key: SharePartitionKey, stats: DlqStats) -> None:
        stats.failed_produce_requests += 1
        self.planner.failed(key, self._services.now_ms(), self._random.uniform(-1, 1))
        self._wake.set()

    def _read(self, key: SharePartitionKey, ranges: list[tuple[int, int, int]]) -> dict[int, Record]:
        """The source records of ``ranges`` still in the log (compacted or deleted ones are not)."""
        partition = self._services.log_partition(key.topic_id, key.partition)
        found: dict[int, Record] = {}
        if partition is None:
            return found
        plog = partition.log
        for first, last, _ in ranges:
            offset = max(first, plog.log_start_offset)
            while offset <= last:
                try:
                    data = plog.read(offset, _READ_BYTES, end_offset=last)
                except (OffsetOutOfRangeError, LogError):
                    break
                if not data.batches:
                    break
                try:
                    for batch in iter_record_batches(data.records):
                        if batch.header.is_control:
                            continue
                        for record in batch.records:
                            if first <= record.offset <= last:
                                found[record.offset] = record
                except Exception:
                    log.warning("cannot read source records of %s at %d", key, offset, exc_info=True)
                    break
                offset = data.batches[-1][1] + 1
        return found


def dead_letter_tails(
    key: SharePartitionKey,
    topic: str,
    ranges: list[tuple[int, int, int]],
    sources: dict[int, Record],
    limit: int,
) -> list[bytes]:
    """The dead letters of ``ranges`` (``(first, last, delivery count)``, ascending) as record
    tails (``encode_record_tail``), in offset order; ``sources`` holds the source records to
    copy (empty: headers only). ``limit`` is the group's delivery count limit (the cause).

    A round's dead letters differ only in their offset and delivery count: the headers around
    the offset are encoded once per delivery count, and a dead letter is those bytes joined
    around its offset (the source's key, value and headers in front when copying)."""
    out: list[bytes] = []
    append = out.append
    around: dict[int, tuple[bytes, bytes, bytes]] = {}
    for count, same in groupby(ranges, key=itemgetter(2)):  # spans of one delivery count
        parts = around.get(count)
        if parts is None:
            common = dlq_record_headers(
                topic=topic,
                partition=key.partition,
                offset=0,
                group=key.group_id,
                delivery_count=count,
                cause=cause_of(count, limit),
            )
            at = next(i for i, (name, _) in enumerate(common) if name == HEADER_OFFSET)
            # the offset header's name, then its value's length and value per record
            before = encode_headers((*common[:at], (HEADER_OFFSET, b"")))[:-1]
            after = encode_headers(common[at + 1 :])
            parts = around[count] = (
                encode_record_tail(None, None, before, _HEADER_COUNT),
                before,
                after,
            )
        bare, before, after = parts
        offsets = [offset for first, last, _ in same for offset in range(first, last + 1)]
        if not sources:  # headers only: one formatting per letter
            out += _letters(bare, after, offsets)
            continue
        for offset in offsets:
            text = b"%d" % offset
            value = _LENGTH[len(text)] + text
            original = sources.get(offset)
            if original is None:
                append(bare + value + after)
            else:
                append(
                    encode_record_tail(
                        original.key,
                        original.value,
                        encode_headers(original.headers) + before + value + after,
                        len(original.headers) + _HEADER_COUNT,
                    )
                )
    return out


def _letters(bare: bytes, after: bytes, offsets: list[int]) -> list[bytes]:
    """Headers-only dead letters of ascending ``offsets``: ``bare``, the offset's decimal text
    with its length, ``after``. Offsets of one decimal width share a format (most rounds: one)."""
    out: list[bytes] = []
    start = 0
    while start < len(offsets):
        width = len(b"%d" % offsets[start])
        end = bisect_left(offsets, 10**width, start)
        fmt = bare.replace(b"%", b"%%") + _LENGTH[width] + b"%d" + after.replace(b"%", b"%%")
        out += [fmt % offset for offset in offsets[start:end]]
        start = end
    return out


def _chunks(tails: list[bytes], limit: int) -> list[list[bytes]]:
    """Split record ``tails`` into batches whose size stays within ``limit`` bytes."""
    if sum(map(len, tails)) + TAIL_OVERHEAD * len(tails) <= limit:
        return [tails] if tails else []  # the usual round: one batch (counted in C)
    out: list[list[bytes]] = []
    current: list[bytes] = []
    used = 0
    for tail in tails:
        size = len(tail) + TAIL_OVERHEAD
        if current and used + size > limit:
            out.append(current)
            current, used = [], 0
        current.append(tail)
        used += size
    if current:
        out.append(current)
    return out
