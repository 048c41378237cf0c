"""Helpers for share-group tests with librdkafka's ShareConsumer: fast settings, producing, polling."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Producer, ShareConsumer

from shareq.client import Admin

# librdkafka settings that keep a test in seconds: quick reconnects, short socket timeouts.
FAST = {
    "socket.timeout.ms": 5000,
    "reconnect.backoff.ms": 20,
    "reconnect.backoff.max.ms": 200,
    "retry.backoff.ms": 20,
    "retry.backoff.max.ms": 200,
    "topic.metadata.refresh.interval.ms": 1000,
}

# Broker settings for share-group tests: few state partitions, consumers start at the beginning,
# quick heartbeats so membership changes land fast.
SHARE_BROKER = {
    "share.coordinator.state.topic.num.partitions": "3",
    "group.share.auto.offset.reset": "earliest",
    "group.share.min.heartbeat.interval.ms": "200",
    "group.share.heartbeat.interval.ms": "500",
}


def as_pairs(config: dict[str, str]) -> list[str]:
    return [f"{k}={v}" for k, v in config.items()]


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    with Admin(bootstrap) as admin:
        if topic not in admin.list_topics():
            admin.create_topic(topic, partitions)


def produce(bootstrap: str, topic: str, values: list[bytes], partitions: int, per_batch: int = 1) -> None:
    """Produce ``values`` round-robin over partitions, ``per_batch`` records per log batch."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, **FAST})
    for start in range(0, len(values), per_batch):
        for i, value in enumerate(values[start : start + per_batch]):
            producer.produce(topic, value=value, partition=((start // per_batch) % partitions))
            del i
        producer.flush(15)
    assert producer.flush(15) == 0


def share_consumer(bootstrap: str, group: str, topics: list[str], **extra: Any) -> ShareConsumer:
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, **FAST, **extra})
    consumer.subscribe(topics)
    return consumer


def poll_values(
    consumer: ShareConsumer,
    until: Callable[[list[Any]], bool],
    timeout: float = 20.0,
    on_message: Callable[[Any], None] | None = None,
) -> list[Any]:
    """Poll until ``until(messages)``; returns the messages (errors fail the test)."""
    out: list[Any] = []
    deadline = time.monotonic() + timeout
    while not until(out) and time.monotonic() < deadline:
        for message in consumer.poll(0.2):
            assert message.error() is None, message.error()
            out.append(message)
            if on_message is not None:
                on_message(message)
    return out
