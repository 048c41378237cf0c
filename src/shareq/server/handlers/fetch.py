"""Fetch: raw batches from the log, long-polling until min_bytes arrive or max_wait passes.

A partition's answer is the log's bytes up to its limit, as Kafka's is: the last batch may be cut
short, and the client drops it and asks for it again (``PartitionLog.read_slice``).

Share-state control batches (the in-log persister's) are cut out of what is returned, as byte
slices; the other batches pass through untouched (see ``shareq.log.share_control``).

A waiting fetch registers one future on every partition it reads; an append resolves it, so a
long poll costs nothing while idle and answers as soon as data lands.
"""

from __future__ import annotations

import datetime
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from shareq.log.errors import LogError
from shareq.log.partition_log import FetchData
from shareq.log.share_control import gap_batch, visible_batches
from shareq.log.transactions import stable_prefix
from shareq.protocol import VersionRange
from shareq.protocol.api_keys import FETCH

from ..clock import now_ms
from ..context import RequestContext
from ..errors import error_code
from ..partitions import Partition, wait_for_data
from ..quotas import fetch_max_bytes, fetch_throttle_ms

ZERO_UUID = uuid.UUID(int=0)


async def handle_fetch(request: Any, ctx: RequestContext) -> Any:
    deadline = now_ms() + request.max_wait.total_seconds() * 1000.0
    wanted = _resolve(request, ctx)
    while True:
        responses, total, waited, failed, count = _collect(request, ctx, wanted)
        remaining = (deadline - now_ms()) / 1000.0
        if waited >= request.min_bytes or failed or remaining <= 0 or ctx.broker.stopping:
            # Client quotas (server/quotas.py): over consumer_byte_rate, answer with no records.
            throttle_ms = await fetch_throttle_ms(ctx, total)
            if not throttle_ms:
                io = ctx.broker.io.api(FETCH)
                io.bytes_delivered += total
                io.records_delivered += count
            return ctx.build(
                throttle_time=datetime.timedelta(milliseconds=throttle_ms),
                error_code=ErrorCode.none,
                session_id=0,
                responses=() if throttle_ms else responses,
            )
        await wait_for_data([p for _, _, p in wanted if p is not None], remaining)


Wanted = tuple[Any, Any, Partition | None]  # (topic request, partition request, partition)


def _resolve(request: Any, ctx: RequestContext) -> list[Wanted]:
    broker = ctx.broker
    wanted: list[Wanted] = []
    for topic in request.topics:
        name: str | None = getattr(topic, "topic", None)
        if ctx.version >= 13:
            found = broker.topics.by_id(topic.topic_id)
            name = found.name if found is not None else None
        for partition_request in topic.partitions:
            partition = broker.partition(name, partition_request.partition) if name is not None else None
            wanted.append((topic, partition_request, partition))
    return wanted


def _collect(
    request: Any, ctx: RequestContext, wanted: list[Wanted]
) -> tuple[tuple[Any, ...], int, int, bool, int]:
    """The response entries, their record bytes, those of them that count towards ``min_bytes``,
    whether a partition failed, and their records."""
    budget = fetch_max_bytes(ctx, request.max_bytes)  # client quotas (server/quotas.py): capped
    total = 0
    waited = 0
    failed = False
    count = 0
    io = ctx.broker.io.api(FETCH)
    by_topic: dict[int, tuple[Any, list[Any]]] = {}
    no_leader = ctx.build("LeaderIdAndEpoch") if ctx.version >= 12 else None
    no_divergence = ctx.build("EpochEndOffset") if ctx.version >= 12 else None
    read_committed = getattr(request, "isolation_level", 0) == 1
    for topic, preq, partition in wanted:
        code = ErrorCode.none
        records = b""
        high_watermark = log_start = stable = -1
        aborted: Any = None
        if partition is None:
            code = ErrorCode.unknown_topic_id if ctx.version >= 13 else ErrorCode.unknown_topic_or_partition
        else:
            log = partition.log
            high_watermark = log.log_end_offset
            stable = log.last_stable_offset
            log_start = log.log_start_offset
            # read_committed (isolation level 1) reads below the last stable offset only.
            end = stable if read_committed else high_watermark
            limit = min(preq.partition_max_bytes, budget)
            # As Kafka answers: up to `limit` bytes, the last batch possibly cut (the client drops
            # it and fetches it again). Only the first partition that returns data may exceed
            # the budget, by one whole batch (so a batch larger than max_bytes still makes
            # progress); after it, a first batch larger than what is left gives nothing.
            readable = preq.fetch_offset != high_watermark or preq.fetch_offset < log_start
            if read_committed and log_start <= preq.fetch_offset <= high_watermark:
                readable = preq.fetch_offset < stable
                aborted = ()
            if readable and (limit > 0 or total == 0):
                try:
                    data = log.read_slice(preq.fetch_offset, limit, min_one_batch=total == 0, end_offset=end)
                except LogError as error:
                    code = error_code(error)
                else:
                    io.bytes_read += len(data.records)
                    records, batch_records, weight = _visible(data, end)
                    count += batch_records
                    waited += weight
                    if read_committed and records:
                        aborted = tuple(
                            ctx.build(
                                "AbortedTransaction", producer_id=a.producer_id, first_offset=a.first_offset
                            )
                            for a in log.aborted_transactions(preq.fetch_offset, end - 1)
                        )
        if code is not ErrorCode.none:
            failed = True
        total += len(records)
        budget = max(budget - len(records), 0)
        entry = ctx.build(
            "PartitionData",
            partition_index=preq.partition,
            error_code=code,
            high_watermark=high_watermark,
            last_stable_offset=stable,
            log_start_offset=log_start,
            diverging_epoch=no_divergence,
            current_leader=no_leader,
            aborted_transactions=aborted,
            preferred_read_replica=-1,
            records=records,
        )
        by_topic.setdefault(id(topic), (topic, []))[1].append(entry)
    responses = tuple(
        ctx.build(
            "FetchableTopicResponse",
            topic=getattr(topic, "topic", None),
            topic_id=getattr(topic, "topic_id", ZERO_UUID),
            partitions=tuple(entries),
        )
        for topic, entries in by_topic.values()
    )
    return responses, total, waited, failed, count


def _visible(data: FetchData, end: int) -> tuple[bytes, int, int]:
    """What a client may see of a read ending at ``end`` (the high watermark, or the LSO under
    read_committed): the bytes without share-state control batches, the records of the whole
    batches among them, and how many bytes count towards ``min_bytes``. A cut batch ending the
    read (``data.tail``, below ``end`` and not share state: the log sees to both) stays at the end.

    When share state ends the whole batches returned, an empty batch spanning it (``gap_batch``)
    lets the client move past it (so its position, and its lag, reach the end). It counts towards
    ``min_bytes`` only if more lies beyond: share state at the log's tail is not worth answering
    a long poll early for, and rides along when the poll ends.
    """
    seen = visible_batches(data.records, data.batches, data.controls)
    records, batches = seen.records, seen.batches
    if batches and batches[-1][1] >= end:
        records, _ = stable_prefix(records, end)
        batches = tuple(b for b in batches if b[1] < end)
    count = sum(last - first + 1 for first, last in batches)
    weight = len(records)
    if seen.hidden:
        first, last = seen.hidden[-1]
        if first < end and (not batches or first > batches[-1][1]):
            last = min(last, end - 1)
            gap = gap_batch(first, last)
            tail = data.tail
            records = records[: len(records) - tail] + gap + records[len(records) - tail :]
            if last + 1 < end:
                weight += len(gap)
    return records, count, weight


HANDLERS = {FETCH: (VersionRange(4, 17), handle_fetch)}
