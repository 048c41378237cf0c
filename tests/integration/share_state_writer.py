"""Child process of the crash test: writes acknowledgements through BuiltinPersister and prints
``<key index> <offset>`` for each write it reported successful (stdout flushed per line).

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

from shareq.coordinators.share.shard import ShareCoordinatorConfig
from shareq.persister.builtin import BuiltinPersister, FlushMode
from shareq.share.persister import SharePartitionKey, StateBatch, WriteStateParams

KEYS = [SharePartitionKey(group_id="crash", topic_id=uuid.UUID(int=77), partition=p) for p in range(4)]
CONFIG = ShareCoordinatorConfig(snapshot_update_records_per_snapshot=20, state_topic_num_partitions=3)
SEGMENT_BYTES = 16 * 1024


def open_persister(directory: Path, mode: FlushMode = FlushMode.GROUP) -> BuiltinPersister:
    return BuiltinPersister.in_directory(
        directory, config=CONFIG, segment_bytes=SEGMENT_BYTES, flush_mode=mode
    )


def acked_offsets(batches: tuple[StateBatch, ...]) -> set[int]:
    return {o for b in batches if b.delivery_state == 2 for o in range(b.first_offset, b.last_offset + 1)}


async def main(directory: Path, mode: FlushMode, kill_after: float) -> None:
    asyncio.get_running_loop().call_later(kill_after, os.kill, os.getpid(), signal.SIGKILL)
    persister = open_persister(directory, mode)
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
            if n % 50 == 0:
                await persister.prune()

    await asyncio.gather(*(writer(k, parity) for k in range(len(KEYS)) for parity in (0, 1)))


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), FlushMode(sys.argv[2]), float(sys.argv[3])))
