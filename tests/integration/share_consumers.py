"""Helpers for share-group tests with librdkafka's ShareConsumer: fast settings, producing, polling."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
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
# quick heartbeats and assignments at once (no assignment interval) so membership changes land fast.
SHARE_BROKER = {
    "share.coordinator.state.topic.num.partitions": "3",
    "group.share.auto.offset.reset": "earliest",
    "group.share.min.heartbeat.interval.ms": "200",
    "group.share.heartbeat.interval.ms": "500",
    "group.share.assignment.interval.ms": "0",
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


_DYING_CONSUMER = """
import os, sys
from confluent_kafka import ShareConsumer
config = {"bootstrap.servers": sys.argv[1], "group.id": "g", "share.acknowledgement.mode": "explicit"}
c = ShareConsumer(config)
c.subscribe([sys.argv[2]])
got = 0
while got == 0:
    got = len(c.poll(0.5))
print(got, flush=True)
os.kill(os.getpid(), 9)
"""


def consume_then_die(bootstrap: str, topic: str) -> int:
    """A ShareConsumer of group "g" in a child process polls ``topic`` until it gets records,
    acknowledges none and is SIGKILLed; returns how many it got (its records stay acquired)."""
    dying = subprocess.run(
        [sys.executable, "-c", _DYING_CONSUMER, bootstrap, topic],
        capture_output=True,
        text=True,
        timeout=30,
        env=os.environ.copy(),
    )
    assert dying.returncode == -signal.SIGKILL, dying.stderr[-2000:]
    return int(dying.stdout.split()[0])


def user_records(log: Any) -> tuple[int, int]:
    """``(end, count)`` of a partition log's data records: the offset after the last batch that is
    not a control batch, and how many records such batches hold (share state and transaction
    markers are control batches)."""
    from shareq.log.batch import CONTROL_MASK, HEADER, LOG_OVERHEAD

    offset, end, count = log.log_start_offset, log.log_start_offset, 0
    while offset < log.log_end_offset:
        data = log.read(offset, 1024 * 1024)
        buf, pos = data.records, 0
        while pos < len(buf):
            header = HEADER.unpack_from(buf, pos)
            if not header[5] & CONTROL_MASK:
                count += header[12]
                end = header[0] + header[6] + 1
            pos += LOG_OVERHEAD + header[1]
        offset = data.batches[-1][1] + 1
    return end, count
