"""Redelivery backoff and the count window in the engine: due times, acquisition skipping records not
yet due, next_deadline, equal runs staying one, the delivery limit winning, the window modes."""

from __future__ import annotations

import uuid

from shareq.persister.memory import MemoryPersister
from shareq.share import AcknowledgementBatch, AcknowledgeType, PendingWrite, ShareConfig, SharePartition
from shareq.share.backoff import RedeliveryBackoff, Trigger
from shareq.share.persister import SharePartitionKey

KEY = SharePartitionKey(group_id="g", topic_id=uuid.UUID(int=7), partition=0)
A = AcknowledgeType
NO_JITTER = RedeliveryBackoff(base_ms=1_000, multiplier=2.0, max_ms=60_000, jitter=0.0)


class Harness:
    def __init__(self, config: ShareConfig) -> None:
        self.persister = MemoryPersister()
        self.sp = SharePartition(KEY, config)
        self.persist(self.sp.initialize(None, log_end_offset=0), 0)

    def persist(self, write: PendingWrite | None, now: int) -> None:
        if write is None:
            return
        self.persister.apply(write.params)
        for follow_up in self.sp.complete(write.handle, True, now).writes:
            self.persist(follow_up, now)

    def acquire(self, batches: list[tuple[int, int]], now: int, n: int = 500, member: str = "c") -> list:
        result = self.sp.acquire(member, batches, max_records=n, now=now)
        self.persist(result.write, now)
        return [(r.first_offset, r.last_offset, r.delivery_count) for r in result.records]

    def ack(self, first: int, last: int, ack: AcknowledgeType, now: int, member: str = "c") -> None:
        batch = AcknowledgementBatch(first_offset=first, last_offset=last, types=(ack,))
        self.persist(self.sp.acknowledge(member, [batch], now=now).write, now)


def test_released_record_waits_for_its_due_time_then_comes_back() -> None:
    h = Harness(ShareConfig(backoff=NO_JITTER))
    assert h.acquire([(0, 9)], now=0) == [(0, 9, 1)]
    h.ack(0, 0, A.RELEASE, now=10)
    h.ack(1, 9, A.ACCEPT, now=10)
    assert h.sp.next_deadline() == 10 + 1_000
    assert h.sp.delayed() == (1, 1_010)
    assert h.acquire([(0, 9)], now=1_009) == []
    assert h.acquire([(0, 9)], now=1_010) == [(0, 0, 2)]
    h.ack(0, 0, A.RELEASE, now=2_000)
    assert h.sp.next_deadline() == 2_000 + 2_000  # multiplied by the delivery count
    assert h.acquire([(0, 9)], now=3_999) == []
    assert h.acquire([(0, 9)], now=4_000) == [(0, 0, 3)]


def test_delayed_head_does_not_block_later_records() -> None:
    h = Harness(ShareConfig(backoff=NO_JITTER))
    assert h.acquire([(0, 9)], now=0) == [(0, 9, 1)]
    h.ack(0, 9, A.RELEASE, now=0)
    assert h.sp.range_count() == 1  # one release, one due time: one run
    assert h.acquire([(0, 9), (10, 19)], now=5) == [(10, 19, 1)]


def test_delay_grows_to_the_maximum_and_the_limit_archives_at_once() -> None:
    backoff = RedeliveryBackoff(base_ms=100, multiplier=10.0, max_ms=500, jitter=0.0)
    h = Harness(ShareConfig(backoff=backoff, delivery_count_limit=3))
    now = 0
    assert h.acquire([(0, 0)], now=now) == [(0, 0, 1)]
    h.ack(0, 0, A.RELEASE, now=now)
    assert h.sp.next_deadline() == 100
    now = 100
    assert h.acquire([(0, 0)], now=now) == [(0, 0, 2)]
    h.ack(0, 0, A.RELEASE, now=now)
    assert h.sp.next_deadline() == now + 500  # 1,000 capped by the maximum
    now += 500
    assert h.acquire([(0, 0)], now=now) == [(0, 0, 3)]
    h.ack(0, 0, A.RELEASE, now=now)  # the delivery limit: archived, no delay
    assert h.sp.next_deadline() is None
    assert h.sp.spso == 1


def test_lock_expiry_and_member_release_delay_only_when_their_trigger_is_on() -> None:
    backoff = RedeliveryBackoff(base_ms=1_000, jitter=0.0, on=frozenset({Trigger.TIMEOUT}))
    h = Harness(ShareConfig(backoff=backoff, record_lock_duration_ms=100))
    assert h.acquire([(0, 4)], now=0, member="a") == [(0, 4, 1)]
    h.persist(h.sp.expire(100), 100)
    assert h.sp.next_deadline() == 1_100
    assert h.acquire([(0, 4)], now=1_099, member="b") == []
    assert h.acquire([(0, 4)], now=1_100, member="b") == [(0, 4, 2)]
    h.persist(h.sp.release_member("b", 1_200), 1_200)  # leave is not a trigger here: at once
    assert h.acquire([(0, 4)], now=1_200, member="c") == [(0, 4, 3)]


def test_jitter_is_fixed_by_record_identity_and_bounded() -> None:
    backoff = RedeliveryBackoff(base_ms=10_000, jitter=0.2)
    delays = {backoff.delay(KEY, offset, 1) for offset in range(200)}
    assert len(delays) > 100
    assert all(8_000 <= d <= 12_000 for d in delays)
    assert backoff.delay(KEY, 5, 1) == backoff.delay(KEY, 5, 1)


def test_no_backoff_is_kafkas_immediate_redelivery() -> None:
    h = Harness(ShareConfig())
    assert h.acquire([(0, 9)], now=0) == [(0, 9, 1)]
    h.ack(0, 0, A.RELEASE, now=0)
    assert h.sp.next_deadline() == 30_000  # only the lock of 1..9
    assert h.acquire([(0, 9)], now=0) == [(0, 0, 2)]


def _window_run(config: ShareConfig) -> int:
    """Release offset 0 with a long delay, then consume 1,000 more ten at a time: how many got through."""
    h = Harness(config)
    assert h.acquire([(0, 0)], now=0) == [(0, 0, 1)]
    h.ack(0, 0, A.RELEASE, now=0)
    consumed = 0
    for first in range(1, 1_001, 10):
        got = h.acquire([(first, first + 9)], now=1, n=10)
        for a, b, _ in got:
            h.ack(a, b, A.ACCEPT, now=1)
            consumed += b - a + 1
    return consumed


def test_count_window_passes_a_delayed_head_the_span_window_stalls() -> None:
    backoff = RedeliveryBackoff(base_ms=60_000, jitter=0.0)
    assert _window_run(ShareConfig(backoff=backoff, max_record_locks=100, window_count=True)) == 1_000
    assert _window_run(ShareConfig(backoff=backoff, max_record_locks=100)) == 100  # the window, then stalled


def test_count_window_counts_records_in_play() -> None:
    h = Harness(ShareConfig(max_record_locks=100, window_count=True))
    assert h.acquire([(0, 149)], now=0, n=150) == [(0, 149, 1)]  # a batch runs to its end
    assert h.acquire([(150, 199)], now=0) == []  # 150 in play: no room
    h.ack(0, 99, A.ACCEPT, now=0)
    assert h.acquire([(150, 199)], now=0) == [(150, 199, 1)]


def test_due_times_are_written_and_a_rebuilt_engine_honours_them() -> None:
    h = Harness(ShareConfig(backoff=NO_JITTER))
    assert h.acquire([(0, 9)], now=0) == [(0, 9, 1)]
    h.ack(0, 4, A.RELEASE, now=10)
    state = h.persister.state(KEY)
    assert state is not None and [tuple(d) for d in state.delays] == [(0, 4, 1_010)]
    rebuilt = SharePartition(KEY, h.sp.config)
    rebuilt.initialize(state)
    assert rebuilt.next_deadline() == 1_010
    fresh = rebuilt.acquire("c", [(0, 9)], max_records=500, now=1_009).records  # 5..9: a lease lost
    assert [(r.first_offset, r.last_offset, r.delivery_count) for r in fresh] == [(5, 9, 1)]
    got = rebuilt.acquire("c", [(0, 9)], max_records=500, now=1_010).records
    assert [(r.first_offset, r.last_offset, r.delivery_count) for r in got] == [(0, 4, 2)]
    h.ack(5, 9, A.ACCEPT, now=20)
    h.acquire([(0, 9)], now=2_000)
    h.ack(0, 4, A.ACCEPT, now=2_000)  # acknowledged: the due time is gone with the records
    state = h.persister.state(KEY)
    assert state is not None and state.delays == () and state.start_offset == 10


def test_a_delay_the_client_asks_for_is_used_and_capped() -> None:
    h = Harness(ShareConfig(delay_ceiling_ms=5_000))  # no group backoff
    assert h.acquire([(0, 9)], now=0) == [(0, 9, 1)]
    batches = [
        AcknowledgementBatch(first_offset=0, last_offset=1, types=(A.RELEASE,)),
        AcknowledgementBatch(first_offset=2, last_offset=3, types=(A.RELEASE,)),
        AcknowledgementBatch(first_offset=4, last_offset=9, types=(A.ACCEPT,)),
    ]
    write = h.sp.acknowledge("c", batches, now=100, release_delays=[(0, 1, 700), (2, 3, 10**9)]).write
    h.persist(write, 100)
    assert h.acquire([(0, 9)], now=799) == []
    assert h.acquire([(0, 9)], now=800) == [(0, 1, 2)]
    assert h.acquire([(0, 9)], now=5_099) == []
    assert h.acquire([(0, 9)], now=5_100) == [(2, 3, 2)]  # capped at the ceiling
