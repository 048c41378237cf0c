"""Share-partition engine cost: acquire / acknowledge with 10, 1k and 100k in-flight ranges.

Run: ``PYTHONPATH=src python bench/engine.py``. Prints the median cost of acquiring a fresh
500-record batch and of acknowledging it (start + commit of the persisted transition, without the
persister's own I/O), the ratio of the cost at 100k ranges to the cost at 10, and the memory one
in-flight range takes (tracemalloc).
"""

from __future__ import annotations

import gc
import statistics
import time
import tracemalloc
import uuid

from shareq.share import AcknowledgementBatch, AcknowledgeType, ShareConfig, SharePartition
from shareq.share.persister import SharePartitionKey

KEY = SharePartitionKey(group_id="bench", topic_id=uuid.UUID(int=1), partition=0)
BATCH = 500
CONFIG = ShareConfig(max_record_locks=10**12, record_lock_duration_ms=3_600_000)


def engine_with_ranges(n: int) -> SharePartition:
    """An engine holding ``n`` distinct in-flight ranges (one acquisition each, so none merge)."""
    sp = SharePartition(KEY, CONFIG)
    write = sp.initialize(None)
    assert write is not None
    sp.complete(write.handle, True, 0)
    members = ("bg0", "bg1")
    for i in range(n):
        # Two-record batches, alternating members: neighbours never coalesce.
        sp.acquire(members[i % 2], [(2 * i, 2 * i + 1)], max_records=2, now=0)
    assert sp.range_count() == n
    return sp


def measure(n: int, rounds: int) -> tuple[float, float]:
    sp = engine_with_ranges(n)
    accept = (AcknowledgeType.ACCEPT,)
    acquire_ns: list[int] = []
    ack_ns: list[int] = []
    base = sp.end_offset
    gc.disable()
    try:
        for r in range(rounds):
            first = base + r * BATCH
            last = first + BATCH - 1
            t0 = time.perf_counter_ns()
            result = sp.acquire("m", [(first, last)], max_records=BATCH, now=1)
            t1 = time.perf_counter_ns()
            ack = sp.acknowledge(
                "m", [AcknowledgementBatch(first_offset=first, last_offset=last, types=accept)], now=2
            )
            assert ack.write is not None
            sp.complete(ack.write.handle, True, 2)
            t2 = time.perf_counter_ns()
            assert result.acquired_count == BATCH
            acquire_ns.append(t1 - t0)
            ack_ns.append(t2 - t1)
    finally:
        gc.enable()
    assert sp.range_count() <= n + 1, "acknowledged batches coalesce above the pinned SPSO"
    return statistics.median(acquire_ns) / 1000, statistics.median(ack_ns) / 1000


def bytes_per_range(n: int) -> tuple[float, float]:
    """(one acquisition per range, ranges split out of one acquisition by partial acks)."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    sp = engine_with_ranges(n)
    after = tracemalloc.take_snapshot()
    per_acquisition = sum(s.size_diff for s in after.compare_to(before, "filename")) / n
    del sp
    gc.collect()
    sp2 = SharePartition(KEY, CONFIG)
    write = sp2.initialize(None)
    assert write is not None
    sp2.complete(write.handle, True, 0)
    sp2.acquire("m", [(0, 2 * n - 1)], max_records=2 * n, now=0)
    before = tracemalloc.take_snapshot()
    for i in range(0, 2 * n, 2):  # acknowledge every other record: n ACKNOWLEDGED + n ACQUIRED runs
        ack = sp2.acknowledge(
            "m", [AcknowledgementBatch(first_offset=i, last_offset=i, types=(AcknowledgeType.ACCEPT,))], now=0
        )
        assert ack.write is not None
        sp2.complete(ack.write.handle, True, 0)
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    split = sum(s.size_diff for s in after.compare_to(before, "filename")) / sp2.range_count()
    return per_acquisition, split


def main() -> None:
    print(f"acquire + acknowledge of one {BATCH}-record batch (median, microseconds)")
    print(f"{'ranges':>8} {'acquire':>9} {'ack+commit':>11} {'total':>8}")
    totals: dict[int, float] = {}
    for n in (10, 1_000, 100_000):
        acq, ack = measure(n, rounds=3_000)
        totals[n] = acq + ack
        print(f"{n:>8} {acq:>9.1f} {ack:>11.1f} {acq + ack:>8.1f}")
    print(f"cost@100k / cost@10 = {totals[100_000] / totals[10]:.2f}")
    per_acq, per_split = bytes_per_range(100_000)
    print(
        f"memory per in-flight range: {per_acq:.0f} B (own acquisition + lock), {per_split:.0f} B (split run)"
    )


if __name__ == "__main__":
    main()
