"""Consumer offsets: OffsetCommit 2-9, OffsetFetch 1-9 (with ``require_stable``), OffsetDelete 0.

Offsets belong to classic groups, or to "simple" groups (generation -1, no members) that only
store offsets, as Kafka allows; they are durable in ``__consumer_offsets`` before the answer.
A share group's id answers GROUP_ID_NOT_FOUND ("not a consumer group"), as in Kafka.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from shareq.coordinators.classic import ClassicErrorCode, ClassicRequestError, OffsetCommit
from shareq.protocol import VersionRange
from shareq.protocol.api_keys import OFFSET_COMMIT, OFFSET_DELETE, OFFSET_FETCH

from ..context import NO_THROTTLE, RequestContext
from .classic_groups import services


def commits_of(request: Any, ctx: RequestContext) -> tuple[list[OffsetCommit], list[tuple[str, int]]]:
    """The commits of an OffsetCommit or TxnOffsetCommit request, and the (topic, partition) pairs
    it names that do not exist."""
    commits: list[OffsetCommit] = []
    unknown: list[tuple[str, int]] = []
    for topic in request.topics:
        info = ctx.broker.topics.get(topic.name)
        for p in topic.partitions:
            if info is None or not 0 <= p.partition_index < info.partitions:
                unknown.append((topic.name, p.partition_index))
                continue
            commits.append(
                OffsetCommit(
                    topic=topic.name,
                    partition=p.partition_index,
                    offset=p.committed_offset,
                    leader_epoch=getattr(p, "committed_leader_epoch", -1),
                    metadata=p.committed_metadata,
                )
            )
    return commits, unknown


def partition_codes(
    ctx: RequestContext,
    topics: Any,
    codes: Mapping[tuple[str, int], int],
    *,
    topic_class: str,
    partition_class: str,
) -> tuple[Any, ...]:
    """The response topics that answer a request's ``topics`` partition by partition with the code
    ``codes`` holds for each (OffsetCommit, TxnOffsetCommit and OffsetDelete answer alike)."""
    return tuple(
        ctx.build(
            topic_class,
            name=topic.name,
            partitions=tuple(
                ctx.build(
                    partition_class,
                    partition_index=p.partition_index,
                    error_code=ErrorCode(codes[(topic.name, p.partition_index)]),
                )
                for p in topic.partitions
            ),
        )
        for topic in topics
    )


def handle_offset_commit(request: Any, ctx: RequestContext) -> Any:
    commits, unknown = commits_of(request, ctx)
    codes = dict.fromkeys(unknown, ClassicErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    try:
        errors = services(ctx).commit_offsets(
            request.group_id,
            request.generation_id_or_member_epoch,
            request.member_id or "",
            getattr(request, "group_instance_id", None),
            commits,
            version=ctx.version,
        )
        for c, code in zip(commits, errors, strict=True):
            codes[(c.topic, c.partition)] = code
    except ClassicRequestError as error:
        for c in commits:
            codes[(c.topic, c.partition)] = error.code
    return ctx.build(
        throttle_time=NO_THROTTLE,
        topics=partition_codes(
            ctx,
            request.topics,
            codes,
            topic_class="OffsetCommitResponseTopic",
            partition_class="OffsetCommitResponsePartition",
        ),
    )


def _fetch_group(
    ctx: RequestContext, group_id: str, topics: Any, *, grouped: bool, require_stable: bool
) -> tuple[ErrorCode, Any]:
    """One group's committed offsets as response topics (``topics=None``: every committed one).

    With ``require_stable``, a partition whose transactional commit awaits its marker answers
    UNSTABLE_OFFSET_COMMIT (the client retries).
    """
    try:
        committed = services(ctx).fetch_offsets(group_id)
    except ClassicRequestError as error:
        return ErrorCode(error.code.value), ()
    unstable = services(ctx).pending_offsets(group_id) if require_stable else set()
    if topics is None:
        wanted: dict[str, list[int]] = {}
        for topic, partition in sorted(committed):
            wanted.setdefault(topic, []).append(partition)
    else:
        wanted = {t.name: list(t.partition_indexes) for t in topics}
    suffix = "s" if grouped else ""  # v8+ name the nested classes in the plural
    topic_class, partition_class = (
        f"OffsetFetchResponseTopic{suffix}",
        f"OffsetFetchResponsePartition{suffix}",
    )
    out = []
    for name, partitions in wanted.items():
        rows = []
        for index in partitions:
            value = committed.get((name, index))
            rows.append(
                ctx.build(
                    partition_class,
                    partition_index=index,
                    committed_offset=-1 if value is None else value.offset,
                    committed_leader_epoch=-1 if value is None else value.leader_epoch,
                    metadata="" if value is None else value.metadata,
                    error_code=(
                        ErrorCode.unstable_offset_commit if (name, index) in unstable else ErrorCode.none
                    ),
                )
            )
        out.append(ctx.build(topic_class, name=name, partitions=tuple(rows)))
    return ErrorCode.none, tuple(out)


def handle_offset_fetch(request: Any, ctx: RequestContext) -> Any:
    stable = bool(getattr(request, "require_stable", False))
    if ctx.version >= 8:
        groups = []
        for group in request.groups:
            code, topics = _fetch_group(
                ctx, group.group_id, group.topics, grouped=True, require_stable=stable
            )
            groups.append(
                ctx.build("OffsetFetchResponseGroup", group_id=group.group_id, topics=topics, error_code=code)
            )
        return ctx.build(throttle_time=NO_THROTTLE, groups=tuple(groups))
    code, topics = _fetch_group(ctx, request.group_id, request.topics, grouped=False, require_stable=stable)
    return ctx.build(throttle_time=NO_THROTTLE, topics=topics, error_code=code)


def handle_offset_delete(request: Any, ctx: RequestContext) -> Any:
    partitions = [(t.name, p.partition_index) for t in request.topics for p in t.partitions]
    try:
        codes = services(ctx).delete_offsets(request.group_id, partitions)
    except ClassicRequestError as error:
        return ctx.build(error_code=ErrorCode(error.code.value), throttle_time=NO_THROTTLE, topics=())
    return ctx.build(
        error_code=ErrorCode.none,
        throttle_time=NO_THROTTLE,
        topics=partition_codes(
            ctx,
            request.topics,
            dict(zip(partitions, codes, strict=True)),
            topic_class="OffsetDeleteResponseTopic",
            partition_class="OffsetDeleteResponsePartition",
        ),
    )


HANDLERS = {
    OFFSET_COMMIT: (VersionRange(2, 9), handle_offset_commit),
    OFFSET_FETCH: (VersionRange(1, 9), handle_offset_fetch),
    OFFSET_DELETE: (VersionRange(0, 0), handle_offset_delete),
}
