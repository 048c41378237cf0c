"""The acquire walk of a share-partition (a helper of ``SharePartition``, on its ``PartitionState``).

One pass over the fetched log-batch bounds in offset order, merged with the in-flight runs they
overlap: AVAILABLE runs are re-leased (delivery count + 1), offsets no run covers are leased for the
first time (within the in-flight window), everything else is skipped. Offsets the log no longer has
(the range before the first fetched batch and between fetched batches) are archived if they were
AVAILABLE, so compaction cannot pin the SPSO.

The in-flight window (SPSO + ``max_record_locks``) is exact in record-limit mode; in batch-optimized
mode it is checked where a first-time lease starts, which then runs to the end of its log batch.

A key-ordered group passes ``allowed`` (``key_order.allowed_ranges``): the walk visits only those
ranges of each batch, in offset order, so records whose key is blocked are looked past. Runs it
puts in a transition (archiving what vanished) are counted as holding their keys here; the records
it acquires, by the caller.

Poison isolation, as Kafka's newest code: a record on its last delivery attempt is delivered alone;
a record with at least ``max(2, ceil(limit / 2))`` deliveries halves the records this acquisition may
return for each delivery beyond that threshold.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from shareq.share import key_order as _key_order
from shareq.share.acquisition_lock import AcquisitionLock
from shareq.share.durable_counts import acquisition_write
from shareq.share.in_flight import InFlightBatch, InFlightMap
from shareq.share.partition_state import PartitionState
from shareq.share.record_state import RecordState
from shareq.share.state_write import start_write
from shareq.share.transition import StateTransition, TransitionKind
from shareq.share.types import AcquiredRecords, AcquireResult, PendingWrite

_ACQUIRED = RecordState.ACQUIRED
_AVAILABLE = RecordState.AVAILABLE
_ARCHIVED = RecordState.ARCHIVED
_EMPTY = AcquireResult(records=(), acquired_count=0, lock_deadline=None)


def poison_threshold(delivery_count_limit: int) -> int:
    """Deliveries from which acquisitions shrink: ``max(2, ceil(limit / 2))``."""
    return max(2, -(-delivery_count_limit // 2))


def acquire(
    partition: PartitionState,
    member: str,
    batches: Sequence[tuple[int, int]],
    *,
    max_records: int,
    batch_size: int,
    exact: bool,
    now: int,
    allowed: Sequence[tuple[int, int]] | None = None,
) -> AcquireResult:
    if max_records <= 0 or not batches:
        return _EMPTY
    cfg = partition.config
    runs = partition.runs
    fetch = partition.next_fetch_offset()
    window_end = partition.window_end()  # first-time acquisitions stay below this
    dc_limit = cfg.delivery_count_limit
    threshold = poison_threshold(dc_limit)
    deadline = now + cfg.record_lock_duration_ms
    limit = max_records
    hard = exact  # stop exactly at ``limit`` (record_limit mode, or poison isolation)
    acquired = 0
    out: list[list[int]] = []
    lock: AcquisitionLock | None = None
    stale: list[InFlightBatch] = []
    exhausted: list[tuple[InFlightBatch, RecordState]] = []
    durable = cfg.durable_counts
    prev_end = fetch
    old_end = partition.end
    new_end = -1
    stop = False
    for bf, pf, pl, bl in _key_order.pieces(batches, allowed):  # pieces: key_order.py
        if bl < fetch:
            continue
        lo = bf if bf > fetch else fetch
        if lo > prev_end:
            _vanished(partition, runs, prev_end, lo - 1, stale)
        prev_end = bl + 1
        lo = pf if pf > lo else lo
        if pl < lo:
            continue
        pos = lo
        # past the end offset nothing is in flight but what this walk leased before ``lo``
        segments: list[InFlightBatch | None] = list(runs.overlapping(lo, pl)) if lo < old_end else []
        segments.append(None)
        for run in segments:
            seg_end = pl if run is None else run.first - 1
            if pos <= seg_end:
                # Offsets no run covers: leased for the first time, inside the window. Batch
                # optimized, a batch that starts inside the window is leased to its end (as Kafka
                # does), so a producer batch larger than the window ships once, not in pieces.
                whole = seg_end < window_end or (not exact and pos < window_end)
                e = seg_end if whole else window_end - 1
                if hard and e >= pos + (limit - acquired):
                    e = pos + (limit - acquired) - 1
                if e < pos:
                    stop = True
                    break
                if lock is None:
                    lock = partition.new_lock(deadline, pos, e, member)
                piece = InFlightBatch(pos, e, _ACQUIRED, 1, member, lock)
                runs.insert(piece)
                n = e - pos + 1
                partition.covered += n
                lock.held += n
                acquired += n
                new_end = e
                _emit(out, pos, e, 1, bf, batch_size, exact)
                if e < seg_end or (hard and acquired >= limit):
                    stop = True
                    break
            if run is None:
                break
            a = run.first if run.first > pos else pos
            e = run.last if run.last < pl else pl
            pos = e + 1
            if run.state is not _AVAILABLE or run.txn is not None or run.due:
                continue  # not acquirable (a delayed run waits for its due time)
            d = run.count
            if d >= dc_limit and durable:  # loaded with its deliveries used up (durable counts)
                runs.isolate(a, e)
                piece_or_none = runs.get(a)
                assert piece_or_none is not None
                exhausted.append((piece_or_none, partition.release_target(piece_or_none)))
                continue
            if d + 1 >= dc_limit or d >= threshold:
                cap = 1 if d + 1 >= dc_limit else max(1, max_records >> (d - threshold + 1))
                if cap < limit:
                    limit = cap
                hard = True
                if acquired >= limit:
                    stop = True
                    break
            if hard and e >= a + (limit - acquired):
                e = a + (limit - acquired) - 1
            if a == run.first and e == run.last:  # the whole run (a record a key group looked past)
                piece = run
            else:
                runs.isolate(a, e)
                piece_or_none = runs.get(a)
                assert piece_or_none is not None
                piece = piece_or_none
            if lock is None:
                lock = partition.new_lock(deadline, a, e, member)
            piece.state = _ACQUIRED
            piece.count = d + 1
            piece.member = member
            piece.lock = lock
            runs.reindex(piece)
            n = e - a + 1
            lock.held += n
            acquired += n
            _emit(out, a, e, d + 1, bf, batch_size, exact)
            if e < pos - 1 or (hard and acquired >= limit):
                stop = True
                break
        if stop or acquired >= limit:
            break
    if new_end >= partition.end:
        partition.end = new_end + 1
    if stale or exhausted:
        write = _archive_vanished(partition, [(run, _ARCHIVED) for run in stale] + exhausted)
    else:
        write = None
    if lock is None:
        return AcquireResult(records=(), acquired_count=0, lock_deadline=None, write=write)
    lock.last = out[-1][1]
    runs.coalesce(lock.first, lock.last)
    records = tuple(AcquiredRecords(first_offset=f, last_offset=la, delivery_count=c) for f, la, c in out)
    return AcquireResult(
        records=records,
        acquired_count=acquired,
        lock_deadline=deadline,
        write=write,
        counts=acquisition_write(partition, records) if durable else None,
    )


def _emit(
    out: list[list[int]], first: int, last: int, count: int, batch_first: int, batch_size: int, exact: bool
) -> None:
    """Append an AcquiredRecords range, merging with the previous one unless a batch_size cut is due."""
    if out:
        prev = out[-1]
        if prev[1] + 1 == first and prev[2] == count:
            at_cut = not exact and first == batch_first and prev[1] - prev[0] + 1 >= batch_size
            if not at_cut:
                prev[1] = last
                return
    out.append([first, last, count])


def _vanished(
    partition: PartitionState, runs: InFlightMap, first: int, last: int, stale: list[InFlightBatch]
) -> None:
    """``first..last`` is not in the log any more: archive AVAILABLE runs, resolve read gaps."""
    for run in list(runs.overlapping(first, last)):
        if run.state is _AVAILABLE and run.txn is None:
            a = run.first if run.first > first else first
            e = run.last if run.last < last else last
            runs.isolate(a, e)
            piece = runs.get(a)
            assert piece is not None
            stale.append(piece)
    partition.first_gap_hole()
    if first <= partition.gap_cursor <= last:
        partition.gap_cursor = last + 1


def _archive_vanished(
    partition: PartitionState, pieces: Iterable[tuple[InFlightBatch, RecordState]]
) -> PendingWrite | None:
    """Start archiving ``pieces`` (AVAILABLE runs the log no longer holds, or loaded with their
    deliveries used up) to their targets: outside the table, so the transition is an ARCHIVE,
    which the commit lets through."""
    txn = StateTransition(partition.next_handle(), TransitionKind.ARCHIVE)
    held = partition.held_keys
    for run, target in pieces:
        before = held.spans(run) if held is not None else None
        run.txn = txn
        partition.runs.reindex(run)
        txn.pieces.append((run, target))
        if held is not None and before is not None:
            held.settle(run, before)
    return start_write(partition, txn) if txn.pieces else None
