"""Share consumption with 10% of records rejected into a dead-letter queue, against none rejected.

    PYTHONPATH=src python bench/dlq.py [--records 200000] [--consumers 4] [--rounds 3] [--control]
                                       [--broker-cpus 0 --client-cpus 1]

A fresh broker runs as a subprocess (``python -m shareq serve``, DLQ auto-creation on) and N records
of 100 bytes are produced to a 4-partition topic. Then two phases on the same data, each with its
own share group and its own consumer *processes* (librdkafka ShareConsumers, explicit
acknowledgement, one ShareAcknowledge per poll):

* ``0% rejected``: every record ACCEPTed (the group has no DLQ);
* ``10% rejected``: every tenth record REJECTed; the group's DLQ topic ``dlq.bench`` receives them
  (headers only, the default);
* with ``--control``, also 10% rejected in a group without a DLQ (archived at once).

A phase's clock runs from the first records any consumer receives to the last acknowledgement
answered (joining the group and closing the consumers are not timed). Printed: consume+ack rec/s
of each phase, the ratio to 0% (target >= 0.8), the broker's CPU per record over each phase and
the consumer processes' CPU per record (the whole process: connecting too), and DLQ writes per
second (dead letters in the DLQ topic over the time from the first records to the last one
landing). ``--rounds N`` repeats this N times, each round on a fresh broker with the phases'
order rotated (0% first, then the DLQ phase first, ...), and prints the median ratio and CPU per
record: the box is shared, and a single pair of phases drifts with its neighbours' load.

``--brokers shareq,kafka`` runs every round on Apache Kafka 4.4 too (one node from the tests' pinned
jars, ``make kafka``; the same configs, groups and clients), each ratio against its own 0%.

``--broker-cpus`` and ``--client-cpus`` pin the broker (its threads inherit it) and the consumer
processes to CPUs of their own, as when the broker runs on a machine of its own. Unpinned on a box
of two cores the phases are bound by the sum of the broker's and the consumers' CPU per record; the
figures say which one a phase spends.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from multiprocessing.sharedctypes import Synchronized
from pathlib import Path

import psutil

import broker_process
from broker_process import cpu_seconds, free_port, parse_cpus, produce_round_robin, settle_assignment

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

TOPIC = "bench"
DLQ = "dlq.bench"
PARTITIONS = 4


EXTRA_CONFIGS: dict[str, str] = {}
"""``--broker-config`` pairs, on top of the configs below."""


def broker_configs(record_locks: int | None) -> dict[str, str]:
    """The same broker configs on shareq and on Kafka (each group also gets
    ``share.auto.offset.reset=earliest``, the group config both take)."""
    configs = {"errors.deadletterqueue.auto.create.topics.enable": "true", **EXTRA_CONFIGS}
    if record_locks is not None:
        configs["group.share.max.partition.max.record.locks"] = str(record_locks)
        configs["group.share.partition.max.record.locks"] = str(record_locks)
    return configs


@contextmanager
def shareq_broker(
    data_dir: Path, record_locks: int | None = None, cpus: set[int] | None = None
) -> Iterator[tuple[str, int]]:
    """``shareq serve`` as a subprocess: (bootstrap, pid)."""
    port = free_port()
    pairs = [f"{k}={v}" for k, v in broker_configs(record_locks).items()]
    profile = os.environ.get("DLQ_PROFILE") or None
    broker = broker_process.start_broker(data_dir, port, configs=pairs, profile=profile, cpus=cpus)
    try:
        yield f"127.0.0.1:{port}", broker.pid
    finally:
        broker_process.stop_broker(broker)


@contextmanager
def kafka_broker(
    data_dir: Path, record_locks: int | None = None, cpus: set[int] | None = None
) -> Iterator[tuple[str, int]]:
    """One Apache Kafka 4.4 node (the tests' pinned jars: ``make kafka``): (bootstrap, pid). With
    ``cpus`` every thread of its JVM is pinned, and the threads it starts later inherit that."""
    from kafka_harness import kafka_cluster

    with kafka_cluster(data_dir, nodes=1, configs=broker_configs(record_locks)) as cluster:
        process = cluster.nodes[0].process
        assert process is not None
        if cpus:
            for tid in os.listdir(f"/proc/{process.pid}/task"):
                with suppress(ProcessLookupError):  # a thread that ended meanwhile
                    os.sched_setaffinity(int(tid), cpus)
        yield cluster.bootstrap, process.pid


def produce(bootstrap: str, n: int) -> None:
    produce_round_robin(bootstrap, TOPIC, n, PARTITIONS, {"linger.ms": 20, "batch.num.messages": 10000}, 60)


def consumer_process(
    bootstrap: str,
    group: str,
    reject_every: int,
    ready: Synchronized[int],
    start: Synchronized[int],
    done: Synchronized[int],
    total: int,
    out: mp.Queue[tuple[int, float, float, float]],
    cpus: set[int] | None,
) -> None:
    from confluent_kafka import AcknowledgeType, ShareConsumer

    if cpus:
        os.sched_setaffinity(0, cpus)  # before librdkafka's threads start: they inherit it

    consumer = ShareConsumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "share.acknowledgement.mode": "explicit"}
    )
    consumer.subscribe([TOPIC])
    with ready.get_lock():
        ready.value += 1
    while not start.value:
        time.sleep(0.01)
    got = 0
    first = 0.0  # when the first records arrived (joining the group is not timed)
    idle_since = time.monotonic()
    while done.value < total:
        messages = consumer.poll(0.2)
        if not messages:
            if time.monotonic() - idle_since > 20:
                break
            continue
        idle_since = time.monotonic()
        first = first or idle_since
        for m in messages:
            kind = (
                AcknowledgeType.REJECT
                if reject_every and m.offset() % reject_every == 0
                else AcknowledgeType.ACCEPT
            )
            consumer.acknowledge(m, kind)
        consumer.commit_async()
        got += len(messages)
        with done.get_lock():
            done.value += len(messages)
    consumer.commit_sync()
    acked = time.monotonic()  # the last acknowledgement answered (closing is not timed)
    consumer.close()
    times = os.times()
    out.put((got, times.user + times.system, first, acked))


def dlq_count(bootstrap: str) -> int:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-dlq-count"})
    try:
        metadata = consumer.list_topics(DLQ, timeout=5)
        topic = metadata.topics.get(DLQ)
        if topic is None or topic.error is not None:
            return 0
        return sum(
            consumer.get_watermark_offsets(TopicPartition(DLQ, p), timeout=5)[1] for p in topic.partitions
        )
    except KafkaException:
        return 0
    finally:
        consumer.close()


def phase(
    bootstrap: str,
    broker: psutil.Process,
    group: str,
    reject_every: int,
    n: int,
    consumers: int,
    dlq: bool = True,
    client_cpus: set[int] | None = None,
) -> tuple[float, float, float, float]:
    """(consume+ack seconds, seconds until the DLQ holds every rejected record, broker CPU seconds
    over the consume+ack time, the consumer processes' CPU seconds)."""
    from shareq.client import Admin, ConfigResource, ResourceType

    configs = {"share.auto.offset.reset": "earliest"}
    if reject_every and dlq:
        configs["errors.deadletterqueue.topic.name"] = DLQ
    with Admin(bootstrap) as admin:
        admin.alter_configs(ConfigResource(ResourceType.GROUP, group), configs)
    ready, start, done = mp.Value("i", 0), mp.Value("i", 0), mp.Value("i", 0)
    out: mp.Queue[tuple[int, float, float, float]] = mp.Queue()
    procs = [
        mp.Process(
            target=consumer_process,
            args=(bootstrap, group, reject_every, ready, start, done, n, out, client_cpus),
        )
        for _ in range(consumers)
    ]
    for p in procs:
        p.start()
    while ready.value < consumers:
        time.sleep(0.01)
    settle_assignment(bootstrap, group, TOPIC, consumers, PARTITIONS)
    broker_cpu = cpu_seconds(broker)
    began = time.monotonic()
    start.value = 1
    results = [out.get(timeout=300) for _ in procs]
    broker_cpu = cpu_seconds(broker) - broker_cpu
    for p in procs:
        p.join(60)
    began = min(first for _, _, first, _ in results if first)
    elapsed = max(acked for _, _, _, acked in results) - began
    consumed = sum(got for got, _, _, _ in results)
    client_cpu = sum(cpu for _, cpu, _, _ in results)
    assert consumed >= n, f"{group}: consumed {consumed} of {n}"
    dlq_elapsed = 0.0
    if reject_every and dlq:
        expected = n // reject_every
        deadline = time.monotonic() + 120
        while dlq_count(bootstrap) < expected:
            assert time.monotonic() < deadline, "the DLQ did not receive every rejected record"
            time.sleep(0.05)
        dlq_elapsed = time.monotonic() - began
    return elapsed, dlq_elapsed, broker_cpu, client_cpu


@dataclass(frozen=True, slots=True)
class Phase:
    name: str
    group: str
    reject_every: int
    dlq: bool


PHASES = {
    "0%": Phase("0% rejected", "bench-0", 0, True),
    "dlq": Phase("10% rejected into a DLQ", "bench-10", 10, True),
    "archive": Phase("10% rejected, no DLQ (archived at once)", "bench-10-archive", 10, False),
}


def one_round(
    names: list[str],
    n: int,
    consumers: int,
    record_locks: int | None,
    broker_cpus: set[int] | None = None,
    client_cpus: set[int] | None = None,
    kind: str = "shareq",
) -> dict[str, tuple[float, float, float, float]]:
    """One fresh broker, the records produced once, then each phase in ``names``' order."""
    data = Path(tempfile.mkdtemp(prefix="dlq-bench-"))
    start = kafka_broker if kind == "kafka" else shareq_broker
    out: dict[str, tuple[float, float, float, float]] = {}
    try:
        with start(data, record_locks, broker_cpus) as (bootstrap, pid):
            from shareq.client import Admin

            with Admin(bootstrap) as admin:
                admin.create_topic(TOPIC, PARTITIONS)
                admin.cluster.wait_for_topic(TOPIC, 30)
            produce(bootstrap, n)
            proc = psutil.Process(pid)
            for name in names:
                ph = PHASES[name]
                out[name] = phase(
                    bootstrap,
                    proc,
                    ph.group,
                    ph.reject_every,
                    n,
                    consumers,
                    dlq=ph.dlq,
                    client_cpus=client_cpus,
                )
    finally:
        shutil.rmtree(data, ignore_errors=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--consumers", type=int, default=4)
    parser.add_argument("--control", action="store_true", help="also 10%% rejected without a DLQ")
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="rounds, each on a fresh broker, the phases' order rotating from one round to the next",
    )
    parser.add_argument(
        "--record-locks",
        type=int,
        default=None,
        help="the share-partitions' in-flight window (group.share.partition.max.record.locks; default 2000)",
    )
    parser.add_argument(
        "--brokers",
        default="shareq",
        help="shareq, kafka (Apache Kafka 4.4 from the tests' jars: make kafka) or both, e.g. shareq,kafka",
    )
    parser.add_argument("--broker-cpus", help="CPUs the broker runs on, e.g. 0 (default: all)")
    parser.add_argument("--client-cpus", help="CPUs the consumer processes run on, e.g. 1 (default: all)")
    parser.add_argument(
        "--broker-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a further broker config for every broker started (repeatable)",
    )
    args = parser.parse_args()
    EXTRA_CONFIGS.update(pair.split("=", 1) for pair in args.broker_config)
    broker_cpus, client_cpus = parse_cpus(args.broker_cpus), parse_cpus(args.client_cpus)
    n = args.records - args.records % (PARTITIONS * 10)
    names = ["0%", "dlq", *(["archive"] if args.control else [])]
    rejected = n // 10
    print(
        f"{n} records x 100 B, {PARTITIONS} partitions, "
        f"{args.consumers} librdkafka ShareConsumers (explicit acks), "
        f"in-flight window {args.record_locks or 2000}, broker on CPUs {args.broker_cpus or 'all'}, "
        f"consumers on CPUs {args.client_cpus or 'all'}, load average {os.getloadavg()[0]:.1f}"
    )

    def line(name: str, figures: tuple[float, float, float, float], base: float) -> str:
        elapsed, _, broker_cpu, clients_cpu = figures
        ratio = "" if name == "0%" else f" ({base / elapsed:.2f}x of 0%)"
        return (
            f"  {PHASES[name].name + ':':42s}{n / elapsed:9.0f} rec/s consume+ack{ratio:14s}  "
            f"broker CPU {broker_cpu / n * 1e6:4.2f} us/rec, "
            f"consumers' CPU {clients_cpu / n * 1e6:4.2f} us/rec"
        )

    kinds = args.brokers.split(",")
    ratios: dict[str, list[float]] = {kind: [] for kind in kinds}
    writes: dict[str, list[float]] = {kind: [] for kind in kinds}
    cpu: dict[str, dict[str, list[float]]] = {kind: {name: [] for name in names} for kind in kinds}
    for r in range(args.rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for kind in kinds:
            results = one_round(
                order, n, args.consumers, args.record_locks, broker_cpus, client_cpus, kind=kind
            )
            base = results["0%"][0]
            print(f"round {r + 1}, {kind} ({' -> '.join(order)}), load average {os.getloadavg()[0]:.1f}:")
            for name in names:
                print(line(name, results[name], base))
                cpu[kind][name].append(results[name][2] / n * 1e6)
            until_dlq = results["dlq"][1]
            print(
                f"  {'DLQ writes:':42s}{rejected / until_dlq:9.0f} rec/s "
                f"({rejected} dead letters in {until_dlq:.2f} s)"
            )
            ratios[kind].append(base / results["dlq"][0])
            writes[kind].append(rejected / until_dlq)
    if args.rounds > 1:
        for kind in kinds:
            print(
                f"{kind}, median of {args.rounds} rounds: 10% into a DLQ / 0% = "
                f"{statistics.median(ratios[kind]):.2f}x "
                f"(target >= 0.8; rounds {', '.join(f'{x:.2f}' for x in ratios[kind])}), "
                + ", ".join(
                    f"broker CPU {name} {statistics.median(v):.2f} us/rec" for name, v in cpu[kind].items()
                )
                + f", DLQ writes {statistics.median(writes[kind]):.0f} rec/s"
            )


if __name__ == "__main__":
    main()
