"""Inputs and outputs of the classic group coordinator: frozen values, no codec types."""

from __future__ import annotations

from dataclasses import dataclass, field

from shareq.coordinators.group.records import CoordinatorRecord

from .errors import ClassicErrorCode

NO_GENERATION = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class Protocol:
    name: str
    metadata: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None = None
    protocol_type: str
    protocols: tuple[Protocol, ...]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    client_id: str = ""
    client_host: str = ""
    require_known_member_id: bool = True
    """JoinGroup v4+ (KIP-394): a first join gets MEMBER_ID_REQUIRED with an assigned id."""


@dataclass(frozen=True, slots=True, kw_only=True)
class JoinMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class JoinResponse:
    error: ClassicErrorCode = ClassicErrorCode.NONE
    generation: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    member_id: str = ""
    members: tuple[JoinMember, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncRequest:
    group_id: str
    member_id: str
    generation: int
    group_instance_id: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignments: tuple[tuple[str, bytes], ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncResponse:
    error: ClassicErrorCode = ClassicErrorCode.NONE
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True, slots=True, kw_only=True)
class LeavingMember:
    member_id: str
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class JoinCompleted:
    """A parked JoinGroup of ``member_id`` is answered with ``response``."""

    group_id: str
    member_id: str
    response: JoinResponse


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncCompleted:
    """A parked SyncGroup of ``member_id`` is answered with ``response``."""

    group_id: str
    member_id: str
    response: SyncResponse


Completion = JoinCompleted | SyncCompleted


@dataclass(frozen=True, slots=True, kw_only=True)
class ClassicResult:
    """What one call changed: records to persist before answering, parked requests to answer,
    and the caller's own answer (``None``: the caller's request is parked until a completion
    for it appears, in this or a later result)."""

    records: tuple[CoordinatorRecord, ...] = ()
    completions: tuple[Completion, ...] = ()
    response: JoinResponse | SyncResponse | None = None
    errors: tuple[ClassicErrorCode, ...] = ()
    """LeaveGroup: one code per leaving member, in request order."""
    member_id: str = ""
    """JoinGroup and SyncGroup: the caller's member id (assigned here for a first join), which
    names the completion that will answer a parked request."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class ClassicGroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol_name: str
    generation: int
    members: tuple[MemberDescription, ...] = field(default_factory=tuple)
