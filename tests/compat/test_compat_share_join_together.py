"""Share consumers that join a group together share its records, as on Kafka 4.4 (librdkafka's 0172 case:
an implicit- and an explicit-acknowledgement consumer joining one group on 4 partitions, 400 records)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from compat_support import Server, create_topic, earliest_group, produce, share_consumer, wait_for
from confluent_kafka import Message
from kio.schema.errors import ErrorCode

from shareq.client import Admin, KafkaError

pytestmark = pytest.mark.timeout(90)

RECORDS = 400
PARTITIONS = 4


def _members(server: Server, group: str) -> int:
    with Admin(server.bootstrap) as admin:
        try:
            return len(admin.describe_share_group(group).members)
        except KafkaError as error:  # before the first consumer's join
            assert error.code == ErrorCode.group_id_not_found
            return 0


def test_consumers_joining_together_both_get_records(server: Server, names: tuple[str, str]) -> None:
    """Two consumers subscribed one just after the other (the second once the first is a member), then
    polled in turn from one thread, a second each, until the 400 records are consumed: each gets some."""
    topic, group = names
    create_topic(server, topic, partitions=PARTITIONS)
    produce(server, topic, (b"%d" % i for i in range(RECORDS)), partition=lambda i: i % PARTITIONS)
    earliest_group(server, group, **{"share.heartbeat.interval.ms": "5000"})
    implicit = share_consumer(server, group, [topic])
    wait_for(lambda: _members(server, group) == 1)  # the second joins just after the first
    explicit = share_consumer(server, group, [topic], explicit=True)
    got: dict[str, list[Message]] = {"implicit": [], "explicit": []}
    consumers: dict[str, Any] = {"implicit": implicit, "explicit": explicit}
    try:
        deadline = time.monotonic() + 60
        while sum(map(len, got.values())) < RECORDS and time.monotonic() < deadline:
            for name, consumer in consumers.items():
                for message in consumer.poll(1.0):
                    assert message.error() is None, message.error()
                    got[name].append(message)
                    if name == "explicit":
                        consumer.acknowledge(message)
        assert sum(map(len, got.values())) == RECORDS
        assert {name: len(messages) > 0 for name, messages in got.items()} == {
            "implicit": True,
            "explicit": True,
        }, {name: len(messages) for name, messages in got.items()}
    finally:
        for consumer in consumers.values():
            consumer.close()
