"""``ShareServices`` (``broker.share``): share groups' state on one broker, and its single timer.

Holds the ``ShareGroupCoordinator`` (membership, assignment, group configs), the
``ShareSessionCache``, the persister (``share.persister``: the ``BuiltinPersister`` over the internal
``__share_group_state`` topic, or the ``InLogPersister`` writing control records into the user
partitions) and the ``SharePartitionManager``. Group metadata records go to the internal
``__consumer_offsets`` topic (one partition) before a heartbeat is answered and are replayed at
start, so groups, configs and initialized share-partitions survive a restart; members do not (they
rejoin).

Its deadlines (the earliest acquisition-lock deadline, the earliest member session deadline and
the persister's housekeeping deadline) are the broker's one :class:`DeadlineTimer`'s to keep:
``next_deadline()`` and ``run_timers(now)``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid
from collections.abc import Coroutine, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from shareq.coordinators.group import (
    CoordinatorRecord,
    GroupRequestError,
    HeartbeatRequest,
    HeartbeatResult,
    InitializeShareState,
    MemberRemoved,
    ShareBrokerConfig,
    ShareGroupCoordinator,
    TopicMetadata,
    TopicPartitions,
)
from shareq.coordinators.share.shard import ShareCoordinatorConfig
from shareq.log.partition_log import PartitionLog
from shareq.log.records import Record, encode_batch
from shareq.log.scan import keyed_records
from shareq.persister.builtin import STATE_TOPIC, BuiltinPersister, FlushMode, StateLog
from shareq.persister.in_log import InLogPersister
from shareq.share import SharePartition
from shareq.share.persister import PersisterError, SharePartitionKey
from shareq.share.session import ShareSessionCache, TopicIdPartition

from ..clock import now_ms
from ..internal_topics import group_metadata_topic_configs
from ..partitions import Partition
from ..topics import TopicInfo, is_internal
from .dead_letters import DeadLetterWriter
from .manager import SharePartitionManager, share_config
from .persister_choice import PersisterSwitchError, check_persister

if TYPE_CHECKING:
    from pathlib import Path

    from shareq.config import BrokerConfig

    from ..deadline_timer import DeadlineTimer
    from ..monitor import BrokerCounters
    from ..topics import TopicRegistry

log = logging.getLogger("shareq.share")

GROUP_METADATA_TOPIC = "__consumer_offsets"


class ShareHost(Protocol):
    """What the share services use of the broker: its configs, topics and partition logs, the
    counters they report into and the one timer (the ``Broker`` satisfies it)."""

    config: BrokerConfig
    data_dir: Path
    partitions: dict[tuple[str, int], Partition]
    counters: BrokerCounters
    timer: DeadlineTimer

    @property
    def topics(self) -> TopicRegistry: ...

    def partition(self, topic: str, index: int) -> Partition | None: ...

    def create_topic(
        self, name: str, partitions: int | None = None, configs: Mapping[str, str | None] | None = None
    ) -> TopicInfo: ...

    def internal_topic(self, name: str, partitions: int, configs: Mapping[str, str]) -> TopicInfo: ...


class ShareServices:
    """Share groups on this broker; ``await start()`` after the logs are open, ``await stop()``."""

    def __init__(self, broker: ShareHost) -> None:
        self.broker = broker
        config = broker.config
        props = {
            name: str(value)
            for name, value in config.items()
            if name.startswith(("group.share.", "group.consumer.", "group.streams.", "shareq.redelivery."))
            and value != _default(name)
        }
        self.broker_config = ShareBrokerConfig.from_properties(props)
        self.coordinator = ShareGroupCoordinator(self.broker_config)
        self.sessions = ShareSessionCache(self.broker_config.max_share_sessions)
        self.state_partitions: int = config["share.coordinator.state.topic.num.partitions"]
        self.persister_name: str = config["share.persister"]
        state_config = ShareCoordinatorConfig(
            snapshot_update_records_per_snapshot=config[
                "share.coordinator.snapshot.update.records.per.snapshot"
            ],
            cold_partition_snapshot_interval_ms=config[
                "share.coordinator.cold.partition.snapshot.interval.ms"
            ],
            state_topic_prune_interval_ms=config["share.coordinator.state.topic.prune.interval.ms"],
            state_topic_num_partitions=self.state_partitions,
        )
        flush_mode = FlushMode(config["share.coordinator.state.flush.mode"])
        self.persister: BuiltinPersister | InLogPersister
        if self.persister_name == "in-log":
            self.persister = InLogPersister(
                self._user_log,
                self._user_partitions,
                config=state_config,
                flush_mode=flush_mode,
                clock_ms=now_ms,
            )
        else:
            self.persister = BuiltinPersister(
                self._state_log, config=state_config, flush_mode=flush_mode, clock_ms=now_ms
            )
        self.partitions = SharePartitionManager(self)
        self.dead_letters = DeadLetterWriter(self)
        self._tasks: set[asyncio.Task[Any]] = set()
        self.timer = broker.timer
        self._ticking = False
        self._stopped = False
        self._initializing: dict[str, asyncio.Future[None]] = {}

    now_ms = staticmethod(now_ms)

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        broker = self.broker
        state = broker.topics.get(STATE_TOPIC)
        self._check_persister(state)
        if isinstance(self.persister, InLogPersister):
            pass  # share state lives in the user partitions: no state topic
        elif state is None:
            broker.create_topic(
                STATE_TOPIC,
                self.state_partitions,
                {"segment.bytes": str(broker.config["share.coordinator.state.topic.segment.bytes"])},
            )
        elif state.partitions != self.state_partitions:
            # The placement of share-partitions depends on the count: keep the one on disk.
            self.state_partitions = state.partitions
            self.persister = BuiltinPersister(
                self._state_log,
                config=dataclasses.replace(
                    self.persister.config, state_topic_num_partitions=state.partitions
                ),
                flush_mode=self.persister.flush_mode,
                clock_ms=now_ms,
            )
        broker.internal_topic(GROUP_METADATA_TOPIC, 1, group_metadata_topic_configs(broker.config))
        self._replay_group_metadata()
        await self.persister.load()
        self.dead_letters.start()
        self.timer.add(self)

    async def stop(self) -> None:
        self._stopped = True
        await self.dead_letters.stop()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.persister.close()

    def spawn(self, coroutine: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("share background task failed", exc_info=task.exception())

    def _check_persister(self, state: TopicInfo | None) -> None:
        """Refuse to start on share state the configured persister cannot read."""
        from ..start_errors import BrokerStartError

        broker = self.broker
        coordinator_state = False
        for index in range(state.partitions if state is not None else 0):
            partition = broker.partition(STATE_TOPIC, index)
            if partition is not None and partition.log.log_end_offset > 0:
                coordinator_state = True
                break
        dirs = [p.directory for p in broker.partitions.values() if not is_internal(p.topic)]
        try:
            check_persister(
                broker.data_dir, self.persister_name, coordinator_state=coordinator_state, partition_dirs=dirs
            )
        except PersisterSwitchError as error:
            raise BrokerStartError(str(error)) from None

    def _user_log(self, topic_id: uuid.UUID, index: int) -> PartitionLog | None:
        partition = self.log_partition(topic_id, index)
        return None if partition is None else partition.log

    def _user_partitions(self) -> list[tuple[uuid.UUID, int]]:
        return [(t.topic_id, i) for t in self.broker.topics if not t.internal for i in range(t.partitions)]

    def _state_log(self, index: int) -> StateLog:
        partition = self.broker.partition(STATE_TOPIC, index)
        if partition is None:
            raise RuntimeError(f"{STATE_TOPIC}-{index} is not open")
        return partition.log

    # -- topics --------------------------------------------------------------------------------

    def topic_image(self) -> dict[str, TopicMetadata]:
        return {
            t.name: TopicMetadata(topic_id=t.topic_id, partitions=t.partitions)
            for t in self.broker.topics
            if not t.internal
        }

    def log_partition(self, topic_id: uuid.UUID, index: int) -> Partition | None:
        info = self.broker.topics.by_id(topic_id)
        if info is None:
            return None
        return self.broker.partition(info.name, index)

    # -- group metadata log --------------------------------------------------------------------

    def _replay_group_metadata(self) -> None:
        partition = self.broker.partition(GROUP_METADATA_TOPIC, 0)
        assert partition is not None
        for key, value in keyed_records(partition.log):
            self.coordinator.replay(key, value)

    def persist_group_records(
        self, records: Iterable[CoordinatorRecord], *, producer_id: int = -1, producer_epoch: int = -1
    ) -> None:
        """Append group records to the group-metadata log (page cache: survives a process crash);
        with a ``producer_id``, as a transactional batch of that producer's open transaction."""
        batch = [Record(key=r.key, value=r.value) for r in records]
        if not batch:
            return
        partition = self.broker.partition(GROUP_METADATA_TOPIC, 0)
        assert partition is not None
        encoded = encode_batch(
            batch,
            base_timestamp=now_ms(),
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            transactional=producer_id >= 0,
        )
        partition.log.append(encoded, now_ms=now_ms())

    # -- membership ----------------------------------------------------------------------------

    async def heartbeat(self, request: HeartbeatRequest) -> HeartbeatResult:
        """One ShareGroupHeartbeat: persist its records, initialize share-partition state if
        asked and hand out the resulting assignment in the same response.

        Raises ``GroupRequestError`` (nothing changed) for the coordinator's refusals.
        """
        now = now_ms()
        result = self.coordinator.heartbeat(request, now_ms=now, topics=self.topic_image())
        self.persist_group_records(result.records)
        # A member that leaves (epoch -1) keeps its share session: librdkafka sends its last
        # acknowledgements with ShareAcknowledge epoch -1 right after the leave heartbeat, and that
        # request closes the session and releases the rest. Expired members are cleaned up at once.
        if request.member_epoch == -1:
            return result
        assignment = result.assignment
        for _ in range(3):
            if result.initialize is not None:
                if not await self._initialize_for_group(result.initialize):
                    break
            elif request.group_id in self._initializing:
                # Another member's heartbeat is initializing share-partitions this member may
                # be given: wait, so the assignment reaches it now rather than a heartbeat later.
                await asyncio.shield(self._initializing[request.group_id])
            else:
                break
            try:
                result = self.coordinator.heartbeat(
                    HeartbeatRequest(
                        group_id=request.group_id,
                        member_id=result.member_id,
                        member_epoch=result.member_epoch,
                        client_id=request.client_id,
                        client_host=request.client_host,
                    ),
                    now_ms=now_ms(),
                    topics=self.topic_image(),
                )
            except GroupRequestError:
                break  # the member was fenced or removed meanwhile: answer with what it had
            self.persist_group_records(result.records)
            if result.assignment is not None:
                assignment = result.assignment
        else:
            if result.initialize is not None:  # never drop an initialization the coordinator awaits
                self.spawn(self._initialize_for_group(result.initialize))
        result = HeartbeatResult(
            records=(),
            member_id=result.member_id,
            member_epoch=result.member_epoch,
            heartbeat_interval_ms=result.heartbeat_interval_ms,
            assignment=assignment,
        )
        self.timer.arm(self.coordinator.next_deadline())
        return result

    async def _initialize_for_group(self, init: InitializeShareState) -> bool:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._initializing[init.group_id] = future
        try:
            return await self.initialize(init)
        finally:
            if self._initializing.get(init.group_id) is future:
                del self._initializing[init.group_id]
            future.set_result(None)

    async def initialize(self, init: InitializeShareState) -> bool:
        """InitializeShareGroupState for new share-partitions, then mark them assignable."""
        try:
            await asyncio.gather(
                *(
                    self.persister.initialize_state(key, state_epoch=init.state_epoch, start_offset=-1)
                    for key in _keys(init.group_id, init.topics)
                )
            )
        except PersisterError:
            log.warning("share state initialization failed for group %s", init.group_id, exc_info=True)
            self.coordinator.initialize_failed(init.group_id, init.topics)
            return False
        self.persist_group_records(self.coordinator.initialize_complete(init.group_id, init.topics))
        return True

    async def member_removed(self, removed: MemberRemoved) -> None:
        """A member left or expired: close its share session and release its records."""
        self.sessions.remove_member(removed.group_id, removed.member_id)
        keys = set(self.partitions.keys_of_group(removed.group_id))
        keys.update(_keys(removed.group_id, removed.assignment))
        futures = self.partitions.release_member(removed.member_id, keys)
        if futures:
            await asyncio.gather(*futures)

    def session_closed(
        self, group_id: str, member_id: str, partitions: Iterable[TopicIdPartition]
    ) -> list[Any]:
        keys = [
            SharePartitionKey(group_id=group_id, topic_id=tp.topic_id, partition=tp.partition)
            for tp in partitions
        ]
        return self.partitions.release_member(member_id, keys)

    def log_start_moved(self, topic: str, index: int) -> None:
        """Retention moved the start of ``topic``-``index``: share-partitions on it follow."""
        info = self.broker.topics.get(topic)
        partition = self.broker.partition(topic, index)
        if info is not None and partition is not None and not info.internal:
            self.partitions.log_start_moved(info.topic_id, index, partition.log.log_start_offset)

    def connection_closed(self, connection_id: int) -> None:
        """A client connection went away: as in Kafka, the share sessions it opened (ShareFetch
        epoch 0) are closed and their members' records released at once, not at lock expiry.
        Group membership is untouched (it ends by leave or heartbeat timeout)."""
        for update in self.sessions.connection_closed(str(connection_id)):
            self.session_closed(update.key.group_id, update.key.member_id, update.partitions)

    def lock_duration_ms(self, group_id: str) -> int:
        """The group's ``share.record.lock.duration.ms`` (the responses' acquisition_lock_timeout)."""
        return self.coordinator.group_config(group_id).record_lock_duration_ms

    def key_ordered(self, group_id: str) -> bool:
        """Whether the group is key-ordered (``shareq.share.ordering=key``)."""
        return self.coordinator.group_config(group_id).ordering == "key"

    def group_config_changed(self, group_id: str) -> None:
        """A group's configs were altered: later acquisitions use the new values."""
        group = self.coordinator.group_config(group_id)
        warning = group.retry.stall_warning
        if warning:
            log.warning("share group %s: %s", group_id, warning)
        config = share_config(group)
        by_key = group.ordering == "key"
        for key in self.partitions.keys_of_group(group_id):
            sp = self.partitions.cached(key)
            if sp is not None:
                sp.alter_config(config)
                if by_key != (sp.key_stats is not None):
                    in_flight = sp.end_offset - sp.spso - sp.delivery_complete_count
                    if in_flight > 0:
                        log.info(
                            "%s: shareq.share.ordering is now %s; it applies to new acquisitions "
                            "(%d records in flight keep their holders)",
                            key,
                            group.ordering,
                            in_flight,
                        )
                    if not by_key:
                        sp.key_stats = None
                if sp.archiving_count():  # the DLQ changed: pending dead letters follow at once
                    self.dead_letters.notify(key)

    # -- the timer -----------------------------------------------------------------------------

    def schedule(self, deadline_ms: int) -> None:
        """Make sure the timer fires no later than ``deadline_ms``."""
        self.timer.arm(deadline_ms)

    def schedule_from(self, sp: SharePartition) -> None:
        self.timer.arm(sp.next_deadline())

    def reschedule(self) -> None:
        """Recompute the earliest deadline over everything and arm the timer for it."""
        self.timer.reschedule()

    def next_deadline(self) -> int | None:
        deadlines = (
            self.partitions.next_deadline(),
            self.coordinator.next_deadline(),
            None if self._ticking else self.persister.next_deadline(),
        )
        return min((d for d in deadlines if d is not None), default=None)

    def run_timers(self, now: int) -> None:
        """Do what is due at ``now``: expire member sessions and acquisition locks, persister
        housekeeping."""
        expired = self.coordinator.expire(now)
        self.persist_group_records(expired.records)
        for removed in expired.removed:
            self.spawn(self.member_removed(removed))
        self.partitions.expire(now)
        deadline = self.persister.next_deadline()
        if deadline is not None and deadline <= now and not self._ticking:
            self._ticking = True
            self.spawn(self._tick(now))
        self.reschedule()  # (called from the timer, it re-arms once every service ran)

    async def _tick(self, now: int) -> None:
        try:
            await self.persister.tick(now)
        finally:
            self._ticking = False
            if not self._stopped:
                self.reschedule()


def _keys(group_id: str, topics: Iterable[TopicPartitions]) -> list[SharePartitionKey]:
    return [
        SharePartitionKey(group_id=group_id, topic_id=tp.topic_id, partition=p)
        for tp in topics
        for p in tp.partitions
    ]


def _default(name: str) -> Any:
    from shareq.config import SETTINGS

    return SETTINGS[name].default
