"""Classic group membership: JoinGroup 2-9, SyncGroup 0-5, Heartbeat 0-4, LeaveGroup 0-5.

Thin: the wire request becomes a coordinator value, ``broker.consumer_groups`` runs it (a
JoinGroup or a follower's SyncGroup waits on a future the coordinator's completions resolve),
and the answer goes back as a kio response. Refusals carry Kafka's error codes.
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from shareq.coordinators.classic import (
    ClassicErrorCode,
    ClassicRequestError,
    JoinRequest,
    JoinResponse,
    LeavingMember,
    Protocol,
    SyncRequest,
    SyncResponse,
)
from shareq.protocol import VersionRange
from shareq.protocol.api_keys import HEARTBEAT, JOIN_GROUP, LEAVE_GROUP, SYNC_GROUP

from ..consumer_groups import ConsumerGroupServices
from ..context import NO_THROTTLE, RequestContext


def services(ctx: RequestContext) -> ConsumerGroupServices:
    groups = ctx.broker.consumer_groups
    if groups is None:
        raise ClassicRequestError(ClassicErrorCode.COORDINATOR_NOT_AVAILABLE, "groups are not running")
    return groups


def _ms(value: Any) -> int:
    if isinstance(value, datetime.timedelta):
        return int(value.total_seconds() * 1000)
    return int(value)


async def handle_join_group(request: Any, ctx: RequestContext) -> Any:
    session_ms = _ms(request.session_timeout)
    join = JoinRequest(
        group_id=request.group_id,
        member_id=request.member_id or "",
        group_instance_id=getattr(request, "group_instance_id", None),
        protocol_type=request.protocol_type,
        protocols=tuple(Protocol(name=p.name, metadata=p.metadata) for p in request.protocols),
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=_ms(getattr(request, "rebalance_timeout", session_ms)),
        client_id=ctx.header.client_id or "",
        client_host=ctx.client_host,
        require_known_member_id=ctx.version >= 4,
    )
    try:
        response = await services(ctx).join(join)
    except ClassicRequestError as error:
        response = JoinResponse(error=error.code, member_id=join.member_id)
    return ctx.build(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode(response.error.value),
        generation_id=response.generation,
        protocol_type=response.protocol_type,
        protocol_name=response.protocol_name if ctx.version >= 7 else response.protocol_name or "",
        leader=response.leader,
        skip_assignment=response.skip_assignment,
        member_id=response.member_id,
        members=tuple(
            ctx.build(
                "JoinGroupResponseMember",
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                metadata=m.metadata,
            )
            for m in response.members
        ),
    )


async def handle_sync_group(request: Any, ctx: RequestContext) -> Any:
    sync = SyncRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        generation=request.generation_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        protocol_type=getattr(request, "protocol_type", None),
        protocol_name=getattr(request, "protocol_name", None),
        assignments=tuple((a.member_id, a.assignment) for a in request.assignments),
    )
    try:
        response = await services(ctx).sync(sync)
    except ClassicRequestError as error:
        response = SyncResponse(error=error.code)
    return ctx.build(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode(response.error.value),
        protocol_type=response.protocol_type,
        protocol_name=response.protocol_name,
        assignment=response.assignment,
    )


def handle_heartbeat(request: Any, ctx: RequestContext) -> Any:
    try:
        code = services(ctx).heartbeat(
            request.group_id,
            request.member_id,
            request.generation_id,
            getattr(request, "group_instance_id", None),
        )
    except ClassicRequestError as error:
        code = error.code
    return ctx.build(throttle_time=NO_THROTTLE, error_code=ErrorCode(code.value))


def handle_leave_group(request: Any, ctx: RequestContext) -> Any:
    if ctx.version >= 3:
        leaving = tuple(
            LeavingMember(member_id=m.member_id or "", group_instance_id=m.group_instance_id)
            for m in request.members
        )
    else:
        leaving = (LeavingMember(member_id=request.member_id),)
    try:
        codes = services(ctx).leave(request.group_id, leaving)
    except ClassicRequestError as error:
        codes = tuple(error.code for _ in leaving)
    if ctx.version < 3:
        return ctx.build(throttle_time=NO_THROTTLE, error_code=ErrorCode(codes[0].value))
    return ctx.build(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        members=tuple(
            ctx.build(
                "MemberResponse",
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                error_code=ErrorCode(code.value),
            )
            for m, code in zip(leaving, codes, strict=True)
        ),
    )


HANDLERS = {
    JOIN_GROUP: (VersionRange(2, 9), handle_join_group),
    SYNC_GROUP: (VersionRange(0, 5), handle_sync_group),
    HEARTBEAT: (VersionRange(0, 4), handle_heartbeat),
    LEAVE_GROUP: (VersionRange(0, 5), handle_leave_group),
}
