"""CreatePartitions, DeleteRecords and DescribeTopicPartitions (KIP-966): the partition-level
admin calls, answered as a one-node Kafka answers them."""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from shareq.log.errors import LogError
from shareq.protocol import VersionRange
from shareq.protocol.api_keys import CREATE_PARTITIONS, DELETE_RECORDS, DESCRIBE_TOPIC_PARTITIONS

from ..acl_operations import TOPIC_OPERATIONS, authorized
from ..context import NO_THROTTLE, RequestContext
from ..errors import error_code
from ..topics import TopicInfo

MAX_PARTITIONS = 10_000
HIGH_WATERMARK = -1


def handle_create_partitions(request: Any, ctx: RequestContext) -> Any:
    broker = ctx.broker
    results = []
    seen: set[str] = set()
    for wanted in request.topics:
        code, message = ErrorCode.none, None
        topic = broker.topics.get(wanted.name)
        if wanted.name in seen:
            code, message = ErrorCode.invalid_request, "Duplicate topic in request."
        elif topic is None or topic.internal:
            code, message = (
                ErrorCode.unknown_topic_or_partition,
                "This server does not host this topic-partition.",
            )
        elif wanted.count < topic.partitions:
            code, message = (
                ErrorCode.invalid_partitions,
                f"The topic {wanted.name} currently has {topic.partitions} partition(s); "
                f"{wanted.count} would not be an increase.",
            )
        elif wanted.count == topic.partitions:
            code, message = (
                ErrorCode.invalid_partitions,
                f"Topic already has {topic.partitions} partition(s).",
            )
        elif wanted.count > MAX_PARTITIONS:
            code, message = ErrorCode.invalid_partitions, f"invalid partition count {wanted.count}"
        elif wanted.assignments is not None and not _assignments_ok(ctx, wanted, topic):
            code, message = (
                ErrorCode.invalid_replica_assignment,
                f"The manual partition assignment includes broker(s) that are not registered: "
                f"only broker {broker.node_id} is.",
            )
        elif not request.validate_only:
            broker.create_partitions(wanted.name, wanted.count)
        seen.add(wanted.name)
        results.append(
            ctx.build("CreatePartitionsTopicResult", name=wanted.name, error_code=code, error_message=message)
        )
    return ctx.build(throttle_time=NO_THROTTLE, results=tuple(results))


def _assignments_ok(ctx: RequestContext, wanted: Any, topic: TopicInfo) -> bool:
    new = wanted.count - topic.partitions
    if len(wanted.assignments) != new:
        return False
    return all(tuple(a.broker_ids) == (ctx.broker.node_id,) for a in wanted.assignments)


def handle_delete_records(request: Any, ctx: RequestContext) -> Any:
    broker = ctx.broker
    topics = []
    for topic in request.topics:
        partitions = []
        for wanted in topic.partitions:
            code, low = ErrorCode.none, -1
            partition = broker.partition(topic.name, wanted.partition_index)
            if partition is None:
                code = ErrorCode.unknown_topic_or_partition
            else:
                offset = partition.log.log_end_offset if wanted.offset == HIGH_WATERMARK else wanted.offset
                try:
                    if offset < 0 or offset > partition.log.log_end_offset:
                        code = ErrorCode.offset_out_of_range
                    else:
                        low = broker.delete_records(topic.name, wanted.partition_index, offset)
                except LogError as error:
                    code = error_code(error)
            partitions.append(
                ctx.build(
                    "DeleteRecordsPartitionResult",
                    partition_index=wanted.partition_index,
                    low_watermark=low,
                    error_code=code,
                )
            )
        topics.append(ctx.build("DeleteRecordsTopicResult", name=topic.name, partitions=tuple(partitions)))
    return ctx.build(throttle_time=NO_THROTTLE, topics=tuple(topics))


def handle_describe_topic_partitions(request: Any, ctx: RequestContext) -> Any:
    """Topics by name, sorted, paged by ``response_partition_limit`` with a cursor (KIP-966)."""
    registry = ctx.broker.topics
    node = ctx.broker.node_id
    asked = {t.name for t in request.topics} if request.topics else {t.name for t in registry}
    names = sorted(asked)
    cursor = request.cursor
    if cursor is not None:
        names = [n for n in names if n >= cursor.topic_name]
    budget = max(1, int(request.response_partition_limit))
    results: list[Any] = []
    next_cursor = None
    for name in names:
        topic = registry.get(name)
        if topic is None:
            results.append(
                ctx.build(
                    "DescribeTopicPartitionsResponseTopic",
                    error_code=ErrorCode.unknown_topic_or_partition,
                    name=name,
                    topic_id=_ZERO,
                    is_internal=False,
                    partitions=(),
                    topic_authorized_operations=authorized(False, TOPIC_OPERATIONS),
                )
            )
            continue
        first = cursor.partition_index if cursor is not None and cursor.topic_name == name else 0
        if budget <= 0:
            next_cursor = ctx.build("Cursor", topic_name=name, partition_index=first)
            break
        last = min(topic.partitions, first + budget)
        budget -= last - first
        partitions = tuple(
            ctx.build(
                "DescribeTopicPartitionsResponsePartition",
                error_code=ErrorCode.none,
                partition_index=index,
                leader_id=node,
                leader_epoch=0,
                replica_nodes=(node,),
                isr_nodes=(node,),
                eligible_leader_replicas=(),
                last_known_elr=(),
                offline_replicas=(),
            )
            for index in range(first, last)
        )
        results.append(
            ctx.build(
                "DescribeTopicPartitionsResponseTopic",
                error_code=ErrorCode.none,
                name=name,
                topic_id=topic.topic_id,
                is_internal=topic.internal,
                partitions=partitions,
                topic_authorized_operations=authorized(True, TOPIC_OPERATIONS),
            )
        )
        if last < topic.partitions:
            next_cursor = ctx.build("Cursor", topic_name=name, partition_index=last)
            break
    return ctx.build(throttle_time=NO_THROTTLE, topics=tuple(results), next_cursor=next_cursor)


_ZERO = uuid.UUID(int=0)

HANDLERS = {
    CREATE_PARTITIONS: (VersionRange(0, 3), handle_create_partitions),
    DELETE_RECORDS: (VersionRange(0, 2), handle_delete_records),
    DESCRIBE_TOPIC_PARTITIONS: (VersionRange(0, 0), handle_describe_topic_partitions),
}
