"""Partition-log ceiling: append and read MB/s against raw os.write / os.pread of the same bytes.

Batches are ~16 KB of 100-byte records (uncompressed, as a producer would send them). Not part of
the test suite. Usage: PYTHONPATH=src python bench/log_append.py [--mb 256] [--read-bytes 1048576]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from shareq.log.config import LogConfig
from shareq.log.partition_log import PartitionLog
from shareq.log.records import Record, encode_batch

RECORD_BYTES = 100
BATCH_BYTES = 16 * 1024


def make_batches(n: int) -> list[bytes]:
    per_batch = BATCH_BYTES // (RECORD_BYTES + 10)
    out = []
    for i in range(n):
        records = [Record(value=os.urandom(RECORD_BYTES), timestamp=1_000 + i) for _ in range(per_batch)]
        out.append(encode_batch(records))
    return out


def mbps(nbytes: int, seconds: float) -> float:
    return nbytes / seconds / 1e6


def _round(root: Path, batches: list[bytes], count: int, read_bytes: int, segment_bytes: int) -> list[float]:
    """One round of the four measurements; returns seconds for raw write, log append, raw read, log read."""
    total = sum(len(batches[i % len(batches)]) for i in range(count))
    raw_path = root / "raw.bin"
    fd = os.open(raw_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_TRUNC, 0o644)
    t0 = time.perf_counter()
    for i in range(count):
        os.write(fd, batches[i % 64])
    raw_write = time.perf_counter() - t0
    os.close(fd)

    log_dir = root / "t-0"
    log = PartitionLog.open(log_dir, LogConfig(segment_bytes=segment_bytes), now_ms=0)
    t0 = time.perf_counter()
    for i in range(count):
        log.append(batches[i % 64], now_ms=0)
    log_write = time.perf_counter() - t0
    assert log.size_bytes == total

    fd = os.open(raw_path, os.O_RDONLY)
    t0 = time.perf_counter()
    pos = 0
    while pos < total:
        pos += len(os.pread(fd, read_bytes, pos))
    raw_read = time.perf_counter() - t0
    os.close(fd)

    t0 = time.perf_counter()
    offset = 0
    got = 0
    while offset < log.log_end_offset:
        data = log.read(offset, read_bytes)
        got += len(data.records)
        offset = data.batches[-1][1] + 1
    log_read = time.perf_counter() - t0
    assert got == total
    log.delete()
    raw_path.unlink()
    return [raw_write, log_write, raw_read, log_read]


def bench(total_mb: int, read_bytes: int, segment_bytes: int, rounds: int) -> None:
    batches = make_batches(64)
    count = total_mb * 1_000_000 // len(batches[0])
    total = sum(len(batches[i % 64]) for i in range(count))
    root = Path(tempfile.mkdtemp(prefix="shareq-bench-"))
    try:
        results = [_round(root, batches, count, read_bytes, segment_bytes) for _ in range(rounds)]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    raw_write, log_write, raw_read, log_read = (min(column) for column in zip(*results, strict=True))
    print(f"{count} batches of {len(batches[0])} bytes ({total / 1e6:.0f} MB), reads of {read_bytes} bytes,"
          f" best of {rounds} rounds")  # fmt: skip
    print(f"append  log {mbps(total, log_write):8.0f} MB/s   raw os.write {mbps(total, raw_write):8.0f} MB/s"
          f"   ratio {raw_write / log_write:.2f}")  # fmt: skip
    print(f"read    log {mbps(total, log_read):8.0f} MB/s   raw os.pread {mbps(total, raw_read):8.0f} MB/s"
          f"   ratio {raw_read / log_read:.2f}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mb", type=int, default=256, help="megabytes to append")
    parser.add_argument("--read-bytes", type=int, default=1 << 20, help="max bytes per read")
    parser.add_argument("--segment-bytes", type=int, default=1 << 30)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    bench(args.mb, args.read_bytes, args.segment_bytes, args.rounds)


if __name__ == "__main__":
    main()
