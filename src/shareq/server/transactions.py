"""``TransactionServices`` (``broker.transactions``): the asyncio shell of the transaction coordinator.

- Every change of a transactional id is appended to ``__transaction_state`` before it takes
  effect in memory (:meth:`_persist` appends, then replays), and before any answer.
- A decision (PrepareCommit/PrepareAbort) is followed, in the same call and before the answer,
  by the markers on every participant partition and then by CompleteCommit/CompleteAbort: on one
  node the markers are local appends, so the client never sees CONCURRENT_TRANSACTIONS and no
  transaction of a producer starts while a marker of its previous one is outstanding.
- A marker on the group-metadata log also settles the producer's pending TxnOffsetCommits.
- A share-state participant (``__share_group_state``-p, added by TxnShareAcknowledge) gets no
  control batch: the share persister writes a txn marker record to the state partitions holding
  the producer's staged acknowledgements and the loaded share-partitions settle them (KIP-1289).
  That write is awaited, so the decision's completion then runs asynchronously: EndTxn answers
  after it; a fencing InitProducerId or a timeout lets it run as a task (the transaction stays
  Prepare*, so the producer's next transaction waits for it).
- At start: ``__transaction_state`` is replayed; a decision found without its completion has its
  markers written again where the partition still shows the producer's transaction open, then is
  completed; an Ongoing transaction is left to its timeout (its client may still end it).
- One ``loop.call_at`` timer follows ``coordinator.next_deadline()`` (transaction timeouts,
  id expiration).

For crash tests, ``SHAREQ_CRASH_AT`` names a point of the commit path where the process kills
itself (SIGKILL): ``txn.after_prepare`` (the decision is logged, no marker written),
``txn.after_marker:K`` (K markers written) or ``txn.before_complete`` (every marker, no
CompleteX).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from shareq.coordinators.transaction import (
    TV_0,
    TV_2,
    TopicPartition,
    TransactionCoordinator,
    TxnConfig,
    TxnErrorCode,
    TxnMetadata,
    TxnRequestError,
    TxnWrite,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from shareq.log.records import Record, encode_batch
from shareq.log.scan import keyed_records
from shareq.persister.builtin import STATE_TOPIC

from .clock import now_ms
from .consumer_groups import GROUP_METADATA_TOPIC
from .internal_topics import transaction_state_topic_configs

if TYPE_CHECKING:
    from .broker import Broker

log = logging.getLogger("shareq.transactions")

TRANSACTION_STATE_TOPIC = "__transaction_state"


class TransactionServices:
    """The transaction coordinator of this broker; ``await start()`` after the group services."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        config = broker.config
        self.coordinator = TransactionCoordinator(
            TxnConfig(
                max_timeout_ms=config["transaction.max.timeout.ms"],
                id_expiration_ms=config["transactional.id.expiration.ms"],
            )
        )
        self.timer = broker.timer
        self._stopped = False
        self._crash_at = os.environ.get("SHAREQ_CRASH_AT", "")
        self._tasks: set[asyncio.Task[None]] = set()

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        self.timer.add(self)
        partition = self.broker.partition(TRANSACTION_STATE_TOPIC, 0)
        if partition is None:  # created with the first transactional id, as in Kafka
            return
        self.broker.internal_topic(
            TRANSACTION_STATE_TOPIC, 1, transaction_state_topic_configs(self.broker.config)
        )
        for key, value in keyed_records(partition.log):
            txn_id = decode_key(key)
            self.coordinator.replay(txn_id, None if value is None else decode_value(txn_id, value))
        for meta in self.coordinator.preparing():
            pending = self._finish(meta, recovering=True)
            if pending is not None:
                await pending
        self._reschedule()

    async def stop(self) -> None:
        self._stopped = True
        for task in list(self._tasks):
            task.cancel()

    # -- requests ------------------------------------------------------------------------------

    def init_producer_id(
        self, transactional_id: str, timeout_ms: int, producer_id: int, producer_epoch: int
    ) -> TxnMetadata:
        """InitProducerId with a transactional id; an open transaction is aborted (and its
        producer fenced) first. Raises ``TxnRequestError``."""
        for _ in range(2):
            write = self.coordinator.init_producer_id(
                transactional_id,
                timeout_ms,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                now_ms=now_ms(),
                allocate=self.broker.topics.allocate_producer_id,
            )
            if not write.decision:
                self._persist(write)
                self._reschedule()  # the id's expiration
                return write.metadata
            pending = self._decide(write)
            if pending is not None:  # share-state markers under way: the client retries
                self._spawn(pending)
                raise TxnRequestError(TxnErrorCode.CONCURRENT_TRANSACTIONS, "retry")
            if producer_id >= 0:  # KIP-360: the aborted producer continues with the bumped epoch
                producer_epoch = write.metadata.producer_epoch
        raise TxnRequestError(TxnErrorCode.CONCURRENT_TRANSACTIONS, "retry")

    def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: list[TopicPartition],
        *,
        client_version: int = TV_0,
    ) -> None:
        write = self.coordinator.add_partitions(
            transactional_id,
            producer_id,
            producer_epoch,
            partitions,
            now_ms=now_ms(),
            client_version=client_version,
        )
        if write is not None:
            self._persist(write)
            self._reschedule()

    def add_offsets(
        self, transactional_id: str, producer_id: int, producer_epoch: int, *, client_version: int = TV_0
    ) -> None:
        self.add_partitions(
            transactional_id,
            producer_id,
            producer_epoch,
            [(GROUP_METADATA_TOPIC, 0)],
            client_version=client_version,
        )

    def verify_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, TxnErrorCode]:
        return self.coordinator.verify_partitions(transactional_id, producer_id, producer_epoch, partitions)

    def add_produced_partition(
        self, producer_id: int, producer_epoch: int, topic: str, partition: int
    ) -> TxnErrorCode:
        """Produce v12+ (transaction.version 2): a transactional batch adds its partition to the
        producer's transaction, opening one if none is (persisted before the batch is appended)."""
        meta = self.coordinator.by_producer(producer_id)
        if meta is None:
            return TxnErrorCode.INVALID_PRODUCER_ID_MAPPING
        try:
            self.add_partitions(
                meta.transactional_id, producer_id, producer_epoch, [(topic, partition)], client_version=TV_2
            )
        except TxnRequestError as error:
            return error.code
        return TxnErrorCode.NONE

    def end_txn(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        *,
        tv2: bool = False,
    ) -> Coroutine[Any, Any, None] | None:
        """EndTxn; returns the completion still to await when share-state markers are involved.
        ``tv2`` (EndTxn v5): the epoch is bumped; :meth:`producer` then names the one to use."""
        write = self.coordinator.end_txn(
            transactional_id,
            producer_id,
            producer_epoch,
            commit,
            now_ms=now_ms(),
            tv2=tv2,
            allocate=self.broker.topics.allocate_producer_id,
        )
        if write is not None:
            return self._decide(write)
        return None

    def producer(self, transactional_id: str) -> tuple[int, int]:
        """The producer id and epoch of ``transactional_id`` now (-1, -1 if unknown)."""
        meta = self.coordinator.get(transactional_id)
        return (-1, -1) if meta is None else (meta.producer_id, meta.producer_epoch)

    def abort(self, transactional_id: str) -> None:
        """An operator's abort of a hanging transaction."""
        pending = self._decide(self.coordinator.abort(transactional_id, now_ms=now_ms()))
        if pending is not None:
            self._spawn(pending)

    def add_share_state(
        self, transactional_id: str, producer_id: int, producer_epoch: int, state_partitions: list[int]
    ) -> None:
        """TxnShareAcknowledge: make the share-state partitions participants (like AddOffsetsToTxn)."""
        self.add_partitions(
            transactional_id,
            producer_id,
            producer_epoch,
            [(STATE_TOPIC, p) for p in sorted(set(state_partitions))],
        )

    def verify_produce(
        self, producer_id: int, producer_epoch: int, topic: str, partition: int
    ) -> TxnErrorCode:
        return self.coordinator.verify_produce(producer_id, producer_epoch, (topic, partition))

    def verify_offsets(
        self, transactional_id: str, producer_id: int, producer_epoch: int, *, implicit: bool = False
    ) -> TxnErrorCode:
        """TxnOffsetCommit: the producer's open transaction must include the group-metadata log;
        ``implicit`` (v5, transaction.version 2) adds it, opening a transaction if none is."""
        if implicit:
            try:
                self.add_offsets(transactional_id, producer_id, producer_epoch, client_version=TV_2)
            except TxnRequestError as error:
                return error.code
            return TxnErrorCode.NONE
        meta = self.coordinator.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            return TxnErrorCode.INVALID_PRODUCER_ID_MAPPING
        if meta.producer_epoch != producer_epoch:
            return TxnErrorCode.INVALID_PRODUCER_EPOCH
        return self.coordinator.verify_produce(producer_id, producer_epoch, (GROUP_METADATA_TOPIC, 0))

    # -- the commit path -----------------------------------------------------------------------

    def _persist(self, write: TxnWrite) -> None:
        """Append the record, then let it take effect."""
        meta = write.metadata
        self._append(meta.transactional_id, encode_value(meta))
        self.coordinator.replay(meta.transactional_id, meta)

    def _append(self, transactional_id: str, value: bytes | None) -> None:
        partition = self.broker.partition(TRANSACTION_STATE_TOPIC, 0)
        if partition is None:
            self.broker.internal_topic(
                TRANSACTION_STATE_TOPIC, 1, transaction_state_topic_configs(self.broker.config)
            )
            partition = self.broker.partition(TRANSACTION_STATE_TOPIC, 0)
            assert partition is not None
        now = now_ms()
        batch = encode_batch([Record(key=encode_key(transactional_id), value=value)], base_timestamp=now)
        partition.log.append(batch, now_ms=now)

    def _decide(self, write: TxnWrite) -> Coroutine[Any, Any, None] | None:
        """PrepareX (the decision), the markers, CompleteX (returned to await with share state)."""
        self._persist(write)
        pending = self._finish(write.metadata, recovering=False)
        self._reschedule()
        return pending

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("completing a transaction failed", exc_info=task.exception())

    def _finish(self, meta: TxnMetadata, *, recovering: bool) -> Coroutine[Any, Any, None] | None:
        commit = meta.state.name == "PREPARE_COMMIT"
        now = now_ms()
        groups = self.broker.consumer_groups
        self._maybe_crash("txn.after_prepare")
        written = 0
        shares = False
        for topic, index in sorted(meta.partitions):
            if topic == STATE_TOPIC:
                shares = True
                continue
            partition = self.broker.partition(topic, index)
            if partition is None:
                continue  # the topic was deleted meanwhile
            if recovering and not partition.log.transaction_open(meta.producer_id):
                continue  # this marker was written before the crash
            partition.log.append_marker(
                producer_id=meta.producer_id, producer_epoch=meta.producer_epoch, commit=commit, now_ms=now
            )
            if topic == GROUP_METADATA_TOPIC and groups is not None:
                groups.end_transaction(meta.producer_id, commit=commit)
            partition.notify()
            written += 1
            self._maybe_crash(f"txn.after_marker:{written}")
        if shares and self.broker.share is not None:
            return self._finish_share_state(meta, commit)
        self._maybe_crash("txn.before_complete")
        self._persist(self.coordinator.complete(meta.transactional_id, now_ms=now))
        return None

    async def _finish_share_state(self, meta: TxnMetadata, commit: bool) -> None:
        """The share-state markers (idempotent: a repeat finds nothing pending), then CompleteX."""
        share = self.broker.share
        assert share is not None
        await share.partitions.end_transaction(meta.producer_id, meta.producer_epoch, commit=commit)
        self._maybe_crash("txn.after_share_markers")
        self._maybe_crash("txn.before_complete")
        self._persist(self.coordinator.complete(meta.transactional_id, now_ms=now_ms()))
        self._reschedule()

    def _maybe_crash(self, point: str) -> None:
        if self._crash_at == point:
            log.warning("SHAREQ_CRASH_AT=%s: killing the broker", point)
            os.kill(os.getpid(), signal.SIGKILL)

    # -- the timer -----------------------------------------------------------------------------

    def _reschedule(self) -> None:
        self.timer.arm(self.coordinator.next_deadline())

    def next_deadline(self) -> int | None:
        return self.coordinator.next_deadline()

    def run_timers(self, now: int) -> None:
        """Abort transactions open past their timeout; forget transactional ids past expiration."""
        aborts, expired = self.coordinator.expire(now)
        for write in aborts:
            log.info(
                "aborting transaction of %s: open longer than %d ms",
                write.metadata.transactional_id,
                write.metadata.timeout_ms,
            )
            self._persist(write)
            pending = self._finish(write.metadata, recovering=False)
            if pending is not None:
                self._spawn(pending)
        for txn_id in expired:
            self._append(txn_id, None)
            self.coordinator.replay(txn_id, None)
