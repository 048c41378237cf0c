"""InLogPersister on real partition logs: control records in the user partitions, the share
snapshot file, recovery with and without it, checkpoints, retention holds."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shareq.coordinators.share.shard import ShareCoordinatorConfig
from shareq.log.config import LogConfig
from shareq.log.partition_log import PartitionLog
from shareq.log.records import CONTROL_TYPE_SHARE_CHECKPOINT, Record, encode_batch
from shareq.persister.builtin import FlushMode
from shareq.persister.in_log import InLogPersister
from shareq.persister.in_log_recovery import SNAPSHOT_FILE, read_snapshot_file, scan_forward
from shareq.persister.share_control import ControlKind, ShareControl, decode, encode
from shareq.share.persister import PendingTxnBatch, SharePartitionKey, StateBatch, WriteStateParams

T = TypeVar("T")
TOPIC = uuid.UUID(int=7)
pytestmark = pytest.mark.timeout(120)


def run(factory: Callable[[], Awaitable[T]]) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(factory(), timeout=100)

    return asyncio.run(bounded())


class Logs:
    """Partition logs of one topic under a directory, opened on demand and kept open."""

    def __init__(self, directory: Path, partitions: int) -> None:
        self.directory = directory
        self.partitions = partitions
        self.logs: dict[int, PartitionLog] = {}

    def log_for(self, topic_id: uuid.UUID, index: int) -> PartitionLog | None:
        if topic_id != TOPIC or not 0 <= index < self.partitions:
            return None
        if index not in self.logs:
            config = LogConfig(segment_bytes=64 * 1024, segment_ms=None, retention_ms=-1, retention_bytes=-1)
            self.logs[index] = PartitionLog.open(self.directory / f"t-{index}", config, now_ms=0)
        return self.logs[index]

    def list(self) -> list[tuple[uuid.UUID, int]]:
        return [(TOPIC, i) for i in range(self.partitions)]

    def close(self) -> None:
        for log in self.logs.values():
            log.close()
        self.logs.clear()


def key(group: str, partition: int = 0) -> SharePartitionKey:
    return SharePartitionKey(group_id=group, topic_id=TOPIC, partition=partition)


def ack(k: SharePartitionKey, first: int, last: int, *, start: int = -1, state: int = 2) -> WriteStateParams:
    return WriteStateParams(
        key=k,
        state_epoch=1,
        leader_epoch=0,
        start_offset=start,
        delivery_complete_count=-1,
        state_batches=(
            StateBatch(first_offset=first, last_offset=last, delivery_state=state, delivery_count=1),
        ),
    )


def produce(log: PartitionLog, n: int) -> None:
    for i in range(n):
        log.append(encode_batch([Record(key=None, value=b"v%d" % i)]), now_ms=0)


async def opened(logs: Logs, **kwargs: Any) -> InLogPersister:
    p = InLogPersister(logs.log_for, logs.list, **kwargs)
    await p.load()
    return p


def test_payload_round_trip() -> None:
    control = ShareControl(
        checkpoint=False,
        kind=ControlKind.TXN_STAGE,
        group_id="gé",
        checkpoint_epoch=70_000,
        back_offset=131,
        leader_epoch=3,
        pending=(
            PendingTxnBatch(
                producer_id=5,
                producer_epoch=1,
                first_offset=110,
                last_offset=119,
                delivery_state=2,
                delivery_count=1,
                ack_type=1,
            ),
        ),
    )
    assert decode(6, encode(control)) == control


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 10**6), st.integers(0, 50), st.sampled_from([0, 2, 3, 4]), st.integers(0, 9)
        ),
        max_size=30,
    ),
    st.booleans(),
)
def test_checkpoint_round_trip(runs: list[tuple[int, int, int, int]], checkpoint: bool) -> None:
    states = tuple(
        StateBatch(first_offset=f, last_offset=f + n, delivery_state=s, delivery_count=c)
        for f, n, s, c in runs
    )
    control = ShareControl(
        checkpoint=checkpoint,
        kind=ControlKind.STATE,
        group_id="g",
        checkpoint_epoch=2,
        back_offset=-1 if checkpoint else 9,
        state_epoch=1,
        start_offset=120,
        end_offset=121,
        delivery_complete_count=4,
        states=states,
    )
    assert decode(5 if checkpoint else 6, encode(control)) == control


@pytest.mark.parametrize("mode", list(FlushMode))
def test_state_survives_a_reopen_from_the_snapshot_file(tmp_path: Path, mode: FlushMode) -> None:
    """Concurrent writes of two groups on two partitions, interleaved with user records; after a
    reopen the state is read back from the latest checkpoint and its chain."""
    logs = Logs(tmp_path, 2)
    config = ShareCoordinatorConfig(snapshot_update_records_per_snapshot=7)
    keys = [key(g, p) for g in ("a", "b") for p in (0, 1)]

    async def first() -> dict[SharePartitionKey, Any]:
        p = await opened(logs, flush_mode=mode, config=config)
        for k in keys:
            await p.initialize_state(k, state_epoch=1, start_offset=0)
        for i in range(40):
            for log in logs.logs.values():
                produce(log, 1)
            await asyncio.gather(*(p.write_state(ack(k, 2 * i + 1, 2 * i + 1)) for k in keys))
        states = {k: await p.read_state(k, leader_epoch=0) for k in keys}
        await p.close()
        return states

    before = run(first)
    assert (tmp_path / "t-0" / SNAPSHOT_FILE).exists()
    logs.close()

    async def second() -> None:
        p = await opened(logs, flush_mode=mode, config=config)
        assert p.rebuilt_snapshot_files == 0
        for k in keys:
            assert await p.read_state(k, leader_epoch=0) == before[k]
        await p.close()

    run(second)
    logs.close()


def test_recovery_reads_from_the_checkpoint_not_the_log_start(tmp_path: Path) -> None:
    """Thousands of user records before the group's latest checkpoint: recovery reads only from it."""
    logs = Logs(tmp_path, 1)

    async def first() -> int:
        p = await opened(logs, config=ShareCoordinatorConfig(snapshot_update_records_per_snapshot=1000))
        k = key("g")
        await p.initialize_state(k, state_epoch=1, start_offset=0)
        log = logs.logs[0]
        produce(log, 5000)
        await p.write_state(ack(k, 0, 4999, start=5000))  # everything acknowledged: a checkpoint
        sco = p.checkpoint_offset(k)
        assert sco is not None and sco >= 5000
        produce(log, 10)
        await p.write_state(ack(k, 5001, 5001))
        latest = p.checkpoint_offset(k)
        assert latest is not None and latest >= sco
        await p.close()
        return latest

    sco = run(first)
    logs.close()

    async def second() -> None:
        p = await opened(logs)
        state = await p.read_state(key("g"), leader_epoch=0)
        assert state is not None and state.start_offset == 5000
        assert [(b.first_offset, b.delivery_state) for b in state.state_batches] == [(5001, 2)]
        assert p.checkpoint_offset(key("g")) == sco
        size = logs.logs[0].size_bytes
        assert p.recovered_bytes_read < size / 10  # not a scan of the 5,000 records before the SCO
        await p.close()

    run(second)
    logs.close()


@pytest.mark.parametrize("damage", ["missing", "corrupt"])
def test_a_missing_or_corrupt_snapshot_file_is_rebuilt_by_a_backwards_scan(
    tmp_path: Path, damage: str
) -> None:
    logs = Logs(tmp_path, 1)
    k1, k2 = key("g1"), key("g2")

    async def first() -> dict[SharePartitionKey, Any]:
        p = await opened(logs)
        for k in (k1, k2):
            await p.initialize_state(k, state_epoch=1, start_offset=0)
        for i in range(30):
            produce(logs.logs[0], 1)
            await p.write_state(ack(k1, i, i, state=4 if i % 3 else 2))
        await p.write_state(ack(k2, 3, 5))
        await p.delete_state(k2)
        await p.initialize_state(key("g3"), state_epoch=1, start_offset=7)
        out = {k: await p.read_state(k, leader_epoch=0) for k in (k1, key("g3"))}
        await p.close()
        return out

    before = run(first)
    logs.close()
    path = tmp_path / "t-0" / SNAPSHOT_FILE
    if damage == "missing":
        path.unlink()
    else:
        data = bytearray(path.read_bytes())
        data[10] ^= 0xFF
        path.write_bytes(bytes(data))
    assert read_snapshot_file(tmp_path / "t-0") is None

    async def second() -> None:
        p = await opened(logs)
        assert p.rebuilt_snapshot_files == 1
        for k, state in before.items():
            assert await p.read_state(k, leader_epoch=0) == state
        assert await p.read_state(k2, leader_epoch=0) is None  # deleted stays deleted
        await p.close()

    run(second)
    snap = read_snapshot_file(tmp_path / "t-0")
    assert snap is not None and set(snap.groups) == {"g1", "g3"}
    logs.close()


def test_a_long_chain_is_cut_by_a_checkpoint(tmp_path: Path) -> None:
    """Fragmented state (no SPSO progress) makes deltas; past the size bound a checkpoint follows."""
    logs = Logs(tmp_path, 1)

    async def body() -> None:
        p = await opened(
            logs,
            config=ShareCoordinatorConfig(snapshot_update_records_per_snapshot=10_000),
            chain_max_bytes=2000,
        )
        k = key("g")
        await p.initialize_state(k, state_epoch=1, start_offset=0)
        produce(logs.logs[0], 400)
        for i in range(1, 200, 2):
            await p.write_state(ack(k, i, i))
        records, _ = scan_forward(logs.logs[0], 0, logs.logs[0].log_end_offset)
        checkpoints = [o for o, c in records if c.control_type == CONTROL_TYPE_SHARE_CHECKPOINT]
        assert 3 <= len(checkpoints) <= 60
        # every delta chains back to the record before it, within one checkpoint epoch
        last: dict[int, int] = {}
        for offset, c in records:
            if not c.checkpoint:
                assert c.back_offset == last[c.checkpoint_epoch]
            last[c.checkpoint_epoch] = offset
        await p.close()

    run(body)
    logs.close()


def test_acquired_is_never_written_and_holds_follow_the_checkpoint(tmp_path: Path) -> None:
    logs = Logs(tmp_path, 1)

    async def body() -> None:
        p = await opened(logs)
        k = key("g")
        await p.initialize_state(k, state_epoch=1, start_offset=0)
        log = logs.logs[0]
        produce(log, 20)
        await p.write_state(ack(k, 0, 9, start=10))
        hold = getattr(log, "retention_floor", None)
        sco = p.checkpoint_offset(k)
        if hold is not None:
            assert hold == sco
        records, _ = scan_forward(log, 0, log.log_end_offset)
        assert all(b.delivery_state != 1 for _, c in records for b in c.states)
        await p.delete_state(k)
        assert p.checkpoint_offset(k) is None
        if hold is not None:
            assert getattr(log, "retention_floor", None) is None
        await p.close()

    run(body)
    logs.close()
