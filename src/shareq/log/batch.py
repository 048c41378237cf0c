"""The Kafka v2 record-batch header, read with ``struct`` and never decoded further.

The broker never decodes records on the produce or fetch path: it reads the fixed 61-byte header
of each batch, checks its CRC32C and patches ``baseOffset`` in place (the CRC starts at
``attributes``, so the patch keeps it valid).

Layout (big-endian)::

    0  baseOffset            i64     27 baseTimestamp   i64
    8  batchLength           i32     35 maxTimestamp    i64
    12 partitionLeaderEpoch  i32     43 producerId      i64
    16 magic                 i8      51 producerEpoch   i16
    17 crc                   u32     53 baseSequence    i32
    21 attributes            i16     57 recordsCount    i32
    23 lastOffsetDelta       i32     61 records...
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from enum import IntEnum

from crc32c import crc32c

from .errors import CorruptRecordError

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the bytes batchLength does not count
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD  # a batchLength too short to hold the header
MAGIC = 2
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
PARTITION_LEADER_EPOCH_OFFSET = 12
MAX_TIMESTAMP_OFFSET = 35

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1

_I64 = struct.Struct(">q")


class Compression(IntEnum):
    """The codec in the low three attribute bits."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class TimestampType(IntEnum):
    """Attribute bit 3: whether timestamps were set by the producer or by the log on append."""

    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The 61-byte header of one v2 record batch."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def compression(self) -> Compression:
        return Compression(self.attributes & COMPRESSION_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        return (
            TimestampType.LOG_APPEND_TIME
            if self.attributes & TIMESTAMP_TYPE_MASK
            else TimestampType.CREATE_TIME
        )

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def last_sequence(self) -> int:
        """The sequence of the batch's last record (sequences wrap at 2**31 like Kafka's)."""
        if self.base_sequence < 0:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) % 0x80000000


def read_batch_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Read and sanity-check the header at ``pos``; the batch body must be in ``buf`` too.

    Raises :class:`CorruptRecordError` if the header or body is truncated, the magic is not 2 or the
    length is impossible. The CRC is not checked here (see :func:`crc_ok`).
    """
    end = len(buf)
    if pos + HEADER_SIZE > end:
        raise CorruptRecordError(f"truncated batch header at byte {pos}: {end - pos} of {HEADER_SIZE} bytes")
    header = BatchHeader(*HEADER.unpack_from(buf, pos))
    if header.magic != MAGIC:
        raise CorruptRecordError(
            f"batch at byte {pos} has magic {header.magic}, only v2 (magic 2) is supported"
        )
    if header.batch_length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(f"batch at byte {pos} has impossible batchLength {header.batch_length}")
    if header.last_offset_delta < 0:
        raise CorruptRecordError(
            f"batch at byte {pos} has negative lastOffsetDelta {header.last_offset_delta}"
        )
    if pos + header.size > end:
        raise CorruptRecordError(
            f"truncated batch at byte {pos}: needs {header.size} bytes, {end - pos} available"
        )
    return header


def iter_batches(buf: bytes | bytearray | memoryview) -> Iterator[tuple[int, BatchHeader]]:
    """Yield ``(position, header)`` for each batch; the batches must exactly fill ``buf``."""
    pos = 0
    end = len(buf)
    while pos < end:
        header = read_batch_header(buf, pos)
        yield pos, header
        pos += header.size


def crc_ok(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> bool:
    """Whether the CRC32C over attributes..end of the batch at ``pos`` matches the header's."""
    view = memoryview(buf)
    return crc32c(view[pos + ATTRIBUTES_OFFSET : pos + header.size]) == header.crc


def patch_base_offset(buf: bytearray | memoryview, pos: int, offset: int) -> None:
    """Overwrite baseOffset of the batch at ``pos`` in place; the CRC stays valid."""
    _I64.pack_into(buf, pos, offset)
