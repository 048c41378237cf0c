"""SIGKILL the broker while a released record waits out its redelivery delay: after the restart the
record is not delivered before its persisted due time (and is delivered once it is due)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from broker_harness import BrokerProcess
from confluent_kafka import AcknowledgeType
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
from share_consumers import SHARE_BROKER, as_pairs, create_topic, produce, share_consumer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

DELAY_S = 5.0


def _poll_one(bootstrap: str, timeout: float) -> tuple[float, int]:
    """The wall-clock time and delivery count of the first record an explicit-mode consumer gets."""
    consumer = share_consumer(bootstrap, "g", ["q"], **{"share.acknowledgement.mode": "explicit"})
    try:
        deadline = time.monotonic() + timeout
        while True:
            assert time.monotonic() < deadline, "no delivery"
            for message in consumer.poll(0.1):
                assert message.error() is None, message.error()
                return time.time(), message.delivery_count()
    finally:
        consumer.close()


def test_a_restart_honours_the_persisted_due_time(tmp_path: Path, persister: str) -> None:
    broker = BrokerProcess(tmp_path / "data", *as_pairs({**SHARE_BROKER, "share.persister": persister}))
    broker.start()
    try:
        create_topic(broker.bootstrap, "q", 1)
        produce(broker.bootstrap, "q", [b"x"], 1)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        changes = {
            "shareq.redelivery.backoff.ms": str(int(DELAY_S * 1000)),
            "shareq.redelivery.backoff.jitter": "0",
        }
        entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in changes.items()]
        resource = ConfigResource(ResourceType.GROUP, "g", incremental_configs=entries)
        admin.incremental_alter_configs([resource], request_timeout=15)[resource].result()
        consumer = share_consumer(broker.bootstrap, "g", ["q"], **{"share.acknowledgement.mode": "explicit"})
        try:
            deadline = time.monotonic() + 20
            released_at = 0.0
            while not released_at:
                assert time.monotonic() < deadline, "no first delivery"
                for message in consumer.poll(0.1):
                    consumer.acknowledge(message, AcknowledgeType.RELEASE)
                    released_at = time.time()
                    assert all(v is None for v in consumer.commit_sync().values())
        finally:
            consumer.close()
        broker.kill()
        broker.start()
        received_at, count = _poll_one(broker.bootstrap, timeout=DELAY_S + 15)
    finally:
        broker.kill()
    assert count == 2
    assert received_at >= released_at + DELAY_S, received_at - released_at
