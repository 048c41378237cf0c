"""The explicit state of one share-partition: what ``SharePartition`` and its helpers share.

The offsets (SPSO, end offset, the read-gap window left by persisted state, a pending log-start
move), the delivery-complete count, the in-flight runs, the acquisition locks by deadline and by
member, and the writes in flight. The helpers (the acquire walk, the log-start move, the TX_PENDING
row, the dead-letter hand-off, the building of state writes) receive this object instead of reaching
into ``SharePartition``'s private fields; the bookkeeping every one of them needs (taking and moving
locks, the terminal prefix and the SPSO it gives) lives here, once.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

from shareq.share import window as _window
from shareq.share.acquisition_lock import AcquisitionLock, DeadlineIndex
from shareq.share.in_flight import ARCHIVING_BYTE, InFlightBatch, InFlightMap
from shareq.share.persister import NO_START_OFFSET, SharePartitionKey
from shareq.share.record_state import TERMINAL, RecordState
from shareq.share.record_state import release_target as _release_target
from shareq.share.transition import StateTransition
from shareq.share.types import ShareConfig

if TYPE_CHECKING:
    from shareq.share.key_order import HeldKeys

_ARCHIVING = RecordState.ARCHIVING


class PartitionState:
    """Offsets, counts, runs, locks and pending writes of one share-partition (no behaviour of
    its own beyond the bookkeeping that keeps them consistent)."""

    __slots__ = (
        "absent_span",
        "config",
        "covered",
        "dcc",
        "durable_spso",
        "end",
        "gap_cursor",
        "gap_end",
        "handles",
        "held_keys",
        "key",
        "leader_epoch",
        "locks",
        "log_start_floor",
        "member_locks",
        "pending",
        "runs",
        "spso",
        "state_epoch",
        "tx_pending",
    )

    def __init__(self, key: SharePartitionKey, config: ShareConfig, leader_epoch: int) -> None:
        self.key = key
        self.config = config
        self.leader_epoch = leader_epoch
        self.state_epoch = 0
        self.runs = InFlightMap()
        self.locks = DeadlineIndex()
        self.member_locks: dict[str, list[AcquisitionLock]] = {}
        """Locks per member, for a member's release; released ones are dropped lazily (compaction)."""
        self.pending: dict[int, StateTransition] = {}
        """The writes started and not yet completed, by handle."""
        self.handles = itertools.count(1)
        self.spso = 0
        self.durable_spso = NO_START_OFFSET
        """The start offset the committed writes made durable."""
        self.end = 0
        """Exclusive end of the in-flight region (the SPEO)."""
        self.gap_cursor = 0
        self.gap_end = 0
        """[gap_cursor, gap_end): the read-gap window persisted state left, not yet filled."""
        self.dcc = 0
        """Delivery-complete count: terminal records at or after the SPSO."""
        self.covered = 0
        """Records the in-flight runs cover (at or after the SPSO): ``covered - dcc`` are in play."""
        self.absent_span = (0, 0)
        """[from, to): offsets up to the end offset that hold share state alone (pass_absent)."""
        self.log_start_floor = -1
        """The start offset a pending log-start move goes to (-1: none)."""
        self.tx_pending = 0
        """Records TX_PENDING."""
        self.held_keys: HeldKeys | None = None
        """A key-ordered group's held records per key hash (``key_order.py``); None until its
        first acquisition by key derives them, and again once one comes without keys."""

    def next_handle(self) -> int:
        """The handle of the next write."""
        return next(self.handles)

    def next_fetch_offset(self) -> int:
        """Where the next log read starts: the first AVAILABLE offset with no transition in
        progress, or the first unfilled gap left by persisted state, else the end offset."""
        best = self.end
        avail = self.runs.first_acquirable(self.spso)
        if avail is not None and avail < best:
            best = avail
        hole = self.first_gap_hole()
        if hole is not None and hole < best:
            best = hole
        return best if best >= self.log_start_floor else self.log_start_floor

    def window_end(self) -> int:
        """The first offset a first-time acquisition may not reach: SPSO + the cap (Kafka's span
        rule), or in ``count`` mode the end offset plus the cap's room left by the non-terminal
        records, never past the span guard (``WINDOW_SPAN_GUARD`` caps from the SPSO)."""
        cfg = self.config
        if not cfg.window_count:
            return self.spso + cfg.max_record_locks
        return _window.count_window_end(self.covered - self.dcc, self.spso, self.end, cfg.max_record_locks)

    def release_target(self, run: InFlightBatch) -> RecordState:
        """Where a released run goes: AVAILABLE, or archived once out of deliveries."""
        cfg = self.config
        return _release_target(run.count, cfg.delivery_count_limit, dlq_enabled=cfg.dlq_enabled)

    def mature(self, now: int) -> bool:
        """Delayed runs due at ``now`` become acquirable (and stop holding their keys); whether
        any did."""
        held = self.held_keys
        if held is None:
            return self.runs.mature(now)
        spans: list[tuple[int, int]] = []
        matured = self.runs.mature(now, spans)
        for first, last in spans:
            held.add(first, last, -1)
        return matured

    # ------------------------------------------------------------------ lock bookkeeping
    def new_lock(self, deadline: int, first: int, last: int, member: str) -> AcquisitionLock:
        """A lock over ``first..last`` for ``member``, in the deadline index and the member's list."""
        lock = self.locks.new_lock(deadline=deadline, first=first, last=last)
        owned = self.member_locks.get(member)
        if owned is None:
            self.member_locks[member] = [lock]
        else:
            n = len(owned)
            if n >= 64 and n & (n - 1) == 0:  # amortized compaction of released locks
                owned[:] = [lk for lk in owned if lk.held > 0]
            owned.append(lock)
        return lock

    def move_to_lock(self, run: InFlightBatch, lock: AcquisitionLock) -> None:
        """``run`` is held by ``lock`` from now on (no longer by the lock it had)."""
        size = run.last - run.first + 1
        self.unhold(run.lock, size)
        run.lock = lock
        lock.held += size

    def unhold(self, lock: AcquisitionLock | None, size: int) -> None:
        """``size`` records left ``lock`` (a lock holding nothing is dropped lazily)."""
        if lock is not None:
            lock.held -= size

    # ------------------------------------------------------------------ SPSO
    def first_gap_hole(self) -> int | None:
        """The first offset of the persisted-state read gap not yet filled or known absent."""
        cursor = max(self.gap_cursor, self.spso)
        gap_end = self.gap_end
        if cursor >= gap_end:
            self.gap_cursor = cursor
            return None
        runs = self.runs
        while cursor < gap_end:
            run = runs.run_at(cursor)
            if run is None:
                break
            cursor = run.last + 1
        self.gap_cursor = cursor
        return cursor if cursor < gap_end else None

    def terminal_prefix(
        self, txn: StateTransition | None, targets: dict[int, RecordState]
    ) -> tuple[int, int, int]:
        """(new SPSO, terminal records it passes, whole runs it passes) if ``txn`` committed now.

        The SPSO may stop inside a run with a state per record, at its first ARCHIVING one."""
        hole = self.first_gap_hole()
        spso = self.spso
        dropped = 0
        nruns = 0
        marked = txn.marks if txn is not None else None
        for run in self.runs:
            if run.first > spso:
                if hole is not None and hole < run.first:
                    return hole, dropped, nruns
                spso = run.first
            marks = run.marks
            if run.txn is None:
                state = run.state
            elif run.txn is txn and run.first in targets:
                state = targets[run.first]
                if marked is not None and run.first in marked:
                    marks = marked[run.first].marks
            else:
                return spso, dropped, nruns
            if state is _ARCHIVING and marks is not None:  # terminal up to its first ARCHIVING record
                done = marks.find(ARCHIVING_BYTE)
                return run.first + done, dropped + done, nruns
            if state not in TERMINAL:
                return spso, dropped, nruns
            dropped += run.last - run.first + 1
            nruns += 1
            spso = run.last + 1
        if hole is not None:
            return max(hole, spso), dropped, nruns
        return max(spso, self.end), dropped, nruns

    def advance_spso(self) -> None:
        """Move the SPSO over the terminal prefix, dropping the runs it passes."""
        spso, dropped, nruns = self.terminal_prefix(None, {})
        runs = self.runs
        runs.drop_first(nruns)
        first = runs.first_run()
        if first is not None and first.first < spso and first.marks is not None:  # stops inside it
            runs.trim_front(first, spso)
        self.dcc -= dropped
        self.covered -= dropped  # every record the SPSO passes is terminal
        self.spso = spso
        if self.end < spso:
            self.end = spso
        if self.gap_cursor < spso:
            self.gap_cursor = spso

    def written_spso(self) -> int:
        """The start offset the writes made so far leave durable once they all commit."""
        written = self.durable_spso
        for txn in self.pending.values():
            if txn.start_offset > written:
                written = txn.start_offset
        return written
