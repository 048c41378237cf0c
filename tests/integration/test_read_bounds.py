"""A request's cost follows what it returns, never what the partition holds.

librdkafka's ShareConsumer asks for ``fetch.max.bytes`` (50 MiB) on every ShareFetch and its
Consumer for ``max.partition.fetch.bytes`` on every Fetch. On a partition holding far more than one
fetch's worth, the bytes the broker reads from the log must stay within a small constant of the
record bytes its responses carry (the broker's per-api I/O counters say both).
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from share_consumers import FAST, SHARE_BROKER, poll_values, share_consumer

from shareq.embedded import EmbeddedBroker
from shareq.log.records import Record, encode_batch
from shareq.server.io_stats import ApiIo

pytestmark = [pytest.mark.integration]

FETCH = 1
SHARE_FETCH = 78
SLACK = 64 * 1024  # one index interval plus a batch, read beyond what is handed out at most


def fill(broker: EmbeddedBroker, topic: str, batches: int, per_batch: int) -> int:
    """Append ``batches`` batches of ``per_batch`` 100-byte records; returns the bytes appended."""
    broker.call(broker.broker.create_topic, topic, 1)
    partition = broker.broker.partition(topic, 0)
    assert partition is not None
    batch = encode_batch([Record(value=bytes([i % 251]) * 100) for i in range(per_batch)])
    now = int(time.time() * 1000)

    def append_all() -> None:
        for _ in range(batches):
            partition.log.append(batch, now_ms=now)

    broker.call(append_all)
    return batches * len(batch)


def io_of(broker: EmbeddedBroker, api: int) -> ApiIo:
    return broker.call(lambda: ApiIo(**broker.broker.io.snapshot().get(api, {})))


@pytest.fixture
def broker(tmp_path: Any) -> Any:
    with EmbeddedBroker(tmp_path / "data", config=SHARE_BROKER) as embedded:
        yield embedded


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("per_batch", "label"), [(50, "small batches"), (5_000, "batches over the window")])
def test_share_fetch_reads_what_it_hands_out(broker: EmbeddedBroker, per_batch: int, label: str) -> None:
    held = fill(broker, "big", batches=20_000 // per_batch * 10, per_batch=per_batch)
    assert held > 15 * 1024 * 1024  # far more than the 2,000-record window or one fetch's records
    consumer = share_consumer(broker.bootstrap, "g", ["big"])
    try:
        got = poll_values(consumer, lambda out: len(out) >= 20_000, timeout=40)
    finally:
        consumer.close()
    assert len(got) >= 20_000, label
    io = io_of(broker, SHARE_FETCH)
    assert io.records_delivered >= 20_000
    assert io.bytes_delivered > 0
    # every byte read is handed out, bar one index interval and batch per fetch that acquired
    assert io.bytes_read <= io.bytes_delivered + SLACK * io.requests, (io, label)
    assert io.bytes_read <= 1.5 * io.bytes_delivered + SLACK, (io, label)
    assert io.bytes_sent >= io.bytes_delivered


@pytest.mark.timeout(60)
def test_fetch_reads_what_it_returns(broker: EmbeddedBroker) -> None:
    held = fill(broker, "big", batches=400, per_batch=500)
    assert held > 15 * 1024 * 1024
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "unused", "enable.auto.commit": False, **FAST}
    )
    try:
        consumer.assign([TopicPartition("big", 0, 0)])
        seen = 0
        deadline = time.monotonic() + 40
        while seen < 100_000 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen += 1
    finally:
        consumer.close()
    assert seen >= 100_000
    io = io_of(broker, FETCH)
    assert io.bytes_delivered >= 100_000 * 100
    assert io.bytes_read <= io.bytes_delivered, io  # Fetch returns everything it read
    # librdkafka pre-fetches; the broker read only what it sent, however much the log holds
    assert io.bytes_read < held, io
