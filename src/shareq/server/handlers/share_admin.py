"""Share-group administration: ShareGroupDescribe (77), DescribeShareGroupOffsets (90),
AlterShareGroupOffsets (91) and DeleteShareGroupOffsets (92).

Offsets are the share-partitions' start offsets (SPSO) in durable share state. Describing reads
state summaries and computes KIP-1226 lag, ``end offset - SPSO - delivery_complete_count``
(-1 when the share-partition has no start offset yet). Altering and deleting need an empty group
and go to durable state first; a cached share-partition engine is then dropped so its next
fetch re-reads what was written.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from shareq.coordinators.group import GroupDescription, GroupState, TopicPartitions
from shareq.protocol import VersionRange
from shareq.protocol.api_keys import (
    ALTER_SHARE_GROUP_OFFSETS,
    DELETE_SHARE_GROUP_OFFSETS,
    DESCRIBE_SHARE_GROUP_OFFSETS,
    SHARE_GROUP_DESCRIBE,
)
from shareq.share.persister import (
    UNINITIALIZED_DELIVERY_COMPLETE_COUNT,
    Persister,
    PersisterError,
    SharePartitionKey,
    WriteStateParams,
)

from ..clock import now_ms
from ..context import NO_THROTTLE, RequestContext
from .group_support import (
    AdminFailure,
    coordinator,
    drop_share_partition,
    end_offset,
    failure_of,
    persist_records,
    persister,
    topic_image,
)

UNINITIALIZED_START_OFFSET = -1
UNINITIALIZED_LAG = -1
ZERO_UUID = uuid.UUID(int=0)
NO_LEADER_EPOCH = -1


# ----------------------------------------------------------------------------- ShareGroupDescribe


def handle_share_group_describe(request: Any, ctx: RequestContext) -> Any:
    groups = []
    for group_id in request.group_ids:
        try:
            if not group_id:
                raise AdminFailure(ErrorCode.invalid_group_id, "group id must not be empty")
            try:
                description = coordinator(ctx).describe(group_id)
            except Exception as error:
                raise failure_of(error) from None
            groups.append(_described(ctx, description))
        except AdminFailure as failure:
            groups.append(
                ctx.build(
                    "DescribedGroup",
                    error_code=failure.code,
                    error_message=str(failure),
                    group_id=group_id,
                    group_state="",
                    group_epoch=0,
                    assignment_epoch=0,
                    assignor_name="",
                    members=(),
                )
            )
    return ctx.build(throttle_time=NO_THROTTLE, groups=tuple(groups))


def _described(ctx: RequestContext, g: GroupDescription) -> Any:
    def assignment(parts: Sequence[TopicPartitions]) -> Any:
        return ctx.build(
            "Assignment",
            topic_partitions=tuple(
                ctx.build(
                    "TopicPartitions",
                    topic_id=tp.topic_id,
                    topic_name=tp.topic_name,
                    partitions=tuple(tp.partitions),
                )
                for tp in parts
            ),
        )

    members = tuple(
        ctx.build(
            "Member",
            member_id=m.member_id,
            rack_id=m.rack_id,
            member_epoch=m.member_epoch,
            client_id=m.client_id,
            client_host=m.client_host,
            subscribed_topic_names=m.subscribed_topic_names,
            assignment=assignment(m.assignment),
        )
        for m in g.members
    )
    return ctx.build(
        "DescribedGroup",
        error_code=ErrorCode.none,
        error_message=None,
        group_id=g.group_id,
        group_state=g.group_state,
        group_epoch=g.group_epoch,
        assignment_epoch=g.assignment_epoch,
        assignor_name=g.assignor_name,
        members=members,
    )


# ----------------------------------------------------------------------------- DescribeShareGroupOffsets


async def handle_describe_share_group_offsets(request: Any, ctx: RequestContext) -> Any:
    groups = []
    for group in request.groups:
        try:
            topics = await _describe_offsets(ctx, group.group_id, group.topics)
            code, message = ErrorCode.none, None
        except Exception as error:
            failure = failure_of(error)
            topics, code, message = (), failure.code, str(failure)
        groups.append(
            ctx.build(
                "DescribeShareGroupOffsetsResponseGroup",
                group_id=group.group_id,
                topics=topics,
                error_code=code,
                error_message=message,
            )
        )
    return ctx.build(throttle_time=NO_THROTTLE, groups=tuple(groups))


async def _describe_offsets(ctx: RequestContext, group_id: str, wanted: Any) -> tuple[Any, ...]:
    """As Kafka: a topic that does not exist, or a share-partition without state, answers start
    offset -1 rather than an error; ``wanted=None`` means every initialized share-partition."""
    if not group_id:
        raise AdminFailure(ErrorCode.invalid_group_id, "group id must not be empty")
    groups = coordinator(ctx)
    image = topic_image(ctx)
    requested: list[tuple[str, uuid.UUID | None, tuple[int, ...]]]
    if wanted is None:
        requested = [
            (tp.topic_name, tp.topic_id, tp.partitions)
            for tp in groups.initialized_partitions(group_id)
            if tp.topic_name in image
        ]
    else:
        requested = []
        for topic in wanted:
            meta = image.get(topic.topic_name)
            tid = None if meta is None else meta.topic_id
            requested.append((topic.topic_name, tid, tuple(int(p) for p in topic.partitions)))
    store = persister(ctx)
    out = []
    for name, tid, partitions in requested:
        rows = []
        for p in partitions:
            code, message = ErrorCode.none, None
            start, leader_epoch, lag = UNINITIALIZED_START_OFFSET, 0, UNINITIALIZED_LAG
            pending: tuple[Any, ...] = ()
            delayed, next_due = 0, 0
            if tid is not None:
                key = SharePartitionKey(group_id=group_id, topic_id=tid, partition=p)
                try:
                    start, leader_epoch, lag = await _offset_and_lag(ctx, store, key, name)
                    pending, delayed, next_due = await _pending_and_delayed(ctx, store, key)
                except PersisterError as error:  # this share-partition only, e.g. still loading
                    code, message = ErrorCode(error.error_code), str(error)
            rows.append(
                ctx.build(
                    "DescribeShareGroupOffsetsResponsePartition",
                    partition_index=p,
                    start_offset=start,
                    leader_epoch=max(leader_epoch, 0),
                    lag=lag,
                    error_code=code,
                    error_message=message,
                    pending_transactions=pending,
                    delayed_records=delayed,
                    next_redelivery_ms=next_due,
                )
            )
        out.append(
            ctx.build(
                "DescribeShareGroupOffsetsResponseTopic",
                topic_name=name,
                topic_id=tid if tid is not None else ZERO_UUID,
                partitions=tuple(rows),
            )
        )
    return tuple(out)


async def _offset_and_lag(
    ctx: RequestContext, store: Persister, key: SharePartitionKey, topic: str
) -> tuple[int, int, int]:
    """(SPSO, leader epoch, lag) from the durable state summary; -1s where unknown."""
    summary = await store.read_state_summary(key)
    if summary is None:
        return UNINITIALIZED_START_OFFSET, 0, UNINITIALIZED_LAG
    start = summary.start_offset
    end = end_offset(ctx, topic, key.partition)
    if (
        start == UNINITIALIZED_START_OFFSET
        or summary.delivery_complete_count == UNINITIALIZED_DELIVERY_COMPLETE_COUNT
        or end is None
    ):
        return start, summary.leader_epoch, UNINITIALIZED_LAG
    # the SPSO may have passed share state at the tail that the visible end stops before
    return start, summary.leader_epoch, max(end, start) - start - summary.delivery_complete_count


async def _pending_and_delayed(
    ctx: RequestContext, store: Persister, key: SharePartitionKey
) -> tuple[tuple[Any, ...], int, int]:
    """The transactions holding records of ``key`` in TX_PENDING (KIP-1289), and the records
    waiting out a redelivery backoff with the earliest due time, from the durable state. Only v1
    (shareq's tagged fields) carries them."""
    if ctx.version < 1:
        return (), 0, 0
    state = await store.read_state(key, leader_epoch=-1)
    if state is None:
        return (), 0, 0
    now = now_ms()
    waiting = [d for d in state.delays if d.due_ms > now]
    delayed = sum(d.last_offset - d.first_offset + 1 for d in waiting)
    next_due = min((d.due_ms for d in waiting), default=0)
    held: dict[tuple[int, int], int] = {}
    for batch in state.pending_txn_batches:
        pid = (batch.producer_id, batch.producer_epoch)
        held[pid] = held.get(pid, 0) + batch.last_offset - batch.first_offset + 1
    pending = tuple(
        ctx.build(
            "DescribeShareGroupOffsetsPendingTransaction", producer_id=pid, producer_epoch=epoch, records=n
        )
        for (pid, epoch), n in sorted(held.items())
    )
    return pending, delayed, next_due


# ----------------------------------------------------------------------------- AlterShareGroupOffsets


async def handle_alter_share_group_offsets(request: Any, ctx: RequestContext) -> Any:
    try:
        responses = await _alter_offsets(ctx, request.group_id, request.topics)
        code, message = ErrorCode.none, None
    except Exception as error:
        failure = failure_of(error)
        responses, code, message = (), failure.code, str(failure)
    return ctx.build(throttle_time=NO_THROTTLE, error_code=code, error_message=message, responses=responses)


async def _refuse_while_staged(ctx: RequestContext, group_id: str) -> None:
    """Offsets may not change under acknowledgements a transaction staged (KIP-1289): refuse with
    UNSTABLE_OFFSET_COMMIT naming the producer ids; aborting those transactions clears it."""
    store = persister(ctx)
    pids: set[int] = set()
    for tp in coordinator(ctx).initialized_partitions(group_id):
        for index in tp.partitions:
            key = SharePartitionKey(group_id=group_id, topic_id=tp.topic_id, partition=index)
            state = await store.read_state(key, leader_epoch=-1)
            if state is not None:
                pids.update(p.producer_id for p in state.pending_txn_batches)
    if pids:
        raise AdminFailure(
            ErrorCode.unstable_offset_commit,
            f"share group {group_id} has records staged by transactions of producer ids {sorted(pids)}",
        )


async def _alter_offsets(ctx: RequestContext, group_id: str, topics: Any) -> tuple[Any, ...]:
    """Initialize each named share-partition's state at its new SPSO under a newer state epoch."""
    if not group_id:
        raise AdminFailure(ErrorCode.invalid_group_id, "group id must not be empty")
    groups = coordinator(ctx)
    if groups.group_state(group_id) is GroupState.STABLE:
        raise AdminFailure(ErrorCode.non_empty_group, f"share group {group_id} still has members")
    await _refuse_while_staged(ctx, group_id)
    image = topic_image(ctx)
    # Validate everything before changing anything; per-partition errors do not stop the rest.
    errors: dict[tuple[str, int], tuple[ErrorCode, str | None]] = {}
    valid: list[tuple[str, uuid.UUID, int, int]] = []
    for topic in topics:
        meta = image.get(topic.topic_name)
        for part in topic.partitions:
            p, offset = int(part.partition_index), int(part.start_offset)
            if meta is None or not 0 <= p < meta.partitions:
                errors[(topic.topic_name, p)] = (
                    ErrorCode.unknown_topic_or_partition,
                    f"unknown topic-partition {topic.topic_name}-{p}",
                )
            elif offset < 0:
                errors[(topic.topic_name, p)] = (
                    ErrorCode.invalid_request,
                    f"start offset {offset} of {topic.topic_name}-{p} must not be negative",
                )
            else:
                valid.append((topic.topic_name, meta.topic_id, p, offset))
    done: list[TopicPartitions] = []
    if valid:
        records, state_epoch = groups.prepare_alter_offsets(group_id)
        persist_records(ctx, records)
        store = persister(ctx)
        for name, tid, p, offset in valid:
            key = SharePartitionKey(group_id=group_id, topic_id=tid, partition=p)
            try:
                await store.initialize_state(key, state_epoch=state_epoch, start_offset=offset)
                # Nothing at or after the new SPSO is delivered: record a delivery complete count
                # of 0 so lag is known at once, not only after the first fetch.
                await store.write_state(
                    WriteStateParams(
                        key=key,
                        state_epoch=state_epoch,
                        leader_epoch=NO_LEADER_EPOCH,
                        start_offset=offset,
                        delivery_complete_count=0,
                        state_batches=(),
                    )
                )
            except Exception as error:
                failure = failure_of(error)
                errors[(name, p)] = (failure.code, str(failure))
                continue
            drop_share_partition(ctx, key)
            done.append(TopicPartitions(topic_id=tid, topic_name=name, partitions=(p,)))
        persist_records(ctx, groups.initialize_complete(group_id, done))
    out = []
    for topic in topics:
        meta = image.get(topic.topic_name)
        rows = []
        for part in topic.partitions:
            code, message = errors.get((topic.topic_name, int(part.partition_index)), (ErrorCode.none, None))
            rows.append(
                ctx.build(
                    "AlterShareGroupOffsetsResponsePartition",
                    partition_index=part.partition_index,
                    error_code=code,
                    error_message=message,
                )
            )
        out.append(
            ctx.build(
                "AlterShareGroupOffsetsResponseTopic",
                topic_name=topic.topic_name,
                topic_id=meta.topic_id if meta is not None else ZERO_UUID,
                partitions=tuple(rows),
            )
        )
    return tuple(out)


# ----------------------------------------------------------------------------- DeleteShareGroupOffsets


async def handle_delete_share_group_offsets(request: Any, ctx: RequestContext) -> Any:
    try:
        responses = await _delete_offsets(ctx, request.group_id, [t.topic_name for t in request.topics])
        code, message = ErrorCode.none, None
    except Exception as error:
        failure = failure_of(error)
        responses, code, message = (), failure.code, str(failure)
    return ctx.build(throttle_time=NO_THROTTLE, error_code=code, error_message=message, responses=responses)


async def _delete_offsets(ctx: RequestContext, group_id: str, names: Sequence[str]) -> tuple[Any, ...]:
    """Delete the share state of whole topics (an empty group only), then forget them in the group."""
    if not group_id:
        raise AdminFailure(ErrorCode.invalid_group_id, "group id must not be empty")
    groups = coordinator(ctx)
    groups.check_offsets_deletable(group_id)
    await _refuse_while_staged(ctx, group_id)
    image = topic_image(ctx)
    initialized = {tp.topic_id: tp for tp in groups.initialized_partitions(group_id)}
    store = persister(ctx)
    results: list[tuple[str, uuid.UUID | None, ErrorCode, str | None]] = []
    deleted: list[uuid.UUID] = []
    for name in names:
        meta = image.get(name)
        if meta is None:
            results.append((name, None, ErrorCode.unknown_topic_or_partition, f"unknown topic {name}"))
            continue
        state = initialized.get(meta.topic_id)
        if state is None:
            results.append(
                (
                    name,
                    meta.topic_id,
                    ErrorCode.unknown_topic_or_partition,
                    f"share group {group_id} has no offsets for topic {name}",
                )
            )
            continue
        keys = [
            SharePartitionKey(group_id=group_id, topic_id=meta.topic_id, partition=p)
            for p in state.partitions
        ]
        try:
            for key in keys:
                await store.delete_state(key)
        except Exception as error:
            failure = failure_of(error)
            results.append((name, meta.topic_id, failure.code, str(failure)))
            continue
        for key in keys:
            drop_share_partition(ctx, key)
        deleted.append(meta.topic_id)
        results.append((name, meta.topic_id, ErrorCode.none, None))
    persist_records(ctx, groups.delete_offsets(group_id, deleted))
    return tuple(
        ctx.build(
            "DeleteShareGroupOffsetsResponseTopic",
            topic_name=name,
            topic_id=tid if tid is not None else ZERO_UUID,
            error_code=code,
            error_message=message,
        )
        for name, tid, code, message in results
    )


HANDLERS = {
    SHARE_GROUP_DESCRIBE: (VersionRange(1, 1), handle_share_group_describe),
    DESCRIBE_SHARE_GROUP_OFFSETS: (VersionRange(0, 1), handle_describe_share_group_offsets),
    ALTER_SHARE_GROUP_OFFSETS: (VersionRange(0, 0), handle_alter_share_group_offsets),
    DELETE_SHARE_GROUP_OFFSETS: (VersionRange(0, 0), handle_delete_share_group_offsets),
}
