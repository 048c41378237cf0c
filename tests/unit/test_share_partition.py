"""SharePartition unit tests: acquire, acknowledge, locks, persist-before-commit, isolation, init."""

from __future__ import annotations

import uuid

import pytest

from shareq.persister.memory import MemoryPersister
from shareq.share import (
    AcknowledgementBatch,
    AcknowledgeType,
    AcquireMode,
    IllegalStateTransition,
    InvalidRecordState,
    InvalidRequest,
    PendingWrite,
    RecordState,
    ResetPolicy,
    ShareConfig,
    ShareEngineBug,
    SharePartition,
    parse_acknowledge_types,
)
from shareq.share.persister import NO_START_OFFSET, SharePartitionKey, ShareState, StateBatch, state_batch

KEY = SharePartitionKey(group_id="g", topic_id=uuid.UUID(int=3), partition=0)
A = AcknowledgeType
S = RecordState


class Harness:
    """An engine plus the in-memory persister, completing writes as a shell would."""

    def __init__(self, config: ShareConfig | None = None, *, start: int = 0, state: ShareState | None = None):
        self.persister = MemoryPersister()
        self.sp = SharePartition(KEY, config)
        self.persist(self.sp.initialize(state, log_end_offset=start), 0)

    def persist(self, write: PendingWrite | None, now: int, ok: bool = True) -> None:
        if write is None:
            return
        if ok:
            self.persister.apply(write.params)
        result = self.sp.complete(write.handle, ok, now)
        for follow_up in result.writes:
            self.persist(follow_up, now)

    def acquire(
        self, member: str, batches: list[tuple[int, int]], n: int, now: int = 0, **kw: object
    ) -> list:
        result = self.sp.acquire(member, batches, max_records=n, now=now, **kw)  # type: ignore[arg-type]
        self.persist(result.write, now)
        return [(r.first_offset, r.last_offset, r.delivery_count) for r in result.records]

    def ack(self, member: str, first: int, last: int, *types: AcknowledgeType, now: int = 0) -> None:
        batch = AcknowledgementBatch(first_offset=first, last_offset=last, types=tuple(types))
        self.persist(self.sp.acknowledge(member, [batch], now=now).write, now)

    def runs(self) -> list[tuple[int, int, str, int, str | None]]:
        return [
            (r.first_offset, r.last_offset, r.state.name, r.delivery_count, r.member) for r in self.sp.runs()
        ]

    def rebuilt(self) -> SharePartition:
        sp = SharePartition(KEY, self.sp.config)
        sp.initialize(self.persister.state(KEY))
        return sp


def ab(first: int, last: int, *types: AcknowledgeType) -> AcknowledgementBatch:
    return AcknowledgementBatch(first_offset=first, last_offset=last, types=tuple(types))


def test_whole_batch_acquire_and_accept_moves_spso_and_drops_the_batch() -> None:
    h = Harness(start=100)
    assert h.acquire("c1", [(100, 149)], 500) == [(100, 149, 1)]
    assert h.sp.range_count() == 1
    write = h.sp.acknowledge("c1", [ab(100, 149, A.ACCEPT)], now=1).write
    assert write is not None
    assert write.params.start_offset == 150
    # the ACKNOWLEDGED batch lies below the start offset this very record moves to: the record
    # would prune it on replay, so it is not written at all
    assert write.params.state_batches == ()
    assert h.sp.spso == 100, "nothing commits before the write completes"
    h.persist(write, 1)
    assert (h.sp.spso, h.sp.end_offset, h.sp.range_count(), h.sp.delivery_complete_count) == (150, 150, 0, 0)
    assert h.rebuilt().spso == 150


def test_a_write_leaves_out_the_state_below_the_start_offset_it_moves_to() -> None:
    """Interleaved ACCEPTs and REJECTs (no dead-letter queue): the runs the start offset passes
    are not written, the runs still in flight above it are; a rebuild sees the same thing."""
    h = Harness()
    h.acquire("c1", [(0, 19)], 20)
    h.acquire("c2", [(20, 29)], 10)
    types = [A.REJECT if i % 5 == 0 else A.ACCEPT for i in range(10)]
    # above records still acquired: nothing moves, every delta is written
    write = h.sp.acknowledge("c2", [ab(20, 29, *types)], now=1).write
    assert write is not None
    assert write.params.start_offset == NO_START_OFFSET
    assert [(b.first_offset, b.last_offset, b.delivery_state) for b in write.params.state_batches] == [
        (20, 20, 4),
        (21, 24, 2),
        (25, 25, 4),
        (26, 29, 2),
    ]
    h.persist(write, 1)
    # at the start offset, stopping at records still acquired: only what lies above is written
    write = h.sp.acknowledge("c1", [ab(0, 9, *types)], now=2).write
    assert write is not None
    assert (write.params.start_offset, write.params.state_batches) == (10, ())
    h.persist(write, 2)
    assert h.runs()[0] == (10, 19, "ACQUIRED", 1, "c1")
    write = h.sp.acknowledge("c1", [ab(10, 19, *types)], now=3).write
    assert write is not None
    assert (write.params.start_offset, write.params.state_batches) == (30, ())
    h.persist(write, 3)
    rebuilt = h.rebuilt()
    assert (h.sp.spso, rebuilt.spso, rebuilt.range_count()) == (30, 30, 0)


def test_partial_acknowledgement_splits_then_merges_back() -> None:
    h = Harness()
    h.acquire("c1", [(0, 9)], 10)
    h.ack("c1", 3, 5, A.RENEW, now=1)
    assert h.runs() == [(0, 9, "ACQUIRED", 1, "c1")]
    assert h.sp.range_count() == 3, "renewed records carry their own lock"
    h.ack("c1", 2, 4, A.ACCEPT, A.REJECT, A.RELEASE)
    assert h.runs() == [
        (0, 1, "ACQUIRED", 1, "c1"),
        (2, 2, "ACKNOWLEDGED", 1, None),
        (3, 3, "ARCHIVED", 1, None),
        (4, 4, "AVAILABLE", 1, None),
        (5, 9, "ACQUIRED", 1, "c1"),
    ]
    assert h.sp.delivery_complete_count == 2
    h.ack("c1", 0, 1, A.ACCEPT)
    assert h.sp.spso == 4
    assert h.acquire("c2", [(0, 9)], 1) == [(4, 4, 2)]
    h.ack("c2", 4, 4, A.ACCEPT)
    h.ack("c1", 5, 9, A.ACCEPT)
    assert (h.sp.spso, h.sp.range_count()) == (10, 0)


@pytest.mark.parametrize(
    ("batches", "error"),
    [
        ([ab(0, 4, A.ACCEPT)], InvalidRecordState),  # held by c1, not c2
        ([ab(20, 20, A.ACCEPT)], InvalidRequest),  # past the end
        ([ab(5, 3, A.ACCEPT)], InvalidRequest),  # backwards
        ([ab(0, 2, A.ACCEPT), ab(1, 3, A.ACCEPT)], InvalidRequest),  # overlapping
        # one offset ends a batch and starts the next: the record is acknowledged twice, which
        # Kafka finds in the record's state, not in the request's shape
        ([ab(0, 1, A.ACCEPT), ab(1, 2, A.ACCEPT)], InvalidRecordState),
        ([ab(2, 3, A.ACCEPT), ab(0, 1, A.ACCEPT)], InvalidRequest),  # out of order
        ([ab(0, 3, A.ACCEPT, A.ACCEPT)], InvalidRequest),  # wrong number of types
    ],
)
def test_acknowledge_validation(batches: list[AcknowledgementBatch], error: type[Exception]) -> None:
    h = Harness()
    h.acquire("c1", [(0, 9)], 10)
    h.acquire("c2", [(10, 14)], 5)
    member = (
        "c2" if batches[0].first_offset == 0 and len(batches) == 1 and batches[0].last_offset == 4 else "c1"
    )
    before = h.runs()
    with pytest.raises(error) as info:
        h.sp.acknowledge(member, batches, now=0)
    assert info.value.error_name in ("INVALID_RECORD_STATE", "INVALID_REQUEST")  # type: ignore[attr-defined]
    assert h.runs() == before
    assert h.sp.pending_count() == 0


def test_request_is_all_or_nothing_and_below_spso_is_skipped() -> None:
    h = Harness()
    h.acquire("c1", [(0, 9)], 10)
    h.ack("c1", 0, 1, A.ACCEPT)
    h.acquire("c2", [(10, 11)], 2)
    before = h.runs()
    with pytest.raises(InvalidRecordState):
        h.sp.acknowledge("c1", [ab(4, 5, A.ACCEPT), ab(10, 10, A.ACCEPT)], now=0)
    with pytest.raises(InvalidRequest):
        h.sp.acknowledge("c1", [ab(4, 5, A.ACCEPT), ab(7, 8, A.RELEASE), ab(12, 12, A.ACCEPT)], now=0)
    assert h.runs() == before
    assert h.sp.pending_count() == 0
    # 0..1 are below the SPSO (already accepted): skipped, as Kafka skips them; 2..3 apply
    assert h.sp.acknowledge("c1", [ab(0, 1, A.ACCEPT)], now=0).write is None
    assert h.runs() == before
    h.ack("c1", 0, 3, A.ACCEPT)
    assert h.sp.spso == 4
    # a batch with a type per offset loses the types of the offsets it had below the SPSO
    h.ack("c1", 2, 5, A.ACCEPT, A.ACCEPT, A.REJECT, A.RELEASE)
    assert h.sp.spso == 5, "4 was rejected (the third type), not accepted"
    assert h.runs()[0] == (5, 5, "AVAILABLE", 1, None)
    # c1's acquisition (0..9) no longer holds the record at the SPSO: below it is not in flight
    with pytest.raises(InvalidRecordState):
        h.sp.acknowledge("c1", [ab(0, 1, A.ACCEPT)], now=0)
    h.ack("c1", 6, 9, A.ACCEPT)
    assert h.runs()[0] == (5, 5, "AVAILABLE", 1, None)
    h.acquire("c2", [(5, 5)], 1)
    h.ack("c2", 5, 5, A.ACCEPT)
    assert h.sp.spso == 10, "c2's own acquisition of 10..11 holds the SPSO"
    h.ack("c2", 8, 10, A.ACCEPT)  # reaches the SPSO: the part below is skipped
    with pytest.raises(InvalidRecordState):
        h.sp.acknowledge("c2", [ab(5, 5, A.ACCEPT)], now=0)  # its acquisition of 5 is done
    assert h.sp.spso == 11
    # 10 is below the SPSO but in the acquisition that still holds 11: skipped
    assert h.sp.acknowledge("c2", [ab(10, 10, A.ACCEPT)], now=0).write is None


def test_renew_refused_when_the_group_turns_it_off() -> None:
    """share.renew.acknowledge.enable=false: a RENEW is INVALID_RECORD_STATE and changes nothing."""
    h = Harness(ShareConfig(renew_enabled=False))
    h.acquire("c1", [(0, 9)], 10)
    before = h.runs()
    with pytest.raises(InvalidRecordState):
        h.sp.acknowledge("c1", [ab(0, 1, A.ACCEPT), ab(2, 3, A.RENEW)], now=0)
    assert h.runs() == before
    h.sp.alter_config(ShareConfig(renew_enabled=True))
    assert h.sp.acknowledge("c1", [ab(2, 3, A.RENEW)], now=0).write is None


def test_second_acknowledgement_while_the_first_is_persisting_is_refused() -> None:
    h = Harness()
    h.acquire("c1", [(0, 9)], 10)
    first = h.sp.acknowledge("c1", [ab(0, 4, A.ACCEPT)], now=0).write
    assert first is not None
    with pytest.raises(InvalidRecordState):
        h.sp.acknowledge("c1", [ab(4, 5, A.REJECT)], now=0)
    expiry = h.sp.expire(10**9)  # the lock lapses: only 5..9 are released, 0..4 are mid-transition
    assert expiry is not None
    assert expiry.params.state_batches == (
        StateBatch(first_offset=5, last_offset=9, delivery_state=0, delivery_count=1),
    )
    h.persist(first, 10**9)
    h.persist(expiry, 10**9)
    assert h.sp.spso == 5
    assert h.runs() == [(5, 9, "AVAILABLE", 1, None)]


def test_failed_write_rolls_back_to_acquired() -> None:
    h = Harness()
    h.acquire("c1", [(0, 9)], 10)
    write = h.sp.acknowledge("c1", [ab(0, 9, A.ACCEPT)], now=5).write
    assert write is not None
    result = h.sp.complete(write.handle, False, 5)
    assert not result.committed and not result.writes
    assert h.runs() == [(0, 9, "ACQUIRED", 1, "c1")]
    assert h.sp.range_count() == 1
    h.ack("c1", 0, 9, A.ACCEPT, now=6)
    assert h.sp.spso == 10


def test_failed_write_after_the_lock_lapsed_releases_the_records() -> None:
    h = Harness(ShareConfig(record_lock_duration_ms=1_000, delivery_count_limit=2))
    h.acquire("c1", [(0, 4)], 10, now=0)
    h.ack("c1", 0, 1, A.RELEASE, now=1)
    h.acquire("c2", [(0, 4)], 10, now=2)  # 0..1 second delivery (the last one)
    assert h.runs()[0] == (0, 0, "ACQUIRED", 2, "c2")
    write = h.sp.acknowledge("c2", [ab(0, 0, A.ACCEPT)], now=500).write
    assert write is not None
    result = h.sp.complete(write.handle, False, 1_500)
    assert len(result.writes) == 1, "the lapsed lock's release must itself be persisted"
    h.persist(result.writes[0], 1_500)
    assert h.sp.spso == 1, "out of deliveries: 0 is archived, not made available"
    assert h.runs()[0] == (1, 1, "AVAILABLE", 1, None), "1 waits: the last attempt of 0 went alone"
    assert h.rebuilt().spso == 1


def test_lock_expiry_releases_at_the_deadline_and_is_persisted() -> None:
    h = Harness(ShareConfig(record_lock_duration_ms=30_000))
    h.acquire("c1", [(0, 4)], 10, now=2)
    h.acquire("c2", [(5, 9)], 10, now=5_000)
    assert h.sp.next_deadline() == 30_002
    assert h.sp.expire(30_001) is None
    write = h.sp.expire(30_002)
    assert write is not None
    assert write.params.state_batches == (
        StateBatch(first_offset=0, last_offset=4, delivery_state=0, delivery_count=1),
    )
    h.persist(write, 30_002)
    assert h.runs() == [(0, 4, "AVAILABLE", 1, None), (5, 9, "ACQUIRED", 1, "c2")]
    assert h.sp.next_deadline() == 35_000
    assert h.sp.next_fetch_offset() == 0


def test_acknowledged_records_do_not_keep_a_deadline() -> None:
    h = Harness()
    h.acquire("c1", [(0, 4)], 10, now=0)
    h.ack("c1", 0, 4, A.ACCEPT)
    assert h.sp.next_deadline() is None
    assert h.sp.expire(10**9) is None


def test_failed_expiry_is_retried_after_the_backoff() -> None:
    h = Harness(ShareConfig(record_lock_duration_ms=1_000, persist_retry_backoff_ms=200))
    h.acquire("c1", [(0, 4)], 10, now=0)
    write = h.sp.expire(1_000)
    assert write is not None
    h.persist(write, 1_000, ok=False)
    assert h.runs() == [(0, 4, "ACQUIRED", 1, "c1")]
    assert h.sp.next_deadline() == 1_200
    h.persist(h.sp.expire(1_200), 1_200)
    assert h.runs() == [(0, 4, "AVAILABLE", 1, None)]


def test_diversion_to_archived_and_to_archiving_with_a_dlq() -> None:
    for dlq, final in ((False, "ARCHIVED"), (True, "ARCHIVING")):
        h = Harness(ShareConfig(delivery_count_limit=2, dlq_enabled=dlq))
        h.acquire("c1", [(0, 0)], 1)
        h.ack("c1", 0, 0, A.RELEASE)
        assert h.acquire("c1", [(0, 0)], 1) == [(0, 0, 2)]
        h.ack("c1", 0, 0, A.RELEASE)
        assert h.runs() == ([] if final == "ARCHIVED" else [(0, 0, "ARCHIVING", 2, None)])
        assert h.sp.spso == (1 if final == "ARCHIVED" else 0), "ARCHIVING is not terminal"


def test_dead_lettered_records_become_archived_and_free_the_spso() -> None:
    h = Harness(ShareConfig(delivery_count_limit=2, dlq_enabled=True))
    h.acquire("c1", [(0, 3)], 4)
    h.ack("c1", 0, 3, A.RELEASE)
    for offset in range(4):  # last attempts are delivered one at a time
        assert h.acquire("c1", [(0, 3)], 4) == [(offset, offset, 2)]
        h.ack("c1", offset, offset, A.RELEASE)
    assert [(v.first_offset, v.last_offset) for v in h.sp.archiving_runs()] == [(0, 3)]
    assert h.rebuilt().runs()[0].state is S.ARCHIVING, "ARCHIVING is durable, so the hand-off resumes"
    h.persist(h.sp.dead_lettered(0, 1), 0)
    assert h.sp.spso == 2
    h.persist(h.sp.dead_lettered(2, 3), 0)
    assert (h.sp.spso, h.runs()) == (4, [])
    assert h.sp.dead_lettered(0, 3) is None


def test_dead_lettered_spans_archive_only_the_archiving_records_named() -> None:
    h = Harness(ShareConfig(dlq_enabled=True))
    h.acquire("c1", [(0, 9)], 10)
    kinds = [A.REJECT if o % 3 == 0 else A.ACCEPT for o in range(10)]
    h.ack("c1", 0, 9, *kinds)  # REJECTs at 0, 3, 6, 9
    spans = [(v.first_offset, v.last_offset) for v in h.sp.archiving_runs()]
    assert spans == [(0, 0), (3, 3), (6, 6), (9, 9)]
    # a span may also cover acknowledged records or part of a run: only ARCHIVING ones move
    h.persist(h.sp.dead_lettered_spans([(0, 0), (2, 4)]), 0)
    assert [(v.first_offset, v.last_offset) for v in h.sp.archiving_runs()] == [(6, 6), (9, 9)]
    assert h.sp.spso == 6
    assert h.sp.dead_lettered_spans([(0, 5)]) is None, "nothing ARCHIVING left there"
    h.persist(h.sp.dead_lettered_spans([(6, 6), (9, 9)]), 0)
    assert (h.sp.spso, h.runs(), h.sp.archiving_count()) == (10, [], 0)
    assert h.rebuilt().runs() == (), "ARCHIVED is what was persisted"


def test_an_interleaved_acknowledgement_keeps_one_run_with_a_state_per_record() -> None:
    h = Harness(ShareConfig(dlq_enabled=True))
    h.acquire("c1", [(0, 19)], 20)
    kinds = [A.REJECT if o % 5 == 2 else A.GAP if o == 10 else A.ACCEPT for o in range(20)]
    write = h.sp.acknowledge("c1", [ab(0, 19, *kinds)], now=0).write
    assert write is not None
    # the write moves the start offset to the first ARCHIVING record (a REJECT with a DLQ) and
    # carries each equal-state stretch from there: ARCHIVING, ACKNOWLEDGED, ARCHIVED (the GAP)
    assert write.params.start_offset == 2
    assert [(b.first_offset, b.last_offset, b.delivery_state) for b in write.params.state_batches] == [
        (2, 2, 3),
        (3, 6, 2),
        (7, 7, 3),
        (8, 9, 2),
        (10, 10, 4),
        (11, 11, 2),
        (12, 12, 3),
        (13, 16, 2),
        (17, 17, 3),
        (18, 19, 2),
    ]
    h.persist(write, 0)
    assert h.sp.range_count() == 1, "one run, not one per segment"
    # the SPSO passes the accepted records before the first ARCHIVING one, inside the run
    assert (h.sp.spso, h.sp.delivery_complete_count, h.sp.archiving_count()) == (2, 14, 4)
    assert h.runs()[:3] == [
        (2, 2, "ARCHIVING", 1, None),
        (3, 6, "ACKNOWLEDGED", 1, None),
        (7, 7, "ARCHIVING", 1, None),
    ]
    assert h.rebuilt().runs() == h.sp.runs(), "what is in flight is what was persisted"
    assert h.sp.archiving_spans(2) == [(2, 2, 1), (7, 7, 1)]
    h.persist(h.sp.dead_lettered_spans([(2, 2), (7, 7)]), 0)
    assert (h.sp.spso, h.sp.delivery_complete_count, h.sp.range_count()) == (12, 6, 1)
    assert h.sp.stats.dead_lettered == 2
    assert h.rebuilt().runs() == h.sp.runs()
    h.persist(h.sp.dead_lettered_spans([(v.first_offset, v.last_offset) for v in h.sp.archiving_runs()]), 0)
    assert (h.sp.spso, h.sp.range_count(), h.sp.delivery_complete_count) == (20, 0, 0)
    assert h.sp.stats.acknowledged[A.ACCEPT] == 15 and h.sp.stats.dead_lettered == 4


def test_a_dead_letter_write_leaves_out_the_deltas_below_the_start_offset_it_moves_to() -> None:
    h = Harness(ShareConfig(dlq_enabled=True))
    h.acquire("c1", [(0, 9)], 10)
    h.ack("c1", 0, 6, A.REJECT, A.ACCEPT, A.REJECT, A.ACCEPT, A.ACCEPT, A.ACCEPT, A.REJECT)  # 7..9 held
    assert [(v.first_offset, v.last_offset) for v in h.sp.archiving_runs()] == [(0, 0), (2, 2), (6, 6)]
    write = h.sp.dead_lettered_spans([(0, 0), (2, 2), (6, 6)])
    assert write is not None
    # the write moves the start offset to 7, which drops the state below it: no delta is needed
    assert (write.params.start_offset, write.params.state_batches) == (7, ())
    h.persist(write, 0)
    assert (h.sp.spso, h.rebuilt().spso) == (7, 7)
    assert h.sp.stats.dead_lettered == 3
    # a dead letter above a record still held keeps its delta (the start offset stays)
    h.ack("c1", 8, 9, A.REJECT, A.ACCEPT)
    write = h.sp.dead_lettered_spans([(8, 8)])
    assert write is not None
    assert (write.params.start_offset, write.params.state_batches) == (
        NO_START_OFFSET,
        (StateBatch(first_offset=8, last_offset=8, delivery_state=4, delivery_count=1),),
    )
    h.persist(write, 0)
    assert [(r.first_offset, r.last_offset, r.state) for r in h.rebuilt().runs()] == [
        (8, 8, S.ARCHIVED),
        (9, 9, S.ACKNOWLEDGED),
    ]


def test_reject_goes_archiving_with_a_dlq_and_archived_without() -> None:
    for dlq, state in ((False, None), (True, "ARCHIVING")):
        h = Harness(ShareConfig(dlq_enabled=dlq))
        h.acquire("c1", [(0, 2)], 3)
        h.ack("c1", 0, 2, A.ACCEPT, A.REJECT, A.ACCEPT)
        assert h.runs() == (
            [] if state is None else [(1, 1, state, 1, None), (2, 2, "ACKNOWLEDGED", 1, None)]
        )
        assert h.sp.spso == (3 if state is None else 1)
        assert h.sp.archiving_count() == (0 if state is None else 1)


def test_a_write_making_records_archiving_says_so() -> None:
    h = Harness(ShareConfig(dlq_enabled=True))
    h.acquire("c1", [(0, 1)], 2)
    write = h.sp.acknowledge("c1", [ab(0, 1, A.REJECT)], now=0).write
    assert write is not None and [b.delivery_state for b in write.params.state_batches] == [3]
    assert h.sp.archiving_runs() == (), "not before the write is durable"
    assert h.sp.complete(write.handle, True, 0).archiving
    assert h.sp.archiving_count() == 2


def test_renew_restarts_the_lock_without_a_write() -> None:
    h = Harness(ShareConfig(record_lock_duration_ms=1_000))
    h.acquire("c1", [(0, 9)], 10, now=0)
    result = h.sp.acknowledge("c1", [ab(0, 4, A.RENEW)], now=900)
    assert result.write is None
    h.persist(h.sp.expire(1_000), 1_000)
    assert h.runs() == [(0, 4, "ACQUIRED", 1, "c1"), (5, 9, "AVAILABLE", 1, None)]
    assert h.sp.next_deadline() == 1_900


def test_member_leave_releases_only_that_members_records() -> None:
    h = Harness()
    h.acquire("c1", [(0, 4)], 5)
    h.acquire("c2", [(5, 9)], 5)
    h.acquire("c1", [(10, 14)], 5)
    h.persist(h.sp.release_member("c1", 1), 1)
    assert h.runs() == [
        (0, 4, "AVAILABLE", 1, None),
        (5, 9, "ACQUIRED", 1, "c2"),
        (10, 14, "AVAILABLE", 1, None),
    ]
    assert h.sp.release_member("c1", 2) is None
    assert h.sp.next_deadline() == 30_000


def redeliver(h: Harness, times: int, batch: tuple[int, int]) -> None:
    for _ in range(times):
        h.acquire("c1", [batch], 100)
        h.persist(h.sp.release_member("c1", 0), 0)


def test_last_delivery_attempt_is_delivered_alone() -> None:
    h = Harness(ShareConfig(delivery_count_limit=5))
    redeliver(h, 4, (0, 9))
    assert h.acquire("c1", [(0, 9)], 100) == [(0, 0, 5)]
    assert h.acquire("c2", [(0, 9)], 100) == [(1, 1, 5)]


def test_records_past_the_threshold_come_in_halving_batches() -> None:
    h = Harness(ShareConfig(delivery_count_limit=10))  # threshold max(2, 5) = 5
    redeliver(h, 5, (0, 99))
    assert h.acquire("c1", [(0, 99)], 40, mode=AcquireMode.BATCH_OPTIMIZED) == [(0, 19, 6)]
    h.persist(h.sp.release_member("c1", 0), 0)
    assert h.acquire("c1", [(0, 99)], 40) == [(0, 9, 7)]


def test_window_cap_limits_first_time_acquisitions_only() -> None:
    h = Harness(ShareConfig(max_record_locks=10))
    assert h.acquire("c1", [(0, 4), (5, 9), (10, 14)], 100) == [(0, 9, 1)]
    assert h.acquire("c2", [(10, 14)], 100) == []
    h.persist(h.sp.release_member("c1", 0), 0)
    assert h.acquire("c2", [(0, 4), (5, 9), (10, 14)], 100) == [(0, 9, 2)]
    h.ack("c2", 0, 4, A.ACCEPT)
    assert h.acquire("c3", [(10, 14)], 100) == [(10, 14, 1)]


def test_record_limit_versus_batch_optimized() -> None:
    h = Harness()
    assert h.acquire("c1", [(0, 9), (10, 19)], 3, mode=AcquireMode.RECORD_LIMIT) == [(0, 2, 1)]
    assert h.acquire("c1", [(0, 9), (10, 19)], 3) == [(3, 9, 1)]
    got = h.acquire("c2", [(10, 14), (15, 19), (20, 24)], 12, batch_size=5)
    assert got == [(10, 14, 1), (15, 19, 1), (20, 24, 1)]


def test_init_from_persisted_state_with_gaps() -> None:
    state = ShareState(
        state_epoch=3,
        leader_epoch=0,
        start_offset=10,
        delivery_complete_count=1,
        state_batches=(
            StateBatch(first_offset=10, last_offset=10, delivery_state=0, delivery_count=2),
            StateBatch(first_offset=14, last_offset=14, delivery_state=2, delivery_count=1),
            StateBatch(first_offset=16, last_offset=17, delivery_state=4, delivery_count=5),
        ),
    )
    h = Harness(state=state)
    assert (h.sp.spso, h.sp.end_offset, h.sp.state_epoch, h.sp.delivery_complete_count) == (10, 18, 3, 3)
    assert h.sp.next_fetch_offset() == 10
    log = [(o, o) for o in range(10, 25)]
    assert h.acquire("c1", log, 100, mode=AcquireMode.RECORD_LIMIT) == [
        (10, 10, 3),
        (11, 13, 1),
        (15, 15, 1),
        (18, 24, 1),
    ]
    h.ack("c1", 10, 13, A.ACCEPT)
    assert h.sp.spso == 15, "the gap at 15 is in flight now; 14 is already acknowledged"
    h.ack("c1", 15, 15, A.ACCEPT)
    assert (h.sp.spso, h.sp.next_fetch_offset()) == (18, 25)


def test_gap_window_holds_the_spso_until_the_gap_is_resolved() -> None:
    state = ShareState(
        state_epoch=0,
        leader_epoch=0,
        start_offset=0,
        delivery_complete_count=0,
        state_batches=(StateBatch(first_offset=3, last_offset=3, delivery_state=2, delivery_count=1),),
    )
    h = Harness(state=state)
    assert (h.sp.spso, h.sp.next_fetch_offset()) == (0, 0)
    # The log no longer holds 0..2 (compacted): the next read starts at 3, which resolves the gap.
    assert h.acquire("c1", [(3, 3), (4, 6)], 10) == [(4, 6, 1)]
    h.ack("c1", 4, 6, A.ACCEPT)
    assert h.sp.spso == 7


def test_batches_that_vanished_from_the_log_are_archived() -> None:
    h = Harness()
    h.acquire("c1", [(0, 4), (5, 9), (10, 14)], 100)
    h.persist(h.sp.release_member("c1", 0), 0)
    result = h.sp.acquire("c2", [(0, 4), (10, 14)], max_records=100, now=1)  # 5..9 compacted away
    assert [(r.first_offset, r.last_offset) for r in result.records] == [(0, 4), (10, 14)]
    assert result.write is not None
    assert result.write.params.state_batches == (
        StateBatch(first_offset=5, last_offset=9, delivery_state=4, delivery_count=1),
    )
    h.persist(result.write, 1)
    h.ack("c2", 0, 4, A.ACCEPT, now=2)
    h.ack("c2", 10, 14, A.ACCEPT, now=2)
    assert h.sp.spso == 15


@pytest.mark.parametrize(
    ("reset", "lookup", "expected"),
    [
        (ResetPolicy.EARLIEST, None, 5),
        (ResetPolicy.LATEST, None, 50),
        (ResetPolicy.BY_DURATION, 20, 20),
        (ResetPolicy.BY_DURATION, None, 50),
        (ResetPolicy.BY_DURATION, 1, 5),
    ],
)
def test_reset_policies(reset: ResetPolicy, lookup: int | None, expected: int) -> None:
    sp = SharePartition(KEY)
    write = sp.initialize(
        None, reset=reset, log_start_offset=5, log_end_offset=50, offset_for_timestamp=lookup
    )
    assert write is not None and write.params.start_offset == expected
    assert (sp.spso, sp.end_offset, sp.next_fetch_offset()) == (expected, expected, expected)
    assert sp.complete(write.handle, True, 0).committed


def test_uninitialized_state_from_the_coordinator_uses_the_reset_policy() -> None:
    sp = SharePartition(KEY)
    state = ShareState(
        state_epoch=4, leader_epoch=0, start_offset=-1, delivery_complete_count=-1, state_batches=()
    )
    write = sp.initialize(state, reset=ResetPolicy.EARLIEST, log_start_offset=7, log_end_offset=9)
    assert write is not None
    assert (write.params.start_offset, write.params.state_epoch) == (7, 4)


def test_local_bugs_are_not_request_errors() -> None:
    sp = SharePartition(KEY)
    with pytest.raises(ShareEngineBug):
        sp.next_fetch_offset()
    sp.initialize(None)
    with pytest.raises(ShareEngineBug):
        sp.initialize(None)
    with pytest.raises(ShareEngineBug):
        sp.complete(999, True, 0)


def test_an_illegal_transition_is_refused_before_anything_changes() -> None:
    """A commit checks every piece before it applies any: a broken invariant in a later piece leaves
    the earlier ones (and the pending write) as they were."""
    h = Harness()
    h.acquire("c1", [(0, 9)], 10)
    write = h.sp.acknowledge("c1", [ab(0, 4, A.ACCEPT), ab(5, 9, A.REJECT)], now=0).write
    assert write is not None
    second = next(run for run in h.sp.in_flight() if run.first == 5)
    second.state = S.ACKNOWLEDGED  # a local bug: ACKNOWLEDGED -> ARCHIVED is not in the table
    with pytest.raises(IllegalStateTransition):
        h.sp.complete(write.handle, True, 0)
    assert h.sp.pending_count() == 1
    assert h.runs()[0] == (0, 4, "ACQUIRED", 1, "c1")
    assert h.sp.spso == 0 and h.sp.delivery_complete_count == 0


def test_parse_acknowledge_types() -> None:
    assert parse_acknowledge_types([1, 2, 3, 0, 4]) == (A.ACCEPT, A.RELEASE, A.REJECT, A.GAP, A.RENEW)
    with pytest.raises(InvalidRequest):
        parse_acknowledge_types([9])
    with pytest.raises(InvalidRequest):
        parse_acknowledge_types([])


def test_write_without_spso_move_says_so() -> None:
    h = Harness()
    h.acquire("c1", [(0, 9)], 10)
    write = h.sp.acknowledge("c1", [ab(5, 9, A.ACCEPT)], now=0).write
    assert write is not None and write.params.start_offset == NO_START_OFFSET
    assert write.params.delivery_complete_count == 5


def test_writes_completing_out_of_order() -> None:
    h = Harness()
    h.acquire("c1", [(0, 0)], 1)
    h.acquire("c2", [(1, 1)], 1)
    first = h.sp.acknowledge("c1", [ab(0, 0, A.ACCEPT)], now=0).write
    second = h.sp.acknowledge("c2", [ab(1, 1, A.ACCEPT)], now=0).write
    assert first is not None and second is not None
    assert first.params.start_offset == 1, "computed as if it alone commits"
    assert second.params.start_offset == NO_START_OFFSET, "0 is not terminal yet"
    h.persist(second, 0)
    assert h.sp.spso == 0
    h.persist(first, 0)
    assert (h.sp.spso, h.sp.range_count()) == (2, 0)
    rebuilt = h.rebuilt()
    assert (rebuilt.spso, rebuilt.runs()) == (2, ()), "the rebuild passes the terminal prefix itself"


@pytest.mark.parametrize("order", ["in order", "out of order"])
def test_the_durable_spso_catches_up_after_concurrent_acknowledgements(order: str) -> None:
    """Each of two writes in flight together carries the SPSO it can see alone (1, then none, as
    0 is still in transition when the second starts); once both committed the SPSO is 2 in memory
    and must be 2 durably too, or DescribeShareGroupOffsets answers 1 until some later write."""
    h = Harness()
    h.acquire("c1", [(0, 0)], 1)
    h.acquire("c2", [(1, 1)], 1)
    first = h.sp.acknowledge("c1", [ab(0, 0, A.ACCEPT)], now=0).write
    second = h.sp.acknowledge("c2", [ab(1, 1, A.ACCEPT)], now=0).write
    assert first is not None and second is not None
    for write in (first, second) if order == "in order" else (second, first):
        h.persist(write, 0)
    assert h.sp.spso == 2
    durable = h.persister.state(KEY)
    assert durable is not None
    assert (durable.start_offset, durable.delivery_complete_count) == (2, 0)


def test_no_catch_up_write_after_a_failed_write() -> None:
    """A refused write leaves the catch-up to the next write that succeeds: retrying at once
    would spin while the persister is down."""
    h = Harness()
    h.acquire("c1", [(0, 0)], 1)
    h.acquire("c2", [(1, 1)], 1)
    first = h.sp.acknowledge("c1", [ab(0, 0, A.ACCEPT)], now=0).write
    second = h.sp.acknowledge("c2", [ab(1, 1, A.ACCEPT)], now=0).write
    assert first is not None and second is not None
    assert h.sp.complete(first.handle, True, 0).writes == ()
    assert h.sp.complete(second.handle, False, 0).writes == ()
    assert h.sp.spso == 1


def test_failed_archive_of_vanished_records_leaves_them_available() -> None:
    h = Harness()
    h.acquire("c1", [(0, 4), (5, 9)], 10)
    h.persist(h.sp.release_member("c1", 0), 0)
    result = h.sp.acquire("c2", [(5, 9)], max_records=10, now=1)
    assert result.write is not None
    assert h.sp.next_fetch_offset() == 10, "records being archived are not offered again"
    h.sp.complete(result.write.handle, False, 1)
    assert h.runs()[0] == (0, 4, "AVAILABLE", 1, None)
    assert h.sp.next_fetch_offset() == 0


# -- the log start offset moving past the SPSO (retention, DeleteRecords) --------------------


def test_a_log_start_move_writes_the_spso_it_advanced_to() -> None:
    """The move's write carries the new log start (7); committing it advances the SPSO over the
    acknowledged 7-8 to 9, which a catch-up makes durable, at once when nothing else is in flight
    and else after the last write in flight commits."""
    for in_flight in (False, True):
        h = Harness(ShareConfig(record_lock_duration_ms=1_000))
        h.acquire("c1", [(0, 9)], 10)
        h.ack("c1", 7, 8, A.ACCEPT)
        parked = h.sp.acknowledge("c1", [ab(9, 9, A.RELEASE)], now=1).write if in_flight else None
        move = h.sp.update_log_start_offset(7, now=1)
        assert move is not None and move.params.start_offset == 7
        h.persister.apply(move.params)
        done = h.sp.complete(move.handle, True, 1)
        assert h.sp.spso == 9
        if parked is not None:
            assert done.writes == (), "a write is still in flight: it or a catch-up after it carries 9"
            h.persister.apply(parked.params)
            done = h.sp.complete(parked.handle, True, 1)
        (catch_up,) = done.writes
        assert (catch_up.params.start_offset, catch_up.params.state_batches) == (9, ())
        h.persist(catch_up, 1)
        durable = h.persister.state(KEY)
        assert durable is not None and durable.start_offset == 9


def test_move_archives_everything_below_and_persists_the_new_start() -> None:
    h = Harness(ShareConfig(record_lock_duration_ms=1_000))
    h.acquire("c1", [(0, 9)], 10)
    h.ack("c1", 0, 2, A.ACCEPT)  # SPSO 3
    h.ack("c1", 5, 5, A.RELEASE)  # AVAILABLE below the new start
    h.ack("c1", 8, 8, A.ACCEPT)
    assert h.sp.spso == 3
    write = h.sp.update_log_start_offset(7, now=1)
    assert write is not None
    assert write.params.start_offset == 7
    assert write.params.state_batches == ()
    assert write.params.delivery_complete_count == 1, "only offset 8 is terminal at or after 7"
    assert h.sp.spso == 3, "nothing commits before the write completes"
    assert h.sp.next_fetch_offset() == 10, "released offset 5 is not offered again"
    with pytest.raises(InvalidRecordState):
        h.sp.acknowledge("c1", [ab(3, 4, A.ACCEPT)], now=1)
    h.persist(write, 1)
    assert (h.sp.spso, h.sp.delivery_complete_count) == (7, 1)
    assert h.runs() == [
        (7, 7, "ACQUIRED", 1, "c1"),
        (8, 8, "ACKNOWLEDGED", 1, None),
        (9, 9, "ACQUIRED", 1, "c1"),
    ]
    # below the new start: nothing left to acknowledge, skipped without an error
    assert h.sp.acknowledge("c1", [ab(3, 4, A.ACCEPT)], now=1).write is None
    h.ack("c1", 7, 7, A.ACCEPT)
    h.ack("c1", 9, 9, A.ACCEPT)
    assert (h.sp.spso, h.sp.range_count(), h.sp.next_deadline()) == (10, 0, None)
    assert h.persister.state(KEY).start_offset == 10
    rebuilt = h.rebuilt()
    assert rebuilt.spso == 10


def test_move_past_the_end_skips_never_fetched_records() -> None:
    h = Harness(start=5)
    h.acquire("c1", [(5, 9)], 10)
    write = h.sp.update_log_start_offset(20, now=0)
    assert write is not None and write.params.start_offset == 20
    h.persist(write, 0)
    assert (h.sp.spso, h.sp.end_offset, h.sp.next_fetch_offset(), h.sp.range_count()) == (20, 20, 20, 0)
    assert h.sp.next_deadline() is None or h.sp.expire(10**9) is None, "the lock holds nothing now"
    assert h.acquire("c2", [(20, 24)], 10) == [(20, 24, 1)]
    assert h.rebuilt().spso == 20


def test_move_that_changes_nothing_is_not_written() -> None:
    h = Harness(start=10)
    assert h.sp.update_log_start_offset(10, now=0) is None
    assert h.sp.update_log_start_offset(3, now=0) is None
    h.acquire("c1", [(10, 19)], 10)
    write = h.sp.update_log_start_offset(12, now=0)
    assert write is not None
    assert h.sp.update_log_start_offset(15, now=0) is None, "one move at a time"
    h.persist(write, 0)
    assert h.sp.spso == 12


def test_move_stops_at_a_transition_in_progress() -> None:
    h = Harness()
    h.acquire("c1", [(0, 9)], 10)
    parked = h.sp.acknowledge("c1", [ab(4, 5, A.ACCEPT)], now=0).write
    assert parked is not None
    write = h.sp.update_log_start_offset(8, now=0)
    assert write is not None and write.params.start_offset == 4
    h.persist(write, 0)
    assert h.sp.spso == 4
    assert h.sp.update_log_start_offset(8, now=0) is None, "still waiting for the acknowledgement"
    h.persist(parked, 0)
    assert h.sp.spso == 6
    again = h.sp.update_log_start_offset(8, now=0)
    assert again is not None
    h.persist(again, 0)
    assert h.runs() == [(8, 9, "ACQUIRED", 1, "c1")]
    assert h.persister.state(KEY).start_offset == 8


def test_failed_move_changes_nothing_and_can_be_retried() -> None:
    h = Harness(ShareConfig(record_lock_duration_ms=100))
    h.acquire("c1", [(0, 9)], 10, now=0)
    write = h.sp.update_log_start_offset(5, now=0)
    assert write is not None
    expiry = h.sp.expire(200)
    assert expiry is not None, "records 5..9 are not part of the move"
    assert [(b.first_offset, b.last_offset) for b in expiry.params.state_batches] == [(5, 9)]
    h.persist(expiry, 200)
    h.persist(write, 200, ok=False)  # the lapsed lock is released as an expiry would
    assert h.runs() == [(0, 9, "AVAILABLE", 1, None)]
    assert h.sp.next_fetch_offset() == 0
    retry = h.sp.update_log_start_offset(5, now=201)
    assert retry is not None
    h.persist(retry, 201)
    assert (h.sp.spso, h.sp.next_fetch_offset()) == (5, 5)
    assert h.acquire("c2", [(5, 9)], 10, now=201) == [(5, 9, 2)]


def test_member_release_and_expiry_after_a_move_touch_only_what_is_left() -> None:
    h = Harness(ShareConfig(record_lock_duration_ms=100))
    h.acquire("c1", [(0, 9)], 10, now=0)
    h.persist(h.sp.update_log_start_offset(6, now=0), 0)
    h.persist(h.sp.release_member("c1", 1), 1)
    assert h.runs() == [(6, 9, "AVAILABLE", 1, None)]
    h.acquire("c2", [(6, 9)], 10, now=2)
    h.persist(h.sp.expire(500), 500)
    assert h.runs() == [(6, 9, "AVAILABLE", 2, None)]


def test_the_engines_quick_constructors_give_the_named_values() -> None:
    batch = state_batch(3, 7, 4, 2)
    assert type(batch) is StateBatch
    assert batch == StateBatch(first_offset=3, last_offset=7, delivery_state=4, delivery_count=2)
    assert hash(batch) == hash(StateBatch(first_offset=3, last_offset=7, delivery_state=4, delivery_count=2))
    with pytest.raises(AttributeError):
        batch.first_offset = 4  # type: ignore[misc]


def test_wire_acknowledgement_batches_become_engine_batches() -> None:
    """One type per batch (the lookup), a type per record, and the faults: an unknown type, no
    types, RENEW without ``is_renew_ack`` (alone or among other types)."""
    from shareq.client._codec import request_module
    from shareq.server.share.acknowledge import parse_batches

    wire = request_module(79, 2).AcknowledgementBatch

    def parse(*batches: tuple[int, int, tuple[int, ...]], renew: bool = False) -> tuple[object, ...]:
        return parse_batches(
            [wire(first_offset=f, last_offset=la, acknowledge_types=t) for f, la, t in batches], renew=renew
        )

    got = parse((0, 4, (1,)), (5, 7, (3, 0, 2)), (8, 8, (3,)))
    assert got == (ab(0, 4, A.ACCEPT), ab(5, 7, A.REJECT, A.GAP, A.RELEASE), ab(8, 8, A.REJECT))
    assert [type(b) for b in got] == [AcknowledgementBatch] * 3
    assert all(type(t) is A for b in got for t in b.types)  # type: ignore[attr-defined]
    assert parse((0, 0, (4,)), renew=True) == (ab(0, 0, A.RENEW),)
    for bad in [(0, 0, (9,)), (0, 0, ()), (0, 0, (4,)), (0, 1, (1, 4))]:
        with pytest.raises(InvalidRequest):
            parse(bad)
