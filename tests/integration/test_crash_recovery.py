"""Durability: SIGKILL mid-load loses nothing acknowledged; a torn segment recovers to whole batches."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from broker_harness import FAST_FAILURE, BrokerProcess
from confluent_kafka import Consumer, Producer, TopicPartition

pytestmark = [pytest.mark.integration]


def read_partition(
    bootstrap: str, topic: str, partition: int, until_offset: int
) -> dict[int, tuple[bytes, bytes]]:
    """Every record from offset 0 up to ``until_offset`` (exclusive), keyed by offset."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "assign-only",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
            "socket.timeout.ms": 5000,
        }
    )
    consumer.assign([TopicPartition(topic, partition, 0)])
    found: dict[int, tuple[bytes, bytes]] = {}
    deadline = time.monotonic() + 30
    try:
        while len(found) < until_offset:
            assert time.monotonic() < deadline, f"stuck after {len(found)} of {until_offset} records"
            # consume() waits for num_messages or the timeout, whichever comes first.
            for message in consumer.consume(num_messages=until_offset - len(found), timeout=0.5):
                assert message.error() is None, message.error()
                found[message.offset()] = (message.key(), message.value())
    finally:
        consumer.close()
    return found


def high_watermark(bootstrap: str, topic: str, partition: int) -> tuple[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks", "socket.timeout.ms": 5000})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        return int(low), int(high)
    finally:
        consumer.close()


@pytest.mark.timeout(120)
def test_sigkill_mid_load_keeps_every_acknowledged_record(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", "log.segment.bytes=200000")
    broker.start()
    topic = "durable"
    acked: dict[int, tuple[bytes, bytes]] = {}
    lock = threading.Lock()
    stop = threading.Event()

    def load() -> None:
        producer = Producer(
            {
                "bootstrap.servers": broker.bootstrap,
                **FAST_FAILURE,
                "message.timeout.ms": 4000,
                "linger.ms": 2,
                "enable.idempotence": True,
            }
        )

        def on_delivery(err: object, msg: object) -> None:
            if err is None:
                with lock:
                    acked[msg.offset()] = (msg.key(), msg.value())  # type: ignore[attr-defined]

        i = 0
        while not stop.is_set():
            key = f"key-{i}".encode()
            try:
                producer.produce(
                    topic, key=key, value=f"value-{i}-".encode() * 8, partition=0, on_delivery=on_delivery
                )
            except BufferError:
                producer.poll(0.05)
                continue
            producer.poll(0)
            i += 1
        producer.flush(10)

    try:
        worker = threading.Thread(target=load, daemon=True)
        worker.start()
        deadline = threading.Event()
        while len(acked) < 20_000 and not deadline.wait(0.05):
            pass
        broker.kill()  # mid-load, while produce requests are in flight
        stop.set()
        worker.join(timeout=30)
        assert not worker.is_alive()
        assert len(acked) >= 20_000

        broker.start()  # same data directory, same port
        _, end = high_watermark(broker.bootstrap, topic, 0)
        assert end >= max(acked) + 1
        found = read_partition(broker.bootstrap, topic, 0, end)
        missing = [offset for offset in acked if found.get(offset) != acked[offset]]
        assert missing == [], f"{len(missing)} acknowledged records lost or changed, first {missing[:5]}"
    finally:
        broker.kill()


@pytest.mark.timeout(90)
def test_torn_segment_recovers_to_the_last_whole_batch(tmp_path: Path) -> None:
    data = tmp_path / "data"
    broker = BrokerProcess(data)
    broker.start()
    topic = "torn"
    try:
        producer = Producer({"bootstrap.servers": broker.bootstrap, **FAST_FAILURE})
        for i in range(20):  # one batch per record: flush after each
            producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode() * 10, partition=0)
            assert producer.flush(10) == 0
        assert broker.terminate() == 0

        segments = sorted((data / f"{topic}-0").glob("*.log"))
        assert segments, "no segment files"
        last = segments[-1]
        size = last.stat().st_size
        with open(last, "r+b") as handle:
            handle.truncate(size - 7)  # tear the last batch

        broker.start()
        low, high = high_watermark(broker.bootstrap, topic, 0)
        assert (low, high) == (0, 19)
        found = read_partition(broker.bootstrap, topic, 0, 19)
        assert found == {i: (f"k{i}".encode(), f"v{i}".encode() * 10) for i in range(19)}

        producer = Producer({"bootstrap.servers": broker.bootstrap, **FAST_FAILURE})
        offsets: list[int] = []
        producer.produce(
            topic,
            key=b"after",
            value=b"recovery",
            partition=0,
            on_delivery=lambda e, m: offsets.append(m.offset()),
        )
        assert producer.flush(10) == 0
        assert offsets == [19]
    finally:
        broker.kill()
