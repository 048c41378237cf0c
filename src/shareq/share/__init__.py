"""The share-partition engine: sans-I/O queue semantics over a partition log."""

from shareq.protocol.acknowledge_type import AcknowledgeType
from shareq.share.acknowledgement import parse_acknowledge_types
from shareq.share.errors import (
    IllegalStateTransition,
    InvalidRecordState,
    InvalidRequest,
    ShareEngineBug,
    ShareEngineError,
    ShareRequestError,
)
from shareq.share.record_state import RecordState
from shareq.share.share_partition import SharePartition
from shareq.share.types import (
    AcknowledgementBatch,
    AcknowledgeResult,
    AcquiredRecords,
    AcquireMode,
    AcquireResult,
    CompleteResult,
    MarkerResult,
    PendingWrite,
    ResetPolicy,
    RunView,
    ShareConfig,
)

__all__ = [
    "AcknowledgeResult",
    "AcknowledgeType",
    "AcknowledgementBatch",
    "AcquireMode",
    "AcquireResult",
    "AcquiredRecords",
    "CompleteResult",
    "IllegalStateTransition",
    "InvalidRecordState",
    "InvalidRequest",
    "MarkerResult",
    "PendingWrite",
    "RecordState",
    "ResetPolicy",
    "RunView",
    "ShareConfig",
    "ShareEngineBug",
    "ShareEngineError",
    "SharePartition",
    "ShareRequestError",
    "parse_acknowledge_types",
]
