"""An in-memory Persister: the whole state per share-partition, kept by merging write deltas.

It merges ``WriteStateParams`` with the share coordinator's own combiner (a delta replaces the runs
it overlaps, runs below the start offset are pruned, equal neighbours coalesce), so a share-partition
rebuilt from it sees exactly what a durable persister would hand back. ``fail_next_writes`` makes the
next writes fail, for tests of rollback.
"""

from __future__ import annotations

from collections.abc import Coroutine
from dataclasses import replace
from typing import Any

from kio.schema.errors import ErrorCode

from shareq.coordinators.share.combiner import combine_state_batches
from shareq.coordinators.share.delays import combine_delays
from shareq.coordinators.share.pending import add_staged, resolve_marker
from shareq.share.persister import (
    NO_START_OFFSET,
    PersisterError,
    SharePartitionKey,
    ShareState,
    ShareStateSummary,
    WriteStateParams,
    refused,
)


class MemoryPersister:
    """Implements ``Persister``; nothing survives the process, everything survives an engine."""

    def __init__(self) -> None:
        self._states: dict[SharePartitionKey, ShareState] = {}
        self.fail_next_writes = 0
        self.writes = 0

    async def initialize_state(self, key: SharePartitionKey, *, state_epoch: int, start_offset: int) -> None:
        self._states[key] = ShareState(
            state_epoch=state_epoch,
            leader_epoch=0,
            start_offset=start_offset,
            delivery_complete_count=0,
            state_batches=(),
        )

    async def read_state(self, key: SharePartitionKey, *, leader_epoch: int) -> ShareState | None:
        return self._states.get(key)

    def write_state(self, params: WriteStateParams) -> Coroutine[Any, Any, None]:
        try:
            self.apply(params)  # at the call, like a queued write: in the order of the calls
        except PersisterError as error:
            return refused(error)
        return _applied()

    def apply(self, params: WriteStateParams) -> None:
        """The synchronous core of ``write_state``."""
        if self.fail_next_writes > 0:
            self.fail_next_writes -= 1
            raise PersisterError(ErrorCode.kafka_storage_error, "injected write failure")
        old = self._states.get(params.key)
        if old is not None and params.state_epoch < old.state_epoch:
            raise PersisterError(ErrorCode.fenced_state_epoch, "state epoch is older than the stored one")
        start = old.start_offset if old is not None else NO_START_OFFSET
        pending = old.pending_txn_batches if old is not None else ()
        if params.staged:
            pending = add_staged(pending, params.staged)
        if params.start_offset != NO_START_OFFSET:
            start = params.start_offset  # as the share coordinator takes it: even backwards
        batches = combine_state_batches(
            old.state_batches if old is not None else (), params.state_batches, start
        )
        self._states[params.key] = ShareState(
            state_epoch=params.state_epoch,
            leader_epoch=params.leader_epoch,
            start_offset=start,
            delivery_complete_count=params.delivery_complete_count,
            state_batches=batches,
            pending_txn_batches=pending,
            delays=combine_delays(
                old.delays if old is not None else (), params.state_batches, params.delays, start
            ),
        )
        self.writes += 1

    async def end_transaction(self, producer_id: int, producer_epoch: int, *, commit: bool) -> None:
        self.marker(producer_id, producer_epoch, commit=commit)

    def marker(self, producer_id: int, producer_epoch: int, *, commit: bool) -> None:
        """A transaction marker of ``producer_id`` reached the state: settle what it staged."""
        for key, old in list(self._states.items()):
            if not old.pending_txn_batches:
                continue
            batches, pending, start = resolve_marker(
                old.state_batches,
                old.pending_txn_batches,
                old.start_offset,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                commit=commit,
            )
            self._states[key] = replace(
                old, state_batches=batches, pending_txn_batches=pending, start_offset=start
            )

    def state(self, key: SharePartitionKey) -> ShareState | None:
        """The stored state, synchronously (for tests and the scenario runner)."""
        return self._states.get(key)

    async def delete_state(self, key: SharePartitionKey) -> None:
        self._states.pop(key, None)

    async def read_state_summary(self, key: SharePartitionKey) -> ShareStateSummary | None:
        state = self._states.get(key)
        if state is None:
            return None
        return ShareStateSummary(
            state_epoch=state.state_epoch,
            leader_epoch=state.leader_epoch,
            start_offset=state.start_offset,
            delivery_complete_count=state.delivery_complete_count,
        )


async def _applied() -> None:
    return None
