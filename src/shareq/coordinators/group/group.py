"""In-memory state of one share group and its members (owned and mutated by the coordinator)."""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field

from shareq.coordinators.group.assignor import MemberAssignment
from shareq.coordinators.group.messages import TopicMetadata, TopicPartitions


class GroupState(enum.Enum):
    """Share groups have no rebalance phases: assignments are computed by the coordinator at once."""

    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(slots=True, kw_only=True)
class ShareGroupMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = -1  # accepted too: the response that moved the member on may be lost
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: frozenset[str] = frozenset()
    assignment: MemberAssignment = field(default_factory=dict)
    last_heartbeat_ms: int = 0
    deadline_ms: int = 0


@dataclass(slots=True, kw_only=True)
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareGroupMember] = field(default_factory=dict)
    subscription_metadata: dict[str, TopicMetadata] = field(default_factory=dict)
    """Subscribed topics that exist: name -> (id, partition count); a change bumps the group epoch."""
    initialized: dict[uuid.UUID, tuple[str, frozenset[int]]] = field(default_factory=dict)
    """Share-partitions with initialized durable state: topic id -> (name, partitions)."""
    initializing: dict[uuid.UUID, set[int]] = field(default_factory=dict)
    """Share-partitions handed to the shell for initialization, not yet confirmed (not durable)."""
    target: dict[str, MemberAssignment] = field(default_factory=dict)
    assignment_timestamp_ms: int | None = None
    """When the target was last computed (``None``: not since this broker loaded the group)."""
    forming_until_ms: int | None = None
    """Until when a new group gathers the members joining together before its first target with
    partitions (not durable: a group loaded after a restart assigns at once, as before)."""

    @property
    def state(self) -> GroupState:
        return GroupState.STABLE if self.members else GroupState.EMPTY

    def topic_name(self, topic_id: uuid.UUID) -> str:
        if topic_id in self.initialized:
            return self.initialized[topic_id][0]
        for name, meta in self.subscription_metadata.items():
            if meta.topic_id == topic_id:
                return name
        return ""

    def describe_assignment(self, assignment: MemberAssignment) -> tuple[TopicPartitions, ...]:
        """An assignment as sorted ``TopicPartitions`` (topics by name, partitions ascending)."""
        entries = [
            TopicPartitions(topic_id=t, topic_name=self.topic_name(t), partitions=tuple(sorted(ps)))
            for t, ps in assignment.items()
            if ps
        ]
        return tuple(sorted(entries, key=lambda e: (e.topic_name, str(e.topic_id))))
