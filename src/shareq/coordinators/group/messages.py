"""Inputs, outputs and effects of the share-group coordinator (frozen values, no codec types).

Each maps field-for-field onto a kio message so the wire handlers only translate:
``HeartbeatRequest``/``HeartbeatResult`` onto ShareGroupHeartbeat v1 (api 76),
``GroupDescription`` onto ShareGroupDescribe v1 (api 77), ``GroupListing`` onto ListGroups.
Effects (``InitializeShareState``, ``DeleteShareState``, ``MemberRemoved``) are work the shell
must do; the coordinator never does I/O. Times are milliseconds on the caller's clock.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from shareq.coordinators.group.records import CoordinatorRecord

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
SHARE_GROUP_TYPE = "share"


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicMetadata:
    """One topic of the broker's metadata image."""

    topic_id: uuid.UUID
    partitions: int


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicPartitions:
    """Some partitions of one topic (an assignment entry or a set of share-partitions)."""

    topic_id: uuid.UUID
    topic_name: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatRequest:
    """A ShareGroupHeartbeat, plus the client id and host the handler knows from the connection.

    ``rack_id`` and ``subscribed_topic_names`` are ``None`` when unchanged since the last heartbeat.
    """

    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_topic_names: tuple[str, ...] | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class InitializeShareState:
    """Effect: initialize durable state of these share-partitions (InitializeShareGroupState).

    Use ``state_epoch`` as the state epoch and start offset -1 (the SPSO is resolved by
    ``share.auto.offset.reset`` on first fetch). Then report back with
    ``ShareGroupCoordinator.initialize_complete`` (or ``initialize_failed``); only initialized
    partitions are assigned.
    """

    group_id: str
    state_epoch: int
    topics: tuple[TopicPartitions, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteShareState:
    """Effect: delete the durable state of these share-partitions (DeleteShareGroupState)."""

    group_id: str
    topics: tuple[TopicPartitions, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberRemoved:
    """Effect: a member left (``reason="left"``) or its session expired (``"expired"``).

    The shell closes the member's share session and releases the records it holds in
    ``assignment``'s share-partitions.
    """

    group_id: str
    member_id: str
    assignment: tuple[TopicPartitions, ...]
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatResult:
    """Persist ``records``, perform the effects, then answer with the response fields.

    ``assignment`` is ``None`` when it did not change since the last response to this member.
    """

    records: tuple[CoordinatorRecord, ...]
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: tuple[TopicPartitions, ...] | None
    initialize: InitializeShareState | None = None
    delete_state: DeleteShareState | None = None
    removed: MemberRemoved | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CoordinatorResult:
    """Records to persist and effects to perform, from timers, metadata changes and admin calls."""

    records: tuple[CoordinatorRecord, ...] = ()
    removed: tuple[MemberRemoved, ...] = ()
    initialize: tuple[InitializeShareState, ...] = ()
    delete_state: tuple[DeleteShareState, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberDescription:
    member_id: str
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    assignment: tuple[TopicPartitions, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupDescription:
    group_id: str
    group_state: str
    group_epoch: int
    assignment_epoch: int
    assignor_name: str
    members: tuple[MemberDescription, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupListing:
    group_id: str
    group_type: str
    group_state: str
