"""Kafka broker configs shareq has the behaviour for, read as Kafka reads them: broker.rack in the
broker's endpoints, fetch.max.bytes capping a Fetch, offset.metadata.max.bytes refusing a long commit
metadata."""

from __future__ import annotations

import datetime
import sys
from collections.abc import Iterator
from pathlib import Path

import kio.index as ki
import pytest
from confluent_kafka import Producer
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.errors import OffsetMetadataTooLargeError
from kafka.structs import OffsetAndMetadata
from kio_wire import KioConnection

from shareq.client import Admin
from shareq.embedded import EmbeddedBroker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

FETCH = sys.modules[ki.load_request_schema(1, 12).__module__]
CONFIGS = {"broker.rack": "rack-a", "fetch.max.bytes": "4096", "offset.metadata.max.bytes": "16"}


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(tmp_path / "data", CONFIGS) as running:
        yield running


def test_broker_rack_is_in_the_brokers_endpoints(broker: EmbeddedBroker) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    try:
        described = admin.describe_cluster()
    finally:
        admin.close()
    assert [b["rack"] for b in described["brokers"]] == ["rack-a"]


def test_fetch_max_bytes_caps_a_fetch(broker: EmbeddedBroker) -> None:
    """Three batches of 3 kB, a Fetch asking 10 MB: with fetch.max.bytes=4096 the answer holds the first
    batch (a first batch is always whole) and not the three."""
    with Admin(broker.bootstrap) as admin:
        admin.create_topic("capped", 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for _ in range(3):
        producer.produce("capped", value=b"x" * 3000, partition=0)
        assert producer.flush(10) == 0
    conn = KioConnection(broker.bootstrap)
    try:
        partition = FETCH.FetchPartition(
            partition=0,
            current_leader_epoch=-1,
            fetch_offset=0,
            last_fetched_epoch=-1,
            log_start_offset=-1,
            partition_max_bytes=10 << 20,
        )
        response = conn.send(
            FETCH.FetchRequest(
                replica_id=-1,
                max_wait=datetime.timedelta(0),
                min_bytes=1,
                max_bytes=10 << 20,
                isolation_level=0,
                session_id=0,
                session_epoch=-1,
                topics=(FETCH.FetchTopic(topic="capped", partitions=(partition,)),),
                forgotten_topics_data=(),
                rack_id="",
            )
        )
    finally:
        conn.close()
    records = response.responses[0].partitions[0].records or b""
    assert 3000 < len(records) < 6000


def test_offset_metadata_max_bytes(broker: EmbeddedBroker) -> None:
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="meta", enable_auto_commit=False)
    try:
        with Admin(broker.bootstrap) as admin:
            admin.create_topic("meta", 1)
        partition = TopicPartition("meta", 0)
        consumer.commit({partition: OffsetAndMetadata(0, "short", -1)})
        with pytest.raises(OffsetMetadataTooLargeError):
            consumer.commit({partition: OffsetAndMetadata(0, "x" * 17, -1)})
    finally:
        consumer.close()


def test_ssl_enabled_protocols_limits_the_tls_versions(tmp_path: Path) -> None:
    """ssl.enabled.protocols=TLSv1.3: a client that offers TLS 1.2 at most cannot connect, one that
    offers 1.3 can."""
    import socket
    import ssl

    from secure_broker import bootstrap, make_certificates, secure_config

    certs = make_certificates(tmp_path / "certs")
    config = secure_config(certs, **{"ssl.enabled.protocols": "TLSv1.3"})
    with EmbeddedBroker(tmp_path / "data", config) as running:
        host, port = bootstrap(running, "SSL").rsplit(":", 1)

        def handshake(highest: ssl.TLSVersion) -> str | None:
            context = ssl.create_default_context(cafile=str(certs.ca))
            context.maximum_version = highest
            with socket.create_connection((host, int(port)), timeout=10) as raw:
                try:
                    with context.wrap_socket(raw, server_hostname="localhost") as tls:
                        return tls.version()
                except ssl.SSLError:
                    return None

        assert handshake(ssl.TLSVersion.TLSv1_2) is None
        assert handshake(ssl.TLSVersion.TLSv1_3) == "TLSv1.3"
