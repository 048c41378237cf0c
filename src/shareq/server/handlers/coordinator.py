"""FindCoordinator: this single node coordinates every group and transaction key."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from shareq.protocol import VersionRange
from shareq.protocol.api_keys import FIND_COORDINATOR

from ..context import NO_THROTTLE, RequestContext


def handle_find_coordinator(request: Any, ctx: RequestContext) -> Any:
    broker = ctx.broker
    node = {"node_id": broker.node_id, "host": ctx.advertised_host, "port": ctx.advertised_port}
    if ctx.version >= 4:
        coordinators = tuple(
            ctx.build("Coordinator", key=key, error_code=ErrorCode.none, error_message=None, **node)
            for key in request.coordinator_keys
        )
        return ctx.build(throttle_time=NO_THROTTLE, coordinators=coordinators)
    return ctx.build(throttle_time=NO_THROTTLE, error_code=ErrorCode.none, error_message=None, **node)


HANDLERS = {FIND_COORDINATOR: (VersionRange(0, 6), handle_find_coordinator)}
