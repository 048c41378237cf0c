"""The log start offset moving past the SPSO (a helper of ``SharePartition``, on its ``PartitionState``).

Retention or DeleteRecords can delete records a share group has not finished with. They can never
be delivered again, so the share-partition moves its start offset up to the new log start: every
in-flight record below it is archived and dropped, ACQUIRED ones included (their holders get
INVALID_RECORD_STATE when they acknowledge). Like every other change this is persisted first (a
state write carrying the new start offset; the share coordinator prunes the batches below it) and
applied on ``complete``. Until then the records below the new start are in transition, so nothing
acknowledges, releases or re-acquires them, and ``next_fetch_offset()`` does not go below it.

The move stops early at a run whose own transition (an acknowledgement, an expiry) is still being
persisted: those records cannot be touched now, and the shell asks again on a later fetch.
"""

from __future__ import annotations

from shareq.share.errors import ShareEngineBug
from shareq.share.in_flight import InFlightBatch
from shareq.share.partition_state import PartitionState
from shareq.share.persister import WriteStateParams
from shareq.share.record_state import TERMINAL, RecordState
from shareq.share.transition import StateTransition, TransitionKind
from shareq.share.types import PendingWrite

_ARCHIVED = RecordState.ARCHIVED
_ACQUIRED = RecordState.ACQUIRED


def start_move(partition: PartitionState, handle: int, log_start: int) -> PendingWrite | None:
    """Start moving the SPSO to ``log_start`` (or to the first run in transition below it)."""
    if log_start <= partition.spso or partition.log_start_floor >= 0:
        return None
    runs = partition.runs
    limit = log_start
    for run in runs.overlapping(partition.spso, log_start - 1):
        if run.txn is not None or run.state is RecordState.TX_PENDING:
            limit = run.first  # staged records wait for their transaction's marker
            break
    if limit <= partition.spso:
        return None
    runs.split(limit)  # the run covering ``limit`` from further left, if any, is idle
    txn = StateTransition(handle, TransitionKind.LOG_START)
    txn.start_offset = limit
    terminal = 0
    held = partition.held_keys
    for run in list(runs.overlapping(partition.spso, limit - 1)):
        terminal += run.terminal_size()  # a run with marks may hold some, beside ARCHIVING ones
        if run.state in TERMINAL:
            continue
        before = held.spans(run) if held is not None else None
        run.txn = txn
        runs.reindex(run)
        txn.pieces.append((run, _ARCHIVED))
        if held is not None and before is not None:
            held.settle(run, before)
    partition.pending[handle] = txn
    partition.log_start_floor = limit
    params = WriteStateParams(
        key=partition.key,
        state_epoch=partition.state_epoch,
        leader_epoch=partition.leader_epoch,
        start_offset=limit,
        delivery_complete_count=partition.dcc - terminal,
        state_batches=(),
    )
    return PendingWrite(handle=handle, params=params)


def commit_move(partition: PartitionState, txn: StateTransition) -> None:
    """The new start offset is durable: archive the pieces and drop every run below it."""
    limit = txn.start_offset
    runs = partition.runs
    held = partition.held_keys
    for run, _ in txn.pieces:
        before = held.spans(run) if held is not None else None
        run.txn = None
        if run.state is _ACQUIRED:
            run.unlock()
        partition.dcc += run.size - run.terminal_size()
        run.state = _ARCHIVED
        run.marks = None
        if held is not None and before is not None:
            held.settle(run, before)
    first: InFlightBatch | None = runs.first_run()
    while first is not None and first.first < limit:
        if first.txn is not None or first.state not in TERMINAL or first.last >= limit:
            raise ShareEngineBug(f"run {first} below the new start offset {limit} is not archived")
        runs.remove(first)
        partition.dcc -= first.size
        partition.covered -= first.size
        first = runs.first_run()
    partition.log_start_floor = -1
    partition.spso = max(partition.spso, limit)
    partition.durable_spso = max(partition.durable_spso, limit)
    partition.advance_spso()
