"""Crash-durable delivery counts with a real client: a record whose delivery takes the broker down
(SIGKILL, as a co-located consumer running out of memory would) reaches the delivery limit and is
dead-lettered after exactly ``limit`` deliveries; with the config off every restart forgets the
delivery, as Kafka does, and the record comes back with count 1 each time."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from broker_harness import BrokerProcess
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
from share_consumers import FAST, SHARE_BROKER, as_pairs, create_topic, produce, share_consumer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

LIMIT = 3


def _alter_group(bootstrap: str, changes: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in changes.items()]
    resource = ConfigResource(ResourceType.GROUP, "g", incremental_configs=entries)
    admin.incremental_alter_configs([resource], request_timeout=15)[resource].result()


def _deliveries_until_the_broker_dies(broker: BrokerProcess, rounds: int) -> list[int]:
    """Each round: a consumer gets the poison record and the broker is killed right then."""
    counts: list[int] = []
    for _ in range(rounds):
        consumer = share_consumer(broker.bootstrap, "g", ["q"], **{"share.acknowledgement.mode": "explicit"})
        try:
            deadline = time.monotonic() + 6
            got = None
            while got is None and time.monotonic() < deadline:
                for message in consumer.poll(0.1):
                    assert message.error() is None, message.error()
                    got = message.delivery_count()
            if got is None:
                break  # not delivered any more
            counts.append(got)
            broker.kill()  # the record took the broker down with its consumer
        finally:
            consumer.close()
        broker.start()
    return counts


def _dead_letter_count(bootstrap: str) -> bytes:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "reader", "auto.offset.reset": "earliest", **FAST}
    )
    consumer.subscribe(["dlq.q"])
    try:
        deadline = time.monotonic() + 15
        while True:
            assert time.monotonic() < deadline, "nothing in the DLQ"
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                return dict(message.headers() or [])["__dlq.errors.delivery.count"]
    finally:
        consumer.close()


@pytest.mark.parametrize("durable", [True, False])
def test_a_record_that_kills_the_broker_reaches_the_limit_only_with_durable_counts(
    tmp_path: Path, durable: bool
) -> None:
    config = {**SHARE_BROKER, "errors.deadletterqueue.auto.create.topics.enable": "true"}
    broker = BrokerProcess(tmp_path / "data", *as_pairs(config))
    broker.start()
    try:
        create_topic(broker.bootstrap, "q", 1)
        produce(broker.bootstrap, "q", [b"poison"], 1)
        changes = {"share.delivery.count.limit": str(LIMIT), "errors.deadletterqueue.topic.name": "dlq.q"}
        if durable:
            changes["shareq.delivery.count.durable"] = "true"
        _alter_group(broker.bootstrap, changes)
        counts = _deliveries_until_the_broker_dies(broker, LIMIT + 1)
        if durable:
            # after the third restart the record is not delivered a fourth time: it is dead-lettered
            assert counts == [1, 2, 3]
            assert _dead_letter_count(broker.bootstrap) == b"3"
        else:
            assert counts == [1] * (LIMIT + 1)  # Kafka's: each crash forgets the delivery
    finally:
        broker.kill()
