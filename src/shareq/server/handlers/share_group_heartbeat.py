"""ShareGroupHeartbeat v1: membership and assignment, answered after the group records are durable.

When the coordinator asks for share-partition state to be initialized, the shell initializes it
through the persister and answers with the resulting assignment in the same response (see
``ShareServices.heartbeat``), so a new consumer's first poll does not wait a heartbeat interval.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterable
from typing import Any

from kio.schema.errors import ErrorCode

from shareq.coordinators.consumer import ConsumerHeartbeatResult
from shareq.coordinators.group import GroupRequestError, HeartbeatRequest, HeartbeatResult
from shareq.protocol import VersionRange
from shareq.protocol.api_keys import SHARE_GROUP_HEARTBEAT

from ..context import NO_THROTTLE, RequestContext


async def handle_share_group_heartbeat(request: Any, ctx: RequestContext) -> Any:
    share = ctx.broker.share
    assert share is not None
    names = request.subscribed_topic_names
    heartbeat = HeartbeatRequest(
        group_id=request.group_id,
        member_id=request.member_id or "",
        member_epoch=request.member_epoch,
        rack_id=request.rack_id,
        subscribed_topic_names=None if names is None else tuple(names),
        client_id=ctx.header.client_id or "",
        client_host=ctx.client_host,
    )
    try:
        result = await share.heartbeat(heartbeat)
    except GroupRequestError as error:
        return heartbeat_error(ctx, ErrorCode(error.code.value), error.message)
    assignment = None
    if result.assignment is not None:
        assignment = [(tp.topic_id, tp.partitions) for tp in result.assignment]
    return heartbeat_answer(ctx, result, assignment)


def heartbeat_answer(
    ctx: RequestContext,
    result: HeartbeatResult | ConsumerHeartbeatResult,
    assignment: Iterable[tuple[uuid.UUID, Iterable[int]]] | None,
) -> Any:
    """A successful ShareGroupHeartbeat or ConsumerGroupHeartbeat (both responses have these
    fields); ``assignment`` the (topic id, partitions) now assigned, None when unchanged."""
    return ctx.build(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        member_id=result.member_id,
        member_epoch=result.member_epoch,
        heartbeat_interval=datetime.timedelta(milliseconds=result.heartbeat_interval_ms),
        assignment=None
        if assignment is None
        else ctx.build(
            "Assignment",
            topic_partitions=tuple(
                ctx.build("TopicPartitions", topic_id=t, partitions=tuple(ps)) for t, ps in assignment
            ),
        ),
    )


def heartbeat_error(ctx: RequestContext, code: ErrorCode, message: str) -> Any:
    """A failed ShareGroupHeartbeat or ConsumerGroupHeartbeat (both responses have these fields)."""
    return ctx.build(
        throttle_time=NO_THROTTLE,
        error_code=code,
        error_message=message,
        member_id=None,
        member_epoch=0,
        heartbeat_interval=datetime.timedelta(0),
        assignment=None,
    )


HANDLERS = {SHARE_GROUP_HEARTBEAT: (VersionRange(1, 1), handle_share_group_heartbeat)}
