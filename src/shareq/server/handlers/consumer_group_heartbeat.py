"""ConsumerGroupHeartbeat 0-1 (KIP-848): membership and server-side assignment of consumer groups."""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from shareq.coordinators.classic import ClassicRequestError
from shareq.coordinators.consumer import ConsumerHeartbeat
from shareq.protocol import VersionRange
from shareq.protocol.api_keys import CONSUMER_GROUP_HEARTBEAT

from ..context import RequestContext
from .classic_groups import services
from .share_group_heartbeat import heartbeat_answer, heartbeat_error


def handle_consumer_group_heartbeat(request: Any, ctx: RequestContext) -> Any:
    if ctx.version >= 1 and not request.member_id:  # v1 members choose their own id (KIP-1082)
        return heartbeat_error(ctx, ErrorCode.invalid_request, "MemberId can't be empty.")
    owned = None
    if request.topic_partitions is not None:
        owned = {
            tp.topic_id: frozenset(tp.partitions)
            for tp in request.topic_partitions
            if tp.topic_id is not None and tp.partitions
        }
    rebalance = request.rebalance_timeout
    heartbeat = ConsumerHeartbeat(
        group_id=request.group_id,
        member_id=request.member_id or "",
        member_epoch=request.member_epoch,
        instance_id=request.instance_id,
        rack_id=request.rack_id,
        rebalance_timeout_ms=int(rebalance.total_seconds() * 1000)
        if isinstance(rebalance, datetime.timedelta)
        else int(rebalance),
        subscribed_topic_names=None
        if request.subscribed_topic_names is None
        else tuple(request.subscribed_topic_names),
        subscribed_topic_regex=getattr(request, "subscribed_topic_regex", None),
        server_assignor=request.server_assignor,
        owned=owned,
        client_id=ctx.header.client_id or "",
        client_host=ctx.client_host,
    )
    try:
        result = services(ctx).consumer_heartbeat(heartbeat)
    except ClassicRequestError as error:
        return heartbeat_error(ctx, ErrorCode(error.code.value), error.message)
    assignment = None
    if result.assignment is not None:
        by_topic = sorted(result.assignment.items(), key=lambda kv: str(kv[0]))
        assignment = [(t, sorted(ps)) for t, ps in by_topic]
    return heartbeat_answer(ctx, result, assignment)


HANDLERS = {CONSUMER_GROUP_HEARTBEAT: (VersionRange(0, 1), handle_consumer_group_heartbeat)}
