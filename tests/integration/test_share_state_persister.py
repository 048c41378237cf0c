"""BuiltinPersister on real partition logs in a temporary directory."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest
from kio.schema.errors import ErrorCode

from shareq.coordinators.share.shard import ShareCoordinatorConfig
from shareq.persister.builtin import STATE_TOPIC, BuiltinPersister, FlushMode
from shareq.share.persister import PersisterError, SharePartitionKey, StateBatch, WriteStateParams

T = TypeVar("T")
KEYS = [SharePartitionKey(group_id="g", topic_id=uuid.UUID(int=9), partition=p) for p in range(5)]


def run(factory: Callable[[], Awaitable[T]]) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(factory(), timeout=120)

    return asyncio.run(bounded())


def ack(key: SharePartitionKey, offset: int, *, epoch: int = 0, start: int = -1) -> WriteStateParams:
    return WriteStateParams(
        key=key,
        state_epoch=epoch,
        leader_epoch=0,
        start_offset=start,
        delivery_complete_count=1,
        state_batches=(
            StateBatch(first_offset=offset, last_offset=offset, delivery_state=2, delivery_count=1),
        ),
    )


def acked(batches: tuple[StateBatch, ...]) -> set[int]:
    return {o for b in batches if b.delivery_state == 2 for o in range(b.first_offset, b.last_offset + 1)}


async def opened(directory: Path, **kwargs: object) -> BuiltinPersister:
    persister = BuiltinPersister.in_directory(directory, **kwargs)  # type: ignore[arg-type]
    await persister.load()
    return persister


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", list(FlushMode))
def test_state_survives_a_reopen(tmp_path: Path, mode: FlushMode) -> None:
    config = ShareCoordinatorConfig(snapshot_update_records_per_snapshot=7, state_topic_num_partitions=5)

    async def first() -> None:
        p = await opened(tmp_path, flush_mode=mode, config=config)
        for key in KEYS:
            await p.initialize_state(key, state_epoch=1, start_offset=0)
        # concurrent writes, odd offsets only so the state stays fragmented
        await asyncio.gather(*(p.write_state(ack(k, 2 * i + 1, epoch=1)) for i in range(40) for k in KEYS))
        await p.delete_state(KEYS[4])
        await p.close()

    async def second() -> None:
        p = await opened(tmp_path, flush_mode=mode, config=config)
        for key in KEYS[:4]:
            state = await p.read_state(key, leader_epoch=0)
            assert state is not None and state.state_epoch == 1 and state.start_offset == 0
            assert acked(state.state_batches) == {2 * i + 1 for i in range(40)}
            summary = await p.read_state_summary(key)
            assert summary is not None and summary.delivery_complete_count == 1
        assert await p.read_state(KEYS[4], leader_epoch=0) is None
        await p.close()

    run(first)
    run(second)


@pytest.mark.timeout(60)
def test_group_commit_shares_appends(tmp_path: Path) -> None:
    async def body() -> int:
        p = await opened(tmp_path, config=ShareCoordinatorConfig(state_topic_num_partitions=1))
        await p.initialize_state(KEYS[0], state_epoch=0, start_offset=0)
        await asyncio.gather(*(p.write_state(ack(KEYS[0], i)) for i in range(1000)))
        state = await p.read_state(KEYS[0], leader_epoch=0)
        assert state is not None and acked(state.state_batches) == set(range(1000))
        log = p._partitions[0].log
        assert log is not None
        batches = 0
        offset = log.log_start_offset
        while offset < log.log_end_offset:
            data = log.read(offset, 1 << 20)
            batches += len(data.batches)
            offset = data.batches[-1][1] + 1
        await p.close()
        return batches

    assert run(body) < 100  # 1001 records in far fewer appends


@pytest.mark.timeout(60)
def test_stale_epochs_are_refused(tmp_path: Path) -> None:
    async def body() -> None:
        p = await opened(tmp_path, config=ShareCoordinatorConfig(state_topic_num_partitions=3))
        await p.initialize_state(KEYS[0], state_epoch=2, start_offset=0)
        with pytest.raises(PersisterError) as info:
            await p.write_state(ack(KEYS[0], 0, epoch=1))
        assert info.value.error_code == ErrorCode.fenced_state_epoch
        assert await p.read_state(KEYS[0], leader_epoch=4) is not None  # records leader epoch 4
        with pytest.raises(PersisterError) as info:
            await p.read_state(KEYS[0], leader_epoch=3)
        assert info.value.error_code == ErrorCode.fenced_leader_epoch
        await p.close()

    run(body)


@pytest.mark.timeout(60)
def test_requests_before_load_are_refused(tmp_path: Path) -> None:
    async def body() -> None:
        p = BuiltinPersister.in_directory(
            tmp_path, config=ShareCoordinatorConfig(state_topic_num_partitions=2)
        )
        with pytest.raises(PersisterError) as info:
            await p.write_state(ack(KEYS[0], 0))
        assert info.value.error_code == ErrorCode.coordinator_load_in_progress
        await p.load()
        await p.write_state(ack(KEYS[0], 0))
        await p.close()

    run(body)


@pytest.mark.timeout(60)
def test_a_torn_final_record_recovers_to_the_last_whole_one(tmp_path: Path) -> None:
    config = ShareCoordinatorConfig(state_topic_num_partitions=1)

    async def write() -> None:
        p = await opened(tmp_path, config=config, flush_mode=FlushMode.FSYNC)
        await p.initialize_state(KEYS[0], state_epoch=0, start_offset=0)
        for i in range(10):
            await p.write_state(ack(KEYS[0], 2 * i))
        await p.close()

    run(write)
    segments = sorted((tmp_path / f"{STATE_TOPIC}-0").glob("*.log"))
    last = segments[-1]
    last.write_bytes(last.read_bytes()[:-7])  # cut the final batch (the last write) mid-record

    async def reload() -> None:
        p = await opened(tmp_path, config=config)
        state = await p.read_state(KEYS[0], leader_epoch=0)
        assert state is not None and acked(state.state_batches) == {2 * i for i in range(9)}
        await p.write_state(ack(KEYS[0], 100))  # the log is writable after recovery
        await p.close()

    run(reload)


@pytest.mark.timeout(60)
def test_cold_snapshots_and_pruning_free_old_segments(tmp_path: Path) -> None:
    now = [1_000_000]
    config = ShareCoordinatorConfig(
        state_topic_num_partitions=1,
        cold_partition_snapshot_interval_ms=1000,
        state_topic_prune_interval_ms=1000,
    )

    async def body() -> None:
        p = await opened(tmp_path, config=config, segment_bytes=16384, clock_ms=lambda: now[0])
        await p.initialize_state(KEYS[0], state_epoch=0, start_offset=0)
        await p.initialize_state(KEYS[1], state_epoch=0, start_offset=0)
        for i in range(300):  # KEYS[1] writes; KEYS[0] goes cold and pins the log start
            await p.write_state(ack(KEYS[1], 2 * i))
        log = p._partitions[0].log
        assert log is not None
        await p.prune()
        assert log.log_start_offset == 0
        now[0] += 1000
        deadline = p.next_deadline()
        assert deadline is not None and deadline <= now[0]
        await p.tick(now[0])  # KEYS[0] is re-snapshotted at the end, then the log is pruned
        assert log.log_start_offset > 0
        state = await p.read_state(KEYS[1], leader_epoch=0)
        assert state is not None and acked(state.state_batches) == {2 * i for i in range(300)}
        await p.close()
        p = await opened(tmp_path, config=config, segment_bytes=16384, clock_ms=lambda: now[0])
        assert await p.read_state(KEYS[0], leader_epoch=0) is not None
        state = await p.read_state(KEYS[1], leader_epoch=0)
        assert state is not None and acked(state.state_batches) == {2 * i for i in range(300)}
        await p.close()

    run(body)
