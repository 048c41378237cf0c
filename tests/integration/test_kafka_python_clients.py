"""kafka-python against the broker: idempotent KafkaProducer, KafkaConsumer with assign()."""

from __future__ import annotations

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from shareq.embedded import EmbeddedBroker

pytestmark = [pytest.mark.integration]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("compression", [None, "gzip", "lz4", "zstd", "snappy"])
def test_produce_and_assign_consume(embedded_broker: EmbeddedBroker, compression: str | None) -> None:
    topic = f"kp-{compression}"
    admin = KafkaAdminClient(bootstrap_servers=embedded_broker.bootstrap, request_timeout_ms=5000)
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])
    admin.close()
    producer = KafkaProducer(
        bootstrap_servers=embedded_broker.bootstrap,
        compression_type=compression,
        request_timeout_ms=5000,
        linger_ms=2,
    )
    sent = []
    for i in range(200):
        key = f"k{i}".encode()
        value = bytes(range(i % 256)) + f"v{i}".encode()
        headers = [("n", str(i).encode())]
        metadata = producer.send(topic, key=key, value=value, headers=headers, partition=i % 2).get(
            timeout=10
        )
        sent.append((metadata.partition, metadata.offset, key, value, headers))
    producer.close(timeout=10)

    consumer = KafkaConsumer(
        bootstrap_servers=embedded_broker.bootstrap,
        enable_auto_commit=False,
        group_id=None,
        request_timeout_ms=5000,
        fetch_max_wait_ms=100,
    )
    partitions = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    consumer.assign(partitions)
    consumer.seek_to_beginning(*partitions)
    received = []
    while len(received) < len(sent):
        batches = consumer.poll(timeout_ms=5000)
        assert batches, f"no progress after {len(received)} records"
        for records in batches.values():
            received.extend((r.partition, r.offset, r.key, r.value, list(r.headers)) for r in records)
    consumer.close()
    assert sorted(received) == sorted(sent)
    assert sorted(offset for p, offset, *_ in sent if p == 0) == list(range(100))
