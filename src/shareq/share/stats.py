"""What one share-partition has done since it was loaded: plain counters for metrics.

The engine bumps these on its own paths (a few integer additions per call, no allocation); the
metrics layer reads them at scrape time and sums them into monotonic totals. Gauges (records by
state, lag) are not kept here: they are computed from the in-flight runs when asked.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

from shareq.protocol.acknowledge_type import AcknowledgeType
from shareq.share.acquisition_lock import AcquisitionLock
from shareq.share.in_flight import InFlightBatch
from shareq.share.record_state import RecordState
from shareq.share.transition import TransitionKind
from shareq.share.types import AcquireResult

# Upper bounds (ms) of the acknowledgement-latency buckets: time from acquisition to acknowledgement.
ACK_LATENCY_BOUNDS_MS: tuple[int, ...] = (
    5,
    10,
    25,
    50,
    100,
    250,
    500,
    1_000,
    2_500,
    5_000,
    10_000,
    30_000,
    60_000,
)

_ARCHIVED = RecordState.ARCHIVED
_AVAILABLE = RecordState.AVAILABLE
_EXPIRE = TransitionKind.EXPIRE
_DEAD_LETTER = TransitionKind.DEAD_LETTER


class SharePartitionStats:
    """Monotonic counters of one share-partition (records, not requests, unless named so)."""

    __slots__ = (
        "ack_latency_buckets",
        "ack_latency_count",
        "ack_latency_sum_ms",
        "acknowledged",
        "acquired",
        "archived",
        "dead_lettered",
        "lock_expired",
        "redelivered",
        "released",
    )

    def __init__(self) -> None:
        self.acknowledged = [0] * len(AcknowledgeType)  # records, by acknowledge type
        self.acquired = 0  # records leased (first deliveries and redeliveries)
        self.redelivered = 0  # records leased with a delivery count above 1
        self.archived = 0  # records that became ARCHIVED (reject, gap, delivery limit, DLQ done)
        self.dead_lettered = 0  # records ARCHIVED after their dead-letter write
        self.lock_expired = 0  # records whose acquisition lock lapsed (committed release)
        self.released = 0  # records made AVAILABLE again (release, expiry, member gone)
        self.ack_latency_buckets = [0] * (len(ACK_LATENCY_BOUNDS_MS) + 1)  # last: +Inf
        self.ack_latency_count = 0
        self.ack_latency_sum_ms = 0

    def on_acquired(self, result: AcquireResult) -> None:
        self.acquired += result.acquired_count
        for r in result.records:
            if r.delivery_count > 1:
                self.redelivered += r.last_offset - r.first_offset + 1

    def on_acknowledged_runs(
        self, runs: Sequence[tuple[InFlightBatch, AcknowledgeType]], now: int, lock_ms: int
    ) -> None:
        """``runs`` acknowledged at ``now``, each with its type; a run's lock tells when it was
        leased (the deadline less the lock duration: a renewal counts from the renewal). Runs of
        one lock (the pieces of one acquisition a REJECT every tenth record cuts up) share one
        latency, looked up once."""
        counts = self.acknowledged
        buckets = self.ack_latency_buckets
        last_lock: object = None
        held_ms = bucket = n = 0
        for run, ack in runs:
            counts[ack] += run.last - run.first + 1
            lock = run.lock
            if lock is None:
                continue
            if lock is not last_lock:
                if n:
                    buckets[bucket] += n
                    self.ack_latency_count += n
                    self.ack_latency_sum_ms += held_ms * n
                last_lock = lock
                held_ms = max(now - lock.deadline + lock_ms, 0)
                bucket = bisect_left(ACK_LATENCY_BOUNDS_MS, held_ms)
                n = 0
            n += 1
        if n:
            buckets[bucket] += n
            self.ack_latency_count += n
            self.ack_latency_sum_ms += held_ms * n

    def on_lock_acknowledged(self, lock: AcquisitionLock, pieces: int, now: int, lock_ms: int) -> None:
        """``pieces`` acknowledged runs of one lock at ``now`` (a run acknowledged with a type per
        record counts a sample per equal-type segment, as the runs cut from it would)."""
        held_ms = max(now - lock.deadline + lock_ms, 0)
        self.ack_latency_buckets[bisect_left(ACK_LATENCY_BOUNDS_MS, held_ms)] += pieces
        self.ack_latency_count += pieces
        self.ack_latency_sum_ms += held_ms * pieces

    def on_committed(self, kind: TransitionKind, target: RecordState, records: int) -> None:
        """A durable transition of ``records`` to ``target`` committed."""
        if target is _ARCHIVED:
            self.archived += records
            if kind is _DEAD_LETTER:
                self.dead_lettered += records
        elif target is _AVAILABLE:
            self.released += records
        if kind is _EXPIRE:
            self.lock_expired += records
