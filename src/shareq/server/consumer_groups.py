"""``ConsumerGroupServices`` (``broker.consumer_groups``): classic groups and committed offsets.

The asyncio shell over the sans-I/O ``ClassicGroupCoordinator`` and ``ConsumerOffsets``:

- records go to the group-metadata log (``__consumer_offsets``, shared with the share-group
  coordinator) before any answer, and are replayed at start, so offsets survive a restart;
- a parked JoinGroup or SyncGroup is a future keyed by (group, member, api), resolved by the
  completions a later coordinator call returns (another member joining, the leader's SyncGroup,
  a timeout): no polling;
- one ``loop.call_at`` timer follows ``coordinator.next_deadline()``.

Group ids are shared with share groups: every classic group is registered in the share
coordinator's group-type registry, and a share group's id is refused here.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from shareq.config import consumer_assignors
from shareq.coordinators.classic import (
    RECORD_TYPES,
    ClassicConfig,
    ClassicErrorCode,
    ClassicGroupCoordinator,
    ClassicRecordType,
    ClassicRequestError,
    ClassicResult,
    ConsumerOffsets,
    JoinCompleted,
    JoinRequest,
    JoinResponse,
    LeavingMember,
    OffsetCommit,
    OffsetValue,
    SyncRequest,
    SyncResponse,
    record_type,
)
from shareq.coordinators.classic.records import (
    decode_group_value,
    decode_key,
    decode_offset_value,
    group_record,
)
from shareq.coordinators.consumer import (
    ConsumerConfig,
    ConsumerGroupCoordinator,
    ConsumerHeartbeat,
    ConsumerHeartbeatResult,
)
from shareq.coordinators.consumer.records import RECORD_TYPES as CONSUMER_RECORD_TYPES
from shareq.coordinators.group import SHARE_GROUP_TYPE, CoordinatorRecord
from shareq.log.scan import DATA, log_entries

from .clock import now_ms

if TYPE_CHECKING:
    from .broker import Broker

log = logging.getLogger("shareq.groups")

CLASSIC_GROUP_TYPE = "classic"
CONSUMER_GROUP_TYPE = "consumer"
GROUP_METADATA_TOPIC = "__consumer_offsets"

JoinKey = tuple[str, str]
T = TypeVar("T")


def _park(parked: dict[JoinKey, asyncio.Future[T]], key: JoinKey, superseded: T) -> asyncio.Future[T]:
    """A future for the member's parked JoinGroup or SyncGroup; one it had parked before is
    answered ``superseded`` (a member waits in one join and one sync at a time)."""
    future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
    older = parked.pop(key, None)
    if older is not None and not older.done():
        older.set_result(superseded)
    parked[key] = future
    return future


class ConsumerGroupServices:
    """Classic groups and consumer offsets on this broker; ``await start()`` after the share
    services (they create the group-metadata topic), ``await stop()``."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        config = broker.config
        self.coordinator = ClassicGroupCoordinator(
            ClassicConfig(
                min_session_timeout_ms=config["group.min.session.timeout.ms"],
                max_session_timeout_ms=config["group.max.session.timeout.ms"],
                initial_rebalance_delay_ms=config["group.initial.rebalance.delay.ms"],
                max_size=config["group.max.size"],
            )
        )
        self.consumer = ConsumerGroupCoordinator(
            ConsumerConfig(
                session_timeout_ms=config["group.consumer.session.timeout.ms"],
                heartbeat_interval_ms=config["group.consumer.heartbeat.interval.ms"],
                max_size=config["group.consumer.max.size"],
                assignors=consumer_assignors(config["group.consumer.assignors"]),
            ),
            group_timeouts=self._group_timeouts,
        )
        self.offsets = ConsumerOffsets(config["offset.metadata.max.bytes"])
        self._retention_ms = config["offsets.retention.minutes"] * 60_000
        self._retention_check_ms = config["offsets.retention.check.interval.ms"]
        self._retention_due = now_ms() + self._retention_check_ms
        self._joins: dict[JoinKey, asyncio.Future[JoinResponse]] = {}
        self._syncs: dict[JoinKey, asyncio.Future[SyncResponse]] = {}
        self.timer = broker.timer
        self._stopped = False

    now_ms = staticmethod(now_ms)

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        self._replay()
        self.timer.add(self)

    async def stop(self) -> None:
        self._stopped = True
        parked: list[asyncio.Future[Any]] = [*self._joins.values(), *self._syncs.values()]
        for future in parked:
            if not future.done():
                future.cancel()
        self._joins.clear()
        self._syncs.clear()

    def _replay(self) -> None:
        partition = self.broker.partition(GROUP_METADATA_TOPIC, 0)
        if partition is None:
            return
        for entry in log_entries(partition.log):
            if entry.marker != DATA:
                self.offsets.end_transaction(entry.producer_id, commit=entry.marker == 1)
            elif entry.key is not None and record_type(entry.key) in RECORD_TYPES:
                self.replay(entry.key, entry.value, producer_id=entry.producer_id)
            elif entry.key is not None and record_type(entry.key) in CONSUMER_RECORD_TYPES:
                self.consumer.replay(entry.key, entry.value)
        self.coordinator.loaded(now_ms())
        self.consumer.loaded(now_ms())
        for group_id in self.consumer.group_ids():
            self._register(group_id)

    def replay(self, key: bytes, value: bytes | None, *, producer_id: int = -1) -> None:
        """Apply one durable classic-group or offset record (a transactional one stays pending)."""
        decoded = decode_key(key)
        gid = decoded.group_id
        if decoded.record_type is ClassicRecordType.CLASSIC_GROUP:
            self.coordinator.replay_group(gid, None if value is None else decode_group_value(value))
        else:
            parsed: OffsetValue | None = None if value is None else decode_offset_value(value)
            if producer_id >= 0:
                self.offsets.stage(producer_id, gid, decoded.topic, decoded.partition, parsed)
            else:
                self.offsets.apply(gid, decoded.topic, decoded.partition, parsed)
            if parsed is not None:
                self.coordinator.ensure_group(gid)
        self._register(gid)

    # -- group ids shared with share groups ----------------------------------------------------

    def is_share_group(self, group_id: str) -> bool:
        share = self.broker.share
        return share is not None and share.coordinator.group_type(group_id) == SHARE_GROUP_TYPE

    def group_type(self, group_id: str) -> str | None:
        """``classic`` or ``consumer`` for the groups kept here, else ``None``."""
        if self.consumer.group(group_id) is not None:
            return CONSUMER_GROUP_TYPE
        if self.coordinator.group(group_id) is not None:
            return CLASSIC_GROUP_TYPE
        return None

    def _register(self, group_id: str) -> None:
        share = self.broker.share
        if share is None:
            return
        kind = self.group_type(group_id)
        known = share.coordinator.group_type(group_id)
        if known in (SHARE_GROUP_TYPE, kind):
            return
        share.coordinator.unregister_group_type(group_id)
        if kind is not None:
            share.coordinator.register_group_type(group_id, kind)

    def _topics(self) -> dict[str, tuple[uuid.UUID, int]]:
        return {t.name: (t.topic_id, t.partitions) for t in self.broker.topics if not t.internal}

    def _persist(self, records: Iterable[CoordinatorRecord]) -> None:
        batch = tuple(records)
        if not batch:
            return
        share = self.broker.share
        if share is None:
            raise ClassicRequestError(ClassicErrorCode.COORDINATOR_NOT_AVAILABLE, "groups are not running")
        share.persist_group_records(batch)

    # -- membership ----------------------------------------------------------------------------

    async def join(self, request: JoinRequest) -> JoinResponse:
        """One JoinGroup; parked until the join phase completes. Raises ``ClassicRequestError``."""
        if self.is_share_group(request.group_id):
            raise ClassicRequestError(
                ClassicErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"group {request.group_id} is a share group"
            )
        consumer = self.consumer.group(request.group_id)
        if consumer is not None:
            if consumer.members:
                raise ClassicRequestError(
                    ClassicErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                    f"group {request.group_id} is a consumer group",
                )
            self.consumer.delete(request.group_id)  # an empty consumer group becomes classic
            self._persist(self.consumer.take_records())
        result = self.coordinator.join(request, now_ms=now_ms())
        self._register(request.group_id)
        future: asyncio.Future[JoinResponse] | None = None
        if result.response is None:
            future = _park(
                self._joins,
                (request.group_id, result.member_id),
                JoinResponse(error=ClassicErrorCode.REBALANCE_IN_PROGRESS, member_id=result.member_id),
            )
        self._apply(result)
        if future is None:
            assert isinstance(result.response, JoinResponse)
            return result.response
        return await future

    async def sync(self, request: SyncRequest) -> SyncResponse:
        """One SyncGroup; a follower's waits for the leader's. Raises ``ClassicRequestError``."""
        if self.is_share_group(request.group_id):
            raise ClassicRequestError(
                ClassicErrorCode.UNKNOWN_MEMBER_ID, f"group {request.group_id} is a share group"
            )
        result = self.coordinator.sync(request, now_ms=now_ms())
        future: asyncio.Future[SyncResponse] | None = None
        if result.response is None:
            future = _park(
                self._syncs,
                (request.group_id, result.member_id),
                SyncResponse(error=ClassicErrorCode.REBALANCE_IN_PROGRESS),
            )
        self._apply(result)
        if future is None:
            assert isinstance(result.response, SyncResponse)
            return result.response
        return await future

    def heartbeat(
        self, group_id: str, member_id: str, generation: int, group_instance_id: str | None
    ) -> ClassicErrorCode:
        if self.is_share_group(group_id):
            raise ClassicRequestError(
                ClassicErrorCode.UNKNOWN_MEMBER_ID, f"group {group_id} is a share group"
            )
        code = self.coordinator.heartbeat(
            group_id, member_id, generation, group_instance_id=group_instance_id, now_ms=now_ms()
        )
        self.timer.arm(self.coordinator.next_deadline())
        return code

    def leave(self, group_id: str, members: tuple[LeavingMember, ...]) -> tuple[ClassicErrorCode, ...]:
        if self.is_share_group(group_id):
            return tuple(ClassicErrorCode.UNKNOWN_MEMBER_ID for _ in members)
        result = self.coordinator.leave(group_id, members, now_ms=now_ms())
        self._apply(result)
        return result.errors

    def consumer_heartbeat(self, request: ConsumerHeartbeat) -> ConsumerHeartbeatResult:
        """One ConsumerGroupHeartbeat (KIP-848). Raises ``ClassicRequestError``."""
        gid = request.group_id
        if self.is_share_group(gid):
            raise ClassicRequestError(
                ClassicErrorCode.GROUP_ID_NOT_FOUND, f"group {gid} is not a consumer group"
            )
        classic = self.coordinator.group(gid)
        if classic is not None:
            if classic.members or classic.pending:
                raise ClassicRequestError(
                    ClassicErrorCode.GROUP_ID_NOT_FOUND, f"group {gid} is a classic group with members"
                )
            self.coordinator.forget(gid)  # an empty classic group (offsets only) becomes a consumer group
        result = self.consumer.heartbeat(request, now_ms=now_ms(), topics=self._topics())
        self._persist(self.consumer.take_records())
        self._register(gid)
        self._reschedule()
        return result

    def _apply(self, result: ClassicResult) -> None:
        """Persist the records, then answer the parked requests, then re-arm the timer."""
        self._persist(result.records)
        for completion in result.completions:
            key = (completion.group_id, completion.member_id)
            if isinstance(completion, JoinCompleted):
                join = self._joins.pop(key, None)
                if join is not None and not join.done():
                    join.set_result(completion.response)
            else:
                sync = self._syncs.pop(key, None)
                if sync is not None and not sync.done():
                    sync.set_result(completion.response)
        self._reschedule()

    # -- offsets -------------------------------------------------------------------------------

    def commit_offsets(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        group_instance_id: str | None,
        commits: list[OffsetCommit],
        *,
        version: int,
    ) -> list[ClassicErrorCode]:
        """Validate and persist an OffsetCommit; one code per commit. Raises ``ClassicRequestError``
        for the whole request."""
        self._validate_commit(group_id, generation, member_id, group_instance_id, version=version)
        records, errors = self.offsets.commit(group_id, commits, now_ms=now_ms())
        self._persist(records)
        return errors

    def _validate_commit(
        self, group_id: str, generation: int, member_id: str, group_instance_id: str | None, *, version: int
    ) -> None:
        if self.is_share_group(group_id):
            raise ClassicRequestError(
                ClassicErrorCode.GROUP_ID_NOT_FOUND, f"group {group_id} is not a consumer group"
            )
        if not group_id:
            raise ClassicRequestError(ClassicErrorCode.INVALID_GROUP_ID, "group id must not be empty")
        if self.consumer.group(group_id) is not None:
            self.consumer.validate_offset_commit(group_id, member_id, generation)
        elif self.coordinator.group(group_id) is None:
            if generation >= 0:
                code = (
                    ClassicErrorCode.GROUP_ID_NOT_FOUND
                    if version >= 9
                    else ClassicErrorCode.ILLEGAL_GENERATION
                )
                raise ClassicRequestError(code, f"group {group_id} does not exist")
            self.coordinator.ensure_group(group_id)
            self._register(group_id)
        else:
            self.coordinator.validate_offset_commit(group_id, generation, member_id, group_instance_id)

    def commit_transactional_offsets(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        group_instance_id: str | None,
        commits: list[OffsetCommit],
        *,
        producer_id: int,
        producer_epoch: int,
    ) -> list[ClassicErrorCode]:
        """TxnOffsetCommit: validate like OffsetCommit, then write the offsets in a transactional
        batch of ``producer_id`` and hold them pending until the transaction's marker."""
        # Kafka accepts a transactional commit without member information (older producers,
        # kafka-python's send_offsets_to_transaction with a group id) whatever the group's state.
        anonymous = generation < 0 and not member_id and group_instance_id is None
        if not anonymous or self.group_type(group_id) is None or self.is_share_group(group_id):
            self._validate_commit(group_id, generation, member_id, group_instance_id, version=9)
        records, errors = self.offsets.commit(group_id, commits, now_ms=now_ms(), producer_id=producer_id)
        if records:
            share = self.broker.share
            if share is None:
                raise ClassicRequestError(
                    ClassicErrorCode.COORDINATOR_NOT_AVAILABLE, "groups are not running"
                )
            share.persist_group_records(records, producer_id=producer_id, producer_epoch=producer_epoch)
        return errors

    def end_transaction(self, producer_id: int, *, commit: bool) -> None:
        """A marker reached the group-metadata log: settle ``producer_id``'s pending offsets."""
        self.offsets.end_transaction(producer_id, commit=commit)

    def pending_offsets(self, group_id: str) -> set[tuple[str, int]]:
        return self.offsets.pending(group_id)

    def fetch_offsets(self, group_id: str) -> dict[tuple[str, int], OffsetValue]:
        """Committed offsets of a group (none for an unknown one). Raises GROUP_ID_NOT_FOUND for
        a share group."""
        if self.is_share_group(group_id):
            raise ClassicRequestError(
                ClassicErrorCode.GROUP_ID_NOT_FOUND, f"group {group_id} is not a consumer group"
            )
        return dict(self.offsets.fetch(group_id))

    def delete_offsets(self, group_id: str, partitions: list[tuple[str, int]]) -> list[ClassicErrorCode]:
        """OffsetDelete: refused per partition for topics the live members subscribe to."""
        if self.is_share_group(group_id) or self.group_type(group_id) is None:
            raise ClassicRequestError(ClassicErrorCode.GROUP_ID_NOT_FOUND, f"group {group_id} not found")
        consumer = self.consumer.group(group_id)
        if consumer is not None:
            subscribed = frozenset().union(*(m.resolved for m in consumer.members.values()))
        else:
            subscribed = self.coordinator.subscribed_topics(group_id) or frozenset()
        errors = [
            ClassicErrorCode.GROUP_SUBSCRIBED_TO_TOPIC if topic in subscribed else ClassicErrorCode.NONE
            for topic, _ in partitions
        ]
        deletable = [tp for tp, e in zip(partitions, errors, strict=True) if e is ClassicErrorCode.NONE]
        self._persist(self.offsets.delete(group_id, deletable))
        return errors

    def delete_group(self, group_id: str) -> None:
        """DeleteGroups for a classic or consumer group: empty only; its offsets go with it."""
        if self.consumer.group(group_id) is not None:
            self.consumer.delete(group_id)
            records = [*self.consumer.take_records(), group_record(group_id, None)]  # maybe classic before
        else:
            records = list(self.coordinator.delete(group_id))
        records += self.offsets.delete_group(group_id)
        self._persist(records)
        self._register(group_id)

    def _group_timeouts(self, group_id: str) -> tuple[int, int]:
        """A KIP-848 group's session timeout and heartbeat interval: its ``consumer.*`` group configs,
        else the broker's ``group.consumer.*``."""
        share = self.broker.share
        if share is None:
            return self.consumer.config.session_timeout_ms, self.consumer.config.heartbeat_interval_ms
        config = share.coordinator.group_config(group_id)
        return config.consumer_session_timeout_ms, config.consumer_heartbeat_interval_ms

    def _consumed(self, group_id: str) -> frozenset[str] | None:
        """Topics whose offsets the group's members keep alive; ``None`` when it has no members."""
        consumer = self.consumer.group(group_id)
        if consumer is not None:
            if not consumer.members:
                return None
            return frozenset().union(*(m.resolved for m in consumer.members.values()))
        topics = self.coordinator.subscribed_topics(group_id)
        group = self.coordinator.group(group_id)
        if topics is not None and group is not None and group.protocol_type != "consumer":
            return frozenset(t for t, _ in self.offsets.fetch(group_id))  # not ours to read: keep all
        return topics

    def _expire_offsets(self, now_ms: int) -> None:
        """Offset retention: tombstones for expired offsets, then the removal of empty groups left
        with none (as Kafka deletes them)."""
        before = set(self.offsets.group_ids())
        records = self.offsets.expire(now_ms, self._retention_ms, self._consumed)
        for group_id in sorted(before - set(self.offsets.group_ids())):
            if self._consumed(group_id) is None and self.group_type(group_id) is not None:
                if self.consumer.group(group_id) is not None:
                    self.consumer.delete(group_id)
                    records += [*self.consumer.take_records(), group_record(group_id, None)]
                else:
                    records += self.coordinator.delete(group_id)
                log.info("group %s expired: no members and no offsets left", group_id)
        self._persist(records)
        for group_id in before:
            self._register(group_id)

    # -- the timer -----------------------------------------------------------------------------

    def _reschedule(self) -> None:
        self.timer.arm(self.next_deadline())

    def next_deadline(self) -> int | None:
        deadlines = (self.coordinator.next_deadline(), self.consumer.next_deadline(), self._retention_due)
        return min((d for d in deadlines if d is not None), default=None)

    def run_timers(self, now: int) -> None:
        """Expire members of both group kinds and, when due, committed offsets past retention."""
        self.consumer.expire(now, self._topics())
        self._persist(self.consumer.take_records())
        self._apply(self.coordinator.expire(now))
        if now >= self._retention_due:
            self._retention_due = now + self._retention_check_ms
            self._expire_offsets(now)
