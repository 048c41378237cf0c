"""KIP-848 consumer groups: ConsumerGroupHeartbeat with the server-side ``uniform`` assignor."""

from .assignor import UNIFORM, Assignment, uniform_assign
from .coordinator import (
    ConsumerConfig,
    ConsumerGroup,
    ConsumerGroupCoordinator,
    ConsumerHeartbeat,
    ConsumerHeartbeatResult,
    ConsumerMember,
)

__all__ = [
    "UNIFORM",
    "Assignment",
    "ConsumerConfig",
    "ConsumerGroup",
    "ConsumerGroupCoordinator",
    "ConsumerHeartbeat",
    "ConsumerHeartbeatResult",
    "ConsumerMember",
    "uniform_assign",
]
