"""Partition logs: v2 record batches on disk, in segments with sparse indexes.

The broker never decodes records on its hot paths: :mod:`shareq.log.batch` reads the 61-byte batch
header with ``struct``; :mod:`shareq.log.records` encodes and decodes uncompressed batches for internal
topics, tests and our client.
"""

from .batch import (
    HEADER_SIZE,
    BatchHeader,
    Compression,
    TimestampType,
    crc_ok,
    iter_batches,
    patch_base_offset,
    read_batch_header,
)
from .config import LogConfig
from .errors import (
    CorruptRecordError,
    InvalidProducerEpochError,
    LogError,
    LogIOError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    RecordTooLargeError,
    UnsupportedCompressionError,
)
from .partition_log import AppendInfo, FetchData, PartitionLog, TimestampOffset
from .records import (
    Record,
    RecordBatch,
    decode_batch,
    decode_batches,
    encode_batch,
    encode_control_batch,
    encode_share_control_batch,
)

__all__ = [
    "HEADER_SIZE",
    "AppendInfo",
    "BatchHeader",
    "Compression",
    "CorruptRecordError",
    "FetchData",
    "InvalidProducerEpochError",
    "LogConfig",
    "LogError",
    "LogIOError",
    "OffsetOutOfRangeError",
    "OutOfOrderSequenceError",
    "PartitionLog",
    "Record",
    "RecordBatch",
    "RecordTooLargeError",
    "TimestampOffset",
    "TimestampType",
    "UnsupportedCompressionError",
    "crc_ok",
    "decode_batch",
    "decode_batches",
    "encode_batch",
    "encode_control_batch",
    "encode_share_control_batch",
    "iter_batches",
    "patch_base_offset",
    "read_batch_header",
]
