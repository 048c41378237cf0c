"""Many clients at once: 1,000 concurrent connections and 200 share consumers in one group on 20
partitions, with an unrelated producer's latency measured idle and under that load.

One broker subprocess (then, with ``--kafka``, a one-node Kafka 4.4 under the same load, the
reference). Phases:
1. idle: a librdkafka producer (acks=all, linger 0) sends one record at a time to its own topic;
   its p50/p99 delivery latency is the baseline;
2. load: ``--connections`` raw sockets connect, each asks ApiVersions, then Metadata every
   ``--metadata-interval`` s (alone for ``--swarm-seconds`` first: the broker's CPU per
   Metadata request); ``--consumers`` librdkafka ShareConsumers (in ``--processes``
   child processes) join one share group on a ``--partitions``-partition topic holding
   ``--records`` records and consume them (implicit acknowledgement); meanwhile the producer
   measures again;
3. check: every record was delivered (distinct values counted across the consumers) and
   acknowledged (the group's start offset reached the end of every partition).

Prints the two latency distributions side by side and their ratio (target: p99 under load <= 5x idle).

    PYTHONPATH=src python bench/connection_load.py
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import resource
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
from confluent_kafka import Producer

import broker_process
from shareq.client import Admin, ConfigResource, ResourceType, _codec

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from kafka_harness import kafka_cluster

# the broker settings the shareq run starts with (share group size, state partitions)
KAFKA_CONFIGS = {
    "group.share.max.size": "1000",
    "share.coordinator.state.topic.num.partitions": "5",
}

_CONSUMER = r"""
import json, sys, time
from confluent_kafka import ShareConsumer
bootstrap, topic, count, deadline = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
fast = {"socket.timeout.ms": 10000, "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 500}
config = {"bootstrap.servers": bootstrap, "group.id": "load", **fast}
consumers = [ShareConsumer(config) for _ in range(count)]
for c in consumers:
    c.subscribe([topic])
print("ready", flush=True)
seen = []
stop_at = time.time() + deadline
done_file = sys.argv[5]
import os
while time.time() < stop_at and not os.path.exists(done_file):
    for c in consumers:
        for m in c.poll(0.01):
            if m.error() is None:
                seen.append(m.value().decode())
for c in consumers:
    c.poll(0)  # the acknowledgements of the last records ride on this
for c in consumers:
    c.close()
print(json.dumps(seen), flush=True)
"""


def start_broker(data_dir: Path) -> tuple[subprocess.Popen[str], str]:
    port = broker_process.free_port()
    configs = (
        "group.share.auto.offset.reset=earliest",
        "group.share.max.size=1000",
        "share.coordinator.state.topic.num.partitions=5",
    )
    return broker_process.start_broker(data_dir, port, configs=configs, quiet=True), f"127.0.0.1:{port}"


def latencies(bootstrap: str, topic: str, count: int, interval: float, warm_up: int = 0) -> list[float]:
    """Delivery latency (ms) of ``count`` single records, one in flight at a time, after ``warm_up``
    unmeasured ones (a JVM broker compiles its produce path during the first few hundred)."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    producer.produce(topic, b"warm-up")
    producer.flush(30)
    out: list[float] = []
    for i in range(-warm_up, count):
        done = threading.Event()
        started = time.perf_counter()
        producer.produce(topic, b"probe-%d" % i, on_delivery=lambda _e, _m, done=done: done.set())
        while not done.is_set():
            producer.poll(0.0005)
        if i >= 0:
            out.append((time.perf_counter() - started) * 1000)
        time.sleep(interval)
    producer.flush(10)
    return out


class ConnectionSwarm:
    """N raw connections: ApiVersions once, then Metadata for one topic every ``interval`` s.

    With ``groups`` = 1 all N ask at the same instant each interval (a lockstep burst, the
    hardest case for everything else on the broker); with more, the connections ask in that many
    groups at even phases of the interval, as independent clients would.

    The connections live in a process of their own: in this one, their Python loop would hold
    the GIL that the probe producer's delivery callbacks wait for, and the swarm's own cost
    would show up as broker latency.
    """

    def __init__(self, bootstrap: str, count: int, interval: float, topic: str, groups: int = 1) -> None:
        host, _, port = bootstrap.rpartition(":")
        versions = _codec.request_module(18, 0).ApiVersionsRequest()
        meta_module = _codec.request_module(3, 12)
        metadata = meta_module.MetadataRequest(
            topics=(meta_module.MetadataRequestTopic(topic_id=None, name=topic),),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        context = multiprocessing.get_context("spawn")
        self._requests = context.Value("q", 0)
        self._stop = context.Event()
        self._ready = context.Event()
        self._process = context.Process(
            target=_swarm,
            args=(
                (host, int(port)),
                count,
                interval,
                groups,
                _codec.encode_request(versions, 1, "swarm"),
                _codec.encode_request(metadata, 2, "swarm"),
                self._requests,
                self._stop,
                self._ready,
            ),
            daemon=True,
        )

    @property
    def requests(self) -> int:
        """Metadata requests answered so far."""
        return int(self._requests.value)

    def open(self) -> None:
        self._process.start()
        if not self._ready.wait(120):
            self._process.kill()
            raise RuntimeError("the swarm did not open its connections")

    def close(self) -> None:
        self._stop.set()
        self._process.join(30)
        if self._process.is_alive():
            self._process.kill()


def _swarm(
    address: tuple[str, int],
    count: int,
    interval: float,
    groups: int,
    hello: bytes,
    metadata: bytes,
    requests: Any,
    stop: Any,
    ready: Any,
) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 65536)), hard))
    sockets = [socket.create_connection(address, timeout=30) for _ in range(count)]
    for sock in sockets:
        sock.sendall(hello)
    for sock in sockets:
        _read_frame(sock)
    ready.set()
    step = interval / groups
    next_at = time.monotonic()
    while not stop.is_set():
        for group in range(groups):
            members = sockets[group::groups]
            for sock in members:
                sock.sendall(metadata)
            for sock in members:
                _read_frame(sock)
            with requests.get_lock():
                requests.value += len(members)
            next_at += step
            if stop.wait(max(0.0, next_at - time.monotonic())):
                break
    for sock in sockets:
        sock.close()


def _read_frame(sock: socket.socket) -> None:
    head = _recv(sock, 4)
    _recv(sock, struct.unpack(">i", head)[0])


def _recv(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("broker closed a swarm connection")
        buf += chunk
    return bytes(buf)


def swarm_cost(broker: psutil.Process, swarm: ConnectionSwarm, seconds: float) -> str:
    """The broker's CPU per Metadata request while only the swarm runs."""
    cpu, requests, started = sum(broker.cpu_times()[:2]), swarm.requests, time.monotonic()
    time.sleep(seconds)
    cpu, requests = sum(broker.cpu_times()[:2]) - cpu, swarm.requests - requests
    line = (
        f"swarm alone: {requests} Metadata requests in {time.monotonic() - started:.1f} s, "
        f"broker CPU {cpu / max(requests, 1) * 1e6:.0f} us per request"
    )
    print(line, flush=True)
    return line


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass
class Run:
    """What one broker showed under the load."""

    name: str
    idle: list[float]
    loaded: list[float]
    distinct: int
    redelivered: int
    acked: int
    drained_s: float
    requests: int
    rss_mib: int
    alone: str


def measure(name: str, bootstrap: str, broker_pid: int, tmp: Path, args: argparse.Namespace) -> Run:
    """The three phases against one running broker."""
    broker_ps = psutil.Process(broker_pid)
    with Admin(bootstrap) as admin:
        admin.create_topic("work", args.partitions)
        admin.create_topic("probe", 1)
        # Kafka's group config; shareq's broker starts with the same default
        admin.alter_configs(
            ConfigResource(ResourceType.GROUP, "load"), {"share.auto.offset.reset": "earliest"}
        )
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20})
    for i in range(args.records):
        while True:
            try:
                producer.produce("work", b"%d" % i, partition=i % args.partitions)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(60) == 0

    idle = latencies(bootstrap, "probe", args.probes, 0.005, warm_up=args.probes)
    print(f"{name} idle: p50 {statistics.median(idle):.2f} ms  p99 {pct(idle, 0.99):.2f} ms", flush=True)

    swarm = ConnectionSwarm(bootstrap, args.connections, args.metadata_interval, "probe", args.swarm_groups)
    opened = time.monotonic()
    swarm.open()
    print(f"{args.connections} connections open in {time.monotonic() - opened:.1f} s", flush=True)
    alone = swarm_cost(broker_ps, swarm, args.swarm_seconds)
    done_file = tmp / f"done-{name}"
    per = [
        args.consumers // args.processes + (i < args.consumers % args.processes)
        for i in range(args.processes)
    ]
    children = [
        subprocess.Popen(
            [sys.executable, "-c", _CONSUMER, bootstrap, "work", str(n), "600", str(done_file)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in per
    ]
    for child in children:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
    started = time.monotonic()
    loaded = latencies(bootstrap, "probe", args.probes, 0.005)
    connections = len(broker_ps.net_connections())
    print(
        f"{name} load: p50 {statistics.median(loaded):.2f} ms  p99 {pct(loaded, 0.99):.2f} ms "
        f"(broker holds {connections} connections)",
        flush=True,
    )

    with Admin(bootstrap) as admin:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            offsets = admin.describe_share_group_offsets("load")
            acked = sum(max(o.start_offset, 0) for o in offsets.values())
            if len(offsets) == args.partitions and acked >= args.records:
                break
            time.sleep(0.5)
    drained_s = time.monotonic() - started
    behind = {
        p: o.start_offset
        for (_t, p), o in sorted(offsets.items())
        if o.start_offset < args.records // args.partitions
    }
    if behind:
        print(f"partitions not fully acknowledged (start offset): {behind}", flush=True)
    done_file.touch()
    seen: list[str] = []
    for child in children:
        out, _ = child.communicate(timeout=120)
        seen.extend(json.loads(out.strip().splitlines()[-1]))
    requests = swarm.requests
    swarm.close()
    distinct = len(set(seen))
    return Run(
        name=name,
        idle=idle,
        loaded=loaded,
        distinct=distinct,
        redelivered=len(seen) - distinct,
        acked=acked,
        drained_s=drained_s,
        requests=requests,
        rss_mib=broker_ps.memory_info().rss >> 20,
        alone=alone,
    )


def report(run: Run, args: argparse.Namespace) -> float:
    """Prints one broker's figures; returns its p99 ratio."""
    print()
    print(f"{run.name:<28}{'idle':>12}{'under load':>14}{'ratio':>8}")
    for label, q in (("producer p50 latency (ms)", 0.5), ("producer p99 latency (ms)", 0.99)):
        a, b = pct(run.idle, q), pct(run.loaded, q)
        print(f"{label:<28}{a:>12.2f}{b:>14.2f}{b / a:>8.2f}")
    print(
        f"share group: {args.consumers} consumers in {args.processes} processes, {args.partitions} partitions"
    )
    print(
        f"  delivered {run.distinct}/{args.records} distinct records ({run.redelivered} redelivered), "
        f"acknowledged start offsets {run.acked}/{args.records}, drained in {run.drained_s:.1f} s"
    )
    print(
        f"  {args.connections} extra connections answered {run.requests} Metadata requests; "
        f"broker RSS {run.rss_mib} MiB"
    )
    print(f"  {run.alone}")
    print(f"  Metadata asked {'at once' if args.swarm_groups == 1 else f'in {args.swarm_groups} groups'}")
    return pct(run.loaded, 0.99) / pct(run.idle, 0.99)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--connections", type=int, default=1000)
    parser.add_argument("--consumers", type=int, default=200)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--partitions", type=int, default=20)
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--probes", type=int, default=400)
    parser.add_argument("--metadata-interval", type=float, default=1.0)
    parser.add_argument(
        "--swarm-seconds", type=float, default=4.0, help="swarm alone first (broker CPU per request)"
    )
    parser.add_argument(
        "--swarm-groups",
        type=int,
        default=1,
        help="1: every connection asks at once (a burst each interval); N: in N groups at even phases",
    )
    parser.add_argument(
        "--kafka", action="store_true", help="then the same load on a one-node Kafka 4.4 (the reference)"
    )
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 65536)), hard))

    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="shareq-load-") as tmp:
        broker, bootstrap = start_broker(Path(tmp) / "data")
        try:
            runs.append(measure("shareq", bootstrap, broker.pid, Path(tmp), args))
        finally:
            broker.terminate()
            broker.wait(timeout=60)
        if args.kafka:
            with kafka_cluster(Path(tmp) / "kafka", 1, KAFKA_CONFIGS) as cluster:
                process = cluster.nodes[0].process
                assert process is not None
                runs.append(measure("kafka", cluster.bootstrap, process.pid, Path(tmp), args))

    ratios = {run.name: report(run, args) for run in runs}
    print()
    if "kafka" in ratios:
        print(f"p99 under load / idle: shareq {ratios['shareq']:.2f}x, Kafka 4.4 {ratios['kafka']:.2f}x")
    ratio = ratios["shareq"]
    print(f"target p99 under load <= 5x idle: {'met' if ratio <= 5 else 'missed'} ({ratio:.2f}x)")
    shareq = runs[0]
    if shareq.distinct != args.records or shareq.acked < args.records:
        sys.exit("shareq: not every record was delivered and acknowledged")


if __name__ == "__main__":
    main()
