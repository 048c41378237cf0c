"""confluent-kafka (librdkafka) against the broker, unchanged: producer, assign() consumer, admin."""

from __future__ import annotations

import uuid

import pytest
from broker_harness import FAST_FAILURE, BrokerProcess
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from shareq.embedded import EmbeddedBroker

pytestmark = [pytest.mark.integration]

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
Record = tuple[bytes | None, bytes, list[tuple[str, bytes]]]


def produce_all(bootstrap: str, topic: str, records: list[Record], **config: object) -> list[tuple[int, int]]:
    """Produce and return (partition, offset) of each acknowledged record, in order."""
    producer = Producer({"bootstrap.servers": bootstrap, **FAST_FAILURE, **config})
    acked: list[tuple[int, int]] = [(-1, -1)] * len(records)
    errors: list[object] = []

    def on_delivery(index: int) -> object:
        def callback(err: object, msg: object) -> None:
            if err is not None:
                errors.append(err)
            else:
                acked[index] = (msg.partition(), msg.offset())  # type: ignore[attr-defined]

        return callback

    for index, (key, value, headers) in enumerate(records):
        producer.produce(
            topic, value=value, key=key, headers=headers, partition=0, on_delivery=on_delivery(index)
        )
        producer.poll(0)
    assert producer.flush(20) == 0
    assert errors == []
    return acked


def consume_all(bootstrap: str, topic: str, partition: int, count: int) -> list[object]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused-with-assign",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
            **{k: v for k, v in FAST_FAILURE.items() if k != "message.timeout.ms"},
        }
    )
    consumer.assign([TopicPartition(topic, partition, 0)])
    messages: list[object] = []
    try:
        while len(messages) < count:
            batch = consumer.consume(num_messages=count - len(messages), timeout=10)
            assert batch, f"no progress after {len(messages)} of {count} messages"
            for message in batch:
                assert message.error() is None, message.error()
                messages.append(message)
    finally:
        consumer.close()
    return messages


def make_records(count: int, seed: str) -> list[Record]:
    records: list[Record] = []
    for i in range(count):
        key = None if i % 7 == 0 else f"{seed}-key-{i}".encode()
        value = (f"{seed}-value-{i}-".encode() * (1 + i % 5)) + bytes([i % 256])
        headers = [("h", f"{i}".encode()), ("bin", bytes([0, 255, i % 256]))] if i % 3 else []
        records.append((key, value, headers))
    return records


@pytest.mark.timeout(90)
@pytest.mark.parametrize("idempotent", [False, True])
def test_every_codec_round_trips_byte_exact(broker_process: BrokerProcess, idempotent: bool) -> None:
    for codec in CODECS:
        topic = f"codec-{codec}-{idempotent}"
        records = make_records(120, codec)
        acked = produce_all(
            broker_process.bootstrap,
            topic,
            records,
            **{"compression.type": codec, "enable.idempotence": idempotent, "linger.ms": 5},
        )
        assert [offset for _, offset in acked] == list(range(len(records)))
        messages = consume_all(broker_process.bootstrap, topic, 0, len(records))
        for (key, value, headers), message, (_, offset) in zip(records, messages, acked, strict=True):
            assert message.offset() == offset  # type: ignore[attr-defined]
            assert message.key() == key  # type: ignore[attr-defined]
            assert message.value() == value  # type: ignore[attr-defined]
            assert (message.headers() or []) == headers  # type: ignore[attr-defined]


@pytest.mark.timeout(60)
def test_admin_create_list_describe_alter_delete(embedded_broker: EmbeddedBroker) -> None:
    admin = AdminClient({"bootstrap.servers": embedded_broker.bootstrap, **FAST_FAILURE})
    name = f"admin-{uuid.uuid4().hex[:8]}"
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=3, replication_factor=1, config={"retention.ms": "3600000"})]
    )
    futures[name].result(timeout=10)
    again = admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)])
    with pytest.raises(KafkaException, match="TOPIC_ALREADY_EXISTS"):
        again[name].result(timeout=10)
    bad = admin.create_topics([NewTopic("bad name!", num_partitions=1, replication_factor=1)])
    with pytest.raises(KafkaException, match="code=TOPIC_EXCEPTION"):
        bad["bad name!"].result(timeout=10)
    zero = admin.create_topics([NewTopic("zero-partitions", num_partitions=0, replication_factor=1)])
    with pytest.raises(KafkaException, match="INVALID_PARTITIONS"):
        zero["zero-partitions"].result(timeout=10)
    dry = admin.create_topics(
        [NewTopic("dry-run", num_partitions=1, replication_factor=1)], validate_only=True
    )
    dry["dry-run"].result(timeout=10)

    listing = admin.list_topics(timeout=10)
    assert name in listing.topics and "dry-run" not in listing.topics
    assert sorted(listing.topics[name].partitions) == [0, 1, 2]
    assert listing.cluster_id

    resource = ConfigResource(ResourceType.TOPIC, name)
    described = admin.describe_configs([resource])[resource].result(timeout=10)
    assert described["retention.ms"].value == "3600000"
    assert described["cleanup.policy"].value == "delete"

    altered = admin.incremental_alter_configs(
        [
            ConfigResource(
                ResourceType.TOPIC,
                name,
                incremental_configs=[
                    ConfigEntry("segment.bytes", "1048576", incremental_operation=AlterConfigOpType.SET)
                ],
            )
        ]
    )
    for future in altered.values():
        future.result(timeout=10)
    described = admin.describe_configs([resource])[resource].result(timeout=10)
    assert described["segment.bytes"].value == "1048576"

    broker_resource = ConfigResource(ResourceType.BROKER, "0")
    broker_configs = admin.describe_configs([broker_resource])[broker_resource].result(timeout=10)
    assert broker_configs["num.partitions"].value == "1"

    admin.delete_topics([name])[name].result(timeout=10)
    assert name not in admin.list_topics(timeout=10).topics


@pytest.mark.timeout(60)
def test_acks_zero_one_all_and_unknown_partition(embedded_broker: EmbeddedBroker) -> None:
    for acks in ("0", "1", "all"):
        topic = f"acks-{acks}"
        records = make_records(50, acks)
        produce_all(embedded_broker.bootstrap, topic, records, acks=acks)
        messages = consume_all(embedded_broker.bootstrap, topic, 0, len(records))
        assert [m.value() for m in messages] == [v for _, v, _ in records]  # type: ignore[attr-defined]
    producer = Producer(
        {"bootstrap.servers": embedded_broker.bootstrap, **FAST_FAILURE, "message.timeout.ms": 3000}
    )
    failures: list[object] = []
    producer.produce("acks-1", b"x", partition=5, on_delivery=lambda err, msg: failures.append(err))
    producer.flush(10)
    assert failures and failures[0] is not None


@pytest.mark.timeout(60)
def test_long_poll_is_woken_by_produce(embedded_broker: EmbeddedBroker) -> None:
    import time

    topic = "long-poll"
    produce_all(embedded_broker.bootstrap, topic, make_records(1, "first"))
    consumer = Consumer(
        {
            "bootstrap.servers": embedded_broker.bootstrap,
            "group.id": "assign-only",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 5000,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 1)])
    try:
        consumer.consume(num_messages=1, timeout=1)  # connect and start long-polling at offset 1
        started = time.monotonic()
        produce_all(embedded_broker.bootstrap, topic, [(b"k", b"late", [])])
        got = consumer.consume(num_messages=1, timeout=10)
        elapsed = time.monotonic() - started
    finally:
        consumer.close()
    assert [m.value() for m in got] == [b"late"]  # type: ignore[attr-defined]
    assert elapsed < 3.0, f"the fetch waited {elapsed:.1f}s: produce did not wake it"
