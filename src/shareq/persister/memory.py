"""An in-memory Persister: the whole state per share-partition, kept by merging write deltas.

It merges ``WriteStateParams`` the way the share coordinator does (a delta replaces the runs it
overlaps, runs below the start offset are pruned, equal neighbours coalesce), so a share-partition
rebuilt from it sees exactly what a durable persister would hand back. ``fail_next_writes`` makes the
next writes fail, for tests of rollback.
"""

from __future__ import annotations

from collections.abc import Iterable

from kio.schema.errors import ErrorCode

from shareq.share.persister import (
    NO_START_OFFSET,
    PersisterError,
    SharePartitionKey,
    ShareState,
    ShareStateSummary,
    StateBatch,
    WriteStateParams,
)


def merge_state_batches(
    existing: Iterable[StateBatch], delta: Iterable[StateBatch], start_offset: int
) -> tuple[StateBatch, ...]:
    """``existing`` with every run of ``delta`` laid over it, pruned below ``start_offset``."""
    runs = sorted(existing, key=lambda b: b.first_offset)
    for new in sorted(delta, key=lambda b: b.first_offset):
        kept: list[StateBatch] = []
        for old in runs:
            if old.last_offset < new.first_offset or old.first_offset > new.last_offset:
                kept.append(old)
                continue
            if old.first_offset < new.first_offset:
                kept.append(_clip(old, old.first_offset, new.first_offset - 1))
            if old.last_offset > new.last_offset:
                kept.append(_clip(old, new.last_offset + 1, old.last_offset))
        kept.append(new)
        runs = sorted(kept, key=lambda b: b.first_offset)
    out: list[StateBatch] = []
    for run in runs:
        if run.last_offset < start_offset:
            continue
        if run.first_offset < start_offset:
            run = _clip(run, start_offset, run.last_offset)
        if out:
            prev = out[-1]
            if (
                prev.last_offset + 1 == run.first_offset
                and prev.delivery_state == run.delivery_state
                and prev.delivery_count == run.delivery_count
            ):
                out[-1] = _clip(prev, prev.first_offset, run.last_offset)
                continue
        out.append(run)
    return tuple(out)


def _clip(batch: StateBatch, first: int, last: int) -> StateBatch:
    return StateBatch(
        first_offset=first,
        last_offset=last,
        delivery_state=batch.delivery_state,
        delivery_count=batch.delivery_count,
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

    async def write_state(self, params: WriteStateParams) -> None:
        self.apply(params)

    def apply(self, params: WriteStateParams) -> None:
        """The synchronous core of ``write_state``."""
        if self.fail_next_writes > 0:
            self.fail_next_writes -= 1
            raise PersisterError(ErrorCode.kafka_storage_error, "injected write failure")
        old = self._states.get(params.key)
        if old is not None and params.state_epoch < old.state_epoch:
            raise PersisterError(ErrorCode.fenced_state_epoch, "state epoch is older than the stored one")
        start = old.start_offset if old is not None else NO_START_OFFSET
        if params.start_offset != NO_START_OFFSET:
            start = max(start, params.start_offset)
        batches = merge_state_batches(
            old.state_batches if old is not None else (), params.state_batches, start
        )
        self._states[params.key] = ShareState(
            state_epoch=params.state_epoch,
            leader_epoch=params.leader_epoch,
            start_offset=start,
            delivery_complete_count=params.delivery_complete_count,
            state_batches=batches,
        )
        self.writes += 1

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
