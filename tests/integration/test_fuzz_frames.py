"""Fuzzed frames against a real broker while a producer and a share consumer work beside them.

The default suite sends ``SHAREQ_FUZZ_FRAMES`` frames (10,000); ``make fuzz`` sends 1,000,000.
``SHAREQ_FUZZ_SEED`` picks the seed (the same seed sends the same frames). Passing means: the broker
process is alive, answers a probe at once, its memory stayed bounded, and the side workload lost
nothing (every record produced with acks=all was delivered to the share consumer)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
from broker_harness import BrokerProcess
from confluent_kafka import Producer, ShareConsumer
from share_consumers import FAST, SHARE_BROKER, as_pairs, create_topic

from shareq.client.connection import BrokerConnection

FRAMES = int(os.environ.get("SHAREQ_FUZZ_FRAMES", "10000"))
SEED = int(os.environ.get("SHAREQ_FUZZ_SEED", "17"))
RSS_GROWTH_LIMIT = 250 * 1024 * 1024

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120 + FRAMES // 1000)]


def test_fuzzed_frames_leave_the_broker_serving(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", *as_pairs(SHARE_BROKER), "group.initial.rebalance.delay.ms=0")
    broker.start()
    try:
        _run(broker)
    finally:
        broker.kill()


def _run(broker: BrokerProcess) -> None:
    assert broker.process is not None
    process = psutil.Process(broker.process.pid)
    create_topic(broker.bootstrap, "steady", 2)
    rss_before = process.memory_info().rss

    fuzzer = subprocess.Popen(
        [
            sys.executable,
            str(Path(__file__).with_name("frame_fuzzer.py")),
            broker.bootstrap,
            "--frames",
            str(FRAMES),
            "--seed",
            str(SEED),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    produced: list[bytes] = []
    failures: list[object] = []
    stop = threading.Event()

    def produce() -> None:
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 5, **FAST})
        i = 0
        while not stop.is_set():
            value = b"side-%d" % i
            producer.produce(
                "steady",
                value,
                on_delivery=lambda error, m: (failures if error else produced).append(error or m.value()),
            )
            producer.poll(0.02)
            i += 1
        producer.flush(30)

    producer_thread = threading.Thread(target=produce, daemon=True)
    producer_thread.start()
    consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": "side", **FAST})
    consumer.subscribe(["steady"])
    received: set[bytes] = set()
    try:
        while fuzzer.poll() is None:
            received.update(m.value() for m in consumer.poll(0.2) if m.error() is None)
        stop.set()
        producer_thread.join(60)
        deadline = time.monotonic() + 30
        while not set(produced) <= received and time.monotonic() < deadline:
            received.update(m.value() for m in consumer.poll(0.2) if m.error() is None)
    finally:
        consumer.close()
    out, err = fuzzer.communicate(timeout=10)
    assert fuzzer.returncode == 0, f"seed {SEED}: {err[-3000:]}"
    counts = json.loads(out.strip().splitlines()[-1])
    print(f"seed {SEED}: {counts}")
    assert counts["frames"] == FRAMES and len(counts["by_api"]) >= 50

    assert broker.process.poll() is None, f"seed {SEED}: the broker died: {broker.stderr_lines[-20:]}"
    started = time.monotonic()
    with BrokerConnection("127.0.0.1", broker.port, connect_timeout=5, request_timeout=5) as probe:
        assert probe.broker_versions
    assert time.monotonic() - started < 5.0
    assert not failures, failures[:5]
    assert produced and set(produced) <= received, f"seed {SEED}: {len(set(produced) - received)} lost"
    growth = process.memory_info().rss - rss_before
    print(f"seed {SEED}: {len(produced)} side records delivered, broker RSS grew {growth >> 20} MiB")
    assert growth < RSS_GROWTH_LIMIT, f"seed {SEED}: RSS grew {growth >> 20} MiB"
    internal = [line for line in broker.stderr_lines if "internal error" in line]
    assert not internal, f"seed {SEED}: {internal[:3]}"
    assert len(broker.stderr_lines) < 2_000  # warnings about the fuzzer are rate-limited
