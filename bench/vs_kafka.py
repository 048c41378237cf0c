"""shareq against Apache Kafka 4.4 on the same box, with the same clients, one broker up at a time.

    PYTHONPATH=src python bench/vs_kafka.py [--sizes 400000,4000000,10000000] [--phases assign,share]

For each size and each broker (Kafka 4.4 from the project's pinned jars, started by the tests'
Kafka fixture with its defaults for one node; then ``shareq serve``), on a fresh broker:
produce N records of 100 B to 4 partitions (librdkafka), read them back with 4 librdkafka
Consumers by ``assign()`` (with the Fetch requests they sent and the bytes each brought, from
librdkafka's statistics), consume and acknowledge them with 4 librdkafka ShareConsumers
(implicit acknowledgement), again with Kafka's Java ShareConsumerPerformance (4 threads, its
default 1 MiB fetch size), and sample the acknowledgement round trip (our client's ShareAcknowledge,
answered once durable). Each line gives rec/s, broker CPU µs per record and the broker's peak RSS;
each size ends with shareq's ratios to Kafka. ``--phases`` runs only some of the phases after the
produce (assign, share, perf, ack; all by default).

Durability as configured: Kafka acknowledges a produce once the leader wrote it to the page cache
(one node, acks=all, no fsync until log.flush.interval), and a share acknowledgement once the share
coordinator appended it (also no fsync). shareq runs its defaults: produce written (unbuffered) to
the page cache, share acknowledgements fsynced in group-commit mode (stronger than Kafka's).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path

import psutil

from broker_process import free_port
from share_consume import peak_rss_mb, produce, run_phase, start_broker, stop_broker

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from kafka_harness import java_command, kafka_cluster

PARTITIONS = 4
PHASES = ("assign", "share", "perf", "ack")


@dataclass
class Figure:
    rate: float
    cpu_us: float


@dataclass
class Broker:
    name: str
    bootstrap: str
    pid: int  # the process whose CPU and RSS count as the broker's


@contextmanager
def kafka(directory: Path) -> Iterator[Broker]:
    with kafka_cluster(directory, nodes=1) as cluster:
        node = cluster.nodes[0]
        assert node.process is not None
        yield Broker("kafka", cluster.bootstrap, node.process.pid)


@contextmanager
def shareq(directory: Path) -> Iterator[Broker]:
    port = free_port()
    proc = start_broker(directory, port)
    try:
        yield Broker("shareq", f"127.0.0.1:{port}", proc.pid)
    finally:
        stop_broker(proc)


def cpu_seconds(pid: int) -> float:
    """CPU of ``pid`` and its children (a JVM's threads are one process)."""
    return float(sum(psutil.Process(pid).cpu_times()[:2]))


def produce_measured(broker: Broker, topic: str, n: int) -> Figure:
    cpu = cpu_seconds(broker.pid)
    rate = produce(broker.bootstrap, n, topic=topic)
    return Figure(rate, (cpu_seconds(broker.pid) - cpu) / n * 1e6)


def set_earliest(broker: Broker, group: str) -> None:
    """The share group starts at the beginning of the log (a group config on both brokers)."""
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    entry = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[entry])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


def share_perf(broker: Broker, topic: str, n: int) -> Figure:
    """Kafka's ShareConsumerPerformance (Java share consumers, 4 threads) against ``broker``."""
    group = f"perf-{topic}"
    set_earliest(broker, group)
    command = java_command(
        "org.apache.kafka.tools.ShareConsumerPerformance",
        *("--bootstrap-server", broker.bootstrap, "--topic", topic, "--group", group),
        *("--num-records", str(n), "--threads", "4", "--timeout", "600000"),
    )
    cpu = cpu_seconds(broker.pid)
    result = subprocess.run(command, capture_output=True, text=True, timeout=900)
    cpu = cpu_seconds(broker.pid) - cpu
    # header: start.time, end.time, data.consumed.in.MB, MB.sec, nMsg.sec... ; take nMsg.sec
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    header = next((i for i, line in enumerate(lines) if "nMsg.sec" in line), None)
    if result.returncode != 0 or header is None or header + 1 >= len(lines):
        raise RuntimeError(f"ShareConsumerPerformance failed: {result.stdout[-400:]} {result.stderr[-400:]}")
    names = [c.strip() for c in lines[header].split(",")]
    values = [c.strip() for c in lines[header + 1].split(",")]
    rate = float(values[names.index("nMsg.sec")])
    consumed = float(values[names.index("data.consumed.in.nMsg")])
    if consumed < n:
        raise RuntimeError(f"ShareConsumerPerformance consumed {consumed:.0f} of {n}")
    return Figure(rate, cpu / n * 1e6)


def ack_latency(broker: Broker, topic: str, samples: int) -> tuple[float, float]:
    """p50/p99 ms of a ShareAcknowledge round trip (our client's ``commit()``)."""
    from shareq.client import ShareConsumer

    group = f"latency-{topic}"
    set_earliest(broker, group)
    latencies: list[float] = []
    with ShareConsumer(broker.bootstrap, group, topics=[topic], max_poll_records=50) as consumer:
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
    if not latencies:
        return float("nan"), float("nan")
    latencies.sort()
    return statistics.median(latencies), latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]


def measure(
    start: Callable[[Path], AbstractContextManager[Broker]], n: int, phases: tuple[str, ...] = PHASES
) -> dict[str, object]:
    out: dict[str, object] = {}
    directory = Path(tempfile.mkdtemp(prefix="vs-kafka-"))
    try:
        with start(directory / "data") as broker:
            topic = "bench"
            out["produce"] = produce_measured(broker, topic, n)
            if "assign" in phases:
                bootstrap, pid = broker.bootstrap, broker.pid
                assign = run_phase("assign", bootstrap, pid, n, PARTITIONS, "assign", topic=topic)
                out["fetch"] = Figure(assign.rate, assign.cpu_us)
                out["fetches"] = assign.fetches
            if "share" in phases:
                set_earliest(broker, "bench-share")
                share = run_phase("share", broker.bootstrap, broker.pid, n, 4, "implicit", topic=topic)
                out["share"] = Figure(share.rate, share.cpu_us)
            if "perf" in phases:
                out["share perf"] = share_perf(broker, topic, n)
            if "ack" in phases:
                out["ack ms"] = ack_latency(broker, topic, 200)
            out["rss"] = peak_rss_mb(broker.pid)
            out["name"] = broker.name
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="400000,4000000,10000000")
    parser.add_argument(
        "--phases",
        default=",".join(PHASES),
        help=f"the phases to run after the produce, comma-separated (of {', '.join(PHASES)})",
    )
    args = parser.parse_args()
    phases = tuple(p.strip() for p in args.phases.split(",") if p.strip())
    unknown = sorted(set(phases) - set(PHASES))
    if unknown:
        parser.error(f"unknown phase(s): {', '.join(unknown)}")
    for n in [int(s) for s in args.sizes.split(",")]:
        results = {name: measure(start, n, phases) for name, start in (("kafka", kafka), ("shareq", shareq))}
        print(f"\n{n:,} x 100 B on {PARTITIONS} partitions, one broker up at a time")
        print(f"{'':<34}{'Kafka 4.4':>22}{'shareq':>22}{'shareq/Kafka':>14}")
        for key, label in (
            ("produce", "produce (librdkafka)"),
            ("fetch", "fetch by assign() (librdkafka)"),
            ("share", "share consume+ack (librdkafka x4)"),
            ("share perf", "ShareConsumerPerformance (Java x4)"),
        ):
            if key not in results["kafka"]:
                continue
            k, s = results["kafka"][key], results["shareq"][key]
            assert isinstance(k, Figure) and isinstance(s, Figure)
            print(
                f"{label:<34}{k.rate:>12,.0f} rec/s {k.cpu_us:>4.2f}us"
                f"{s.rate:>12,.0f} rec/s {s.cpu_us:>4.2f}us{s.rate / k.rate:>8.2f}x rate"
            )
        if "assign" in phases:
            (kf, kb), (sf, sb) = results["kafka"]["fetches"], results["shareq"]["fetches"]  # type: ignore[misc]
            print(
                f"{'assign: Fetch requests, KB each':<34}{kf:>12,} x {kb / max(kf, 1) / 1024:<7,.0f}"
                f"{sf:>12,} x {sb / max(sf, 1) / 1024:<7,.0f}"
            )
        if "ack" in phases:
            kp50, kp99 = results["kafka"]["ack ms"]  # type: ignore[misc]
            sp50, sp99 = results["shareq"]["ack ms"]  # type: ignore[misc]
            print(
                f"{'ack round trip p50 / p99 ms':<34}{kp50:>12.2f} / {kp99:<7.2f}{sp50:>12.2f} / {sp99:<7.2f}"
            )
        print(
            f"{'broker peak RSS MB':<34}{results['kafka']['rss']:>22,.0f}{results['shareq']['rss']:>22,.0f}"
        )
        print("(µs = broker CPU per record; Kafka's share acks are not fsynced, shareq's are: see --help)")


if __name__ == "__main__":
    main()
