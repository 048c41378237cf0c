"""A Fetch answers with the log's bytes up to the byte limits, the last batch cut short (Kafka's
LogSegment.read), against Kafka and shareq: raw Fetch v12 of hand-built batches of one known size
(partition and response limits off batch boundaries, the first batch whole above them, the last
stable offset under read_committed), then librdkafka, kafka-python, Kafka's Java consumer and
shareq's own consumer reading a topic whose every answer ends in a cut batch."""

from __future__ import annotations

import datetime
import sys
import time

import kio.index as ki
import pytest
from compat_support import FAST, Server, create_topic
from confluent_kafka import Consumer, Producer, TopicPartition
from kio_wire import KioConnection

from kafka_harness import run_tool
from shareq.client import Consumer as ShareqConsumer
from shareq.client.records import iter_record_batches
from shareq.log.records import Record, encode_batch

pytestmark = pytest.mark.timeout(90)

FETCH = sys.modules[ki.load_request_schema(1, 12).__module__]
PRODUCE = sys.modules[ki.load_request_schema(0, 11).__module__]
RETRIABLE = (3, 6)  # UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER
BATCHES = 6  # per partition
RECORDS = 10  # per batch


NOW_MS = int(time.time() * 1000)  # not older: Kafka rolls a segment when record times jump by segment.ms


def _batch(partition: int, index: int) -> bytes:
    records = [Record(value=b"p%d-b%d-r%d-" % (partition, index, i) + b"x" * 60) for i in range(RECORDS)]
    return encode_batch(records, base_timestamp=NOW_MS)


SIZE = len(_batch(0, 0))
assert all(len(_batch(p, i)) == SIZE for p in (0, 1) for i in range(BATCHES))


def _fill(server: Server, topic: str, partitions: int = 2) -> None:
    create_topic(server, topic, partitions)
    for p in range(partitions):
        for i in range(BATCHES):
            _produce(server, topic, p, _batch(p, i))


def _produce(server: Server, topic: str, partition: int, batch: bytes) -> None:
    """One Produce v11 of ``batch`` (sent again while the new topic's leader is not serving it yet)."""
    conn = KioConnection(server.bootstrap)
    try:
        deadline = time.monotonic() + 15
        while True:
            data = PRODUCE.PartitionProduceData(index=partition, records=batch)
            response = conn.send(
                PRODUCE.ProduceRequest(
                    transactional_id=None,
                    acks=-1,
                    timeout=datetime.timedelta(seconds=10),
                    topic_data=(PRODUCE.TopicProduceData(name=topic, partition_data=(data,)),),
                )
            )
            answer = response.responses[0].partition_responses[0]
            if answer.error_code not in RETRIABLE or time.monotonic() > deadline:
                assert answer.error_code == 0, answer
                return
            time.sleep(0.1)
    finally:
        conn.close()


def _fetch(
    server: Server,
    topic: str,
    *,
    max_bytes: int,
    partition_max: int,
    partitions: tuple[int, ...] = (0, 1),
    offset: int = 0,
    isolation_level: int = 0,
) -> list[bytes]:
    """The records bytes of each partition in one Fetch v12 (in request order)."""
    conn = KioConnection(server.bootstrap)
    try:
        response = conn.send(
            FETCH.FetchRequest(
                cluster_id=None,
                max_wait=datetime.timedelta(milliseconds=0),
                min_bytes=1,
                max_bytes=max_bytes,
                isolation_level=isolation_level,
                topics=(
                    FETCH.FetchTopic(
                        topic=topic,
                        partitions=tuple(
                            FETCH.FetchPartition(
                                partition=p, fetch_offset=offset, partition_max_bytes=partition_max
                            )
                            for p in partitions
                        ),
                    ),
                ),
                forgotten_topics_data=(),
            )
        )
    finally:
        conn.close()
    out = []
    for p in response.responses[0].partitions:
        assert p.error_code == 0, p
        out.append(bytes(p.records or b""))
    return out


def _whole(records: bytes) -> list[tuple[int, int]]:
    """(first, last) offsets of the whole batches, as a client decodes them (the cut one dropped)."""
    return [(b.header.base_offset, b.header.last_offset) for b in iter_record_batches(records)]


def test_fetch_cuts_the_last_batch_at_the_partition_and_response_limits(
    server: Server, names: tuple[str, str]
) -> None:
    topic, _ = names
    _fill(server, topic)
    half = SIZE // 2
    big = 10 * BATCHES * SIZE
    cases = [
        # (max_bytes, partition_max) -> bytes of partition 0, of partition 1
        ((big, 2 * SIZE + half), (2 * SIZE + half, 2 * SIZE + half)),
        ((big, 2 * SIZE + 1), (2 * SIZE + 1, 2 * SIZE + 1)),
        ((big, SIZE - 7), (SIZE, 0)),  # the first batch whole above the limit, only in the first partition
        ((big, 100 * SIZE), (BATCHES * SIZE, BATCHES * SIZE)),  # the log end
        ((3 * SIZE + half - 5, 2 * SIZE + half), (2 * SIZE + half, 0)),  # less than a batch left: nothing
        ((4 * SIZE, 2 * SIZE + half), (2 * SIZE + half, 2 * SIZE - half)),  # what is left, cut
        ((1, big), (SIZE, 0)),
    ]
    for (max_bytes, partition_max), expected in cases:
        got = _fetch(server, topic, max_bytes=max_bytes, partition_max=partition_max)
        assert tuple(len(r) for r in got) == expected, (max_bytes, partition_max)
        for records in got:
            assert _whole(records) == [
                (i * RECORDS, i * RECORDS + RECORDS - 1) for i in range(len(records) // SIZE)
            ]
    # from the middle of a batch: the slice starts at that batch
    (mid,) = _fetch(server, topic, max_bytes=big, partition_max=SIZE + 5, partitions=(0,), offset=RECORDS + 3)
    assert len(mid) == SIZE + 5 and _whole(mid) == [(RECORDS, 2 * RECORDS - 1)]


def test_read_committed_fetch_is_cut_before_the_last_stable_offset(
    server: Server, names: tuple[str, str]
) -> None:
    """Three plain batches, then an open transaction: read_committed answers up to the limit, cut inside
    a batch below the last stable offset, and never with a byte of the open transaction's batches."""
    topic, _ = names
    create_topic(server, topic)
    for i in range(3):
        _produce(server, topic, 0, _batch(0, i))
    producer = Producer({"bootstrap.servers": server.bootstrap, "transactional.id": f"t-{topic}", **FAST})
    producer.init_transactions(30)
    producer.begin_transaction()
    failed: list[object] = []
    for i in range(50):
        producer.produce(
            topic, value=b"open%d" % i + b"y" * 80, partition=0, on_delivery=lambda e, _m: failed.append(e)
        )
    producer.flush(30)
    assert failed == [None] * 50
    try:
        (everything,) = _fetch(server, topic, max_bytes=1 << 20, partition_max=1 << 20, partitions=(0,))
        assert len(everything) > 3 * SIZE + 200  # the open transaction's batch is there, uncommitted
        for limit, expected in (
            (2 * SIZE + 100, 2 * SIZE + 100),
            (3 * SIZE - 1, 3 * SIZE - 1),
            (3 * SIZE, 3 * SIZE),
            (3 * SIZE + 10, 3 * SIZE),
            (3 * SIZE + 200, 3 * SIZE),
            (1 << 20, 3 * SIZE),
        ):
            (records,) = _fetch(
                server, topic, max_bytes=1 << 20, partition_max=limit, partitions=(0,), isolation_level=1
            )
            assert len(records) == expected, limit
            assert records == everything[: len(records)]
    finally:
        producer.abort_transaction(30)


def _values() -> list[bytes]:
    return [b"p0-b%d-r%d-" % (i, r) + b"x" * 60 for i in range(BATCHES) for r in range(RECORDS)]


LIMIT = 2 * SIZE + SIZE // 3  # every answer ends in a cut batch


def test_clients_read_every_record_across_cut_batches(server: Server, names: tuple[str, str]) -> None:
    """librdkafka, kafka-python and shareq's consumer, by assign() with a partition limit off batch
    boundaries: every record once, in order."""
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTopicPartition

    topic, _ = names
    _fill(server, topic, partitions=1)
    want = _values()
    total = len(want)

    rd = Consumer(
        {
            "bootstrap.servers": server.bootstrap,
            "group.id": f"g-{topic}",
            "enable.auto.commit": False,
            "fetch.message.max.bytes": LIMIT,
            "fetch.wait.max.ms": 50,
            **FAST,
        }
    )
    try:
        rd.assign([TopicPartition(topic, 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < total and time.monotonic() < deadline:
            m = rd.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
        assert got == want
    finally:
        rd.close()

    kp = KafkaConsumer(
        bootstrap_servers=server.bootstrap,
        enable_auto_commit=False,
        max_partition_fetch_bytes=LIMIT,
        fetch_max_wait_ms=50,
        request_timeout_ms=15000,
    )
    try:
        kp.assign([KTopicPartition(topic, 0)])
        kp.seek(KTopicPartition(topic, 0), 0)
        got = []
        deadline = time.monotonic() + 30
        while len(got) < total and time.monotonic() < deadline:
            for records in kp.poll(timeout_ms=500).values():
                got += [r.value for r in records]
        assert got == want
    finally:
        kp.close()

    with ShareqConsumer(server.bootstrap, max_partition_bytes=LIMIT, max_wait_ms=50) as own:
        own.assign({(topic, 0): 0})
        got = []
        deadline = time.monotonic() + 30
        while len(got) < total and time.monotonic() < deadline:
            got += [r.value for r in own.poll(0.5)]  # type: ignore[misc]
        assert got == want
        assert own.position(topic, 0) == total


@pytest.mark.usefixtures("java_tools")
def test_java_consumer_reads_every_record_across_cut_batches(server: Server, names: tuple[str, str]) -> None:
    """Kafka's Java consumer (ConsoleConsumer on one partition, by assign()) with the same limit."""
    topic, _ = names
    _fill(server, topic, partitions=1)
    result = run_tool(
        "org.apache.kafka.tools.consumer.ConsoleConsumer",
        *("--bootstrap-server", server.bootstrap, "--topic", topic, "--partition", "0"),
        *("--offset", "earliest", "--max-messages", str(BATCHES * RECORDS), "--timeout-ms", "20000"),
        *("--command-property", f"max.partition.fetch.bytes={LIMIT}"),
        timeout=60,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.splitlines() == [v.decode() for v in _values()]
