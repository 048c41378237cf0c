"""The transactional producer's APIs: AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit,
plus InitProducerId's transactional branch (``producer_id.py`` calls it).

Versions as Kafka 4.4 serves them. Versions 4 add the TRANSACTION_ABORTABLE error (AddOffsetsToTxn,
EndTxn, TxnOffsetCommit) and AddPartitionsToTxn v4+ is the batched, broker-to-broker form with a
verify-only flag (CLUSTER_ACTION). transaction.version 2 (KIP-890 part 2) is the request version:
EndTxn v5 bumps the producer epoch and answers the producer id and epoch to continue with,
TxnOffsetCommit v5 adds the group's offsets to the transaction itself (as Produce v12+ does for
its partition, ``produce.py``).

PRODUCER_FENCED (90) exists only from InitProducerId v4 and AddPartitionsToTxn, AddOffsetsToTxn
and EndTxn v2; older versions (librdkafka sends v0, v0 and v1) get INVALID_PRODUCER_EPOCH (47).
TRANSACTION_ABORTABLE (120) is answered as INVALID_TXN_STATE before AddPartitionsToTxn v5 and
TxnOffsetCommit v4 (and Produce v11).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from shareq.coordinators.classic import ClassicRequestError
from shareq.coordinators.transaction import TV_2, TxnErrorCode, TxnRequestError
from shareq.log.errors import LogError
from shareq.protocol import VersionRange
from shareq.protocol.api_keys import ADD_OFFSETS_TO_TXN, ADD_PARTITIONS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT
from shareq.share.persister import PersisterError

from ..context import NO_THROTTLE, RequestContext
from ..errors import error_code, persister_error_code
from ..transactions import TransactionServices
from .offsets import commits_of, partition_codes


def services(ctx: RequestContext) -> TransactionServices:
    txns = ctx.broker.transactions
    if txns is None:
        raise TxnRequestError(TxnErrorCode.COORDINATOR_LOAD_IN_PROGRESS, "transactions are not running")
    return txns


def wire_code(code: TxnErrorCode, *, fenced_supported: bool) -> ErrorCode:
    if code is TxnErrorCode.PRODUCER_FENCED and not fenced_supported:
        return ErrorCode.invalid_producer_epoch
    return ErrorCode(code.value)


def _run(ctx: RequestContext, call: Any, *, fenced_from: int) -> ErrorCode:
    try:
        call()
    except TxnRequestError as error:
        return wire_code(error.code, fenced_supported=ctx.version >= fenced_from)
    except LogError as error:
        return error_code(error)
    return ErrorCode.none


def init_transactional_producer_id(request: Any, ctx: RequestContext) -> Any:
    """InitProducerId with a transactional id: new id, epoch bump, or fencing of the previous one."""
    pid, epoch, code = -1, -1, ErrorCode.none
    try:
        meta = services(ctx).init_producer_id(
            request.transactional_id,
            int(request.transaction_timeout.total_seconds() * 1000),
            getattr(request, "producer_id", -1),
            getattr(request, "producer_epoch", -1),
        )
    except TxnRequestError as error:
        code = wire_code(error.code, fenced_supported=ctx.version >= 4)
    except LogError as error:
        code = error_code(error)
    else:
        pid, epoch = meta.producer_id, meta.producer_epoch
    return ctx.build(throttle_time=NO_THROTTLE, error_code=code, producer_id=pid, producer_epoch=epoch)


def handle_add_partitions(request: Any, ctx: RequestContext) -> Any:
    if ctx.version >= 4:
        return _add_partitions_batched(request, ctx)
    topics = request.v3_and_below_topics
    known = ctx.broker.topics
    wanted: list[tuple[str, int]] = []
    unknown: set[tuple[str, int]] = set()
    for topic in topics:
        info = known.get(topic.name)
        for p in topic.partitions:
            if info is None or not 0 <= p < info.partitions:
                unknown.add((topic.name, p))
            else:
                wanted.append((topic.name, p))
    if unknown:
        # Kafka answers UNKNOWN_TOPIC_OR_PARTITION for those and OPERATION_NOT_ATTEMPTED for the rest.
        codes = {tp: ErrorCode.operation_not_attempted for tp in wanted}
        codes.update({tp: ErrorCode.unknown_topic_or_partition for tp in unknown})
    else:
        code = _run(
            ctx,
            lambda: services(ctx).add_partitions(
                request.v3_and_below_transactional_id,
                request.v3_and_below_producer_id,
                request.v3_and_below_producer_epoch,
                wanted,
            ),
            fenced_from=2,
        )
        codes = dict.fromkeys(wanted, code)
    return ctx.build(
        throttle_time=NO_THROTTLE,
        results_by_topic_v3_and_below=_topic_results(ctx, topics, codes),
    )


def _topic_results(
    ctx: RequestContext, topics: Any, codes: dict[tuple[str, int], ErrorCode]
) -> tuple[Any, ...]:
    """AddPartitionsToTxn's per-topic results, one code per requested partition."""
    return tuple(
        ctx.build(
            "AddPartitionsToTxnTopicResult",
            name=topic.name,
            results_by_partition=tuple(
                ctx.build(
                    "AddPartitionsToTxnPartitionResult",
                    partition_index=p,
                    partition_error_code=codes[(topic.name, p)],
                )
                for p in topic.partitions
            ),
        )
        for topic in topics
    )


def _add_partitions_batched(request: Any, ctx: RequestContext) -> Any:
    """AddPartitionsToTxn v4+: per transaction, add its partitions or (``verify_only``) check
    that they are in its open transaction."""
    known = ctx.broker.topics
    results = []
    for txn in request.transactions:
        wanted = [(t.name, p) for t in txn.topics for p in t.partitions]
        unknown = {
            (name, p)
            for name, p in wanted
            if (info := known.get(name)) is None or not 0 <= p < info.partitions
        }
        codes: dict[tuple[str, int], ErrorCode]
        if unknown:
            codes = {tp: ErrorCode.operation_not_attempted for tp in wanted}
            codes.update(dict.fromkeys(unknown, ErrorCode.unknown_topic_or_partition))
        else:
            codes = _add_or_verify(ctx, txn, wanted)
        results.append(
            ctx.build(
                "AddPartitionsToTxnResult",
                transactional_id=txn.transactional_id,
                topic_results=_topic_results(ctx, txn.topics, codes),
            )
        )
    return ctx.build(
        throttle_time=NO_THROTTLE, error_code=ErrorCode.none, results_by_transaction=tuple(results)
    )


def _add_or_verify(
    ctx: RequestContext, txn: Any, wanted: list[tuple[str, int]]
) -> dict[tuple[str, int], ErrorCode]:
    try:
        if txn.verify_only:
            found = services(ctx).verify_partitions(
                txn.transactional_id, txn.producer_id, txn.producer_epoch, wanted
            )
            return {tp: _abortable(ctx, code) for tp, code in found.items()}
        services(ctx).add_partitions(
            txn.transactional_id, txn.producer_id, txn.producer_epoch, wanted, client_version=TV_2
        )
    except TxnRequestError as error:
        return dict.fromkeys(wanted, _abortable(ctx, error.code))
    except LogError as error:
        return dict.fromkeys(wanted, error_code(error))
    return dict.fromkeys(wanted, ErrorCode.none)


def _abortable(ctx: RequestContext, code: TxnErrorCode) -> ErrorCode:
    if code is TxnErrorCode.TRANSACTION_ABORTABLE and ctx.version < 5:
        return ErrorCode.invalid_txn_state
    return wire_code(code, fenced_supported=True)


def handle_add_offsets(request: Any, ctx: RequestContext) -> Any:
    code = _run(
        ctx,
        lambda: services(ctx).add_offsets(
            request.transactional_id, request.producer_id, request.producer_epoch
        ),
        fenced_from=2,
    )
    return ctx.build(throttle_time=NO_THROTTLE, error_code=code)


async def handle_end_txn(request: Any, ctx: RequestContext) -> Any:
    pending: list[Any] = []
    code = _run(
        ctx,
        lambda: pending.append(
            services(ctx).end_txn(
                request.transactional_id,
                request.producer_id,
                request.producer_epoch,
                bool(request.committed),
                tv2=ctx.version >= 5,
            )
        ),
        fenced_from=2,
    )
    if pending and pending[0] is not None:  # share-state markers (KIP-1289), then the completion
        try:
            await pending[0]
        except PersisterError as error:
            code = persister_error_code(error)
    pid, epoch = -1, -1
    if code is ErrorCode.none and ctx.version >= 5:  # the producer continues at the bumped epoch
        pid, epoch = services(ctx).producer(request.transactional_id)
    return ctx.build(throttle_time=NO_THROTTLE, error_code=code, producer_id=pid, producer_epoch=epoch)


def handle_txn_offset_commit(request: Any, ctx: RequestContext) -> Any:
    commits, unknown = commits_of(request, ctx)
    codes: dict[tuple[str, int], ErrorCode] = dict.fromkeys(unknown, ErrorCode.unknown_topic_or_partition)
    groups = ctx.broker.consumer_groups
    txns = ctx.broker.transactions
    check = (
        TxnErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if txns is None or groups is None
        else txns.verify_offsets(
            request.transactional_id,
            request.producer_id,
            request.producer_epoch,
            implicit=ctx.version >= 5 and bool(commits),
        )
    )
    if check is TxnErrorCode.TRANSACTION_ABORTABLE and ctx.version < 4:
        check = TxnErrorCode.INVALID_TXN_STATE
    if check is not TxnErrorCode.NONE:
        for c in commits:
            codes[(c.topic, c.partition)] = wire_code(check, fenced_supported=False)
    elif commits and groups is not None:
        try:
            errors = groups.commit_transactional_offsets(
                request.group_id,
                getattr(request, "generation_id", -1),
                getattr(request, "member_id", ""),
                getattr(request, "group_instance_id", None),
                commits,
                producer_id=request.producer_id,
                producer_epoch=request.producer_epoch,
            )
            for c, e in zip(commits, errors, strict=True):
                codes[(c.topic, c.partition)] = ErrorCode(e.value)
        except ClassicRequestError as error:
            for c in commits:
                codes[(c.topic, c.partition)] = ErrorCode(error.code.value)
    return ctx.build(
        throttle_time=NO_THROTTLE,
        topics=partition_codes(
            ctx,
            request.topics,
            codes,
            topic_class="TxnOffsetCommitResponseTopic",
            partition_class="TxnOffsetCommitResponsePartition",
        ),
    )


HANDLERS = {
    ADD_PARTITIONS_TO_TXN: (VersionRange(0, 5), handle_add_partitions),
    ADD_OFFSETS_TO_TXN: (VersionRange(0, 4), handle_add_offsets),
    END_TXN: (VersionRange(0, 5), handle_end_txn),
    TXN_OFFSET_COMMIT: (VersionRange(0, 5), handle_txn_offset_commit),
}
