"""Client-side share-group bookkeeping, free of I/O: pending acknowledgements as ranges, share-session
epochs per partition leader, and which fetched offsets were actually acquired.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from shareq.protocol.acknowledge_type import AcknowledgeType

TopicIdPartition = tuple[uuid.UUID, int]

FINAL_EPOCH = -1
INITIAL_EPOCH = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class AcquiredRange:
    """A run of offsets this member acquired, as the broker reported it."""

    topic: str
    topic_id: uuid.UUID
    partition: int
    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True, kw_only=True)
class AckRange:
    """Acknowledge ``first_offset..last_offset`` (inclusive) of a partition with one type."""

    topic_id: uuid.UUID
    partition: int
    first_offset: int
    last_offset: int
    type: AcknowledgeType = AcknowledgeType.ACCEPT


def next_epoch(epoch: int) -> int:
    """Share-session epochs run 1, 2, ... and wrap back to 1 (0 opens, -1 closes)."""
    return 1 if epoch >= 0x7FFFFFFF else epoch + 1


def coalesce(offsets: Mapping[int, AcknowledgeType]) -> list[tuple[int, int, tuple[int, ...]]]:
    """Turn offset -> type into AcknowledgementBatches: maximal runs of consecutive offsets; a run whose
    offsets share one type carries that single type, a mixed run carries one type per offset."""
    out: list[tuple[int, int, tuple[int, ...]]] = []
    run: list[tuple[int, int]] = []

    def flush() -> None:
        if not run:
            return
        types = [t for _, t in run]
        out.append((run[0][0], run[-1][0], (types[0],) if len(set(types)) == 1 else tuple(types)))
        run.clear()

    for offset in sorted(offsets):
        if run and offset != run[-1][0] + 1:
            flush()
        run.append((offset, int(offsets[offset])))
    flush()
    return out


TypedRange = tuple[int, int, AcknowledgeType]  # first, last, type
AckBatch = tuple[int, int, tuple[int, ...]]  # first, last, one type or one per offset


@dataclass(slots=True)
class PendingAcks:
    """Acknowledgements collected since the last send, per share-partition, kept as the ranges given
    (a micro-batch of a million records is one range, not a million entries). A later range wins
    where ranges overlap."""

    by_partition: dict[TopicIdPartition, list[TypedRange]] = field(default_factory=dict)

    def add(self, tp: TopicIdPartition, first: int, last: int, type: AcknowledgeType) -> None:
        if last >= first:
            self.by_partition.setdefault(tp, []).append((first, last, type))

    def __bool__(self) -> bool:
        return any(self.by_partition.values())

    def partitions(self) -> list[TopicIdPartition]:
        return [tp for tp, offs in self.by_partition.items() if offs]

    def take(
        self, partitions: Iterable[TopicIdPartition] | None = None
    ) -> dict[TopicIdPartition, list[tuple[int, int, tuple[int, ...]]]]:
        """Remove and return the coalesced batches of ``partitions`` (default: all)."""
        keys = (
            list(self.by_partition)
            if partitions is None
            else [tp for tp in partitions if tp in self.by_partition]
        )
        out = {}
        for tp in keys:
            ranges = self.by_partition.pop(tp)
            if ranges:
                out[tp] = coalesce_ranges(ranges)
        return out


def coalesce_ranges(ranges: Iterable[TypedRange]) -> list[AckBatch]:
    """``coalesce`` of ranges given in order (later wins), without expanding them to offsets when they
    neither overlap nor touch with another type: the common case of whole micro-batches."""
    given = list(ranges)
    ordered = sorted(given, key=lambda r: r[0])
    out: list[AckBatch] = []
    for first, last, kind in ordered:
        if out and first <= out[-1][1] + 1:
            if first <= out[-1][1] or out[-1][2] != (int(kind),):
                return _coalesce_expanded(given)
            out[-1] = (out[-1][0], last, out[-1][2])
        else:
            out.append((first, last, (int(kind),)))
    return out


def _coalesce_expanded(ranges: Iterable[TypedRange]) -> list[AckBatch]:
    offsets: dict[int, AcknowledgeType] = {}
    for first, last, kind in ranges:
        for offset in range(first, last + 1):
            offsets[offset] = kind
    return coalesce(offsets)


@dataclass(slots=True)
class ShareSession:
    """The share session with one partition leader: its epoch and the partitions the broker knows about."""

    epoch: int = INITIAL_EPOCH
    in_session: set[TopicIdPartition] = field(default_factory=set)

    def plan_fetch(
        self, wanted: set[TopicIdPartition], acks: Iterable[TopicIdPartition]
    ) -> tuple[int, list[TopicIdPartition], list[TopicIdPartition]]:
        """(epoch to send, partitions to list in ``topics``, partitions to forget) for the next ShareFetch."""
        ack_parts = set(acks)
        if self.epoch == INITIAL_EPOCH:
            return self.epoch, sorted(wanted | (ack_parts & wanted), key=_key), []
        added = wanted - self.in_session
        forgotten = self.in_session - wanted
        return (
            self.epoch,
            sorted(added | (ack_parts & (wanted | self.in_session)), key=_key),
            sorted(forgotten, key=_key),
        )

    def fetched(self, wanted: set[TopicIdPartition]) -> None:
        """The ShareFetch planned with ``wanted`` succeeded."""
        self.in_session = set(wanted)
        self.epoch = next_epoch(self.epoch)

    def acknowledged(self) -> None:
        """A ShareAcknowledge at the current epoch succeeded."""
        self.epoch = next_epoch(self.epoch)

    def reset(self) -> None:
        self.epoch = INITIAL_EPOCH
        self.in_session = set()


def _key(tp: TopicIdPartition) -> tuple[str, int]:
    return (str(tp[0]), tp[1])


def member_id_from_uuid(u: uuid.UUID) -> str:
    """A 22-character URL-safe base64 member id, as Kafka clients generate for share groups."""
    import base64

    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")
