"""``ShareConsumer``: a member of a share group (KIP-932) with explicit acknowledgement.

Membership runs on a background heartbeat thread with its own connection to the coordinator. ``poll``
sends ShareFetch to each partition leader (one share session per leader; epoch 0 opens it with the assigned
partitions, later epochs add or forget partitions) and hands out only the offsets the broker acquired for
this member, each with its delivery count. ``acknowledge`` collects types per offset; they ride on the next
ShareFetch, or go at once with ``commit`` (ShareAcknowledge). Nothing is acknowledged implicitly.

Records carry (topic_id, partition, offset), so a batch can be acknowledged later from plain data, e.g.
ranges sent back by a Spark task to the process that owns this consumer.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from shareq.protocol.acknowledge_type import AcknowledgeType
from shareq.protocol.api_keys import SHARE_ACKNOWLEDGE, SHARE_FETCH

from ._membership import Membership
from ._share_requests import build_share_acknowledge, build_share_fetch, select_acquired
from ._share_state import FINAL_EPOCH, AckRange, AcquiredRange, PendingAcks, ShareSession, TopicIdPartition
from ._transactions import ShareGroupMetadata
from .cluster import Cluster
from .errors import BrokerConnectionError, ClientError, KafkaError, UnsupportedVersionError
from .records import ConsumerRecord
from .security import ClientSecurity

_SESSION_ERRORS = {ErrorCode.share_session_not_found, ErrorCode.invalid_share_session_epoch}
_MEMBERSHIP_LOST = {ErrorCode.unknown_member_id, ErrorCode.fenced_member_epoch}
_REFRESH = {
    ErrorCode.not_leader_or_follower,
    ErrorCode.unknown_topic_or_partition,
    ErrorCode.unknown_topic_id,
}

AckResults = dict[tuple[str, int], ErrorCode]


@dataclass(frozen=True, slots=True, kw_only=True)
class Acquisition:
    """What one ``acquire`` call got: the records and the acquired ranges they came from."""

    records: tuple[ConsumerRecord, ...]
    ranges: tuple[AcquiredRange, ...]
    acquisition_lock_timeout_ms: int


class ShareConsumer:
    """``with ShareConsumer(bootstrap, "g", topics=["t"]) as c: for r in c.poll(1.0): c.acknowledge(r)``."""

    def __init__(
        self,
        bootstrap: str | list[str],
        group_id: str,
        *,
        topics: Sequence[str],
        client_id: str = "shareq-share-consumer",
        request_timeout: float = 30.0,
        security: ClientSecurity | None = None,
        fetch_max_wait_ms: int = 500,
        fetch_min_bytes: int = 1,
        fetch_max_bytes: int = 50 * 1024 * 1024,
        max_poll_records: int = 500,
        rack_id: str | None = None,
        on_acknowledged: Callable[[AckResults], None] | None = None,
    ) -> None:
        self.group_id = group_id
        self.topics = tuple(topics)
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.fetch_min_bytes = fetch_min_bytes
        self.fetch_max_bytes = fetch_max_bytes
        self.max_poll_records = max_poll_records
        self.on_acknowledged = on_acknowledged
        self.cluster = Cluster(
            bootstrap, client_id=client_id, request_timeout=request_timeout, security=security
        )
        # Heartbeats get their own connections so a long ShareFetch never delays them.
        self._hb_cluster = Cluster(
            bootstrap, client_id=client_id, request_timeout=request_timeout, security=security
        )
        self._lock = threading.RLock()
        self._sessions: dict[int, ShareSession] = defaultdict(ShareSession)
        self._pending = PendingAcks()
        self._renewals = PendingAcks()
        self._delivered: dict[TopicIdPartition, set[int]] = defaultdict(set)
        self._buffer: list[ConsumerRecord] = []
        self._ranges: list[AcquiredRange] = []
        self._fenced = threading.Event()
        self._decode = True
        self.acquisition_lock_timeout_ms = -1
        self._closed = False
        self.membership = Membership(
            self._hb_cluster, group_id, self.topics, rack_id=rack_id, on_fenced=self._fenced.set
        )
        self.membership.start()

    # -- properties --------------------------------------------------------------------------------

    @property
    def member_id(self) -> str:
        return self.membership.member_id

    def share_group_metadata(self) -> ShareGroupMetadata:
        """This member's identity for ``Producer.send_share_acknowledgements_to_transaction``
        (KIP-1289), read atomically."""
        m = self.membership
        return ShareGroupMetadata(group_id=self.group_id, member_id=m.member_id, member_epoch=m.member_epoch)

    def assignment(self) -> list[tuple[str, int]]:
        return sorted((self.cluster.topic_name(tid), p) for tid, p in self.membership.assignment)

    # -- consuming ---------------------------------------------------------------------------------

    def poll(self, timeout: float = 1.0, max_records: int | None = None) -> list[ConsumerRecord]:
        """Records acquired for this member (at most ``max_records``; the rest wait for the next poll).
        Pending acknowledgements ride on the ShareFetch."""
        limit = max_records or self.max_poll_records
        with self._lock:
            if not self._buffer:
                self._fill(limit, timeout)
            self._ranges.clear()  # poll users acknowledge records, not ranges
            out, self._buffer = self._buffer[:limit], self._buffer[limit:]
        return out

    def acquire(self, max_records: int, timeout: float = 1.0) -> Acquisition:
        """The lower-level ``poll``: everything acquired by one ShareFetch round (``max_records`` is the hint
        sent to the broker, which may acquire whole batches beyond it), with the acquired
        (topic, partition, first, last, delivery_count) ranges, so a caller can acknowledge by range later.
        Acquired offsets without a record are already queued as GAP acknowledgements."""
        with self._lock:
            if not self._buffer and not self._ranges:
                self._fill(max_records, timeout)
            out = Acquisition(
                records=tuple(self._buffer),
                ranges=tuple(self._ranges),
                acquisition_lock_timeout_ms=self.acquisition_lock_timeout_ms,
            )
            self._buffer.clear()
            self._ranges.clear()
        return out

    def acquire_ranges(self, max_records: int, timeout: float = 1.0) -> Acquisition:
        """``acquire`` without decoding records: only the acquired ranges, for a caller that reads the
        records elsewhere by offset (e.g. Spark executors with a plain Fetch). Offsets inside a range
        that hold no record (control records) are the caller's to skip; acknowledging them ACCEPT is
        as good as GAP."""
        with self._lock:
            self._decode = False
            try:
                return self.acquire(max_records, timeout)
            finally:
                self._decode = True

    def _fill(self, max_records: int, timeout: float) -> None:
        """ShareFetch until something is acquired or ``timeout`` passes (waiting for an assignment first)."""
        self._check_open()
        deadline = time.monotonic() + timeout
        while True:
            assignment = self._wait_assignment(max(deadline - time.monotonic(), 0.0))
            if assignment:
                self._ranges += self._fetch(assignment, max_records, max(deadline - time.monotonic(), 0.0))
                if self._buffer or self._ranges:
                    return
            elif self._pending:
                self.commit()
            if time.monotonic() >= deadline:
                return

    def _wait_assignment(self, timeout: float) -> frozenset[TopicIdPartition]:
        assignment = self.membership.wait_for_partitions(timeout)
        if self._fenced.is_set():
            self._fenced.clear()
            with self._lock:
                self._reset_sessions()
        return assignment

    def _reset_sessions(self) -> None:
        """Fenced or session lost: acquisitions are void, start new sessions at epoch 0."""
        for s in self._sessions.values():
            s.reset()
        self._delivered.clear()
        self._buffer.clear()
        self._ranges.clear()

    def _leaders(self, parts: Iterable[TopicIdPartition]) -> dict[int, set[TopicIdPartition]]:
        out: dict[int, set[TopicIdPartition]] = defaultdict(set)
        for tid, p in parts:
            name = self.cluster.topic_name(tid)
            out[self.cluster.topic(name).partition(p).leader].add((tid, p))
        return out

    def _fetch(
        self, assignment: frozenset[TopicIdPartition], max_records: int, timeout: float
    ) -> list[AcquiredRange]:
        wanted_by_leader = self._leaders(assignment)
        for leader, session in self._sessions.items():
            if leader not in wanted_by_leader and session.in_session:
                wanted_by_leader[leader] = set()
        ranges: list[AcquiredRange] = []
        wait_ms = min(self.fetch_max_wait_ms, int(timeout * 1000))
        for leader, wanted in wanted_by_leader.items():
            try:
                ranges += self._share_fetch(leader, wanted, max_records, wait_ms)
            except BrokerConnectionError:
                self._sessions[leader].reset()
                with contextlib.suppress(ClientError):  # the broker may be restarting: retried next poll
                    self.cluster.refresh_metadata(list(self.topics))
        return ranges

    def _share_fetch(
        self, leader: int, wanted: set[TopicIdPartition], max_records: int, wait_ms: int
    ) -> list[AcquiredRange]:
        conn = self.cluster.connection(leader)
        _v, m = conn.module(SHARE_FETCH)
        session = self._sessions[leader]
        epoch, listed, forgotten = session.plan_fetch(wanted, self._pending.partitions())
        acks = self._pending.take(listed)
        request = build_share_fetch(
            m,
            group_id=self.group_id,
            member_id=self.member_id,
            epoch=epoch,
            max_wait_ms=wait_ms,
            min_bytes=self.fetch_min_bytes,
            max_bytes=self.fetch_max_bytes,
            max_records=max_records,
            batch_size=max_records,
            listed=listed,
            acks=acks,
            forgotten=forgotten,
        )
        try:
            response = conn.send(request, timeout=conn.request_timeout + wait_ms / 1000.0)
        except BrokerConnectionError:
            self._fail_acks(acks, ErrorCode.network_exception)
            raise
        if response.error_code in _SESSION_ERRORS or response.error_code in _MEMBERSHIP_LOST:
            # A membership lost (a restarted broker forgot it) is renewed by the heartbeat, which
            # rejoins and publishes the new assignment; the next fetch opens a new session.
            session.reset()
            self._fail_acks(acks, response.error_code)
            return []
        if response.error_code != ErrorCode.none:
            self._fail_acks(acks, response.error_code)
            raise KafkaError(response.error_code, response.error_message, context="ShareFetch")
        session.fetched(wanted)
        self.acquisition_lock_timeout_ms = int(response.acquisition_lock_timeout.total_seconds() * 1000)
        ack_results: AckResults = {}
        ranges: list[AcquiredRange] = []
        refresh = False
        for t in response.responses:
            topic = self.cluster.topic_name(t.topic_id)
            for p in t.partitions:
                tp = (t.topic_id, int(p.partition_index))
                if tp in acks:
                    ack_results[(topic, tp[1])] = ErrorCode(int(p.acknowledge_error_code))
                if p.error_code != ErrorCode.none:
                    refresh = refresh or p.error_code in _REFRESH
                    continue
                ranges += self._deliver(topic, tp, p.records, p.acquired_records)
        if refresh:
            self.cluster.refresh_metadata(list(self.topics))
        for tp in acks:
            ack_results.setdefault((self.cluster.topic_name(tp[0]), tp[1]), ErrorCode.none)
        if ack_results and self.on_acknowledged is not None:
            self.on_acknowledged(ack_results)
        return ranges

    def _deliver(
        self, topic: str, tp: TopicIdPartition, blob: bytes | None, acquired: Sequence[Any]
    ) -> list[AcquiredRange]:
        ranges = [
            AcquiredRange(
                topic=topic,
                topic_id=tp[0],
                partition=tp[1],
                first_offset=int(a.first_offset),
                last_offset=int(a.last_offset),
                delivery_count=int(a.delivery_count),
            )
            for a in acquired
        ]
        if not self._decode:
            return ranges
        picked, gaps = select_acquired(
            blob, [(r.first_offset, r.last_offset, r.delivery_count) for r in ranges]
        )
        delivered = self._delivered[tp]
        for rec, count, leader_epoch in picked:
            delivered.add(rec.offset)
            self._buffer.append(
                ConsumerRecord(
                    topic=topic,
                    partition=tp[1],
                    offset=rec.offset,
                    key=rec.key,
                    value=rec.value,
                    headers=rec.headers,
                    timestamp=-1 if rec.timestamp is None else rec.timestamp,
                    topic_id=tp[0],
                    delivery_count=count,
                    leader_epoch=leader_epoch,
                )
            )
        for off in gaps:
            self._pending.add(tp, off, off, AcknowledgeType.GAP)
        return ranges

    # -- acknowledging -----------------------------------------------------------------------------

    def acknowledge(
        self,
        record: ConsumerRecord | tuple[str, int, int],
        type: AcknowledgeType = AcknowledgeType.ACCEPT,
    ) -> None:
        """Mark one record ACCEPT / RELEASE / REJECT (or RENEW its lock); sent with the next fetch/commit."""
        if isinstance(record, ConsumerRecord):
            tid = (
                record.topic_id if record.topic_id is not None else self.cluster.topic(record.topic).topic_id
            )
            self.acknowledge_ranges(
                [
                    AckRange(
                        topic_id=tid,
                        partition=record.partition,
                        first_offset=record.offset,
                        last_offset=record.offset,
                        type=type,
                    )
                ]
            )
        else:
            topic, partition, offset = record
            tid = self.cluster.topic(topic).topic_id
            self.acknowledge_ranges(
                [
                    AckRange(
                        topic_id=tid, partition=partition, first_offset=offset, last_offset=offset, type=type
                    )
                ]
            )

    def acknowledge_ranges(self, ranges: Iterable[AckRange]) -> None:
        """Acknowledge whole offset ranges, e.g. ``AckRange``s rebuilt from an ``Acquisition`` elsewhere."""
        with self._lock:
            for r in ranges:
                tp = (r.topic_id, r.partition)
                target = self._renewals if r.type is AcknowledgeType.RENEW else self._pending
                target.add(tp, r.first_offset, r.last_offset, AcknowledgeType(r.type))
                if r.type is not AcknowledgeType.RENEW:
                    delivered = self._delivered.get(tp)
                    if delivered:
                        delivered.difference_update(range(r.first_offset, r.last_offset + 1))

    def commit(self) -> AckResults:
        """Send pending acknowledgements now (ShareAcknowledge per leader); per-partition error codes."""
        self._check_open()
        with self._lock:
            results = self._send_acks(self._pending, renew=False)
            if self._renewals:
                results.update(self._send_acks(self._renewals, renew=True))
        if results and self.on_acknowledged is not None:
            self.on_acknowledged(results)
        return results

    def renew(self, records: Iterable[ConsumerRecord]) -> AckResults:
        """Extend the acquisition locks of ``records`` (RENEW; needs ShareAcknowledge v2)."""
        self.acknowledge_ranges(
            AckRange(
                topic_id=r.topic_id,
                partition=r.partition,
                first_offset=r.offset,
                last_offset=r.offset,
                type=AcknowledgeType.RENEW,
            )
            for r in records
            if r.topic_id is not None
        )
        return self.commit()

    def release(self, records: Iterable[ConsumerRecord], *, delay_ms: int = 0) -> AckResults:
        """RELEASE ``records`` now (ShareAcknowledge), asking a shareq broker not to deliver them again
        for ``delay_ms`` (capped by the broker's ``shareq.redelivery.backoff.ceiling.ms``; a Kafka
        broker ignores it and redelivers at once). Per-partition error codes."""
        self._check_open()
        pending = PendingAcks()
        for r in records:
            tid = r.topic_id if r.topic_id is not None else self.cluster.topic(r.topic).topic_id
            pending.add((tid, r.partition), r.offset, r.offset, AcknowledgeType.RELEASE)
        with self._lock:
            for tp, ranges in pending.by_partition.items():
                delivered = self._delivered.get(tp)
                if delivered:
                    delivered.difference_update(first for first, _, _ in ranges)
            results = self._send_acks(pending, renew=False, release_delay_ms=max(delay_ms, 0))
        if results and self.on_acknowledged is not None:
            self.on_acknowledged(results)
        return results

    def _send_acks(
        self, pending: PendingAcks, *, renew: bool, epoch: int | None = None, release_delay_ms: int = 0
    ) -> AckResults:
        results: AckResults = {}
        if not pending and epoch is None:
            return results
        by_leader = self._leaders(pending.partitions())
        if epoch is not None:
            for leader, s in self._sessions.items():
                if s.epoch > 0:
                    by_leader.setdefault(leader, set())
        for leader, parts in by_leader.items():
            session = self._sessions[leader]
            acks = pending.take(parts)
            if session.epoch == 0 and epoch is None:
                # No session on this leader yet: nothing was acquired there through us.
                self._fail_acks(acks, ErrorCode.share_session_not_found, results)
                continue
            conn = self.cluster.connection(leader)
            v, m = conn.module(SHARE_ACKNOWLEDGE)
            if renew and v < 2:
                raise UnsupportedVersionError(
                    SHARE_ACKNOWLEDGE, (2, 2), conn.broker_versions.get(SHARE_ACKNOWLEDGE)
                )
            sent_epoch = session.epoch if epoch is None else epoch
            request = build_share_acknowledge(
                m,
                v,
                group_id=self.group_id,
                member_id=self.member_id,
                epoch=sent_epoch,
                acks=acks,
                renew=renew,
                release_delay_ms=release_delay_ms,
            )
            try:
                response = conn.send(request)
            except BrokerConnectionError:
                session.reset()
                self._fail_acks(acks, ErrorCode.network_exception, results)
                continue
            if response.error_code in _SESSION_ERRORS:
                session.reset()
            if response.error_code != ErrorCode.none:
                self._fail_acks(acks, response.error_code, results)
                continue
            if sent_epoch == FINAL_EPOCH:
                session.reset()
            else:
                session.acknowledged()
            for t in response.responses:
                topic = self.cluster.topic_name(t.topic_id)
                for p in t.partitions:
                    results[(topic, int(p.partition_index))] = p.error_code
        return results

    def _fail_acks(
        self, acks: dict[TopicIdPartition, Any], code: ErrorCode, results: AckResults | None = None
    ) -> None:
        out: AckResults = {(self.cluster.topic_name(tid), p): code for tid, p in acks}
        if results is not None:
            results.update(out)
        elif out and self.on_acknowledged is not None:
            self.on_acknowledged(out)

    # -- closing -----------------------------------------------------------------------------------

    def close(self, release: bool = False) -> AckResults:
        """Leave the group: send pending acknowledgements (and RELEASE every delivered, unacknowledged
        record if ``release``), heartbeat with epoch -1, then close the sessions (ShareAcknowledge -1)."""
        if self._closed:
            return {}
        results: AckResults = {}
        try:
            with self._lock:
                if release:
                    for tp, offsets in self._delivered.items():
                        for off in offsets:
                            self._pending.add(tp, off, off, AcknowledgeType.RELEASE)
                    self._delivered.clear()
                if self._pending:
                    with contextlib.suppress(KafkaError, ClientError):
                        results = self._send_acks(self._pending, renew=False)
            self.membership.stop(leave=True)
            with self._lock, contextlib.suppress(KafkaError, ClientError):
                self._send_acks(PendingAcks(), renew=False, epoch=FINAL_EPOCH)
        finally:
            self._closed = True
            self.cluster.close()
            self._hb_cluster.close()
        return results

    def _check_open(self) -> None:
        if self._closed:
            raise ClientError("share consumer is closed")

    def __enter__(self) -> ShareConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
