"""SharePartition: one share group's in-flight view of one topic-partition (sans-I/O).

The shell drives it with explicit time (``now``, ms), feeds it the bounds of log batches it read at
``next_fetch_offset()``, and performs the durable writes it returns: every state change that must
survive a crash (acknowledgement, lock expiry, member release, archiving vanished records) is only
*started* here and comes back as a ``PendingWrite``; ``complete(handle, ok, now)`` then commits it
(and advances the SPSO) or rolls it back. Acquisitions are never persisted (a lease does not survive
a restart), so ``acquire`` applies at once.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence

from shareq.protocol.acknowledge_type import AcknowledgeType
from shareq.share import acquisition as _acq
from shareq.share import backoff as _backoff
from shareq.share import dead_letter_handoff as _dlq
from shareq.share import key_order as _key_order
from shareq.share import log_start as _log_start
from shareq.share import txn_pending as _txn
from shareq.share.acknowledgement import validate_acknowledgements
from shareq.share.acquisition_lock import AcquisitionLock
from shareq.share.errors import ShareEngineBug
from shareq.share.in_flight import InFlightBatch, marked_terminal, marks_summary
from shareq.share.partition_state import PartitionState
from shareq.share.persister import NO_START_OFFSET, SharePartitionKey, ShareState, WriteStateParams
from shareq.share.record_state import ACK_TARGETS, TERMINAL, RecordState
from shareq.share.state_write import start_offset_write, start_write
from shareq.share.stats import SharePartitionStats
from shareq.share.transition import MarkedTarget, StateTransition, TransitionKind
from shareq.share.types import (
    AcknowledgementBatch,
    AcknowledgeResult,
    AcquireMode,
    AcquireResult,
    CompleteResult,
    MarkerResult,
    PendingWrite,
    ResetPolicy,
    RunView,
    ShareConfig,
)

_ACQUIRED = RecordState.ACQUIRED
_AVAILABLE = RecordState.AVAILABLE
_ACKNOWLEDGED = RecordState.ACKNOWLEDGED
_ARCHIVED = RecordState.ARCHIVED
_ACCEPT = AcknowledgeType.ACCEPT
_RELEASE = AcknowledgeType.RELEASE
_REJECT = AcknowledgeType.REJECT
_ARCHIVING = RecordState.ARCHIVING
_TX_PENDING = RecordState.TX_PENDING
_GAP = AcknowledgeType.GAP
_ARCHIVED_BYTE = b"\x04"
_DONE_ACKS = frozenset({_ACCEPT, _REJECT, _GAP})
"""Acknowledge types that finish with a record: a stretch of only these may mark states per record."""
_NO_SPANS: list[tuple[int, int]] = []
_MARK_MIN_SEGMENTS = 3
"""Below this many equal-type segments a stretch is carved into runs (cheaper for a few pieces)."""


class SharePartition:
    """In-flight record state, acquisition locks and the SPSO of one share-partition."""

    def __init__(self, key: SharePartitionKey, config: ShareConfig | None = None, *, leader_epoch: int = 0):
        self.key = key
        self._state = PartitionState(key, config if config is not None else ShareConfig(), leader_epoch)
        self._initialized = False
        self.stats = SharePartitionStats()  # counters for metrics (read at scrape time)
        self.key_stats: _key_order.KeyOrderStats | None = None
        """Set once the group orders by key (``acquire`` with ``keys``): blocked keys, records waiting."""

    # ------------------------------------------------------------------ initialization
    def initialize(
        self,
        state: ShareState | None,
        *,
        reset: ResetPolicy = ResetPolicy.LATEST,
        log_start_offset: int = 0,
        log_end_offset: int = 0,
        offset_for_timestamp: int | None = None,
        state_epoch: int = 0,
    ) -> PendingWrite | None:
        """Load persisted state, or start at the reset policy's offset when there is none.

        ``offset_for_timestamp`` answers the by_duration lookup (the first offset whose timestamp
        is at or after now minus the duration; None if there is no such record). When the SPSO
        comes from the reset policy it is returned as a write so that it becomes durable.
        """
        if self._initialized:
            raise ShareEngineBug("share-partition already initialized")
        self._initialized = True
        if state is not None and state.start_offset >= 0:
            self._state.state_epoch = state.state_epoch
            self._load(state)
            return None
        self._state.state_epoch = state.state_epoch if state is not None else state_epoch
        if reset is ResetPolicy.EARLIEST:
            start = log_start_offset
        elif reset is ResetPolicy.LATEST:
            start = log_end_offset
        else:
            start = log_end_offset if offset_for_timestamp is None else offset_for_timestamp
            start = min(max(start, log_start_offset), log_end_offset)
        self._state.spso = self._state.end = self._state.gap_cursor = self._state.gap_end = start
        txn = StateTransition(self._state.next_handle(), TransitionKind.INITIALIZE)
        self._state.pending[txn.handle] = txn
        params = WriteStateParams(
            key=self.key,
            state_epoch=self._state.state_epoch,
            leader_epoch=self._state.leader_epoch,
            start_offset=start,
            delivery_complete_count=0,
            state_batches=(),
        )
        return PendingWrite(handle=txn.handle, params=params)

    def _load(self, state: ShareState) -> None:
        spso = state.start_offset
        end = spso
        runs = self._state.runs
        for batch in sorted(state.state_batches, key=lambda b: b.first_offset):
            first = max(batch.first_offset, spso, end)
            if batch.last_offset < first:
                continue
            st = RecordState(batch.delivery_state)
            if st is _ACQUIRED:  # never persisted by us; a lease does not survive a restart
                st = _AVAILABLE
            runs.insert(InFlightBatch(first, batch.last_offset, st, batch.delivery_count))
            if st in TERMINAL:
                self._state.dcc += batch.last_offset - first + 1
            end = batch.last_offset + 1
        self._state.spso = self._state.gap_cursor = spso
        self._state.durable_spso = spso
        self._state.end = self._state.gap_end = end
        if state.pending_txn_batches:
            _txn.load_pending(self._state, state.pending_txn_batches)
        if state.delays:
            _backoff.load_delays(runs, state.delays, spso)
        runs.coalesce(spso, self._state.end)
        self._state.covered = sum(run.last - run.first + 1 for run in runs)
        self._state.advance_spso()

    # ------------------------------------------------------------------ introspection
    @property
    def spso(self) -> int:
        """Share-partition start offset: everything below it is terminal."""
        return self._state.spso

    @property
    def end_offset(self) -> int:
        """Exclusive end of the in-flight region (the SPEO); a fresh fetch resumes here."""
        return self._state.end

    @property
    def speo(self) -> int:
        """Alias of ``end_offset`` in the KIP's vocabulary."""
        return self._state.end

    @property
    def delivery_complete_count(self) -> int:
        """Terminal records at or after the SPSO (KIP-1226 lag input)."""
        return self._state.dcc

    @property
    def state_epoch(self) -> int:
        return self._state.state_epoch

    @property
    def config(self) -> ShareConfig:
        return self._state.config

    @property
    def initialized(self) -> bool:
        return self._initialized

    def range_count(self) -> int:
        """Runs in the in-flight map (what memory and cost scale with)."""
        return len(self._state.runs)

    def pending_count(self) -> int:
        """Writes started and not yet completed."""
        return len(self._state.pending)

    def runs(self) -> tuple[RunView, ...]:
        """Every in-flight run at or above the SPSO, adjacent equal (state, count, member) merged."""
        return self._state.runs.views()

    def in_flight(self) -> Iterator[InFlightBatch]:
        """The live in-flight runs in offset order, for read-only inspection (metrics, web view);
        a run with a state per record comes as one detached run per equal-state stretch."""
        return itertools.chain.from_iterable(run.pieces() for run in self._state.runs)

    def tx_pending_count(self) -> int:
        """Records TX_PENDING (staged by a transaction that has not ended)."""
        return self._state.tx_pending

    def tx_pending_by_producer(self) -> dict[int, int]:
        """TX_PENDING record counts per producer id of the transaction holding them."""
        return _txn.pending_by_producer(self._state)

    def next_deadline(self) -> int | None:
        """The earliest acquisition-lock deadline still holding records, or redelivery due time
        of a delayed record (ms), or None."""
        lock = self._state.locks.next_deadline()
        due = self._state.runs.next_due()
        if due is None:
            return lock
        return due if lock is None or due < lock else lock

    def mature(self, now: int) -> bool:
        """Delayed records due at ``now`` become acquirable; whether any did (the shell then
        wakes fetches parked on this share-partition)."""
        return self._state.mature(now)

    def delayed(self) -> tuple[int, int | None]:
        """(records waiting for their redelivery due time, the earliest due time in epoch ms)."""
        return self._state.runs.delayed()

    def next_fetch_offset(self) -> int:
        """Where the next log read starts: the first AVAILABLE offset with no transition in
        progress, or the first unfilled gap left by persisted state, else the end offset."""
        self._require_initialized()
        return self._state.next_fetch_offset()

    def read_end(self, max_records: int) -> int | None:
        """The last offset an acquisition of ``max_records`` from ``next_fetch_offset()`` can use,
        so the shell reads the log only that far; ``None`` when nothing is acquirable (nothing to
        re-deliver and the in-flight window is full), so it need not read at all.

        Re-deliveries lie below the end offset; first-time leases start inside the window (a
        batch-optimized lease runs on to its batch's end, which the log read includes anyway).
        """
        start = self.next_fetch_offset()
        window_last = self._state.window_end() - 1
        if start >= self._state.end and start > window_last:
            return None
        return min(start + max(max_records, 1) - 1, max(self._state.end - 1, window_last))

    def pass_absent(self, first: int, last: int) -> None:
        """Offsets ``first..last`` hold no record to deliver (the in-log persister's share-state
        control batches), and a read ended with them: the end offset moves past them, and the
        SPSO too when everything before them is done.

        They are never acquired, so they take no lock, no in-flight slot and no acknowledgement
        (a GAP acknowledgement would be written as share state, which would be passed, and so
        on). Nor does passing them write anything: a SPSO that moved over share state alone is
        as good durable where it was, since recovery reads past them the same way
        (:meth:`start_offset_write` knows). Offsets between two fetched batches need none of this:
        :meth:`acquire` passes them as it passes any offset the log does not return.
        """
        self._require_initialized()
        self._state.first_gap_hole()
        if first <= self._state.gap_cursor <= last:
            self._state.gap_cursor = last + 1
        if not first <= self._state.end <= last:
            return
        lo, hi = self._state.absent_span
        self._state.absent_span = (lo if hi == self._state.end else self._state.end, last + 1)
        self._state.end = last + 1
        self._state.advance_spso()

    def alter_config(self, config: ShareConfig) -> None:
        """Replace the group configuration; it applies to later acquisitions and releases."""
        self._state.config = config

    # ------------------------------------------------------------------ acquire
    def acquire(
        self,
        member: str,
        batches: Sequence[tuple[int, int]],
        *,
        max_records: int,
        batch_size: int | None = None,
        mode: AcquireMode = AcquireMode.BATCH_OPTIMIZED,
        now: int,
        keys: _key_order.KeyView | None = None,
    ) -> AcquireResult:
        """Lease records from ``batches`` (bounds of log batches read at ``next_fetch_offset()``).

        Re-delivers AVAILABLE records (delivery count + 1), leases new records up to the in-flight
        window (SPSO + max_record_locks), isolates records near the delivery limit, and archives
        in-flight records the log no longer holds.

        With ``keys`` (a key-ordered group: the key hash of every offset from the SPSO through the
        batches read) records whose key another record holds are looked past (``key_order.py``).
        """
        self._require_initialized()
        state = self._state
        state.mature(now)
        allowed = None
        held = state.held_keys
        if keys is None:
            state.held_keys = held = None  # the group went back to ``none``: derived again if needed
        elif batches:
            if self.key_stats is None:
                self.key_stats = _key_order.KeyOrderStats()
            if held is None:
                held = state.held_keys = _key_order.build(state, keys)
            allowed = _key_order.allowed_ranges(state, held, batches, keys, self.key_stats)
        old_end = state.end
        result = _acq.acquire(
            state,
            member,
            batches,
            max_records=max_records,
            batch_size=batch_size if batch_size is not None else max_records,
            exact=mode is AcquireMode.RECORD_LIMIT,
            now=now,
            allowed=allowed,
        )
        if allowed is not None:
            assert held is not None and keys is not None
            _key_order.hold_back(state, batches, allowed, old_end)
            held.remember(keys, state.end, state.spso)
            for r in result.records:  # open before (allowed), held now
                held.add(r.first_offset, r.last_offset, 1)
        self.stats.on_acquired(result)
        return result

    def key_view_start(self) -> int:
        """The first offset whose key hash a key-ordered acquisition needs in ``keys`` (through the
        end offset and the batches read)."""
        return _key_order.key_view_start(self._state)

    def held_keys(self) -> dict[int, int] | None:
        """Held records per key hash of a key-ordered share-partition (None until derived)."""
        held = self._state.held_keys
        return None if held is None else dict(held.flush())

    # ------------------------------------------------------------------ acknowledge
    def acknowledge(
        self,
        member: str,
        batches: Sequence[AcknowledgementBatch],
        *,
        now: int,
        release_delays: Sequence[tuple[int, int, int]] = (),
    ) -> AcknowledgeResult:
        """Start the transitions a client asked for; all or nothing.

        Raises ``InvalidRequest`` (malformed, overlapping, past the end) or ``InvalidRecordState``
        (not in flight, not acquired by ``member``, transition already in progress, one offset
        acknowledged twice, a RENEW the group turned off); then nothing changed. Offsets below
        the SPSO are skipped. Returns the write to persist (None when only renewals were asked;
        they applied). ``release_delays``: ``(first, last, ms)`` a client asked the RELEASEs there
        to wait before redelivery (capped by ``delay_ceiling_ms``, used instead of the backoff).
        """
        self._require_initialized()
        grouped = validate_acknowledgements(
            self._state.runs,
            member,
            batches,
            spso=self._state.spso,
            end=self._state.end,
            renew=self._state.config.renew_enabled,
        )
        if not grouped:  # all below the SPSO: already done
            return AcknowledgeResult(write=None)
        txn = StateTransition(self._state.next_handle(), TransitionKind.ACKNOWLEDGE)
        runs = self._state.runs
        pieces = txn.pieces
        durable = False
        targets = ACK_TARGETS[self._state.config.dlq_enabled]
        if release_delays:  # RELEASEs asking for different delays become runs of their own
            grouped = [_backoff.cut_at(stretch, release_delays) for stretch in grouped]
        for stretch in grouped:
            if len(stretch) >= _MARK_MIN_SEGMENTS and {seg[2] for seg in stretch} <= _DONE_ACKS:
                self._acknowledge_marked(txn, stretch, targets, now)
                durable = True
                continue
            carved = runs.carve(stretch)
            self.stats.on_acknowledged_runs(carved, now, self._state.config.record_lock_duration_ms)
            for run, ack in carved:
                target = self._state.release_target(run) if ack is _RELEASE else targets[ack]
                if target is not _ACQUIRED:  # all but a renewal are persisted
                    durable = True
                run.txn = txn
                pieces.append((run, target))
        if not durable:
            self._commit(txn, now)
            return AcknowledgeResult(write=None)
        if release_delays:
            _backoff.requested(txn, release_delays, self._state.config.delay_ceiling_ms, now)
        self._delay(txn, _backoff.Trigger.RELEASE, now)
        return AcknowledgeResult(write=start_write(self._state, txn))

    def _delay(self, txn: StateTransition, trigger: _backoff.Trigger, now: int) -> None:
        """Give the records ``txn`` makes AVAILABLE their redelivery due time, if the group delays."""
        backoff = self._state.config.backoff
        if backoff is not None and backoff.base_ms > 0:
            _backoff.schedule(backoff, self.key, txn, trigger, now)

    def _acknowledge_marked(
        self,
        txn: StateTransition,
        stretch: list[tuple[int, int, AcknowledgeType]],
        targets: dict[AcknowledgeType, RecordState],
        now: int,
    ) -> None:
        """Acknowledge a stretch of ACCEPT, REJECT and GAP segments without cutting runs: each
        acquired run under it takes a state per record (``marks``), set segment by segment.

        Counted as the carving path counts: records per type, and one latency sample per segment
        of each run."""
        runs = self._state.runs
        stats = self.stats
        acked = stats.acknowledged
        fill = {ack: int(targets[ack]) for ack in _DONE_ACKS}
        lock_ms = self._state.config.record_lock_duration_ms
        first, last = stretch[0][0], stretch[-1][1]
        runs.isolate(first, last)
        marked = txn.marks
        if marked is None:
            marked = txn.marks = {}
        pieces = txn.pieces
        i = 0
        n = len(stretch)
        for run in runs.overlapping(first, last):
            rf, rl = run.first, run.last
            while stretch[i][1] < rf:
                i += 1
            j = i
            while j < n and stretch[j][0] <= rl:
                j += 1
            lock = run.lock
            if lock is not None:
                stats.on_lock_acknowledged(lock, j - i, now, lock_ms)
            run.txn = txn
            if j - i == 1:  # one type over the whole run: an ordinary piece
                ack = stretch[i][2]
                acked[ack] += rl - rf + 1
                pieces.append((run, RecordState(fill[ack])))
                continue
            segs = stretch[i:j]  # only the first and the last may reach past the run
            if segs[0][0] < rf:
                segs[0] = (rf, segs[0][1], segs[0][2])
            if segs[-1][1] > rl:
                segs[-1] = (segs[-1][0], rl, segs[-1][2])
            marks, deltas = run.acknowledged_marks(segs, fill)
            for lo, hi, ack in segs:
                acked[ack] += hi - lo + 1
            marked[rf] = MarkedTarget(marks, deltas=deltas)
            pieces.append((run, marks_summary(marks)))
            i = j - 1  # the last segment may go on into the next run

    # ------------------------------------------------------------------ transactions (KIP-1289)
    def stage(
        self,
        member: str,
        batches: Sequence[AcknowledgementBatch],
        *,
        producer_id: int,
        producer_epoch: int,
        now: int,
    ) -> PendingWrite | None:
        """Start staging acknowledgements for transaction ``producer_id``; all or nothing.

        Only ACCEPT, REJECT and GAP may be staged, and only on records ``member`` holds ACQUIRED
        (or already staged by this transaction with the same type: a retry, a no-op). Raises like
        ``acknowledge``. The records become TX_PENDING when the returned write completes; None when
        there was nothing left to stage.
        """
        self._require_initialized()
        return _txn.start_stage(
            self._state, self._state.next_handle(), member, batches, producer_id, producer_epoch
        )

    def validate_stage(
        self, member: str, batches: Sequence[AcknowledgementBatch], *, producer_id: int, producer_epoch: int
    ) -> None:
        """Raise as ``stage`` would, changing nothing."""
        self._require_initialized()
        _txn.validate_stage(self._state, member, batches, producer_id, producer_epoch)

    def end_transaction(
        self, producer_id: int, producer_epoch: int, *, commit: bool, now: int
    ) -> MarkerResult:
        """The COMMIT or ABORT marker of ``producer_id`` (epoch at or above the staged one) is durable
        in this share-partition's state log: settle what that transaction staged."""
        self._require_initialized()
        state = self._state
        resolved, archiving, lapsed = _txn.apply_marker(state, producer_id, producer_epoch, commit, now)
        write = self.expire(now) if lapsed else None
        return MarkerResult(resolved=resolved, spso=state.spso, write=write, archiving=archiving)

    # ------------------------------------------------------------------ locks and members
    def expire(self, now: int) -> PendingWrite | None:
        """Release every record whose acquisition lock is due (``deadline <= now``).

        The records become AVAILABLE (or archived once out of deliveries) when the write completes.
        """
        due = self._state.locks.pop_due(now)
        if not due:
            return None
        txn = StateTransition(self._state.next_handle(), TransitionKind.EXPIRE)
        for lock in due:
            self._collect_release(txn, lock, None)
        if not txn.pieces:
            return None
        self._delay(txn, _backoff.Trigger.TIMEOUT, now)
        return start_write(self._state, txn)

    def release_member(self, member: str, now: int) -> PendingWrite | None:
        """A member left (or its share session closed): release its records at once.

        Records of the member whose acknowledgement is being persisted stay with it; if that write
        fails they are found here again by a later call, or released when their lock expires.
        """
        _txn.forget_owner(self._state, member)
        locks = self._state.member_locks.pop(member, None)
        if not locks:
            return None
        txn = StateTransition(self._state.next_handle(), TransitionKind.RELEASE_MEMBER)
        kept: list[AcquisitionLock] = []
        for lock in sorted(locks, key=lambda lk: lk.first):
            if lock.held > 0 and lock.held > self._collect_release(txn, lock, member):
                kept.append(lock)
        if kept:
            self._state.member_locks[member] = kept
        if not txn.pieces:
            return None
        self._delay(txn, _backoff.Trigger.LEAVE, now)
        return start_write(self._state, txn)

    def _collect_release(self, txn: StateTransition, lock: AcquisitionLock, member: str | None) -> int:
        """Add ``lock``'s idle ACQUIRED runs to ``txn``; returns how many records that took."""
        taken = 0
        for run in list(self._state.runs.overlapping(lock.first, lock.last)):
            if run.lock is lock and run.txn is None and run.state is _ACQUIRED:
                if member is not None and run.member != member:
                    continue
                run.txn = txn
                txn.pieces.append((run, self._state.release_target(run)))
                taken += run.last - run.first + 1
        return taken

    def update_log_start_offset(self, offset: int, now: int) -> PendingWrite | None:
        """The log now starts at ``offset`` (retention, DeleteRecords): move the SPSO up to it.

        Records below it are archived and dropped once the write commits, ACQUIRED ones included.
        None when there is nothing to move (or a move or a transition below ``offset`` is pending:
        ask again later).
        """
        self._require_initialized()
        return _log_start.start_move(self._state, self._state.next_handle(), offset)

    # ------------------------------------------------------------------ dead-letter hand-off
    def archiving_runs(self, max_records: int | None = None) -> tuple[RunView, ...]:
        """Runs waiting for the dead-letter queue (ARCHIVING, no transition in progress), adjacent
        ones of equal delivery count merged; with ``max_records``, the first runs holding at least
        that many (the scan stops there: the writer takes a bounded round from the front)."""
        return tuple(
            RunView(first_offset=first, last_offset=last, state=_ARCHIVING, delivery_count=count, member=None)
            for first, last, count in self.archiving_spans(max_records)
        )

    def archiving_spans(self, max_records: int | None = None) -> list[tuple[int, int, int]]:
        """``archiving_runs`` as ``(first, last, delivery count)``: what the dead-letter writer
        takes, without a view per run (a REJECT every tenth record makes hundreds a round); with
        ``max_records``, exactly the first that many records (the last span cut)."""
        return _dlq.archiving_spans(self._state.runs, max_records)

    def dead_lettered(self, first: int, last: int) -> PendingWrite | None:
        """The DLQ writer produced ``first..last``: their ARCHIVING records become ARCHIVED."""
        return self.dead_lettered_spans(((first, last),))

    def dead_lettered_spans(self, spans: Sequence[tuple[int, int]]) -> PendingWrite | None:
        """The DLQ writer produced the records of ascending ``spans`` (what ``archiving_runs``
        named): their ARCHIVING records become ARCHIVED once the returned write commits."""
        return _dlq.start_dead_lettered(self._state, spans)

    def archiving_count(self) -> int:
        """Records ARCHIVING (waiting for, or being written to, the dead-letter queue)."""
        return _dlq.archiving_count(self._state.runs)

    # ------------------------------------------------------------------ persist, then commit
    def complete(self, handle: int, ok: bool, now: int) -> CompleteResult:
        """Finish a pending write: commit it (``ok``) or roll it back.

        A rolled-back acknowledgement whose lock lapsed meanwhile is released as an expiry would
        (returned as a follow-up write); a failed expiry or member release is retried after
        ``persist_retry_backoff_ms`` through the lock index.
        """
        txn = self._state.pending.get(handle)
        if txn is None:
            raise ShareEngineBug(f"no pending write with handle {handle}")
        if ok and txn.pieces:
            txn.check_legal()  # before anything changes: a refused commit leaves the write pending
        del self._state.pending[handle]
        if ok:
            if txn.kind is TransitionKind.INITIALIZE:
                self._state.durable_spso = self._state.spso
                return CompleteResult(committed=True, spso=self._state.spso, records_released=False)
            if txn.kind is TransitionKind.LOG_START:
                _log_start.commit_move(self._state, txn)
                # the move wrote the new log start; the SPSO may have advanced past terminal
                # records above it, and is written like any catch-up once nothing is in flight
                catch_up = self.start_offset_write()
                return CompleteResult(
                    committed=True,
                    spso=self._state.spso,
                    records_released=False,
                    writes=() if catch_up is None else (catch_up,),
                )
            archiving = any(target is _ARCHIVING for _, target in txn.pieces)
            released = self._commit(txn, now)
            if txn.start_offset != NO_START_OFFSET:
                self._state.durable_spso = max(self._state.durable_spso, txn.start_offset)
            # Writes in flight together each carried the SPSO they could see alone (a prefix
            # still in transition stops it), so the last to commit may leave the SPSO ahead of
            # the durable one, with nothing left to write it: write it now.
            catch_up = self.start_offset_write()
            return CompleteResult(
                committed=True,
                spso=self._state.spso,
                records_released=released,
                archiving=archiving,
                writes=() if catch_up is None else (catch_up,),
            )
        if txn.kind is TransitionKind.LOG_START:
            self._state.log_start_floor = -1
        follow_ups = self._rollback(txn, now)
        return CompleteResult(
            committed=False, spso=self._state.spso, records_released=False, writes=follow_ups
        )

    def _commit(self, txn: StateTransition, now: int) -> bool:
        runs = self._state.runs
        released = False
        renew_lock: AcquisitionLock | None = None
        touched: list[tuple[int, int]] = []
        committed: dict[RecordState, int] = {}  # records per target, for the counters
        marked = txn.marks
        dues = txn.dues
        held = self._state.held_keys
        before: list[tuple[int, int]] = []
        for run, target in txn.pieces:
            if held is not None:
                before = held.spans(run)
            run.txn = None
            size = run.last - run.first + 1
            touched.append((run.first, run.last))
            if marked is not None and run.first in marked:
                self._commit_marked(run, marked[run.first], target, committed)
                if held is not None:
                    held.settle(run, before)
                continue
            if target is _TX_PENDING:
                _txn.commit_stage(self._state, run)
                continue
            if target is _ACQUIRED:  # a renewal: same state, a fresh lock from the commit on
                if renew_lock is None:
                    deadline = now + self._state.config.record_lock_duration_ms
                    renew_lock = self._state.new_lock(deadline, run.first, run.last, run.member or "")
                renew_lock.last = run.last
                self._state.move_to_lock(run, renew_lock)
                continue
            state = run.state
            if state is _ACQUIRED:
                run.unlock()
            run.state = target
            committed[target] = committed.get(target, 0) + size
            if target is _ACKNOWLEDGED or target is _ARCHIVED:  # TERMINAL, by identity
                self._state.dcc += size
            elif target is _AVAILABLE:
                released = True
                if dues is not None:
                    run.due = dues.get(run.first, 0)
            if state is _AVAILABLE or target is _AVAILABLE:  # only these are or become acquirable
                runs.reindex(run)
            if held is not None:
                held.settle(run, before)
        for target, size in committed.items():
            self.stats.on_committed(txn.kind, target, size)
        # the SPSO first: runs it passes are dropped, so only the touched spans still in flight
        # are coalesced (REJECTs among ACCEPTs leave thousands of spans, mostly passed at once)
        self._state.advance_spso()
        spso = self._state.spso
        runs.coalesce_spans([span for span in touched if span[1] >= spso])
        return released

    def _commit_marked(
        self, run: InFlightBatch, entry: MarkedTarget, target: RecordState, committed: dict[RecordState, int]
    ) -> None:
        """Give ``run`` its records' own states (an acknowledgement of an acquired run, or a
        dead-letter round over a run that has them already)."""
        marks = entry.marks
        if run.state is _ACQUIRED:
            run.unlock()
        self._state.dcc += marked_terminal(marks) - run.terminal_size()
        if entry.changed is None:
            for state in (_ACKNOWLEDGED, _ARCHIVING, _ARCHIVED):
                n = marks.count(bytes((state,)))
                if n:
                    committed[state] = committed.get(state, 0) + n
        else:  # a dead-letter round: ARCHIVING records became ARCHIVED, nothing else changed
            assert run.marks is not None
            n = marks.count(_ARCHIVED_BYTE) - run.marks.count(_ARCHIVED_BYTE)
            committed[_ARCHIVED] = committed.get(_ARCHIVED, 0) + n
        run.marks = marks
        run.state = target

    def _rollback(self, txn: StateTransition, now: int) -> tuple[PendingWrite, ...]:
        runs = self._state.runs
        touched = [(run.first, run.last) for run, _ in txn.pieces]
        held = self._state.held_keys
        for run, _ in txn.pieces:
            before = held.spans(run) if held is not None else _NO_SPANS
            run.txn = None
            if txn.kind is TransitionKind.STAGE:
                run.staged = None
            runs.reindex(run)
            if held is not None:
                held.settle(run, before)
        follow_ups: tuple[PendingWrite, ...] = ()
        if txn.kind in (TransitionKind.ACKNOWLEDGE, TransitionKind.LOG_START, TransitionKind.STAGE):
            lapsed = [
                run
                for run, _ in txn.pieces
                if run.state is _ACQUIRED and run.lock is not None and run.lock.deadline <= now
            ]
            if lapsed:
                expiry = StateTransition(self._state.next_handle(), TransitionKind.EXPIRE)
                for run in lapsed:
                    run.txn = expiry
                    expiry.pieces.append((run, self._state.release_target(run)))
                self._delay(expiry, _backoff.Trigger.TIMEOUT, now)
                follow_ups = (start_write(self._state, expiry),)
        elif txn.kind in (TransitionKind.EXPIRE, TransitionKind.RELEASE_MEMBER):
            retry: dict[int, AcquisitionLock] = {}
            deadline = now + self._state.config.persist_retry_backoff_ms
            for run, _ in txn.pieces:
                old = run.lock
                key = id(old)
                lock = retry.get(key)
                if lock is None:
                    lock = retry[key] = self._state.new_lock(deadline, run.first, run.last, run.member or "")
                lock.first = min(lock.first, run.first)
                lock.last = max(lock.last, run.last)
                self._state.move_to_lock(run, lock)
        runs.coalesce_spans(touched)
        # A dead-letter round holds its whole run, acknowledged records before its ARCHIVING ones
        # included: once it lets go, the SPSO passes those (the next commit makes that durable).
        self._state.advance_spso()
        return follow_ups

    def _require_initialized(self) -> None:
        if not self._initialized:
            raise ShareEngineBug("share-partition used before initialize()")

    def start_offset_write(self) -> PendingWrite | None:
        """A write of the SPSO alone, when it moved past the durable one and no write is in flight.

        Writes in flight together each persist the start offset they can see; ``complete`` asks
        for this after the last of them commits, and the shell after a transaction marker.
        """
        return start_offset_write(self._state)
