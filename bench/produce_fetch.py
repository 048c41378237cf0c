"""Produce and fetch throughput through librdkafka against a broker subprocess, beside raw file I/O.

Prints records/s and MB/s for produce (confluent Producer, default batching) and fetch (Consumer
with assign() from offset 0), the same bytes appended to and read from a plain file (the
ceilings), the ratios, and the RSS of an idle broker holding 1,000 partitions.

    PYTHONPATH=src python bench/produce_fetch.py [--records 500000]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time
from pathlib import Path

import psutil
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import broker_process

RECORD_BYTES = 100


def start_broker(data_dir: Path) -> tuple[subprocess.Popen[str], str]:
    port = broker_process.free_port()
    process = broker_process.start_broker(data_dir, port, log_level=None, quiet=True)
    return process, f"127.0.0.1:{port}"


def stop(process: subprocess.Popen[str]) -> None:
    process.terminate()
    process.wait(timeout=30)


def bench_produce(bootstrap: str, topic: str, count: int, value: bytes) -> float:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    producer.produce(topic, value, partition=0)  # warm up: metadata and connection
    producer.flush(30)
    started = time.perf_counter()
    for _ in range(count - 1):
        while True:
            try:
                producer.produce(topic, value, partition=0)
                break
            except BufferError:
                producer.poll(0.001)
    remaining = producer.flush(120)
    elapsed = time.perf_counter() - started
    assert remaining == 0
    return elapsed


def bench_fetch(bootstrap: str, topic: str, count: int) -> float:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    received = 0
    started = time.perf_counter()
    while received < count:
        for message in consumer.consume(num_messages=10_000, timeout=10):
            if message.error() is None:
                received += 1
    elapsed = time.perf_counter() - started
    consumer.close()
    return elapsed


def client_produce_ceiling(count: int, value: bytes) -> float:
    """Seconds librdkafka's Python ``produce()`` alone takes for ``count`` records (no broker reached).

    This is the floor of any produce figure measured through this client on this machine: the
    client, not the broker, bounds the end-to-end rate with 100-byte records.
    """
    producer = Producer(
        {
            "bootstrap.servers": "127.0.0.1:9",  # discard port: nothing answers, nothing is sent
            "queue.buffering.max.messages": count + 1,
            "queue.buffering.max.kbytes": 2_097_151,
            "log_level": 0,
        }
    )
    started = time.perf_counter()
    for _ in range(count):
        producer.produce("ceiling", value, partition=0)
    elapsed = time.perf_counter() - started
    producer.purge()
    return elapsed


def bench_raw(directory: Path, count: int, value: bytes) -> tuple[float, float]:
    """Append the same payload bytes to a file in 16 KiB writes, then read them back in 1 MiB reads."""
    path = directory / "raw.bin"
    per_chunk = 16 * 1024 // len(value)
    chunk = value * per_chunk
    chunks, rest = divmod(count, per_chunk)
    started = time.perf_counter()
    with open(path, "ab") as handle:
        for _ in range(chunks):
            handle.write(chunk)
        handle.write(value * rest)
        handle.flush()
    write_s = time.perf_counter() - started
    started = time.perf_counter()
    with open(path, "rb") as handle:
        while handle.read(1024 * 1024):
            pass
    read_s = time.perf_counter() - started
    return write_s, read_s


def idle_rss_with_partitions(directory: Path, partitions: int) -> float:
    process, bootstrap = start_broker(directory)
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("wide", num_partitions=partitions, replication_factor=1)])[
            "wide"
        ].result(60)
        del admin
        time.sleep(1.0)  # idle
        return psutil.Process(process.pid).memory_info().rss / 1e6
    finally:
        stop(process)


def _cpu(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


def line(name: str, count: int, seconds: float) -> str:
    return f"{name:<14} {count / seconds:>12,.0f} records/s {count * RECORD_BYTES / seconds / 1e6:>8.1f} MB/s"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--partitions", type=int, default=1000)
    args = parser.parse_args()
    count: int = args.records
    value = os.urandom(RECORD_BYTES)
    with tempfile.TemporaryDirectory(prefix="shareq-bench-") as tmp:
        root = Path(tmp)
        process, bootstrap = start_broker(root / "broker")
        broker = psutil.Process(process.pid)
        try:
            cpu0 = _cpu(broker)
            produce_s = bench_produce(bootstrap, "bench", count, value)
            cpu1 = _cpu(broker)
            fetch_s = bench_fetch(bootstrap, "bench", count)
            cpu2 = _cpu(broker)
        finally:
            stop(process)
        write_s, read_s = bench_raw(root, count, value)
        client_s = client_produce_ceiling(count, value)
        rss_mb = idle_rss_with_partitions(root / "wide", args.partitions)
    print(f"{count:,} records of {RECORD_BYTES} bytes")
    print(line("produce", count, produce_s))
    print(line("raw append", count, write_s))
    print(line("fetch", count, fetch_s))
    print(line("raw read", count, read_s))
    print(f"produce / raw append = {write_s / produce_s:.3f} (target >= 0.5)")
    print(f"fetch / raw read     = {read_s / fetch_s:.3f} (target >= 0.5)")
    megabytes = count * RECORD_BYTES / 1e6
    produce_cpu, fetch_cpu = max(cpu1 - cpu0, 1e-9), max(cpu2 - cpu1, 1e-9)
    print(
        f"broker CPU: produce {produce_cpu:.2f} s ({megabytes / produce_cpu:.0f} MB per CPU-second), "
        f"fetch {fetch_cpu:.2f} s ({megabytes / fetch_cpu:.0f} MB per CPU-second)"
    )
    print(
        "broker-bound ratios (MB per broker CPU-second / raw MB/s): "
        f"produce {megabytes / produce_cpu / (megabytes / write_s):.3f}, "
        f"fetch {megabytes / fetch_cpu / (megabytes / read_s):.3f}"
    )
    print(
        f"client ceiling: librdkafka produce() alone {count / client_s:,.0f} records/s "
        f"({megabytes / client_s:.1f} MB/s); produce reached {client_s / produce_s:.2f} of it"
    )
    print(f"idle broker RSS with {args.partitions} partitions: {rss_mb:.1f} MB (target < 150 MB)")


if __name__ == "__main__":
    main()
