"""A synchronous producer: records are batched per partition into v2 batches and sent on flush.

No background thread: ``send`` buffers (and sends a partition's batch once it is full or older than
``linger_ms``), ``flush`` sends everything and resolves the futures. With ``idempotent=True`` the producer
asks InitProducerId once and numbers each partition's batches, so a retried batch is not appended twice.
"""

from __future__ import annotations

import contextlib
import datetime
import threading
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from shareq.log.records import Record, encode_batch
from shareq.protocol.acknowledge_type import AcknowledgeType
from shareq.protocol.api_keys import INIT_PRODUCER_ID, PRODUCE

from . import _transactions as _txn
from ._share_state import AckRange
from ._transactions import ShareGroupMetadata
from .cluster import Cluster, TopicInfo
from .errors import BrokerConnectionError, ClientError, KafkaError, raise_for
from .partitioner import StickyPartitioner, partition_for_key
from .records import ConsumerRecord
from .security import ClientSecurity

_RETRIABLE_REFRESH = {
    ErrorCode.not_leader_or_follower,
    ErrorCode.leader_not_available,
    ErrorCode.unknown_topic_or_partition,
    ErrorCode.not_enough_replicas,
    ErrorCode.request_timed_out,
    ErrorCode.coordinator_load_in_progress,
    ErrorCode.not_coordinator,
    ErrorCode.coordinator_not_available,
}


def _retriable(exc: BaseException) -> bool:
    """What Kafka's producer retries: a dropped connection, a moved or missing leader, a coordinator
    loading or moved, a timeout, and the other errors Kafka marks retriable."""
    if isinstance(exc, BrokerConnectionError):
        return True
    return isinstance(exc, KafkaError) and (exc.code in _RETRIABLE_REFRESH or exc.retriable)


def _backoff(attempt: int, deadline: float) -> float:
    """Kafka's retry backoff: from 100 ms doubling to 1 s, never past the deadline."""
    return float(max(0.0, min(0.05 * 2**attempt, 1.0, deadline - time.monotonic())))


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordMetadata:
    """Where a record landed."""

    topic: str
    partition: int
    offset: int
    timestamp: int


class SendFuture:
    """The outcome of one ``send``: resolved when its batch is acknowledged. ``result()`` on a record
    still buffered flushes the producer first (there is no background sender)."""

    __slots__ = ("_done", "_error", "_producer", "_value")

    def __init__(self, producer: Producer) -> None:
        self._producer: Producer | None = producer
        self._value: RecordMetadata | None = None
        self._error: BaseException | None = None
        self._done = False

    def done(self) -> bool:
        return self._done

    def set_result(self, value: RecordMetadata) -> None:
        self._value, self._done, self._producer = value, True, None

    def set_exception(self, error: BaseException) -> None:
        self._error, self._done, self._producer = error, True, None

    def exception(self) -> BaseException | None:
        self._resolve()
        return self._error

    def result(self) -> RecordMetadata:
        self._resolve()
        if self._error is not None:
            raise self._error
        assert self._value is not None
        return self._value

    def _resolve(self) -> None:
        if not self._done and self._producer is not None:
            self._producer._send_all()
        if not self._done:
            raise ClientError("record was never sent (producer closed?)")


@dataclass(slots=True)
class _PendingBatch:
    topic: str
    partition: int
    created: float
    records: list[Record] = field(default_factory=list)
    futures: list[SendFuture] = field(default_factory=list)
    size: int = 0


class Producer:
    """``Producer("host:port").send("t", b"v"); producer.flush()``.

    ``linger_ms=None`` (default): a partition's batch goes when it reaches ``batch_size`` bytes or
    ``max_batch_records`` records, or on ``flush``. With ``linger_ms=N`` a ``send`` also ships batches older
    than N ms (there is no background thread, so nothing is sent between calls).
    """

    def __init__(
        self,
        bootstrap: str | list[str],
        *,
        acks: int = -1,
        linger_ms: int | None = None,
        batch_size: int = 1 << 20,
        max_batch_records: int = 10_000,
        idempotent: bool = True,
        request_timeout: float = 30.0,
        security: ClientSecurity | None = None,
        retries: int = 2_147_483_647,
        delivery_timeout_ms: int = 120_000,
        max_block_ms: int = 60_000,
        client_id: str = "shareq-producer",
        transactional_id: str | None = None,
        transaction_timeout_ms: int = 60_000,
    ) -> None:
        if idempotent and acks != -1:
            raise ValueError("an idempotent producer needs acks=-1")
        if transactional_id is not None and not idempotent:
            raise ValueError("a transactional producer is idempotent")
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self._request_timeout = request_timeout
        self._in_txn = False
        self._txn_partitions: set[tuple[str, int]] = set()
        self.acks = acks
        self.linger_ms = linger_ms
        self.batch_size = batch_size
        self.max_batch_records = max_batch_records
        self.idempotent = idempotent
        self.retries = retries
        self.delivery_timeout_ms = delivery_timeout_ms
        self.max_block_ms = max_block_ms
        self.cluster = Cluster(
            bootstrap, client_id=client_id, request_timeout=request_timeout, security=security
        )
        self._pending: dict[tuple[str, int], _PendingBatch] = {}
        self._sticky = StickyPartitioner()
        self._producer_id = -1
        self._producer_epoch = -1
        self._sequences: dict[tuple[str, int], int] = defaultdict(int)
        self._unflushed: list[SendFuture] = []
        self._lock = threading.RLock()  # send/flush from several threads
        self._closed = False

    # -- public API --------------------------------------------------------------------------------

    def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        headers: list[tuple[str, bytes | None]] | tuple[tuple[str, bytes | None], ...] | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> SendFuture:
        """Buffer one record; the future resolves to its ``RecordMetadata`` once its batch is acknowledged."""
        with self._lock:
            return self._send(topic, value, key, headers, partition, timestamp_ms)

    def _send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None,
        headers: list[tuple[str, bytes | None]] | tuple[tuple[str, bytes | None], ...] | None,
        partition: int | None,
        timestamp_ms: int | None,
    ) -> SendFuture:
        if self._closed:
            raise ClientError("producer is closed")
        info = self._topic_info(topic)
        n = len(info.partitions)
        if partition is None:
            partition = partition_for_key(key, n) if key is not None else self._sticky.partition(topic, n)
        elif not 0 <= partition < n:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"{topic}-{partition}")
        ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
        record = Record(key=key, value=value, headers=tuple(headers or ()), timestamp=ts)
        slot = (topic, partition)
        batch = self._pending.get(slot)
        if batch is None:
            batch = self._pending[slot] = _PendingBatch(topic, partition, time.monotonic())
        future = SendFuture(self)
        self._unflushed.append(future)
        batch.records.append(record)
        batch.futures.append(future)
        batch.size += len(key or b"") + len(value or b"") + 24
        if batch.size >= self.batch_size or len(batch.records) >= self.max_batch_records:
            self._send_batches([self._pending.pop(slot)])
            if key is None:
                self._sticky.batch_sent(topic)
        elif self.linger_ms is not None:
            self._send_lingered(self.linger_ms)
        return future

    def _topic_info(self, topic: str) -> TopicInfo:
        """The topic's metadata, waiting up to ``max_block_ms`` while no broker answers (restarting),
        as Kafka's producer blocks in ``send`` for metadata. A topic the cluster does not have is an
        error at once."""
        deadline = time.monotonic() + self.max_block_ms / 1000.0
        attempt = 0
        while True:
            try:
                return self.cluster.topic(topic)
            except BrokerConnectionError:
                attempt += 1
                if time.monotonic() >= deadline:
                    raise
                time.sleep(_backoff(attempt, deadline))

    # -- transactions (KIP-98; KIP-1289 share acknowledgements) ------------------------------------

    def init_transactions(self) -> None:
        """Get this transactional id's producer id and epoch (fencing an earlier instance, whose
        open transaction the coordinator aborts)."""
        if self.transactional_id is None:
            raise ClientError("init_transactions needs a transactional_id")
        with self._lock:
            conn = self.cluster.any_connection()
            self._producer_id, self._producer_epoch = _txn.init_producer_id(
                conn, self.transactional_id, self.transaction_timeout_ms, self._deadline()
            )
            self._sequences.clear()
            self._in_txn = False
            self._txn_partitions.clear()

    def begin_transaction(self) -> None:
        with self._lock:
            if self.transactional_id is None or self._producer_id < 0:
                raise ClientError("call init_transactions() first")
            if self._in_txn:
                raise ClientError("a transaction is already open")
            self._in_txn = True
            self._txn_partitions.clear()

    def send_share_acknowledgements_to_transaction(
        self,
        acknowledgements: Iterable[tuple[ConsumerRecord, AcknowledgeType] | AckRange],
        metadata: ShareGroupMetadata,
    ) -> None:
        """Stage a share consumer's acknowledgements in the open transaction (KIP-1289): they take
        effect if and only if it commits. Only ACCEPT, REJECT and GAP (control-record offsets) may be
        staged (``ValueError`` otherwise). A refused partition raises ``KafkaError``; the
        transaction should then be aborted."""
        ranges = _txn.ack_ranges(acknowledgements)
        with self._lock:
            txn = self._txn_ids()
            if not ranges:
                return
            codes = _txn.txn_share_acknowledge(self.cluster.any_connection(), txn, metadata, ranges)
        failed = sorted(
            ((str(tid), partition), code)
            for (tid, partition), code in codes.items()
            if code != ErrorCode.none
        )
        # The partition at fault, not those the broker then left alone (OPERATION_NOT_ATTEMPTED).
        failed.sort(key=lambda item: item[1] == ErrorCode.operation_not_attempted)
        if failed:
            (topic_id, partition), code = failed[0]
            raise KafkaError(code, context=f"TxnShareAcknowledge {topic_id}-{partition}")

    def commit_transaction(self) -> None:
        """Send everything buffered, then commit; a failed send raises and leaves the transaction
        open for ``abort_transaction``."""
        with self._lock:
            txn = self._txn_ids()
            self.flush()
            self._end(txn, commit=True)

    def abort_transaction(self) -> None:
        """Drop what is buffered and abort: nothing of the transaction becomes visible, and the
        share acknowledgements it staged are undone."""
        with self._lock:
            txn = self._txn_ids()
            dropped = ClientError("the transaction was aborted")
            for batch in self._pending.values():
                for f in batch.futures:
                    f.set_exception(dropped)
            self._pending.clear()
            self._unflushed = [f for f in self._unflushed if not f.done()]
            self._end(txn, commit=False)

    def _end(self, txn: tuple[str, int, int], *, commit: bool) -> None:
        try:
            _txn.end_txn(self.cluster.any_connection(), txn, commit, self._deadline())
        except KafkaError as error:
            # Nothing reached the coordinator (no partition added, every staging refused before
            # registration): the transaction never began there, so there is nothing to end.
            if error.code != ErrorCode.invalid_txn_state or self._txn_partitions:
                raise
        self._in_txn = False

    def _txn_ids(self) -> tuple[str, int, int]:
        if self.transactional_id is None or not self._in_txn:
            raise ClientError("no transaction is open (begin_transaction)")
        return self.transactional_id, self._producer_id, self._producer_epoch

    def _deadline(self) -> float:
        return time.monotonic() + self._request_timeout

    def _add_to_transaction(self, batches: list[_PendingBatch]) -> None:
        new = {(b.topic, b.partition) for b in batches} - self._txn_partitions
        if new:
            _txn.add_partitions(self.cluster.any_connection(), self._txn_ids(), sorted(new), self._deadline())
            self._txn_partitions |= new

    def flush(self) -> list[RecordMetadata]:
        """Send every buffered batch; return the metadata of every record sent since the last flush, in
        send order. A failed record raises its error (all batches are still sent, all futures resolved)."""
        with self._lock:
            self._send_all()
            futures, self._unflushed = self._unflushed, []
        return [f.result() for f in futures]

    def _send_all(self) -> None:
        with self._lock:
            batches = list(self._pending.values())
            self._pending.clear()
            for topic in {b.topic for b in batches}:
                self._sticky.batch_sent(topic)
            self._send_batches(batches)

    def close(self) -> None:
        if self._closed:
            return
        try:
            self.flush()
        finally:
            self._closed = True
            self.cluster.close()

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ---------------------------------------------------------------------------------

    def _send_lingered(self, linger_ms: int) -> None:
        cutoff = time.monotonic() - linger_ms / 1000.0
        due = [slot for slot, b in self._pending.items() if b.created <= cutoff]
        if due:
            self._send_batches([self._pending.pop(slot) for slot in due])
            for topic, _ in due:
                self._sticky.batch_sent(topic)

    def _ensure_producer_id(self, deadline: float) -> None:
        """InitProducerId, retried as Kafka's producer retries it (a coordinator still loading or
        moved, a timeout, a dropped connection) with backoff until ``deadline``."""
        if not self.idempotent or self._producer_id >= 0:
            return
        if self.transactional_id is not None:
            raise ClientError("call init_transactions() first")
        attempt = 0
        while True:
            try:
                conn = self.cluster.any_connection()
                _v, m = conn.module(INIT_PRODUCER_ID)
                response = conn.send(
                    m.InitProducerIdRequest(
                        transactional_id=None, transaction_timeout=datetime.timedelta(seconds=60)
                    ),
                    idempotent=True,
                )
                raise_for(response.error_code, context="InitProducerId")
            except (KafkaError, BrokerConnectionError) as exc:
                attempt += 1
                if not _retriable(exc) or attempt > self.retries or time.monotonic() >= deadline:
                    raise
                time.sleep(_backoff(attempt, deadline))
                continue
            self._producer_id = int(response.producer_id)
            self._producer_epoch = int(response.producer_epoch)
            return

    def _encode(self, batch: _PendingBatch) -> bytes:
        slot = (batch.topic, batch.partition)
        base_sequence = -1
        if self.idempotent:
            base_sequence = self._sequences[slot]
            self._sequences[slot] = (base_sequence + len(batch.records)) % 0x80000000
        return encode_batch(
            batch.records,
            producer_id=self._producer_id,
            producer_epoch=self._producer_epoch,
            base_sequence=base_sequence,
            transactional=self.transactional_id is not None,
        )

    def _send_batches(self, batches: list[_PendingBatch]) -> None:
        """Send ``batches``, retrying what Kafka's producer retries until the delivery timeout. Every
        future is resolved on return: an error that escapes fails the batches' records with it, so
        the first real error is what their callers see."""
        if not batches:
            return
        try:
            self._send_with_retries(batches)
        except BaseException as exc:
            for b in batches:
                for f in b.futures:
                    if not f.done():
                        f.set_exception(exc)
            raise

    def _send_with_retries(self, batches: list[_PendingBatch]) -> None:
        deadline = time.monotonic() + self.delivery_timeout_ms / 1000.0
        self._ensure_producer_id(deadline)
        if self.transactional_id is not None:
            self._add_to_transaction(batches)
        # Encode once: a retried batch keeps its sequence numbers.
        encoded = [(b, self._encode(b)) for b in batches]
        attempts = 0
        while encoded:
            by_leader: dict[int, list[tuple[_PendingBatch, bytes]]] = defaultdict(list)
            failed: list[tuple[_PendingBatch, bytes, BaseException]] = []
            for b, data in encoded:
                try:
                    leader = self.cluster.topic(b.topic).partition(b.partition).leader
                    by_leader[leader].append((b, data))
                except (KafkaError, BrokerConnectionError) as exc:
                    failed.append((b, data, exc))
            for leader, items in by_leader.items():
                failed.extend(self._produce_to(leader, items))
            attempts += 1
            in_time = attempts <= self.retries and time.monotonic() < deadline
            retry = [(b, data, exc) for b, data, exc in failed if in_time and _retriable(exc)]
            for b, _data, error in failed:
                if all(b is not r[0] for r in retry):
                    for f in b.futures:
                        f.set_exception(error)
            if not retry:
                return
            time.sleep(_backoff(attempts, deadline))
            with contextlib.suppress(KafkaError, BrokerConnectionError):  # the next round says why
                self.cluster.refresh_metadata(sorted({b.topic for b, _, _ in retry}))
            encoded = [(b, data) for b, data, _ in retry]

    def _produce_to(
        self, leader: int, items: list[tuple[_PendingBatch, bytes]]
    ) -> list[tuple[_PendingBatch, bytes, BaseException]]:
        """One Produce request to ``leader``: resolve the futures of accepted batches, return failures."""
        try:
            conn = self.cluster.connection(leader)
            _v, m = conn.module(PRODUCE)
        except (KafkaError, BrokerConnectionError) as exc:
            return [(b, data, exc) for b, data in items]
        topics: dict[str, list[object]] = defaultdict(list)
        for b, data in items:
            topics[b.topic].append(m.PartitionProduceData(index=b.partition, records=data))
        request = m.ProduceRequest(
            transactional_id=self.transactional_id,
            acks=self.acks,
            timeout=datetime.timedelta(seconds=conn.request_timeout),
            topic_data=tuple(
                m.TopicProduceData(name=name, partition_data=tuple(parts)) for name, parts in topics.items()
            ),
        )
        try:
            if self.acks == 0:
                conn.send_oneway(request)
                for b, _data in items:
                    for f in b.futures:
                        f.set_result(
                            RecordMetadata(topic=b.topic, partition=b.partition, offset=-1, timestamp=-1)
                        )
                return []
            response = conn.send(request, timeout=conn.request_timeout + 5)
        except BrokerConnectionError as exc:
            return [(b, data, exc) for b, data in items]
        results = {(t.name, int(p.index)): p for t in response.responses for p in t.partition_responses}
        failed: list[tuple[_PendingBatch, bytes, BaseException]] = []
        for b, data in items:
            p = results.get((b.topic, b.partition))
            if p is None:
                failed.append(
                    (b, data, KafkaError(ErrorCode.unknown_server_error, "no result for partition"))
                )
                continue
            if p.error_code == ErrorCode.duplicate_sequence_number:
                pass  # already appended by an earlier attempt: offsets as reported
            elif p.error_code != ErrorCode.none:
                failed.append(
                    (b, data, KafkaError(p.error_code, p.error_message, context=f"{b.topic}-{b.partition}"))
                )
                continue
            base = int(p.base_offset)
            lat = p.log_append_time
            log_append = int(lat.timestamp() * 1000) if isinstance(lat, datetime.datetime) else -1
            for i, (r, f) in enumerate(zip(b.records, b.futures, strict=True)):
                ts = log_append if log_append >= 0 else (r.timestamp if r.timestamp is not None else -1)
                f.set_result(
                    RecordMetadata(topic=b.topic, partition=b.partition, offset=base + i, timestamp=ts)
                )
        return failed
