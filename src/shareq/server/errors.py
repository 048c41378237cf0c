"""The one place where log, share and server exceptions become Kafka error codes."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from shareq.log.errors import (
    CorruptRecordError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTimestampError,
    LogIOError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    RecordTooLargeError,
    UnsupportedCompressionError,
)
from shareq.protocol import error_code_for
from shareq.share.persister import PersisterError
from shareq.share.session import ShareSessionError
from shareq.topic_configs import InvalidConfigError

from .topics import InvalidTopicError, TopicExistsError, UnknownTopicError

ERROR_CODES: dict[type[BaseException], ErrorCode] = {
    CorruptRecordError: ErrorCode.corrupt_message,
    RecordTooLargeError: ErrorCode.message_too_large,
    OffsetOutOfRangeError: ErrorCode.offset_out_of_range,
    OutOfOrderSequenceError: ErrorCode.out_of_order_sequence_number,
    InvalidProducerEpochError: ErrorCode.invalid_producer_epoch,
    LogIOError: ErrorCode.kafka_storage_error,
    InvalidTimestampError: ErrorCode.invalid_timestamp,
    InvalidRecordError: ErrorCode.invalid_record,
    UnsupportedCompressionError: ErrorCode.unsupported_compression_type,
    InvalidTopicError: ErrorCode.invalid_topic_exception,
    TopicExistsError: ErrorCode.topic_already_exists,
    UnknownTopicError: ErrorCode.unknown_topic_or_partition,
    InvalidConfigError: ErrorCode.invalid_config,
}


def error_code(error: BaseException) -> ErrorCode:
    return error_code_for(error, ERROR_CODES)


def session_error_code(error: ShareSessionError) -> ErrorCode:
    return ErrorCode(error.code.value)


def persister_error_code(error: PersisterError) -> ErrorCode:
    try:
        return ErrorCode(error.error_code)
    except ValueError:
        return ErrorCode.unknown_server_error
