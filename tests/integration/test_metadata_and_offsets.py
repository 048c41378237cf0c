"""Requests real clients send in corners: Metadata by topic id, internal topics, ListOffsets by time."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v13 import request as metadata_v13
from kio_wire import KioConnection

from shareq.embedded import EmbeddedBroker

pytestmark = [pytest.mark.integration]
ZERO = uuid.UUID(int=0)


@pytest.mark.timeout(30)
def test_metadata_by_id_and_hidden_internal_topics(
    embedded_broker: EmbeddedBroker,
) -> None:
    topic = embedded_broker.call(embedded_broker.broker.create_topic, "by-id", 2)
    embedded_broker.call(embedded_broker.broker.create_topic, "__internal_state", 1)
    connection = KioConnection(embedded_broker.bootstrap)
    try:
        by_id = connection.send(
            metadata_v13.MetadataRequest(
                topics=(
                    metadata_v13.MetadataRequestTopic(topic_id=topic.topic_id, name=None),
                    metadata_v13.MetadataRequestTopic(topic_id=uuid.uuid4(), name=None),
                ),
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
        )
        found, unknown = by_id.topics
        assert (found.name, found.topic_id, len(found.partitions)) == ("by-id", topic.topic_id, 2)
        assert unknown.error_code == ErrorCode.unknown_topic_id
        everything = connection.send(
            metadata_v13.MetadataRequest(
                topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
            )
        )
        assert {t.name for t in everything.topics} == {"by-id"}
        internal = connection.send(
            metadata_v13.MetadataRequest(
                topics=(
                    metadata_v13.MetadataRequestTopic(topic_id=uuid.UUID(int=0), name="__internal_state"),
                ),
                allow_auto_topic_creation=True,
                include_topic_authorized_operations=False,
            )
        )
        assert internal.topics[0].error_code == ErrorCode.none and internal.topics[0].is_internal
        missing = connection.send(
            metadata_v13.MetadataRequest(
                topics=(metadata_v13.MetadataRequestTopic(topic_id=ZERO, name="not-there"),),
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
        )
        assert missing.topics[0].error_code == ErrorCode.unknown_topic_or_partition
        assert everything.cluster_id and everything.brokers[0].port == embedded_broker.port
    finally:
        connection.close()


@pytest.mark.timeout(30)
def test_list_offsets_earliest_latest_and_by_timestamp(embedded_broker: EmbeddedBroker) -> None:
    producer = Producer({"bootstrap.servers": embedded_broker.bootstrap})
    base = int(time.time() * 1000) - 100_000
    for i in range(10):
        producer.produce("timed", f"v{i}".encode(), partition=0, timestamp=base + i * 1000)
        producer.flush(10)
    consumer = Consumer({"bootstrap.servers": embedded_broker.bootstrap, "group.id": "offsets"})
    try:
        assert consumer.get_watermark_offsets(TopicPartition("timed", 0), timeout=10) == (0, 10)
        [at] = consumer.offsets_for_times([TopicPartition("timed", 0, base + 4500)], timeout=10)
        assert at.offset == 5
        [after] = consumer.offsets_for_times([TopicPartition("timed", 0, base + 10**7)], timeout=10)
        assert after.offset == -1  # nothing at or after: the end
    finally:
        consumer.close()
