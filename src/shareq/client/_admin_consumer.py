"""Request builders and response parsers for consumer-group administration: DescribeGroups (15),
ConsumerGroupDescribe (69), OffsetFetch (9), OffsetCommit (8) and OffsetDelete (47).

Pure functions over kio modules, as ``_admin_share``; they speak only Kafka's wire, so they work
against any Kafka 4.x cluster.
"""

from __future__ import annotations

import struct
from collections import defaultdict
from collections.abc import Iterable, Mapping
from types import ModuleType
from typing import Any

from kio.schema.errors import ErrorCode

from .admin_types import ConsumerGroupDescription, ConsumerGroupMember, ConsumerGroupOffset
from .errors import raise_for

_H = struct.Struct(">h")
_I = struct.Struct(">i")


def decode_consumer_assignment(data: bytes | None) -> dict[str, tuple[int, ...]]:
    """A classic member's assignment (``ConsumerProtocolAssignment``: version, then topics with their
    partitions); empty when absent or unreadable."""
    out: dict[str, tuple[int, ...]] = {}
    if not data:
        return out
    try:
        pos = 2
        (count,) = _I.unpack_from(data, pos)
        pos += 4
        for _ in range(max(count, 0)):
            (n,) = _H.unpack_from(data, pos)
            name = data[pos + 2 : pos + 2 + n].decode()
            pos += 2 + n
            (k,) = _I.unpack_from(data, pos)
            pos += 4
            parts = struct.unpack_from(f">{max(k, 0)}i", data, pos)
            pos += 4 * max(k, 0)
            out[name] = tuple(sorted(parts))
    except (struct.error, UnicodeDecodeError):
        return {}
    return out


def parse_describe_groups(response: Any) -> ConsumerGroupDescription:
    """A classic group (DescribeGroups v5)."""
    (g,) = response.groups
    raise_for(g.error_code, context=f"group {g.group_id}")
    return ConsumerGroupDescription(
        group_id=g.group_id,
        type="classic",
        state=g.group_state,
        assignor=g.protocol_data,
        epoch=None,
        members=tuple(
            ConsumerGroupMember(
                member_id=m.member_id,
                instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                assignment=decode_consumer_assignment(m.member_assignment),
            )
            for m in g.members
        ),
    )


def parse_consumer_group_describe(response: Any) -> ConsumerGroupDescription:
    """A KIP-848 group (ConsumerGroupDescribe)."""
    (g,) = response.groups
    raise_for(g.error_code, g.error_message, context=f"group {g.group_id}")
    return ConsumerGroupDescription(
        group_id=g.group_id,
        type="consumer",
        state=g.group_state,
        assignor=g.assignor_name,
        epoch=int(g.group_epoch),
        members=tuple(
            ConsumerGroupMember(
                member_id=m.member_id,
                instance_id=m.instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                assignment={
                    tp.topic_name: tuple(sorted(int(p) for p in tp.partitions))
                    for tp in m.assignment.topic_partitions
                },
            )
            for m in g.members
        ),
    )


def build_offset_fetch(m: ModuleType, group_id: str, topics: Mapping[str, Iterable[int]] | None) -> Any:
    wanted = (
        None
        if topics is None
        else tuple(
            m.OffsetFetchRequestTopics(name=t, partition_indexes=tuple(sorted(ps)))
            for t, ps in sorted(topics.items())
        )
    )
    return m.OffsetFetchRequest(
        groups=(m.OffsetFetchRequestGroup(group_id=group_id, topics=wanted),), require_stable=True
    )


def parse_offset_fetch(response: Any, group_id: str) -> dict[tuple[str, int], ConsumerGroupOffset]:
    (g,) = response.groups
    raise_for(g.error_code, context=f"OffsetFetch({group_id})")
    out = {}
    for t in g.topics:
        for p in t.partitions:
            raise_for(p.error_code, context=f"OffsetFetch({group_id}) {t.name}-{p.partition_index}")
            out[(t.name, int(p.partition_index))] = ConsumerGroupOffset(
                topic=t.name,
                partition=int(p.partition_index),
                offset=int(p.committed_offset),
                metadata=p.metadata,
            )
    return out


def build_offset_commit(m: ModuleType, group_id: str, offsets: Mapping[tuple[str, int], int]) -> Any:
    """An administrative commit: no member, generation -1 (the group must be empty)."""
    by_topic: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for (topic, partition), offset in offsets.items():
        by_topic[topic].append((partition, offset))
    return m.OffsetCommitRequest(
        group_id=group_id,
        member_id="",
        topics=tuple(
            m.OffsetCommitRequestTopic(
                name=topic,
                partitions=tuple(
                    m.OffsetCommitRequestPartition(
                        partition_index=p, committed_offset=o, committed_metadata=""
                    )
                    for p, o in sorted(parts)
                ),
            )
            for topic, parts in sorted(by_topic.items())
        ),
    )


def parse_partition_errors(response: Any) -> dict[tuple[str, int], ErrorCode]:
    """Per-partition error codes of an OffsetCommit or OffsetDelete response."""
    raise_for(getattr(response, "error_code", ErrorCode.none), context="offsets")
    return {(t.name, int(p.partition_index)): p.error_code for t in response.topics for p in t.partitions}


def build_offset_delete(m: ModuleType, group_id: str, partitions: Iterable[tuple[str, int]]) -> Any:
    by_topic: dict[str, list[int]] = defaultdict(list)
    for topic, partition in partitions:
        by_topic[topic].append(partition)
    return m.OffsetDeleteRequest(
        group_id=group_id,
        topics=tuple(
            m.OffsetDeleteRequestTopic(
                name=topic,
                partitions=tuple(m.OffsetDeleteRequestPartition(partition_index=p) for p in sorted(ps)),
            )
            for topic, ps in sorted(by_topic.items())
        ),
    )
