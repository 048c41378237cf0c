"""The shareq broker as a subprocess for the benchmarks: a free loopback port, and ``shareq serve``
started and waited for, so that each benchmark states only what its broker differs in."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

READY = "shareq listening on "


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def parse_cpus(setting: str | None) -> set[int] | None:
    """``all`` or nothing (None: no pinning), or a CPU list such as ``1``, ``0,2`` or ``0-1``."""
    if setting is None or setting == "all":
        return None
    cpus: set[int] = set()
    for part in setting.split(","):
        first, _, last = part.partition("-")
        cpus.update(range(int(first), int(last or first) + 1))
    return cpus


def start_broker(
    data_dir: Path | str,
    port: int,
    *,
    configs: Sequence[str] = (),
    args: Sequence[str] = (),
    profile: str | None = None,
    cpus: set[int] | None = None,
    log_level: str | None = "WARNING",
    quiet: bool = False,
    loop_costs: bool = False,
) -> subprocess.Popen[str]:
    """``shareq serve`` on ``port``, returned once it listens.

    ``configs`` are ``key=value`` broker settings, ``args`` further ``serve`` options. With
    ``profile`` the broker runs under cProfile writing there; with ``cpus`` it runs on those CPUs
    only (its threads inherit that); ``quiet`` drops its stderr; ``loop_costs`` runs it through
    ``loop_costs.py`` (its loop's CPU per callback, printed on SIGUSR2).
    """
    command = [sys.executable, *(["-m", "cProfile", "-o", profile] if profile else [])]
    command += [str(Path(__file__).with_name("loop_costs.py"))] if loop_costs else ["-m", "shareq"]
    command += ["serve", "--data-dir", str(data_dir), "--port", str(port), *args]
    for pair in configs:
        command += ["--config", pair]
    if log_level is not None:
        command += ["--log-level", log_level]
    pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
    proc = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL if quiet else None,
        text=True,
        env=os.environ.copy(),
        preexec_fn=pin,
    )
    assert proc.stdout is not None
    while True:
        line = proc.stdout.readline()
        if line.startswith(READY):
            return proc
        if not line:
            proc.kill()
            proc.wait()
            raise RuntimeError("broker did not start")


def settle_assignment(
    bootstrap: str, group: str, topic: str, consumers: int, partitions: int, timeout: float = 30.0
) -> None:
    """Wait until every consumer is a member and the partitions are spread evenly among them.

    librdkafka's members join in the background on ``subscribe``, one after another, so the first
    assignments are transitional ones (shareq: some members holding two partitions and others
    none, until the members' next heartbeat, 5 s by default; Kafka: nothing assigned until then).
    A phase of a second or two would run its whole course on them."""
    import time

    from shareq.client import Admin, KafkaError

    deadline = time.monotonic() + timeout
    with Admin(bootstrap) as admin:
        while time.monotonic() < deadline:
            try:
                members = admin.describe_share_group(group).members
            except KafkaError:
                members = ()
            sizes = [len(m.assignment.get(topic, ())) for m in members]
            held = {p for m in members for p in m.assignment.get(topic, ())}
            if len(members) == consumers and held == set(range(partitions)) and max(sizes) - min(sizes) <= 1:
                return
            time.sleep(0.1)
    print(f"  (the assignment of {group} did not settle within {timeout:.0f} s: timing anyway)")


def cpu_seconds(process: Any) -> float:
    """User and system CPU seconds of a ``psutil.Process``."""
    times = process.cpu_times()
    return float(times.user + times.system)


def produce_round_robin(
    bootstrap: str,
    topic: str,
    n: int,
    partitions: int,
    config: dict[str, object],
    flush_s: float = 120,
    payload: bytes = b"x" * 100,
) -> None:
    """``n`` records of ``payload`` (100 B) to ``topic``, spread round-robin over its partitions
    (librdkafka with ``config``), waiting out a full queue; every record acknowledged before it returns."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, **config})
    for i in range(n):
        while True:
            try:
                producer.produce(topic, value=payload, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(flush_s) == 0


def stop_broker(proc: subprocess.Popen[str], grace_s: float = 30) -> None:
    """SIGTERM, then SIGKILL if the broker has not exited within ``grace_s``."""
    proc.terminate()
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
