"""Consumer groups against Apache Kafka 4.4: throughput against assign(), the time a group takes
to consume again after a member joins, OffsetCommit latency.

    PYTHONPATH=src python bench/consumer_groups.py [--records 2000000] [--rounds 3] [--joins 5]
                                                   [--brokers kafka,shareq]

Kafka 4.4 (the tests' pinned jars and Kafka fixture, one node, with Kafka's default
``group.initial.rebalance.delay.ms`` of 3 s as shareq has) and then ``shareq serve``, one broker up
at a time, get the same workload from the same librdkafka clients. Per broker it measures:

* consume throughput of 4 librdkafka Consumers in one classic group (``range``, each in its own
  process, one partition each) against the same 4 reading one partition each by ``assign()``.
  Both kinds are paused until the clock starts (a group member once its partitions are assigned),
  so neither prefetches before it; the clock stops at the last record. Printed: records / (last
  record - start), the steady rate records / (last record - first record), the time to the first
  record, and the broker's CPU per record; medians over ``--rounds`` rounds that alternate which
  kind goes first. The group's join and first rebalance are outside the clock (time to
  assignment is the join figure's business).
* for a 10-member group on 20 partitions (classic ``cooperative-sticky``, then KIP-848
  ``group.protocol=consumer``) under a steady produce load, the time from an 11th member
  subscribing to every member, the new one included, having consumed a record produced after it
  subscribed; p50 and max over ``--joins`` joins, each from a settled group (the newcomer leaves
  between joins, and the next join waits until the 10 hold every partition once). Beside it: the
  time of the last revocation among the old members and of the newcomer's assignment (the
  rebalance callbacks), and the clients' intervals that bound them (a classic cooperative join
  takes two rebalance rounds, each started by the members' next heartbeat; a KIP-848 join waits
  for the old owners' next heartbeat).
* OffsetCommit latency (synchronous commits of one partition's offset), p50 and p99.

The load average is printed at the start and the end: figures taken on a loaded box drift.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))

from broker_process import free_port
from share_consume import (
    PARTITIONS,
    TOPIC,
    create_topic,
    produce,
    start_broker,
    stop_broker,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from kafka_harness import kafka_cluster

MEMBERS = 10
JOIN_PARTITIONS = 20
CLASSIC_HEARTBEAT_MS = 3000  # librdkafka's heartbeat.interval.ms default
CONSUMER_HEARTBEAT_MS = 5000  # the broker's group.consumer.heartbeat.interval.ms default


def reader_main(
    bootstrap: str,
    topic: str,
    mode: str,
    partition: int,
    round_no: int,
    n: int,
    consumed: Any,
    first: Any,
    finished: Any,
    ready: Any,
    go: Any,
    stop: Any,
) -> None:
    """One consumer of the throughput phase: ``assign()`` of ``partition`` or a member of a classic
    group (``range``); paused until ``go`` either way, so neither prefetches before the clock."""
    from confluent_kafka import Consumer, TopicPartition

    holding = threading.Event()
    if mode == "assign":
        config = {"bootstrap.servers": bootstrap, "group.id": "assign", "enable.auto.commit": False}
    else:
        config = {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-group-{round_no}",  # a fresh group: no committed offsets
            "auto.offset.reset": "earliest",
            "partition.assignment.strategy": "range",
        }
    consumer = Consumer(config)
    if mode == "assign":
        partitions = [TopicPartition(topic, partition, 0)]
        consumer.assign(partitions)
        consumer.pause(partitions)
        holding.set()
    else:

        def on_assign(consumer: Any, partitions: list[Any]) -> None:
            consumer.assign(partitions)  # assign now, so that the pause holds (no prefetch before go)
            consumer.pause(partitions)
            holding.set()

        consumer.subscribe([topic], on_assign=on_assign)
    while not holding.is_set():
        consumer.poll(0.05)
    ready.release()
    go.wait()
    consumer.resume(consumer.assignment())
    while not stop.is_set():
        batch = consumer.consume(10_000, 0.05)
        got = sum(1 for m in batch if m.error() is None)
        if got:
            now = time.time()
            with first.get_lock():
                if first.value == 0.0:
                    first.value = now
            with consumed.get_lock():
                consumed.value += got
                if consumed.value >= n:
                    finished.value = now
    ready.release()
    consumer.close()


@dataclass
class Throughput:
    rate: float  # records / (last record - go)
    first_s: float  # go -> the first record of any consumer
    steady: float  # records / (last record - first record)
    cpu_us: float  # broker CPU per record over the phase


def throughput(bootstrap: str, pid: int, topic: str, mode: str, round_no: int, n: int) -> Throughput:
    ctx = mp.get_context("spawn")
    consumed, first, finished = ctx.Value("q", 0), ctx.Value("d", 0.0), ctx.Value("d", 0.0)
    ready = ctx.Semaphore(0)
    go, stop = ctx.Event(), ctx.Event()
    procs = [
        ctx.Process(
            target=reader_main,
            args=(bootstrap, topic, mode, i, round_no, n, consumed, first, finished, ready, go, stop),
        )
        for i in range(PARTITIONS)
    ]
    for p in procs:
        p.start()
    for _ in procs:
        if not ready.acquire(timeout=120):
            raise RuntimeError(f"{mode}: consumers did not get their partitions")
    broker = psutil.Process(pid)
    cpu = sum(broker.cpu_times()[:2])
    started = time.time()
    go.set()
    deadline = time.monotonic() + 900
    while consumed.value < n and time.monotonic() < deadline:
        time.sleep(0.005)
    cpu = sum(broker.cpu_times()[:2]) - cpu
    stop.set()
    for _ in procs:
        ready.acquire(timeout=60)
    for p in procs:
        p.join(timeout=60)
    if consumed.value < n:
        raise RuntimeError(f"{mode}: only {consumed.value} of {n} records")
    end, begin = float(finished.value), float(first.value)
    return Throughput(n / (end - started), begin - started, n / (end - begin), cpu / n * 1e6)


class Member:
    """One group consumer polling in its own thread; remembers when it last got a record and when
    its rebalance callbacks ran."""

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
        self.last_record_ts = 0.0  # producer wall-clock timestamp of the last record consumed
        self.assigned: list[float] = []  # wall-clock times of callbacks that added partitions
        self.revoked: list[float] = []  # ... and that took partitions away
        self.owned: set[int] = set()  # partitions held, as the callbacks say (incremental)
        self.consumer.subscribe([f"{TOPIC}-join"], on_assign=self._on_assign, on_revoke=self._on_revoke)
        self.running = True
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _on_assign(self, consumer: Any, partitions: list[Any]) -> None:
        self.owned |= {p.partition for p in partitions}
        if partitions:
            self.assigned.append(time.time())

    def _on_revoke(self, consumer: Any, partitions: list[Any]) -> None:
        self.owned -= {p.partition for p in partitions}
        if partitions:
            self.revoked.append(time.time())

    def _run(self) -> None:
        while self.running:
            message = self.consumer.poll(0.02)
            if message is not None and message.error() is None:
                self.last_record_ts = max(self.last_record_ts, message.timestamp()[1] / 1000.0)

    def close(self) -> None:
        self.running = False
        self.thread.join()
        self.consumer.close()


@dataclass
class Join:
    total: float  # subscribe -> every member consumed a record produced after it
    revoked: float  # subscribe -> the last revocation among the old members (0: none)
    assigned: float  # subscribe -> the newcomer got its partitions


def join_latencies(bootstrap: str, protocol: str, joins: int) -> list[Join]:
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
    results: list[Join] = []
    try:
        settle(members)
        for _ in range(joins):
            joined_at = time.time()
            newcomer = Member(bootstrap, group, protocol)
            everyone = [*members, newcomer]
            done = wait_all(everyone, joined_at, 120)
            revokes = [t for m in members for t in m.revoked if t >= joined_at]
            assigned = [t for t in newcomer.assigned if t >= joined_at]
            results.append(
                Join(
                    done - joined_at,
                    max(revokes) - joined_at if revokes else 0.0,
                    (assigned[0] if assigned else done) - joined_at,
                )
            )
            newcomer.close()
            settle(members)
    finally:
        stop.set()
        for member in members:
            member.close()
        loader.join()
    return results


def settle(members: list[Member], timeout: float = 120) -> None:
    """Wait until the members hold every partition once between them and all consume: each join
    then starts from a settled group (no partitions left over from the previous member's leave)."""
    deadline = time.monotonic() + timeout
    while True:
        owned = [p for m in members for p in m.owned]
        if len(owned) == JOIN_PARTITIONS and len(set(owned)) == JOIN_PARTITIONS:
            break
        if time.monotonic() > deadline:
            raise RuntimeError("the group did not settle")
        time.sleep(0.01)
    wait_all(members, time.time() + 0.2, timeout)


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


@dataclass
class Figures:
    assign: Throughput
    group: Throughput
    joins: dict[str, list[Join]]
    commits: list[float]


def median_of(runs: list[Throughput]) -> Throughput:
    return Throughput(
        statistics.median(r.rate for r in runs),
        statistics.median(r.first_s for r in runs),
        statistics.median(r.steady for r in runs),
        statistics.median(r.cpu_us for r in runs),
    )


@contextmanager
def kafka(directory: Path) -> Iterator[tuple[str, int]]:
    # Kafka's own default initial delay (the tests' harness sets 0), as shareq runs with it
    with kafka_cluster(directory, nodes=1, configs={"group.initial.rebalance.delay.ms": "3000"}) as cluster:
        process = cluster.nodes[0].process
        assert process is not None
        yield cluster.bootstrap, process.pid


@contextmanager
def shareq(directory: Path) -> Iterator[tuple[str, int]]:
    port = free_port()
    broker = start_broker(directory, port)
    try:
        yield f"127.0.0.1:{port}", broker.pid
    finally:
        stop_broker(broker)


def measure(
    start: Callable[[Path], AbstractContextManager[tuple[str, int]]], args: argparse.Namespace
) -> Figures:
    with (
        tempfile.TemporaryDirectory(prefix="groups-bench-") as tmp,
        start(Path(tmp) / "data") as (bootstrap, pid),
    ):
        produce(bootstrap, args.records)
        assigns: list[Throughput] = []
        groups: list[Throughput] = []
        for round_no in range(args.rounds):  # alternated (and which goes first), so that load hits both alike
            order = ("assign", "group") if round_no % 2 == 0 else ("group", "assign")
            for mode in order:
                figure = throughput(bootstrap, pid, TOPIC, mode, round_no, args.records)
                (assigns if mode == "assign" else groups).append(figure)
        assign, group = median_of(assigns), median_of(groups)
        create_topic(bootstrap, f"{TOPIC}-join", JOIN_PARTITIONS)
        joins = {protocol: join_latencies(bootstrap, protocol, args.joins) for protocol in PROTOCOLS}
        commits = commit_latencies(bootstrap, args.commits)
    return Figures(assign, group, joins, commits)


PROTOCOLS = {
    "classic": (
        f"cooperative-sticky, heartbeat.interval.ms {CLASSIC_HEARTBEAT_MS}, two rounds each begun by "
        f"the next heartbeat; target <= 1 s + 2 x {CLASSIC_HEARTBEAT_MS} ms"
    ),
    "consumer": (
        f"KIP-848 uniform, group.consumer.heartbeat.interval.ms {CONSUMER_HEARTBEAT_MS}, the old "
        f"owners' next heartbeat; target <= 1 s + {CONSUMER_HEARTBEAT_MS} ms"
    ),
}


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min) {five:.2f} (5 min)"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--rounds", type=int, default=3, help="throughput rounds (medians)")
    parser.add_argument("--joins", type=int, default=5)
    parser.add_argument("--commits", type=int, default=2_000)
    parser.add_argument("--brokers", default="kafka,shareq", help="kafka, shareq or both")
    args = parser.parse_args()
    print(f"start: {load()}, {os.cpu_count()} cores", flush=True)
    starts = {"kafka": kafka, "shareq": shareq}
    names = [b for b in args.brokers.split(",") if b]
    results = {name: measure(starts[name], args) for name in names}
    print(f"end: {load()}")
    head = "".join(f"{'Kafka 4.4' if n == 'kafka' else 'shareq':>30}" for n in names)
    print(
        f"\n{args.records:,} records of 100 B on {PARTITIONS} partitions, 4 librdkafka consumers, "
        "one broker up at a time"
    )
    print(f"{'':<36}{head}")
    for label, pick in (
        ("assign() rec/s (go -> last record)", lambda f: f.assign.rate),
        ("classic group (range), same", lambda f: f.group.rate),
        ("group / assign()", lambda f: f.group.rate / f.assign.rate),
        ("assign() steady (first -> last)", lambda f: f.assign.steady),
        ("classic group steady", lambda f: f.group.steady),
        ("group / assign() steady", lambda f: f.group.steady / f.assign.steady),
        ("broker CPU us/record, assign()", lambda f: f.assign.cpu_us),
        ("broker CPU us/record, group", lambda f: f.group.cpu_us),
        ("assign() go -> first record s", lambda f: f.assign.first_s),
        ("classic group go -> first record s", lambda f: f.group.first_s),
    ):
        cells = "".join(f"{pick(results[n]):>30,.2f}" for n in names)
        print(f"{label:<36}{cells}")
    print("(target: group >= 0.9x assign(); both paused until the clock starts, so neither prefetches)")
    print(
        f"\njoin of an 11th member to {MEMBERS} consuming members on {JOIN_PARTITIONS} partitions, "
        f"{args.joins} joins, ms"
    )
    for protocol, note in PROTOCOLS.items():
        print(f"{protocol} ({note})")
        for label, pick in (
            ("  every member consuming", lambda j: j.total),
            ("  last revocation", lambda j: j.revoked),
            ("  newcomer assigned", lambda j: j.assigned),
        ):
            cells = ""
            for n in names:
                values = [pick(j) for j in results[n].joins[protocol]]
                cells += f"{f'p50 {statistics.median(values) * 1000:.0f} max {max(values) * 1000:.0f}':>30}"
            print(f"{label:<36}{cells}")
        for n in names:
            each = " ".join(f"{j.total * 1000:.0f}" for j in results[n].joins[protocol])
            print(f"    {n} each: {each}")
    cells = "".join(
        f"{f'p50 {ms(results[n].commits, 0.5)} p99 {ms(results[n].commits, 0.99)}':>30}" for n in names
    )
    print(f"\n{f'OffsetCommit (sync, {args.commits})':<36}{cells}")


if __name__ == "__main__":
    main()
