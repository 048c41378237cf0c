"""Child process of the crash test: writes acknowledgements through BuiltinPersister (or the
InLogPersister, into partition logs that also take user records) and prints ``<key index>
<offset>`` for each write it reported successful (stdout flushed per line).

It SIGKILLs itself after a given number of seconds, from a timer on its event loop: that can fire
at any await, including while a cycle's fsync runs in a worker thread."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import sys
import uuid
from pathlib import Path
from typing import Any

from shareq.coordinators.share.shard import ShareCoordinatorConfig
from shareq.log.config import LogConfig
from shareq.log.partition_log import PartitionLog
from shareq.log.records import Record, encode_batch
from shareq.persister.builtin import BuiltinPersister, FlushMode
from shareq.persister.in_log import InLogPersister
from shareq.share.persister import SharePartitionKey, StateBatch, WriteStateParams

KEYS = [SharePartitionKey(group_id="crash", topic_id=uuid.UUID(int=77), partition=p) for p in range(4)]
CONFIG = ShareCoordinatorConfig(snapshot_update_records_per_snapshot=20, state_topic_num_partitions=3)
SEGMENT_BYTES = 16 * 1024


class UserLogs:
    """The partition logs of ``KEYS``' topic, for the in-log persister (opened on first use)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.logs: dict[int, PartitionLog] = {}

    def log_for(self, topic_id: uuid.UUID, partition: int) -> PartitionLog | None:
        if topic_id != KEYS[0].topic_id or not 0 <= partition < len(KEYS):
            return None
        if partition not in self.logs:
            config = LogConfig(
                segment_bytes=SEGMENT_BYTES, segment_ms=None, retention_ms=-1, retention_bytes=-1
            )
            self.logs[partition] = PartitionLog.open(self.directory / f"t-{partition}", config, now_ms=0)
        return self.logs[partition]

    def partitions(self) -> list[tuple[uuid.UUID, int]]:
        return [(key.topic_id, key.partition) for key in KEYS]

    def close(self) -> None:
        for log in self.logs.values():
            log.close()


def open_persister(
    directory: Path, mode: FlushMode = FlushMode.GROUP, persister: str = "coordinator"
) -> tuple[Any, UserLogs]:
    """The persister and the user partition logs (which hold the state when it is in-log)."""
    logs = UserLogs(directory)
    if persister == "in-log":
        return InLogPersister(logs.log_for, logs.partitions, config=CONFIG, flush_mode=mode), logs
    return BuiltinPersister.in_directory(
        directory, config=CONFIG, segment_bytes=SEGMENT_BYTES, flush_mode=mode
    ), logs


def acked_offsets(batches: tuple[StateBatch, ...]) -> set[int]:
    return {o for b in batches if b.delivery_state == 2 for o in range(b.first_offset, b.last_offset + 1)}


async def main(directory: Path, mode: FlushMode, kill_after: float, kind: str) -> None:
    asyncio.get_running_loop().call_later(kill_after, os.kill, os.getpid(), signal.SIGKILL)
    persister, logs = open_persister(directory, mode, kind)
    user_batch = encode_batch([Record(key=None, value=b"u" * 100) for _ in range(5)])
    await persister.load()
    starts = []
    for key in KEYS:
        state = await persister.read_state(key, leader_epoch=0)
        if state is None:
            await persister.initialize_state(key, state_epoch=0, start_offset=0)
            starts.append(0)
        else:
            # Resume well past the last offset written, so a write lost in the crash is never
            # written again by this run and must be missing if it was wrongly reported.
            starts.append(max(acked_offsets(state.state_batches) | {state.start_offset}) + 100)
    print("ready", flush=True)
    spso = list(starts)

    async def writer(k: int, parity: int) -> None:
        offset = starts[k] + parity
        n = 0
        while True:
            n += 1
            if kind == "in-log" and n % 3 == 0:  # user records between the state records
                log = logs.log_for(KEYS[k].topic_id, KEYS[k].partition)
                assert log is not None
                log.append(user_batch, now_ms=0)
            if n % 10 == 0:  # the SPSO never moves backwards
                spso[k] = max(spso[k], offset - 40)
            await persister.write_state(
                WriteStateParams(
                    key=KEYS[k],
                    state_epoch=0,
                    leader_epoch=0,
                    start_offset=spso[k] if n % 10 == 0 else -1,
                    delivery_complete_count=n,
                    state_batches=(
                        StateBatch(
                            first_offset=offset,
                            last_offset=offset,
                            delivery_state=2,
                            delivery_count=1 + n % 2,
                        ),
                    ),
                )
            )
            sys.stdout.write(f"{k} {offset}\n")
            sys.stdout.flush()
            offset += 2
            await asyncio.sleep(random.random() / 500)  # so writes also arrive while an fsync runs
            if n % 50 == 0 and kind == "coordinator":
                await persister.prune()

    await asyncio.gather(*(writer(k, parity) for k in range(len(KEYS)) for parity in (0, 1)))


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), FlushMode(sys.argv[2]), float(sys.argv[3]), sys.argv[4]))
