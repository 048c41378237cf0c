"""Metadata: one broker node, topics by name, by topic id (null name) or all, with auto-create."""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from shareq.protocol import VersionRange
from shareq.protocol.api_keys import METADATA

from ..acl_operations import (
    CLUSTER_OPERATIONS,
    TOPIC_OPERATIONS,
    UNKNOWN_AUTHORIZED_OPERATIONS,
    authorized,
)
from ..context import NO_THROTTLE, RequestContext
from ..topics import TopicInfo, validate_topic_name

ZERO_UUID = uuid.UUID(int=0)


def handle_metadata(request: Any, ctx: RequestContext) -> Any:
    broker = ctx.broker
    registry = broker.topics
    results: list[Any] = []
    ops = authorized(bool(getattr(request, "include_topic_authorized_operations", False)), TOPIC_OPERATIONS)
    if request.topics is None or (ctx.version == 0 and not request.topics):
        results = [_topic(ctx, topic, ops) for topic in registry if not topic.internal]
    else:
        allow_auto = getattr(request, "allow_auto_topic_creation", True)
        for wanted in request.topics:
            name = getattr(wanted, "name", None)
            topic_id = getattr(wanted, "topic_id", None)
            if name is None and topic_id is not None and topic_id != ZERO_UUID:
                found = registry.by_id(topic_id)
                if found is None:
                    results.append(_missing(ctx, None, topic_id, ErrorCode.unknown_topic_id))
                else:
                    results.append(_topic(ctx, found, ops))
                continue
            if name is None:
                results.append(_missing(ctx, None, ZERO_UUID, ErrorCode.invalid_request))
                continue
            topic = registry.get(name)
            if topic is None and allow_auto:
                try:
                    validate_topic_name(name)
                except ValueError:
                    results.append(_missing(ctx, name, ZERO_UUID, ErrorCode.invalid_topic_exception))
                    continue
                topic = broker.auto_create(name)
            if topic is None:
                results.append(_missing(ctx, name, ZERO_UUID, ErrorCode.unknown_topic_or_partition))
            else:
                results.append(_topic(ctx, topic, ops))
    node = ctx.build(
        "MetadataResponseBroker",
        node_id=broker.node_id,
        host=ctx.advertised_host,
        port=ctx.advertised_port,
        rack=broker.config["broker.rack"],
    )
    return ctx.build(
        throttle_time=NO_THROTTLE,
        brokers=(node,),
        cluster_id=registry.cluster_id,
        controller_id=broker.node_id,
        topics=tuple(results),
        cluster_authorized_operations=authorized(
            bool(getattr(request, "include_cluster_authorized_operations", False)), CLUSTER_OPERATIONS
        ),
        error_code=ErrorCode.none,
    )


def _topic(ctx: RequestContext, topic: TopicInfo, operations: int) -> Any:
    node = ctx.broker.node_id
    partitions = tuple(
        ctx.build(
            "MetadataResponsePartition",
            error_code=ErrorCode.none,
            partition_index=index,
            leader_id=node,
            leader_epoch=0,
            replica_nodes=(node,),
            isr_nodes=(node,),
            offline_replicas=(),
        )
        for index in range(topic.partitions)
    )
    return ctx.build(
        "MetadataResponseTopic",
        error_code=ErrorCode.none,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.internal,
        partitions=partitions,
        topic_authorized_operations=operations,
    )


def _missing(ctx: RequestContext, name: str | None, topic_id: uuid.UUID, code: ErrorCode) -> Any:
    return ctx.build(
        "MetadataResponseTopic",
        error_code=code,
        name=name if name is not None or ctx.version >= 12 else "",
        topic_id=topic_id,
        is_internal=False,
        partitions=(),
        topic_authorized_operations=UNKNOWN_AUTHORIZED_OPERATIONS,
    )


HANDLERS = {METADATA: (VersionRange(4, 13), handle_metadata)}
