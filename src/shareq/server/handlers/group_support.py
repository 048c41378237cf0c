"""What the group admin handlers need from the broker's share services, in one place.

The share services (group coordinator, persister, share-partition cache, group-record log) are
attached to the broker as ``broker.share``. The admin handlers reach them only through these
functions, so the handlers read as the protocol and this module as the wiring.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from shareq.coordinators.group import (
    CoordinatorRecord,
    GroupRequestError,
    ShareGroupCoordinator,
    TopicMetadata,
)
from shareq.share.persister import Persister, PersisterError, SharePartitionKey

from ..context import RequestContext

if TYPE_CHECKING:
    from ..share.services import ShareServices


class AdminFailure(Exception):
    """A whole request (or one group of it) fails with ``code``; ``str()`` is the message."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def failure_of(error: BaseException) -> AdminFailure:
    """Map a coordinator or persister refusal to the Kafka error the client sees."""
    if isinstance(error, AdminFailure):
        return error
    if isinstance(error, GroupRequestError):
        return AdminFailure(ErrorCode(error.code.value), error.message)
    if isinstance(error, PersisterError):
        return AdminFailure(ErrorCode(error.error_code), str(error))
    raise error


def services(ctx: RequestContext) -> ShareServices:
    """The broker's share services; COORDINATOR_NOT_AVAILABLE while they are not running."""
    share = ctx.broker.share
    if share is None:
        raise AdminFailure(ErrorCode.coordinator_not_available, "share groups are not running")
    return share


def coordinator(ctx: RequestContext) -> ShareGroupCoordinator:
    return services(ctx).coordinator


def persister(ctx: RequestContext) -> Persister:
    return services(ctx).persister


def persist_records(ctx: RequestContext, records: Iterable[CoordinatorRecord]) -> None:
    """Append group-coordinator records to the group-metadata log before answering."""
    batch = tuple(records)
    if batch:
        services(ctx).persist_group_records(batch)


def drop_share_partition(ctx: RequestContext, key: SharePartitionKey) -> None:
    """Forget a cached share-partition engine so that its next use re-reads the durable state."""
    services(ctx).partitions.forget(key)


def group_config_changed(ctx: RequestContext, group_id: str) -> None:
    """Live share-partitions of the group pick up its new configs."""
    services(ctx).group_config_changed(group_id)


def topic_image(ctx: RequestContext) -> dict[str, TopicMetadata]:
    """Every user topic as the coordinator sees the metadata image."""
    return {
        t.name: TopicMetadata(topic_id=t.topic_id, partitions=t.partitions)
        for t in ctx.broker.topics
        if not t.internal
    }


def end_offset(ctx: RequestContext, topic: str, partition: int) -> int | None:
    """The partition's end offset for lag (the high watermark of a single node, less the
    share-state control batches at its tail, which no consumer is given), or None if it is gone."""
    found = ctx.broker.partition(topic, partition)
    return None if found is None else found.log.visible_end_offset


__all__ = [
    "AdminFailure",
    "PersisterError",
    "coordinator",
    "drop_share_partition",
    "end_offset",
    "failure_of",
    "group_config_changed",
    "persist_records",
    "persister",
    "services",
    "topic_image",
]
