"""Transaction operations: ListTransactions 0-2, DescribeTransactions 0, DescribeProducers 0."""

from __future__ import annotations

import datetime
import re
import time
from typing import Any

from kio.schema.errors import ErrorCode

from shareq.coordinators.transaction import TxnMetadata, TxnState
from shareq.protocol import VersionRange
from shareq.protocol.api_keys import DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS

from ..context import NO_THROTTLE, RequestContext

STATE_NAMES = {state.display: state for state in TxnState}


def _transactions(ctx: RequestContext) -> list[TxnMetadata]:
    txns = ctx.broker.transactions
    return [] if txns is None else sorted(txns.coordinator, key=lambda m: m.transactional_id)


def _utc_ms(ms: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ms / 1000.0, tz=datetime.UTC)


def _start_ms(meta: TxnMetadata) -> int:
    """When the open (or last) transaction started. Kafka answers -1 when none has started; kio's
    reader (ours and every client built on it) refuses a negative timestamp, so 0 stands for it."""
    return max(meta.start_ms, 0)


def handle_list_transactions(request: Any, ctx: RequestContext) -> Any:
    states = set(request.state_filters)
    unknown = sorted(s for s in states if s not in STATE_NAMES)
    wanted_states = {STATE_NAMES[s] for s in states if s in STATE_NAMES}
    producers = set(request.producer_id_filters)
    duration = getattr(request, "duration_filter", -1)
    pattern_text = getattr(request, "transactional_id_pattern", None)
    try:
        pattern = re.compile(pattern_text) if pattern_text else None
    except re.error:
        return ctx.build(
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.invalid_regular_expression,
            unknown_state_filters=(),
            transaction_states=(),
        )
    now = time.time_ns() // 1_000_000
    rows = []
    for meta in _transactions(ctx):
        if states and meta.state not in wanted_states:
            continue
        if producers and meta.producer_id not in producers:
            continue
        if duration >= 0 and (meta.state is not TxnState.ONGOING or now - meta.start_ms < duration):
            continue
        if pattern is not None and pattern.fullmatch(meta.transactional_id) is None:
            continue
        rows.append(
            ctx.build(
                "TransactionState",
                transactional_id=meta.transactional_id,
                producer_id=meta.producer_id,
                transaction_state=meta.state.display,
            )
        )
    return ctx.build(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        unknown_state_filters=tuple(unknown),
        transaction_states=tuple(rows),
    )


def handle_describe_transactions(request: Any, ctx: RequestContext) -> Any:
    txns = ctx.broker.transactions
    out = []
    for txn_id in request.transactional_ids:
        meta = None if txns is None else txns.coordinator.get(txn_id)
        if meta is None:
            out.append(
                ctx.build(
                    "TransactionState",
                    error_code=ErrorCode.transactional_id_not_found,
                    transactional_id=txn_id,
                    transaction_state="",
                    transaction_timeout=datetime.timedelta(0),
                    transaction_start_time=_utc_ms(0),
                    producer_id=-1,
                    producer_epoch=-1,
                    topics=(),
                )
            )
            continue
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(meta.partitions):
            by_topic.setdefault(topic, []).append(partition)
        out.append(
            ctx.build(
                "TransactionState",
                error_code=ErrorCode.none,
                transactional_id=txn_id,
                transaction_state=meta.state.display,
                transaction_timeout=datetime.timedelta(milliseconds=meta.timeout_ms),
                transaction_start_time=_utc_ms(_start_ms(meta)),
                producer_id=meta.producer_id,
                producer_epoch=meta.producer_epoch,
                topics=tuple(
                    ctx.build("TopicData", topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()
                ),
            )
        )
    return ctx.build(throttle_time=NO_THROTTLE, transaction_states=tuple(out))


def handle_describe_producers(request: Any, ctx: RequestContext) -> Any:
    topics = []
    for topic in request.topics:
        partitions = []
        for index in topic.partition_indexes:
            partition = ctx.broker.partition(topic.name, index)
            if partition is None:
                partitions.append(
                    ctx.build(
                        "PartitionResponse",
                        partition_index=index,
                        error_code=ErrorCode.unknown_topic_or_partition,
                        error_message=None,
                        active_producers=(),
                    )
                )
                continue
            state = partition.log.producer_state
            producers = []
            for pid, entry in sorted(state.producers.items()):
                open_at = state.txns.ongoing.get(pid, -1)
                producers.append(
                    ctx.build(
                        "ProducerState",
                        producer_id=pid,
                        producer_epoch=entry.epoch,
                        last_sequence=entry.last_seq,
                        last_timestamp=-1,
                        coordinator_epoch=0 if open_at >= 0 else -1,
                        current_txn_start_offset=open_at,
                    )
                )
            partitions.append(
                ctx.build(
                    "PartitionResponse",
                    partition_index=index,
                    error_code=ErrorCode.none,
                    error_message=None,
                    active_producers=tuple(producers),
                )
            )
        topics.append(ctx.build("TopicResponse", name=topic.name, partitions=tuple(partitions)))
    return ctx.build(throttle_time=NO_THROTTLE, topics=tuple(topics))


HANDLERS = {
    LIST_TRANSACTIONS: (VersionRange(0, 2), handle_list_transactions),
    DESCRIBE_TRANSACTIONS: (VersionRange(0, 0), handle_describe_transactions),
    DESCRIBE_PRODUCERS: (VersionRange(0, 0), handle_describe_producers),
}
