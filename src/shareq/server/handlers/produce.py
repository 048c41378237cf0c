"""Produce: record batches pass through untouched except for the base offset the log assigns."""

from __future__ import annotations

import asyncio
import datetime
import logging
from typing import Any

from kio.schema.errors import ErrorCode

from shareq.coordinators.transaction import TxnErrorCode
from shareq.log.batch import HEADER, HEADER_SIZE, TRANSACTIONAL_MASK
from shareq.log.errors import LogError, RecordErrors
from shareq.protocol import VersionRange
from shareq.protocol.api_keys import PRODUCE

from ..clock import now_ms
from ..context import RequestContext
from ..errors import error_code
from ..features import finalized_level
from ..quotas import muted_for_s, produce_throttle_ms

log = logging.getLogger("shareq.server.produce")
_EPOCH = datetime.datetime.fromtimestamp(0, tz=datetime.UTC)


def handle_produce(request: Any, ctx: RequestContext) -> Any:
    """Append; answered at once, or after this connection's mute when an earlier produce or fetch
    went over its client quota (``server/quotas.py``)."""
    wait_s = muted_for_s(ctx)
    if wait_s > 0:
        return _produce_after(wait_s, request, ctx)
    return _produce(request, ctx)


async def _produce_after(wait_s: float, request: Any, ctx: RequestContext) -> Any:
    await asyncio.sleep(wait_s)
    return _produce(request, ctx)


def _produce(request: Any, ctx: RequestContext) -> Any:
    broker = ctx.broker
    throttle_ms = produce_throttle_ms(
        ctx, sum(len(data.records or b"") for topic in request.topic_data for data in topic.partition_data)
    )
    acks = request.acks
    topic_responses = []
    for topic_data in request.topic_data:
        name: str | None = getattr(topic_data, "name", None)
        topic_id = getattr(topic_data, "topic_id", None)
        if name is None and topic_id is not None:
            found = broker.topics.by_id(topic_id)
            name = found.name if found is not None else None
        partition_responses = []
        for data in topic_data.partition_data:
            code, base_offset, log_start, message = ErrorCode.none, -1, -1, None
            record_errors: tuple[tuple[int, str], ...] = ()
            append_time = -1
            partition = broker.partition(name, data.index) if name is not None else None
            if acks not in (0, 1, -1):
                code = ErrorCode.invalid_required_acks
            elif partition is None:
                code = ErrorCode.unknown_topic_id if name is None else ErrorCode.unknown_topic_or_partition
            elif not data.records:
                code, message = ErrorCode.corrupt_message, "empty record set"
            elif (
                refused := _transaction_check(ctx, bytes(data.records[:HEADER_SIZE]), name, data.index)
            ) is not None:
                code, message = refused
            else:
                try:
                    info = partition.log.append(bytes(data.records), now_ms=now_ms(), allow_control=False)
                except LogError as error:
                    code, message = error_code(error), str(error)
                    if isinstance(error, RecordErrors):
                        record_errors = error.record_errors
                else:
                    base_offset = info.first_offset
                    append_time = info.log_append_time_ms
                    if not info.duplicate:
                        partition.notify()
                log_start = partition.log.log_start_offset
            partition_responses.append(
                ctx.build(
                    "PartitionProduceResponse",
                    index=data.index,
                    error_code=code,
                    base_offset=base_offset,
                    log_append_time=_EPOCH + datetime.timedelta(milliseconds=append_time)
                    if append_time >= 0
                    else None,
                    log_start_offset=log_start,
                    record_errors=tuple(
                        ctx.build("BatchIndexAndErrorMessage", batch_index=i, batch_index_error_message=m)
                        for i, m in (record_errors if ctx.version >= 8 else ())
                    ),
                    error_message=message,
                    current_leader=ctx.build("LeaderIdAndEpoch") if ctx.version >= 10 else None,
                )
            )
        topic_responses.append(
            ctx.build(
                "TopicProduceResponse",
                name=getattr(topic_data, "name", None),
                topic_id=topic_id,
                partition_responses=tuple(partition_responses),
            )
        )
    if acks == 0:
        return None
    return ctx.build(
        throttle_time=datetime.timedelta(milliseconds=throttle_ms), responses=tuple(topic_responses)
    )


def _transaction_check(
    ctx: RequestContext, head: bytes, topic: str | None, index: int
) -> tuple[ErrorCode, str] | None:
    """A transactional batch must belong to its producer's open transaction on this partition
    (INVALID_TXN_STATE otherwise: a late retry must not open a transaction nobody ends). From
    v12, with transaction.version 2 finalized (KIP-890 part 2), the batch adds its partition to
    the transaction itself, as Kafka's leader does through AddPartitionsToTxn: such a producer
    bumps its epoch at every EndTxn, so a late retry of an ended transaction is fenced instead."""
    if len(head) < HEADER_SIZE or topic is None:
        return None
    h = HEADER.unpack_from(head)
    if not h[5] & TRANSACTIONAL_MASK:
        return None
    txns = ctx.broker.transactions
    if txns is None:
        return ErrorCode.coordinator_load_in_progress, "transactions are not running"
    if ctx.version >= 12 and finalized_level("transaction.version") >= 2:
        code = txns.add_produced_partition(h[9], h[10], topic, index)
    else:
        code = txns.verify_produce(h[9], h[10], topic, index)
    if code.value == 0:
        return None
    if code is TxnErrorCode.PRODUCER_FENCED:  # a Produce answers a fenced producer this way
        code = TxnErrorCode.INVALID_PRODUCER_EPOCH
    elif code is TxnErrorCode.TRANSACTION_ABORTABLE and ctx.version < 11:
        code = TxnErrorCode.INVALID_TXN_STATE
    return ErrorCode(
        code.value
    ), f"producer {h[9]} epoch {h[10]} has no open transaction with {topic}-{index}"


HANDLERS = {PRODUCE: (VersionRange(3, 13), handle_produce)}
