"""Checking a produce request's batches and assigning their offsets, without any I/O.

:func:`prepare_append` walks the 61-byte headers of a buffer of concatenated v2 batches, checks
each (magic, lengths, record count, CRC32C, idempotent-producer sequence and epoch), and patches
``baseOffset`` and ``partitionLeaderEpoch`` in place. Nothing outside the buffer changes: the log
writes the buffer, then commits the index entries and producer state returned here.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from crc32c import crc32c

from .batch import (
    ATTRIBUTES_OFFSET,
    CONTROL_MASK,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    MIN_BATCH_LENGTH,
    TRANSACTIONAL_MASK,
)
from .batch import PARTITION_LEADER_EPOCH_OFFSET as _EPOCH_AT
from .errors import CorruptRecordError, OutOfOrderSequenceError
from .producer_state import BatchMetadata, ProducerStateManager
from .transactions import control_type

_SEQUENCE_MODULUS = 0x80000000
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")


class PreparedAppend(NamedTuple):
    """Offsets assigned to a buffer of batches, and what to record once it is written.

    (A NamedTuple: one is built per produce request, and it is cheaper than a frozen dataclass.)
    """

    first_offset: int
    next_offset: int
    record_count: int
    # (position in the buffer, base offset, next offset, size, max timestamp) per batch
    placed: tuple[tuple[int, int, int, int, int], ...]
    # (producer id, epoch, batch or None for a control batch) per producer batch
    producers: tuple[tuple[int, int, BatchMetadata | None], ...]
    # (producer id, -1 for data or the marker type, first offset) per transactional batch
    txns: tuple[tuple[int, int, int], ...]


def prepare_append(
    buf: bytearray,
    next_offset: int,
    leader_epoch: int,
    state: ProducerStateManager,
    *,
    allow_control: bool = True,
) -> PreparedAppend | BatchMetadata:
    """Validate and patch ``buf`` for an append at ``next_offset``.

    Returns the original :class:`BatchMetadata` if a batch is an idempotent retry (the caller
    writes nothing). Control batches (transaction markers) come only from the broker itself:
    with ``allow_control=False`` one is refused. Raises :class:`CorruptRecordError`,
    :class:`OutOfOrderSequenceError` or :class:`InvalidProducerEpochError`.
    """
    view = memoryview(buf)
    total = len(buf)
    first_offset = next_offset
    placed: list[tuple[int, int, int, int, int]] = []
    producers: list[tuple[int, int, BatchMetadata | None]] = []
    txns: list[tuple[int, int, int]] = []
    pos = 0
    while pos < total:
        if pos + HEADER_SIZE > total:
            raise CorruptRecordError(f"truncated batch header at byte {pos} of the records")
        h = HEADER.unpack_from(buf, pos)
        (_, length, _, magic, crc, attributes, delta, _, max_ts, producer_id, epoch, first_seq, count) = h
        size = length + LOG_OVERHEAD
        if magic != MAGIC:
            raise CorruptRecordError(f"batch at byte {pos} has magic {magic}, only v2 is accepted")
        if length < MIN_BATCH_LENGTH or pos + size > total:
            raise CorruptRecordError(f"batch at byte {pos} has bad batchLength {length}")
        if delta < 0 or count != delta + 1:
            raise CorruptRecordError(f"batch at byte {pos}: {count} records but lastOffsetDelta {delta}")
        if crc32c(view[pos + ATTRIBUTES_OFFSET : pos + size]) != crc:
            raise CorruptRecordError(f"batch at byte {pos} fails its CRC32C check")
        last_offset = next_offset + delta
        if attributes & CONTROL_MASK and not allow_control:
            raise CorruptRecordError(f"batch at byte {pos} is a control batch; clients cannot write those")
        if attributes & TRANSACTIONAL_MASK and producer_id >= 0:
            kind = control_type(buf, pos) if attributes & CONTROL_MASK else -1
            txns.append((producer_id, kind, next_offset))
        if producer_id >= 0:
            if attributes & CONTROL_MASK or first_seq < 0:
                producers.append((producer_id, epoch, None))
            else:
                last_seq = (first_seq + delta) % _SEQUENCE_MODULUS
                earlier = [p for p in producers if p[0] == producer_id]
                if earlier:
                    _check_follows(producer_id, earlier[-1], epoch, first_seq)
                else:
                    original = state.check(producer_id, epoch, first_seq, last_seq)
                    if original is not None:
                        return original
                batch = BatchMetadata(first_seq, last_seq, next_offset, last_offset)
                producers.append((producer_id, epoch, batch))
        _I64.pack_into(buf, pos, next_offset)
        _I32.pack_into(buf, pos + _EPOCH_AT, leader_epoch)
        placed.append((pos, next_offset, last_offset + 1, size, max_ts))
        next_offset = last_offset + 1
        pos += size
    return PreparedAppend(
        first_offset=first_offset,
        next_offset=next_offset,
        record_count=next_offset - first_offset,
        placed=tuple(placed),
        producers=tuple(producers),
        txns=tuple(txns),
    )


def _check_follows(
    producer_id: int, earlier: tuple[int, int, BatchMetadata | None], epoch: int, first_seq: int
) -> None:
    """A second batch of one producer in the same request must continue the first."""
    _, prev_epoch, prev = earlier
    prev_last = prev.last_seq if prev is not None else -1
    if epoch != prev_epoch or first_seq != (prev_last + 1) % _SEQUENCE_MODULUS:
        raise OutOfOrderSequenceError(
            f"producer {producer_id}: batch in one request does not follow the previous one"
        )
