"""Crash-durable delivery counts (``shareq.delivery.count.durable``).

Kafka does not persist an acquisition: after a broker crash the records that were in flight come
back with the delivery count they had before, so a record that crashes its consumer and the broker
with it can be delivered forever. With the config on, an acquisition is written before the records
are handed out: the acquired ranges as AVAILABLE with their new delivery count (a lease does not
survive a restart; its count does). The write changes nothing in memory when it commits (the
records stay ACQUIRED); the shell answers the ShareFetch only once it is durable, and it joins the
group commit of the request's acknowledgements.

A record loaded AVAILABLE with as many deliveries as the limit (its last one was in flight at the
crash) is not delivered again: the acquisition walk diverts it as a release at the limit would
(ARCHIVING with a dead-letter queue, else ARCHIVED). A crash over-counts by at most one for the
records in flight at that moment, where Kafka under-counts by one.
"""

from __future__ import annotations

from collections.abc import Sequence

from shareq.share.partition_state import PartitionState
from shareq.share.persister import (
    NO_START_OFFSET,
    UNINITIALIZED_DELIVERY_COMPLETE_COUNT,
    StateBatch,
    WriteStateParams,
    state_batch,
)
from shareq.share.record_state import RecordState
from shareq.share.transition import StateTransition, TransitionKind
from shareq.share.types import AcquiredRecords, PendingWrite

_AVAILABLE = int(RecordState.AVAILABLE)


def acquisition_write(partition: PartitionState, records: Sequence[AcquiredRecords]) -> PendingWrite:
    """The write that makes an acquisition's delivery counts durable (pending until completed)."""
    batches: list[StateBatch] = []
    for r in records:
        if batches:
            p = batches[-1]
            if p[1] + 1 == r.first_offset and p[3] == r.delivery_count:
                batches[-1] = state_batch(p[0], r.last_offset, _AVAILABLE, p[3])
                continue
        batches.append(state_batch(r.first_offset, r.last_offset, _AVAILABLE, r.delivery_count))
    txn = StateTransition(partition.next_handle(), TransitionKind.ACQUISITION)
    partition.pending[txn.handle] = txn
    params = WriteStateParams(
        key=partition.key,
        state_epoch=partition.state_epoch,
        leader_epoch=partition.leader_epoch,
        start_offset=NO_START_OFFSET,
        delivery_complete_count=UNINITIALIZED_DELIVERY_COMPLETE_COUNT,
        state_batches=tuple(batches),
    )
    return PendingWrite(handle=txn.handle, params=params)
