"""In-memory state of one classic group and its members (owned and mutated by the coordinator)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from .messages import JoinMember, MemberDescription, Protocol


class ClassicGroupState(enum.Enum):
    """Kafka's classic rebalance states (names as DescribeGroups and ListGroups report them)."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(slots=True, kw_only=True)
class ClassicMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    protocol_type: str
    protocols: tuple[Protocol, ...]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    assignment: bytes = b""
    awaiting_join: bool = False
    """A JoinGroup of this member is parked until the join phase completes."""
    awaiting_sync: bool = False
    """A SyncGroup of this member is parked until the leader's assignment arrives."""
    pending_sync: bool = False
    """The join phase completed and this member has not sent SyncGroup yet."""
    session_deadline: int | None = None
    """Last heartbeat + session timeout; ``None`` while a request of the member is parked."""

    def metadata(self, protocol: str | None) -> bytes:
        for p in self.protocols:
            if p.name == protocol:
                return p.metadata
        return b""

    def protocol_names(self) -> frozenset[str]:
        return frozenset(p.name for p in self.protocols)


@dataclass(slots=True, kw_only=True)
class ClassicGroup:
    group_id: str
    state: ClassicGroupState = ClassicGroupState.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str | None = None
    members: dict[str, ClassicMember] = field(default_factory=dict)
    pending: dict[str, int] = field(default_factory=dict)
    """Member ids handed out with MEMBER_ID_REQUIRED -> deadline for their second JoinGroup."""
    static: dict[str, str] = field(default_factory=dict)
    """group.instance.id -> member id."""
    phase_deadline: int | None = None
    """Rebalance timeout of the join phase (PreparingRebalance) or of the sync phase."""
    initial_delay: bool = False
    """The join phase of a group that was empty waits group.initial.rebalance.delay.ms."""
    initial_delay_cap: int = 0
    new_member_added: bool = False

    def all_joined(self) -> bool:
        return not self.pending and all(m.awaiting_join for m in self.members.values())

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def candidate_protocols(self, excluding: str | None = None) -> frozenset[str] | None:
        """Protocols every member (but ``excluding``) supports; ``None`` when there is no such member."""
        names: frozenset[str] | None = None
        for m in self.members.values():
            if m.member_id == excluding:
                continue
            names = m.protocol_names() if names is None else names & m.protocol_names()
        return names

    def join_members(self) -> tuple[JoinMember, ...]:
        return tuple(
            JoinMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                metadata=m.metadata(self.protocol_name),
            )
            for m in self.members.values()
        )

    def describe_members(self) -> tuple[MemberDescription, ...]:
        return tuple(
            MemberDescription(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                metadata=m.metadata(self.protocol_name) if self.state is ClassicGroupState.STABLE else b"",
                assignment=m.assignment if self.state is ClassicGroupState.STABLE else b"",
            )
            for m in self.members.values()
        )
