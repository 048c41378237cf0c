"""ApiVersions v3+ features, read by our Admin and by kafka-python against the real broker."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ci_support import require
from shareq.client import Admin
from shareq.embedded import EmbeddedBroker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as b:
        yield b


def test_describe_features(broker: EmbeddedBroker) -> None:
    with Admin(broker.bootstrap) as admin:
        features = admin.describe_features()
    assert features.supported == {
        "eligible.leader.replicas.version": (0, 0),
        "group.version": (0, 1),
        "kraft.version": (0, 0),
        "metadata.version": (7, 33),
        "share.version": (0, 2),
        "streams.version": (0, 0),
        "transaction.version": (0, 2),
    }
    assert features.finalized == {
        "group.version": (1, 1),
        "metadata.version": (33, 33),
        "share.version": (2, 2),
        "transaction.version": (2, 2),
    }
    assert features.finalized_epoch is not None and features.finalized_epoch >= 0


def test_librdkafka_and_kafka_python_still_negotiate(broker: EmbeddedBroker) -> None:
    """The tagged feature fields must not upset clients that read ApiVersions v3 (librdkafka) and v4
    (kafka-python): both connect and list topics."""
    kafka = require("kafka")
    confluent = require("confluent_kafka.admin")
    client = kafka.KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    try:
        assert isinstance(client.list_topics(), list)
    finally:
        client.close()
    listed = confluent.AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)
    assert listed.brokers
