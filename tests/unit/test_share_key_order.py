"""Key-ordered share-partitions (``shareq.share.ordering=key``): scenarios and a property test of
the engine against a reference model of the rule.

The rule (docs/key-ordering.md): a record of key k is handed out only when every earlier
non-terminal record of k goes out in the same acquisition to the same member, and no record of k is
held by anyone. The model keeps every offset's key and state; a state machine drives random
produces, acquisitions (both modes, small limits), acknowledgements of every type (RELEASEs with a
redelivery backoff in some runs, REJECTs to a dead-letter queue in others), lock expiry, member
departures, transactional acknowledgements and their COMMIT or ABORT markers, failed state writes,
the log start moving past the SPSO and restarts from persisted state. After every acquisition it
checks the rule and that the earliest record the rule allows was the first one handed out (a
blocked key never blocks another); after every step, that the engine's held records per key (kept
as records change) equal the ones derived from the states from scratch.
"""

from __future__ import annotations

import uuid

import numpy as np
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
)
from shareq.share.key_order import KeyView
from shareq.share.persister import SharePartitionKey

KEY = SharePartitionKey(group_id="g", topic_id=uuid.UUID(int=9), partition=0)
MEMBERS = ("m1", "m2", "m3")
TERMINAL = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


class Harness:
    """A share-partition over a log of keyed records, persisting every write at once."""

    def __init__(self, config: ShareConfig) -> None:
        self.config = config
        self.persister = MemoryPersister()
        self.keys: list[int] = []  # key hash per offset (0 = null key)
        self.batches: list[tuple[int, int]] = []
        self.log_start = 0
        self.now = 0
        self.fail_next = 0  # writes to refuse (rolled back) before the next succeeds
        self.engine = SharePartition(KEY, config)
        self.drive(self.engine.initialize(None, log_end_offset=0))

    def drive(self, write: PendingWrite | None) -> None:
        queue = [write] if write is not None else []
        while queue:
            write = queue.pop(0)
            ok = self.fail_next <= 0
            if ok:
                self.persister.apply(write.params)
            else:
                self.fail_next -= 1
            done = self.engine.complete(write.handle, ok, self.now)
            queue.extend(done.writes)

    def produce(self, keys: list[int]) -> None:
        first = len(self.keys)
        self.keys.extend(keys)
        self.batches.append((first, len(self.keys) - 1))

    def view(self) -> KeyView:
        return KeyView(0, np.array(self.keys, dtype=np.uint32))

    def acquire(
        self, member: str, max_records: int, exact: bool = False, *, move: bool = True
    ) -> list[tuple[int, int]]:
        self.engine.mature(self.now)  # as the shell does before it asks where to read
        if move:
            self.move_log_start()
        start = max(self.engine.next_fetch_offset(), self.log_start)
        batches = [(max(b[0], self.log_start), b[1]) for b in self.batches if b[1] >= start]
        result = self.engine.acquire(
            member,
            batches,
            max_records=max_records,
            mode=AcquireMode.RECORD_LIMIT if exact else AcquireMode.BATCH_OPTIMIZED,
            now=self.now,
            keys=self.view(),
        )
        self.drive(result.write)
        return [
            (o, r.delivery_count) for r in result.records for o in range(r.first_offset, r.last_offset + 1)
        ]

    def move_log_start(self) -> None:
        """As the shell does before a read that would start below the log start."""
        if self.engine.next_fetch_offset() < self.log_start:
            self.drive(self.engine.update_log_start_offset(self.log_start, self.now))

    def ack(self, member: str, offsets: list[int], ack: AcknowledgeType) -> None:
        batches = [AcknowledgementBatch(o, o, (ack,)) for o in sorted(offsets)]
        self.drive(self.engine.acknowledge(member, batches, now=self.now).write)

    def states(self) -> dict[int, tuple[RecordState, str | None]]:
        out: dict[int, tuple[RecordState, str | None]] = {}
        for v in self.engine.runs():
            for o in range(v.first_offset, v.last_offset + 1):
                out[o] = (v.state, v.member)
        return out

    def held(self, now: int | None) -> dict[int, int]:
        """Held records per key, from the states: non-terminal and not acquirable (AVAILABLE and
        due at ``now``; None: AVAILABLE with no due time left to wait out)."""
        out: dict[int, int] = {}
        for v in self.engine.runs():
            if v.state in TERMINAL:
                continue
            if v.state is RecordState.AVAILABLE and (
                not v.available_at if now is None else v.available_at <= now
            ):
                continue
            for o in range(v.first_offset, v.last_offset + 1):
                if self.keys[o]:
                    out[self.keys[o]] = out.get(self.keys[o], 0) + 1
        return out

    def restart(self) -> None:
        self.engine = SharePartition(KEY, self.config)
        assert self.engine.initialize(self.persister.state(KEY)) is None


def held_by(h: Harness) -> dict[int, str]:
    return {o: m for o, (s, m) in h.states().items() if s is RecordState.ACQUIRED and m is not None}


# ---------------------------------------------------------------------------------- scenarios


def test_a_held_key_is_looked_past_and_follows_in_order_after_its_ack() -> None:
    h = Harness(ShareConfig())
    h.produce([1, 1, 2, 1, 3, 2])
    assert h.acquire("a", max_records=1, exact=True) == [(0, 1)]
    # b: key 1 is held by a, so 1, 3 are looked past; 2, 4, 5 (keys 2, 3, 2) go out in order
    assert [o for o, _ in h.acquire("b", max_records=10)] == [2, 4, 5]
    assert h.acquire("c", max_records=10) == []
    h.ack("a", [0], AcknowledgeType.ACCEPT)
    assert [o for o, _ in h.acquire("c", max_records=10)] == [1, 3]


def test_a_release_puts_the_key_back_in_offset_order() -> None:
    h = Harness(ShareConfig())
    h.produce([5, 5, 5, 7])
    assert [o for o, _ in h.acquire("a", max_records=10)] == [0, 1, 2, 3]
    h.ack("a", [0], AcknowledgeType.ACCEPT)
    h.ack("a", [1, 2], AcknowledgeType.RELEASE)
    h.ack("a", [3], AcknowledgeType.ACCEPT)
    assert h.acquire("b", max_records=10) == [(1, 2), (2, 2)]


def test_a_later_record_held_blocks_an_earlier_released_one() -> None:
    """A member released an earlier record and kept a later one of the key: nobody else gets the key
    until it lets go (at most one member holds a key)."""
    h = Harness(ShareConfig())
    h.produce([5, 5])
    h.acquire("a", max_records=10)
    h.ack("a", [0], AcknowledgeType.RELEASE)
    assert h.acquire("b", max_records=10) == []
    h.ack("a", [1], AcknowledgeType.RELEASE)
    assert [o for o, _ in h.acquire("b", max_records=10)] == [0, 1]


def test_null_keys_are_unordered() -> None:
    h = Harness(ShareConfig())
    h.produce([0, 0, 0])
    assert [o for o, _ in h.acquire("a", max_records=1, exact=True)] == [0]
    assert [o for o, _ in h.acquire("b", max_records=1, exact=True)] == [1]


def test_expiry_and_restart_derive_the_blocked_set_again() -> None:
    h = Harness(ShareConfig(record_lock_duration_ms=1_000))
    h.produce([1, 2, 1, 2])
    assert [o for o, _ in h.acquire("a", max_records=1, exact=True)] == [0]
    assert [o for o, _ in h.acquire("b", max_records=10)] == [1, 3]
    h.ack("b", [1, 3], AcknowledgeType.ACCEPT)
    h.restart()  # a's lease is gone: record 0 is AVAILABLE again and first of key 1
    assert [o for o, _ in h.acquire("c", max_records=10)] == [0, 2]
    h.now = 5_000
    h.drive(h.engine.expire(h.now))
    assert [o for o, _ in h.acquire("d", max_records=10)] == [0, 2]


def test_records_looked_past_are_counted_as_waiting() -> None:
    h = Harness(ShareConfig())
    h.produce([1, 1, 1, 2])
    h.acquire("a", max_records=1, exact=True)
    h.acquire("b", max_records=10)
    assert h.engine.key_stats is not None
    assert h.engine.key_stats.blocked_keys == 2 or h.engine.key_stats.waiting == 2


def test_without_keys_the_engine_is_unchanged() -> None:
    h = Harness(ShareConfig())
    h.produce([1, 1, 1])
    r = h.engine.acquire("a", [(0, 2)], max_records=1, mode=AcquireMode.RECORD_LIMIT, now=0)
    r2 = h.engine.acquire("b", [(1, 2)], max_records=5, now=0)
    assert [(x.first_offset, x.last_offset) for x in r.records] == [(0, 0)]
    assert [(x.first_offset, x.last_offset) for x in r2.records] == [(1, 2)]
    assert h.engine.key_stats is None


# ---------------------------------------------------------------------------------- property


class KeyOrderMachine(RuleBasedStateMachine):
    @initialize(
        limit=st.integers(2, 6),
        window=st.sampled_from([8, 1000]),
        backoff=st.booleans(),
        dlq=st.booleans(),
    )
    def setup(self, limit: int, window: int, backoff: bool, dlq: bool) -> None:
        from shareq.share.backoff import RedeliveryBackoff

        self.h = Harness(
            ShareConfig(
                delivery_count_limit=limit,
                max_record_locks=window,
                record_lock_duration_ms=1_000,
                backoff=RedeliveryBackoff(base_ms=150, jitter=0.0) if backoff else None,
                dlq_enabled=dlq,
            )
        )
        self.window = window
        self.epochs: dict[int, int] = {}

    @rule(keys=st.lists(st.integers(0, 4), min_size=1, max_size=6))
    def produce(self, keys: list[int]) -> None:
        self.h.produce(keys)

    @precondition(lambda self: len(self.h.keys) > self.h.engine.spso)
    @rule(member=st.sampled_from(MEMBERS), max_records=st.integers(1, 6), exact=st.booleans())
    def acquire(self, member: str, max_records: int, exact: bool) -> None:
        h = self.h
        h.engine.mature(h.now)
        h.move_log_start()  # before the model looks: a failed move leaves the records held
        before = h.states()
        keys = h.keys
        spso = h.engine.spso
        held = set(h.held(h.now))
        due = {
            o
            for v in h.engine.runs()
            if v.available_at > h.now
            for o in range(v.first_offset, v.last_offset + 1)
        }

        def state(o: int) -> RecordState | None:
            return before[o][0] if o in before else None

        def open_(o: int) -> bool:  # AVAILABLE and not waiting out a delay, or not in flight yet
            s = state(o)
            return s is None or (s is RecordState.AVAILABLE and o not in due)

        # the reference: the earliest offset the rule lets out
        eligible = [
            o
            for o in range(max(spso, h.log_start), len(keys))
            if open_(o)
            and (keys[o] == 0 or keys[o] not in held)
            and (state(o) is not None or o < spso + self.window)
        ]
        got = [o for o, _ in h.acquire(member, max_records, exact, move=False)]
        if eligible:
            assert got and got[0] == eligible[0], (got, eligible)
        assert got == sorted(got)
        taken = set(got)
        for o in got:
            k = keys[o]
            assert open_(o)
            if k == 0:
                continue
            assert k not in held, f"offset {o}: key {k} was held"
            for p in range(max(spso, h.log_start), o):  # below the log start: gone
                if keys[p] == k and (state(p) not in TERMINAL):
                    assert p in taken, f"offset {o} out before earlier {p} of key {k}"

    @precondition(lambda self: bool(held_by(self.h)))
    @rule(data=st.data(), ack=st.sampled_from(list(AcknowledgeType)[:3]))
    def acknowledge(self, data: st.DataObject, ack: AcknowledgeType) -> None:
        owned = held_by(self.h)
        if not owned:
            return
        member = data.draw(st.sampled_from(sorted(set(owned.values()))))
        mine = sorted(o for o, m in owned.items() if m == member)
        picked = data.draw(st.lists(st.sampled_from(mine), min_size=1, unique=True))
        self.h.ack(member, picked, ack)

    @precondition(lambda self: bool(held_by(self.h)))
    @rule(member=st.sampled_from(MEMBERS), ack=st.sampled_from(list(AcknowledgeType)[:4]))
    def member_acknowledges_all(self, member: str, ack: AcknowledgeType) -> None:
        mine = sorted(o for o, m in held_by(self.h).items() if m == member)
        if mine:
            self.h.ack(member, mine, ack)

    @rule(dt=st.integers(1, 600))
    def advance_clock(self, dt: int) -> None:
        self.h.now += dt
        self.h.engine.mature(self.h.now)  # as the shell's timer does at a due time
        self.h.drive(self.h.engine.expire(self.h.now))

    @rule(member=st.sampled_from(MEMBERS))
    def member_leaves(self, member: str) -> None:
        self.h.drive(self.h.engine.release_member(member, self.h.now))

    @rule()
    def restart(self) -> None:
        self.h.restart()

    @rule(n=st.integers(1, 2))
    def writes_fail(self, n: int) -> None:
        """The next writes are refused (each rolls back; an expiry is retried later)."""
        self.h.fail_next = n

    @precondition(lambda self: bool(held_by(self.h)))
    @rule(
        data=st.data(),
        ack=st.sampled_from([AcknowledgeType.ACCEPT, AcknowledgeType.REJECT]),
        pid=st.integers(1, 2),
    )
    def stage(self, data: st.DataObject, ack: AcknowledgeType, pid: int) -> None:
        owned = held_by(self.h)
        if not owned:
            return
        member = data.draw(st.sampled_from(sorted(set(owned.values()))))
        mine = sorted(o for o, m in owned.items() if m == member)
        picked = sorted(data.draw(st.lists(st.sampled_from(mine), min_size=1, unique=True)))
        batches = [AcknowledgementBatch(o, o, (ack,)) for o in picked]
        epoch = self.epochs.setdefault(pid, 0)
        self.h.drive(
            self.h.engine.stage(member, batches, producer_id=pid, producer_epoch=epoch, now=self.h.now)
        )

    @precondition(lambda self: self.h.engine.tx_pending_count() > 0)
    @rule(pid=st.integers(1, 2), commit=st.booleans())
    def marker(self, pid: int, commit: bool) -> None:
        h = self.h
        epoch = self.epochs.get(pid, 0)
        h.persister.marker(pid, epoch, commit=commit)
        h.drive(h.engine.end_transaction(pid, epoch, commit=commit, now=h.now).write)
        self.epochs[pid] = epoch + 1

    @precondition(lambda self: self.h.engine.archiving_count() > 0)
    @rule()
    def dead_letter(self) -> None:
        spans = self.h.engine.archiving_spans()
        if spans:
            self.h.drive(self.h.engine.dead_lettered_spans([(f, la) for f, la, _ in spans]))

    @rule(data=st.data())
    def log_start_moves(self, data: st.DataObject) -> None:
        h = self.h
        if len(h.keys) <= h.log_start:
            return
        h.log_start = data.draw(st.integers(h.log_start + 1, min(len(h.keys), h.log_start + 4)))
        h.drive(h.engine.update_log_start_offset(h.log_start, h.now))

    @invariant()
    def held_counts_follow_the_states(self) -> None:
        if not hasattr(self, "h"):
            return
        counts = self.h.engine.held_keys()
        if counts is not None:
            assert counts == self.h.held(None), (counts, self.h.held(None))

    @invariant()
    def one_member_per_key(self) -> None:
        if not hasattr(self, "h"):
            return
        owners: dict[int, set[str]] = {}
        for o, m in held_by(self.h).items():
            k = self.h.keys[o]
            if k:
                owners.setdefault(k, set()).add(m)
        assert all(len(ms) == 1 for ms in owners.values()), owners


@pytest.mark.timeout(120)
def test_engine_against_the_reference_model() -> None:
    run_state_machine_as_test(
        KeyOrderMachine,
        settings=settings(
            max_examples=int(__import__("os").environ.get("SHAREQ_KEY_EXAMPLES", "300")),
            stateful_step_count=60,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        ),
    )


def test_a_key_waits_out_the_redelivery_backoff_of_its_released_record() -> None:
    from shareq.share.backoff import RedeliveryBackoff

    h = Harness(ShareConfig(backoff=RedeliveryBackoff(base_ms=1_000, jitter=0.0)))
    h.produce([5, 5, 7])
    assert [o for o, _ in h.acquire("a", max_records=1, exact=True)] == [0]
    h.ack("a", [0], AcknowledgeType.RELEASE)  # record 0 comes back in 1 s
    assert [o for o, _ in h.acquire("b", max_records=10)] == [2]  # key 5 waits; key 7 goes
    h.now = 999
    assert h.acquire("c", max_records=10) == []
    h.now = 1_000
    assert [o for o, _ in h.acquire("c", max_records=10)] == [0, 1]
