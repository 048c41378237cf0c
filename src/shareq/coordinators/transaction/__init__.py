"""The transaction coordinator (sans-I/O): transactional ids, their state and their records."""

from .coordinator import TransactionCoordinator, TxnConfig, TxnWrite
from .records import TxnRecordError, decode_key, decode_value, encode_key, encode_value
from .state import (
    NO_PRODUCER_ID,
    TV_0,
    TV_2,
    TopicPartition,
    TxnErrorCode,
    TxnMetadata,
    TxnRequestError,
    TxnState,
)

__all__ = [
    "NO_PRODUCER_ID",
    "TV_0",
    "TV_2",
    "TopicPartition",
    "TransactionCoordinator",
    "TxnConfig",
    "TxnErrorCode",
    "TxnMetadata",
    "TxnRecordError",
    "TxnRequestError",
    "TxnState",
    "TxnWrite",
    "decode_key",
    "decode_value",
    "encode_key",
    "encode_value",
]
