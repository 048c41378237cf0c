"""Lookups, admin operations and replay of the classic group coordinator (a mixin, as the share
coordinator's ``ShareGroupAdmin``): describe, commit validation, delete, group records."""

from __future__ import annotations

from typing import TYPE_CHECKING

from shareq.coordinators.group.records import CoordinatorRecord

from .errors import ClassicErrorCode, ClassicRequestError
from .group import ClassicGroup, ClassicGroupState, ClassicMember
from .messages import ClassicGroupDescription, Protocol
from .records import ClassicGroupValue, group_record
from .subscription import subscribed_topics

E = ClassicErrorCode
S = ClassicGroupState


def _err(code: ClassicErrorCode, message: str) -> ClassicRequestError:
    return ClassicRequestError(code, message)


class ClassicGroupAdmin:
    """What ListGroups, DescribeGroups, DeleteGroups, offsets and loading need from the groups."""

    _groups: dict[str, ClassicGroup]

    if TYPE_CHECKING:

        def _validate_member(self, group: ClassicGroup, mid: str, iid: str | None) -> ClassicMember: ...

    # ----------------------------------------------------------------- lookups

    def group(self, group_id: str) -> ClassicGroup | None:
        return self._groups.get(group_id)

    def group_ids(self) -> list[str]:
        return list(self._groups)

    def describe(self, group_id: str) -> ClassicGroupDescription | None:
        group = self._groups.get(group_id)
        if group is None:
            return None
        return ClassicGroupDescription(
            group_id=group_id,
            state=group.state.value,
            protocol_type=group.protocol_type or "",
            protocol_name=(group.protocol_name or "") if group.state is S.STABLE else "",
            generation=group.generation,
            members=group.describe_members(),
        )

    def ensure_group(self, group_id: str) -> ClassicGroup:
        """The group, created empty if needed (a "simple" group that only stores offsets)."""
        group = self._groups.get(group_id)
        if group is None:
            group = ClassicGroup(group_id=group_id)
            self._groups[group_id] = group
        return group

    # ----------------------------------------------------------------- offsets and admin checks

    def validate_offset_commit(
        self, group_id: str, generation: int, member_id: str, group_instance_id: str | None
    ) -> None:
        """May this commit go ahead? (The caller creates a missing group for generation < 0.)"""
        group = self._groups.get(group_id)
        if group is None:
            raise _err(E.ILLEGAL_GENERATION, f"group {group_id} does not exist")
        if generation < 0 and group.state is S.EMPTY:
            return  # a "simple" commit: admin clients and assign() consumers
        self._validate_member(group, member_id, group_instance_id)
        if generation != group.generation:
            raise _err(E.ILLEGAL_GENERATION, f"generation {generation} is not the group's {group.generation}")
        if group.state is S.COMPLETING_REBALANCE:
            raise _err(E.REBALANCE_IN_PROGRESS, f"group {group_id} is completing a rebalance")

    def delete(self, group_id: str) -> tuple[CoordinatorRecord, ...]:
        """Forget an empty group (DeleteGroups); its offsets are the caller's to tombstone."""
        group = self._groups.get(group_id)
        if group is None:
            raise _err(E.GROUP_ID_NOT_FOUND, f"group {group_id} not found")
        if group.members or group.pending:
            raise _err(E.NON_EMPTY_GROUP, f"group {group_id} is not empty")
        del self._groups[group_id]
        return (group_record(group_id, None),)

    def forget(self, group_id: str) -> None:
        """Drop an empty group from memory (it becomes a consumer group; its records stay)."""
        group = self._groups.get(group_id)
        if group is not None and not group.members and not group.pending:
            del self._groups[group_id]

    def subscribed_topics(self, group_id: str) -> frozenset[str] | None:
        """Topics the members subscribe to (consumer protocol), ``None`` if the group is empty."""
        group = self._groups.get(group_id)
        if group is None or not group.members:
            return None
        if group.protocol_type != "consumer":
            return frozenset()
        topics: set[str] = set()
        for m in group.members.values():
            topics |= subscribed_topics(m.metadata(group.protocol_name) or m.protocols[0].metadata)
        return frozenset(topics)

    def replay_group(self, group_id: str, value: ClassicGroupValue | None) -> None:
        """Apply a durable group record (loading): Stable with the members it lists, else Empty at
        its last generation (members of a generation still rebalancing rejoin)."""
        if value is None:
            self._groups.pop(group_id, None)
            return
        group = self.ensure_group(group_id)
        group.generation = value.generation
        group.protocol_type = value.protocol_type or None
        group.members = {
            m.member_id: ClassicMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                protocol_type=value.protocol_type,
                protocols=(Protocol(name=value.protocol_name, metadata=m.metadata),),
                session_timeout_ms=m.session_timeout_ms,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                assignment=m.assignment,
            )
            for m in value.members
        }
        group.static = {m.group_instance_id: m.member_id for m in value.members if m.group_instance_id}
        group.pending.clear()
        group.phase_deadline = None
        if group.members:
            group.state = ClassicGroupState.STABLE
            group.protocol_name = value.protocol_name
            group.leader = value.leader or None
        else:
            group.state = ClassicGroupState.EMPTY
            group.protocol_name = None
            group.leader = None
