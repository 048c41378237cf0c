"""The partition- and cluster-level admin calls through librdkafka's AdminClient and kafka-python's
KafkaAdminClient: CreatePartitions, DeleteRecords, ElectLeaders, DescribeCluster and Metadata with
authorized operations, the partition-reassignment calls; against Kafka and shareq."""

from __future__ import annotations

import pytest
from compat_support import (
    FAST,
    Server,
    count_at_least,
    create_topic,
    earliest_group,
    poll_until,
    produce,
    share_consumer,
    wait_for,
)
from confluent_kafka import ElectionType, KafkaException, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import AclOperation, AdminClient, NewPartitions, OffsetSpec
from kafka import KafkaAdminClient
from kafka import TopicPartition as KpTopicPartition

pytestmark = pytest.mark.timeout(60)

INVALID_PARTITIONS = 37
OFFSET_OUT_OF_RANGE = 1
ELECTION_NOT_NEEDED = 84
UNKNOWN_TOPIC_OR_PARTITION = 3
NO_REASSIGNMENT_IN_PROGRESS = 85
INVALID_REPLICA_ASSIGNMENT = 39

TOPIC_OPERATIONS = {
    AclOperation.READ,
    AclOperation.WRITE,
    AclOperation.CREATE,
    AclOperation.DELETE,
    AclOperation.ALTER,
    AclOperation.DESCRIBE,
    AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
}
CLUSTER_OPERATIONS = {
    AclOperation.CREATE,
    AclOperation.CLUSTER_ACTION,
    AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
    AclOperation.IDEMPOTENT_WRITE,
    AclOperation.ALTER,
    AclOperation.DESCRIBE,
}


def _admin(server: Server) -> AdminClient:
    return AdminClient({"bootstrap.servers": server.bootstrap, **FAST})


def _partition_count(admin: AdminClient, topic: str) -> int:
    return len(admin.describe_topics(TopicCollection([topic]))[topic].result(timeout=15).partitions)


def test_describe_cluster_with_authorized_operations(server: Server) -> None:
    """Without an authorizer every cluster operation is allowed; the controller is the one broker."""
    admin = _admin(server)
    described = admin.describe_cluster(include_authorized_operations=True, request_timeout=15).result(15)
    assert set(described.authorized_operations) == CLUSTER_OPERATIONS
    assert [n.id for n in described.nodes] == [described.controller.id]
    assert len(described.cluster_id) == 22


def test_describe_cluster_without_authorized_operations(server: Server) -> None:
    """Operations not asked for are not described."""
    admin = _admin(server)
    described = admin.describe_cluster(request_timeout=15).result(timeout=15)
    assert not described.authorized_operations


def test_describe_topic_with_authorized_operations(server: Server, names: tuple[str, str]) -> None:
    create_topic(server, names[0], partitions=2)
    admin = _admin(server)
    wanted = TopicCollection([names[0]])
    described = admin.describe_topics(wanted, include_authorized_operations=True)[names[0]].result(15)
    assert set(described.authorized_operations) == TOPIC_OPERATIONS
    assert [p.id for p in described.partitions] == [0, 1]


def test_create_partitions_grows_a_topic(server: Server, names: tuple[str, str]) -> None:
    """CreatePartitions 1 -> 3: the new partitions take records."""
    topic = names[0]
    create_topic(server, topic)
    admin = _admin(server)
    admin.create_partitions([NewPartitions(topic, 3)], operation_timeout=15)[topic].result(timeout=15)
    wait_for(lambda: _partition_count(admin, topic) == 3)
    produce(server, topic, [b"a", b"b", b"c"], partition=lambda i: i)
    latest = admin.list_offsets({TopicPartition(topic, p): OffsetSpec.latest() for p in range(3)})
    assert [f.result(timeout=15).offset for f in latest.values()] == [1, 1, 1]


@pytest.mark.parametrize("count", [1, 2])
def test_create_partitions_no_increase(server: Server, names: tuple[str, str], count: int) -> None:
    """Asking for the same or a smaller partition count: INVALID_PARTITIONS."""
    topic = names[0]
    create_topic(server, topic, partitions=2)
    admin = _admin(server)
    future = admin.create_partitions([NewPartitions(topic, count)])[topic]
    with pytest.raises(KafkaException) as raised:
        future.result(timeout=15)
    assert raised.value.args[0].code() == INVALID_PARTITIONS


def test_create_partitions_kafka_python(server: Server, names: tuple[str, str]) -> None:
    """kafka-python's create_partitions, validate_only and then for real."""
    from kafka.admin import NewPartitions as KpNewPartitions

    topic = names[0]
    create_topic(server, topic)
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=15000)
    try:
        admin.create_partitions({topic: KpNewPartitions(total_count=2)}, validate_only=True)
        rdkafka = _admin(server)
        assert _partition_count(rdkafka, topic) == 1
        admin.create_partitions({topic: KpNewPartitions(total_count=2)})
        wait_for(lambda: _partition_count(rdkafka, topic) == 2)
    finally:
        admin.close()


def test_delete_records_moves_the_log_start(server: Server, names: tuple[str, str]) -> None:
    """DeleteRecords before offset 3 of 5: low watermark 3, and the earliest offset is 3."""
    topic = names[0]
    create_topic(server, topic)
    produce(server, topic, [b"%d" % i for i in range(5)])
    admin = _admin(server)
    deleted = admin.delete_records([TopicPartition(topic, 0, 3)], operation_timeout=15)
    assert next(iter(deleted.values())).result(timeout=15).low_watermark == 3
    earliest = admin.list_offsets({TopicPartition(topic, 0): OffsetSpec.earliest()})
    assert next(iter(earliest.values())).result(timeout=15).offset == 3


def test_delete_records_beyond_the_end(server: Server, names: tuple[str, str]) -> None:
    """DeleteRecords past the high watermark: OFFSET_OUT_OF_RANGE."""
    topic = names[0]
    create_topic(server, topic)
    produce(server, topic, [b"x"])
    admin = _admin(server)
    deleted = admin.delete_records([TopicPartition(topic, 0, 5)], operation_timeout=15)
    with pytest.raises(KafkaException) as raised:
        next(iter(deleted.values())).result(timeout=15)
    assert raised.value.args[0].code() == OFFSET_OUT_OF_RANGE


def test_delete_records_to_the_high_watermark(server: Server, names: tuple[str, str]) -> None:
    """DeleteRecords with offset -1 (OFFSET_END): everything up to the high watermark."""
    topic = names[0]
    create_topic(server, topic)
    produce(server, topic, [b"x", b"y"])
    admin = _admin(server)
    deleted = admin.delete_records([TopicPartition(topic, 0, -1)], operation_timeout=15)
    assert next(iter(deleted.values())).result(timeout=15).low_watermark == 2


def test_elect_leaders_not_needed(server: Server, names: tuple[str, str]) -> None:
    """A preferred-leader election on a partition its preferred leader leads: ELECTION_NOT_NEEDED."""
    topic = names[0]
    create_topic(server, topic)
    admin = _admin(server)
    result = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, 0)]).result(timeout=15)
    assert {tp.partition: error.code() for tp, error in result.items()} == {0: ELECTION_NOT_NEEDED}


def _kp_admin(server: Server) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=15000)


def test_partition_reassignments(server: Server, names: tuple[str, str]) -> None:
    """Nothing is being reassigned; cancelling finds nothing; onto an unknown broker is refused; onto
    the replicas a partition has is accepted (kafka-python)."""
    topic = names[0]
    create_topic(server, topic)
    admin = _kp_admin(server)
    try:
        node = admin.describe_cluster()["controller_id"]
        assert admin.list_partition_reassignments() == {}
        tp = KpTopicPartition(topic, 0)
        errors = {
            "cancel": admin.alter_partition_reassignments({tp: None})[tp],
            "unknown broker": admin.alter_partition_reassignments({tp: [node + 1000]})[tp],
            "same replicas": admin.alter_partition_reassignments({tp: [node]})[tp],
        }
        assert {k: None if v is None else v.errno for k, v in errors.items()} == {
            "cancel": NO_REASSIGNMENT_IN_PROGRESS,
            "unknown broker": INVALID_REPLICA_ASSIGNMENT,
            "same replicas": None,
        }
        assert admin.list_partition_reassignments() == {}
    finally:
        admin.close()


def test_describe_topic_partitions_pages(server: Server, names: tuple[str, str]) -> None:
    """DescribeTopicPartitions (KIP-966) with a limit of 2 partitions: two pages joined by a cursor."""
    topic = names[0]
    create_topic(server, topic, partitions=3)
    admin = _kp_admin(server)
    try:
        first = admin.describe_topic_partitions([topic], response_partition_limit=2)
        assert [p["partition_index"] for p in first["topics"][0]["partitions"]] == [0, 1]
        assert first["next_cursor"] == {"topic_name": topic, "partition_index": 2}
        second = admin.describe_topic_partitions([topic], cursor=first["next_cursor"])
        page = second["topics"][0]
        assert [p["partition_index"] for p in page["partitions"]] == [2]
        assert second["next_cursor"] is None
        assert (page["error_code"], page["is_internal"]) == (0, False)
        partition = page["partitions"][0]
        assert partition["replica_nodes"] == partition["isr_nodes"] == [partition["leader_id"]]
        missing = admin.describe_topic_partitions(["missing-" + topic])["topics"][0]
        assert (missing["error_code"], missing["partitions"]) == (UNKNOWN_TOPIC_OR_PARTITION, [])
    finally:
        admin.close()


def test_describe_log_dirs(server: Server, names: tuple[str, str]) -> None:
    """DescribeLogDirs of one topic: one log dir holding its partition, sized by what was produced."""
    topic = names[0]
    create_topic(server, topic)
    produce(server, topic, [b"x" * 100])
    admin = _kp_admin(server)
    try:
        report = admin.describe_log_dirs({topic: [0]})
    finally:
        admin.close()
    (broker,) = report
    (log_dir,) = broker["log_dirs"]
    partitions = [
        (t["name"], p["partition_index"], p["offset_lag"], p["is_future_key"])
        for t in log_dir["topics"]
        for p in t["partitions"]
    ]
    assert partitions == [(topic, 0, 0, False)]
    assert log_dir["topics"][0]["partitions"][0]["partition_size"] > 100
    assert log_dir["error_code"] == 0 and log_dir["total_bytes"] > 0


def test_share_group_sees_new_partitions(server: Server, names: tuple[str, str]) -> None:
    """A share consumer and a producer, both live while CreatePartitions grows the topic from 1 to 3
    partitions: the producer (its metadata refreshed) writes to the new partitions, and the share
    consumer gets those records."""
    topic, group = names
    create_topic(server, topic)
    earliest_group(server, group)
    consumer = share_consumer(server, group, [topic])
    producer = Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 0, **FAST})
    try:
        producer.produce(topic, b"p0", partition=0)
        assert producer.flush(15) == 0
        first = poll_until(consumer, count_at_least(1))
        assert [(m.partition(), m.value()) for m in first] == [(0, b"p0")]
        admin = _admin(server)
        admin.create_partitions([NewPartitions(topic, 3)], operation_timeout=15)[topic].result(timeout=15)
        wait_for(lambda: _partition_count(admin, topic) == 3)
        wait_for(lambda: len(producer.list_topics(topic, timeout=10).topics[topic].partitions) == 3)
        for p in (1, 2):
            producer.produce(topic, b"p%d" % p, partition=p)
        assert producer.flush(15) == 0
        later = poll_until(consumer, lambda m: {x.partition() for x in m} >= {1, 2}, timeout=45)
        assert sorted((m.partition(), m.value()) for m in later) == [(1, b"p1"), (2, b"p2")]
    finally:
        consumer.close()


def test_delete_records_under_a_share_group(server: Server, names: tuple[str, str]) -> None:
    """DeleteRecords before offset 6 of 10 that no share consumer has read: the group's start offset moves
    to 6 and a consumer gets offsets 6 to 9 only."""
    topic, group = names
    create_topic(server, topic)
    earliest_group(server, group)
    produce(server, topic, [b"%d" % i for i in range(10)])
    admin = _admin(server)
    deleted = admin.delete_records([TopicPartition(topic, 0, 6)], operation_timeout=15)
    assert next(iter(deleted.values())).result(timeout=15).low_watermark == 6
    consumer = share_consumer(server, group, [topic])
    try:
        got = poll_until(consumer, count_at_least(4))
        assert sorted(m.offset() for m in got) == [6, 7, 8, 9]
    finally:
        consumer.close()
