"""The envelope ShareFetch and ShareAcknowledge responses share.

This broker leads every partition at epoch 0 and names itself as the only node endpoint, so both
responses carry the same leader, lock timeout and endpoint list around their per-partition data.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from ..context import RequestContext
from .api_versions import NO_THROTTLE

if TYPE_CHECKING:
    from ..share.services import ShareServices


def error_response(ctx: RequestContext, code: ErrorCode, message: str | None = None) -> Any:
    """A whole-request failure: no partitions, no lock timeout, no endpoints."""
    return ctx.build(
        throttle_time=NO_THROTTLE,
        error_code=code,
        error_message=message,
        acquisition_lock_timeout=datetime.timedelta(0),
        responses=(),
        node_endpoints=(),
    )


def current_leader(ctx: RequestContext) -> Any:
    return ctx.build("LeaderIdAndEpoch", leader_id=ctx.broker.node_id, leader_epoch=0)


def share_response(
    ctx: RequestContext,
    share: ShareServices,
    group_id: str,
    topic_entity: str,
    by_topic: dict[Any, list[Any]],
    throttle_ms: int = 0,
) -> Any:
    """A successful response: ``by_topic`` maps topic id to its built partition entries, wrapped in
    ``topic_entity`` (the response's per-topic struct name)."""
    build = ctx.build
    broker = ctx.broker
    return build(
        throttle_time=datetime.timedelta(milliseconds=throttle_ms) if throttle_ms else NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        acquisition_lock_timeout=datetime.timedelta(milliseconds=share.lock_duration_ms(group_id)),
        responses=tuple(
            build(topic_entity, topic_id=topic_id, partitions=tuple(parts))
            for topic_id, parts in by_topic.items()
        ),
        node_endpoints=(
            build(
                "NodeEndpoint",
                node_id=broker.node_id,
                host=ctx.advertised_host,
                port=ctx.advertised_port,
                rack=None,
            ),
        ),
    )
