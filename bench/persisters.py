"""The two share-state persisters side by side: ``share.persister=coordinator`` (state in
``__share_group_state``) against ``share.persister=in-log`` (SHARE_CHECKPOINT/SHARE_DELTA control
records in the share-partition's own partition).

    PYTHONPATH=src python bench/persisters.py [--records 200000] [--partitions 1000 --updates 500]
    PYTHONPATH=src python bench/persisters.py --quick        # a small run of every part

For each persister, in one run:

1. **Writes under 4 share consumers.** A fresh broker subprocess, a 4-partition topic, 4 librdkafka
   ShareConsumer processes (explicit acknowledgement, commit_sync every 20 records) started first,
   then N records of 100 B produced in batches of 50 while they consume. Printed: durable state
   writes per second (WriteShareGroupState calls over the clock), share-state bytes appended per
   acknowledged record, and the broker's CPU per record.
2. **Plain Fetch** on the same broker: a librdkafka Consumer by ``assign()`` reads the topic the
   group consumed (in-log: share state interleaved with the records) and a topic holding the same
   records that no share group touched; rec/s and broker CPU per record of each.
3. **Recovery**, in-process with no broker: P share-partitions (one group on each of P partitions)
   receive U writes each (one acknowledged offset per write, offset 0 left in flight so that the
   state stays fragmented; in-log, each write follows a 10-record user batch on its partition);
   then the time for a fresh persister's ``load()`` (the partition logs opened beforehand: the
   broker opens them either way), and, in-log, the same without the share snapshot files.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
import uuid
from multiprocessing.sharedctypes import Synchronized
from pathlib import Path

import psutil

import broker_process
from broker_process import cpu_seconds, free_port, produce_round_robin

TOPIC = "bench"
PLAIN = "plain"
PARTITIONS = 4
PERSISTERS = ("coordinator", "in-log")
ACK_EVERY = 20


def start_broker(data_dir: Path, port: int, http_port: int, persister: str) -> subprocess.Popen[str]:
    profile = os.environ.get("PERSISTERS_PROFILE")
    return broker_process.start_broker(
        data_dir,
        port,
        configs=("group.share.auto.offset.reset=earliest", f"share.persister={persister}"),
        args=("--http-port", str(http_port)),
        profile=f"{profile}.{persister}" if profile else None,
    )


def metric(http_port: int, name: str) -> float:
    body = urllib.request.urlopen(f"http://127.0.0.1:{http_port}/metrics", timeout=10).read().decode()
    for line in body.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def produce(bootstrap: str, topic: str, n: int) -> None:
    produce_round_robin(bootstrap, topic, n, PARTITIONS, {"linger.ms": 5, "batch.num.messages": 50})


def consumer_process(bootstrap: str, ready: Synchronized[int], done: Synchronized[int], total: int) -> None:
    from confluent_kafka import AcknowledgeType, ShareConsumer

    consumer = ShareConsumer(
        {"bootstrap.servers": bootstrap, "group.id": "bench", "share.acknowledgement.mode": "explicit"}
    )
    consumer.subscribe([TOPIC])
    consumer.poll(0.1)
    with ready.get_lock():
        ready.value += 1
    idle_since = time.monotonic()
    while done.value < total:
        messages = consumer.poll(0.2)
        if not messages:
            if time.monotonic() - idle_since > 30:
                break
            continue
        idle_since = time.monotonic()
        for i, m in enumerate(messages, 1):
            consumer.acknowledge(m, AcknowledgeType.ACCEPT)
            if i % ACK_EVERY == 0 or i == len(messages):
                consumer.commit_sync()  # one ShareAcknowledge, answered once durable, per ACK_EVERY records
        with done.get_lock():
            done.value += len(messages)
    consumer.commit_sync()
    consumer.close()


def fetch_all(bootstrap: str, topic: str, expected: int) -> float:
    """Seconds for a Consumer by ``assign()`` to read ``expected`` records of ``topic``."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"fetch-{topic}", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got = 0
    began = time.monotonic()
    deadline = began + 300
    while got < expected and time.monotonic() < deadline:
        for m in consumer.consume(10000, 0.5):
            if m.error() is None:
                got += 1
    elapsed = time.monotonic() - began
    consumer.close()
    assert got == expected, (topic, got, expected)
    return elapsed


def wire_phase(persister: str, n: int, consumers: int) -> dict[str, float]:
    from shareq.client import Admin

    data = Path(tempfile.mkdtemp(prefix=f"bench-{persister}-"))
    port, http_port = free_port(), free_port()
    broker = start_broker(data, port, http_port, persister)
    bootstrap = f"127.0.0.1:{port}"
    proc = psutil.Process(broker.pid)
    try:
        with Admin(bootstrap) as admin:
            admin.create_topic(TOPIC, PARTITIONS)
            admin.create_topic(PLAIN, PARTITIONS)
        ready, done = mp.Value("i", 0), mp.Value("i", 0)
        procs = [
            mp.Process(target=consumer_process, args=(bootstrap, ready, done, n)) for _ in range(consumers)
        ]
        for p in procs:
            p.start()
        while ready.value < consumers:
            time.sleep(0.01)
        writes0 = metric(http_port, "kafka_server_share_coordinator_metrics_write_total")
        bytes0 = metric(http_port, "shareq_share_state_log_bytes_total")
        cpu0 = cpu_seconds(proc)
        began = time.monotonic()
        produce(bootstrap, TOPIC, n)
        for p in procs:
            p.join(600)
        elapsed = time.monotonic() - began
        cpu = cpu_seconds(proc) - cpu0
        writes = metric(http_port, "kafka_server_share_coordinator_metrics_write_total") - writes0
        written = metric(http_port, "shareq_share_state_log_bytes_total") - bytes0
        acked = done.value
        produce(bootstrap, PLAIN, n)
        out = {
            "acked": acked,
            "elapsed": elapsed,
            "writes": writes,
            "writes_per_s": writes / elapsed,
            "bytes_per_ack": written / max(acked, 1),
            "cpu_us_per_rec": cpu / max(acked, 1) * 1e6,
        }
        spent = {PLAIN: [0.0, 0.0], TOPIC: [0.0, 0.0]}
        for round_ in range(4):  # alternating; the first round only warms the page cache
            for topic in (PLAIN, TOPIC):
                cpu0 = cpu_seconds(proc)
                seconds = fetch_all(bootstrap, topic, n)
                if round_:
                    spent[topic][0] += seconds
                    spent[topic][1] += cpu_seconds(proc) - cpu0
        for topic, (seconds, cpu) in spent.items():
            out[f"fetch_{topic}_rate"] = 3 * n / seconds
            out[f"fetch_{topic}_cpu_us"] = cpu / (3 * n) * 1e6
        return out
    finally:
        broker.send_signal(signal.SIGINT)  # a clean stop (and a profile, when asked for)
        try:
            broker.wait(30)
        except subprocess.TimeoutExpired:
            broker.kill()
            broker.wait()
        shutil.rmtree(data, ignore_errors=True)


# -- recovery -----------------------------------------------------------------------------------


async def build_state(persister_name: str, data: Path, partitions: int, updates: int) -> None:
    from shareq.log.records import Record, encode_batch
    from shareq.persister.builtin import BuiltinPersister, FlushMode
    from shareq.persister.in_log import InLogPersister
    from shareq.share.persister import SharePartitionKey, StateBatch, WriteStateParams

    logs = UserLogs(data, partitions)
    persister: BuiltinPersister | InLogPersister
    if persister_name == "in-log":
        persister = InLogPersister(logs.log_for, logs.list, flush_mode=FlushMode.NONE)
    else:
        persister = BuiltinPersister.in_directory(data / "state", flush_mode=FlushMode.NONE)
    await persister.load()
    keys = [SharePartitionKey(group_id="g", topic_id=logs.topic_id, partition=p) for p in range(partitions)]
    for key in keys:
        await persister.initialize_state(key, state_epoch=1, start_offset=0)
    batch = encode_batch([Record(key=None, value=b"x" * 100) for _ in range(10)])
    for u in range(1, updates + 1):
        writes = []
        for key in keys:
            log = logs.log_for(logs.topic_id, key.partition)
            assert log is not None
            log.append(batch, now_ms=0)
            offset = u * 10  # apart: every write adds a run
            writes.append(
                persister.write_state(
                    WriteStateParams(
                        key=key,
                        state_epoch=1,
                        leader_epoch=0,
                        start_offset=-1,
                        delivery_complete_count=-1,
                        state_batches=(
                            StateBatch(
                                first_offset=offset, last_offset=offset, delivery_state=2, delivery_count=1
                            ),
                        ),
                    )
                )
            )
        await asyncio.gather(*writes)
    await persister.close()
    logs.close()


class UserLogs:
    def __init__(self, data: Path, partitions: int) -> None:
        from shareq.log.partition_log import PartitionLog

        self.data = data
        self.partitions = partitions
        self.topic_id = uuid.UUID(int=1)
        self.logs: dict[int, PartitionLog] = {}

    def log_for(self, topic_id: uuid.UUID, index: int) -> object:
        from shareq.log.config import LogConfig
        from shareq.log.partition_log import PartitionLog

        if topic_id != self.topic_id or not 0 <= index < self.partitions:
            return None
        if index not in self.logs:
            config = LogConfig(
                segment_bytes=1024 * 1024, segment_ms=None, retention_ms=-1, retention_bytes=-1
            )
            self.logs[index] = PartitionLog.open(self.data / f"t-{index}", config, now_ms=0)
        return self.logs[index]

    def list(self) -> list[tuple[uuid.UUID, int]]:
        return [(self.topic_id, i) for i in range(self.partitions)]

    def close(self) -> None:
        for log in self.logs.values():
            log.close()
        self.logs.clear()


async def time_load(persister_name: str, data: Path, partitions: int) -> tuple[float, float]:
    """(seconds, CPU seconds) of a fresh persister's load; partition logs opened beforehand."""
    from shareq.persister.builtin import BuiltinPersister
    from shareq.persister.in_log import InLogPersister

    logs = UserLogs(data, partitions)
    for p in range(partitions):
        logs.log_for(logs.topic_id, p)
    persister: BuiltinPersister | InLogPersister
    if persister_name == "in-log":
        persister = InLogPersister(logs.log_for, logs.list)
    else:
        persister = BuiltinPersister.in_directory(data / "state")
    cpu0, began = time.process_time(), time.perf_counter()
    await persister.load()
    elapsed, cpu = time.perf_counter() - began, time.process_time() - cpu0
    await persister.close()
    logs.close()
    return elapsed, cpu


def recovery_phase(persister: str, partitions: int, updates: int) -> dict[str, float]:
    data = Path(tempfile.mkdtemp(prefix=f"bench-recovery-{persister}-"))
    try:
        began = time.perf_counter()
        asyncio.run(build_state(persister, data, partitions, updates))
        built = time.perf_counter() - began
        out = {"build_s": built}
        out["load_s"], out["load_cpu_s"] = asyncio.run(time_load(persister, data, partitions))
        if persister == "coordinator":
            out["state_bytes"] = sum(f.stat().st_size for f in (data / "state").rglob("*.log"))
        else:
            for p in range(partitions):
                (data / f"t-{p}" / "share-state.snapshot").unlink(missing_ok=True)
            out["scan_load_s"], out["scan_load_cpu_s"] = asyncio.run(time_load(persister, data, partitions))
        return out
    finally:
        shutil.rmtree(data, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--consumers", type=int, default=4)
    parser.add_argument("--partitions", type=int, default=1000, help="share-partitions for the recovery part")
    parser.add_argument("--updates", type=int, default=500, help="writes per share-partition")
    parser.add_argument("--quick", action="store_true", help="20k records, 100 partitions x 100 updates")
    parser.add_argument("--skip-wire", action="store_true")
    parser.add_argument("--skip-recovery", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.records, args.partitions, args.updates = 20_000, 100, 100
    wire = {} if args.skip_wire else {p: wire_phase(p, args.records, args.consumers) for p in PERSISTERS}
    recovery = (
        {}
        if args.skip_recovery
        else {p: recovery_phase(p, args.partitions, args.updates) for p in PERSISTERS}
    )
    print(
        f"load average {os.getloadavg()[0]:.1f}; {args.records} records of 100 B, "
        f"{args.consumers} share consumers"
    )
    if wire:
        print(
            f"{'persister':<12} {'writes/s':>9} {'B/acked rec':>11} {'broker us/rec':>13} "
            f"{'fetch w/ state rec/s':>20} {'us/rec':>7} {'fetch plain rec/s':>17} {'us/rec':>7} {'ratio':>6}"
        )
        for p, r in wire.items():
            print(
                f"{p:<12} {r['writes_per_s']:>9,.0f} {r['bytes_per_ack']:>11.1f} "
                f"{r['cpu_us_per_rec']:>13.1f} {r['fetch_bench_rate']:>20,.0f} "
                f"{r['fetch_bench_cpu_us']:>7.2f} {r['fetch_plain_rate']:>17,.0f} "
                f"{r['fetch_plain_cpu_us']:>7.2f} {r['fetch_bench_rate'] / r['fetch_plain_rate']:>6.2f}"
            )
        for p, r in wire.items():
            print(
                f"{p:<12} {r['acked']:,.0f} records acknowledged in {r['elapsed']:.1f} s, "
                f"{r['writes']:,.0f} writes ({r['acked'] / max(r['writes'], 1):.0f} records per write)"
            )
        a, b = wire["in-log"], wire["coordinator"]
        print(
            "in-log/coordinator: Fetch of the consumed topic "
            f"{a['fetch_bench_rate'] / b['fetch_bench_rate']:.2f}x rec/s at "
            f"{a['fetch_bench_cpu_us'] / b['fetch_bench_cpu_us']:.2f}x broker CPU per record"
        )
        print(
            f"in-log/coordinator: writes/s {a['writes_per_s'] / b['writes_per_s']:.2f}x, "
            f"bytes per acked record {a['bytes_per_ack'] / b['bytes_per_ack']:.2f}x, "
            f"broker CPU per record {a['cpu_us_per_rec'] / b['cpu_us_per_rec']:.2f}x"
        )
    if recovery:
        print(f"recovery: {args.partitions} share-partitions x {args.updates} updates")
        for p, r in recovery.items():
            line = (
                f"{p:<12} load {r['load_s']:.2f} s ({r['load_cpu_s']:.2f} s CPU), "
                f"built in {r['build_s']:.1f} s"
            )
            if "scan_load_s" in r:
                line += (
                    f"; without snapshot files {r['scan_load_s']:.2f} s ({r['scan_load_cpu_s']:.2f} s CPU)"
                )
            print(line)


if __name__ == "__main__":
    main()
