"""Share-group administration: describe, list, delete, the offsets admin APIs, read-only queries.

A mixin of ``ShareGroupCoordinator`` (it reads the coordinator's groups and emits records
through its ``_emit``), kept apart because these calls serve the admin APIs (ShareGroupDescribe,
ListGroups, DeleteGroups, Alter/Delete/DescribeShareGroupOffsets), not membership.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING

from shareq.coordinators.group.assignor import ASSIGNOR_NAME
from shareq.coordinators.group.errors import GroupErrorCode, GroupRequestError
from shareq.coordinators.group.group import GroupState, ShareGroup
from shareq.coordinators.group.messages import (
    SHARE_GROUP_TYPE,
    CoordinatorResult,
    DeleteShareState,
    GroupDescription,
    GroupListing,
    MemberDescription,
    TopicPartitions,
)
from shareq.coordinators.group.records import (
    CoordinatorRecord,
    RecordType,
    RecordValue,
    partition_metadata_value,
)


def _err(code: GroupErrorCode, message: str) -> GroupRequestError:
    return GroupRequestError(code, message)


class ShareGroupAdmin:
    """The admin side of the share-group coordinator."""

    _groups: dict[str, ShareGroup]
    _configs: dict[str, dict[str, str]]
    _foreign: dict[str, str]

    if TYPE_CHECKING:

        def _emit(
            self,
            records: list[CoordinatorRecord],
            record_type: RecordType,
            group_id: str,
            value: RecordValue | None,
        ) -> None: ...

        def _bump_epoch(self, group: ShareGroup, records: list[CoordinatorRecord]) -> None: ...

    def describe(self, group_id: str) -> GroupDescription:
        """ShareGroupDescribe for one group; GROUP_ID_NOT_FOUND if absent or not a share group."""
        group = self._groups.get(group_id)
        if group is None:
            kind = self._foreign.get(group_id)
            detail = f"group {group_id} is not a share group" if kind else f"share group {group_id} not found"
            raise _err(GroupErrorCode.GROUP_ID_NOT_FOUND, detail)
        members = tuple(
            MemberDescription(
                member_id=m.member_id,
                rack_id=m.rack_id,
                member_epoch=m.member_epoch,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=tuple(sorted(m.subscribed_topic_names)),
                assignment=group.describe_assignment(m.assignment),
            )
            for m in sorted(group.members.values(), key=lambda m: m.member_id)
        )
        return GroupDescription(
            group_id=group_id,
            group_state=group.state.value,
            group_epoch=group.group_epoch,
            assignment_epoch=group.assignment_epoch,
            assignor_name=ASSIGNOR_NAME,
            members=members,
        )

    def list_groups(self) -> tuple[GroupListing, ...]:
        """All share groups for ListGroups (type ``share``)."""
        return tuple(
            GroupListing(group_id=gid, group_type=SHARE_GROUP_TYPE, group_state=g.state.value)
            for gid, g in sorted(self._groups.items())
        )

    def delete(self, group_id: str) -> CoordinatorResult:
        """DeleteGroups for a share group: only when empty; also deletes its share state and configs."""
        group = self._groups.get(group_id)
        if group is None:
            raise _err(GroupErrorCode.GROUP_ID_NOT_FOUND, f"share group {group_id} not found")
        if group.members:
            raise _err(GroupErrorCode.NON_EMPTY_GROUP, f"share group {group_id} still has members")
        state = tuple(
            TopicPartitions(topic_id=t, topic_name=name, partitions=tuple(sorted(ps)))
            for t, (name, ps) in sorted(group.initialized.items(), key=lambda kv: str(kv[0]))
        )
        records: list[CoordinatorRecord] = []
        self._emit(records, RecordType.PARTITION_METADATA, group_id, None)
        if group_id in self._configs:
            self._emit(records, RecordType.GROUP_CONFIG, group_id, None)
        self._emit(records, RecordType.GROUP_METADATA, group_id, None)
        deletes = (DeleteShareState(group_id=group_id, topics=state),) if state else ()
        return CoordinatorResult(records=tuple(records), delete_state=deletes)

    def prepare_alter_offsets(self, group_id: str) -> tuple[tuple[CoordinatorRecord, ...], int]:
        """AlterShareGroupOffsets, first step: check the group may be altered and pick a state epoch.

        Only an empty group (or one that does not exist yet: it is created, as in Kafka) may have
        its start offsets altered. The group epoch is bumped so the returned state epoch is newer
        than any the group's share-partitions were initialized with; the shell initializes each
        share-partition's state with it and the new start offset, then calls
        ``initialize_complete``. Raises ``GroupRequestError`` (INVALID_GROUP_ID, GROUP_ID_NOT_FOUND
        for a group of another type, NON_EMPTY_GROUP).
        """
        if not group_id:
            raise _err(GroupErrorCode.INVALID_GROUP_ID, "group id must not be empty")
        if group_id in self._foreign:
            raise _err(GroupErrorCode.GROUP_ID_NOT_FOUND, f"group {group_id} is not a share group")
        group = self._groups.get(group_id)
        if group is not None and group.members:
            raise _err(GroupErrorCode.NON_EMPTY_GROUP, f"share group {group_id} still has members")
        if group is None:
            group = ShareGroup(group_id=group_id)
            self._groups[group_id] = group
        records: list[CoordinatorRecord] = []
        self._bump_epoch(group, records)
        return tuple(records), group.group_epoch

    def check_offsets_deletable(self, group_id: str) -> None:
        """DeleteShareGroupOffsets and DeleteGroups need an existing, empty share group.

        Raises ``GroupRequestError`` (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP); changes nothing, so
        the shell can delete share state first and drop the records only once that succeeded.
        """
        group = self._groups.get(group_id)
        if group is None:
            kind = self._foreign.get(group_id)
            detail = f"group {group_id} is not a share group" if kind else f"share group {group_id} not found"
            raise _err(GroupErrorCode.GROUP_ID_NOT_FOUND, detail)
        if group.members:
            raise _err(GroupErrorCode.NON_EMPTY_GROUP, f"share group {group_id} still has members")

    def delete_offsets(self, group_id: str, topic_ids: Iterable[uuid.UUID]) -> tuple[CoordinatorRecord, ...]:
        """Forget the share state of these topics (its durable state was already deleted).

        The partitions are no longer initialized: a later subscription initializes them afresh
        with ``share.auto.offset.reset``. Returns the records to persist.
        """
        self.check_offsets_deletable(group_id)
        group = self._groups[group_id]
        gone = set(topic_ids)
        kept = {t: v for t, v in group.initialized.items() if t not in gone}
        if len(kept) == len(group.initialized):
            return ()
        records: list[CoordinatorRecord] = []
        self._emit(records, RecordType.PARTITION_METADATA, group_id, partition_metadata_value(kept))
        return tuple(records)

    def group_state(self, group_id: str) -> GroupState:
        group = self._groups.get(group_id)
        return GroupState.DEAD if group is None else group.state

    def member_assignment(self, group_id: str, member_id: str) -> tuple[TopicPartitions, ...] | None:
        """The member's current assignment, or ``None`` if it is not a member (for ShareFetch checks)."""
        group = self._groups.get(group_id)
        member = group.members.get(member_id) if group else None
        return None if member is None or group is None else group.describe_assignment(member.assignment)

    def initialized_partitions(self, group_id: str) -> tuple[TopicPartitions, ...]:
        """Share-partitions of the group with durable state (for DescribeShareGroupOffsets)."""
        group = self._groups.get(group_id)
        if group is None:
            return ()
        return tuple(
            TopicPartitions(topic_id=t, topic_name=name, partitions=tuple(sorted(ps)))
            for t, (name, ps) in sorted(group.initialized.items(), key=lambda kv: kv[1][0])
        )
