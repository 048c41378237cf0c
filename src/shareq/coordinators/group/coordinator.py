"""The share-group coordinator: membership, epochs, target assignment, configs and durable records.

Sans-I/O (aioquic style): every call takes ``now_ms``; ``next_deadline()`` says when ``expire`` is
due. Mutations return ``CoordinatorRecord``s for the shell to persist before it answers, plus
effects (``InitializeShareState``, ``DeleteShareState``, ``MemberRemoved``) for it to perform.
Durable state (group existence and epoch, initialized share-partitions, configs) changes only by
applying records, through the same ``_apply`` that ``replay`` uses, so loading is replaying.

Share-partition initialization follows KIP-932: a subscribed partition without durable state is
returned in ``initialize``; the shell sends InitializeShareGroupState and then calls
``initialize_complete``, which records the partition and bumps the group epoch. Only initialized
partitions are assigned, so a consumer never fetches from a share-partition whose state does not
exist. (A handler that wants the assignment in the same response may, after initializing, call
``heartbeat`` again with the epoch it was just given and ``subscribed_topic_names=None``.)
"""

from __future__ import annotations

import heapq
import uuid
from collections.abc import Iterable, Mapping
from types import MappingProxyType

from shareq.coordinators.group.admin import ShareGroupAdmin
from shareq.coordinators.group.assignor import MemberAssignment, assign
from shareq.coordinators.group.config import (
    DLQ_TOPIC_NAME,
    ConfigEntry,
    ShareBrokerConfig,
    ShareGroupConfig,
    describe_group_config,
    resolve_group_config,
)
from shareq.coordinators.group.errors import GroupErrorCode, GroupRequestError, GroupStateError
from shareq.coordinators.group.group import ShareGroup, ShareGroupMember
from shareq.coordinators.group.messages import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    SHARE_GROUP_TYPE,
    CoordinatorResult,
    DeleteShareState,
    HeartbeatRequest,
    HeartbeatResult,
    InitializeShareState,
    MemberRemoved,
    TopicMetadata,
    TopicPartitions,
)
from shareq.coordinators.group.records import (
    FOREIGN_RECORD_TYPES,
    CoordinatorRecord,
    GroupConfigValue,
    GroupMetadataValue,
    PartitionMetadataValue,
    RecordType,
    RecordValue,
    decode_key,
    decode_value,
    make_record,
    partition_metadata_value,
)

_MAX_EPOCH = 2**31 - 1
FORMING_WINDOW_MS = 300
"""How long a new share group gathers members before its first target assignment (at most its
``share.assignment.interval.ms``). Kafka's first target of a new group gives nothing (its
share-partitions are not initialized yet) and holds the next one back a whole interval, so the
consumers started together all get partitions from the same target; shareq initializes at
once, and without this window the first member to heartbeat after that would take every
partition, and with it every record waiting, before a member starting beside it joined. Members
without partitions meanwhile are asked back when the window ends."""


def _err(code: GroupErrorCode, message: str) -> GroupRequestError:
    return GroupRequestError(code, message)


_NO_OVERRIDES: Mapping[str, str] = MappingProxyType({})


class ShareGroupCoordinator(ShareGroupAdmin):
    """All share groups of this broker, keyed by group id."""

    def __init__(self, broker: ShareBrokerConfig | None = None) -> None:
        self.broker = broker or ShareBrokerConfig()
        self._groups: dict[str, ShareGroup] = {}
        self._configs: dict[str, dict[str, str]] = {}
        self._resolved: dict[str, tuple[Mapping[str, str], ShareBrokerConfig, ShareGroupConfig]] = {}
        self._foreign: dict[str, str] = {}
        self._deadlines: list[tuple[int, str, str]] = []

    # ----------------------------------------------------------------- group-type registry

    def member_epoch(self, group_id: str, member_id: str) -> int | None:
        """The current epoch of a member, or None when the group has no such member."""
        group = self._groups.get(group_id)
        member = None if group is None else group.members.get(member_id)
        return None if member is None else member.member_epoch

    def register_group_type(self, group_id: str, group_type: str) -> None:
        """Record that ``group_id`` is used by another protocol (``consumer``, ``classic``)."""
        if group_id in self._groups:
            raise _err(GroupErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"group {group_id} is a share group")
        self._foreign[group_id] = group_type

    def unregister_group_type(self, group_id: str) -> None:
        """``group_id`` is no longer used by another protocol (its group was deleted)."""
        self._foreign.pop(group_id, None)

    def group_type(self, group_id: str) -> str | None:
        """``"share"`` for share groups, the registered type for others, ``None`` if unused."""
        if group_id in self._groups:
            return SHARE_GROUP_TYPE
        return self._foreign.get(group_id)

    # ----------------------------------------------------------------- heartbeat

    def heartbeat(
        self, request: HeartbeatRequest, *, now_ms: int, topics: Mapping[str, TopicMetadata]
    ) -> HeartbeatResult:
        """Serve one ShareGroupHeartbeat. ``topics`` is the broker's whole topic image.

        Raises ``GroupRequestError`` (state unchanged) for UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH,
        INVALID_REQUEST (also an empty group id, as Kafka), GROUP_ID_NOT_FOUND, GROUP_MAX_SIZE_REACHED and
        INCONSISTENT_GROUP_PROTOCOL.
        """
        gid, mid, epoch = request.group_id, request.member_id, request.member_epoch
        if not gid:  # Kafka: INVALID_REQUEST "GroupId can't be empty" (not INVALID_GROUP_ID)
            raise _err(GroupErrorCode.INVALID_REQUEST, "group id must not be empty")
        if not mid:
            raise _err(GroupErrorCode.INVALID_REQUEST, "member id must not be empty")
        if epoch < LEAVE_EPOCH:
            raise _err(GroupErrorCode.INVALID_REQUEST, f"invalid member epoch {epoch}")
        if request.rack_id == "":
            raise _err(GroupErrorCode.INVALID_REQUEST, "rack id must be null or non-empty")
        if gid in self._foreign:
            raise _err(
                GroupErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                f"group {gid} is a {self._foreign[gid]} group, not a share group",
            )
        group = self._groups.get(gid)
        if epoch == LEAVE_EPOCH:
            return self._leave(group, gid, mid)
        if epoch == JOIN_EPOCH:
            if not request.subscribed_topic_names:
                raise _err(GroupErrorCode.INVALID_REQUEST, "subscribed topic names must be set when joining")
            member = group.members.get(mid) if group else None
            if member is None and group and len(group.members) >= self.broker.max_size:
                raise _err(
                    GroupErrorCode.GROUP_MAX_SIZE_REACHED,
                    f"group {gid} has reached its maximum size of {self.broker.max_size}",
                )
        else:
            if group is None:
                raise _err(GroupErrorCode.GROUP_ID_NOT_FOUND, f"share group {gid} not found")
            member = group.members.get(mid)
            if member is None:
                raise _err(GroupErrorCode.UNKNOWN_MEMBER_ID, f"member {mid} is not in group {gid}")
            if epoch != member.member_epoch and epoch != member.previous_member_epoch:
                raise _err(
                    GroupErrorCode.FENCED_MEMBER_EPOCH,
                    f"member epoch {epoch} does not match the current epoch {member.member_epoch}",
                )

        # Validated: from here on, mutate.
        records: list[CoordinatorRecord] = []
        config = self.group_config(gid)
        created = group is None
        if group is None:
            group = ShareGroup(group_id=gid)
            self._groups[gid] = group
        bump = created
        if member is None:
            member = ShareGroupMember(member_id=mid)
            group.members[mid] = member
            bump = True
        member.client_id, member.client_host = request.client_id, request.client_host
        if request.rack_id is not None:
            member.rack_id = request.rack_id
        if request.subscribed_topic_names is not None:
            names = frozenset(request.subscribed_topic_names)
            if names != member.subscribed_topic_names:
                member.subscribed_topic_names = names
                bump = True
        bump |= self._refresh_subscription(group, topics)
        delete_state = self._drop_deleted_topics(group, topics, records)
        bump |= delete_state is not None
        if bump:
            self._bump_epoch(group, records)
        if created:
            group.forming_until_ms = now_ms + min(config.assignment_interval_ms, FORMING_WINDOW_MS)
        self._maybe_assign(group, now_ms, config.assignment_interval_ms)
        initialize = self._partitions_to_initialize(group)

        new_assignment = self._current_target(group, member)
        send = epoch == JOIN_EPOCH or epoch != member.member_epoch or new_assignment != member.assignment
        if member.member_epoch != group.assignment_epoch:
            member.previous_member_epoch = member.member_epoch
        member.member_epoch = group.assignment_epoch
        member.assignment = new_assignment
        self._touch(group, member, now_ms, config.session_timeout_ms)
        interval = config.heartbeat_interval_ms
        forming = group.forming_until_ms
        if forming is not None and now_ms < forming and not new_assignment:
            interval = min(interval, forming - now_ms)  # asked back when the group has formed
        return HeartbeatResult(
            records=tuple(records),
            member_id=mid,
            member_epoch=member.member_epoch,
            heartbeat_interval_ms=interval,
            assignment=group.describe_assignment(new_assignment) if send else None,
            initialize=initialize,
            delete_state=delete_state,
        )

    def _leave(self, group: ShareGroup | None, gid: str, mid: str) -> HeartbeatResult:
        if group is None:
            raise _err(GroupErrorCode.GROUP_ID_NOT_FOUND, f"share group {gid} not found")
        if mid not in group.members:
            raise _err(GroupErrorCode.UNKNOWN_MEMBER_ID, f"member {mid} is not in group {gid}")
        records: list[CoordinatorRecord] = []
        removed = self._remove_member(group, mid, "left", records)
        return HeartbeatResult(
            records=tuple(records),
            member_id=mid,
            member_epoch=LEAVE_EPOCH,
            heartbeat_interval_ms=self.group_config(gid).heartbeat_interval_ms,
            assignment=None,
            removed=removed,
        )

    def _remove_member(
        self, group: ShareGroup, mid: str, reason: str, records: list[CoordinatorRecord]
    ) -> MemberRemoved:
        member = group.members.pop(mid)
        self._bump_epoch(group, records)
        return MemberRemoved(
            group_id=group.group_id,
            member_id=mid,
            assignment=group.describe_assignment(member.assignment),
            reason=reason,
        )

    def _touch(self, group: ShareGroup, member: ShareGroupMember, now_ms: int, timeout_ms: int) -> None:
        member.last_heartbeat_ms = now_ms
        member.deadline_ms = now_ms + timeout_ms
        heapq.heappush(self._deadlines, (member.deadline_ms, group.group_id, member.member_id))

    # ----------------------------------------------------------------- epochs and assignment

    def _bump_epoch(self, group: ShareGroup, records: list[CoordinatorRecord]) -> None:
        """Move the group epoch forward. With no assignment interval the target follows at once;
        otherwise a heartbeat computes it when the interval allows (``_maybe_assign``)."""
        new_epoch = group.group_epoch + 1
        if new_epoch > _MAX_EPOCH:
            raise GroupStateError(f"group epoch of {group.group_id} overflowed")
        self._emit(
            records,
            RecordType.GROUP_METADATA,
            group.group_id,
            GroupMetadataValue(group_type=SHARE_GROUP_TYPE, group_epoch=new_epoch),
        )
        if self.group_config(group.group_id).assignment_interval_ms == 0:
            self._compute_target(group)

    @staticmethod
    def _current_target(group: ShareGroup, member: ShareGroupMember) -> MemberAssignment:
        """The member's part of the last target, less what changed since it was computed (while
        the assignment interval holds the next one back): topics it no longer subscribes to, and
        share-partitions whose state was deleted with their topic."""
        target = group.target.get(member.member_id, {})
        subscribed = {
            group.subscription_metadata[name].topic_id
            for name in member.subscribed_topic_names
            if name in group.subscription_metadata
        }
        held: MemberAssignment = {}
        for topic_id, partitions in target.items():
            initialized = group.initialized.get(topic_id)
            if topic_id in subscribed and initialized is not None:
                kept = partitions & initialized[1]
                if kept:
                    held[topic_id] = kept
        return held

    def _maybe_assign(self, group: ShareGroup, now_ms: int, interval_ms: int) -> None:
        """Kafka's ``canComputeNextTargetAssignment`` (KIP-1263): a group behind its epoch computes
        its next target at once the first time, or when ``share.assignment.interval.ms`` is 0, else
        no sooner than that long after the last one that assigned anything. Until then members (a
        joining one too) stay at the last target's epoch, so a burst of joins and leaves costs one
        assignment an interval."""
        if group.assignment_epoch >= group.group_epoch:
            return
        if group.forming_until_ms is not None and now_ms < group.forming_until_ms:
            if group.assignment_epoch == 0:  # a first target giving nobody anything, as Kafka's
                group.assignment_epoch = group.group_epoch
            return
        last = group.assignment_timestamp_ms
        if last is not None and interval_ms > 0 and now_ms < last + interval_ms:
            return
        self._compute_target(group)
        # Beyond Kafka: a target that gave nobody anything (a new group whose share-partitions are
        # still being initialized) paced nothing, so it does not hold the next one back; a new
        # group's first consumer starts at once instead of after the interval and a heartbeat
        assigned = any(partitions for target in group.target.values() for partitions in target.values())
        group.assignment_timestamp_ms = now_ms if assigned else None
        if assigned:
            group.forming_until_ms = None

    def _compute_target(self, group: ShareGroup) -> None:
        name_to_id = {name: meta.topic_id for name, meta in group.subscription_metadata.items()}
        members = {
            mid: frozenset(name_to_id[n] for n in m.subscribed_topic_names if n in name_to_id)
            for mid, m in group.members.items()
        }
        partitions: dict[uuid.UUID, frozenset[int]] = {}
        for meta in group.subscription_metadata.values():
            done = group.initialized.get(meta.topic_id)
            if done:
                partitions[meta.topic_id] = frozenset(p for p in done[1] if p < meta.partitions)
        group.target = assign(members, partitions, group.target)
        group.assignment_epoch = group.group_epoch

    def _refresh_subscription(self, group: ShareGroup, topics: Mapping[str, TopicMetadata]) -> bool:
        """Recompute the subscribed topics' metadata; ``True`` if it changed (topic created,
        deleted, recreated or grown)."""
        subscribed = set().union(*(m.subscribed_topic_names for m in group.members.values()))
        fresh = {name: topics[name] for name in sorted(subscribed) if name in topics}
        if fresh == group.subscription_metadata:
            return False
        group.subscription_metadata = fresh
        return True

    def _drop_deleted_topics(
        self, group: ShareGroup, topics: Mapping[str, TopicMetadata], records: list[CoordinatorRecord]
    ) -> DeleteShareState | None:
        live = {meta.topic_id for meta in topics.values()}
        gone = [t for t in group.initialized if t not in live]
        for t in list(group.initializing):
            if t not in live:
                del group.initializing[t]
        if not gone:
            return None
        dropped = tuple(
            TopicPartitions(
                topic_id=t,
                topic_name=group.initialized[t][0],
                partitions=tuple(sorted(group.initialized[t][1])),
            )
            for t in sorted(gone, key=str)
        )
        kept = {t: v for t, v in group.initialized.items() if t not in gone}
        self._emit(records, RecordType.PARTITION_METADATA, group.group_id, partition_metadata_value(kept))
        return DeleteShareState(group_id=group.group_id, topics=dropped)

    def _partitions_to_initialize(self, group: ShareGroup) -> InitializeShareState | None:
        """Subscribed partitions with neither durable state nor a pending initialization."""
        pending: list[TopicPartitions] = []
        for name, meta in group.subscription_metadata.items():
            done = group.initialized.get(meta.topic_id, ("", frozenset()))[1]
            busy = group.initializing.setdefault(meta.topic_id, set())
            missing = [p for p in range(meta.partitions) if p not in done and p not in busy]
            if missing:
                busy.update(missing)
                pending.append(
                    TopicPartitions(topic_id=meta.topic_id, topic_name=name, partitions=tuple(missing))
                )
            elif not busy:
                del group.initializing[meta.topic_id]
        if not pending:
            return None
        return InitializeShareState(
            group_id=group.group_id, state_epoch=group.group_epoch, topics=tuple(pending)
        )

    def initialize_complete(
        self, group_id: str, topics: Iterable[TopicPartitions]
    ) -> tuple[CoordinatorRecord, ...]:
        """The shell initialized these share-partitions' state: make them assignable.

        Returns the records to persist (partition metadata and a group-epoch bump). Partitions of
        a group or topic that vanished meanwhile are ignored.
        """
        group = self._groups.get(group_id)
        if group is None:
            return ()
        initialized = dict(group.initialized)
        changed = False
        for tp in topics:
            busy = group.initializing.get(tp.topic_id, set())
            busy.difference_update(tp.partitions)
            if not busy:
                group.initializing.pop(tp.topic_id, None)
            name, done = initialized.get(tp.topic_id, (tp.topic_name, frozenset()))
            grown = done | frozenset(tp.partitions)
            if grown != done:
                initialized[tp.topic_id] = (name, grown)
                changed = True
        if not changed:
            return ()
        records: list[CoordinatorRecord] = []
        self._emit(records, RecordType.PARTITION_METADATA, group_id, partition_metadata_value(initialized))
        self._bump_epoch(group, records)
        return tuple(records)

    def initialize_failed(self, group_id: str, topics: Iterable[TopicPartitions]) -> None:
        """Initialization failed: forget it was pending so the next heartbeat asks again."""
        group = self._groups.get(group_id)
        if group is None:
            return
        for tp in topics:
            busy = group.initializing.get(tp.topic_id)
            if busy is not None:
                busy.difference_update(tp.partitions)
                if not busy:
                    del group.initializing[tp.topic_id]

    # ----------------------------------------------------------------- timers and metadata

    def next_deadline(self) -> int | None:
        """The earliest member session deadline (ms), or ``None`` when no member is alive."""
        heap = self._deadlines
        while heap:
            deadline, gid, mid = heap[0]
            group = self._groups.get(gid)
            member = group.members.get(mid) if group else None
            if member is not None and member.deadline_ms == deadline:
                return deadline
            heapq.heappop(heap)
        return None

    def expire(self, now_ms: int) -> CoordinatorResult:
        """Remove every member whose session deadline is at or before ``now_ms``."""
        records: list[CoordinatorRecord] = []
        removed: list[MemberRemoved] = []
        while (deadline := self.next_deadline()) is not None and deadline <= now_ms:
            _, gid, mid = heapq.heappop(self._deadlines)
            removed.append(self._remove_member(self._groups[gid], mid, "expired", records))
        return CoordinatorResult(records=tuple(records), removed=tuple(removed))

    def metadata_changed(self, topics: Mapping[str, TopicMetadata]) -> CoordinatorResult:
        """Topics were created, deleted or grew: reassign affected groups at once."""
        records: list[CoordinatorRecord] = []
        initialize: list[InitializeShareState] = []
        deletes: list[DeleteShareState] = []
        for group in self._groups.values():
            bump = self._refresh_subscription(group, topics)
            dropped = self._drop_deleted_topics(group, topics, records)
            if dropped is not None:
                deletes.append(dropped)
            if bump or dropped is not None:
                self._bump_epoch(group, records)
            init = self._partitions_to_initialize(group)
            if init is not None:
                initialize.append(init)
        return CoordinatorResult(
            records=tuple(records), initialize=tuple(initialize), delete_state=tuple(deletes)
        )

    # ----------------------------------------------------------------- configs

    def group_config(self, group_id: str) -> ShareGroupConfig:
        """The effective config of a group (overrides resolved against the broker).

        Overrides that no longer fit the broker's bounds (the operator narrowed them after they
        were set) are ignored as a whole rather than failing heartbeats and fetches.
        """
        overrides = self._configs.get(group_id, _NO_OVERRIDES)
        cached = self._resolved.get(group_id)
        # every fetch asks; an override dict is replaced, never changed in place, so identity
        # of (overrides, broker config) says whether the resolved config still holds
        if cached is not None and cached[0] is overrides and cached[1] is self.broker:
            return cached[2]
        try:
            resolved = resolve_group_config(overrides, self.broker)
        except GroupRequestError:
            resolved = resolve_group_config(_NO_OVERRIDES, self.broker)
        self._resolved[group_id] = (overrides, self.broker, resolved)
        return resolved

    def describe_configs(self, group_id: str) -> tuple[ConfigEntry, ...]:
        return describe_group_config(self._configs.get(group_id, {}), self.broker)

    def group_overrides(self, group_id: str) -> Mapping[str, str]:
        """The configs set on a group (not its defaults)."""
        return self._configs.get(group_id, _NO_OVERRIDES)

    def configured_groups(self) -> tuple[str, ...]:
        """The groups with at least one config override (whether or not they have members yet)."""
        return tuple(group_id for group_id, configs in self._configs.items() if configs)

    def alter_configs(
        self, group_id: str, changes: Mapping[str, str | None], *, validate_only: bool = False
    ) -> tuple[CoordinatorRecord, ...]:
        """Set (``str``) or delete (``None``) overrides, validated together against broker bounds.

        Raises ``GroupRequestError(INVALID_CONFIG)``. Allowed before the group exists.
        """
        if not group_id:
            raise _err(GroupErrorCode.INVALID_GROUP_ID, "group id must not be empty")
        merged = dict(self._configs.get(group_id, {}))
        for name, value in changes.items():
            if value is None:
                merged.pop(name, None)
            else:
                merged[name] = value
        resolved = resolve_group_config(merged, self.broker)
        group = self._groups.get(group_id)
        if resolved.dlq_topic_name and group is not None:
            consumed = set().union(*(m.subscribed_topic_names for m in group.members.values()))
            if resolved.dlq_topic_name in consumed:  # beyond Kafka: a DLQ feeding its own group loops
                raise _err(
                    GroupErrorCode.INVALID_CONFIG,
                    f"{DLQ_TOPIC_NAME}: DLQ topic {resolved.dlq_topic_name} is a topic share group "
                    f"{group_id} consumes",
                )
        if validate_only or merged == self._configs.get(group_id, {}):
            return ()
        records: list[CoordinatorRecord] = []
        stored = GroupConfigValue(configs=tuple(sorted(merged.items()))) if merged else None
        self._emit(records, RecordType.GROUP_CONFIG, group_id, stored)
        return tuple(records)

    # ----------------------------------------------------------------- records

    def replay(self, key: bytes, value: bytes | None) -> None:
        """Apply one durable record (loading after a restart). Raises ``GroupStateError`` if corrupt.

        Records of the classic-group coordinator, which shares the log, are skipped."""
        if len(key) >= 2 and int.from_bytes(key[:2], "big", signed=True) in FOREIGN_RECORD_TYPES:
            return
        record_type, group_id = decode_key(key)
        self._apply(record_type, group_id, None if value is None else decode_value(record_type, value))

    def _emit(
        self,
        records: list[CoordinatorRecord],
        record_type: RecordType,
        group_id: str,
        value: RecordValue | None,
    ) -> None:
        records.append(make_record(record_type, group_id, value))
        self._apply(record_type, group_id, value)

    def _apply(self, record_type: RecordType, group_id: str, value: RecordValue | None) -> None:
        if record_type is RecordType.GROUP_CONFIG:
            if value is None:
                self._configs.pop(group_id, None)
            elif isinstance(value, GroupConfigValue):
                self._configs[group_id] = dict(value.configs)
            return
        group = self._groups.get(group_id)
        if value is None:
            if record_type is RecordType.GROUP_METADATA:
                self._groups.pop(group_id, None)
            elif group is not None:
                group.initialized = {}
            return
        if group is None:
            # A compacted log may hold a group's partition metadata before its (newer) group
            # record, so any record brings the group into being, as in Kafka.
            group = ShareGroup(group_id=group_id)
            self._groups[group_id] = group
        if isinstance(value, GroupMetadataValue):
            if value.group_type != SHARE_GROUP_TYPE:
                raise GroupStateError(f"group {group_id} has type {value.group_type!r}")
            group.group_epoch = value.group_epoch
            if not group.members:
                group.assignment_epoch = value.group_epoch
        elif isinstance(value, PartitionMetadataValue):
            group.initialized = {
                t.topic_id: (t.topic_name, frozenset(t.partitions)) for t in value.initialized
            }

    def durable_state(self) -> dict[str, object]:
        """A comparable snapshot of everything records carry (for tests and debugging)."""
        return {
            "groups": {gid: (g.group_epoch, dict(g.initialized)) for gid, g in self._groups.items()},
            "configs": {gid: dict(c) for gid, c in self._configs.items()},
        }
