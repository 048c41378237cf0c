"""Pruning keeps the state topic bounded over a long run of acknowledgement writes."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from shareq.coordinators.share.records import ShareSnapshot, ShareUpdate, StateRecord, encode_record
from shareq.coordinators.share.shard import ShareCoordinatorConfig
from shareq.persister.builtin import BuiltinPersister, FlushMode
from shareq.share.persister import SharePartitionKey, StateBatch, WriteStateParams

KEYS = [SharePartitionKey(group_id="prune", topic_id=uuid.UUID(int=5), partition=p) for p in range(5)]
WRITES = 100_000
PER_SNAPSHOT = 50
SPSO_EVERY = 40  # the SPSO moves every 40 writes, so at most ~40 offsets are in flight
SEGMENT_BYTES = 16 * 1024
RECORD_OVERHEAD = 16  # v2 record framing: length, attributes, deltas, key/value lengths, headers


def _record_bytes(value: ShareSnapshot | ShareUpdate) -> int:
    key, raw = encode_record(StateRecord(key=KEYS[0], value=value))
    assert raw is not None
    return len(key) + len(raw) + RECORD_OVERHEAD


def _batch(offset: int) -> StateBatch:
    # alternate delivery counts: every offset is its own run, the worst case for snapshot size
    return StateBatch(
        first_offset=offset, last_offset=offset, delivery_state=2, delivery_count=1 + offset % 2
    )


@pytest.mark.timeout(240)
def test_state_topic_stays_bounded(tmp_path: Path) -> None:
    config = ShareCoordinatorConfig(snapshot_update_records_per_snapshot=PER_SNAPSHOT)
    counts: dict[int, int] = {}

    async def body() -> int:
        p = BuiltinPersister.in_directory(
            tmp_path, config=config, segment_bytes=SEGMENT_BYTES, flush_mode=FlushMode.NONE
        )
        await p.load()
        for key in KEYS:
            await p.initialize_state(key, state_epoch=0, start_offset=0)
            counts[p.state_partition(key)] = counts.get(p.state_partition(key), 0) + 1
        per_key = WRITES // len(KEYS)
        for chunk in range(0, per_key, 200):

            async def run(key: SharePartitionKey, lo: int) -> None:
                for o in range(lo, lo + 200):
                    start = o - SPSO_EVERY if o % SPSO_EVERY == 0 and o >= SPSO_EVERY else -1
                    await p.write_state(
                        WriteStateParams(
                            key=key,
                            state_epoch=0,
                            leader_epoch=0,
                            start_offset=start,
                            delivery_complete_count=0,
                            state_batches=(_batch(o),),
                        )
                    )

            await asyncio.gather(*(run(key, chunk) for key in KEYS))
            await p.prune()
        state = await p.read_state(KEYS[0], leader_epoch=0)
        assert (
            state is not None and state.start_offset == (per_key - 1) // SPSO_EVERY * SPSO_EVERY - SPSO_EVERY
        )
        await p.close()
        return sum(f.stat().st_size for f in tmp_path.rglob("*.log"))

    size = asyncio.run(asyncio.wait_for(body(), timeout=200))
    # Bound: per state partition, the segment holding the prune point plus the active segment,
    # plus per key everything since its snapshot (at most N updates and two snapshots of at most
    # 2 * SPSO_EVERY runs: the SPSO trails by up to SPSO_EVERY, and one write adds one run).
    biggest_snapshot = _record_bytes(
        ShareSnapshot(
            snapshot_epoch=0,
            state_epoch=0,
            leader_epoch=0,
            start_offset=0,
            delivery_complete_count=0,
            create_timestamp=0,
            write_timestamp=0,
            state_batches=tuple(_batch(o) for o in range(2 * SPSO_EVERY)),
        )
    )
    update = _record_bytes(
        ShareUpdate(
            snapshot_epoch=0,
            leader_epoch=0,
            start_offset=0,
            delivery_complete_count=0,
            state_batches=(_batch(0),),
        )
    )
    per_key = PER_SNAPSHOT * update + 2 * biggest_snapshot
    bound = sum(2 * SEGMENT_BYTES + n * 2 * per_key for n in counts.values())
    unpruned = WRITES * update
    print(f"state topic after {WRITES} writes: {size} bytes (bound {bound}, unpruned ~{unpruned})")
    assert size <= bound
    assert size < unpruned / 10
