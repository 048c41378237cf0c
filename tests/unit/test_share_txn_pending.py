"""TX_PENDING (KIP-1289) in the share-partition engine: staging, markers, locks, members, restarts.

Every test drives the engine with the in-memory persister as a shell would (write, then complete) and
checks the in-memory runs before and after, plus what a rebuild from durable state alone shows.
"""

from __future__ import annotations

import uuid

import pytest

from shareq.persister.memory import MemoryPersister
from shareq.share import (
    AcknowledgementBatch,
    AcknowledgeType,
    IllegalStateTransition,
    InvalidRecordState,
    PendingWrite,
    RecordState,
    ShareConfig,
    SharePartition,
)
from shareq.share.persister import SharePartitionKey
from shareq.share.record_state import validate_transition

KEY = SharePartitionKey(group_id="g", topic_id=uuid.UUID(int=11), partition=0)
A = AcknowledgeType
S = RecordState
LOCK = 30_000
PID, PID2 = 1000, 2000


class Harness:
    def __init__(self, config: ShareConfig | None = None) -> None:
        self.persister = MemoryPersister()
        self.sp = SharePartition(KEY, config or ShareConfig(record_lock_duration_ms=LOCK))
        self.persist(self.sp.initialize(None, log_end_offset=0), 0)

    def persist(self, write: PendingWrite | None, now: int, ok: bool = True) -> None:
        if write is None:
            return
        if ok:
            self.persister.apply(write.params)
        result = self.sp.complete(write.handle, ok, now)
        for follow_up in result.writes:
            self.persist(follow_up, now)

    def acquire(self, member: str, first: int, last: int, now: int = 0) -> None:
        result = self.sp.acquire(member, [(first, last)], max_records=500, now=now)
        self.persist(result.write, now)

    def stage(
        self, member: str, first: int, last: int, *types: A, pid: int = PID, epoch: int = 0, now: int = 0
    ) -> None:
        batch = AcknowledgementBatch(first_offset=first, last_offset=last, types=tuple(types))
        self.persist(self.sp.stage(member, [batch], producer_id=pid, producer_epoch=epoch, now=now), now)

    def marker(self, pid: int, commit: bool, now: int, epoch: int = 0) -> int:
        self.persister.marker(pid, epoch, commit=commit)
        result = self.sp.end_transaction(pid, epoch, commit=commit, now=now)
        self.persist(result.write, now)
        return result.resolved

    def expire(self, now: int) -> None:
        self.persist(self.sp.expire(now), now)

    def runs(self) -> list[tuple[int, int, str, int, str | None, int | None]]:
        return [
            (r.first_offset, r.last_offset, r.state.name, r.delivery_count, r.member, r.producer_id)
            for r in self.sp.runs()
        ]

    def restart(self) -> None:
        sp = SharePartition(KEY, self.sp.config)
        sp.initialize(self.persister.state(KEY))
        self.sp = sp


def test_transition_table_has_the_tx_pending_row() -> None:
    validate_transition(S.ACQUIRED, S.TX_PENDING)
    for target in (S.ACKNOWLEDGED, S.ARCHIVED, S.ARCHIVING, S.ACQUIRED):
        validate_transition(S.TX_PENDING, target)
    for source in (S.AVAILABLE, S.ACKNOWLEDGED, S.ARCHIVED, S.ARCHIVING):
        with pytest.raises(IllegalStateTransition):
            validate_transition(source, S.TX_PENDING)
    with pytest.raises(IllegalStateTransition):
        validate_transition(S.TX_PENDING, S.AVAILABLE)


def test_stage_then_commit_acknowledges_and_moves_the_spso() -> None:
    h = Harness()
    h.acquire("m1", 0, 9)
    h.stage("m1", 0, 9, A.ACCEPT)
    assert h.runs() == [(0, 9, "TX_PENDING", 1, "m1", PID)]
    assert h.sp.tx_pending_by_producer() == {PID: 10}
    assert h.sp.next_deadline() is None  # the lock is suspended
    h.expire(LOCK * 5)
    assert h.runs() == [(0, 9, "TX_PENDING", 1, "m1", PID)]
    assert h.marker(PID, True, LOCK * 5) == 10
    assert h.runs() == []
    assert h.sp.spso == 10
    h.restart()
    assert h.sp.spso == 10 and h.runs() == []


def test_commit_per_type_reject_and_gap_archive() -> None:
    h = Harness()
    h.acquire("m1", 0, 5)
    batch = AcknowledgementBatch(
        first_offset=0, last_offset=5, types=(A.ACCEPT, A.REJECT, A.GAP, A.ACCEPT, A.ACCEPT, A.REJECT)
    )
    h.persist(h.sp.stage("m1", [batch], producer_id=PID, producer_epoch=0, now=0), 0)
    h.acquire("m1", 6, 7)
    h.marker(PID, True, 1)
    assert h.runs() == [(6, 7, "ACQUIRED", 1, "m1", None)]
    assert h.sp.spso == 6


def test_commit_reject_with_dead_letter_queue_goes_archiving() -> None:
    h = Harness(ShareConfig(record_lock_duration_ms=LOCK, dlq_enabled=True))
    h.acquire("m1", 0, 1)
    h.stage("m1", 0, 1, A.REJECT)
    result = h.sp.end_transaction(PID, 0, commit=True, now=1)
    assert result.archiving
    assert h.runs() == [(0, 1, "ARCHIVING", 1, None, None)]


def test_abort_gives_the_records_back_to_their_owner_while_the_lock_lasts() -> None:
    h = Harness()
    h.acquire("m1", 0, 4, now=0)
    h.stage("m1", 0, 4, A.ACCEPT, now=100)
    assert h.marker(PID, False, 200) == 5
    assert h.runs() == [(0, 4, "ACQUIRED", 1, "m1", None)]
    assert h.sp.next_deadline() == LOCK  # the original deadline resumes
    h.expire(LOCK)
    assert h.runs() == [(0, 4, "AVAILABLE", 1, None, None)]


def test_abort_after_the_lock_passed_releases_durably() -> None:
    h = Harness()
    h.acquire("m1", 0, 4, now=0)
    h.stage("m1", 0, 4, A.ACCEPT)
    h.marker(PID, False, LOCK + 1)
    assert h.runs() == [(0, 4, "AVAILABLE", 1, None, None)]
    h.restart()
    assert h.runs() == [(0, 4, "AVAILABLE", 1, None, None)]


def test_abort_at_the_delivery_limit_archives() -> None:
    h = Harness(ShareConfig(record_lock_duration_ms=LOCK, delivery_count_limit=1))
    h.acquire("m1", 0, 1)
    h.stage("m1", 0, 1, A.ACCEPT)
    h.sp.release_member("m1", 5)
    assert h.runs() == [(0, 1, "TX_PENDING", 1, None, PID)]  # the owner left: pending stays, ownerless
    h.marker(PID, False, 10)
    assert h.runs() == [] and h.sp.spso == 2


def test_acknowledge_renew_and_release_are_refused_on_pending_records() -> None:
    h = Harness()
    h.acquire("m1", 0, 4)
    h.stage("m1", 0, 4, A.ACCEPT)
    for t in (A.ACCEPT, A.RENEW, A.RELEASE, A.REJECT):
        with pytest.raises(InvalidRecordState):
            h.sp.acknowledge("m1", [AcknowledgementBatch(first_offset=0, last_offset=4, types=(t,))], now=1)
    assert h.runs() == [(0, 4, "TX_PENDING", 1, "m1", PID)]


def test_staging_refuses_release_renew_and_other_owners() -> None:
    h = Harness()
    h.acquire("m1", 0, 4)
    for t in (A.RELEASE, A.RENEW):
        with pytest.raises(InvalidRecordState):  # the KIP's code for a type outside a transaction's
            h.stage("m1", 0, 4, t)
    with pytest.raises(InvalidRecordState):
        h.stage("m2", 0, 4, A.ACCEPT)  # lease lost or never held (design note case 15)
    assert h.runs() == [(0, 4, "ACQUIRED", 1, "m1", None)]


def test_all_or_nothing_across_batches() -> None:
    h = Harness()
    h.acquire("m1", 0, 4)
    h.acquire("m2", 5, 9)
    good = AcknowledgementBatch(first_offset=0, last_offset=4, types=(A.ACCEPT,))
    bad = AcknowledgementBatch(first_offset=5, last_offset=9, types=(A.ACCEPT,))
    with pytest.raises(InvalidRecordState):
        h.sp.stage("m1", [good, bad], producer_id=PID, producer_epoch=0, now=0)
    assert [r[2] for r in h.runs()] == ["ACQUIRED", "ACQUIRED"]


def test_retry_in_the_same_transaction_is_a_no_op_and_another_pid_is_refused() -> None:
    h = Harness()
    h.acquire("m1", 0, 4)
    h.stage("m1", 0, 4, A.ACCEPT)
    assert (
        h.sp.stage(
            "m1",
            [AcknowledgementBatch(first_offset=0, last_offset=4, types=(A.ACCEPT,))],
            producer_id=PID,
            producer_epoch=0,
            now=1,
        )
        is None
    )
    with pytest.raises(InvalidRecordState):
        h.stage("m1", 0, 4, A.ACCEPT, pid=PID2)
    with pytest.raises(InvalidRecordState):
        h.stage("m1", 0, 4, A.REJECT)


def test_marker_of_another_pid_or_an_older_epoch_is_a_no_op_and_duplicates_are_harmless() -> None:
    h = Harness()
    h.acquire("m1", 0, 4)
    h.stage("m1", 0, 4, A.ACCEPT, epoch=3)
    assert h.marker(PID2, True, 1) == 0
    assert h.marker(PID, True, 1, epoch=2) == 0
    assert h.runs() == [(0, 4, "TX_PENDING", 1, "m1", PID)]
    assert h.marker(PID, True, 1, epoch=4) == 5  # a fencing bump still settles it
    assert h.marker(PID, True, 2, epoch=4) == 0
    assert h.sp.spso == 5


def test_failed_staging_write_leaves_the_records_acquired() -> None:
    h = Harness()
    h.acquire("m1", 0, 4)
    write = h.sp.stage(
        "m1",
        [AcknowledgementBatch(first_offset=0, last_offset=4, types=(A.ACCEPT,))],
        producer_id=PID,
        producer_epoch=0,
        now=1,
    )
    h.persist(write, 1, ok=False)
    assert h.runs() == [(0, 4, "ACQUIRED", 1, "m1", None)]
    assert h.sp.tx_pending_count() == 0


def test_restart_keeps_pending_records_ownerless_then_commit_or_abort() -> None:
    h = Harness()
    h.acquire("m1", 0, 9)
    h.stage("m1", 0, 4, A.ACCEPT)
    h.stage("m1", 5, 9, A.ACCEPT, pid=PID2)
    h.restart()
    assert h.runs() == [(0, 4, "TX_PENDING", 1, None, PID), (5, 9, "TX_PENDING", 1, None, PID2)]
    assert h.sp.next_fetch_offset() == 10  # nothing staged is handed out again
    h.marker(PID, True, 1)
    h.marker(PID2, False, 1)
    assert h.runs() == [(5, 9, "AVAILABLE", 1, None, None)]
    assert h.sp.spso == 5
    h.restart()
    assert h.runs() == [(5, 9, "AVAILABLE", 1, None, None)]


def test_marker_durable_before_a_crash_is_replayed() -> None:
    h = Harness()
    h.acquire("m1", 0, 4)
    h.stage("m1", 0, 4, A.ACCEPT)
    h.persister.marker(PID, 0, commit=True)  # the marker reached the log; the process died then
    h.restart()
    assert h.runs() == [] and h.sp.spso == 5


def test_log_start_move_stops_at_pending_records() -> None:
    h = Harness()
    h.acquire("m1", 0, 9)
    h.stage("m1", 3, 5, A.ACCEPT)
    h.persist(h.sp.update_log_start_offset(8, 1), 1)
    assert h.sp.spso == 3
    assert h.runs()[0] == (3, 5, "TX_PENDING", 1, "m1", PID)
