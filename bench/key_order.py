"""Key-ordered share groups (``shareq.share.ordering=key``) against unordered ones, side by side.

    PYTHONPATH=src python bench/key_order.py [--records 400000] [--keys 10000] [--consumers 8]
                                             [--window span|count] [--only PHASE] [--engine-only]

One fresh broker subprocess; records of 100 B on 4 partitions, keyed over ``--keys`` distinct keys
(librdkafka's default partitioner puts each key on one partition). Each phase has its own share
group and its own librdkafka ShareConsumers (one process each, implicit acknowledgement), timed from
the first records any consumer receives to the last poll that received records (whose records the
close then acknowledges):

* ``none`` and ``key`` on the same topic, produced at librdkafka's default linger (5 ms) and again
  on a topic produced at ``linger.ms=50`` (larger batches). Target: key >= 0.7x none in both.
* ``key`` on a topic where one hot key holds 10% of the records: the rate of the *other* keys'
  records (until the last of them is received) against the key group's rate without the hot key.
  Target >= 0.8x.
* Produce rate of a topic no key group reads, with a key group reading another topic against none
  configured at all (alternating, median of 6). Target >= 0.98x. (The produce path has no key code.)

Broker CPU per record is printed for each phase (psutil, the broker process over the phase).
``KEY_ORDER_PROFILE=path`` runs the broker under cProfile, written there.

First, without a broker: the engine's acquisition and acknowledgement of one 500-record batch of
free keys beside 10 and beside 10,000 held keys (the held set is kept as records change, so the
cost must not grow with it).
The peers' figures (Redis Streams, a RabbitMQ quorum queue) come from ``share_consume.py``, which
runs them; nothing here compares with Pulsar's Key_Shared, which cannot run on this box.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import random
import shutil
import statistics
import tempfile
import time
from multiprocessing.sharedctypes import Synchronized
from pathlib import Path

import psutil

import broker_process
from broker_process import free_port

PARTITIONS = 4
PHASES = ("linger", "linger50", "hot", "produce")
GROUP_EXTRA: dict[str, str] = {}
"""Group configs every phase's group gets (``--window count``)."""


ENGINE_BATCH = 500


def engine_cost(held_keys: int, rounds: int) -> float:
    """Median µs of acquiring ``ENGINE_BATCH`` records of keys nobody holds, then accepting them,
    in a share-partition where another member holds one record of each of ``held_keys`` keys."""
    import gc
    import uuid

    import numpy as np

    from shareq.share import AcknowledgementBatch, AcknowledgeType, ShareConfig, SharePartition
    from shareq.share.key_order import KeyView
    from shareq.share.persister import SharePartitionKey

    total = held_keys + rounds * ENGINE_BATCH
    view = KeyView(0, np.arange(1, total + 1, dtype=np.uint32))  # a key of its own per record
    sp = SharePartition(
        SharePartitionKey(group_id="g", topic_id=uuid.UUID(int=1), partition=0),
        ShareConfig(max_record_locks=total + 1),
    )
    write = sp.initialize(None, log_end_offset=0)
    assert write is not None
    sp.complete(write.handle, True, 0)
    sp.acquire("holder", [(0, held_keys - 1)], max_records=held_keys, now=0, keys=view)
    costs: list[int] = []
    accept = (AcknowledgeType.ACCEPT,)
    gc.disable()
    try:
        for i in range(rounds):
            first = held_keys + i * ENGINE_BATCH
            last = first + ENGINE_BATCH - 1
            began = time.perf_counter_ns()
            got = sp.acquire("m", [(first, last)], max_records=ENGINE_BATCH, now=1, keys=view)
            ack = sp.acknowledge("m", [AcknowledgementBatch(first, last, accept)], now=1).write
            assert ack is not None
            sp.complete(ack.handle, True, 1)
            costs.append(time.perf_counter_ns() - began)
            assert got.acquired_count == ENGINE_BATCH
        blocked = sp.held_keys()
        assert blocked is not None and len(blocked) == held_keys
    finally:
        gc.enable()
    return statistics.median(costs) / 1000


def engine_section() -> None:
    print(f"engine: acquire + accept of one {ENGINE_BATCH}-record batch of free keys (median, µs)")
    costs = {n: engine_cost(n, 400) for n in (10, 10_000)}
    for n, cost in costs.items():
        print(f"  {n:>6} held keys: {cost:7.1f} µs")
    print(f"  cost@10k / cost@10 = {costs[10_000] / costs[10]:.2f}   (flat: it follows the records touched)")


def produce(bootstrap: str, topic: str, keys: list[bytes], linger_ms: int | None) -> float:
    """Produce one record of 100 B per key in ``keys``; returns records per second."""
    from confluent_kafka import Producer

    config: dict[str, object] = {"bootstrap.servers": bootstrap, "batch.num.messages": 10000}
    if linger_ms is not None:
        config["linger.ms"] = linger_ms
    producer = Producer(config)
    payload = b"x" * 100
    began = time.monotonic()
    for key in keys:
        while True:
            try:
                producer.produce(topic, key=key, value=payload)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0
    return len(keys) / (time.monotonic() - began)


def consumer_process(
    bootstrap: str,
    group: str,
    topic: str,
    ready: Synchronized[int],
    start: Synchronized[int],
    done: Synchronized[int],
    others_done: Synchronized[int],
    total: int,
    others: int,
    out: mp.Queue[tuple[float, float, float]],
) -> None:
    from confluent_kafka import ShareConsumer

    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 3})
    consumer.subscribe([topic])
    with ready.get_lock():
        ready.value += 1
    while not start.value:
        time.sleep(0.01)
    first = last = others_last = 0.0
    idle_since = time.monotonic()
    while done.value < total:
        messages = consumer.poll(0.2)
        if not messages:
            if time.monotonic() - idle_since > 20:
                break
            continue
        now = idle_since = time.monotonic()
        first = first or now
        last = now
        n_others = sum(1 for m in messages if m.key() != b"hot")
        with done.get_lock():
            done.value += len(messages)
        if n_others:
            with others_done.get_lock():
                others_done.value += n_others
                if others_done.value >= others:
                    others_last = now
    consumer.close()
    out.put((first, last, others_last))


def settle_assignment(bootstrap: str, group: str, topic: str, consumers: int, timeout: float = 30.0) -> None:
    """Wait until every consumer is a member and the partitions are spread evenly (the first
    assignments are transitional; a key group's cost depends on how many members share a
    partition, so a phase timed on them measures something else)."""
    from shareq.client import Admin, KafkaError

    deadline = time.monotonic() + timeout
    with Admin(bootstrap) as admin:
        while time.monotonic() < deadline:
            try:
                members = admin.describe_share_group(group).members
            except KafkaError:
                members = ()
            per_partition = [0] * PARTITIONS
            for m in members:
                for p in m.assignment.get(topic, ()):
                    per_partition[p] += 1
            everyone = all(m.assignment.get(topic) for m in members)  # none idle
            even = min(per_partition) >= 1 and max(per_partition) - min(per_partition) <= 1
            if len(members) == consumers and everyone and even:
                print(f"  ({group}: members per partition {per_partition})")
                return
            time.sleep(0.1)
    print(f"  ({group}: the assignment did not settle within {timeout:.0f} s: timing anyway)")


def phase(
    bootstrap: str,
    broker: psutil.Process,
    group: str,
    topic: str,
    ordering: str,
    n: int,
    others: int,
    consumers: int,
) -> dict[str, float]:
    from shareq.client import Admin, ConfigResource, ResourceType

    with Admin(bootstrap) as admin:
        admin.alter_configs(
            ConfigResource(ResourceType.GROUP, group),
            {"share.auto.offset.reset": "earliest", "shareq.share.ordering": ordering, **GROUP_EXTRA},
        )
    ready, start, done, others_done = (mp.Value("i", 0) for _ in range(4))
    out: mp.Queue[tuple[float, float, float]] = mp.Queue()
    procs = [
        mp.Process(
            target=consumer_process,
            args=(bootstrap, group, topic, ready, start, done, others_done, n, others, out),
        )
        for _ in range(consumers)
    ]
    for p in procs:
        p.start()
    while ready.value < consumers:
        time.sleep(0.01)
    settle_assignment(bootstrap, group, topic, consumers)
    cpu = sum(broker.cpu_times()[:2])
    start.value = 1
    results = [out.get(timeout=900) for _ in procs]
    cpu = sum(broker.cpu_times()[:2]) - cpu
    for p in procs:
        p.join(60)
    began = min(f for f, _, _ in results if f)
    ended = max(la for _, la, _ in results)
    others_end = max(o for _, _, o in results)
    assert done.value >= n, f"{group}: {done.value} of {n}"
    return {
        "rate": n / (ended - began),
        "others_rate": others / (others_end - began) if others_end else 0.0,
        "cpu_us": cpu / n * 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=400_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--consumers", type=int, default=8)
    parser.add_argument(
        "--window", choices=("span", "count"), default="span", help="shareq.share.window.mode of every group"
    )
    parser.add_argument(
        "--only",
        choices=PHASES,
        action="append",
        help="run only these phases (repeatable; default all)",
    )
    parser.add_argument("--engine-only", action="store_true", help="only the engine figures (no broker)")
    args = parser.parse_args()
    engine_section()
    if args.engine_only:
        return
    only = set(args.only or PHASES)
    if args.window == "count":
        GROUP_EXTRA["shareq.share.window.mode"] = "count"
    n, consumers = args.records, args.consumers
    rnd = random.Random(7)
    plain = [b"k%d" % rnd.randrange(args.keys) for _ in range(n)]
    hot = [b"hot" if rnd.random() < 0.1 else b"k%d" % rnd.randrange(args.keys) for _ in range(n)]
    others = sum(1 for k in hot if k != b"hot")
    data = Path(tempfile.mkdtemp(prefix="key-order-bench-"))
    port = free_port()
    profile = os.environ.get("KEY_ORDER_PROFILE") or None  # the broker under cProfile, written there
    broker = broker_process.start_broker(data, port, configs=[], profile=profile)
    bootstrap = f"127.0.0.1:{port}"
    try:
        from shareq.client import Admin

        with Admin(bootstrap) as admin:
            for topic in ("plain", "plain50", "hot", "p-a", "p-b"):
                admin.create_topic(topic, PARTITIONS)
        if only & {"linger", "hot"}:
            produce(bootstrap, "plain", plain, None)
        if "linger50" in only:
            produce(bootstrap, "plain50", plain, 50)
        if "hot" in only:
            produce(bootstrap, "hot", hot, None)
        proc = psutil.Process(broker.pid)
        print(f"{n:,} records of 100 B on {PARTITIONS} partitions, {args.keys:,} keys, {consumers} consumers")
        figures: dict[str, dict[str, float]] = {}
        lingers = (("default linger", "plain", "linger"), ("linger 50", "plain50", "linger50"))
        for label, topic, name in lingers:
            if name not in only:
                continue
            for ordering in ("none", "key"):
                figures[f"{label} {ordering}"] = phase(
                    bootstrap, proc, f"g-{topic}-{ordering}", topic, ordering, n, n, consumers
                )
            none, key = figures[f"{label} none"], figures[f"{label} key"]
            ratio = key["rate"] / none["rate"]
            print(
                f"{label:>15}: none {none['rate']:>9,.0f} rec/s {none['cpu_us']:5.1f} µs/rec broker CPU | "
                f"key {key['rate']:>9,.0f} rec/s {key['cpu_us']:5.1f} µs/rec | "
                f"key/none {ratio:.2f}x (target >= 0.7x)"
            )
        if "hot" in only:
            hot_phase(bootstrap, proc, figures, n, others, consumers)
        if "produce" in only:
            produce_phase(bootstrap, plain, n)
    finally:
        broker_process.stop_broker(broker)
        shutil.rmtree(data, ignore_errors=True)


def hot_phase(
    bootstrap: str,
    proc: psutil.Process,
    figures: dict[str, dict[str, float]],
    n: int,
    others: int,
    consumers: int,
) -> None:
    """The other keys' rate beside a hot key, against the key group without one (measured here
    unless the default linger phase ran)."""
    if "default linger key" not in figures:
        figures["default linger key"] = phase(bootstrap, proc, "g-plain-key", "plain", "key", n, n, consumers)
    hot_key = phase(bootstrap, proc, "g-hot-key", "hot", "key", n, others, consumers)
    base = figures["default linger key"]["rate"]
    ratio = hot_key["others_rate"] / base
    print(
        f"{'hot key 10%':>15}: other keys {hot_key['others_rate']:>9,.0f} rec/s, "
        f"all {hot_key['rate']:,.0f} rec/s, {hot_key['cpu_us']:.1f} µs/rec | "
        f"others/no-hot-key {ratio:.2f}x (target >= 0.8x)"
    )


def produce_phase(bootstrap: str, plain: list[bytes], n: int) -> None:
    """Produce to topics no key group reads: with key groups on other topics and with those
    groups' ordering set back to none, alternating."""
    from shareq.client import Admin, ConfigResource, ResourceType

    sample = plain[: max(n // 4, 10_000)]
    produce(bootstrap, "p-a", sample[:10_000], None)  # warm up both topics and the producer path
    produce(bootstrap, "p-b", sample[:10_000], None)
    rates: dict[str, list[float]] = {"key group elsewhere": [], "no key group": []}
    for round_ in range(6):  # alternating which goes first
        order = [("key group elsewhere", "key"), ("no key group", "none")]
        for label, ordering in order if round_ % 2 == 0 else order[::-1]:
            with Admin(bootstrap) as admin:
                for g in ("g-plain-key", "g-plain50-key", "g-hot-key"):
                    admin.alter_configs(
                        ConfigResource(ResourceType.GROUP, g), {"shareq.share.ordering": ordering}
                    )
            rates[label].append(produce(bootstrap, "p-a" if ordering == "key" else "p-b", sample, None))
    with_key = statistics.median(rates["key group elsewhere"])
    without = statistics.median(rates["no key group"])
    print(
        f"{'produce':>15}: {with_key:,.0f} rec/s with key groups on other topics, "
        f"{without:,.0f} without | {with_key / without:.2f}x (target >= 0.98x)"
    )


if __name__ == "__main__":
    main()
