"""Helpers for the transaction tests: librdkafka transactional producers and bounded readers."""

from __future__ import annotations

import time
import uuid

from broker_harness import FAST_FAILURE
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

CONSUMER_FAST = {k: v for k, v in FAST_FAILURE.items() if k != "message.timeout.ms"}


def create_topic(bootstrap: str, partitions: int = 1) -> str:
    name = f"txn-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(10)
    return name


def txn_producer(bootstrap: str, transactional_id: str, **config: object) -> Producer:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": transactional_id, **FAST_FAILURE, **config}
    )
    producer.init_transactions(15)
    return producer


def produce_txn(producer: Producer, topic: str, values: list[str], partitions: int, *, commit: bool) -> None:
    """One transaction: every value (round-robin over partitions), flushed, then commit or abort."""
    producer.begin_transaction()
    for i, value in enumerate(values):
        producer.produce(topic, value.encode(), partition=i % partitions)
    assert producer.flush(15) == 0
    if commit:
        producer.commit_transaction(15)
    else:
        producer.abort_transaction(15)


def end_offsets(bootstrap: str, topic: str, partitions: int) -> list[int]:
    """High watermarks, read with a read_uncommitted consumer."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "isolation.level": "read_uncommitted",
            **CONSUMER_FAST,
        }
    )
    try:
        return [
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)
        ]
    finally:
        consumer.close()


def read_all(
    bootstrap: str, topic: str, partitions: int, isolation: str, *, deadline_s: float = 20.0
) -> list[str]:
    """Every value a consumer with ``isolation`` sees, reading until it reaches the positions a
    read_uncommitted consumer would (the log ends) or the read_committed end (the LSO)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex[:6]}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 50,
            **CONSUMER_FAST,
        }
    )
    try:
        tps = [TopicPartition(topic, p, 0) for p in range(partitions)]
        ends = [
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)
        ]
        consumer.assign(tps)
        values: list[str] = []
        done = time.monotonic() + deadline_s
        while time.monotonic() < done:
            for message in consumer.consume(num_messages=500, timeout=0.2):
                assert message.error() is None, message.error()
                values.append(message.value().decode())
            positions = consumer.position(tps)
            # a partition nothing was read from has no position yet (-1001): it is at 0
            if all(max(tp.offset, 0) >= end for tp, end in zip(positions, ends, strict=True)):
                return values
        raise AssertionError(f"{isolation} reader did not reach {ends} within {deadline_s}s: {positions}")
    finally:
        consumer.close()
