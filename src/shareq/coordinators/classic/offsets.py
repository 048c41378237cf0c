"""Committed offsets of consumer groups (classic and simple), sans-I/O.

``commit`` returns the records to append before answering and applies them through the same
``apply`` that loading replays, so the in-memory view is always the durable one.

Transactional commits (TxnOffsetCommit, ``send_offsets_to_transaction``) are written as the
same records in a transactional batch and held pending per producer id (``stage``) until the
transaction's marker: COMMIT makes them the committed offsets, ABORT drops them
(``end_transaction``), as Kafka's ``pendingTransactionalOffsets``.

Retention (``offsets.retention.minutes``, KIP-211): ``expire`` drops the offsets no member
consumes once they are older than the retention, counted from their commit, or for a group with
no members from when it was last seen with members (so a group that stops keeps its offsets for a
whole retention period after it stopped, however long ago it last committed).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from shareq.coordinators.group.records import CoordinatorRecord

from .errors import ClassicErrorCode
from .records import OffsetValue, offset_record

METADATA_MAX_BYTES = 4096
"""Kafka's ``offset.metadata.max.bytes``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommit:
    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = None


TopicPartition = tuple[str, int]


class ConsumerOffsets:
    """Group id -> (topic, partition) -> the last committed ``OffsetValue``."""

    def __init__(self, metadata_max_bytes: int = METADATA_MAX_BYTES) -> None:
        self.metadata_max_bytes = metadata_max_bytes
        self._offsets: dict[str, dict[TopicPartition, OffsetValue]] = {}
        self._pending: dict[int, dict[tuple[str, str, int], OffsetValue]] = {}
        self._last_live: dict[str, int] = {}
        """Group id -> when ``expire`` last saw it with members (or first saw it at all)."""

    def commit(
        self, group_id: str, commits: Iterable[OffsetCommit], *, now_ms: int, producer_id: int = -1
    ) -> tuple[list[CoordinatorRecord], list[ClassicErrorCode]]:
        """Records for the valid commits and one error code per commit (in order).

        With a ``producer_id`` the commits are staged in that producer's transaction instead.
        """
        records: list[CoordinatorRecord] = []
        errors: list[ClassicErrorCode] = []
        for c in commits:
            metadata = c.metadata or ""
            if len(metadata.encode()) > self.metadata_max_bytes:
                errors.append(ClassicErrorCode.OFFSET_METADATA_TOO_LARGE)
                continue
            value = OffsetValue(
                offset=c.offset, leader_epoch=c.leader_epoch, metadata=metadata, commit_timestamp_ms=now_ms
            )
            records.append(offset_record(group_id, c.topic, c.partition, value))
            if producer_id >= 0:
                self.stage(producer_id, group_id, c.topic, c.partition, value)
            else:
                self.apply(group_id, c.topic, c.partition, value)
            errors.append(ClassicErrorCode.NONE)
        return records, errors

    def apply(self, group_id: str, topic: str, partition: int, value: OffsetValue | None) -> None:
        if value is None:
            group = self._offsets.get(group_id)
            if group is not None:
                group.pop((topic, partition), None)
                if not group:
                    del self._offsets[group_id]
            return
        self._offsets.setdefault(group_id, {})[(topic, partition)] = value

    def stage(
        self, producer_id: int, group_id: str, topic: str, partition: int, value: OffsetValue | None
    ) -> None:
        """Hold a transactional commit until ``producer_id``'s transaction ends."""
        if value is not None:
            self._pending.setdefault(producer_id, {})[(group_id, topic, partition)] = value

    def end_transaction(self, producer_id: int, *, commit: bool) -> None:
        """The marker of ``producer_id``'s transaction: apply (COMMIT) or drop (ABORT) its commits."""
        staged = self._pending.pop(producer_id, None)
        if staged is None or not commit:
            return
        for (group_id, topic, partition), value in staged.items():
            self.apply(group_id, topic, partition, value)

    def pending(self, group_id: str) -> set[TopicPartition]:
        """Partitions of ``group_id`` with a transactional commit not yet decided."""
        return {(t, p) for staged in self._pending.values() for (g, t, p) in staged if g == group_id}

    def fetch(self, group_id: str) -> Mapping[TopicPartition, OffsetValue]:
        return self._offsets.get(group_id, {})

    def has_offsets(self, group_id: str) -> bool:
        return bool(self._offsets.get(group_id))

    def group_ids(self) -> list[str]:
        return list(self._offsets)

    def delete(self, group_id: str, partitions: Iterable[TopicPartition]) -> list[CoordinatorRecord]:
        """Tombstones for the given partitions that have a committed offset."""
        records = []
        for topic, partition in partitions:
            if (topic, partition) in self._offsets.get(group_id, {}):
                records.append(offset_record(group_id, topic, partition, None))
                self.apply(group_id, topic, partition, None)
        return records

    def expire(
        self, now_ms: int, retention_ms: int, consumed: Callable[[str], frozenset[str] | None]
    ) -> list[CoordinatorRecord]:
        """Tombstones for the offsets past retention; ``consumed(group)`` is the topics its members
        consume, ``None`` when it has no members. Offsets held by an open transaction stay."""
        records: list[CoordinatorRecord] = []
        pending = {key for staged in self._pending.values() for key in staged}
        for group_id in list(self._offsets):
            topics = consumed(group_id)
            if topics is not None or group_id not in self._last_live:
                self._last_live[group_id] = now_ms
            since = self._last_live[group_id]
            for (topic, partition), value in list(self._offsets[group_id].items()):
                if (topics is not None and topic in topics) or (group_id, topic, partition) in pending:
                    continue
                base = (
                    value.commit_timestamp_ms if topics is not None else max(value.commit_timestamp_ms, since)
                )
                if now_ms >= base + retention_ms:
                    records.append(offset_record(group_id, topic, partition, None))
                    self.apply(group_id, topic, partition, None)
            if group_id not in self._offsets:
                self._last_live.pop(group_id, None)
        return records

    def delete_group(self, group_id: str) -> list[CoordinatorRecord]:
        return self.delete(group_id, list(self._offsets.get(group_id, {})))
