"""Building the durable write of a state transition (persist before commit).

A transition names the runs it changes and their targets; its write carries them as ``StateBatch``
deltas (adjacent equal ones joined, those below the start offset the write moves to left out), the
start offset it would reach if it alone committed (never one that moves a start offset already
written back), and the delivery-complete count after it. Starting the write registers the
transition as pending; ``SharePartition.complete`` commits or rolls it back.
"""

from __future__ import annotations

import bisect
import operator
from collections.abc import Iterable

from shareq.share.in_flight import InFlightBatch, marked_terminal
from shareq.share.partition_state import PartitionState
from shareq.share.persister import (
    NO_START_OFFSET,
    RedeliveryDelay,
    StateBatch,
    WriteStateParams,
    state_batch,
)
from shareq.share.record_state import RecordState
from shareq.share.transition import StateTransition, TransitionKind
from shareq.share.types import PendingWrite

_ACQUIRED = RecordState.ACQUIRED
_AVAILABLE = RecordState.AVAILABLE
_ACKNOWLEDGED = RecordState.ACKNOWLEDGED
_ARCHIVED = RecordState.ARCHIVED
_TX_PENDING = RecordState.TX_PENDING
_tuple_new = tuple.__new__
_LAST = operator.itemgetter(1)  # a StateBatch's last offset


def start_write(partition: PartitionState, txn: StateTransition) -> PendingWrite:
    """Register ``txn`` as pending and build its write (nothing visible changes until it commits)."""
    targets: dict[int, RecordState] = {}
    newly_terminal = 0
    durable: list[tuple[InFlightBatch, RecordState]] = []
    marked = txn.marks
    for piece in txn.pieces:
        run, target = piece
        if target is _ACQUIRED or target is _TX_PENDING:
            continue
        targets[run.first] = target
        entry = marked.get(run.first) if marked is not None else None
        if entry is not None:
            newly_terminal += marked_terminal(entry.marks) - run.terminal_size()
        elif target is _ACKNOWLEDGED or target is _ARCHIVED:  # TERMINAL, by identity
            newly_terminal += run.last - run.first + 1
        durable.append(piece)
    spso, dropped, _ = partition.terminal_prefix(txn, targets)
    partition.pending[txn.handle] = txn
    # Never move it back: writes take effect in the order they are made, so one made while
    # another in flight moves the start offset further (a dead-letter round archiving a
    # prefix, or a log-start move) leaves it alone.
    moved = spso > partition.written_spso()
    txn.start_offset = spso if moved else NO_START_OFFSET
    # Deltas below the start offset the write moves to are pruned by the very record that
    # carries them (the state below the start offset is gone): they are left out. With
    # interleaved ACCEPTs and REJECTs acknowledged at the start offset, or a dead-letter round,
    # that is every delta of the write: hundreds of state batches fewer to build, encode,
    # fsync and replay.
    floor = spso if moved else -1
    deltas: list[StateBatch] = []
    cur_first = cur_last = -2
    cur_state = cur_count = 0
    for run, target in durable:
        first, last, count = run.first, run.last, run.count
        if last < floor:
            continue
        entry = marked.get(first) if marked is not None else None
        if entry is None:
            spans: Iterable[tuple[int, int, int]] = ((first, last, target),)
        elif entry.changed is None:  # a run acknowledged in parts
            # each equal-state stretch of its marks from the floor on (hundreds of them), as
            # the acknowledgement built them
            assert entry.deltas is not None
            found = _from_floor(entry.deltas, floor)
            head = found[0]
            if cur_last + 1 == head[0] and cur_state == head[2] and cur_count == count:
                found[0] = state_batch(cur_first, head[1], cur_state, count)
            elif cur_last >= 0:
                deltas.append(state_batch(cur_first, cur_last, cur_state, cur_count))
            cur_first, cur_last, cur_state, cur_count = found.pop()
            deltas += found
            continue
        else:
            spans = [(a, b, _ARCHIVED) for a, b in entry.changed]
        for first, last, mark in spans:
            if last < floor:
                continue
            if first < floor:
                first = floor
            if cur_last + 1 == first and cur_state == mark and cur_count == count:
                cur_last = last  # adjacent and equal: one delta
                continue
            if cur_last >= 0:
                deltas.append(state_batch(cur_first, cur_last, cur_state, cur_count))
            cur_first, cur_last, cur_state, cur_count = first, last, int(mark), count
    if cur_last >= 0:
        deltas.append(state_batch(cur_first, cur_last, cur_state, cur_count))
    dues = txn.dues
    params = WriteStateParams(
        key=partition.key,
        state_epoch=partition.state_epoch,
        leader_epoch=partition.leader_epoch,
        start_offset=txn.start_offset,
        delivery_complete_count=partition.dcc + newly_terminal - dropped,
        state_batches=tuple(deltas),
        delays=() if dues is None else _delays(durable, dues),
    )
    return PendingWrite(handle=txn.handle, params=params)


def _delays(
    durable: list[tuple[InFlightBatch, RecordState]], dues: dict[int, int]
) -> tuple[RedeliveryDelay, ...]:
    """The due times of the runs a write makes AVAILABLE with a redelivery delay, in offset order."""
    out = [
        RedeliveryDelay(run.first, run.last, dues[run.first])
        for run, target in durable
        if target is _AVAILABLE and run.first in dues
    ]
    out.sort()
    return tuple(out)


def start_offset_write(partition: PartitionState) -> PendingWrite | None:
    """A write of the SPSO alone, when it moved past the durable one and no write is in flight.

    Writes in flight together each persist the start offset they can see; ``complete`` asks
    for this after the last of them commits, and the shell after a transaction marker.
    """
    if partition.pending or partition.spso <= partition.durable_spso:
        return None
    lo, hi = partition.absent_span
    if lo <= partition.durable_spso and partition.spso <= hi:
        return None  # only share state lies between them (pass_absent)
    return start_write(partition, StateTransition(partition.next_handle(), TransitionKind.ARCHIVE))


def _from_floor(deltas: list[StateBatch], floor: int) -> list[StateBatch]:
    """A copy of ascending, disjoint ``deltas`` without their offsets below ``floor``."""
    if deltas[0].first_offset >= floor:
        return deltas[:]
    at = bisect.bisect_left(deltas, floor, key=_LAST)  # the first reaching the floor
    out = deltas[at:]
    if out and out[0].first_offset < floor:
        head = out[0]
        out[0] = _tuple_new(StateBatch, (floor, head[1], head[2], head[3]))
    return out
