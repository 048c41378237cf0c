"""The engine's metric counters and the web view's strips, on plain objects (no broker)."""

from __future__ import annotations

import itertools
import uuid

from hypothesis import given
from hypothesis import strategies as st

from shareq.persister.memory import MemoryPersister
from shareq.server.monitor.figures import Run
from shareq.server.monitor.view import strip
from shareq.share import (
    AcknowledgementBatch,
    AcknowledgeType,
    PendingWrite,
    RecordState,
    ShareConfig,
    SharePartition,
)
from shareq.share.persister import SharePartitionKey
from shareq.share.stats import ACK_LATENCY_BOUNDS_MS

A = AcknowledgeType
KEY = SharePartitionKey(group_id="g", topic_id=uuid.UUID(int=5), partition=0)


class Engine:
    def __init__(self, config: ShareConfig) -> None:
        self.persister = MemoryPersister()
        self.sp = SharePartition(KEY, config)
        self.persist(self.sp.initialize(None, log_end_offset=0), 0)

    def persist(self, write: PendingWrite | None, now: int) -> None:
        if write is not None:
            self.persister.apply(write.params)
            for follow_up in self.sp.complete(write.handle, True, now).writes:
                self.persist(follow_up, now)

    def ack(self, first: int, last: int, ack: AcknowledgeType, now: int) -> None:
        batch = AcknowledgementBatch(first_offset=first, last_offset=last, types=(ack,))
        self.persist(self.sp.acknowledge("m", [batch], now=now).write, now)


def test_counters_follow_acks_expiry_and_redelivery() -> None:
    e = Engine(ShareConfig(record_lock_duration_ms=1_000, delivery_count_limit=5))
    stats = e.sp.stats
    e.sp.acquire("m", [(0, 9)], max_records=10, now=0)
    assert (stats.acquired, stats.redelivered) == (10, 0)
    e.ack(0, 3, A.ACCEPT, now=40)
    e.ack(4, 5, A.REJECT, now=40)
    e.ack(6, 7, A.RELEASE, now=40)
    assert stats.acknowledged[A.ACCEPT] == 4
    assert stats.acknowledged[A.REJECT] == 2
    assert stats.acknowledged[A.RELEASE] == 2
    assert (stats.archived, stats.released, stats.lock_expired) == (2, 2, 0)
    # held 40 ms: every acknowledged run lands in the 50 ms bucket
    assert stats.ack_latency_count == 3 and stats.ack_latency_sum_ms == 120
    assert stats.ack_latency_buckets[ACK_LATENCY_BOUNDS_MS.index(50)] == 3
    # 8..9 lapse; 6..9 come back as redeliveries, then lapse again
    e.persist(e.sp.expire(1_000), 1_000)
    assert (stats.lock_expired, stats.released) == (2, 4)
    e.sp.acquire("m", [(0, 9)], max_records=10, now=1_001)
    assert (stats.acquired, stats.redelivered) == (14, 4)
    e.persist(e.sp.expire(2_001), 2_001)
    assert (stats.lock_expired, stats.archived, stats.released) == (6, 2, 8)
    assert e.sp.spso == 6  # 0..3 accepted, 4..5 rejected: the rest is available again


def _run(first: int, last: int, state: RecordState, dc: int = 1) -> Run:
    return Run(first, last, state, dc, False)


def test_a_strip_is_one_segment_per_run_with_gaps_shown() -> None:
    runs = [_run(10, 14, RecordState.ACQUIRED), _run(18, 19, RecordState.AVAILABLE, 2)]
    assert strip(runs, 10, 20) == [
        {"first": 10, "last": 14, "state": "ACQUIRED", "dc": 1, "expiring": False},
        {"first": 15, "last": 17, "state": "UNKNOWN", "dc": 0, "expiring": False},
        {"first": 18, "last": 19, "state": "AVAILABLE", "dc": 2, "expiring": False},
    ]
    assert strip(runs, 20, 20) == []


@given(st.lists(st.tuples(st.integers(1, 50), st.sampled_from(list(RecordState))), min_size=1, max_size=400))
def test_a_fragmented_strip_is_sliced_and_covers_spso_to_speo(pieces: list[tuple[int, RecordState]]) -> None:
    runs: list[Run] = []
    offset = 100
    for size, state in pieces:
        runs.append(_run(offset, offset + size - 1, state))
        offset += size
    segments = strip(runs, 100, offset, max_segments=20)
    assert len(segments) <= max(20, len(runs))
    assert segments[0]["first"] == 100 and segments[-1]["last"] == offset - 1
    for before, after in itertools.pairwise(segments):
        assert after["first"] == before["last"] + 1  # contiguous, no overlap
    if len(runs) > 20:
        for segment in segments:  # each slice is coloured by the state holding most of its records
            counts = segment["counts"]
            assert sum(counts.values()) == segment["last"] - segment["first"] + 1
            assert counts[segment["state"]] == max(counts.values())
