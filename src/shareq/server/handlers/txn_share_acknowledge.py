"""TxnShareAcknowledge v0 (KIP-1289): a share consumer's acknowledgements staged in a transaction.

Order (persist before commit): check the transaction (producer id mapping, epoch) and the member
(known; its epoch unless -1); check every partition's acknowledgements without changing anything;
make the share-state partitions of the touched share-partitions participants of the transaction
(a durable ``__transaction_state`` append, like AddOffsetsToTxn); then stage each share-partition
(a durable txn stage record) and answer. The records stay TX_PENDING until the transaction's
COMMIT or ABORT reaches them. Served (and advertised) only with ``share.transactional.acks.enable``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kio.schema.errors import ErrorCode

from shareq.coordinators.transaction import TxnErrorCode, TxnRequestError
from shareq.log.errors import LogError
from shareq.protocol import VersionRange
from shareq.protocol.api_keys import TXN_SHARE_ACKNOWLEDGE
from shareq.share import SharePartition, ShareRequestError
from shareq.share.session import TopicIdPartition
from shareq.share.types import AcknowledgementBatch

from ..context import NO_THROTTLE, RequestContext
from ..errors import error_code
from ..share.acknowledge import parse_batches
from ..share.locate import resolve

ANY_MEMBER_EPOCH = -1


def _response(
    ctx: RequestContext, code: ErrorCode, codes: dict[Any, list[tuple[int, ErrorCode, str | None]]]
) -> Any:
    build = ctx.build
    return build(
        throttle_time=NO_THROTTLE,
        error_code=code,
        responses=tuple(
            build(
                "TxnShareAcknowledgeTopicResponse",
                topic_id=topic_id,
                partitions=tuple(
                    build(
                        "TxnShareAcknowledgePartitionResponse",
                        partition_index=p,
                        error_code=c,
                        error_message=m,
                    )
                    for p, c, m in parts
                ),
            )
            for topic_id, parts in codes.items()
        ),
    )


def _check_transaction(ctx: RequestContext, request: Any) -> ErrorCode:
    txns = ctx.broker.transactions
    if txns is None:
        return ErrorCode.coordinator_load_in_progress
    meta = txns.coordinator.get(request.transactional_id or "")
    if meta is None or meta.producer_id != request.producer_id:
        return ErrorCode.invalid_producer_id_mapping
    if request.producer_epoch < meta.producer_epoch:
        return ErrorCode.producer_fenced
    if request.producer_epoch != meta.producer_epoch:
        return ErrorCode.invalid_producer_epoch
    return ErrorCode.none


async def handle_txn_share_acknowledge(request: Any, ctx: RequestContext) -> Any:
    share = ctx.broker.share
    txns = ctx.broker.transactions
    if share is None or txns is None:
        return _response(ctx, ErrorCode.coordinator_load_in_progress, {})
    code = _check_transaction(ctx, request)
    if code is not ErrorCode.none:
        return _response(ctx, code, {})
    group_id: str = request.group_id
    member_id: str = request.member_id
    epoch = share.coordinator.member_epoch(group_id, member_id)
    if epoch is None:
        return _response(ctx, ErrorCode.unknown_member_id, {})
    if request.member_epoch != ANY_MEMBER_EPOCH and request.member_epoch != epoch:
        return _response(ctx, ErrorCode.stale_member_epoch, {})
    pid, pepoch = int(request.producer_id), int(request.producer_epoch)

    # 1. Check everything; nothing changes unless every partition can stage.
    items: list[
        tuple[
            TopicIdPartition, SharePartition | None, tuple[AcknowledgementBatch, ...], ErrorCode, str | None
        ]
    ] = []
    failed = False
    for topic in request.topics:
        for part in topic.partitions:
            tip = TopicIdPartition(topic_id=topic.topic_id, partition=part.partition_index)
            message: str | None = None
            batches: tuple[AcknowledgementBatch, ...] = ()
            try:
                batches = parse_batches(part.acknowledgement_batches, renew=False)
            except ShareRequestError as error:
                items.append((tip, None, (), error.error_code, str(error)))
                failed = True
                continue
            sp, code = await resolve(share, group_id, tip)
            if sp is not None:
                try:
                    sp.validate_stage(member_id, batches, producer_id=pid, producer_epoch=pepoch)
                except ShareRequestError as error:
                    code, message = error.error_code, str(error)
            failed = failed or code is not ErrorCode.none
            items.append((tip, sp, batches, code, message))
    by_topic: dict[Any, list[tuple[int, ErrorCode, str | None]]] = {}
    if failed:
        for tip, _, _, code, message in items:
            if code is ErrorCode.none:
                code = ErrorCode.operation_not_attempted
            by_topic.setdefault(tip.topic_id, []).append((tip.partition, code, message))
        return _response(ctx, ErrorCode.none, by_topic)

    # 2. The share-state partitions join the transaction (durable before anything is staged).
    state_partitions = [share.persister.state_partition(sp.key) for _, sp, _, _, _ in items if sp is not None]
    try:
        txns.add_share_state(request.transactional_id or "", pid, pepoch, state_partitions)
    except TxnRequestError as error:
        fenced = error.code is TxnErrorCode.PRODUCER_FENCED
        return _response(ctx, ErrorCode.producer_fenced if fenced else ErrorCode(error.code.value), {})
    except LogError as error:
        return _response(ctx, error_code(error), {})

    # 3. Stage (each answers after its durable write).
    staged = [it for it in items if it[1] is not None]
    codes = await asyncio.gather(
        *(
            share.partitions.stage(sp, member_id, batches, pid, pepoch)
            for _, sp, batches, _, _ in staged
            if sp
        )
    )
    for (tip, _, _, _, _), code in zip(staged, codes, strict=True):
        by_topic.setdefault(tip.topic_id, []).append((tip.partition, code, None))
    return _response(ctx, ErrorCode.none, by_topic)


HANDLERS = {TXN_SHARE_ACKNOWLEDGE: (VersionRange(0, 0), handle_txn_share_acknowledge)}
