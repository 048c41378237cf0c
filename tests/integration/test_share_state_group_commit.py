"""The write cycle both persisters share, on real partition logs: a read waits behind a queued write
of its share-partition, writes take effect in the order of the calls, and a failed append fails its
partition until the persister is reopened."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import pytest

from shareq.coordinators.share.shard import ShareCoordinatorConfig
from shareq.log.config import LogConfig
from shareq.log.partition_log import PartitionLog
from shareq.persister.builtin import STATE_TOPIC, BuiltinPersister, FlushMode
from shareq.persister.in_log import InLogPersister
from shareq.share.persister import (
    PersisterError,
    SharePartitionKey,
    ShareState,
    StateBatch,
    WriteStateParams,
)

T = TypeVar("T")
TOPIC = uuid.UUID(int=11)
KEY = SharePartitionKey(group_id="g", topic_id=TOPIC, partition=0)
MAX_MESSAGE_BYTES = 2048
KINDS = ("coordinator", "in-log")

pytestmark = pytest.mark.timeout(60)


def run(factory: Callable[[], Awaitable[T]]) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(factory(), timeout=50)

    return asyncio.run(bounded())


class Logs:
    """The partition logs the persisters write to, under one directory; appends larger than
    ``MAX_MESSAGE_BYTES`` are refused by the log. The built-in persister opens and closes its own;
    the user partition stays open across in-log persisters, as the broker keeps it."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.opened: list[PartitionLog] = []
        self.user: PartitionLog | None = None
        self.config = LogConfig(
            segment_bytes=64 * 1024,
            segment_ms=None,
            retention_ms=-1,
            retention_bytes=-1,
            max_message_bytes=MAX_MESSAGE_BYTES,
        )

    def open(self, name: str) -> PartitionLog:
        log = PartitionLog.open(self.directory / name, self.config, now_ms=0)
        self.opened.append(log)
        return log

    def user_partition(self) -> PartitionLog:
        if self.user is None:
            self.user = self.open("t-0")
        return self.user

    def close(self) -> None:
        for log in self.opened:
            log.close()  # a no-op on a closed log


async def opened(kind: str, logs: Logs, mode: FlushMode = FlushMode.GROUP) -> Any:
    """A loaded persister of ``kind`` on ``logs``: its state topic's one partition, or topic-partition 0."""
    persister: BuiltinPersister | InLogPersister
    if kind == "coordinator":
        persister = BuiltinPersister(
            lambda i: logs.open(f"{STATE_TOPIC}-{i}"),
            config=ShareCoordinatorConfig(state_topic_num_partitions=1),
            flush_mode=mode,
        )
    else:

        def log_for(topic_id: uuid.UUID, index: int) -> PartitionLog | None:
            return logs.user_partition() if (topic_id, index) == (TOPIC, 0) else None

        persister = InLogPersister(log_for, lambda: [(TOPIC, 0)], flush_mode=mode)
    await persister.load()
    return persister


def acks(offsets: range | list[int]) -> WriteStateParams:
    return WriteStateParams(
        key=KEY,
        state_epoch=1,
        leader_epoch=0,
        start_offset=-1,
        delivery_complete_count=-1,
        state_batches=tuple(
            StateBatch(first_offset=o, last_offset=o, delivery_state=2, delivery_count=1) for o in offsets
        ),
    )


def acked(state: ShareState | None) -> set[int]:
    assert state is not None
    return {
        o
        for b in state.state_batches
        if b.delivery_state == 2
        for o in range(b.first_offset, b.last_offset + 1)
    }


@pytest.mark.parametrize("mode", list(FlushMode))
@pytest.mark.parametrize("kind", KINDS)
def test_a_read_waits_behind_a_queued_write_of_its_share_partition(
    tmp_path: Path, kind: str, mode: FlushMode
) -> None:
    logs = Logs(tmp_path)

    async def body() -> None:
        p = await opened(kind, logs, mode)
        await p.initialize_state(KEY, state_epoch=1, start_offset=0)
        await p.write_state(acks([1]))
        # the leader epoch is now 0: a read at 0 writes nothing and could answer from the shard
        assert acked(await p.read_state(KEY, leader_epoch=0)) == {1}
        write = asyncio.ensure_future(p.write_state(acks([5])))  # queued at the call
        assert not write.done()  # not durable yet, so not answered
        state = await p.read_state(KEY, leader_epoch=0)
        assert write.done() and write.exception() is None
        assert acked(state) == {1, 5}  # the read saw the write queued before it
        await p.close()

    try:
        run(body)
    finally:
        logs.close()


@pytest.mark.parametrize("kind", KINDS)
def test_writes_take_effect_in_the_order_of_the_calls_not_of_the_awaits(tmp_path: Path, kind: str) -> None:
    """Each write may move the start offset: one awaited first but called later (the engine made
    it later) must still land later, or a stale start offset moves it back over settled records."""
    logs = Logs(tmp_path)

    async def body() -> None:
        p = await opened(kind, logs)
        await p.initialize_state(KEY, state_epoch=1, start_offset=0)
        earlier = p.write_state(replace(acks([4]), start_offset=3))
        later = p.write_state(replace(acks([9]), start_offset=8))
        await later  # its task ran first, as a follow-up spawned as a task may
        await earlier
        state = await p.read_state(KEY, leader_epoch=0)
        assert state is not None and state.start_offset == 8
        assert acked(state) == {9}  # 4 is below the start offset, pruned
        await p.close()

    try:
        run(body)
    finally:
        logs.close()


@pytest.mark.parametrize("kind", KINDS)
def test_a_failed_append_fails_the_partition_until_the_persister_is_reopened(
    tmp_path: Path, kind: str
) -> None:
    logs = Logs(tmp_path)

    async def failing() -> None:
        p = await opened(kind, logs)
        await p.initialize_state(KEY, state_epoch=1, start_offset=0)
        await p.write_state(acks([1]))
        # 300 separate runs make one record far larger than the log takes in one append
        with pytest.raises(PersisterError) as refused:
            await p.write_state(acks(range(10, 610, 2)))
        assert refused.value.error_code == 56  # KAFKA_STORAGE_ERROR
        for attempt in (p.write_state(acks([3])), p.read_state(KEY, leader_epoch=0)):
            with pytest.raises(PersisterError) as after:
                await attempt
            assert after.value.error_code == 56  # the partition refuses until reopened
        await p.close()

    async def reopened() -> None:
        p = await opened(kind, logs)
        assert acked(await p.read_state(KEY, leader_epoch=0)) == {1}  # what was durable, no more
        await p.write_state(acks([3]))
        assert acked(await p.read_state(KEY, leader_epoch=0)) == {1, 3}
        await p.close()

    try:
        run(failing)
        run(reopened)
    finally:
        logs.close()
