"""Redelivery backoff and crash-durable delivery counts: what they cost, printed side by side.

    PYTHONPATH=src python bench/retries.py [--records 1000000] [--consumers 4] [--engine-only]

Engine: acquire + acknowledge of a fresh 500-record batch (median, µs) on a share-partition holding
10 and 100,000 delayed runs (count window, each run released with its own due time), against the
target: the cost at 100k at most 2x the cost at 10.

Broker: one broker subprocess, N records of 100 B produced to 4 partitions twice (librdkafka's
default linger, and linger 50), then one share group per phase, 4 librdkafka ShareConsumer
processes each (the clock runs from the first records received to the last acknowledgement
answered):

* ``explicit, no releases``: every record ACCEPTed, one ShareAcknowledge per poll;
* ``backoff, 10% released once``: the group has ``shareq.redelivery.backoff.ms=1000``, the count
  window and a window of 50,000 (the records waiting out their delay are AVAILABLE and count
  against it: a second's worth of them must fit); every tenth record is RELEASEd on its first
  delivery; the rate is that of the other 90% (target >= 0.9x of the phase above); then the same
  releases without a delay (Kafka's behaviour), to tell the delay's cost from the releases' own;
* ``implicit, durable counts off`` / ``on`` at each linger: acknowledgements ride on the next
  ShareFetch; with ``shareq.delivery.count.durable=true`` each acquisition is written before the
  fetch answers (target >= 0.85x of off); broker CPU per record for each.
"""

from __future__ import annotations

import argparse
import gc
import multiprocessing as mp
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing.sharedctypes import Synchronized
from pathlib import Path
from typing import Any

import psutil

import broker_process
from broker_process import cpu_seconds, free_port, produce_round_robin, settle_assignment

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

PARTITIONS = 4
BATCH = 500


# ------------------------------------------------------------------------------------------ engine
def engine_with_delayed_runs(n: int) -> object:
    from shareq.share import AcknowledgementBatch, AcknowledgeType, ShareConfig, SharePartition
    from shareq.share.backoff import RedeliveryBackoff
    from shareq.share.persister import SharePartitionKey

    config = ShareConfig(
        max_record_locks=10**12,
        record_lock_duration_ms=3_600_000,
        window_count=True,
        backoff=RedeliveryBackoff(base_ms=3_600_000, max_ms=3_600_000, jitter=0.0, ceiling_ms=10**9),
    )
    sp = SharePartition(SharePartitionKey(group_id="bench", topic_id=uuid.UUID(int=1), partition=0), config)
    write = sp.initialize(None)
    assert write is not None
    sp.complete(write.handle, True, 0)
    release = (AcknowledgeType.RELEASE,)
    for i in range(n):
        sp.acquire("bg", [(2 * i, 2 * i + 1)], max_records=2, now=i)
        ack = sp.acknowledge("bg", [AcknowledgementBatch(2 * i, 2 * i + 1, release)], now=i)
        assert ack.write is not None
        sp.complete(ack.write.handle, True, i)  # each released at its own instant: its own due time
    assert sp.range_count() == n and sp.delayed()[0] == 2 * n
    return sp


def engine_cost(n: int, rounds: int) -> float:
    from shareq.share import AcknowledgementBatch, AcknowledgeType

    sp = engine_with_delayed_runs(n)
    accept = (AcknowledgeType.ACCEPT,)
    base = sp.end_offset  # type: ignore[attr-defined]
    now = n + 1  # before any due time
    costs: list[int] = []
    gc.disable()
    try:
        for r in range(rounds):
            first = base + r * BATCH
            last = first + BATCH - 1
            t0 = time.perf_counter_ns()
            result = sp.acquire("m", [(first, last)], max_records=BATCH, now=now)  # type: ignore[attr-defined]
            ack = sp.acknowledge("m", [AcknowledgementBatch(first, last, accept)], now=now)  # type: ignore[attr-defined]
            sp.complete(ack.write.handle, True, now)  # type: ignore[attr-defined]
            costs.append(time.perf_counter_ns() - t0)
            assert result.acquired_count == BATCH
    finally:
        gc.enable()
    return statistics.median(costs) / 1000


def engine_section() -> None:
    print(f"engine: acquire + acknowledge of one {BATCH}-record batch beside delayed runs (median, us)")
    costs = {n: engine_cost(n, 3_000) for n in (10, 100_000)}
    for n, cost in costs.items():
        print(f"  {n:>7} delayed runs held: {cost:7.1f} us")
    print(f"  cost@100k / cost@10 = {costs[100_000] / costs[10]:.2f}   (target <= 2)")


# ------------------------------------------------------------------------------------------ broker
@contextmanager
def shareq_broker(data_dir: Path) -> Iterator[tuple[str, int]]:
    port = free_port()
    profile = os.environ.get("RETRIES_PROFILE") or None  # the broker under cProfile, written there
    broker = broker_process.start_broker(data_dir, port, configs=[], profile=profile)
    try:
        yield f"127.0.0.1:{port}", broker.pid
    finally:
        broker_process.stop_broker(broker)


def produce(bootstrap: str, topic: str, n: int, linger_ms: int | None) -> None:
    config: dict[str, object] = {"batch.num.messages": 10000}
    if linger_ms is not None:
        config["linger.ms"] = linger_ms
    produce_round_robin(bootstrap, topic, n, PARTITIONS, config)


def consumer_process(
    bootstrap: str,
    group: str,
    topic: str,
    explicit: bool,
    release_every: int,
    ready: Synchronized[int],
    start: Synchronized[int],
    done: Synchronized[int],
    total: int,
    out: mp.Queue[tuple[int, float, float, float, float]],
) -> None:
    from confluent_kafka import AcknowledgeType, ShareConsumer

    config = {"bootstrap.servers": bootstrap, "group.id": group}
    if explicit:
        config["share.acknowledgement.mode"] = "explicit"
    consumer = ShareConsumer(config)
    consumer.subscribe([topic])
    with ready.get_lock():
        ready.value += 1
    while not start.value:
        time.sleep(0.01)
    accepted = 0
    first = 0.0
    last_other = 0.0  # when the last record not released was accepted
    idle_since = time.monotonic()
    while done.value < total:
        messages = consumer.poll(0.2)
        if not messages:
            if time.monotonic() - idle_since > 30:
                break
            continue
        idle_since = time.monotonic()
        first = first or idle_since
        n = 0
        others = False
        for m in messages:
            if release_every and m.offset() % release_every == 0 and m.delivery_count() == 1:
                consumer.acknowledge(m, AcknowledgeType.RELEASE)
                continue
            if explicit:
                consumer.acknowledge(m, AcknowledgeType.ACCEPT)
            n += 1
            others = others or not (release_every and m.offset() % release_every == 0)
        if explicit:
            consumer.commit_async()
        if others:
            last_other = time.monotonic()
        accepted += n
        with done.get_lock():
            done.value += n
    consumer.commit_sync()
    acked = time.monotonic()
    consumer.close()
    times = os.times()
    out.put((accepted, times.user + times.system, first, acked, last_other))


def phase(
    bootstrap: str,
    broker: psutil.Process,
    group: str,
    topic: str,
    n: int,
    consumers: int,
    *,
    explicit: bool,
    release_every: int = 0,
    configs: dict[str, str] | None = None,
) -> tuple[float, float, float]:
    """(seconds for all records, seconds for the records never released, broker CPU seconds)."""
    from shareq.client import Admin, ConfigResource, ResourceType

    with Admin(bootstrap) as admin:
        admin.alter_configs(
            ConfigResource(ResourceType.GROUP, group),
            {"share.auto.offset.reset": "earliest", **(configs or {})},
        )
    ready, start, done = mp.Value("i", 0), mp.Value("i", 0), mp.Value("i", 0)
    out: mp.Queue[tuple[int, float, float, float, float]] = mp.Queue()
    args = (bootstrap, group, topic, explicit, release_every, ready, start, done, n, out)
    procs = [mp.Process(target=consumer_process, args=args) for _ in range(consumers)]
    for p in procs:
        p.start()
    while ready.value < consumers:
        time.sleep(0.01)
    settle_assignment(bootstrap, group, topic, consumers, PARTITIONS)
    cpu = cpu_seconds(broker)
    start.value = 1
    results = [out.get(timeout=600) for _ in procs]
    cpu = cpu_seconds(broker) - cpu
    for p in procs:
        p.join(60)
    began = min(r[2] for r in results if r[2])
    elapsed = max(r[3] for r in results) - began
    others = max(r[4] for r in results) - began
    assert sum(r[0] for r in results) >= n, f"{group}: consumed {sum(r[0] for r in results)} of {n}"
    return elapsed, others, cpu


def broker_section(n: int, consumers: int, only: str | None = None) -> None:
    from shareq.client import Admin

    data = Path(tempfile.mkdtemp(prefix="retries-bench-"))
    try:
        with shareq_broker(data) as (bootstrap, pid):
            with Admin(bootstrap) as admin:
                for topic in ("bench-l5", "bench-l50"):
                    admin.create_topic(topic, PARTITIONS)
                    admin.cluster.wait_for_topic(topic, 30)
            produce(bootstrap, "bench-l5", n, None)
            produce(bootstrap, "bench-l50", n, 50)
            proc = psutil.Process(pid)
            print(
                f"broker: {n} records x 100 B, {PARTITIONS} partitions, "
                f"{consumers} librdkafka ShareConsumers, load average {os.getloadavg()[0]:.1f}"
            )

            def line(name: str, rate: float, cpu: float, ratio: str = "") -> None:
                print(f"  {name:46s}{rate:9.0f} rec/s {ratio:26s} broker CPU {cpu / n * 1e6:5.2f} us/rec")

            if only in (None, "backoff"):
                backoff_phases(bootstrap, proc, n, consumers, line)
            if only in (None, "durable"):
                durable_phases(bootstrap, proc, n, consumers, line)
    finally:
        shutil.rmtree(data, ignore_errors=True)


def backoff_phases(bootstrap: str, proc: psutil.Process, n: int, consumers: int, line: Any) -> None:
    """No releases; 10% released once with a 1 s backoff; the same releases without a delay
    (Kafka's behaviour), the control that tells the delay's cost from the releases' own."""
    base, _, cpu = phase(bootstrap, proc, "explicit", "bench-l5", n, consumers, explicit=True)
    line("explicit, no releases", n / base, cpu)
    # Records waiting out their delay are AVAILABLE and count against the window: a second's worth
    # of them per partition must fit in it, beside those in flight.
    window = {"share.partition.max.record.locks": "50000"}
    backoff = {**window, "shareq.redelivery.backoff.ms": "1000", "shareq.share.window.mode": "count"}
    _, others, cpu = phase(
        bootstrap, proc, "backoff", "bench-l5", n, consumers, explicit=True, release_every=10, configs=backoff
    )
    rate = 0.9 * n / others
    line("backoff, 10% released once (the other 90%)", rate, cpu, f"({rate / (n / base):.2f}x, >= 0.9)")
    _, others, cpu = phase(
        bootstrap, proc, "release", "bench-l5", n, consumers, explicit=True, release_every=10, configs=window
    )
    control = 0.9 * n / others
    line("no backoff, 10% released once (the other 90%)", control, cpu, f"({control / (n / base):.2f}x)")


def durable_phases(bootstrap: str, proc: psutil.Process, n: int, consumers: int, line: Any) -> None:
    """Implicit acknowledgement with durable counts off and on, at each producer linger."""
    for topic, linger in (("bench-l5", "default linger"), ("bench-l50", "linger 50")):
        off, _, cpu_off = phase(bootstrap, proc, f"off-{topic}", topic, n, consumers, explicit=False)
        line(f"implicit, {linger}, durable counts off", n / off, cpu_off)
        durable = {"shareq.delivery.count.durable": "true"}
        on, _, cpu_on = phase(
            bootstrap, proc, f"on-{topic}", topic, n, consumers, explicit=False, configs=durable
        )
        line(f"implicit, {linger}, durable counts on", n / on, cpu_on, f"({off / on:.2f}x, >= 0.85)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--consumers", type=int, default=4)
    parser.add_argument("--engine-only", action="store_true")
    parser.add_argument("--only", choices=["backoff", "durable"], help="run only these broker phases")
    args = parser.parse_args()
    if not args.only:
        engine_section()
    if not args.engine_only:
        broker_section(args.records - args.records % (PARTITIONS * 10), args.consumers, args.only)


if __name__ == "__main__":
    main()
