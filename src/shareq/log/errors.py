"""Errors raised by the partition log.

Each class is a distinct fault the server edge maps to one Kafka ``ErrorCode``; the log itself never
speaks error codes.
"""

from __future__ import annotations


class LogError(Exception):
    """Base class for every error the log raises."""


class CorruptRecordError(LogError):
    """A record batch is malformed: truncated, wrong magic, impossible length or bad CRC32C."""


class RecordTooLargeError(LogError):
    """An append is larger than the log's ``max_message_bytes``."""


class OffsetOutOfRangeError(LogError):
    """A read asked for an offset outside ``[log_start_offset, log_end_offset]``."""


class OutOfOrderSequenceError(LogError):
    """An idempotent producer skipped sequence numbers (or started a new epoch above 0)."""


class InvalidProducerEpochError(LogError):
    """An idempotent producer wrote with an epoch older than one already seen (it was fenced)."""


class UnsupportedCompressionError(LogError):
    """The record codec was asked to decode a compressed batch (only uncompressed batches decode here)."""


class LogIOError(LogError):
    """The disk refused a write or read (for example ENOSPC); the log was left consistent."""


class RecordErrors(LogError):
    """Records of a batch refused one by one, as Kafka's ``RecordValidationException``: the batch
    is refused whole, and ``record_errors`` names each refused record (index in its batch, why)."""

    def __init__(self, message: str, record_errors: tuple[tuple[int, str], ...] = ()) -> None:
        super().__init__(message)
        self.record_errors = record_errors


class InvalidTimestampError(RecordErrors):
    """A CreateTime record's timestamp lies outside the topic's ``message.timestamp.before.max.ms`` /
    ``message.timestamp.after.max.ms`` window around the broker's clock."""


class InvalidRecordError(RecordErrors):
    """A record the topic cannot take (a record without a key on a compacted topic)."""
