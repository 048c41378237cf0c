"""Consumer groups: throughput against assign(), rebalance latency on a join, OffsetCommit latency.

    PYTHONPATH=src python bench/consumer_groups.py [--records 400000] [--joins 5]

One broker runs as a subprocess (``python -m shareq serve``, Kafka's group defaults). It prints:

* consume throughput of 4 librdkafka Consumers in one classic group (``range``, each in its own
  process) against the same 4 reading one partition each with ``assign()``; the clock starts
  once every consumer holds its partitions (paused until then) and stops at the last record;
* for a 10-member group (classic ``cooperative-sticky``, then KIP-848 ``group.protocol=consumer``)
  under a steady produce load, the time from an 11th member subscribing to every member,
  the new one included, having consumed a record produced after it subscribed; p50 and max over
  ``--joins`` joins (the member leaves again between joins), with the clients' own intervals;
* OffsetCommit latency (synchronous commits of one partition's offset), p50 and p99.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from share_consume import (
    PARTITIONS,
    TOPIC,
    create_topic,
    free_port,
    produce,
    run_phase,
    start_broker,
    stop_broker,
)

MEMBERS = 10
JOIN_PARTITIONS = 20
CLASSIC_HEARTBEAT_MS = 3000  # librdkafka's heartbeat.interval.ms default
CONSUMER_HEARTBEAT_MS = 5000  # the broker's group.consumer.heartbeat.interval.ms default


def group_main(bootstrap: str, n: int, consumed: Any, finished: Any, ready: Any, go: Any, stop: Any) -> None:
    from confluent_kafka import Consumer

    assigned = threading.Event()

    def on_assign(consumer: Any, partitions: list[Any]) -> None:
        consumer.assign(partitions)  # assign now, so that the pause holds (no prefetch before the clock)
        consumer.pause(partitions)
        assigned.set()

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-group",
            "auto.offset.reset": "earliest",
            "partition.assignment.strategy": "range",
        }
    )
    consumer.subscribe([TOPIC], on_assign=on_assign)
    while not assigned.is_set():
        consumer.poll(0.05)
    ready.release()
    go.wait()
    consumer.resume(consumer.assignment())
    seen = 0
    while not stop.is_set():
        batch = consumer.consume(10_000, 0.05)
        got = sum(1 for m in batch if m.error() is None)
        if got:
            seen += got
            with consumed.get_lock():
                consumed.value += got
                if consumed.value >= n:
                    finished.value = time.time()
    ready.release()
    consumer.close()


def group_throughput(bootstrap: str, n: int) -> float:
    ctx = mp.get_context("spawn")
    consumed, finished = ctx.Value("q", 0), ctx.Value("d", 0.0)
    ready = ctx.Semaphore(0)
    go, stop = ctx.Event(), ctx.Event()
    procs = [
        ctx.Process(target=group_main, args=(bootstrap, n, consumed, finished, ready, go, stop))
        for _ in range(PARTITIONS)
    ]
    for p in procs:
        p.start()
    for _ in procs:
        if not ready.acquire(timeout=120):
            raise RuntimeError("group consumers did not get their partitions")
    started = time.time()
    go.set()
    deadline = time.monotonic() + 900
    while consumed.value < n and time.monotonic() < deadline:
        time.sleep(0.005)
    stop.set()
    for _ in procs:
        ready.acquire(timeout=60)
    for p in procs:
        p.join(timeout=60)
    if consumed.value < n:
        raise RuntimeError(f"group: only {consumed.value} of {n} records")
    return n / (float(finished.value) - started)


class Member:
    """One group consumer polling in its own thread; remembers when it last got a record."""

    def __init__(self, bootstrap: str, group: str, protocol: str) -> None:
        from confluent_kafka import Consumer

        config: dict[str, Any] = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "latest",
        }
        if protocol == "consumer":
            config["group.protocol"] = "consumer"
        else:
            config["partition.assignment.strategy"] = "cooperative-sticky"
        self.consumer = Consumer(config)
        self.consumer.subscribe([f"{TOPIC}-join"])
        self.last_record_ts = 0.0  # producer wall-clock timestamp of the last record consumed
        self.running = True
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while self.running:
            message = self.consumer.poll(0.02)
            if message is not None and message.error() is None:
                self.last_record_ts = max(self.last_record_ts, message.timestamp()[1] / 1000.0)

    def close(self) -> None:
        self.running = False
        self.thread.join()
        self.consumer.close()


def join_latencies(bootstrap: str, protocol: str, joins: int) -> list[float]:
    from confluent_kafka import Producer

    group = f"join-{protocol}"
    stop = threading.Event()

    def load() -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        i = 0
        while not stop.is_set():
            producer.produce(f"{TOPIC}-join", value=b"x", partition=i % JOIN_PARTITIONS)
            i += 1
            if i % JOIN_PARTITIONS == 0:
                producer.poll(0)
                time.sleep(0.005)
        producer.flush(30)

    loader = threading.Thread(target=load, daemon=True)
    loader.start()
    members = [Member(bootstrap, group, protocol) for _ in range(MEMBERS)]
    results: list[float] = []
    try:
        settle = time.time()
        wait_all(members, settle + 0.5, 120)
        for _ in range(joins):
            joined_at = time.time()
            newcomer = Member(bootstrap, group, protocol)
            everyone = [*members, newcomer]
            results.append(wait_all(everyone, joined_at, 120) - joined_at)
            newcomer.close()
            wait_all(members, time.time() + 0.5, 120)
    finally:
        stop.set()
        for member in members:
            member.close()
        loader.join()
    return results


def wait_all(members: list[Member], since: float, timeout: float) -> float:
    """Wall-clock time at which every member has consumed a record produced after ``since``."""
    deadline = time.monotonic() + timeout
    while not all(m.last_record_ts > since for m in members):
        if time.monotonic() > deadline:
            raise RuntimeError("members did not all consume again")
        time.sleep(0.005)
    return time.time()


def commit_latencies(bootstrap: str, count: int) -> list[float]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "commit-bench", "enable.auto.commit": False}
    )
    out = []
    for i in range(count):
        started = time.perf_counter()
        consumer.commit(offsets=[TopicPartition(TOPIC, 0, i + 1)], asynchronous=False)
        out.append(time.perf_counter() - started)
    consumer.close()
    return out


def ms(values: list[float], q: float) -> str:
    ordered = sorted(values)
    return f"{ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000:.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=400_000)
    parser.add_argument("--joins", type=int, default=5)
    parser.add_argument("--commits", type=int, default=2_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="shareq-bench-") as tmp:
        port = free_port()
        broker = start_broker(Path(tmp) / "data", port)
        bootstrap = f"127.0.0.1:{port}"
        try:
            produce(bootstrap, args.records)
            assign = run_phase("assign", bootstrap, broker.pid, args.records, PARTITIONS, "assign")
            grouped = group_throughput(bootstrap, args.records)
            print(f"throughput, {args.records} records of 100 B on {PARTITIONS} partitions, 4 consumers")
            print(f"  assign()        {assign.rate:>10,.0f} rec/s")
            ratio = grouped / assign.rate
            print(f"  classic group   {grouped:>10,.0f} rec/s  ({ratio:.2f}x assign; target >= 0.9x)")
            create_topic(bootstrap, f"{TOPIC}-join", JOIN_PARTITIONS)
            print(f"join of an 11th member to {MEMBERS} consuming members, {args.joins} joins")
            for protocol, note in (
                ("classic", f"cooperative-sticky, heartbeat.interval.ms {CLASSIC_HEARTBEAT_MS}"),
                (
                    "consumer",
                    f"KIP-848 uniform, group.consumer.heartbeat.interval.ms {CONSUMER_HEARTBEAT_MS}",
                ),
            ):
                times = join_latencies(bootstrap, protocol, args.joins)
                p50, worst = statistics.median(times) * 1000, max(times) * 1000
                target = "target <= 1 s + the interval"
                print(f"  {protocol:<9} p50 {p50:7.0f} ms  max {worst:7.0f} ms  ({note}; {target})")
            commits = commit_latencies(bootstrap, args.commits)
            print(
                f"OffsetCommit (synchronous, {args.commits}): p50 {ms(commits, 0.5)}, p99 {ms(commits, 0.99)}"
            )
        finally:
            stop_broker(broker)


if __name__ == "__main__":
    main()
