"""The share-group coordinator: membership, assignment, group configs and durable group records."""

from shareq.coordinators.group.assignor import ASSIGNOR_NAME, assign
from shareq.coordinators.group.config import (
    AutoOffsetReset,
    ConfigEntry,
    ConfigSource,
    ShareBrokerConfig,
    ShareGroupConfig,
)
from shareq.coordinators.group.coordinator import ShareGroupCoordinator
from shareq.coordinators.group.errors import GroupErrorCode, GroupRequestError, GroupStateError
from shareq.coordinators.group.group import GroupState
from shareq.coordinators.group.messages import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    SHARE_GROUP_TYPE,
    CoordinatorResult,
    DeleteShareState,
    GroupDescription,
    GroupListing,
    HeartbeatRequest,
    HeartbeatResult,
    InitializeShareState,
    MemberDescription,
    MemberRemoved,
    TopicMetadata,
    TopicPartitions,
)
from shareq.coordinators.group.records import CoordinatorRecord

__all__ = [
    "ASSIGNOR_NAME",
    "JOIN_EPOCH",
    "LEAVE_EPOCH",
    "SHARE_GROUP_TYPE",
    "AutoOffsetReset",
    "ConfigEntry",
    "ConfigSource",
    "CoordinatorRecord",
    "CoordinatorResult",
    "DeleteShareState",
    "GroupDescription",
    "GroupErrorCode",
    "GroupListing",
    "GroupRequestError",
    "GroupState",
    "GroupStateError",
    "HeartbeatRequest",
    "HeartbeatResult",
    "InitializeShareState",
    "MemberDescription",
    "MemberRemoved",
    "ShareBrokerConfig",
    "ShareGroupConfig",
    "ShareGroupCoordinator",
    "TopicMetadata",
    "TopicPartitions",
    "assign",
]
