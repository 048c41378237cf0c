"""KIP-848 consumer groups: ConsumerGroupHeartbeat with server-side assignors (``uniform``, ``range``)."""

from .assignor import ASSIGNORS, RANGE, UNIFORM, Assignment, range_assign, uniform_assign
from .coordinator import (
    ConsumerConfig,
    ConsumerGroup,
    ConsumerGroupCoordinator,
    ConsumerHeartbeat,
    ConsumerHeartbeatResult,
    ConsumerMember,
)

__all__ = [
    "ASSIGNORS",
    "RANGE",
    "UNIFORM",
    "Assignment",
    "ConsumerConfig",
    "ConsumerGroup",
    "ConsumerGroupCoordinator",
    "ConsumerHeartbeat",
    "ConsumerHeartbeatResult",
    "ConsumerMember",
    "range_assign",
    "uniform_assign",
]
