"""Share-consume-and-acknowledge throughput with librdkafka ShareConsumers, against the peers.

    PYTHONPATH=src python bench/share_consume.py [--records 200000] [--consumers 1,4,8]

A broker runs as a subprocess (``python -m shareq serve``, durable share state in group-commit
mode). N records of 100 bytes are produced to a 4-partition topic; then, for each consumer count,
a fresh share group of that many ShareConsumer *processes* (implicit acknowledgement) consumes
everything. The clock starts when every consumer has been created and stops when the last one has
acknowledged its last records (implicit acknowledgements flushed with ``commit_sync``, which
returns once the broker has made them durable). Acknowledgement latency is our own
client's ``commit()`` round trip (ShareAcknowledge of one fetched batch, persisted before the
reply).

Then, in the same invocation and once the broker has stopped, the peers run the same workload (N
records of 100 B, 4 consumer processes): Redis Streams with AOF everysec and the hiredis parser
(batch XACK) and a RabbitMQ quorum queue (multi-ack), via bench/peers.py. When their servers or
clients are missing the recorded figures are printed instead, labelled RECORDED, with how to
install them. The run ends with a side-by-side table and shareq's ratios against the targets
(4 ShareConsumers >= 1x Redis Streams+hiredis, >= 3x RabbitMQ quorum).
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

import peers

READY = "shareq listening on "
TOPIC = "bench"
PARTITIONS = 4
PEER_CONSUMERS = 4  # the peers' consumer processes; shareq's 4-consumer figure is compared with them


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
    elapsed = float(finished.value) - started
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


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--consumers", default="1,4,8")
    parser.add_argument("--latency-samples", type=int, default=300)
    parser.add_argument("--profile", metavar="FILE", help="run the broker under cProfile, stats to FILE")
    parser.add_argument(
        "--peers",
        choices=["auto", "measure", "recorded"],
        default="auto",
        help="auto: measure the peers when installed, else print RECORDED figures",
    )
    parser.add_argument(
        "--gate-max-wait",
        type=float,
        default=20.0,
        help="before each measurement wait up to this many s for an idle box (0: no wait)",
    )
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
            gate = peers.quiet_gate(sys.executable, args.gate_max_wait)
            results[count] = run_consumers(bootstrap, args.records, count)
            label = f"{count} librdkafka ShareConsumer process(es)"
            print(f"share consume+ack, {label}: {results[count]:,.0f} rec/s ({gate})")
        p50, p99 = ack_latency(bootstrap, args.latency_samples)
    finally:
        broker.terminate()
        try:
            broker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            broker.kill()
        shutil.rmtree(data_dir, ignore_errors=True)
    figures = peers.peer_figures(args.peers, args.records, PEER_CONSUMERS, args.gate_max_wait)
    peers.print_comparison(results, figures)
    print(f"acknowledgement latency (commit() round trip, durable): p50 {p50:.2f} ms, p99 {p99:.2f} ms")


if __name__ == "__main__":
    main()
