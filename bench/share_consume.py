"""Share consumption against plain consumption of the same topic, at several data sizes.

    PYTHONPATH=src python bench/share_consume.py [--sizes 400000,4000000,10000000] [--linger-ms 5,50]
                                                 [--broker-cpus "all;1"]

Every size runs once per producer ``linger.ms`` (default 5, librdkafka's own, and 50): the
producer's batching sets the log's batch sizes (printed as records per log batch), and leases
hand out whole batches, so it sets a share consumer's records per round trip; a librdkafka
ShareConsumer asks for ``max.poll.records`` = 500 and keeps one ShareFetch in flight.

For each size a fresh broker runs as a subprocess (``python -m shareq serve``, durable share state
in group-commit mode) and N records of 100 bytes are produced to a 4-partition topic. Then, on the
same broker and data, one phase after another, each with its own consumer *processes*:

* ``assign``: 4 librdkafka Consumers reading one partition each by ``assign()`` (the ceiling);
* ``share``: 4 librdkafka ShareConsumers, implicit acknowledgement (acks ride on the next fetch);
* ``share explicit``: 4 ShareConsumers acknowledging every record and sending a separate
  ShareAcknowledge (``commit_async``) after every poll;
* ``share x16``: 16 ShareConsumers on the 4 partitions, implicit acknowledgement.

A phase's clock starts when every consumer is connected and stops when the last one has its last
acknowledgement answered (``commit_sync``, which returns once the broker made it durable). Each
phase prints rec/s, its ratio to ``assign``, broker CPU µs per record (and how it splits: the
event loop's thread, user + system, and the other threads, which are the share-state fsync
threads, user + system), the broker's log bytes read
and response bytes sent against the record bytes delivered (the broker's per-api I/O counters,
printed on SIGUSR1), round trips and records per round trip; each size ends with the broker's peak
RSS. Then the peers run the same workload at the same size (Redis Streams, RabbitMQ quorum, via
bench/peers.py), or their recorded figures are printed when they are not installed.

``--loop-costs`` starts the broker through ``bench/loop_costs.py`` and prints, after each phase,
the event loop's CPU per round trip split by callback (task or callback name, calls per round
trip): where a ShareFetch's CPU goes, without a profiler's distortion.

``--broker-cpus`` runs everything once per CPU setting of the broker process (``all``, or CPUs
such as ``1`` or ``0-1``; its threads inherit it): on a small VM, keeping the broker's share-state
fsync threads on the CPU of its event loop makes each durable write's two thread hand-offs cheaper.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.sharedctypes import Synchronized
from pathlib import Path
from typing import Any

import psutil

import broker_process
import peers
from broker_process import free_port, parse_cpus

TOPIC = "bench"
PARTITIONS = 4
PEER_CONSUMERS = 4
FETCH, SHARE_FETCH, SHARE_ACKNOWLEDGE = "1", "78", "79"
LOOP_NS, LOOP_CALLS = "loop ns", "loop calls"  # io_counters' keys with loop_costs


def start_broker(
    data_dir: Path,
    port: int,
    profile: str | None = None,
    cpus: set[int] | None = None,
    loop_costs: bool = False,
) -> subprocess.Popen[str]:
    """The broker as a subprocess, on ``cpus`` only when given (its threads inherit that)."""
    return broker_process.start_broker(
        data_dir,
        port,
        configs=("group.share.auto.offset.reset=earliest",),
        profile=profile,
        cpus=cpus,
        loop_costs=loop_costs,
    )


def io_counters(broker: subprocess.Popen[str], loop_costs: bool = False) -> dict[str, dict[str, int]]:
    """The broker's per-api I/O counters (it prints them as one line on SIGUSR1); with
    ``loop_costs`` (a broker started through ``loop_costs.py``) also its loop's CPU ns and calls
    per callback, under ``LOOP_NS`` and ``LOOP_CALLS``."""
    counters: dict[str, dict[str, int]] = json.loads(_signalled_line(broker, signal.SIGUSR1, "io "))
    if loop_costs:
        totals = json.loads(_signalled_line(broker, signal.SIGUSR2, "loop "))
        counters[LOOP_NS] = {name: ns for name, (ns, _) in totals.items()}
        counters[LOOP_CALLS] = {name: calls for name, (_, calls) in totals.items()}
    return counters


def _signalled_line(broker: subprocess.Popen[str], signum: int, prefix: str) -> str:
    """Send ``signum`` to the broker and return the rest of the first output line with ``prefix``."""
    assert broker.stdout is not None
    broker.send_signal(signum)
    while True:
        line = broker.stdout.readline()
        if not line:
            raise RuntimeError("broker closed its output")
        if line.startswith(prefix):
            return line[len(prefix) :]


def describe_loop(phase: Phase, top: int = 12) -> str:
    """The loop's CPU per round trip by callback over ``phase`` (from ``loop_costs.py``)."""
    trips = max(fetch_io(phase).get("requests", 0), 1)
    costs = phase.io.get(LOOP_NS, {})
    calls = phase.io.get(LOOP_CALLS, {})
    total = sum(costs.values())
    lines = [f"    loop CPU per round trip {total / trips / 1000:,.0f} us, by callback:"]
    for name, ns in sorted(costs.items(), key=lambda item: -item[1])[:top]:
        lines.append(f"    {ns / trips / 1000:>8,.1f} us  {calls.get(name, 0) / trips:>6.2f} calls  {name}")
    return "\n".join(lines)


def create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    """CreateTopics through librdkafka's AdminClient (the same call against shareq and Kafka)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(30)
    deadline = time.monotonic() + 30
    while topic not in admin.list_topics(timeout=10).topics and time.monotonic() < deadline:
        time.sleep(0.1)


def produce(bootstrap: str, n: int, linger_ms: int = 5, topic: str = TOPIC) -> float:
    """Produce ``n`` records of 100 B round-robin over the partitions (librdkafka, acks=all); rec/s."""
    create_topic(bootstrap, topic)
    config: dict[str, object] = {"linger.ms": linger_ms, "batch.num.messages": 10_000, "acks": "all"}
    started = time.perf_counter()
    broker_process.produce_round_robin(bootstrap, topic, n, PARTITIONS, config, 300, os.urandom(100))
    return n / (time.perf_counter() - started)


def stop_broker(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()


def share_main(
    bootstrap: str,
    topic: str,
    group: str,
    explicit: bool,
    consumed: Synchronized[int],
    finished: Any,
    ready: Any,
    go: Any,
    stop: Any,
) -> None:
    from confluent_kafka import ShareConsumer

    config = {"bootstrap.servers": bootstrap, "group.id": group}
    if explicit:
        config["share.acknowledgement.mode"] = "explicit"
    consumer = ShareConsumer(config)
    consumer.subscribe([topic])
    ready.release()
    go.wait()
    while not stop.is_set():
        got = consumer.poll(0.05)
        if got:
            if explicit:
                for message in got:
                    consumer.acknowledge(message)
                consumer.commit_async()  # one ShareAcknowledge per poll
            with consumed.get_lock():
                consumed.value += len(got)
    consumer.commit_sync(30)  # the last acknowledgements, answered once durable
    with finished.get_lock():
        finished.value = max(finished.value, time.time())
    ready.release()
    consumer.close()


def assign_main(
    bootstrap: str,
    topic: str,
    partition: int,
    want: int,
    consumed: Synchronized[int],
    finished: Any,
    ready: Any,
    go: Any,
    stop: Any,
    fetches: Any = None,
) -> None:
    """Read ``want`` records of one partition by ``assign()``; with ``fetches`` (a shared array of
    two) also add the Fetch requests this consumer sent and the bytes it received."""
    from confluent_kafka import Consumer, TopicPartition

    stats: list[str] = []  # librdkafka's statistics: the fetch responses and bytes it received
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "assign",
            "enable.auto.commit": False,
            "statistics.interval.ms": 200,
            "stats_cb": stats.append,
        }
    )
    consumer.assign([TopicPartition(topic, partition, 0)])
    ready.release()
    go.wait()
    seen = 0
    while seen < want and not stop.is_set():
        for message in consumer.consume(10_000, 0.05):
            if message.error() is None:
                seen += 1
    with consumed.get_lock():
        consumed.value += seen
    with finished.get_lock():  # the read ends here, not after the statistics wait below
        finished.value = max(finished.value, time.time())
    if fetches is not None:
        consumer.poll(0.3)  # one more statistics report, covering the whole read
        brokers = json.loads(stats[-1])["brokers"].values() if stats else ()
        with fetches.get_lock():
            for broker in brokers:
                if broker["nodeid"] >= 0:  # not the bootstrap connection
                    fetches[0] += broker["req"].get("Fetch", 0)
                    fetches[1] += broker["rxbytes"]
    ready.release()
    consumer.close()


@dataclass
class Phase:
    name: str
    rate: float
    cpu_us: float
    io: dict[str, dict[str, int]]
    # broker CPU µs per record by thread: the event loop's user and system time, then the
    # other threads' (the share-state fsync threads) user and system time
    split: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)
    # assign phases: the consumers' Fetch requests and the bytes they received
    fetches: tuple[int, int] = (0, 0)


def thread_times(proc: psutil.Process) -> tuple[float, float, float, float]:
    """CPU seconds of ``proc``: its main thread (the event loop) user and system, then every
    other thread's user and system (threads that ended are not counted)."""
    loop_user = loop_sys = other_user = other_sys = 0.0
    for thread in proc.threads():
        if thread.id == proc.pid:
            loop_user, loop_sys = thread.user_time, thread.system_time
        else:
            other_user += thread.user_time
            other_sys += thread.system_time
    return loop_user, loop_sys, other_user, other_sys


def run_phase(
    name: str,
    bootstrap: str,
    pid: int,
    n: int,
    procs: int,
    kind: str,
    counters: Callable[[], dict[str, dict[str, int]]] = dict,
    topic: str = TOPIC,
) -> Phase:
    """Consume ``n`` records with ``procs`` processes (kind: assign, implicit or explicit); the
    rate, the CPU of process ``pid`` per record and the change in ``counters()`` over the phase."""
    ctx = mp.get_context("spawn")
    consumed = ctx.Value("q", 0)
    fetches = ctx.Array("q", 2)
    finished = ctx.Value("d", 0.0)
    ready = ctx.Semaphore(0)
    go, stop = ctx.Event(), ctx.Event()
    group = f"bench-{name.replace(' ', '-')}"
    processes = []
    for i in range(procs):
        if kind == "assign":
            share = n // PARTITIONS + (1 if i < n % PARTITIONS else 0)
            args: tuple[Any, ...] = (bootstrap, topic, i, share, consumed, finished, ready, go, stop, fetches)
            processes.append(ctx.Process(target=assign_main, args=args))
        else:
            args = (bootstrap, topic, group, kind == "explicit", consumed, finished, ready, go, stop)
            processes.append(ctx.Process(target=share_main, args=args))
    for p in processes:
        p.start()
    for _ in processes:
        ready.acquire(timeout=60)
    proc = psutil.Process(pid)
    before_io = counters()
    cpu_before = sum(proc.cpu_times()[:2])
    threads_before = thread_times(proc)
    started = time.time()
    go.set()
    deadline = time.monotonic() + 900
    while consumed.value < n and time.monotonic() < deadline and kind != "assign":
        time.sleep(0.002)
    if kind != "assign":
        stop.set()
    for _ in processes:
        ready.acquire(timeout=900)
    elapsed = float(finished.value) - started
    cpu = sum(proc.cpu_times()[:2]) - cpu_before
    threads_after = thread_times(proc)
    after_io = counters()
    stop.set()
    for p in processes:
        p.join(timeout=60)
    if consumed.value < n:
        raise RuntimeError(f"{name}: only {consumed.value} of {n} records consumed")
    delta = {
        api: {k: v - before_io.get(api, {}).get(k, 0) for k, v in counters.items()}
        for api, counters in after_io.items()
    }
    lu, ls, ou, os_ = ((b - a) / n * 1e6 for a, b in zip(threads_before, threads_after, strict=True))
    return Phase(name, n / elapsed, cpu / n * 1e6, delta, (lu, ls, ou, os_), (fetches[0], fetches[1]))


def peak_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def fetch_io(phase: Phase) -> dict[str, int]:
    """The phase's I/O counters of its round trips: Fetch for ``assign``, else ShareFetch."""
    return phase.io.get(FETCH if phase.name == "assign" else SHARE_FETCH, {})


def describe(phase: Phase, ceiling: float) -> str:
    io = fetch_io(phase)
    acks = phase.io.get(SHARE_ACKNOWLEDGE, {}).get("requests", 0)
    delivered = max(io.get("bytes_delivered", 0), 1)
    trips = max(io.get("requests", 0), 1)
    return (
        f"{phase.name:<15} {phase.rate:>11,.0f} rec/s  {phase.rate / ceiling:>5.2f}x  "
        f"{phase.cpu_us:>5.2f} us/rec (loop {phase.split[0]:.2f}+{phase.split[1]:.2f}, "
        f"threads {phase.split[2]:.2f}+{phase.split[3]:.2f})  "
        f"read {io.get('bytes_read', 0) / delivered:>5.2f}x  "
        f"sent {io.get('bytes_sent', 0) / delivered:>5.2f}x  "
        f"buffered {io.get('bytes_buffered', 0) / delivered:>4.2f}x"
        f"  {trips:>7,} fetches  {io.get('records_delivered', 0) / trips:>7,.0f} rec/fetch"
        + (f"  {acks:,} ShareAcknowledge" if acks else "")
    )


def records_per_batch(data_dir: Path, topic: str = TOPIC) -> float:
    """Mean records per log batch of ``topic``, from the segment files' batch headers: a share
    consumer's records per round trip follow it, since leases hand out whole batches."""
    from shareq.log.segment import H_LAST_OFFSET_DELTA, scan_headers

    batches = records = 0
    for segment in sorted(data_dir.glob(f"**/{topic}-*/*.log")):
        fd = os.open(segment, os.O_RDONLY)
        try:
            for _, header in scan_headers(fd, 0, os.fstat(fd).st_size):
                batches += 1
                records += header[H_LAST_OFFSET_DELTA] + 1
        finally:
            os.close(fd)
    return records / max(batches, 1)


def run_size(
    n: int,
    phases_wanted: list[str],
    profile: str | None,
    linger_ms: int,
    cpus: str = "all",
    loop_costs: bool = False,
) -> dict[str, Phase]:
    data_dir = Path(tempfile.mkdtemp(prefix="shareq-bench-"))
    port = free_port()
    bootstrap = f"127.0.0.1:{port}"
    broker = start_broker(data_dir, port, profile, parse_cpus(cpus), loop_costs)
    phases: dict[str, Phase] = {}
    try:
        rate = produce(bootstrap, n, linger_ms)
        per_batch = records_per_batch(data_dir)
        print(
            f"\n{n:,} x 100 B on {PARTITIONS} partitions, produced at {rate:,.0f} rec/s "
            f"(linger.ms {linger_ms}: {per_batch:,.0f} records per log batch; broker on CPUs {cpus})",
            flush=True,
        )
        plan = [
            ("assign", PARTITIONS, "assign"),
            ("share", 4, "implicit"),
            ("share explicit", 4, "explicit"),
            ("share x16", 16, "implicit"),
        ]
        for name, procs, kind in plan:
            if name not in phases_wanted and name != "assign":
                continue
            phases[name] = run_phase(
                name, bootstrap, broker.pid, n, procs, kind, lambda: io_counters(broker, loop_costs)
            )
            print(describe(phases[name], phases["assign"].rate), flush=True)
            if loop_costs:
                print(describe_loop(phases[name]), flush=True)
        print(f"broker peak RSS {peak_rss_mb(broker.pid):,.0f} MB")
    finally:
        stop_broker(broker)
        shutil.rmtree(data_dir, ignore_errors=True)
    return phases


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="400000,4000000,10000000")
    parser.add_argument(
        "--peers",
        choices=["auto", "measure", "recorded", "none"],
        default="auto",
        help="auto: measure the peers when installed, else print RECORDED figures",
    )
    parser.add_argument("--gate-max-wait", type=float, default=20.0)
    parser.add_argument("--phases", default="share,share explicit,share x16", help="besides assign")
    parser.add_argument(
        "--linger-ms",
        default="5,50",
        help="producer linger.ms values, one run of every size each (they set the log's batch sizes, "
        "and so a share consumer's records per round trip)",
    )
    parser.add_argument("--profile", metavar="FILE", help="run the broker under cProfile, stats to FILE")
    parser.add_argument(
        "--loop-costs",
        action="store_true",
        help="run the broker through loop_costs.py; print each phase's loop CPU per round trip by callback",
    )
    parser.add_argument(
        "--broker-cpus",
        default="all",
        help="CPU settings of the broker, separated by ';', one run of every size each: "
        "'all' (not pinned) or CPUs such as '1' or '0-1'",
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    lingers = [int(v) for v in args.linger_ms.split(",")]
    settings = args.broker_cpus.split(";")
    results: dict[tuple[str, int, int], dict[str, Phase]] = {}
    for cpus in settings:
        for linger_ms in lingers:
            for n in sizes:
                peers.quiet_gate(sys.executable, args.gate_max_wait)
                phases = args.phases.split(",")
                results[cpus, linger_ms, n] = run_size(
                    n, phases, args.profile, linger_ms, cpus, args.loop_costs
                )
    for cpus in settings:
        for linger_ms in lingers:
            print(
                f"\nlinger.ms {linger_ms}, broker on CPUs {cpus}: rate against the smallest size "
                "(flat in N means ~1.0):"
            )
            base = results[cpus, linger_ms, sizes[0]]
            for n in sizes:
                cells = [
                    f"{name} {results[cpus, linger_ms, n][name].rate / base[name].rate:.2f}" for name in base
                ]
                print(f"  {n:>11,}: " + ", ".join(cells))
    if args.peers != "none":
        for n in sizes:
            print(f"\npeers at {n:,} records (shareq: linger.ms {lingers[0]}, broker on CPUs {settings[0]}):")
            figures = peers.peer_figures(args.peers, n, PEER_CONSUMERS, args.gate_max_wait)
            peers.print_comparison({4: results[settings[0], lingers[0], n]["share"].rate}, figures)


if __name__ == "__main__":
    main()
