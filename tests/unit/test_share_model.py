"""Property test: the share-partition engine against a per-offset reference model.

A hypothesis state machine drives random acquisitions (both modes), acknowledgements (every type,
partial batches, invalid ones), clock advances, member departures, restarts and failed writes, with
and without a dead-letter queue (rejected and exhausted records ARCHIVING until a dead-letter round
writes them ARCHIVED). The
model keeps one entry per offset and re-derives every rule in the plainest way; after each step the
engine must agree with it exactly, and an engine rebuilt from persisted state alone must agree with
the model's durable view.
"""

from __future__ import annotations

import bisect
import os
import uuid
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from shareq.persister.memory import MemoryPersister
from shareq.share import (
    AcknowledgementBatch,
    AcknowledgeType,
    AcquireMode,
    PendingWrite,
    RecordState,
    ShareConfig,
    SharePartition,
    ShareRequestError,
)
from shareq.share.acquisition import poison_threshold
from shareq.share.persister import NO_START_OFFSET, PersisterError, SharePartitionKey
from shareq.share.window import in_play

KEY = SharePartitionKey(group_id="g", topic_id=uuid.UUID(int=7), partition=0)
MEMBERS = ("m1", "m2", "m3")
AV, AQ, ACK, ARC = RecordState.AVAILABLE, RecordState.ACQUIRED, RecordState.ACKNOWLEDGED, RecordState.ARCHIVED
ARCING = RecordState.ARCHIVING
DONE_TYPES = [AcknowledgeType.ACCEPT, AcknowledgeType.REJECT, AcknowledgeType.GAP]
TERMINAL = (ACK, ARC)
BACKOFF = 1_000
COUNTER = {
    "runs": 0,
    "steps": 0,
    "acquired": 0,
    "acks_ok": 0,
    "acks_refused": 0,
    "writes_failed": 0,
    "parked_ok": 0,
    "lapsed": 0,
    "log_start_moves": 0,
    "spso_catch_ups": 0,
    "dead_letter_rounds": 0,
}


class Lease:
    """One acquisition lock as the engine takes them: per acquire, per renewing acknowledgement,
    per lock whose release failed (retried); ``first`` is the first offset it was taken over."""

    def __init__(self, first: int) -> None:
        self.first = first


@dataclass
class Rec:
    state: RecordState
    count: int
    member: str | None = None
    deadline: int | None = None
    pending: bool = False
    held: bool = False
    """In the engine's run of a dead-letter round in flight: the round holds the whole run, so
    the SPSO and a log start move stop at the run's first record until it completes."""
    lease: Lease | None = None


@dataclass
class Model:
    limit: int
    window: int
    duration: int
    spso: int = 0
    end: int = 0
    recs: dict[int, Rec] = field(default_factory=dict)
    durable: dict[int, tuple[RecordState, int]] = field(default_factory=dict)
    durable_spso: int = 0
    dlq: bool = False

    def release_target(self, count: int) -> RecordState:
        if count < self.limit:
            return AV
        return ARCING if self.dlq else ARC

    def advance(self) -> None:
        while self.spso < self.end:
            rec = self.recs.get(self.spso)
            if rec is None or rec.state not in TERMINAL or rec.held:
                return
            del self.recs[self.spso]
            self.spso += 1

    def persisted(self, spso: int | None = None) -> None:
        """A write succeeded: the durable SPSO catches up (never back: a write in flight may
        already have moved it further) and prunes."""
        self.durable_spso = max(self.durable_spso, self.spso if spso is None else spso)
        for o in [o for o in self.durable if o < self.durable_spso]:
            del self.durable[o]

    def next_fetch(self) -> int:
        for o in range(self.spso, self.end):
            rec = self.recs.get(o)
            if rec is None or rec.state is AV:
                return o
        return self.end


Parked = tuple[PendingWrite, list[tuple[int, "RecordState | int"]], int, bool]
"""A write in flight: the write, its changes, the SPSO it moves to, whether it became durable."""


class EngineMachine(RuleBasedStateMachine):
    @initialize(
        limit=st.integers(2, 6),
        window=st.integers(4, 40),
        duration=st.sampled_from([100, 1_000, 5_000, 30_000]),
        start=st.integers(0, 5),
        dlq=st.booleans(),
    )
    def setup(self, limit: int, window: int, duration: int, start: int, dlq: bool) -> None:
        COUNTER["runs"] += 1
        self.config = ShareConfig(
            record_lock_duration_ms=duration,
            delivery_count_limit=limit,
            max_record_locks=window,
            persist_retry_backoff_ms=BACKOFF,
            dlq_enabled=dlq,
        )
        self.persister = MemoryPersister()
        self.firsts: list[int] = []
        self.lasts: list[int] = []
        self.log_end = start
        self.now = 0
        self.model = Model(limit=limit, window=window, duration=duration, spso=start, end=start, dlq=dlq)
        self.model.durable_spso = start
        self.engine = SharePartition(KEY, self.config)
        self.follow_ups: tuple[PendingWrite, ...] = ()
        # writes in flight: queued to the persister when made (the shell queues them at once,
        # so they take effect in the order they are made) and completed later, ok or not
        self.parked: Parked | None = None
        self.parked_round: Parked | None = None
        self.drive(self.engine.initialize(None, log_end_offset=start), initial=True)

    # ------------------------------------------------------------------ helpers
    def drive(self, write: PendingWrite | None, *, initial: bool = False) -> bool | None:
        """Persist ``write`` (honouring an injected failure) and complete it; returns ok."""
        if write is None:
            return None
        batches = write.params.state_batches
        if write.params.start_offset != NO_START_OFFSET:  # pruned by the very record carrying them
            assert all(b.first_offset >= write.params.start_offset for b in batches), "deltas below the SPSO"
        assert all(b.first_offset <= b.last_offset for b in batches)
        try:
            self.persister.apply(write.params)
            ok = True
        except PersisterError:
            ok = False
            COUNTER["writes_failed"] += 1
        result = self.engine.complete(write.handle, ok, self.now)
        assert result.committed is ok
        self.follow_ups = result.writes
        if initial and not ok:  # the initial SPSO write failed: retry it as a shell would
            self.persister.fail_next_writes = 0
            self.persister.apply(write.params)
        return ok

    def rolled_back(self, changes: list[tuple[int, RecordState | int]]) -> None:
        """A write failed: records whose lock lapsed meanwhile are released, and the SPSO passes
        terminal records the write held."""
        m = self.model
        lapsed = []
        for o, _ in changes:
            rec = m.recs[o]
            rec.pending = False
            if rec.deadline is not None and rec.deadline <= self.now:
                lapsed.append(o)
        m.advance()
        assert len(self.follow_ups) == (1 if lapsed else 0)
        if lapsed:
            COUNTER["lapsed"] += 1
            follow_up = self.follow_ups[0]
            self.persister.fail_next_writes = 0
            self.persister.apply(follow_up.params)
            assert self.engine.complete(follow_up.handle, True, self.now).committed
            self.release(lapsed, True)

    def release(self, offsets: list[int], ok: bool | None) -> None:
        m = self.model
        retries: dict[int, Lease] = {}  # a failed release retries each old lock under a new one
        for o in sorted(offsets):
            rec = m.recs[o]
            if ok:
                rec.state = m.release_target(rec.count)
                rec.member = None
                rec.deadline = None
                rec.lease = None
                m.durable[o] = (rec.state, rec.count)
            else:
                rec.deadline = self.now + BACKOFF
                rec.lease = retries.setdefault(id(rec.lease), Lease(o))
        if ok:
            m.advance()
            m.persisted()

    # ------------------------------------------------------------------ rules
    @rule(count=st.integers(1, 12), per_batch=st.integers(1, 5))
    def produce(self, count: int, per_batch: int) -> None:
        end = self.log_end + count
        for first in range(self.log_end, end, per_batch):
            self.firsts.append(first)
            self.lasts.append(min(first + per_batch, end) - 1)
        self.log_end = end

    @precondition(lambda self: self.engine.next_fetch_offset() < self.log_end)
    @rule(member=st.sampled_from(MEMBERS), max_records=st.integers(1, 12), exact=st.booleans())
    def acquire(self, member: str, max_records: int, exact: bool) -> None:
        m = self.model
        fetch = self.engine.next_fetch_offset()
        assert fetch == m.next_fetch()
        i = bisect.bisect_left(self.lasts, fetch)
        batches = list(zip(self.firsts[i:], self.lasts[i:], strict=True))
        expected = self.expected_acquisition(fetch, batches, max_records, exact)
        result = self.engine.acquire(
            member,
            batches,
            max_records=max_records,
            batch_size=max_records,
            mode=AcquireMode.RECORD_LIMIT if exact else AcquireMode.BATCH_OPTIMIZED,
            now=self.now,
        )
        assert result.write is None
        got = [
            (o, r.delivery_count) for r in result.records for o in range(r.first_offset, r.last_offset + 1)
        ]
        assert got == expected
        assert result.acquired_count == len(got)
        got_set = set(got)
        deadline = self.now + m.duration
        lease = Lease(got[0][0]) if got else None
        for o, count in got:
            rec = m.recs.get(o)
            assert rec is None or rec.state is AV, "nothing ACQUIRED is acquired again"
            if rec is None and o >= m.spso + m.window:
                # batch optimized (as Kafka 4.4): a first-time lease that starts inside the window
                # runs on to the end of its log batch, never into the next one
                assert not exact and (o - 1, 1) in got_set, "first-time acquisition beyond the window"
                assert bisect.bisect_right(self.firsts, o) == bisect.bisect_right(self.firsts, o - 1)
            assert count <= m.limit
            m.recs[o] = Rec(AQ, count, member, deadline, lease=lease)
            m.end = max(m.end, o + 1)
        COUNTER["acquired"] += len(got)
        assert result.lock_deadline == (deadline if got else None)

    def expected_acquisition(
        self, fetch: int, batches: list[tuple[int, int]], max_records: int, exact: bool
    ) -> list[tuple[int, int]]:
        m = self.model
        threshold = poison_threshold(m.limit)
        limit, hard = max_records, exact
        out: list[tuple[int, int]] = []
        for bf, bl in batches:
            leasing = False  # a first-time lease of this batch is running (it started in the window)
            for o in range(max(bf, fetch), bl + 1):
                rec = m.recs.get(o)
                if rec is not None and rec.state is not AV:
                    leasing = False
                    continue
                if rec is None and o >= m.spso + m.window and (exact or not leasing):
                    return out
                leasing = rec is None
                d = rec.count if rec is not None else 0
                if d > 0 and (d + 1 >= m.limit or d >= threshold):
                    cap = 1 if d + 1 >= m.limit else max(1, max_records >> (d - threshold + 1))
                    limit, hard = min(limit, cap), True
                if hard and len(out) >= limit:
                    return out
                out.append((o, d + 1))
                if hard and len(out) >= limit:
                    return out
            if len(out) >= limit:
                return out
        return out

    def acknowledge_random(self, data: st.DataObject, member: str, fail: bool) -> None:
        m = self.model
        n = data.draw(st.integers(1, 3))
        batches = []
        for _ in range(n):
            first = data.draw(st.integers(m.spso - 2, m.end + 2))
            last = first + data.draw(st.integers(-1, 6))
            batches.append(self.draw_batch(data, first, last))
        if data.draw(st.booleans()):
            batches.sort(key=lambda b: b.first_offset)
        self.acknowledge(member, batches, fail)

    @rule(data=st.data(), fail=st.integers(0, 4))
    def acknowledge_owned(self, data: st.DataObject, fail: int) -> None:
        m = self.model
        owned = sorted((o, r.member) for o, r in m.recs.items() if r.state is AQ)
        if data.draw(st.integers(0, 4)) == 0:
            self.acknowledge_random(data, data.draw(st.sampled_from(MEMBERS)), fail == 0)
            return
        if not owned:
            return
        o, member = data.draw(st.sampled_from(owned))
        assert member is not None
        last = o
        while last + 1 in m.recs and m.recs[last + 1].state is AQ and m.recs[last + 1].member == member:
            last += 1
        first = data.draw(st.integers(o, last))
        end = data.draw(st.integers(first, last))
        self.acknowledge(member, [self.draw_batch(data, first, end)], fail == 0)

    def draw_idle_holding(self, data: st.DataObject) -> tuple[str, int, int] | None:
        """(member, first, last): from a drawn ACQUIRED record on, the records its member holds
        with no acknowledgement in flight (None when there are none)."""
        m = self.model
        owned = sorted((o, r.member) for o, r in m.recs.items() if r.state is AQ and not r.pending)
        if not owned:
            return None
        o, member = data.draw(st.sampled_from(owned))
        assert member is not None
        last = o
        while (
            last + 1 in m.recs
            and m.recs[last + 1].state is AQ
            and m.recs[last + 1].member == member
            and not m.recs[last + 1].pending
        ):
            last += 1
        return member, o, last

    @rule(data=st.data(), fail=st.integers(0, 4), split=st.booleans())
    def acknowledge_interleaved(self, data: st.DataObject, fail: int, split: bool) -> None:
        """A member finishes records it holds with mixed ACCEPT, REJECT and GAP, as one batch with a
        type per record or (as librdkafka sends them) one batch per equal-type stretch."""
        held = self.draw_idle_holding(data)
        if held is None:
            return
        member, o, last = held
        types = data.draw(st.lists(st.sampled_from(DONE_TYPES), min_size=last - o + 1, max_size=last - o + 1))
        if not split:
            self.acknowledge(
                member,
                [AcknowledgementBatch(first_offset=o, last_offset=last, types=tuple(types))],
                fail == 0,
            )
            return
        batches: list[AcknowledgementBatch] = []
        for i, kind in enumerate(types):
            if batches and batches[-1].types[0] is kind:
                prev = batches.pop()
                batches.append(
                    AcknowledgementBatch(first_offset=prev.first_offset, last_offset=o + i, types=(kind,))
                )
            else:
                batches.append(AcknowledgementBatch(first_offset=o + i, last_offset=o + i, types=(kind,)))
        self.acknowledge(member, batches, fail == 0)

    def draw_batch(self, data: st.DataObject, first: int, last: int) -> AcknowledgementBatch:
        # a third of the per-record lists finish every record (ACCEPT, REJECT, GAP): the engine
        # then keeps a state per record in one run instead of cutting it
        kinds = st.sampled_from(list(AcknowledgeType) if data.draw(st.integers(0, 2)) else DONE_TYPES)
        if data.draw(st.booleans()) or last < first:
            types = (data.draw(kinds),)
        else:
            types = tuple(data.draw(st.lists(kinds, min_size=last - first + 1, max_size=last - first + 1)))
        return AcknowledgementBatch(first_offset=first, last_offset=last, types=types)

    def expected_ack_error(self, member: str, batches: list[AcknowledgementBatch]) -> str | None:
        m = self.model
        at_spso = m.recs.get(m.spso)
        floor = m.spso
        if at_spso is not None and at_spso.state is AQ and at_spso.lease is not None:
            floor = min(at_spso.lease.first, m.spso)
        prev = -1
        for b in batches:
            if b.first_offset > b.last_offset or b.first_offset < 0:
                return "INVALID_REQUEST"
            if b.first_offset < prev:
                return "INVALID_REQUEST"
            twice = b.first_offset == prev  # the previous batch's last record again
            prev = b.last_offset
            if len(b.types) not in (1, b.last_offset - b.first_offset + 1):
                return "INVALID_REQUEST"
            if b.last_offset >= m.end:
                return "INVALID_REQUEST"
            # offsets below the SPSO are done: skipped, as Kafka skips them, while the acquisition
            # holding the record at the SPSO began at or below them or the batch reaches the SPSO
            if b.first_offset < floor and b.last_offset < m.spso:
                return "INVALID_RECORD_STATE"
            if twice and b.first_offset >= m.spso:
                return "INVALID_RECORD_STATE"
            for o in range(max(b.first_offset, m.spso), b.last_offset + 1):
                rec = m.recs.get(o)
                if rec is None or rec.state is not AQ or rec.member != member or rec.pending:
                    return "INVALID_RECORD_STATE"
        return None

    def acknowledge(
        self, member: str, batches: list[AcknowledgementBatch], fail: bool, park: bool = False
    ) -> None:
        """``park``: the write stays in flight (queued now, durable unless ``fail``)."""
        m = self.model
        expected_error = self.expected_ack_error(member, batches)
        before = self.engine.runs()
        if fail:
            self.persister.fail_next_writes = 1
        try:
            result = self.engine.acknowledge(member, batches, now=self.now)
        except ShareRequestError as exc:
            assert exc.error_name == expected_error, (exc, expected_error)
            assert self.engine.runs() == before, "a refused request changes nothing"
            self.persister.fail_next_writes = 0
            COUNTER["acks_refused"] += 1
            return
        assert expected_error is None, f"expected {expected_error}"
        changes = self.ack_changes(batches)
        if park and result.write is not None and self.parked is None:
            self.persister.fail_next_writes = 0
            self.parked = self.queue(result.write, changes, ok=not fail)
            assert self.engine.runs() == before, "nothing changes before the write completes"
            return
        ok = self.drive(result.write)
        self.persister.fail_next_writes = 0
        if ok is False:
            self.rolled_back(changes)
            return
        COUNTER["acks_ok"] += 1
        self.apply_changes(changes)
        if ok:
            m.persisted()

    def ack_changes(self, batches: list[AcknowledgementBatch]) -> list[tuple[int, RecordState | int]]:
        """Per offset: the target state, or -1 for a renewal."""
        m = self.model
        out: list[tuple[int, RecordState | int]] = []
        for b in batches:
            for i, o in enumerate(range(b.first_offset, b.last_offset + 1)):
                if o < m.spso:
                    continue  # already done: skipped
                kind = b.types[0] if len(b.types) == 1 else b.types[i]
                rec = m.recs[o]
                if kind is AcknowledgeType.RENEW:
                    out.append((o, -1))  # the lock restarts when the acknowledgement commits
                elif kind is AcknowledgeType.ACCEPT:
                    out.append((o, ACK))
                elif kind is AcknowledgeType.RELEASE:
                    out.append((o, m.release_target(rec.count)))
                elif kind is AcknowledgeType.REJECT and m.dlq:
                    out.append((o, ARCING))
                else:
                    out.append((o, ARC))
        return out

    def apply_changes(self, changes: list[tuple[int, RecordState | int]]) -> None:
        m = self.model
        renewed: Lease | None = None  # the renewals of one acknowledgement share a new lock
        for o, change in changes:
            rec = m.recs[o]
            rec.pending = False
            if not isinstance(change, RecordState):
                rec.deadline = self.now + m.duration
                if renewed is None:
                    renewed = Lease(o)
                rec.lease = renewed
                continue
            rec.state = change
            rec.member = rec.deadline = None
            rec.lease = None
            m.durable[o] = (rec.state, rec.count)
        m.advance()

    def prospective_spso(self, changes: list[tuple[int, RecordState | int]]) -> int:
        m = self.model
        targets = {o: c for o, c in changes if isinstance(c, RecordState)}
        o = m.spso
        while o < m.end:
            rec = m.recs.get(o)
            if rec is None or targets.get(o, rec.state) not in TERMINAL or rec.held:
                return o
            o += 1
        return o

    def queue(self, write: PendingWrite, changes: list[tuple[int, RecordState | int]], ok: bool) -> Parked:
        """Queue ``write`` as the shell does, at once; durable (the persister took it) when ``ok``."""
        m = self.model
        spso = self.prospective_spso(changes)
        for o, _ in changes:
            m.recs[o].pending = True
        if ok:
            self.persister.apply(write.params)
            for o, change in changes:
                if isinstance(change, RecordState):
                    m.durable[o] = (change, m.recs[o].count)
            m.persisted(spso)
        return (write, changes, spso, ok)

    def pending_writes(self) -> int:
        return (self.parked is not None) + (self.parked_round is not None)

    def completed(self, parked: Parked) -> None:
        """A write in flight completes (ok when it was durable); then the SPSO's catch-up."""
        write, changes, spso, ok = parked
        m = self.model
        result = self.engine.complete(write.handle, ok, self.now)
        assert result.committed is ok
        if not ok:
            self.follow_ups = result.writes
            self.rolled_back(changes)
            return
        COUNTER["parked_ok"] += 1
        self.apply_changes(changes)
        m.persisted(spso)
        self.caught_up(result.writes)

    def caught_up(self, writes: tuple[PendingWrite, ...]) -> None:
        """The SPSO moved past what the writes made durable and none is left in flight: the
        engine writes it alone, at once."""
        m = self.model
        assert len(writes) == (1 if m.spso > m.durable_spso and not self.pending_writes() else 0)
        for catch_up in writes:
            assert catch_up.params.start_offset == m.spso
            assert catch_up.params.state_batches == ()
            COUNTER["spso_catch_ups"] += 1
            if self.drive(catch_up):
                m.persisted()

    @rule(data=st.data(), ok=st.booleans())
    def park_acknowledgement(self, data: st.DataObject, ok: bool) -> None:
        """Start an acknowledgement whose write is still in flight while other steps run."""
        if self.parked is not None:
            return
        held = self.draw_idle_holding(data)
        if held is None:
            return
        member, o, last = held
        end = data.draw(st.integers(o, last))
        self.acknowledge(member, [self.draw_batch(data, o, end)], not ok, park=True)

    @rule()
    def complete_parked(self) -> None:
        if self.parked is None:
            return
        parked, self.parked = self.parked, None
        self.completed(parked)

    @rule(dt=st.sampled_from([0, 10, 100, 999, 1_000, 5_000, 30_000]), fail=st.integers(0, 3))
    def advance_clock(self, dt: int, fail: int) -> None:
        self.now += dt
        m = self.model
        due = sorted(
            o
            for o, r in m.recs.items()
            if r.state is AQ and not r.pending and r.deadline is not None and r.deadline <= self.now
        )
        self.persister.fail_next_writes = 1 if fail == 0 else 0
        write = self.engine.expire(self.now)
        assert (write is None) == (not due)
        ok = self.drive(write)
        self.persister.fail_next_writes = 0
        if due:
            self.release(due, ok)

    @rule(member=st.sampled_from(MEMBERS), fail=st.integers(0, 3), go=st.integers(0, 2))
    def member_leave(self, member: str, fail: int, go: int) -> None:
        if go:  # rarer than the other rules, so records stay acquired long enough to be acknowledged
            return
        m = self.model
        held = sorted(o for o, r in m.recs.items() if r.state is AQ and r.member == member and not r.pending)
        self.persister.fail_next_writes = 1 if fail == 0 else 0
        write = self.engine.release_member(member, self.now)
        assert (write is None) == (not held)
        ok = self.drive(write)
        self.persister.fail_next_writes = 0
        if held:
            self.release(held, ok)

    @rule(cut=st.integers(0, 8), fail=st.integers(0, 3), go=st.integers(0, 2))
    def log_start_moves(self, cut: int, fail: int, go: int) -> None:
        """Retention or DeleteRecords moved the log start: records below it are archived and dropped."""
        if go:
            return
        m = self.model
        log_start = min(m.spso + cut, self.log_end)
        limit = next(
            (o for o in range(m.spso, log_start) if o in m.recs and (m.recs[o].pending or m.recs[o].held)),
            log_start,
        )
        self.persister.fail_next_writes = 1 if fail == 0 else 0
        write = self.engine.update_log_start_offset(log_start, self.now)
        assert (write is None) == (limit <= m.spso)
        if write is None:
            self.persister.fail_next_writes = 0
            return
        assert write.params.start_offset == limit
        ok = self.drive(write)
        self.persister.fail_next_writes = 0
        if not ok:
            changes: list[tuple[int, RecordState | int]] = [
                (o, ARC) for o in range(m.spso, limit) if o in m.recs and m.recs[o].state not in TERMINAL
            ]
            self.rolled_back(changes)
            return
        COUNTER["log_start_moves"] += 1
        for o in [o for o in m.recs if o < limit]:
            del m.recs[o]
        m.spso = limit
        m.end = max(m.end, limit)
        m.advance()
        # the write carried the new log start; the SPSO advancing past terminal records above it
        # is written by a catch-up, at once unless another write is still in flight
        m.persisted(limit)
        self.caught_up(self.follow_ups)

    @precondition(lambda self: self.model.dlq and self.parked_round is None)  # one round at a time
    @rule(max_records=st.integers(1, 8), fail=st.integers(0, 3))
    def dead_letter_round(self, max_records: int, fail: int) -> None:
        """The dead-letter writer's round: the first ``max_records`` ARCHIVING records become
        ARCHIVED once durable."""
        m = self.model
        spans = self.engine.archiving_spans(max_records)
        got = [(o, count) for first, last, count in spans for o in range(first, last + 1)]
        expected = [(o, r.count) for o, r in sorted(m.recs.items()) if r.state is ARCING and not r.pending]
        assert got == expected[:max_records], "the first ARCHIVING records, in offset order"
        taken = [(first, last) for first, last, _ in spans]
        self.persister.fail_next_writes = 1 if fail == 0 else 0
        write = self.engine.dead_lettered_spans(taken)
        assert (write is None) == (not taken)
        if write is None:
            self.persister.fail_next_writes = 0
            return
        ok = self.drive(write)
        self.persister.fail_next_writes = 0
        if not ok:
            assert self.follow_ups == ()
            return
        COUNTER["dead_letter_rounds"] += 1
        for first, last in taken:
            for o in range(first, last + 1):
                m.recs[o].state = ARC
                m.durable[o] = (ARC, m.recs[o].count)
        m.advance()
        m.persisted()

    @precondition(lambda self: self.model.dlq and self.parked_round is None)
    @rule(max_records=st.integers(1, 8), ok=st.booleans())
    def park_dead_letter_round(self, max_records: int, ok: bool) -> None:
        """A dead-letter round whose ARCHIVED write is still in flight while other steps run (its
        start offset may pass records the next writes cannot: they must not move it back)."""
        spans = self.engine.archiving_spans(max_records)
        taken = [(first, last) for first, last, _ in spans]
        if not taken:
            return
        write = self.engine.dead_lettered_spans(taken)
        assert write is not None
        changes: list[tuple[int, RecordState | int]] = [
            (o, ARC) for first, last in taken for o in range(first, last + 1)
        ]
        self.parked_round = self.queue(write, changes, ok)
        for first, _ in taken:  # the engine's runs holding them: per-offset, the model cannot know
            run = self.engine._state.runs.run_at(first)
            assert run is not None and run.txn is not None
            for o in range(run.first, run.last + 1):
                if o in self.model.recs:
                    self.model.recs[o].held = True

    @rule()
    def complete_parked_round(self) -> None:
        if self.parked_round is None:
            return
        parked, self.parked_round = self.parked_round, None
        for rec in self.model.recs.values():
            rec.held = False
        if parked[3]:
            COUNTER["dead_letter_rounds"] += 1
        else:
            for o, _ in parked[1]:
                self.model.recs[o].pending = False
        self.completed(parked)

    @rule(go=st.integers(0, 5))
    def restart(self, go: int) -> None:
        if go:
            return
        self.engine = self.rebuilt()
        self.model = self.model_rebuilt()
        self.parked = self.parked_round = None  # what they made durable was queued, the rest is gone

    @rule(window=st.integers(4, 40), raise_limit=st.integers(0, 2), go=st.integers(0, 5))
    def alter_config(self, window: int, raise_limit: int, go: int) -> None:
        if go:
            return
        limit = self.config.delivery_count_limit + raise_limit
        self.config = ShareConfig(
            record_lock_duration_ms=self.config.record_lock_duration_ms,
            delivery_count_limit=limit,
            max_record_locks=window,
            persist_retry_backoff_ms=BACKOFF,
            dlq_enabled=self.config.dlq_enabled,
        )
        self.engine.alter_config(self.config)
        self.model.window = window
        self.model.limit = limit

    # ------------------------------------------------------------------ rebuilds
    def rebuilt(self) -> SharePartition:
        engine = SharePartition(KEY, self.config)
        assert engine.initialize(self.persister.state(KEY)) is None
        return engine

    def model_rebuilt(self) -> Model:
        old = self.model
        m = Model(limit=old.limit, window=old.window, duration=old.duration, dlq=old.dlq)
        m.spso = m.durable_spso = old.durable_spso
        m.durable = dict(old.durable)
        m.recs = {o: Rec(s, c) for o, (s, c) in m.durable.items() if o >= m.spso}
        m.end = max([m.spso, *(o + 1 for o in m.recs)])
        m.advance()
        return m

    # ------------------------------------------------------------------ invariants
    @invariant()
    def agrees_with_model(self) -> None:
        COUNTER["steps"] += 1
        m, engine = self.model, self.engine
        assert engine.spso == m.spso
        assert engine.end_offset == m.end
        actual = {}
        for r in engine.runs():
            for o in range(r.first_offset, r.last_offset + 1):
                actual[o] = (r.state, r.delivery_count, r.member)
        expected = {o: (r.state, r.count, r.member) for o, r in m.recs.items()}
        assert actual == expected
        state = engine._state  # the count window's kept count of records in play equals a walk
        assert state.covered - state.dcc == in_play(state.runs)
        first = m.recs.get(m.spso)
        assert first is None or first.state not in TERMINAL or first.held, (
            "SPSO stops at the first non-terminal record"
        )
        assert all(r.count <= m.limit for r in m.recs.values()), "no delivery count exceeds the limit"
        assert engine.delivery_complete_count == sum(1 for r in m.recs.values() if r.state in TERMINAL)
        deadlines = [
            r.deadline
            for r in m.recs.values()
            if r.state is AQ and r.deadline is not None and not (r.pending and r.deadline <= self.now)
        ]
        assert engine.next_deadline() == (min(deadlines) if deadlines else None)
        assert engine.pending_count() == self.pending_writes()

    @invariant()
    def durable_state_agrees(self) -> None:
        rebuilt = self.rebuilt()
        model = self.model_rebuilt()
        assert rebuilt.spso == model.spso
        # a write in flight is durable before it commits (queued at once): only then may the
        # durable SPSO be ahead of the live one
        assert model.spso <= self.model.spso or self.pending_writes()
        got = {
            o: (r.state, r.delivery_count)
            for r in rebuilt.runs()
            for o in range(r.first_offset, r.last_offset + 1)
        }
        assert got == {o: (r.state, r.count) for o, r in model.recs.items()}
        for o, rec in self.model.recs.items():
            if rec.state in TERMINAL and o >= rebuilt.spso:
                assert got[o][0] is rec.state, "every terminal record is durable"


@pytest.mark.timeout(400)
def test_engine_agrees_with_reference_model(record_property: pytest.RecordProperty) -> None:
    run_state_machine_as_test(
        EngineMachine,
        settings=settings(
            max_examples=int(os.environ.get("SHAREQ_MODEL_EXAMPLES", "5000")),
            stateful_step_count=50,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )
    for name, value in COUNTER.items():
        record_property(name, value)
    print(
        f"\nreference-model run: {COUNTER['runs']} examples, {COUNTER['steps']} checked steps, "
        f"{COUNTER['acquired']} records acquired, {COUNTER['acks_ok']} acknowledgements applied, "
        f"{COUNTER['acks_refused']} refused, {COUNTER['writes_failed']} failed writes, "
        f"{COUNTER['parked_ok']} acknowledgements committed after other steps, "
        f"{COUNTER['lapsed']} rolled back after their lock lapsed, "
        f"{COUNTER['log_start_moves']} log start moves, {COUNTER['dead_letter_rounds']} dead-letter rounds"
    )
    assert COUNTER["steps"] > 100_000
    assert COUNTER["acks_ok"] > 0 and COUNTER["acks_refused"] > 0 and COUNTER["writes_failed"] > 0
    assert COUNTER["parked_ok"] > 0 and COUNTER["lapsed"] > 0 and COUNTER["log_start_moves"] > 0
    assert COUNTER["dead_letter_rounds"] > 0
