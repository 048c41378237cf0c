"""InitProducerId: a fresh producer id (never reused) for an idempotent producer; a transactional
id goes to the transaction coordinator (``transactions.py``)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from shareq.protocol import VersionRange
from shareq.protocol.api_keys import INIT_PRODUCER_ID

from ..context import NO_THROTTLE, RequestContext
from .transactions import init_transactional_producer_id


def handle_init_producer_id(request: Any, ctx: RequestContext) -> Any:
    if request.transactional_id is not None:
        return init_transactional_producer_id(request, ctx)
    producer_id = ctx.broker.topics.allocate_producer_id()
    return ctx.build(
        throttle_time=NO_THROTTLE, error_code=ErrorCode.none, producer_id=producer_id, producer_epoch=0
    )


HANDLERS = {INIT_PRODUCER_ID: (VersionRange(0, 5), handle_init_producer_id)}
