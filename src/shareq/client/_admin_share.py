"""Request builders and response parsers for the share-group admin APIs (77, 90, 91, 92) and group listing.

Pure functions over kio modules, so they are testable without a broker.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from types import ModuleType
from typing import Any

from kio.schema.errors import ErrorCode

from .admin_types import (
    GroupListing,
    PendingTransaction,
    ShareGroupDescription,
    ShareGroupOffset,
    ShareMember,
)
from .errors import KafkaError, raise_for


def build_list_groups(
    m: ModuleType, version: int, *, types: Sequence[str] = (), states: Sequence[str] = ()
) -> Any:
    if version >= 5:
        return m.ListGroupsRequest(states_filter=tuple(states), types_filter=tuple(types))
    if types:
        raise ValueError(f"ListGroups v{version} cannot filter by type (needs v5)")
    if version >= 4:
        return m.ListGroupsRequest(states_filter=tuple(states))
    if states:
        raise ValueError(f"ListGroups v{version} cannot filter by state (needs v4)")
    return m.ListGroupsRequest()


def parse_list_groups(response: Any) -> list[GroupListing]:
    raise_for(response.error_code, context="ListGroups")
    return [
        GroupListing(
            group_id=g.group_id,
            protocol_type=g.protocol_type,
            state=getattr(g, "group_state", ""),
            type=getattr(g, "group_type", ""),
        )
        for g in response.groups
    ]


def build_share_group_describe(m: ModuleType, group_ids: Sequence[str]) -> Any:
    return m.ShareGroupDescribeRequest(group_ids=tuple(group_ids), include_authorized_operations=False)


def parse_share_group_describe(response: Any) -> dict[str, ShareGroupDescription]:
    out = {}
    for g in response.groups:
        members = tuple(
            ShareMember(
                member_id=mb.member_id,
                client_id=mb.client_id,
                client_host=mb.client_host,
                rack_id=mb.rack_id,
                member_epoch=int(mb.member_epoch),
                subscribed_topics=tuple(mb.subscribed_topic_names),
                assignment={
                    tp.topic_name: tuple(int(p) for p in tp.partitions)
                    for tp in mb.assignment.topic_partitions
                },
            )
            for mb in g.members
        )
        out[g.group_id] = ShareGroupDescription(
            group_id=g.group_id,
            state=getattr(g, "group_state", ""),
            group_epoch=int(g.group_epoch),
            assignment_epoch=int(g.assignment_epoch),
            assignor=g.assignor_name,
            members=members,
            error=g.error_code,
            error_message=g.error_message,
        )
    return out


def build_describe_share_group_offsets(
    m: ModuleType, group_id: str, topics: Mapping[str, Sequence[int]] | None
) -> Any:
    wanted = (
        None
        if topics is None
        else tuple(
            m.DescribeShareGroupOffsetsRequestTopic(topic_name=t, partitions=tuple(ps))
            for t, ps in topics.items()
        )
    )
    return m.DescribeShareGroupOffsetsRequest(
        groups=(m.DescribeShareGroupOffsetsRequestGroup(group_id=group_id, topics=wanted),)
    )


def parse_describe_share_group_offsets(
    response: Any, group_id: str
) -> dict[tuple[str, int], ShareGroupOffset]:
    for g in response.groups:
        if g.group_id != group_id:
            continue
        raise_for(g.error_code, g.error_message, context=f"DescribeShareGroupOffsets({group_id})")
        out = {}
        for t in g.topics:
            for p in t.partitions:
                lag = getattr(p, "lag", None)
                out[(t.topic_name, int(p.partition_index))] = ShareGroupOffset(
                    topic=t.topic_name,
                    topic_id=t.topic_id,
                    partition=int(p.partition_index),
                    start_offset=int(p.start_offset),
                    leader_epoch=int(p.leader_epoch),
                    lag=None if lag is None or int(lag) < 0 else int(lag),
                    error=p.error_code,
                    error_message=p.error_message,
                    pending=tuple(
                        PendingTransaction(int(t.producer_id), int(t.producer_epoch), int(t.records))
                        for t in getattr(p, "pending_transactions", ())
                    ),
                    delayed_records=int(getattr(p, "delayed_records", 0)),
                    next_redelivery_ms=int(getattr(p, "next_redelivery_ms", 0)) or None,
                )
        return out
    raise KafkaError(ErrorCode.unknown_server_error, f"no answer for group {group_id}")


def build_alter_share_group_offsets(
    m: ModuleType, group_id: str, offsets: Mapping[tuple[str, int], int]
) -> Any:
    by_topic: dict[str, list[Any]] = defaultdict(list)
    for (topic, partition), offset in sorted(offsets.items()):
        by_topic[topic].append(
            m.AlterShareGroupOffsetsRequestPartition(partition_index=partition, start_offset=offset)
        )
    return m.AlterShareGroupOffsetsRequest(
        group_id=group_id,
        topics=tuple(
            m.AlterShareGroupOffsetsRequestTopic(topic_name=t, partitions=tuple(ps))
            for t, ps in by_topic.items()
        ),
    )


def parse_alter_share_group_offsets(response: Any, group_id: str) -> dict[tuple[str, int], ErrorCode]:
    raise_for(response.error_code, response.error_message, context=f"AlterShareGroupOffsets({group_id})")
    return {
        (t.topic_name, int(p.partition_index)): p.error_code for t in response.responses for p in t.partitions
    }


def build_delete_share_group_offsets(m: ModuleType, group_id: str, topics: Iterable[str]) -> Any:
    return m.DeleteShareGroupOffsetsRequest(
        group_id=group_id, topics=tuple(m.DeleteShareGroupOffsetsRequestTopic(topic_name=t) for t in topics)
    )


def parse_delete_share_group_offsets(response: Any, group_id: str) -> dict[str, ErrorCode]:
    raise_for(response.error_code, response.error_message, context=f"DeleteShareGroupOffsets({group_id})")
    return {t.topic_name: t.error_code for t in response.responses}


def first_error(results: Mapping[Any, ErrorCode], context: str) -> None:
    """Raise ``KafkaError`` for the first failed item of a per-item result map."""
    for item, code in results.items():
        if code != ErrorCode.none:
            raise KafkaError(code, context=f"{context}: {item}")
