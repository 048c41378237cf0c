"""Committed offsets of consumer groups (classic and simple), sans-I/O.

``commit`` returns the records to append before answering and applies them through the same
``apply`` that loading replays, so the in-memory view is always the durable one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
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

    def commit(
        self, group_id: str, commits: Iterable[OffsetCommit], *, now_ms: int
    ) -> tuple[list[CoordinatorRecord], list[ClassicErrorCode]]:
        """Records for the valid commits and one error code per commit (in order)."""
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

    def delete_group(self, group_id: str) -> list[CoordinatorRecord]:
        return self.delete(group_id, list(self._offsets.get(group_id, {})))
