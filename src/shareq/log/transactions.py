"""Transactions as one partition sees them: open transactions, the last stable offset and the
aborted-transaction index.

Kafka's rules (``ProducerStateManager`` / ``UnifiedLog.lastStableOffset`` / ``AbortedTxn``):

- a transactional data batch opens its producer's transaction at its first offset, unless one is
  open already;
- a control batch (a COMMIT or ABORT marker) ends the producer's open transaction; an ABORT adds
  ``(producer id, first offset, last offset = the marker's offset, LSO at the time)`` to the
  aborted index; a marker for a producer with nothing open changes nothing;
- the last stable offset is the smallest first offset of an open transaction, else the high
  watermark (the log end, on one node).

Everything is derived from batch headers plus the type of a control batch's single record, so
the state is rebuilt on open from the producer snapshot plus the batches after it. No I/O here.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .batch import HEADER_SIZE
from .records import read_varint

CONTROL_ABORT = 0
CONTROL_COMMIT = 1
_CONTROL_KEY = struct.Struct(">hh")
_BATCH_LENGTH = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """One aborted transaction on a partition: its data lies in [first_offset, last_offset]."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


def control_type(buf: bytes | bytearray | memoryview, pos: int = 0) -> int:
    """The control type of the control batch at ``pos`` (0 ABORT, 1 COMMIT, 5 SHARE_CHECKPOINT,
    6 SHARE_DELTA); -1 if unreadable.

    Reads only the first record's key: ``length, attributes, timestampDelta, offsetDelta,
    keyLength, key (version i16, type i16)``.
    """
    try:
        p = pos + HEADER_SIZE
        _, p = read_varint(buf, p)
        p += 1
        _, p = read_varint(buf, p)
        _, p = read_varint(buf, p)
        key_length, p = read_varint(buf, p)
        if key_length < _CONTROL_KEY.size or p + _CONTROL_KEY.size > len(buf):
            return -1
        return int(_CONTROL_KEY.unpack_from(buf, p)[1])
    except (IndexError, ValueError, struct.error):
        return -1


class PartitionTxnState:
    """Open transactions (producer id -> first offset) and aborted transactions of one partition."""

    __slots__ = ("aborted", "ongoing")

    def __init__(self) -> None:
        self.ongoing: dict[int, int] = {}
        self.aborted: list[AbortedTxn] = []

    def observe_data(self, producer_id: int, first_offset: int) -> None:
        """A transactional data batch was appended at ``first_offset``."""
        self.ongoing.setdefault(producer_id, first_offset)

    def observe_marker(self, producer_id: int, marker_type: int, offset: int, high_watermark: int) -> None:
        """A marker was appended at ``offset``; ``high_watermark`` is the log end before it.

        Only COMMIT and ABORT end a transaction: another control type (share state, or one this
        broker does not know) changes nothing even if its batch carried a producer id."""
        if marker_type not in (CONTROL_ABORT, CONTROL_COMMIT):
            return
        first = self.ongoing.pop(producer_id, None)
        if first is None or marker_type != CONTROL_ABORT:
            return
        lso = min([high_watermark, *self.ongoing.values()])
        self.aborted.append(AbortedTxn(producer_id, first, offset, lso))

    def is_open(self, producer_id: int) -> bool:
        return producer_id in self.ongoing

    def last_stable_offset(self, high_watermark: int) -> int:
        if not self.ongoing:
            return high_watermark
        return min(high_watermark, min(self.ongoing.values()))

    def aborted_between(self, start: int, end: int) -> list[AbortedTxn]:
        """Aborted transactions whose range overlaps ``[start, end]``."""
        return [a for a in self.aborted if a.last_offset >= start and a.first_offset <= end]

    def prune(self, log_start: int) -> None:
        """Forget aborted transactions entirely below the log start."""
        if self.aborted and self.aborted[0].last_offset < log_start:
            self.aborted = [a for a in self.aborted if a.last_offset >= log_start]

    # -- snapshot (inside the producer snapshot) --------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        return {
            "ongoing": [[pid, first] for pid, first in self.ongoing.items()],
            "aborted": [
                [a.producer_id, a.first_offset, a.last_offset, a.last_stable_offset] for a in self.aborted
            ],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PartitionTxnState:
        state = cls()
        for pid, first in data.get("ongoing", []):
            state.ongoing[int(pid)] = int(first)
        for pid, first, last, lso in data.get("aborted", []):
            state.aborted.append(AbortedTxn(int(pid), int(first), int(last), int(lso)))
        return state


def stable_prefix(records: bytes, end: int) -> tuple[bytes, int]:
    """The whole batches of ``records`` whose last offset is below ``end``, and how many records.

    Reads ``baseOffset``, ``batchLength`` and ``lastOffsetDelta`` with ``struct``; nothing is decoded.
    """
    pos = 0
    total = len(records)
    count = 0
    for first, last, size in _walk(records):
        if last >= end:
            break
        pos += size
        count += last - first + 1
    return (records if pos == total else records[:pos]), count


def _walk(records: bytes) -> Iterator[tuple[int, int, int]]:
    pos = 0
    total = len(records)
    while pos + HEADER_SIZE <= total:
        base = struct.unpack_from(">q", records, pos)[0]
        length = _BATCH_LENGTH.unpack_from(records, pos + 8)[0]
        delta = _BATCH_LENGTH.unpack_from(records, pos + 23)[0]
        size = length + 12
        if pos + size > total:
            return
        yield base, base + delta, size
        pos += size


_PRODUCER = struct.Struct(">hiqqqh")  # attributes .. producerEpoch, from byte 21


def stable_batches(
    records: bytes, end: int, aborted: list[AbortedTxn]
) -> tuple[tuple[tuple[int, int], ...], tuple[tuple[int, int], ...]]:
    """The batches of ``records`` below ``end`` (the LSO) as (first, last), and among them the
    data batches of aborted transactions, for read_committed share fetches. Headers only."""
    by_producer: dict[int, list[AbortedTxn]] = {}
    for a in aborted:
        by_producer.setdefault(a.producer_id, []).append(a)
    kept: list[tuple[int, int]] = []
    dropped: list[tuple[int, int]] = []
    pos = 0
    for first, last, size in _walk(records):
        if last >= end:
            break
        attributes, _, _, _, producer_id, _ = _PRODUCER.unpack_from(records, pos + 21)
        pos += size
        kept.append((first, last))
        aborts = by_producer.get(producer_id) if attributes & 0x10 and not attributes & 0x20 else None
        if aborts and any(a.first_offset <= first <= a.last_offset for a in aborts):
            dropped.append((first, last))
    return tuple(kept), tuple(dropped)


def subtract_ranges(
    ranges: list[tuple[int, int, int]], holes: tuple[tuple[int, int], ...]
) -> tuple[list[tuple[int, int, int]], list[tuple[int, int]]]:
    """``ranges`` (first, last, delivery count) without the offsets in ``holes`` (sorted (first,
    last)), and the offsets removed, as (first, last)."""
    kept: list[tuple[int, int, int]] = []
    removed: list[tuple[int, int]] = []
    for first, last, count in ranges:
        pos = first
        for h_first, h_last in holes:
            if h_last < pos or h_first > last:
                continue
            if h_first > pos:
                kept.append((pos, h_first - 1, count))
            cut_last = min(h_last, last)
            removed.append((max(h_first, pos), cut_last))
            pos = cut_last + 1
            if pos > last:
                break
        if pos <= last:
            kept.append((pos, last, count))
    return kept, removed
