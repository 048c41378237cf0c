"""What Kafka checks record by record on produce, and what it finds inside a compressed batch, against
Kafka and shareq with hand-built batches (raw Produce v11, so the answer's record errors are seen as sent):
a compacted topic refuses records without a key, the timestamp window applies to every record (one older
than its batch's first too), ListOffsets finds the record inside a compressed batch, CreateTopics names
each config's source as DescribeConfigs does, and the internal topics are compacted."""

from __future__ import annotations

import datetime
import re
import struct
import sys
import time
import uuid
from typing import Any

import kio.index as ki
import pytest
from compat_support import FAST, Server, create_topic
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, OffsetSpec, ResourceType
from crc32c import crc32c
from kio_wire import KioConnection

from shareq.log.batch import HEADER_SIZE, Compression
from shareq.log.codecs import compress
from shareq.log.records import Record, encode_batch

pytestmark = pytest.mark.timeout(60)

PRODUCE = sys.modules[ki.load_request_schema(0, 11).__module__]
CREATE_TOPICS = sys.modules[ki.load_request_schema(19, 7).__module__]
INVALID_TIMESTAMP = 32
INVALID_RECORD = 87
RETRIABLE = (3, 6)  # UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER
DYNAMIC_DEFAULT_BROKER_CONFIG = 3
DEFAULT_CONFIG = 5
TEN_SECONDS = datetime.timedelta(seconds=10)


def gzip_batch(batch: bytes) -> bytes:
    """``batch`` (uncompressed, one batch) with its records section gzip-compressed."""
    out = bytearray(batch[:HEADER_SIZE]) + compress(Compression.GZIP, batch[HEADER_SIZE:], None)
    struct.pack_into(">i", out, 8, len(out) - 12)
    struct.pack_into(">h", out, 21, struct.unpack_from(">h", out, 21)[0] | int(Compression.GZIP))
    struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)


def produce_raw(server: Server, topic: str, batch: bytes) -> tuple[int, str | None, list[tuple[int, str]]]:
    """(error code, error message, record errors) of one Produce v11 of ``batch`` to partition 0.

    Right after CreateTopics Kafka's metadata can name a leader before that broker serves the new
    partition: a retriable NOT_LEADER_OR_FOLLOWER or UNKNOWN_TOPIC_OR_PARTITION is sent again, as
    clients do, until a deadline."""
    deadline = time.monotonic() + 15
    while True:
        answer = _produce_once(server, topic, batch)
        if answer[0] not in RETRIABLE or time.monotonic() > deadline:
            return answer
        time.sleep(0.1)


def _produce_once(server: Server, topic: str, batch: bytes) -> tuple[int, str | None, list[tuple[int, str]]]:
    conn = KioConnection(server.bootstrap)
    try:
        response = conn.send(
            PRODUCE.ProduceRequest(
                transactional_id=None,
                acks=-1,
                timeout=TEN_SECONDS,
                topic_data=(
                    PRODUCE.TopicProduceData(
                        name=topic, partition_data=(PRODUCE.PartitionProduceData(index=0, records=batch),)
                    ),
                ),
            )
        )
    finally:
        conn.close()
    p = response.responses[0].partition_responses[0]
    return (
        int(p.error_code),
        p.error_message,
        [(e.batch_index, e.batch_index_error_message) for e in p.record_errors],
    )


@pytest.mark.parametrize("policy", ["compact", "compact,delete"])
@pytest.mark.parametrize("codec", ["none", "gzip"])
def test_compacted_topic_refuses_records_without_a_key(
    server: Server, names: tuple[str, str], policy: str, codec: str
) -> None:
    """INVALID_RECORD naming each keyless record (batch index), Kafka's message word for word; nothing
    is appended, and a keyed batch then goes in at offset 0."""
    topic = names[0]
    create_topic(server, topic, configs={"cleanup.policy": policy})
    batch = encode_batch([Record(key=b"k", value=b"1"), Record(value=b"2"), Record(value=b"3")])
    code, message, errors = produce_raw(server, topic, gzip_batch(batch) if codec == "gzip" else batch)
    why = f"Compacted topic cannot accept message without key in topic partition {topic}-0"
    assert (code, errors) == (INVALID_RECORD, [(1, why), (2, why)])
    assert message == (
        "One or more records have been rejected due to 2 record errors in total, and only showing the "
        f"first three errors at most: [RecordError(batchIndex=1, message='{why}'), "
        f"RecordError(batchIndex=2, message='{why}')]"
    )
    assert produce_raw(server, topic, encode_batch([Record(key=b"k", value=b"1")]))[0] == 0
    admin = AdminClient({"bootstrap.servers": server.bootstrap, **FAST})
    info = admin.list_offsets({TopicPartition(topic, 0): OffsetSpec.latest()})
    assert next(iter(info.values())).result().offset == 1


WINDOW = re.compile(
    r"Timestamp (-?\d+) of message with offset (\d+) is out of range\. "
    r"The timestamp should be within \[(-?\d+), (-?\d+)\]"
)


@pytest.mark.parametrize("codec", ["none", "gzip"])
def test_timestamp_window_checks_every_record(server: Server, names: tuple[str, str], codec: str) -> None:
    """Records older than before.max.ms behind a first record that is in range (the batch header does
    not show them): INVALID_TIMESTAMP, each named with its offset and the window."""
    topic = names[0]
    create_topic(server, topic, configs={"message.timestamp.before.max.ms": "60000"})
    now = int(time.time() * 1000)
    stamps = [now, now - 7_200_000, now - 1000, now - 7_300_000]
    batch = encode_batch(
        [Record(value=b"v%d" % i, timestamp=ts) for i, ts in enumerate(stamps)], base_timestamp=now
    )
    code, message, errors = produce_raw(server, topic, gzip_batch(batch) if codec == "gzip" else batch)
    assert code == INVALID_TIMESTAMP
    assert message == "One or more records have been rejected due to invalid timestamp"
    assert [index for index, _ in errors] == [1, 3]
    for (index, text), stamp in zip(errors, (stamps[1], stamps[3]), strict=True):
        match = WINDOW.fullmatch(text)
        assert match is not None, text
        ts, offset, low, high = (int(g) for g in match.groups())
        assert (ts, offset) == (stamp, index)
        assert high - low == 60_000 + 3_600_000 and abs(low + 60_000 - now) < 30_000


def test_timestamp_window_ahead_names_the_record(server: Server, names: tuple[str, str]) -> None:
    """A record over after.max.ms (default one hour) ahead, second in its batch: only it is named; with no
    before.max.ms the window's low end is the clock minus Long.MAX_VALUE, as Kafka prints it."""
    topic = names[0]
    create_topic(server, topic)
    now = int(time.time() * 1000)
    batch = encode_batch([Record(value=b"a", timestamp=now), Record(value=b"b", timestamp=now + 7_200_000)])
    code, _message, errors = produce_raw(server, topic, batch)
    assert code == INVALID_TIMESTAMP and [i for i, _ in errors] == [1]
    match = WINDOW.fullmatch(errors[0][1])
    assert match is not None
    low = int(match.group(3))
    assert abs(low - (now - (2**63 - 1))) < 30_000


def test_list_offsets_inside_a_compressed_batch(server: Server, names: tuple[str, str]) -> None:
    """ListOffsets MAX_TIMESTAMP and by time find the record inside a gzip batch (timestamps base+100,
    base+400, base+250), not the batch's first offset."""
    topic = names[0]
    create_topic(server, topic)
    base = int(time.time() * 1000) - 60_000
    assert produce_raw(server, topic, encode_batch([Record(value=b"x", timestamp=base)]))[0] == 0
    stamps = [base + 100, base + 400, base + 250]
    batch = encode_batch([Record(value=b"v", timestamp=ts) for ts in stamps])
    assert produce_raw(server, topic, gzip_batch(batch))[0] == 0
    admin = AdminClient({"bootstrap.servers": server.bootstrap, **FAST})

    def at(spec: Any) -> tuple[int, int]:
        info = next(iter(admin.list_offsets({TopicPartition(topic, 0): spec}).values())).result()
        return info.offset, info.timestamp

    assert at(OffsetSpec.max_timestamp()) == (2, base + 400)
    assert at(OffsetSpec.for_timestamp(base + 300)) == (2, base + 400)
    assert at(OffsetSpec.for_timestamp(base + 50)) == (1, base + 100)


def test_create_topics_names_config_sources(server: Server, names: tuple[str, str]) -> None:
    """CreateTopics v7 answers each config with DescribeConfigs' source: the cluster default
    min.insync.replicas=1 (written when the node was formatted) is DYNAMIC_DEFAULT_BROKER_CONFIG."""
    conn = KioConnection(server.bootstrap)
    try:
        response = conn.send(
            CREATE_TOPICS.CreateTopicsRequest(
                topics=(
                    CREATE_TOPICS.CreatableTopic(
                        name=names[0], num_partitions=1, replication_factor=-1, assignments=(), configs=()
                    ),
                ),
                timeout=TEN_SECONDS,
                validate_only=False,
            )
        )
    finally:
        conn.close()
    configs = {c.name: (c.value, c.config_source) for c in response.topics[0].configs}
    assert configs["min.insync.replicas"] == ("1", DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert configs["cleanup.policy"] == ("delete", DEFAULT_CONFIG)
    assert configs["segment.bytes"] == ("1073741824", DEFAULT_CONFIG)


def test_internal_topics_are_compacted(server: Server, names: tuple[str, str]) -> None:
    """__consumer_offsets and __transaction_state carry the configs Kafka creates them with."""
    topic, group = names
    create_topic(server, topic)
    tid = f"t-{uuid.uuid4()}"
    producer = Producer({"bootstrap.servers": server.bootstrap, "transactional.id": tid, **FAST})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, b"v", partition=0)
    producer.commit_transaction(30)
    consumer = Consumer({"bootstrap.servers": server.bootstrap, "group.id": group, **FAST})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
    finally:
        consumer.close()
    admin = AdminClient({"bootstrap.servers": server.bootstrap, **FAST})

    def overrides(name: str) -> dict[str, str]:
        resource = ConfigResource(ResourceType.TOPIC, name)
        entries = admin.describe_configs([resource])[resource].result(timeout=15)
        return {k: e.value for k, e in entries.items() if e.source == 1}

    assert overrides("__consumer_offsets") == {
        "cleanup.policy": "compact",
        "compression.type": "producer",
        "segment.bytes": "104857600",
    }
    state = overrides("__transaction_state")
    # transaction.state.log.min.isr: the Kafka test node sets 1; Kafka's default (and shareq's) is 2.
    state.pop("min.insync.replicas")
    assert state == {
        "cleanup.policy": "compact",
        "compression.type": "uncompressed",
        "segment.bytes": "104857600",
        "unclean.leader.election.enable": "false",
    }
