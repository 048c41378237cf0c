"""Topic configs beyond their defaults, against Kafka and shareq: created and described, validated with
Kafka's messages, altered incrementally (APPEND/SUBTRACT) and with the legacy AlterConfigs, and honoured
on produce (LogAppendTime, the timestamp window, max.message.bytes, min.insync.replicas, compression.type).
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from compat_support import FAST, Server, create_topic, produce, wait_for
from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType as KpConfigResourceType

pytestmark = pytest.mark.timeout(60)

DYNAMIC_TOPIC_CONFIG = 1
INVALID_CONFIG = 40


def _admin(server: Server) -> AdminClient:
    return AdminClient({"bootstrap.servers": server.bootstrap, **FAST})


def _describe(server: Server, topic: str) -> dict[str, ConfigEntry]:
    admin = _admin(server)
    resource = ConfigResource(ResourceType.TOPIC, topic)
    entries: dict[str, ConfigEntry] = admin.describe_configs([resource], request_timeout=15)[
        resource
    ].result()
    return entries


def _alter(server: Server, topic: str, *entries: tuple[str, str | None, AlterConfigOpType]) -> None:
    admin = _admin(server)
    resource = ConfigResource(
        ResourceType.TOPIC,
        topic,
        incremental_configs=[ConfigEntry(n, v, incremental_operation=op) for n, v, op in entries],
    )
    admin.incremental_alter_configs([resource])[resource].result(timeout=15)


def test_create_with_configs_described_as_set(server: Server, names: tuple[str, str]) -> None:
    """compression.type, cleanup.policy=compact and LogAppendTime given at creation are described as set."""
    configs = {
        "compression.type": "zstd",
        "cleanup.policy": "compact",
        "message.timestamp.type": "LogAppendTime",
        "min.cleanable.dirty.ratio": "0.25",
        "leader.replication.throttled.replicas": "*",
    }
    create_topic(server, names[0], configs=configs)
    entries = _describe(server, names[0])
    assert {n: (entries[n].value, int(entries[n].source)) for n in configs} == {
        n: (v, DYNAMIC_TOPIC_CONFIG) for n, v in configs.items()
    }


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("cleanup.policy", "bogus", "Invalid value bogus for configuration cleanup.policy: "
         "String must be one of: compact, delete"),
        ("compression.type", "brotli", "Invalid value brotli for configuration compression.type: "
         "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer"),
        ("retention.ms", "abc", "Invalid value abc for configuration retention.ms: "
         "Not a number of type LONG"),
        ("retention.ms", "-5", "Invalid value -5 for configuration retention.ms: Value must be at least -1"),
        ("min.cleanable.dirty.ratio", "2", "Invalid value 2.0 for configuration min.cleanable.dirty.ratio: "
         "Value must be no more than 1"),
        ("segment.bytes", "10", "Invalid value 10 for configuration segment.bytes: "
         "Value must be at least 1048576"),
        ("compression.gzip.level", "12", "Invalid value 12 for configuration compression.gzip.level: "
         "Value must be between 1 and 9 or equal to -1"),
        ("preallocate", "maybe", "Invalid value maybe for configuration preallocate: "
         "Expected value to be either true or false"),
        ("bogus.config", "1", "Unknown topic config name: bogus.config"),
        ("message.timestamp.type", "Foo", "Invalid value Foo for configuration message.timestamp.type: "
         "String must be one of: CreateTime, LogAppendTime"),
    ],
)  # fmt: skip
def test_create_rejects_a_bad_config(
    server: Server, names: tuple[str, str], name: str, value: str, message: str
) -> None:
    """CreateTopics with a bad topic config: INVALID_CONFIG with Kafka's message."""
    admin = _admin(server)
    future = admin.create_topics([NewTopic(names[0], 1, server.nodes, config={name: value})])[names[0]]
    with pytest.raises(KafkaException) as raised:
        future.result(timeout=15)
    error = raised.value.args[0]
    assert (error.code(), error.str()) == (INVALID_CONFIG, message)


def test_alter_rejects_a_bad_config(server: Server, names: tuple[str, str]) -> None:
    """IncrementalAlterConfigs with a bad value: INVALID_CONFIG, and the topic keeps its configs."""
    create_topic(server, names[0])
    with pytest.raises(KafkaException) as raised:
        _alter(server, names[0], ("retention.ms", "-7", AlterConfigOpType.SET))
    assert raised.value.args[0].code() == INVALID_CONFIG
    assert _describe(server, names[0])["retention.ms"].value == "604800000"


def test_append_and_subtract_cleanup_policy(server: Server, names: tuple[str, str]) -> None:
    """APPEND compact to the default delete policy, then SUBTRACT delete: compact alone is left."""
    create_topic(server, names[0])
    _alter(server, names[0], ("cleanup.policy", "compact", AlterConfigOpType.APPEND))
    wait_for(lambda: _describe(server, names[0])["cleanup.policy"].value != "delete")
    assert _describe(server, names[0])["cleanup.policy"].value == "delete,compact"
    _alter(server, names[0], ("cleanup.policy", "delete", AlterConfigOpType.SUBTRACT))
    wait_for(lambda: _describe(server, names[0])["cleanup.policy"].value != "delete,compact")
    entry = _describe(server, names[0])["cleanup.policy"]
    assert (entry.value, int(entry.source)) == ("compact", DYNAMIC_TOPIC_CONFIG)


def test_subtract_the_last_cleanup_policy(server: Server, names: tuple[str, str]) -> None:
    """SUBTRACT delete from the default delete policy leaves an empty policy (Kafka 4.x: neither delete
    nor compact), set on the topic; the admin client's connection serves the next request."""
    create_topic(server, names[0])
    _alter(server, names[0], ("cleanup.policy", "delete", AlterConfigOpType.SUBTRACT))
    wait_for(lambda: _describe(server, names[0])["cleanup.policy"].value != "delete")
    entry = _describe(server, names[0])["cleanup.policy"]
    assert (entry.value, int(entry.source)) == ("", DYNAMIC_TOPIC_CONFIG)
    _alter(server, names[0], ("cleanup.policy", "compact", AlterConfigOpType.APPEND))
    wait_for(lambda: _describe(server, names[0])["cleanup.policy"].value == "compact")


def test_append_to_a_config_that_is_not_a_list(server: Server, names: tuple[str, str]) -> None:
    create_topic(server, names[0])
    with pytest.raises(KafkaException) as raised:
        _alter(server, names[0], ("retention.ms", "5", AlterConfigOpType.APPEND))
    assert raised.value.args[0].code() == INVALID_CONFIG


def test_legacy_alter_configs(server: Server, names: tuple[str, str]) -> None:
    """kafka-python with incremental=False sends the legacy AlterConfigs (API 33): the value is set."""
    create_topic(server, names[0], configs={"retention.ms": "3600000"})
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=15000)
    try:
        resource = KpConfigResource(KpConfigResourceType.TOPIC, names[0], configs={"segment.ms": "7200000"})
        result = admin.alter_configs([resource], incremental=False, raise_on_unknown=False)
    finally:
        admin.close()
    assert result == {"topic": {names[0]: "OK"}}
    entries = _describe(server, names[0])
    assert (entries["segment.ms"].value, int(entries["segment.ms"].source)) == (
        "7200000",
        DYNAMIC_TOPIC_CONFIG,
    )
    assert entries["retention.ms"].value == "3600000"  # kafka-python sends the other set values along


def test_manual_assignment_onto_this_broker(server: Server, names: tuple[str, str]) -> None:
    """CreateTopics with a replica assignment naming the one broker (kafka-python), as a one-node Kafka
    accepts it."""
    from kafka.admin import NewTopic as KpNewTopic

    kp = KafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=15000)
    try:
        node = kp.describe_cluster()["controller_id"]
        assignment = {0: [node], 1: [node]}
        kp.create_topics([KpNewTopic(names[0], -1, -1, replica_assignments=assignment)])
    finally:
        kp.close()
    admin = _admin(server)

    def partitions() -> list[int]:  # a broker may not have applied the new topic yet (see below)
        return sorted(admin.list_topics(names[0], timeout=15).topics[names[0]].partitions)

    assert wait_for(partitions) == [0, 1]


def _deliver(server: Server, topic: str, value: bytes, **extra: Any) -> tuple[int | None, Any]:
    """Produce one record with no retries; (error code or None, the delivered message)."""
    timestamp = extra.pop("timestamp", None)
    config = {
        "bootstrap.servers": server.bootstrap,
        "linger.ms": 0,
        "retries": 0,
        "message.timeout.ms": 10000,
    }
    producer = Producer({**config, **FAST, **extra})
    outcome: list[tuple[int | None, Any]] = []
    producer.produce(
        topic,
        value=value,
        partition=0,
        on_delivery=lambda err, msg: outcome.append((None if err is None else err.code(), msg)),
        **({} if timestamp is None else {"timestamp": timestamp}),
    )
    assert producer.flush(15) == 0
    return outcome[0]


def _read_first(server: Server, topic: str) -> Any:
    consumer = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "unused", **FAST})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                return message
        raise AssertionError("no record")
    finally:
        consumer.close()


def test_log_append_time(server: Server, names: tuple[str, str]) -> None:
    """A LogAppendTime topic stamps records with the broker's clock, whatever the producer set."""
    create_topic(server, names[0], configs={"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    error, _ = _deliver(server, names[0], b"v", timestamp=before - 86_400_000)
    assert error is None
    kind, stamp = _read_first(server, names[0]).timestamp()
    assert kind == TIMESTAMP_LOG_APPEND_TIME
    assert before - 5000 <= stamp <= int(time.time() * 1000) + 5000


@pytest.mark.parametrize(
    ("configs", "offset_ms"),
    [({"message.timestamp.before.max.ms": "60000"}, -3_600_000), ({}, 2 * 3_600_000)],
    ids=["too-old", "too-far-ahead"],
)
def test_timestamp_window(
    server: Server, names: tuple[str, str], configs: dict[str, str], offset_ms: int
) -> None:
    """A CreateTime record outside before.max.ms / after.max.ms (default 1 h ahead): INVALID_TIMESTAMP."""
    create_topic(server, names[0], configs=configs)
    error, _ = _deliver(server, names[0], b"v", timestamp=int(time.time() * 1000) + offset_ms)
    assert error == 32


def test_max_message_bytes(server: Server, names: tuple[str, str]) -> None:
    """A batch over the topic's max.message.bytes: MSG_SIZE_TOO_LARGE."""
    create_topic(server, names[0], configs={"max.message.bytes": "1000"})
    error, _ = _deliver(server, names[0], b"x" * 2000)
    assert error == 10


def test_min_insync_replicas_with_acks_all(server: Server, names: tuple[str, str]) -> None:
    """min.insync.replicas=2 on a topic of replication factor 1: Kafka caps the minimum at the replica count,
    so acks=all succeeds."""
    create_topic(server, names[0], configs={"min.insync.replicas": "2"})
    error, _ = _deliver(server, names[0], b"v", acks="all")
    assert error is None


def _log_size(server: Server, topic: str) -> int:
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=15000)
    try:
        (broker,) = admin.describe_log_dirs({topic: [0]})
    finally:
        admin.close()
    return sum(p["partition_size"] for d in broker["log_dirs"] for t in d["topics"] for p in t["partitions"])


@pytest.mark.parametrize("codec", ["gzip", "zstd", "lz4", "snappy"])
def test_compression_type_recompresses(server: Server, names: tuple[str, str], codec: str) -> None:
    """An uncompressed 100 kB batch of zeros into a topic with compression.type set is stored compressed, and
    reads back unchanged."""
    create_topic(server, names[0], configs={"compression.type": codec})
    produce(server, names[0], [bytes(100_000)])
    assert _log_size(server, names[0]) < 5_000
    assert _read_first(server, names[0]).value() == bytes(100_000)


def test_compression_type_uncompressed(server: Server, names: tuple[str, str]) -> None:
    """A gzip batch into an uncompressed topic is stored uncompressed."""
    create_topic(server, names[0], configs={"compression.type": "uncompressed"})
    producer = Producer({"bootstrap.servers": server.bootstrap, "compression.type": "gzip", **FAST})
    producer.produce(names[0], value=bytes(50_000), partition=0)
    assert producer.flush(15) == 0
    assert _log_size(server, names[0]) > 50_000
    assert _read_first(server, names[0]).value() == bytes(50_000)


def test_kafka_python_create_describe_and_alter_incrementally(server: Server, names: tuple[str, str]) -> None:
    """kafka-python's admin client: CreateTopics with compression.type, cleanup.policy=compact and
    LogAppendTime (the response names each config's source), DescribeConfigs of what was set, then
    IncrementalAlterConfigs APPEND and SUBTRACT on cleanup.policy."""
    from kafka.admin import AlterConfigOp
    from kafka.admin import NewTopic as KpNewTopic

    topic = names[0]
    configs = {
        "compression.type": "zstd",
        "cleanup.policy": "compact",
        "message.timestamp.type": "LogAppendTime",
    }
    kp = KafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=15000)
    try:
        created = kp.create_topics([KpNewTopic(topic, 1, server.nodes, topic_configs=configs)])
        (result,) = created["topics"]
        assert (result["error_code"], result["num_partitions"]) == (0, 1)
        sources = {k: (v["value"], v["config_source"]) for k, v in result["configs"].items()}
        assert {k: sources[k] for k in configs} == {
            k: (v, "DYNAMIC_TOPIC_CONFIG") for k, v in configs.items()
        }
        assert sources["min.insync.replicas"] == ("1", "DYNAMIC_DEFAULT_BROKER_CONFIG")
        resource = KpConfigResource(KpConfigResourceType.TOPIC, topic)

        def described() -> dict[str, str]:
            entries = kp.describe_configs([resource])["topic"][topic]
            return {k: e["value"] for k, e in entries.items()}

        # Kafka answers CreateTopics once its controller has the topic; the broker asked next may not
        # have applied it yet and then describes nothing (kafka-python leaves the error code unread).
        assert wait_for(described) == configs
        for op, value, expected in (
            (AlterConfigOp.APPEND, "delete", "compact,delete"),
            (AlterConfigOp.SUBTRACT, "compact", "delete"),
        ):
            change = KpConfigResource(
                KpConfigResourceType.TOPIC, topic, configs={"cleanup.policy": (op, value)}
            )
            assert kp.alter_configs([change], incremental=True) == {"topic": {topic: "OK"}}
            wait_for(lambda expected=expected: described()["cleanup.policy"] == expected)
    finally:
        kp.close()
