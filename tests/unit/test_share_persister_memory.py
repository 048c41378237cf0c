"""The in-memory persister merges write deltas the way the share coordinator does."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from shareq.coordinators.share.combiner import combine_state_batches
from shareq.persister.memory import MemoryPersister
from shareq.share.persister import (
    NO_START_OFFSET,
    PersisterError,
    SharePartitionKey,
    StateBatch,
    WriteStateParams,
)

KEY = SharePartitionKey(group_id="g", topic_id=uuid.UUID(int=1), partition=0)


def sb(first: int, last: int, state: int, count: int) -> StateBatch:
    return StateBatch(first_offset=first, last_offset=last, delivery_state=state, delivery_count=count)


def test_delta_replaces_overlap_and_coalesces() -> None:
    merged = combine_state_batches([sb(0, 9, 0, 1)], [sb(3, 5, 2, 1)], 0)
    assert merged == (sb(0, 2, 0, 1), sb(3, 5, 2, 1), sb(6, 9, 0, 1))
    merged = combine_state_batches(merged, [sb(3, 5, 0, 1)], 0)
    assert merged == (sb(0, 9, 0, 1),)


def test_prune_below_start_offset() -> None:
    assert combine_state_batches([sb(0, 9, 2, 1), sb(10, 12, 0, 2)], [], 5) == (
        sb(5, 9, 2, 1),
        sb(10, 12, 0, 2),
    )
    assert combine_state_batches([sb(0, 9, 2, 1)], [], 10) == ()


def params(start: int, batches: tuple[StateBatch, ...], epoch: int = 0) -> WriteStateParams:
    return WriteStateParams(
        key=KEY,
        state_epoch=epoch,
        leader_epoch=0,
        start_offset=start,
        delivery_complete_count=0,
        state_batches=batches,
    )


def test_write_read_fence_and_injected_failure() -> None:
    async def go() -> None:
        p = MemoryPersister()
        assert await p.read_state(KEY, leader_epoch=0) is None
        await p.write_state(params(100, (), epoch=2))
        await p.write_state(params(NO_START_OFFSET, (sb(100, 104, 2, 1),), epoch=2))
        state = await p.read_state(KEY, leader_epoch=0)
        assert (
            state is not None and state.start_offset == 100 and state.state_batches == (sb(100, 104, 2, 1),)
        )
        with pytest.raises(PersisterError):
            await p.write_state(params(NO_START_OFFSET, (), epoch=1))
        p.fail_next_writes = 1
        with pytest.raises(PersisterError):
            await p.write_state(params(105, (), epoch=2))
        await p.write_state(params(105, (), epoch=2))
        summary = await p.read_state_summary(KEY)
        assert summary is not None and summary.start_offset == 105
        state = await p.read_state(KEY, leader_epoch=0)
        assert state is not None and state.state_batches == ()

    asyncio.run(go())
