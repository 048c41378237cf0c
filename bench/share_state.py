"""Durable share state: write throughput per flush mode, replay time, state-topic bytes.

    PYTHONPATH=src python bench/share_state.py [--keys 10000 --updates 500]

Writes are acknowledgement deltas (one acknowledged offset each, the SPSO moving every tenth write)
from many concurrent writers, as share-partition leaders would send them.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import uuid
from pathlib import Path

from shareq.coordinators.share.placement import partition_for
from shareq.coordinators.share.records import ShareSnapshot, ShareUpdate, StateRecord, encode_record
from shareq.coordinators.share.shard import ShareCoordinatorConfig
from shareq.log.config import LogConfig
from shareq.log.partition_log import PartitionLog
from shareq.persister.builtin import STATE_TOPIC, BuiltinPersister, FlushMode
from shareq.persister.state_log import encode_batches
from shareq.share.persister import SharePartitionKey, StateBatch, WriteStateParams


def _key(i: int) -> SharePartitionKey:
    return SharePartitionKey(
        group_id=f"group-{i % 97}", topic_id=uuid.UUID(int=i // 16 + 1), partition=i % 16
    )


def _dir_bytes(directory: Path) -> int:
    return sum(f.stat().st_size for f in directory.rglob("*.log"))


async def _writes(directory: Path, mode: FlushMode, keys: int, writers: int, total: int) -> tuple[float, int]:
    persister = BuiltinPersister.in_directory(directory, flush_mode=mode)
    await persister.load()
    share_keys = [_key(i) for i in range(keys)]
    for key in share_keys:
        await persister.initialize_state(key, state_epoch=0, start_offset=0)
    per_writer = total // writers

    async def writer(w: int) -> None:
        key = share_keys[w % keys]
        base = (w // keys) * 10_000_000
        for i in range(per_writer):
            offset = base + i
            await persister.write_state(
                WriteStateParams(
                    key=key,
                    state_epoch=0,
                    leader_epoch=0,
                    start_offset=offset - 5 if i % 10 == 9 else -1,
                    delivery_complete_count=i % 10,
                    state_batches=(
                        StateBatch(
                            first_offset=offset, last_offset=offset, delivery_state=2, delivery_count=1
                        ),
                    ),
                )
            )

    start = time.perf_counter()
    cpu = time.process_time()
    await asyncio.gather(*(writer(w) for w in range(writers)))
    elapsed = time.perf_counter() - start
    print(f"  ({(time.process_time() - cpu) / (per_writer * writers) * 1e6:.1f} CPU us per write)", end=" ")
    await persister.prune()
    await persister.close()
    return per_writer * writers / elapsed, _dir_bytes(directory)


def _build_replay_log(directory: Path, keys: int, updates: int) -> int:
    parts: dict[int, list[tuple[bytes, bytes | None]]] = {}
    for i in range(keys):
        key = _key(i)
        recs = parts.setdefault(partition_for(key, 50), [])
        snap = ShareSnapshot(
            snapshot_epoch=0,
            state_epoch=0,
            leader_epoch=0,
            start_offset=0,
            delivery_complete_count=0,
            create_timestamp=0,
            write_timestamp=0,
            state_batches=(),
        )
        recs.append(encode_record(StateRecord(key=key, value=snap)))
        for u in range(updates):
            upd = ShareUpdate(
                snapshot_epoch=0,
                leader_epoch=0,
                start_offset=u - 3 if u % 10 == 9 else -1,
                delivery_complete_count=u % 10,
                state_batches=(
                    StateBatch(first_offset=u, last_offset=u, delivery_state=2, delivery_count=1),
                ),
            )
            recs.append(encode_record(StateRecord(key=key, value=upd)))
    config = LogConfig(segment_bytes=64 << 20, segment_ms=None, retention_ms=-1, retention_bytes=-1)
    total = 0
    for p, recs in parts.items():
        log = PartitionLog.open(directory / f"{STATE_TOPIC}-{p}", config, now_ms=0)
        for batch in encode_batches(recs, timestamp=0):
            log.append(batch, now_ms=0)
        total += len(recs)
        log.close()
    return total


async def _load(directory: Path, keys: int) -> tuple[float, float, float]:
    """Seconds to load(), then to read every share-partition's state once, and CPU seconds of both."""
    persister = BuiltinPersister.in_directory(directory, config=ShareCoordinatorConfig())
    cpu = time.process_time()
    start = time.perf_counter()
    await persister.load()
    loaded = time.perf_counter() - start
    start = time.perf_counter()
    for i in range(keys):
        assert await persister.read_state(_key(i), leader_epoch=-1) is not None
    first_reads = time.perf_counter() - start
    cpu = time.process_time() - cpu
    await persister.close()
    return loaded, first_reads, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--keys", type=int, default=10_000, help="share-partitions in the replay log")
    parser.add_argument("--updates", type=int, default=500, help="updates per share-partition to replay")
    parser.add_argument("--writes", type=int, default=100_000, help="writes per flush mode (fsync: /20)")
    parser.add_argument("--skip-replay", action="store_true")
    args = parser.parse_args()
    for mode in (FlushMode.GROUP, FlushMode.NONE, FlushMode.FSYNC):
        total = args.writes // 20 if mode is FlushMode.FSYNC else args.writes
        with tempfile.TemporaryDirectory() as tmp:
            rate, size = asyncio.run(_writes(Path(tmp), mode, keys=100, writers=500, total=total))
        print(
            f"writes/s flush={mode.value:5s}: {rate:10,.0f}"
            f"  ({total} writes, 100 share-partitions, 500 writers;"
            f" {size / 100:,.0f} state-topic bytes per share-partition after pruning)"
        )
    if args.skip_replay:
        return
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        records = _build_replay_log(Path(tmp), args.keys, args.updates)
        built = time.perf_counter() - start
        size = _dir_bytes(Path(tmp))
        print(
            f"replay log: {records:,} records, {size / 2**20:,.1f} MiB, {size / args.keys:,.0f} bytes per"
            f" share-partition (built in {built:.1f} s)"
        )
        loaded, first_reads, cpu = asyncio.run(_load(Path(tmp), args.keys))
        print(
            f"replay: {args.keys:,} share-partitions x {args.updates} updates: load() {loaded:.2f} s"
            f" ({records / loaded:,.0f} records/s), then first read of every state {first_reads:.2f} s;"
            f" {cpu:.2f} CPU s in all"
        )


if __name__ == "__main__":
    main()
