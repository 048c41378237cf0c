"""The log start offset moving past the SPSO (a helper module of ``share_partition``).

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

from typing import TYPE_CHECKING

from shareq.share.errors import ShareEngineBug
from shareq.share.in_flight import InFlightBatch
from shareq.share.persister import WriteStateParams
from shareq.share.record_state import TERMINAL, RecordState
from shareq.share.transition import StateTransition, TransitionKind
from shareq.share.types import PendingWrite

if TYPE_CHECKING:
    from shareq.share.share_partition import SharePartition

_ARCHIVED = RecordState.ARCHIVED
_ACQUIRED = RecordState.ACQUIRED


def start_move(sp: SharePartition, handle: int, log_start: int) -> PendingWrite | None:
    """Start moving the SPSO to ``log_start`` (or to the first run in transition below it)."""
    if log_start <= sp._spso or sp._log_start_floor >= 0:
        return None
    runs = sp._runs
    limit = log_start
    for run in runs.overlapping(sp._spso, log_start - 1):
        if run.txn is not None or run.state is RecordState.TX_PENDING:
            limit = run.first  # staged records wait for their transaction's marker
            break
    if limit <= sp._spso:
        return None
    runs.split(limit)  # the run covering ``limit`` from further left, if any, is idle
    txn = StateTransition(handle, TransitionKind.LOG_START)
    txn.start_offset = limit
    terminal = 0
    for run in list(runs.overlapping(sp._spso, limit - 1)):
        terminal += run.terminal_size()  # a run with marks may hold some, beside ARCHIVING ones
        if run.state in TERMINAL:
            continue
        run.txn = txn
        runs.reindex(run)
        txn.pieces.append((run, _ARCHIVED))
    sp._pending[handle] = txn
    sp._log_start_floor = limit
    params = WriteStateParams(
        key=sp.key,
        state_epoch=sp._state_epoch,
        leader_epoch=sp._leader_epoch,
        start_offset=limit,
        delivery_complete_count=sp._dcc - terminal,
        state_batches=(),
    )
    return PendingWrite(handle=handle, params=params)


def commit_move(sp: SharePartition, txn: StateTransition) -> None:
    """The new start offset is durable: archive the pieces and drop every run below it."""
    limit = txn.start_offset
    runs = sp._runs
    for run, _ in txn.pieces:
        run.txn = None
        if run.state is _ACQUIRED:
            sp._unhold(run.lock, run.size)
            run.lock = None
            run.member = None
        sp._dcc += run.size - run.terminal_size()
        run.state = _ARCHIVED
        run.marks = None
    first: InFlightBatch | None = runs.first_run()
    while first is not None and first.first < limit:
        if first.txn is not None or first.state not in TERMINAL or first.last >= limit:
            raise ShareEngineBug(f"run {first} below the new start offset {limit} is not archived")
        runs.remove(first)
        sp._dcc -= first.size
        first = runs.first_run()
    sp._log_start_floor = -1
    sp._spso = max(sp._spso, limit)
    sp._durable_spso = max(sp._durable_spso, limit)
    sp._advance_spso()
