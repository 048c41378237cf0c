"""Share-consume-and-acknowledge throughput with librdkafka ShareConsumers, against the peers.

    PYTHONPATH=src python bench/share_consume.py [--records 200000] [--consumers 1,4,8]

A broker runs as a subprocess (``python -m shareq serve``, durable share state in group-commit
mode). N records of 100 bytes are produced to a 4-partition topic; then, for each consumer count,
a fresh share group of that many ShareConsumer *processes* (implicit acknowledgement) consumes
everything. The clock starts when every consumer has been created and stops when the last one has
acknowledged its last records (implicit acknowledgements flushed with ``commit_sync``, which
returns once the broker has made them durable). Acknowledgement latency is our own
client's ``commit()`` round trip (ShareAcknowledge of one fetched batch, persisted before the
reply). The peers' figures (Redis Streams, RabbitMQ; same workload: 200k x 100 B, 4 consumer
processes) are measured if their servers and clients are installed, else printed as recorded.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from multiprocessing.sharedctypes import Synchronized
from pathlib import Path
from typing import Any

READY = "shareq listening on "
TOPIC = "bench"
PARTITIONS = 4

# Recorded in the peers' RESULTS.md (2026-11-21, this kind of machine; N=200,000 x 100 B, C=4).
RECORDED_PEERS = {
    "Redis Streams AOF everysec +hiredis, batch XACK": 297_358,
    "Redis Streams in-memory +hiredis, batch XACK": 471_759,
    "Redis Streams AOF everysec (redis-py), batch XACK": 135_470,
    "RabbitMQ quorum, multi-ack every 500": 84_160,
    "RabbitMQ classic durable, multi-ack every 500": 34_593,
}
TARGETS = {
    "Redis Streams AOF everysec +hiredis, batch XACK": 1.0,
    "RabbitMQ quorum, multi-ack every 500": 3.0,
}


def start_broker(data_dir: Path, port: int, profile: str | None) -> subprocess.Popen[str]:
    command = [
        sys.executable,
        *(["-m", "cProfile", "-o", profile] if profile else []),
        "-m",
        "shareq",
        "serve",
        "--data-dir",
        str(data_dir),
        "--port",
        str(port),
    ]
    command += ["--config", "group.share.auto.offset.reset=earliest", "--log-level", "WARNING"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=os.environ.copy())
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith(READY):
        proc.kill()
        raise RuntimeError(f"broker did not start: {line!r}")
    return proc


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def produce(bootstrap: str, n: int) -> float:
    from confluent_kafka import Producer

    from shareq.client import Admin

    with Admin(bootstrap) as admin:
        admin.create_topic(TOPIC, PARTITIONS)
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": 10_000, "acks": "all"}
    )
    payload = os.urandom(100)
    started = time.perf_counter()
    for i in range(n):
        while True:
            try:
                producer.produce(TOPIC, value=payload, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(60) == 0
    return n / (time.perf_counter() - started)


def consumer_main(
    bootstrap: str,
    group: str,
    consumed: Synchronized[int],
    finished: Any,
    ready: Any,
    go: Any,
    stop: Any,
) -> None:
    from confluent_kafka import ShareConsumer

    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    consumer.subscribe([TOPIC])
    ready.release()
    go.wait()
    while not stop.is_set():
        got = consumer.poll(0.05)
        if got:
            with consumed.get_lock():
                consumed.value += len(got)
    # implicit mode: the last poll's acknowledgements go out now; commit_sync returns once the
    # broker answered, i.e. once they are durable
    consumer.commit_sync(30)
    with finished.get_lock():
        finished.value = max(finished.value, time.time())
    ready.release()
    consumer.close()


def run_consumers(bootstrap: str, n: int, count: int) -> float:
    ctx = mp.get_context("spawn")
    consumed = ctx.Value("q", 0)
    finished = ctx.Value("d", 0.0)
    ready = ctx.Semaphore(0)
    go, stop = ctx.Event(), ctx.Event()
    procs = [
        ctx.Process(
            target=consumer_main, args=(bootstrap, f"bench-{count}", consumed, finished, ready, go, stop)
        )
        for _ in range(count)
    ]
    for p in procs:
        p.start()
    for _ in procs:
        ready.acquire(timeout=60)
    started = time.time()
    go.set()
    deadline = time.monotonic() + 300
    while consumed.value < n and time.monotonic() < deadline:
        time.sleep(0.001)
    stop.set()
    for _ in procs:
        ready.acquire(timeout=60)  # every consumer's last acknowledgements are durable
    elapsed = finished.value - started
    for p in procs:
        p.join(timeout=60)
    if consumed.value < n:
        raise RuntimeError(f"only {consumed.value} of {n} records consumed with {count} consumers")
    verify_all_acknowledged(bootstrap, f"bench-{count}")
    return n / elapsed


def verify_all_acknowledged(bootstrap: str, group: str) -> None:
    """A fresh member of the group must find nothing left to deliver (everything acknowledged)."""
    from shareq.client import ShareConsumer

    with ShareConsumer(bootstrap, group, topics=[TOPIC]) as consumer:
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            left = consumer.poll(0.3)
            if left:
                raise RuntimeError(f"{len(left)} records of group {group} were not acknowledged")


def ack_latency(bootstrap: str, samples: int) -> tuple[float, float]:
    """p50/p99 ms of our client's commit() (ShareAcknowledge, answered after the durable write)."""
    from shareq.client import ShareConsumer

    latencies: list[float] = []
    with ShareConsumer(bootstrap, "bench-latency", topics=[TOPIC], max_poll_records=50) as consumer:
        deadline = time.monotonic() + 120
        while len(latencies) < samples and time.monotonic() < deadline:
            records = consumer.poll(1.0, max_records=50)
            if not records:
                continue
            for record in records:
                consumer.acknowledge(record)
            started = time.perf_counter()
            consumer.commit()
            latencies.append((time.perf_counter() - started) * 1000)
    latencies.sort()
    return statistics.median(latencies), latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]


def peers_available() -> bool:
    try:
        import pika  # noqa: F401
        import redis  # noqa: F401
    except ImportError:
        return False
    return shutil.which("redis-server") is not None and shutil.which("rabbitmq-server") is not None


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--consumers", default="1,4,8")
    parser.add_argument("--latency-samples", type=int, default=300)
    parser.add_argument("--profile", metavar="FILE", help="run the broker under cProfile, stats to FILE")
    args = parser.parse_args()
    counts = [int(c) for c in args.consumers.split(",")]
    data_dir = Path(tempfile.mkdtemp(prefix="shareq-bench-"))
    port = free_port()
    bootstrap = f"127.0.0.1:{port}"
    broker = start_broker(data_dir, port, args.profile)
    try:
        rate = produce(bootstrap, args.records * 1)
        print(f"produce: {args.records} x 100 B on {PARTITIONS} partitions at {rate:,.0f} rec/s")
        results: dict[int, float] = {}
        for count in counts:
            results[count] = run_consumers(bootstrap, args.records, count)
            label = f"{count} librdkafka ShareConsumer process(es)"
            print(f"share consume+ack, {label}: {results[count]:,.0f} rec/s")
        p50, p99 = ack_latency(bootstrap, args.latency_samples)
        print(f"acknowledgement latency (commit() round trip, durable): p50 {p50:.2f} ms, p99 {p99:.2f} ms")
    finally:
        broker.terminate()
        try:
            broker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            broker.kill()
        shutil.rmtree(data_dir, ignore_errors=True)
    if peers_available():
        print(
            "peers: servers and clients are installed here; run bench-peers' run_all.sh for same-run figures"
        )
    print("peers (RECORDED in bench-peers RESULTS.md, not measured in this run; 200k x 100 B, 4 consumers):")
    reference = results.get(4)
    for name, figure in RECORDED_PEERS.items():
        ratio = f"{reference / figure:.2f}x" if reference else "n/a"
        target = TARGETS.get(name)
        verdict = (
            ""
            if target is None or reference is None
            else f" (target >= {target:.0f}x: {'met' if reference / figure >= target else 'NOT met'})"
        )
        print(f"  {name}: {figure:,} rec/s -> shareq 4 consumers = {ratio}{verdict}")


if __name__ == "__main__":
    main()
