"""Log compaction: cleaning throughput, and produce throughput while the cleaner runs against idle.

1. Cleaning, in-process: a partition log of ``--records`` records over ``--keys`` keys (overwrites,
   and a tombstone for every 10th key at the end) is cleaned once by the cleaner the broker uses
   (plan, clean in this thread, swap); prints MB/s of dirty log and checks that exactly the latest
   value of every live key remains, at its original offset.
2. Produce beside the cleaner, against a broker subprocess: the same dirty data is produced to a
   compacted topic whose ``min.cleanable.dirty.ratio`` keeps the cleaner off; ``--load`` records
   are produced to another topic (idle), then the ratio is lowered so the cleaner starts and the
   same load is produced again (busy), then once more after the cleaner is done (idle). Prints the
   rates and busy over the mean of the idle rounds (target >= 0.8).

    PYTHONPATH=src python bench/compaction.py [--records 1000000 --keys 10000 --load 1000000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from produce_fetch import bench_produce, start_broker, stop
from shareq.log.cleaner import CleaningConfig, clean
from shareq.log.config import LogConfig
from shareq.log.partition_log import PartitionLog
from shareq.log.records import Record, decode_batches, encode_batch

VALUE = b"v" * 80
PER_BATCH = 100


def dirty_records(records: int, keys: int) -> list[tuple[bytes, bytes | None]]:
    out: list[tuple[bytes, bytes | None]] = [(b"key-%06d" % (i % keys), VALUE) for i in range(records)]
    out += [(b"key-%06d" % k, None) for k in range(0, keys, 10)]
    return out


def bench_cleaning(directory: Path, records: int, keys: int) -> None:
    config = LogConfig(segment_bytes=16 * 1024 * 1024, cleanup_policy="compact")
    log = PartitionLog.open(directory, config, now_ms=0)
    data = dirty_records(records, keys)
    stamp = int(time.time() * 1000) - 3_600_000
    for start in range(0, len(data), PER_BATCH):
        chunk = data[start : start + PER_BATCH]
        log.append(encode_batch([Record(key=k, value=v, timestamp=stamp) for k, v in chunk]), now_ms=stamp)
    log.append(encode_batch([Record(key=b"tail", value=VALUE, timestamp=stamp)]), now_ms=stamp)
    log._roll(log.log_end_offset, stamp)  # close the last segment so all of it is cleanable
    dirty = log.size_bytes
    plan = log.cleaning_plan(
        CleaningConfig(min_cleanable_ratio=0.0, delete_retention_ms=0), int(time.time() * 1000)
    )
    assert plan is not None
    started = time.perf_counter()
    result = clean(plan)
    log.swap_cleaned(result)
    elapsed = time.perf_counter() - started
    latest: dict[bytes, tuple[int, bytes | None]] = {}
    for offset, (key, value) in enumerate(data):
        latest[key] = (offset, value)
    wanted = sorted((o, k) for k, (o, v) in latest.items() if v is not None)
    found = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        chunk = log.read(offset, 4 * 1024 * 1024)
        if not chunk.records:
            break
        for batch in decode_batches(chunk.records):
            found += [(r.offset, r.key) for r in batch.records if r.key != b"tail"]
            offset = batch.header.base_offset + batch.header.last_offset_delta + 1
    assert found == wanted, "cleaning lost or kept the wrong records"
    log.close()
    mb = dirty / 1e6
    print(
        f"cleaning: {len(data):,} records, {mb:.1f} MB dirty -> {log_size(directory) / 1e6:.2f} MB in "
        f"{elapsed:.2f} s: {mb / elapsed:.1f} MB/s of dirty log ({result.records_removed:,} records removed, "
        f"{len(wanted):,} live keys kept at their offsets)"
    )


def log_size(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.glob("*.log"))


def fill_topic(bootstrap: str, topic: str, data: list[tuple[bytes, bytes | None]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for key, value in data:
        while True:
            try:
                producer.produce(topic, key=key, value=value, partition=0)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(300) == 0


def bench_produce_beside_cleaner(directory: Path, records: int, keys: int, load: int) -> None:
    process, bootstrap = start_broker(directory)
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        topics = [
            NewTopic("dirty", 1, 1, config={"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "1",
                                            "segment.bytes": str(16 * 1024 * 1024)}),
            NewTopic("load", 1, 1),
        ]  # fmt: skip
        for future in admin.create_topics(topics).values():
            future.result(30)
        fill_topic(bootstrap, "dirty", dirty_records(records, keys))
        fill_topic(
            bootstrap, "dirty", [(b"tail-%d" % i, VALUE) for i in range(200_000)]
        )  # rolls the dirty data
        idle = bench_produce(bootstrap, "load", load, VALUE)
        resource = ConfigResource(
            ResourceType.TOPIC,
            "dirty",
            incremental_configs=[
                ConfigEntry("min.cleanable.dirty.ratio", "0.01", incremental_operation=AlterConfigOpType.SET),
                ConfigEntry("delete.retention.ms", "0", incremental_operation=AlterConfigOpType.SET),
            ],
        )
        admin.incremental_alter_configs([resource])[resource].result(30)
        dirty_dir = directory / "dirty-0"
        before = log_size(dirty_dir)
        deadline = time.monotonic() + 30
        while log_size(dirty_dir) == before and not list(dirty_dir.glob("*.cleaned")):
            if time.monotonic() > deadline:
                raise RuntimeError("the cleaner did not start")
            time.sleep(0.01)
        busy = bench_produce(bootstrap, "load", load, VALUE)
        still_cleaning = bool(list(dirty_dir.glob("*.cleaned")))
        # Idle again once the cleaner is done: the idle rate is the mean of the rounds before and after,
        # so a box whose load drifts (other work on it) does not bias the ratio one way.
        deadline = time.monotonic() + 300
        while list(dirty_dir.glob("*.cleaned")) and time.monotonic() < deadline:
            time.sleep(0.05)
        idle_after = bench_produce(bootstrap, "load", load, VALUE)
        idle_rate = (load / idle + load / idle_after) / 2
        print(
            f"produce, {load:,} records of {len(VALUE)} B: idle {load / idle:,.0f} rec/s before and "
            f"{load / idle_after:,.0f} after, while cleaning {load / busy:,.0f} rec/s: "
            f"{load / busy / idle_rate:.2f}x the idle mean (target >= 0.8)"
            f"{'' if still_cleaning else ' (the cleaner finished before the round did)'}"
        )
    finally:
        stop(process)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--load", type=int, default=1_000_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="shareq-bench-") as tmp:
        bench_cleaning(Path(tmp) / "clean", args.records, args.keys)
        bench_produce_beside_cleaner(Path(tmp) / "broker", args.records, args.keys, args.load)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main()
