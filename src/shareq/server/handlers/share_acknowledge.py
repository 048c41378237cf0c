"""ShareAcknowledge v1-v2: acknowledgements answered only after their durable write.

The request advances the same share-session epoch sequence as ShareFetch; epoch -1 applies its
acknowledgements, then closes the session and releases the member's remaining records. v2's
``is_renew_ack`` allows RENEW (type 4), which extends the locks without a durable write.
"""

from __future__ import annotations

import asyncio
from typing import Any

from shareq.protocol import VersionRange
from shareq.protocol.api_keys import SHARE_ACKNOWLEDGE
from shareq.share.session import SessionAction, ShareSessionError, TopicIdPartition

from ..context import RequestContext
from ..errors import session_error_code
from ..share.acknowledge import acknowledge_all
from .share_response import error_response, share_reply


async def handle_share_acknowledge(request: Any, ctx: RequestContext) -> Any:
    share = ctx.broker.share
    assert share is not None
    group_id: str = request.group_id
    member_id: str = request.member_id or ""
    try:
        update = share.sessions.acknowledge(
            group_id, member_id, request.share_session_epoch, now_ms=share.now_ms()
        )
    except ShareSessionError as error:
        return error_response(ctx, session_error_code(error), error.message)
    items = [
        (TopicIdPartition(topic_id=t.topic_id, partition=p.partition_index), p.acknowledgement_batches)
        for t in request.topics
        for p in t.partitions
    ]
    codes = await acknowledge_all(
        share, group_id, member_id, items, renew=bool(getattr(request, "is_renew_ack", False))
    )
    if update.action is SessionAction.CLOSED:
        released = share.session_closed(group_id, member_id, update.partitions)
        if released:
            await asyncio.gather(*released)
    by_topic: dict[Any, list[Any]] = {}
    for (tip, _), code in zip(items, codes, strict=True):
        by_topic.setdefault(tip.topic_id, []).append((tip.partition, code))
    return share_reply(ctx, share, group_id, SHARE_ACKNOWLEDGE, list(by_topic.items()))


HANDLERS = {SHARE_ACKNOWLEDGE: (VersionRange(1, 2), handle_share_acknowledge)}
