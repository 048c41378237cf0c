"""Share consumption with 10% of records rejected into a dead-letter queue, against none rejected.

    PYTHONPATH=src python bench/dlq.py [--records 200000] [--consumers 4] [--rounds 3] [--control]

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
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass
from multiprocessing.sharedctypes import Synchronized
from pathlib import Path

import psutil

import broker_process
from broker_process import free_port

TOPIC = "bench"
DLQ = "dlq.bench"
PARTITIONS = 4


def start_broker(data_dir: Path, port: int, record_locks: int | None = None) -> subprocess.Popen[str]:
    pairs = [
        "group.share.auto.offset.reset=earliest",
        "errors.deadletterqueue.auto.create.topics.enable=true",
    ]
    if record_locks is not None:
        pairs += [
            f"group.share.max.partition.max.record.locks={record_locks}",
            f"group.share.partition.max.record.locks={record_locks}",
        ]
    profile = os.environ.get("DLQ_PROFILE") or None
    return broker_process.start_broker(data_dir, port, configs=pairs, profile=profile)


def produce(bootstrap: str, n: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 10000})
    payload = b"x" * 100
    for i in range(n):
        while True:
            try:
                producer.produce(TOPIC, value=payload, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(60) == 0


def consumer_process(
    bootstrap: str,
    group: str,
    reject_every: int,
    ready: Synchronized[int],
    start: Synchronized[int],
    done: Synchronized[int],
    total: int,
    out: mp.Queue[tuple[int, float, float, float]],
) -> None:
    from confluent_kafka import AcknowledgeType, ShareConsumer

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


def cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


def phase(
    bootstrap: str,
    broker: psutil.Process,
    group: str,
    reject_every: int,
    n: int,
    consumers: int,
    dlq: bool = True,
) -> tuple[float, float, float, float]:
    """(consume+ack seconds, seconds until the DLQ holds every rejected record, broker CPU seconds
    over the consume+ack time, the consumer processes' CPU seconds)."""
    if reject_every and dlq:
        from shareq.client import Admin, ConfigResource, ResourceType

        with Admin(bootstrap) as admin:
            admin.alter_configs(
                ConfigResource(ResourceType.GROUP, group), {"errors.deadletterqueue.topic.name": DLQ}
            )
    ready, start, done = mp.Value("i", 0), mp.Value("i", 0), mp.Value("i", 0)
    out: mp.Queue[tuple[int, float, float, float]] = mp.Queue()
    procs = [
        mp.Process(target=consumer_process, args=(bootstrap, group, reject_every, ready, start, done, n, out))
        for _ in range(consumers)
    ]
    for p in procs:
        p.start()
    while ready.value < consumers:
        time.sleep(0.01)
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
    names: list[str], n: int, consumers: int, record_locks: int | None
) -> dict[str, tuple[float, float, float, float]]:
    """One fresh broker, the records produced once, then each phase in ``names``' order."""
    data = Path(tempfile.mkdtemp(prefix="dlq-bench-"))
    port = free_port()
    bootstrap = f"127.0.0.1:{port}"
    broker = start_broker(data, port, record_locks)
    proc = psutil.Process(broker.pid)
    out: dict[str, tuple[float, float, float, float]] = {}
    try:
        from shareq.client import Admin

        with Admin(bootstrap) as admin:
            admin.create_topic(TOPIC, PARTITIONS)
        produce(bootstrap, n)
        for name in names:
            ph = PHASES[name]
            out[name] = phase(bootstrap, proc, ph.group, ph.reject_every, n, consumers, dlq=ph.dlq)
    finally:
        broker.terminate()
        try:
            broker.wait(30)
        except subprocess.TimeoutExpired:
            broker.kill()
            broker.wait(10)
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
    args = parser.parse_args()
    n = args.records - args.records % (PARTITIONS * 10)
    names = ["0%", "dlq", *(["archive"] if args.control else [])]
    rejected = n // 10
    print(
        f"{n} records x 100 B, {PARTITIONS} partitions, "
        f"{args.consumers} librdkafka ShareConsumers (explicit acks), "
        f"in-flight window {args.record_locks or 2000}, load average {os.getloadavg()[0]:.1f}"
    )

    def line(name: str, figures: tuple[float, float, float, float], base: float) -> str:
        elapsed, _, broker_cpu, clients_cpu = figures
        ratio = "" if name == "0%" else f" ({base / elapsed:.2f}x of 0%)"
        return (
            f"  {PHASES[name].name + ':':42s}{n / elapsed:9.0f} rec/s consume+ack{ratio:14s}  "
            f"broker CPU {broker_cpu / n * 1e6:4.2f} us/rec, "
            f"consumers' CPU {clients_cpu / n * 1e6:4.2f} us/rec"
        )

    ratios: list[float] = []
    writes: list[float] = []
    cpu: dict[str, list[float]] = {name: [] for name in names}
    for r in range(args.rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        results = one_round(order, n, args.consumers, args.record_locks)
        base = results["0%"][0]
        print(f"round {r + 1} ({' -> '.join(order)}), load average {os.getloadavg()[0]:.1f}:")
        for name in names:
            print(line(name, results[name], base))
            cpu[name].append(results[name][2] / n * 1e6)
        until_dlq = results["dlq"][1]
        print(
            f"  {'DLQ writes:':42s}{rejected / until_dlq:9.0f} rec/s "
            f"({rejected} dead letters in {until_dlq:.2f} s)"
        )
        ratios.append(base / results["dlq"][0])
        writes.append(rejected / until_dlq)
    if args.rounds > 1:
        print(
            f"median of {args.rounds} rounds: 10% into a DLQ / 0% = {statistics.median(ratios):.2f}x "
            f"(target >= 0.8; rounds {', '.join(f'{x:.2f}' for x in ratios)}), "
            + ", ".join(f"broker CPU {name} {statistics.median(v):.2f} us/rec" for name, v in cpu.items())
            + f", DLQ writes {statistics.median(writes):.0f} rec/s"
        )


if __name__ == "__main__":
    main()
