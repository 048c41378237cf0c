"""The classic group coordinator (JoinGroup/SyncGroup/Heartbeat/LeaveGroup) and committed offsets."""

from .coordinator import ClassicConfig, ClassicGroupCoordinator
from .errors import ClassicErrorCode, ClassicRequestError, ClassicStateError
from .group import ClassicGroup, ClassicGroupState, ClassicMember
from .messages import (
    ClassicGroupDescription,
    ClassicResult,
    Completion,
    JoinCompleted,
    JoinMember,
    JoinRequest,
    JoinResponse,
    LeavingMember,
    MemberDescription,
    Protocol,
    SyncCompleted,
    SyncRequest,
    SyncResponse,
)
from .offsets import ConsumerOffsets, OffsetCommit
from .records import RECORD_TYPES, ClassicRecordType, OffsetValue, record_type

__all__ = [
    "RECORD_TYPES",
    "ClassicConfig",
    "ClassicErrorCode",
    "ClassicGroup",
    "ClassicGroupCoordinator",
    "ClassicGroupDescription",
    "ClassicGroupState",
    "ClassicMember",
    "ClassicRecordType",
    "ClassicRequestError",
    "ClassicResult",
    "ClassicStateError",
    "Completion",
    "ConsumerOffsets",
    "JoinCompleted",
    "JoinMember",
    "JoinRequest",
    "JoinResponse",
    "LeavingMember",
    "MemberDescription",
    "OffsetCommit",
    "OffsetValue",
    "Protocol",
    "SyncCompleted",
    "SyncRequest",
    "SyncResponse",
    "record_type",
]
