"""In-flight state as run-length ranges.

An ``InFlightBatch`` is a run of consecutive offsets sharing one state, delivery count, member,
acquisition lock and in-progress transition. Runs are kept in a ``SortedDict`` keyed by first offset.
A run is split only where an operation touches part of it (a partial acknowledgement, a partial
re-acquisition) and coalesced with equal neighbours afterwards, so the common whole-batch path keeps
one entry per fetched batch and cost follows the number of runs touched, never the record count.

A second index holds the first offsets of acquirable runs (AVAILABLE, no transition in progress) so
the next fetch offset is found without a scan. An AVAILABLE run with a redelivery due time (``due``,
epoch ms) waits in a heap by due time instead, and joins the acquirable index when ``mature(now)``
reaches it; the heap is cleaned lazily (an entry whose run changed since is dropped when seen).

A run whose records the client is done with (each ACKNOWLEDGED, ARCHIVING or ARCHIVED) may keep a
state per offset instead of being cut into pieces: ``marks``, one state byte per record, as Kafka's
InFlightBatch keeps an offset-state map once a batch is acknowledged in parts. An acknowledgement
that alternates ACCEPT and REJECT (a REJECT every tenth record) then changes one run, not hundreds,
and the dead-letter writer finds the ARCHIVING offsets with a byte search. Such a run's ``state`` is
a summary: ARCHIVING while any record is, else ACKNOWLEDGED (every record terminal). It holds no
lock, no member and is never acquirable, so acquisition, expiry and member release never see one.
"""

from __future__ import annotations

import heapq
import itertools
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, TypeVar

from sortedcontainers import SortedDict, SortedSet

from shareq.protocol.acknowledge_type import AcknowledgeType
from shareq.share.persister import StateBatch
from shareq.share.record_state import TERMINAL, RecordState
from shareq.share.types import RunView

if TYPE_CHECKING:
    from shareq.share.acquisition_lock import AcquisitionLock
    from shareq.share.transition import StateTransition

_AVAILABLE = RecordState.AVAILABLE
_ARCHIVING = RecordState.ARCHIVING
_ACKNOWLEDGED = RecordState.ACKNOWLEDGED
_T = TypeVar("_T")

MARK_RUNS = re.compile(rb"\x02+|\x03+|\x04+")
"""Maximal runs of one state in ``marks`` (the ids of ACKNOWLEDGED, ARCHIVING and ARCHIVED)."""
ARCHIVING_MARKS = re.compile(rb"\x03+")
ARCHIVING_BYTE = b"\x03"
_TWO_ARCHIVING = ARCHIVING_BYTE * 2
_ARCHIVED_BYTE = b"\x04"
_ACCEPT = AcknowledgeType.ACCEPT
_PLUS_ONE = (1).__add__
_tuple_new = tuple.__new__
_STATES = tuple(RecordState)


def marks_summary(marks: bytes | bytearray) -> RecordState:
    """The ``state`` of a run with ``marks``: ARCHIVING while any record is, else ACKNOWLEDGED."""
    return _ARCHIVING if ARCHIVING_BYTE in marks else _ACKNOWLEDGED


def marked_terminal(marks: bytes | bytearray) -> int:
    """Records of ``marks`` that are terminal (all but the ARCHIVING ones)."""
    return len(marks) - marks.count(ARCHIVING_BYTE)


def mark_runs(marks: bytes | bytearray, first: int) -> Iterator[tuple[int, int, RecordState]]:
    """``(first, last, state)`` of each maximal equal-state stretch of a run's ``marks`` (in C)."""
    states = _STATES
    for m in MARK_RUNS.finditer(marks):
        start = m.start()
        yield first + start, first + m.end() - 1, states[marks[start]]


class StagedAck:
    """What a TX_PENDING run waits for: the staging transaction's producer id and epoch, the
    acknowledge type and the state a COMMIT gives (fixed at staging, as persisted), and the lock
    deadline suspended at staging (None once the owner left, or after a restart), which an ABORT
    resumes if it still lies ahead."""

    __slots__ = ("ack", "deadline", "producer_epoch", "producer_id", "target")

    def __init__(
        self,
        producer_id: int,
        producer_epoch: int,
        ack: AcknowledgeType,
        target: RecordState,
        deadline: int | None,
    ) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.ack = ack
        self.target = target
        self.deadline = deadline

    def same_as(self, other: StagedAck | None) -> bool:
        return (
            other is not None
            and self.producer_id == other.producer_id
            and self.producer_epoch == other.producer_epoch
            and self.ack is other.ack
            and self.deadline == other.deadline
        )

    def __repr__(self) -> str:
        return f"StagedAck(pid={self.producer_id}, epoch={self.producer_epoch}, {self.ack.name})"


class InFlightBatch:
    """One run ``first..last`` (inclusive) of in-flight offsets with one state."""

    __slots__ = ("count", "due", "first", "last", "lock", "marks", "member", "staged", "state", "txn")

    def __init__(
        self,
        first: int,
        last: int,
        state: RecordState,
        count: int,
        member: str | None = None,
        lock: AcquisitionLock | None = None,
    ) -> None:
        self.first = first
        self.last = last
        self.state = state
        self.count = count
        self.member = member
        self.lock = lock
        self.txn: StateTransition | None = None
        self.staged: StagedAck | None = None
        self.marks: bytearray | None = None
        """A state byte per record, for a run whose records the client is done with (see the
        module docstring); None when every record has ``state``."""
        self.due = 0
        """An AVAILABLE run's redelivery due time (epoch ms) until it matures; 0: acquirable."""

    @property
    def size(self) -> int:
        return self.last - self.first + 1

    def terminal_size(self) -> int:
        """Records of this run that are terminal (ACKNOWLEDGED or ARCHIVED) as committed."""
        marks = self.marks
        if marks is not None:
            return marked_terminal(marks)
        return self.last - self.first + 1 if self.state in TERMINAL else 0

    def unlock(self) -> None:
        """The run leaves its lease (acknowledged, released, archived): its lock no longer holds
        it (a lock holding nothing is dropped lazily) and it has no member."""
        lock = self.lock
        if lock is not None:
            lock.held -= self.last - self.first + 1
        self.lock = None
        self.member = None

    # --- per-record marks ----------------------------------------------------------------------
    def acknowledged_marks(
        self, segments: Sequence[tuple[int, int, AcknowledgeType]], fill: dict[AcknowledgeType, int]
    ) -> tuple[bytearray, list[StateBatch]]:
        """The marks this acquired run takes when ``segments`` (ascending, covering it exactly)
        finish its records, each with its acknowledge type's state byte in ``fill``; and the
        write's deltas, one per equal-state stretch, built from the segments (no second scan)."""
        rf = self.first
        count = self.count
        marks = bytearray(b"\x02") * (self.last - rf + 1)  # ACKNOWLEDGED, then the other segments
        deltas: list[StateBatch] = []
        prev = -1
        for lo, hi, ack in segments:
            value = fill[ack]
            if value == prev:  # a REJECT beside a GAP, say: one stretch
                deltas[-1] = _tuple_new(StateBatch, (deltas[-1][0], hi, value, count))
            else:
                deltas.append(_tuple_new(StateBatch, (lo, hi, value, count)))
                prev = value
            if ack is _ACCEPT:
                continue
            if lo == hi:
                marks[lo - rf] = value
            else:
                marks[lo - rf : hi - rf + 1] = bytes((value,)) * (hi - lo + 1)
        return marks, deltas

    def archiving_spans(self) -> list[tuple[int, int, int]]:
        """``(first, last, delivery count)`` of this ARCHIVING run's ARCHIVING records: the run, or
        the stretches of its marks (found in C; stretches of marks never touch)."""
        count = self.count
        marks = self.marks
        if marks is None:
            return [(self.first, self.last, count)]
        base = self.first
        if _TWO_ARCHIVING in marks:
            found = ARCHIVING_MARKS.finditer(marks)
            return [(base + m.start(), base + m.end() - 1, count) for m in found]
        # each alone (a REJECT among ACCEPTs): offsets from the pieces between them
        gaps = map(_PLUS_ONE, map(len, marks.split(ARCHIVING_BYTE)[:-1]))
        offsets = list(itertools.accumulate(gaps, initial=base - 1))
        del offsets[0]
        return list(zip(offsets, offsets, itertools.repeat(count)))

    def archiving_size(self) -> int:
        """Records of this ARCHIVING run that are ARCHIVING."""
        marks = self.marks
        return self.last - self.first + 1 if marks is None else marks.count(ARCHIVING_BYTE)

    def dead_lettered_marks(
        self, target: bytearray, changed: list[tuple[int, int]], first: int, last: int
    ) -> None:
        """In ``target`` (a copy of this run's marks, what it will hold), the ARCHIVING records of
        ``first..last`` become ARCHIVED; each stretch of them that changes is added to ``changed``."""
        marks = self.marks
        assert marks is not None
        base = self.first
        lo, hi = first - base, last - base + 1
        for m in ARCHIVING_MARKS.finditer(marks, lo, hi):
            changed.append((base + m.start(), base + m.end() - 1))
        target[lo:hi] = target[lo:hi].replace(ARCHIVING_BYTE, _ARCHIVED_BYTE)

    def pieces(self) -> Iterator[InFlightBatch]:
        """This run, or for a run with ``marks`` one detached run per equal-state stretch (for
        inspection: metrics, views)."""
        marks = self.marks
        if marks is None:
            yield self
            return
        for first, last, state in mark_runs(marks, self.first):
            piece = InFlightBatch(first, last, state, self.count)
            piece.txn = self.txn
            yield piece

    def same_as(self, other: InFlightBatch) -> bool:
        """Whether two runs could be one (never merges runs with a transition in progress)."""
        return (
            self.txn is None
            and other.txn is None
            and self.marks is None
            and other.marks is None
            and self.state == other.state
            and self.count == other.count
            and self.due == other.due
            and self.member == other.member
            and self.lock is other.lock
            and (self.staged is None if other.staged is None else other.staged.same_as(self.staged))
        )

    def __repr__(self) -> str:
        return f"InFlightBatch({self.first}..{self.last}, {self.state.name}, dc={self.count}, {self.member})"


def _pid(run: InFlightBatch) -> int | None:
    staged = run.staged
    return None if staged is None or run.state is not RecordState.TX_PENDING else staged.producer_id


class InFlightMap:
    """The runs of one share-partition, keyed by first offset, plus the acquirable-run index."""

    __slots__ = ("_acquirable", "_delayed", "_runs")

    def __init__(self) -> None:
        self._runs: SortedDict = SortedDict()
        self._acquirable: SortedSet = SortedSet()
        self._delayed: list[tuple[int, int]] = []
        """A heap of ``(due, first offset)`` of delayed AVAILABLE runs (stale entries included)."""

    # --- queries -------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._runs)

    def __iter__(self) -> Iterator[InFlightBatch]:
        runs = self._runs
        return map(runs.__getitem__, runs)  # half the cost of the values view's generator

    def first_run(self) -> InFlightBatch | None:
        runs = self._runs
        return runs.peekitem(0)[1] if runs else None

    def get(self, first: int) -> InFlightBatch | None:
        return self._runs.get(first)  # type: ignore[no-any-return]

    def run_at(self, offset: int) -> InFlightBatch | None:
        """The run covering ``offset``, if any."""
        runs = self._runs
        i = runs.bisect_right(offset) - 1
        if i < 0:
            return None
        run: InFlightBatch = runs.peekitem(i)[1]
        return run if run.last >= offset else None

    def overlapping(self, first: int, last: int) -> list[InFlightBatch]:
        """Runs intersecting ``first..last`` in offset order (a list: callers may then change the map).

        One search for the run that may start before ``first``, then the keys after it in order:
        no positional lookups, so the cost follows the runs returned, not the runs held."""
        runs = self._runs
        run = runs.get(first)
        if run is not None and run.last >= last:  # one run from ``first`` on covers it all (a hash lookup)
            return [run]
        out: list[InFlightBatch] = []
        i = runs.bisect_right(first) - 1
        if i >= 0:
            run = runs.peekitem(i)[1]
            if run.last >= first:
                out.append(run)
        out.extend([runs[key] for key in runs.irange(first, last, inclusive=(False, True))])
        return out

    def first_acquirable(self, at_or_after: int) -> int | None:
        """First offset of the first acquirable run starting at or after ``at_or_after``."""
        acq = self._acquirable
        i = acq.bisect_left(at_or_after)
        return acq[i] if i < len(acq) else None

    def views(self) -> tuple[RunView, ...]:
        """Every run as a ``RunView``, adjacent equal (state, count, member) runs merged."""
        out: list[RunView] = []
        for whole in self._runs.values():
            for run in whole.pieces():
                if out:
                    prev = out[-1]
                    if (
                        prev.last_offset + 1 == run.first
                        and prev.state is run.state
                        and prev.delivery_count == run.count
                        and prev.member == run.member
                        and prev.producer_id == _pid(run)
                        and prev.available_at == whole.due
                    ):
                        out[-1] = replace(prev, last_offset=run.last)
                        continue
                out.append(
                    RunView(
                        first_offset=run.first,
                        last_offset=run.last,
                        state=run.state,
                        delivery_count=run.count,
                        member=run.member,
                        producer_id=_pid(run),
                        available_at=whole.due,
                    )
                )
        return tuple(out)

    # --- redelivery delays -----------------------------------------------------------------------
    def _waiting(self, due: int, first: int) -> InFlightBatch | None:
        """The run a heap entry stands for, if it still waits for exactly that due time."""
        run: InFlightBatch | None = self._runs.get(first)
        if run is None or run.due != due or run.state is not _AVAILABLE or run.txn is not None:
            return None
        return run

    def next_due(self) -> int | None:
        """The earliest due time of a delayed AVAILABLE run (stale heap entries dropped)."""
        heap = self._delayed
        while heap:
            due, first = heap[0]
            if self._waiting(due, first) is not None:
                return due
            heapq.heappop(heap)
        return None

    def mature(self, now: int, spans: list[tuple[int, int]] | None = None) -> bool:
        """Delayed runs due at ``now`` become acquirable; whether any did (their offsets added to
        ``spans``, if given)."""
        heap = self._delayed
        matured = False
        while heap and heap[0][0] <= now:
            due, first = heapq.heappop(heap)
            run = self._waiting(due, first)
            if run is None:
                continue
            if spans is not None:
                spans.append((run.first, run.last))
            run.due = 0
            self._acquirable.add(first)
            self.coalesce(run.first, run.last)
            matured = True
        return matured

    def delayed(self) -> tuple[int, int | None]:
        """(records waiting for a due time, the earliest due time): a walk of the heap, for views."""
        records = 0
        earliest: int | None = None
        seen: set[int] = set()
        for due, first in self._delayed:
            run = self._waiting(due, first)
            if run is None or first in seen:
                continue
            seen.add(first)
            records += run.last - run.first + 1
            if earliest is None or due < earliest:
                earliest = due
        return records, earliest

    # --- mutation ----------------------------------------------------------------------------------
    def reindex(self, run: InFlightBatch) -> None:
        """Refresh the acquirable index after ``run``'s state or transition changed."""
        if run.state is _AVAILABLE and run.txn is None:
            if run.due:
                self._acquirable.discard(run.first)
                heapq.heappush(self._delayed, (run.due, run.first))
            else:
                self._acquirable.add(run.first)
        else:
            self._acquirable.discard(run.first)

    def insert(self, run: InFlightBatch) -> None:
        self._runs[run.first] = run
        if run.state is _AVAILABLE and run.txn is None:
            if run.due:
                heapq.heappush(self._delayed, (run.due, run.first))
            else:
                self._acquirable.add(run.first)

    def remove(self, run: InFlightBatch) -> None:
        del self._runs[run.first]
        self._acquirable.discard(run.first)

    def drop_first(self, n: int) -> None:
        """Remove the first ``n`` runs at once (those the SPSO just passed)."""
        if n <= 0:
            return
        keys = self._runs.keys()
        acquirable = self._acquirable
        if acquirable and acquirable[0] <= keys[n - 1]:
            for key in list(acquirable.irange(maximum=keys[n - 1])):
                acquirable.discard(key)
        del keys[:n]

    def split(self, offset: int) -> None:
        """Make ``offset`` the first offset of a run, if a run covers it from further left."""
        if offset in self._runs:  # a run starts there already (one hash lookup, no search)
            return
        run = self.run_at(offset)
        if run is None or run.first == offset:
            return
        right = InFlightBatch(offset, run.last, run.state, run.count, run.member, run.lock)
        right.txn = run.txn
        right.staged = run.staged
        right.due = run.due
        marks = run.marks
        if marks is not None:
            cut = offset - run.first
            right.marks = marks[cut:]
            del marks[cut:]
            right.state = marks_summary(right.marks)
            run.state = marks_summary(marks)
        run.last = offset - 1
        self.insert(right)

    def trim_front(self, run: InFlightBatch, offset: int) -> None:
        """Drop ``run``'s records below ``offset`` (the SPSO passed them; the run has ``marks``)."""
        marks = run.marks
        assert marks is not None and run.first < offset <= run.last
        del self._runs[run.first]
        del marks[: offset - run.first]
        run.first = offset
        run.state = marks_summary(marks)
        self._runs[offset] = run

    def isolate(self, first: int, last: int) -> None:
        """Split so that ``first`` starts a run and ``last`` ends one."""
        self.split(first)
        self.split(last + 1)

    def carve(self, segments: Sequence[tuple[int, int, _T]]) -> list[tuple[InFlightBatch, _T]]:
        """Split the runs under contiguous ``segments`` (ascending ``(first, last, tag)``) so each
        segment is made of whole runs; return every run under them with its segment's tag.

        One pass over the runs and segments: a batch acknowledged with a type per record (a
        REJECT every tenth record, say) is cut where its types change, without a search per piece.
        """
        first, last = segments[0][0], segments[-1][1]
        if len(segments) == 1:  # one segment on exactly one run (a record re-delivered alone)
            whole = self._runs.get(first)
            if whole is not None and whole.last == last:
                return [(whole, segments[0][2])]
        self.isolate(first, last)
        out: list[tuple[InFlightBatch, _T]] = []
        new: dict[int, InFlightBatch] = {}
        i = 0
        for run in self.overlapping(first, last):
            cur = run
            while True:
                while segments[i][1] < cur.first:
                    i += 1
                seg_last, tag = segments[i][1], segments[i][2]
                if seg_last >= cur.last:
                    out.append((cur, tag))
                    break
                right = InFlightBatch(seg_last + 1, cur.last, cur.state, cur.count, cur.member, cur.lock)
                right.txn = cur.txn
                right.staged = cur.staged
                right.due = cur.due
                cur.last = seg_last
                new[right.first] = right
                out.append((cur, tag))
                cur = right
        if new:  # one update: a sorted rebuild in C when the pieces are many (a REJECT every tenth)
            self._runs.update(new)
            acquirable = self._acquirable
            for piece in new.values():
                if piece.state is _AVAILABLE and piece.txn is None:
                    if piece.due:
                        heapq.heappush(self._delayed, (piece.due, piece.first))
                    else:
                        acquirable.add(piece.first)
        return out

    def coalesce(self, first: int, last: int) -> None:
        """Merge equal neighbours among the runs touching ``first-1..last+1``."""
        runs = self._runs
        only: InFlightBatch | None = runs.get(first)
        if only is not None and only.last == last:  # one run: its two neighbours, without a range walk
            self._coalesce_run(only)
            return
        i = runs.bisect_right(first - 1) - 1
        start = runs.keys()[i] if i >= 0 else first
        prev: InFlightBatch | None = None
        for key in list(runs.irange(start, last + 1)):
            run: InFlightBatch = runs[key]
            if (
                prev is not None
                and prev.state is run.state
                and prev.last + 1 == run.first
                and prev.same_as(run)
            ):
                prev.last = run.last
                self.remove(run)
                continue
            prev = run

    def _coalesce_run(self, run: InFlightBatch) -> None:
        """``coalesce`` of exactly one run (a record re-delivered alone, then acknowledged, or a
        delayed run maturing): the run after it by a hash lookup, the run before it by position."""
        runs = self._runs
        right: InFlightBatch | None = runs.get(run.last + 1)
        if right is not None and right.state is run.state and run.same_as(right):
            run.last = right.last
            self.remove(right)
        i = runs.bisect_left(run.first)
        if i:
            left: InFlightBatch = runs.peekitem(i - 1)[1]
            if left.last + 1 == run.first and left.state is run.state and left.same_as(run):
                left.last = run.last
                self.remove(run)

    def coalesce_spans(self, spans: Iterable[tuple[int, int]]) -> None:
        """``coalesce`` each maximal stretch of the adjacent or overlapping ``spans`` once."""
        ordered = sorted(spans)
        if not ordered:
            return
        lo, hi = ordered[0]
        for first, last in ordered[1:]:
            if first <= hi + 1:
                if last > hi:
                    hi = last
                continue
            self.coalesce(lo, hi)
            lo, hi = first, last
        self.coalesce(lo, hi)
