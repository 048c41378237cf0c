"""Building share-group requests (ShareGroupHeartbeat, ShareFetch, ShareAcknowledge) and picking the acquired
records out of a ShareFetch partition: pure functions over kio modules, testable without a broker."""

from __future__ import annotations

import datetime
from collections import defaultdict
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any

from shareq.log.records import Record

from ._share_state import TopicIdPartition
from .records import iter_record_batches

AckBatches = Mapping[TopicIdPartition, Sequence[tuple[int, int, tuple[int, ...]]]]


def build_heartbeat(
    m: ModuleType,
    *,
    group_id: str,
    member_id: str,
    epoch: int,
    topics: Sequence[str] | None,
    rack_id: str | None,
) -> Any:
    return m.ShareGroupHeartbeatRequest(
        group_id=group_id,
        member_id=member_id,
        member_epoch=epoch,
        rack_id=rack_id,
        subscribed_topic_names=None if topics is None else tuple(topics),
    )


def ack_topics(
    m: ModuleType,
    topic_cls: str,
    partition_cls: str,
    listed: Sequence[TopicIdPartition],
    acks: AckBatches,
    release_delay_ms: int = 0,
) -> tuple[Any, ...]:
    """Partitions (with their acknowledgement batches) grouped by topic id, in ``listed`` order;
    ``release_delay_ms`` (shareq's tagged field, ShareAcknowledge only) on every batch."""
    by_topic: dict[Any, list[Any]] = defaultdict(list)
    delay = {"release_delay_ms": release_delay_ms} if release_delay_ms > 0 else {}
    for tid, p in listed:
        batches = tuple(
            m.AcknowledgementBatch(first_offset=first, last_offset=last, acknowledge_types=types, **delay)
            for first, last, types in acks.get((tid, p), ())
        )
        by_topic[tid].append(getattr(m, partition_cls)(partition_index=p, acknowledgement_batches=batches))
    return tuple(getattr(m, topic_cls)(topic_id=tid, partitions=tuple(ps)) for tid, ps in by_topic.items())


def forgotten_topics(m: ModuleType, forgotten: Sequence[TopicIdPartition]) -> tuple[Any, ...]:
    by_topic: dict[Any, list[int]] = defaultdict(list)
    for tid, p in forgotten:
        by_topic[tid].append(p)
    return tuple(m.ForgottenTopic(topic_id=tid, partitions=tuple(ps)) for tid, ps in by_topic.items())


def build_share_fetch(
    m: ModuleType,
    *,
    group_id: str,
    member_id: str,
    epoch: int,
    max_wait_ms: int,
    min_bytes: int,
    max_bytes: int,
    max_records: int,
    batch_size: int,
    listed: Sequence[TopicIdPartition],
    acks: AckBatches,
    forgotten: Sequence[TopicIdPartition] = (),
) -> Any:
    return m.ShareFetchRequest(
        group_id=group_id,
        member_id=member_id,
        share_session_epoch=epoch,
        max_wait=datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        max_records=max_records,
        batch_size=batch_size,
        topics=ack_topics(m, "FetchTopic", "FetchPartition", listed, acks),
        forgotten_topics_data=forgotten_topics(m, forgotten),
    )


def build_share_acknowledge(
    m: ModuleType,
    version: int,
    *,
    group_id: str,
    member_id: str,
    epoch: int,
    acks: AckBatches,
    renew: bool = False,
    release_delay_ms: int = 0,
) -> Any:
    """ShareAcknowledge; ``renew`` sets is_renew_ack (v2+, the caller checks the version);
    ``release_delay_ms`` asks a shareq broker to delay the redelivery of the RELEASEs."""
    kwargs: dict[str, Any] = {"is_renew_ack": True} if renew else {}
    if renew and version < 2:
        raise ValueError("RENEW acknowledgements need ShareAcknowledge v2")
    listed = sorted(acks, key=lambda tp: (str(tp[0]), tp[1]))
    return m.ShareAcknowledgeRequest(
        group_id=group_id,
        member_id=member_id,
        share_session_epoch=epoch,
        topics=ack_topics(m, "AcknowledgeTopic", "AcknowledgePartition", listed, acks, release_delay_ms),
        **kwargs,
    )


def select_acquired(
    blob: bytes | None, acquired: Sequence[tuple[int, int, int]]
) -> tuple[list[tuple[Record, int, int]], list[int]]:
    """From a ShareFetch partition's records and its (first, last, delivery_count) ranges, return
    (record, delivery_count, leader_epoch) for each acquired record, and the acquired offsets that hold no
    deliverable record (control records, compacted away): those must be acknowledged as GAP."""
    counts: dict[int, int] = {}
    for first, last, count in acquired:
        for off in range(first, last + 1):
            counts[off] = count
    out: list[tuple[Record, int, int]] = []
    if not counts:
        return out, []
    seen: set[int] = set()
    for batch in iter_record_batches(bytes(blob or b"")):
        if batch.header.is_control or batch.header.last_offset < min(counts):
            continue
        for rec in batch.records:
            delivery_count = counts.get(rec.offset)
            if delivery_count is not None:
                seen.add(rec.offset)
                out.append((rec, delivery_count, batch.header.partition_leader_epoch))
    return out, sorted(counts.keys() - seen)
