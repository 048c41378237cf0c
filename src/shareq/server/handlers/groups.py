"""Group APIs that span group types: ListGroups, DescribeGroups, ConsumerGroupDescribe, DeleteGroups.

Share groups and classic groups live here (``broker.share``, ``broker.consumer_groups``). As in
Kafka, a share group is listed with type ``share``, is unknown to the classic and consumer
describe APIs (DescribeGroups answers Dead, and from v6 GROUP_ID_NOT_FOUND; ConsumerGroupDescribe
answers GROUP_ID_NOT_FOUND), and is deleted by DeleteGroups only when empty, together with its
share state and configs. Classic groups are listed with type ``classic`` and their protocol type,
described by DescribeGroups (members, protocol, assignments while Stable) and deleted by
DeleteGroups when empty, with their committed offsets.
"""

from __future__ import annotations

import logging
from typing import Any

from kio.schema.errors import ErrorCode

from shareq.coordinators.classic import ClassicRequestError
from shareq.coordinators.group import SHARE_GROUP_TYPE
from shareq.protocol import VersionRange
from shareq.protocol.api_keys import CONSUMER_GROUP_DESCRIBE, DELETE_GROUPS, DESCRIBE_GROUPS, LIST_GROUPS
from shareq.share.persister import SharePartitionKey

from ..context import NO_THROTTLE, RequestContext
from .group_support import (
    AdminFailure,
    coordinator,
    drop_share_partition,
    failure_of,
    persist_records,
    persister,
)

log = logging.getLogger("shareq.server.groups")


DEAD = "Dead"
CLASSIC_GROUP_TYPE = "classic"


def handle_list_groups(request: Any, ctx: RequestContext) -> Any:
    """Share groups with their state and type; filters match case-insensitively, as in Kafka."""
    states = {s.lower() for s in getattr(request, "states_filter", ())}
    types = {t.lower() for t in getattr(request, "types_filter", ())}
    try:
        listings = coordinator(ctx).list_groups()
    except AdminFailure as failure:
        return ctx.build(throttle_time=NO_THROTTLE, error_code=failure.code, groups=())
    rows = [(g.group_id, SHARE_GROUP_TYPE, g.group_state, g.group_type) for g in listings]
    classic = ctx.broker.consumer_groups
    if classic is not None:
        for group_id in classic.coordinator.group_ids():
            found = classic.coordinator.group(group_id)
            if found is not None:
                rows.append((group_id, found.protocol_type or "", found.state.value, CLASSIC_GROUP_TYPE))
        for group_id in classic.consumer.group_ids():
            consumer_group = classic.consumer.group(group_id)
            if consumer_group is not None:
                rows.append((group_id, "consumer", consumer_group.state, "consumer"))
    groups = tuple(
        ctx.build(
            "ListedGroup",
            group_id=group_id,
            protocol_type=protocol_type,
            group_state=state,
            group_type=group_type,
        )
        for group_id, protocol_type, state, group_type in rows
        if (not states or state.lower() in states) and (not types or group_type.lower() in types)
    )
    return ctx.build(throttle_time=NO_THROTTLE, error_code=ErrorCode.none, groups=groups)


def _not_found_message(ctx: RequestContext, group_id: str, kind: str) -> str:
    try:
        group_type = coordinator(ctx).group_type(group_id)
    except AdminFailure:
        group_type = None
    if group_type is None:
        return f"Group {group_id} not found."
    return f"Group {group_id} is not a {kind} group."


def handle_describe_groups(request: Any, ctx: RequestContext) -> Any:
    """Classic groups with their members; any other id is Dead (v6+: GROUP_ID_NOT_FOUND)."""
    described = []
    classic = ctx.broker.consumer_groups
    for group_id in request.groups:
        found = None if classic is None else classic.coordinator.describe(group_id)
        if found is not None:
            described.append(
                ctx.build(
                    "DescribedGroup",
                    error_code=ErrorCode.none,
                    error_message=None,
                    group_id=group_id,
                    group_state=found.state,
                    protocol_type=found.protocol_type,
                    protocol_data=found.protocol_name,
                    members=tuple(
                        ctx.build(
                            "DescribedGroupMember",
                            member_id=m.member_id,
                            group_instance_id=m.group_instance_id,
                            client_id=m.client_id,
                            client_host=m.client_host,
                            member_metadata=m.metadata,
                            member_assignment=m.assignment,
                        )
                        for m in found.members
                    ),
                )
            )
            continue
        fields: dict[str, Any] = {}
        if ctx.version >= 6:
            fields = {
                "error_code": ErrorCode.group_id_not_found,
                "error_message": _not_found_message(ctx, group_id, "classic"),
            }
        described.append(
            ctx.build(
                "DescribedGroup",
                error_code=fields.get("error_code", ErrorCode.none),
                error_message=fields.get("error_message"),
                group_id=group_id,
                group_state=DEAD,
                protocol_type="",
                protocol_data="",
                members=(),
            )
        )
    return ctx.build(throttle_time=NO_THROTTLE, groups=tuple(described))


def handle_consumer_group_describe(request: Any, ctx: RequestContext) -> Any:
    """Consumer groups (KIP-848) with members and assignments; other ids GROUP_ID_NOT_FOUND."""
    classic = ctx.broker.consumer_groups
    found = [] if classic is None else [g for g in request.group_ids if classic.consumer.group(g) is not None]
    described = tuple(
        _describe_consumer_group(ctx, group_id)
        if group_id in found
        else ctx.build(
            "DescribedGroup",
            error_code=ErrorCode.group_id_not_found,
            error_message=_not_found_message(ctx, group_id, "consumer"),
            group_id=group_id,
            group_state="",
            group_epoch=0,
            assignment_epoch=0,
            assignor_name="",
            members=(),
        )
        for group_id in request.group_ids
    )
    return ctx.build(throttle_time=NO_THROTTLE, groups=described)


def _describe_consumer_group(ctx: RequestContext, group_id: str) -> Any:
    classic = ctx.broker.consumer_groups
    assert classic is not None
    group = classic.consumer.group(group_id)
    assert group is not None
    names = {tid: name for name, (tid, _) in group.topics.items()}

    def assignment(parts: Any) -> Any:
        return ctx.build(
            "Assignment",
            topic_partitions=tuple(
                ctx.build(
                    "TopicPartitions", topic_id=t, topic_name=names.get(t, ""), partitions=tuple(sorted(ps))
                )
                for t, ps in sorted(parts.items(), key=lambda kv: names.get(kv[0], ""))
            ),
        )

    return ctx.build(
        "DescribedGroup",
        error_code=ErrorCode.none,
        error_message=None,
        group_id=group_id,
        group_state=group.state,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor_name=group.assignor,
        members=tuple(
            ctx.build(
                "Member",
                member_id=m.member_id,
                instance_id=m.instance_id,
                rack_id=m.rack_id,
                member_epoch=m.epoch,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=tuple(sorted(m.subscribed)),
                subscribed_topic_regex=m.regex,
                assignment=assignment(m.assigned),
                target_assignment=assignment(group.target.get(m.member_id, {})),
                member_type=-1,
            )
            for m in group.members.values()
        ),
        authorized_operations=-2147483648,
    )


async def handle_delete_groups(request: Any, ctx: RequestContext) -> Any:
    results = []
    classic = ctx.broker.consumer_groups
    for group_id in request.groups_names:
        try:
            if classic is not None and classic.group_type(group_id) is not None:
                classic.delete_group(group_id)
            else:
                await delete_share_group(ctx, group_id)
            code = ErrorCode.none
        except Exception as error:
            failure = _failure(error, group_id)
            code = failure.code
        results.append(ctx.build("DeletableGroupResult", group_id=group_id, error_code=code))
    return ctx.build(throttle_time=NO_THROTTLE, results=tuple(results))


def _failure(error: BaseException, group_id: str) -> AdminFailure:
    if isinstance(error, ClassicRequestError):
        return AdminFailure(ErrorCode(error.code.value), error.message)
    try:
        return failure_of(error)
    except Exception:
        log.exception("deleting group %s failed", group_id)
        return AdminFailure(ErrorCode.unknown_server_error, str(error))


async def delete_share_group(ctx: RequestContext, group_id: str) -> None:
    """Delete an empty share group: its share state first, then its records (configs included).

    The state goes first so that a failure leaves the group intact and retryable, rather than a
    group gone with orphaned state that would fence the next incarnation's initialization.
    """
    if not group_id:
        raise AdminFailure(ErrorCode.invalid_group_id, "group id must not be empty")
    groups = coordinator(ctx)
    groups.check_offsets_deletable(group_id)
    store = persister(ctx)
    keys = [
        SharePartitionKey(group_id=group_id, topic_id=tp.topic_id, partition=p)
        for tp in groups.initialized_partitions(group_id)
        for p in tp.partitions
    ]
    for key in keys:
        await store.delete_state(key)
    result = groups.delete(group_id)  # re-checks emptiness: a member may have joined meanwhile
    persist_records(ctx, result.records)
    for key in keys:
        drop_share_partition(ctx, key)


HANDLERS = {
    LIST_GROUPS: (VersionRange(0, 5), handle_list_groups),
    DESCRIBE_GROUPS: (VersionRange(0, 6), handle_describe_groups),
    DELETE_GROUPS: (VersionRange(0, 2), handle_delete_groups),
    CONSUMER_GROUP_DESCRIBE: (VersionRange(0, 1), handle_consumer_group_describe),
}
