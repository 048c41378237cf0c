"""The dead-letter hand-off (KIP-1191) on the engine's side: what waits for the DLQ, and its end.

Records a share group gives up on go ARCHIVING, durably; the shell's dead-letter writer takes them
from the front (``archiving_spans``), copies them to the dead-letter topic, and reports the spans it
wrote (``start_dead_lettered``): a DEAD_LETTER transition makes their ARCHIVING records ARCHIVED,
persisted first like every other change. A run with a state per record (``InFlightBatch.marks``)
changes in a copy of its marks, once per round, however many of its records the round names.
"""

from __future__ import annotations

from collections.abc import Sequence

from shareq.share.in_flight import InFlightBatch, InFlightMap, marks_summary
from shareq.share.partition_state import PartitionState
from shareq.share.record_state import RecordState
from shareq.share.state_write import start_write
from shareq.share.transition import MarkedTarget, StateTransition, TransitionKind
from shareq.share.types import PendingWrite

_ARCHIVING = RecordState.ARCHIVING
_ARCHIVING_MARK = int(RecordState.ARCHIVING)
_ARCHIVED_MARK = int(RecordState.ARCHIVED)


def archiving_spans(runs: InFlightMap, max_records: int | None = None) -> list[tuple[int, int, int]]:
    """``(first, last, delivery count)`` of the records waiting for the dead-letter queue
    (ARCHIVING, no transition in progress), touching spans of one count joined; with
    ``max_records``, exactly the first that many records (the last span cut, the scan stopped)."""
    out: list[tuple[int, int, int]] = []
    left = -1 if max_records is None else max_records  # records still to take; -1: all
    for run in runs:
        if left == 0:
            break
        if run.state is not _ARCHIVING or run.txn is not None:
            continue
        count = run.count
        spans = run.archiving_spans()
        if left > 0:
            left = _cut_spans(spans, left)
        if out and spans and out[-1][1] + 1 == spans[0][0] and out[-1][2] == count:
            out[-1] = (out[-1][0], spans[0][1], count)  # runs that touch, of one count: one span
            out += spans[1:]
        else:
            out += spans
    return out


def archiving_count(runs: InFlightMap) -> int:
    """Records ARCHIVING (waiting for, or being written to, the dead-letter queue)."""
    return sum(run.archiving_size() for run in runs if run.state is _ARCHIVING)


def start_dead_lettered(partition: PartitionState, spans: Sequence[tuple[int, int]]) -> PendingWrite | None:
    """The DLQ writer produced the records of ascending ``spans`` (what ``archiving_spans``
    named): start the write that makes their ARCHIVING records ARCHIVED. The cost follows the
    spans: a REJECT every tenth record leaves acknowledged runs between them, which are not
    visited, or marks states per record in one run, which is changed once."""
    txn = StateTransition(partition.next_handle(), TransitionKind.DEAD_LETTER)
    runs = partition.runs
    pieces = txn.pieces
    marked: dict[int, MarkedTarget] = {}
    held: InFlightBatch | None = None  # the last run with marks a span fell in
    held_first = held_last = -1
    held_marks = target = bytearray()
    changed: list[tuple[int, int]] = []
    for first, last in spans:
        if held_first <= first and last <= held_last:
            if first == last:  # one record: the usual dead letter among accepted records
                at = first - held_first
                if held_marks[at] == _ARCHIVING_MARK:
                    changed.append((first, first))
                    target[at] = _ARCHIVED_MARK
            else:
                assert held is not None
                held.dead_lettered_marks(target, changed, first, last)
            continue
        run = runs.get(first)
        if run is not None and run.last == last and run.marks is None:  # the span is one whole run
            if run.state is RecordState.ARCHIVING and run.txn is None:
                run.txn = txn
                pieces.append((run, RecordState.ARCHIVED))
            continue
        plain = False
        for run in runs.overlapping(first, last):
            if run.state is not RecordState.ARCHIVING:
                continue
            if run.marks is None:
                if run.txn is None:
                    runs.isolate(max(first, run.first), min(last, run.last))
                    plain = True
                continue
            entry = marked.get(run.first)
            if entry is None:
                if run.txn is not None:
                    continue
                entry = marked[run.first] = MarkedTarget(bytearray(run.marks), [])
                run.txn = txn
                pieces.append((run, RecordState.ARCHIVING))  # its summary: set below
            assert entry.changed is not None
            run.dead_lettered_marks(entry.marks, entry.changed, max(first, run.first), min(last, run.last))
            held, held_first, held_last, held_marks = run, run.first, run.last, run.marks
            target = entry.marks
            changed = entry.changed
        if plain:
            for run in runs.overlapping(first, last):
                if run.marks is None and run.state is RecordState.ARCHIVING and run.txn is None:
                    run.txn = txn
                    pieces.append((run, RecordState.ARCHIVED))
    if marked:
        txn.marks = marked
        pieces[:] = [
            (run, marks_summary(marked[run.first].marks) if run.first in marked else target)
            for run, target in pieces
        ]
    return start_write(partition, txn) if pieces else None


def _cut_spans(spans: list[tuple[int, int, int]], budget: int) -> int:
    """Cut ascending ``spans`` in place to their first ``budget`` records; the budget left."""
    for i, (first, last, count) in enumerate(spans):
        size = last - first + 1
        if size >= budget:
            spans[i] = (first, first + budget - 1, count)
            del spans[i + 1 :]
            return 0
        budget -= size
    return budget
