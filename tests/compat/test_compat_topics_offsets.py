"""ListOffsets, Metadata, CreateTopics and ApiVersions through librdkafka, kafka-python and raw requests,
against Kafka and shareq."""

from __future__ import annotations

import socket
import struct
import sys
import time
from collections.abc import Iterator

import kio.index as ki
import pytest
from compat_support import FAST, Server, create_topic, produce
from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition
from kio_wire import KioConnection, recv_frame

pytestmark = pytest.mark.timeout(60)

API_VERSIONS = sys.modules[ki.load_request_schema(18, 3).__module__]
METADATA = sys.modules[ki.load_request_schema(3, 12).__module__]
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_TOPIC = 17
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_CONFIG = 40
UNSUPPORTED_VERSION = 35


class Timestamped:
    """A topic with three records whose timestamps are base+100, base+400, base+250."""

    def __init__(self, server: Server, topic: str) -> None:
        self.server = server
        self.topic = topic
        self.base = int(time.time() * 1000) - 60_000
        create_topic(server, topic)
        produce(
            server,
            topic,
            [b"t0", b"t1", b"t2"],
            timestamps=[self.base + 100, self.base + 400, self.base + 250],
        )

    def list_offset(self, spec: OffsetSpec) -> tuple[int, int, int | None]:
        """(offset, timestamp, leader epoch) from librdkafka's AdminClient.list_offsets."""
        admin = AdminClient({"bootstrap.servers": self.server.bootstrap, **FAST})
        future = admin.list_offsets({TopicPartition(self.topic, 0): spec}, request_timeout=15)
        info = next(iter(future.values())).result()
        return info.offset, info.timestamp, info.leader_epoch


@pytest.fixture
def timestamped(server: Server, names: tuple[str, str]) -> Timestamped:
    return Timestamped(server, names[0])


def test_list_offsets_latest(timestamped: Timestamped) -> None:
    """ListOffsets -1 (latest): the high watermark, 3."""
    assert timestamped.list_offset(OffsetSpec.latest())[0] == 3


def test_list_offsets_earliest(timestamped: Timestamped) -> None:
    """ListOffsets -2 (earliest): 0."""
    assert timestamped.list_offset(OffsetSpec.earliest())[0] == 0


def test_list_offsets_max_timestamp(timestamped: Timestamped) -> None:
    """ListOffsets -3 (max timestamp): offset 1, whose timestamp base+400 is the largest."""
    assert timestamped.list_offset(OffsetSpec.max_timestamp())[:2] == (1, timestamped.base + 400)


def test_list_offsets_by_time(timestamped: Timestamped) -> None:
    """ListOffsets by time base+300: the first offset whose timestamp is at or after it (1, base+400)."""
    assert timestamped.list_offset(OffsetSpec.for_timestamp(timestamped.base + 300))[:2] == (
        1,
        timestamped.base + 400,
    )


def test_list_offsets_by_time_before_all(timestamped: Timestamped) -> None:
    """ListOffsets by a time before every record: offset 0 and its timestamp."""
    assert timestamped.list_offset(OffsetSpec.for_timestamp(timestamped.base))[:2] == (
        0,
        timestamped.base + 100,
    )


def test_list_offsets_by_time_after_all(timestamped: Timestamped) -> None:
    """ListOffsets by a time after every record: offset -1, timestamp -1."""
    assert timestamped.list_offset(OffsetSpec.for_timestamp(timestamped.base + 1000))[:2] == (-1, -1)


def test_list_offsets_by_time_after_all_has_no_leader_epoch(timestamped: Timestamped) -> None:
    """ListOffsets by a time after every record carries no leader epoch (-1, None in librdkafka)."""
    assert timestamped.list_offset(OffsetSpec.for_timestamp(timestamped.base + 1000))[2] is None


def test_kafka_python_offsets(timestamped: Timestamped) -> None:
    """kafka-python's beginning_offsets, end_offsets and offsets_for_times agree with the records."""
    consumer = KafkaConsumer(bootstrap_servers=timestamped.server.bootstrap, request_timeout_ms=15000)
    try:
        tp = KpTopicPartition(timestamped.topic, 0)
        assert consumer.beginning_offsets([tp]) == {tp: 0}
        assert consumer.end_offsets([tp]) == {tp: 3}
        found = consumer.offsets_for_times({tp: timestamped.base + 300})[tp]
        assert (found.offset, found.timestamp) == (1, timestamped.base + 400)
    finally:
        consumer.close()


def test_metadata_describes_topic(server: Server, names: tuple[str, str]) -> None:
    """A 3-partition topic: a topic id, every partition led by a listed broker, replicas and ISR on it."""
    create_topic(server, names[0], partitions=3)
    admin = AdminClient({"bootstrap.servers": server.bootstrap, **FAST})
    from confluent_kafka import TopicCollection

    description = admin.describe_topics(TopicCollection([names[0]]))[names[0]].result(timeout=15)
    cluster = admin.describe_cluster().result(timeout=15)
    brokers = {n.id for n in cluster.nodes}
    assert description.topic_id is not None
    assert [p.id for p in description.partitions] == [0, 1, 2]
    for p in description.partitions:
        assert p.leader.id in brokers
        assert [r.id for r in p.replicas] == [p.leader.id]
        assert [r.id for r in p.isr] == [p.leader.id]


def test_describe_cluster(server: Server) -> None:
    """DescribeCluster through librdkafka: a 22-character cluster id, one node on loopback, a controller."""
    admin = AdminClient({"bootstrap.servers": server.bootstrap, **FAST})
    cluster = admin.describe_cluster().result(timeout=15)
    assert len(cluster.cluster_id) == 22
    assert [(n.id, n.host) for n in cluster.nodes] == [(0, "127.0.0.1")]
    assert cluster.controller is not None


@pytest.fixture
def kio_conn(server: Server) -> Iterator[KioConnection]:
    conn = KioConnection(server.bootstrap)
    try:
        yield conn
    finally:
        conn.close()


def _metadata(conn: KioConnection, topic: str, auto_create: bool) -> object:
    return conn.send(
        METADATA.MetadataRequest(
            topics=(METADATA.MetadataRequestTopic(topic_id=None, name=topic),),
            allow_auto_topic_creation=auto_create,
            include_topic_authorized_operations=False,
        )
    )


def test_metadata_unknown_topic(kio_conn: KioConnection, names: tuple[str, str]) -> None:
    """Metadata v12 for a topic that does not exist, auto-creation off: UNKNOWN_TOPIC_OR_PARTITION."""
    r = _metadata(kio_conn, names[0], auto_create=False)
    assert [int(t.error_code) for t in r.topics] == [UNKNOWN_TOPIC_OR_PARTITION]  # type: ignore[attr-defined]


def test_metadata_auto_creates_topic(kio_conn: KioConnection, names: tuple[str, str]) -> None:
    """Metadata v12 with auto-creation on (the broker default): the topic comes to exist with
    num.partitions (1) partitions."""
    _metadata(kio_conn, names[0], auto_create=True)
    deadline = time.monotonic() + 15
    while True:
        r = _metadata(kio_conn, names[0], auto_create=False)
        topic = r.topics[0]  # type: ignore[attr-defined]
        if topic.error_code == 0 and all(p.leader_id >= 0 for p in topic.partitions):
            break
        assert time.monotonic() < deadline, topic
        time.sleep(0.1)
    assert len(topic.partitions) == 1


@pytest.mark.parametrize(
    ("partitions", "replication", "configs", "error"),
    [
        (0, 1, {}, INVALID_PARTITIONS),
        (1, 2, {}, INVALID_REPLICATION_FACTOR),
        (1, 1, {"retention.ms": "forever"}, INVALID_CONFIG),
    ],
    ids=["zero-partitions", "replication-above-nodes", "bad-config-value"],
)
def test_create_topic_rejected(
    server: Server,
    names: tuple[str, str],
    partitions: int,
    replication: int,
    configs: dict[str, str],
    error: int,
) -> None:
    """CreateTopics through librdkafka with a bad partition count, replication factor or config value."""
    admin = AdminClient({"bootstrap.servers": server.bootstrap, **FAST})
    future = admin.create_topics([NewTopic(names[0], partitions, replication, config=configs)])[names[0]]
    with pytest.raises(KafkaException) as raised:
        future.result(timeout=15)
    assert raised.value.args[0].code() == error


def test_create_topic_invalid_name(server: Server) -> None:
    """CreateTopics with a name Kafka cannot store (a space, a slash): INVALID_TOPIC_EXCEPTION."""
    admin = AdminClient({"bootstrap.servers": server.bootstrap, **FAST})
    future = admin.create_topics([NewTopic("bad name/x", 1, 1)])["bad name/x"]
    with pytest.raises(KafkaException) as raised:
        future.result(timeout=15)
    assert raised.value.args[0].code() == INVALID_TOPIC


def test_create_existing_topic(server: Server, names: tuple[str, str]) -> None:
    """CreateTopics of a name that exists: TOPIC_ALREADY_EXISTS."""
    create_topic(server, names[0])
    admin = AdminClient({"bootstrap.servers": server.bootstrap, **FAST})
    future = admin.create_topics([NewTopic(names[0], 1, 1)])[names[0]]
    with pytest.raises(KafkaException) as raised:
        future.result(timeout=15)
    assert raised.value.args[0].code() == TOPIC_ALREADY_EXISTS


def _api_versions(conn: KioConnection) -> object:
    return conn.send(
        API_VERSIONS.ApiVersionsRequest(client_software_name="compat-test", client_software_version="1")
    )


def test_api_versions_share_apis(kio_conn: KioConnection) -> None:
    """ApiVersions v3 advertises the share-group APIs at the versions librdkafka speaks (v1), and Produce v3+
    and Fetch v4+, without which librdkafka refuses to share-fetch."""
    r = _api_versions(kio_conn)
    ranges = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in r.api_keys}  # type: ignore[attr-defined]
    for key in (76, 77, 78, 79):
        assert ranges[key][0] <= 1 <= ranges[key][1], (key, ranges[key])
    for key in (90, 91, 92):
        assert key in ranges, key
    assert ranges[0][1] >= 3 and ranges[1][1] >= 4


def test_api_versions_features(kio_conn: KioConnection, server: Server) -> None:
    """ApiVersions v3 names the finalized features: share.version 2, group.version 1, transaction.version 2,
    and a metadata.version."""
    r = _api_versions(kio_conn)
    finalized = {f.name: int(f.max_version_level) for f in r.finalized_features}  # type: ignore[attr-defined]
    assert "metadata.version" in finalized
    levels = {k: finalized.get(k) for k in ("share.version", "group.version", "transaction.version")}
    assert levels == {"share.version": 2, "group.version": 1, "transaction.version": 2}


def test_api_versions_unsupported_version(server: Server) -> None:
    """ApiVersions at a version the broker does not know: a v0 reply with UNSUPPORTED_VERSION that still lists
    ApiVersions (18) with its versions."""
    host, port = server.bootstrap.split(",")[0].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        client = b"compat"
        # request header v2 (ApiVersions v3+ is flexible): api key, version, correlation id, client id,
        # no tagged fields; an empty body
        header = struct.pack(">hhih", 18, 99, 7, len(client)) + client + b"\x00"
        sock.sendall(struct.pack(">i", len(header)) + header)
        reply = recv_frame(sock)
    correlation, error, count = struct.unpack_from(">ihi", reply)
    keys = {struct.unpack_from(">hhh", reply, 10 + 6 * i)[0] for i in range(count)}
    assert (correlation, error) == (7, UNSUPPORTED_VERSION)
    assert 18 in keys
