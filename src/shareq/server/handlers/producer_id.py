"""InitProducerId for idempotent producers (no transactions): a fresh, persisted producer id."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from shareq.protocol import VersionRange
from shareq.protocol.versions import INIT_PRODUCER_ID

from ..context import RequestContext
from .api_versions import NO_THROTTLE


def handle_init_producer_id(request: Any, ctx: RequestContext) -> Any:
    if request.transactional_id is not None:
        return ctx.build(
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.invalid_request,
            producer_id=-1,
            producer_epoch=-1,
        )
    producer_id = ctx.broker.topics.allocate_producer_id()
    return ctx.build(
        throttle_time=NO_THROTTLE, error_code=ErrorCode.none, producer_id=producer_id, producer_epoch=0
    )


HANDLERS = {INIT_PRODUCER_ID: (VersionRange(0, 5), handle_init_producer_id)}
