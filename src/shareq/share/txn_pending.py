"""Transactional acknowledgements (KIP-1289): the TX_PENDING row (a helper of ``SharePartition``).

A transaction *stages* acknowledgements of records its member holds ACQUIRED. Staging is persisted
first (a transactional update of the state log, carrying the producer id) and applied on
``complete``: the records become TX_PENDING, their acquisition lock is suspended (the transaction
timeout bounds how long they stay), and nothing but the transaction's marker moves them again:

- COMMIT: ACCEPT -> ACKNOWLEDGED, REJECT -> ARCHIVED (ARCHIVING when the group had a dead-letter
  queue at staging time), GAP -> ARCHIVED. The marker in the state log makes this durable, so it
  applies at once.
- ABORT: back to ACQUIRED by the owner while its lock deadline lies ahead and it has not left;
  otherwise released under the delivery-count rules, through a write like a lock expiry's.

Markers match on the producer id with an epoch at or above the staged one (a producer has at most
one open transaction; a fenced producer's marker carries a newer epoch).
"""

from __future__ import annotations

from collections.abc import Sequence

from shareq.protocol.acknowledge_type import AcknowledgeType
from shareq.share.acknowledgement import segments
from shareq.share.errors import InvalidRecordState, InvalidRequest
from shareq.share.in_flight import InFlightBatch, StagedAck
from shareq.share.partition_state import PartitionState
from shareq.share.persister import NO_START_OFFSET, PendingTxnBatch, WriteStateParams
from shareq.share.record_state import TERMINAL, TXN_ACK_TYPES, RecordState, ack_target, validate_transition
from shareq.share.transition import StateTransition, TransitionKind
from shareq.share.types import AcknowledgementBatch, PendingWrite

_ACQUIRED = RecordState.ACQUIRED
_TX_PENDING = RecordState.TX_PENDING
_ARCHIVING = RecordState.ARCHIVING


def _validate(
    partition: PartitionState,
    member: str,
    batches: Sequence[AcknowledgementBatch],
    producer_id: int,
    producer_epoch: int,
) -> list[tuple[int, int, AcknowledgeType]]:
    """The segments still to stage; raises (changing nothing) unless every offset is ACQUIRED by
    ``member`` and idle, or already staged by this transaction with the same type (a retry)."""
    todo: list[tuple[int, int, AcknowledgeType]] = []
    prev_last = -1
    for batch in batches:
        first, last = batch.first_offset, batch.last_offset
        if first > last or first < 0:
            raise InvalidRequest(f"acknowledgement batch {first}..{last} runs backwards")
        if first <= prev_last:
            raise InvalidRequest(f"acknowledgement batch {first}..{last} overlaps the previous one")
        prev_last = last
        if len(batch.types) not in (1, last - first + 1):
            raise InvalidRequest(f"acknowledgement batch {first}..{last} has {len(batch.types)} types")
        for t in batch.types:
            if t not in TXN_ACK_TYPES:  # the KIP's code for it
                raise InvalidRecordState(f"acknowledge type {t.name} cannot be staged by a transaction")
        if last >= partition.end:
            raise InvalidRequest(f"offset {last} is past the acquired records (end {partition.end})")
        if first < partition.spso:
            # Stricter than a plain acknowledgement (which skips offsets below the SPSO, as Kafka):
            # a transaction's claim must hold every record it names, so a replayed claim of
            # records already acknowledged is refused rather than committed as if it held them.
            raise InvalidRecordState(f"offset {first} is below the start offset {partition.spso}")
        for seg_first, seg_last, ack in segments(batch):
            pos = seg_first
            for run in partition.runs.overlapping(seg_first, seg_last):
                if run.first > pos:
                    raise InvalidRecordState(f"offset {pos} is not in flight")
                lo, hi = max(run.first, seg_first), min(run.last, seg_last)
                staged = run.staged
                if run.state is _TX_PENDING and staged is not None:
                    if staged.producer_id != producer_id or staged.ack is not ack:
                        raise InvalidRecordState(f"offsets {lo}..{hi} are staged by another transaction")
                    if producer_epoch < staged.producer_epoch:
                        raise InvalidRecordState(f"offsets {lo}..{hi} are staged by a newer epoch")
                elif run.txn is not None:
                    raise InvalidRecordState(f"offsets {lo}..{hi} have a transition in progress")
                elif run.state is not _ACQUIRED:
                    raise InvalidRecordState(f"offsets {lo}..{hi} are {run.state.name}")
                elif run.member != member:
                    raise InvalidRecordState(f"offsets {lo}..{hi} are not acquired by {member}")
                else:
                    todo.append((lo, hi, ack))
                pos = run.last + 1
            if pos <= seg_last:
                raise InvalidRecordState(f"offset {pos} is not in flight")
    return todo


def validate_stage(
    partition: PartitionState,
    member: str,
    batches: Sequence[AcknowledgementBatch],
    producer_id: int,
    producer_epoch: int,
) -> None:
    """Raise as ``start_stage`` would, changing nothing (a multi-partition request checks every
    partition before it stages any)."""
    _validate(partition, member, batches, producer_id, producer_epoch)


def start_stage(
    partition: PartitionState,
    handle: int,
    member: str,
    batches: Sequence[AcknowledgementBatch],
    producer_id: int,
    producer_epoch: int,
) -> PendingWrite | None:
    """Start staging; None when every offset was already staged by this transaction (a retry)."""
    todo = _validate(partition, member, batches, producer_id, producer_epoch)
    if not todo:
        return None
    runs = partition.runs
    txn = StateTransition(handle, TransitionKind.STAGE)
    staged: list[PendingTxnBatch] = []
    dlq = partition.config.dlq_enabled
    for first, last, ack in todo:
        runs.isolate(first, last)
        target = ack_target(ack, dlq_enabled=dlq)
        for run in list(runs.overlapping(first, last)):
            run.txn = txn
            run.staged = StagedAck(producer_id, producer_epoch, ack, target, None)
            txn.pieces.append((run, _TX_PENDING))
            staged.append(
                PendingTxnBatch(
                    producer_id=producer_id,
                    producer_epoch=producer_epoch,
                    first_offset=run.first,
                    last_offset=run.last,
                    delivery_state=int(target),
                    delivery_count=run.count,
                    ack_type=int(ack),
                )
            )
    partition.pending[handle] = txn
    params = WriteStateParams(
        key=partition.key,
        state_epoch=partition.state_epoch,
        leader_epoch=partition.leader_epoch,
        start_offset=NO_START_OFFSET,
        delivery_complete_count=partition.dcc,
        state_batches=(),
        staged=tuple(staged),
    )
    return PendingWrite(handle=handle, params=params)


def commit_stage(partition: PartitionState, run: InFlightBatch) -> None:
    """The staging of ``run`` is durable: ACQUIRED -> TX_PENDING, lock suspended (the commit
    checked the move before it applied anything)."""
    staged = run.staged
    assert staged is not None
    lock = run.lock
    staged.deadline = lock.deadline if lock is not None else None
    partition.unhold(lock, run.size)
    run.lock = None
    run.state = _TX_PENDING
    partition.tx_pending += run.size
    partition.runs.reindex(run)


def apply_marker(
    partition: PartitionState, producer_id: int, producer_epoch: int, commit: bool, now: int
) -> tuple[int, bool, bool]:
    """A COMMIT or ABORT marker of ``producer_id`` reached this share-partition's state log:
    ``(records resolved, whether some went ARCHIVING, whether aborted ones must be released as a
    lapsed lock would)``; the caller starts that release (an expiry at ``now``)."""
    if partition.tx_pending == 0:
        return 0, False, False
    runs = partition.runs
    hit = [
        run
        for run in runs
        if run.state is _TX_PENDING
        and run.staged is not None
        and run.staged.producer_id == producer_id
        and producer_epoch >= run.staged.producer_epoch
    ]
    if not hit:
        return 0, False, False
    for run in hit:  # every move is checked before any applies: a refused marker changes nothing
        staged = run.staged
        assert staged is not None
        validate_transition(_TX_PENDING, staged.target if commit else _ACQUIRED)
    archiving = False
    resolved = 0
    expire = False
    held = partition.held_keys
    for run in hit:
        staged = run.staged
        assert staged is not None
        before = held.spans(run) if held is not None else None
        size = run.size
        resolved += size
        partition.tx_pending -= size
        run.staged = None
        if commit:
            target = staged.target
            run.state = target
            run.member = None
            archiving = archiving or target is _ARCHIVING
            if target in TERMINAL:
                partition.dcc += size
        else:
            run.state = _ACQUIRED
            deadline = staged.deadline
            if run.member is None or deadline is None or deadline <= now:
                # Owner or lock gone: release it as a lapsed lock would, through a durable write.
                run.member = None
                deadline = now
                expire = True
            lock = partition.new_lock(deadline, run.first, run.last, run.member or "")
            partition.move_to_lock(run, lock)
        runs.reindex(run)
        if held is not None and before is not None:
            held.settle(run, before)
    for run in hit:
        runs.coalesce(run.first, run.last)
    partition.advance_spso()
    return resolved, archiving, expire


def forget_owner(partition: PartitionState, member: str) -> None:
    """``member`` left: its TX_PENDING records stay staged, owned by nobody (an abort releases them)."""
    if partition.tx_pending == 0:
        return
    for run in partition.runs:
        if run.state is _TX_PENDING and run.member == member:
            run.member = None
            if run.staged is not None:
                run.staged.deadline = None


def pending_by_producer(partition: PartitionState) -> dict[int, int]:
    """TX_PENDING record counts per producer id."""
    out: dict[int, int] = {}
    if partition.tx_pending == 0:
        return out
    for run in partition.runs:
        if run.state is _TX_PENDING and run.staged is not None:
            pid = run.staged.producer_id
            out[pid] = out.get(pid, 0) + run.size
    return out


def load_pending(partition: PartitionState, pending: Sequence[PendingTxnBatch]) -> None:
    """Restore staged acknowledgements read back from durable state as TX_PENDING, ownerless."""
    runs = partition.runs
    for batch in sorted(pending, key=lambda b: b.first_offset):
        first = max(batch.first_offset, partition.spso)
        last = batch.last_offset
        if last < first:
            continue
        runs.isolate(first, last)
        for run in list(runs.overlapping(first, last)):
            if run.state in TERMINAL:
                partition.dcc -= run.size
            runs.remove(run)
        run = InFlightBatch(first, last, _TX_PENDING, batch.delivery_count)
        run.staged = StagedAck(
            batch.producer_id,
            batch.producer_epoch,
            AcknowledgeType(batch.ack_type),
            RecordState(batch.delivery_state),
            None,
        )
        runs.insert(run)
        partition.tx_pending += run.size
        if last + 1 > partition.end:
            partition.end = partition.gap_end = last + 1
