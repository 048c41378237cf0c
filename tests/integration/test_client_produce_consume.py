"""Our Producer and Consumer against a real broker, cross-checked with confluent-kafka in both directions."""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer as CKConsumer
from confluent_kafka import Producer as CKProducer
from confluent_kafka import TopicPartition
from kio.schema.errors import ErrorCode

from shareq.client import Admin, Cluster, Consumer, KafkaError, OffsetSpec, Producer, partition_for_key
from shareq.client.records import batch_headers
from shareq.embedded import EmbeddedBroker
from shareq.log import Compression

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as b:
        yield b


@pytest.fixture(scope="module")
def admin(broker: EmbeddedBroker) -> Iterator[Admin]:
    with Admin(broker.bootstrap) as a:
        yield a


def read_all(bootstrap: str, topic: str, partitions: int, expected: int, timeout: float = 20.0) -> list:
    with Consumer(bootstrap) as c:
        c.assign({(topic, p): OffsetSpec.EARLIEST for p in range(partitions)})
        out: list = []
        deadline = time.monotonic() + timeout
        while len(out) < expected and time.monotonic() < deadline:
            out += c.poll(0.5)
        return out


def raw_compression(bootstrap: str, topic: str, partitions: int) -> set[Compression]:
    """The codecs of the batches stored in ``topic``, read with a raw Fetch (no decoding)."""
    cluster = Cluster(bootstrap)
    try:
        info = cluster.topic(topic)
        conn = cluster.connection(info.partition(0).leader)
        _v, m = conn.module(1)
        request = m.FetchRequest(
            max_wait=datetime.timedelta(0),
            min_bytes=1,
            topics=(
                m.FetchTopic(
                    topic_id=info.topic_id,
                    partitions=tuple(
                        m.FetchPartition(partition=p, fetch_offset=0, partition_max_bytes=1 << 20)
                        for p in range(partitions)
                    ),
                ),
            ),
            forgotten_topics_data=(),
        )
        response = conn.send(request)
        return {
            h.compression for t in response.responses for p in t.partitions for h in batch_headers(p.records)
        }
    finally:
        cluster.close()


def test_round_trip_keys_headers_timestamps(broker: EmbeddedBroker, admin: Admin) -> None:
    admin.create_topic("rt", 3)
    with Producer(broker.bootstrap) as p:
        futures = [
            p.send(
                "rt",
                b"v%d" % i,
                key=b"k%d" % i,
                headers=[("h", b"%d" % i), ("n", None)],
                timestamp_ms=1_700_000_000_000 + i,
            )
            for i in range(30)
        ]
        metas = p.flush()
    assert [f.result().offset for f in futures] == [m.offset for m in metas]
    for i, m in enumerate(metas):
        assert m.partition == partition_for_key(b"k%d" % i, 3)
    records = read_all(broker.bootstrap, "rt", 3, 30)
    by_value = {r.value: r for r in records}
    assert len(records) == 30
    for i in range(30):
        r = by_value[b"v%d" % i]
        assert r.key == b"k%d" % i
        assert r.headers == (("h", b"%d" % i), ("n", None))
        assert r.timestamp == 1_700_000_000_000 + i
        assert (r.partition, r.offset) == (metas[i].partition, metas[i].offset)
    # offsets within a partition are dense and ordered by send order
    for part in range(3):
        offs = [m.offset for m in metas if m.partition == part]
        assert offs == list(range(len(offs)))


def test_idempotent_batches_and_explicit_partitions(broker: EmbeddedBroker, admin: Admin) -> None:
    admin.create_topic("idem", 2)
    with Producer(broker.bootstrap, max_batch_records=7) as p:
        for i in range(50):
            p.send("idem", b"%d" % i, partition=i % 2)
        metas = p.flush()
        for i in range(10):
            p.send("idem", b"x%d" % i, partition=0)
        more = p.flush()
    assert [m.offset for m in metas if m.partition == 0] == list(range(25))
    assert [m.offset for m in more] == list(range(25, 35))
    latest = admin.list_offsets("idem", spec=OffsetSpec.LATEST)
    assert (latest[0].offset, latest[1].offset) == (35, 25)


def test_keyless_records_stick_to_one_partition_per_batch(broker: EmbeddedBroker, admin: Admin) -> None:
    admin.create_topic("sticky", 4)
    with Producer(broker.bootstrap) as p:
        for i in range(20):
            p.send("sticky", b"%d" % i)
        metas = p.flush()
    assert len({m.partition for m in metas}) == 1


def test_confluent_consumer_reads_what_we_produced(broker: EmbeddedBroker, admin: Admin) -> None:
    admin.create_topic("ours-to-ck", 2)
    with Producer(broker.bootstrap) as p:
        for i in range(40):
            p.send("ours-to-ck", b"value-%d" % i, key=b"key-%d" % i, headers=[("idx", b"%d" % i)])
        p.flush()
    ck = CKConsumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "ck-reader", "enable.auto.commit": False}
    )
    try:
        ck.assign([TopicPartition("ours-to-ck", p, 0) for p in range(2)])
        got = {}
        deadline = time.monotonic() + 20
        while len(got) < 40 and time.monotonic() < deadline:
            msg = ck.poll(0.5)
            if msg is None or msg.error():
                continue
            got[msg.key()] = (msg.value(), msg.headers(), msg.partition())
    finally:
        ck.close()
    assert len(got) == 40
    for i in range(40):
        value, headers, partition = got[b"key-%d" % i]
        assert value == b"value-%d" % i
        assert headers == [("idx", b"%d" % i)]
        assert partition == partition_for_key(b"key-%d" % i, 2)


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_we_read_what_confluent_produced(broker: EmbeddedBroker, admin: Admin, codec: str) -> None:
    topic = f"ck-to-ours-{codec}"
    admin.create_topic(topic, 3)
    ck = CKProducer(
        {
            "bootstrap.servers": broker.bootstrap,
            "compression.type": codec,
            "partitioner": "murmur2_random",
            "linger.ms": 5,
        }
    )
    delivered: dict[bytes, tuple[int, int]] = {}

    def on_delivery(err: object, msg: object) -> None:
        assert err is None
        delivered[msg.key()] = (msg.partition(), msg.offset())  # type: ignore[attr-defined]

    for i in range(60):
        ck.produce(
            topic,
            value=(b"payload-%d-" % i) * 20,
            key=b"k%d" % i,
            headers={"i": b"%d" % i},
            on_delivery=on_delivery,
        )
    assert ck.flush(20) == 0
    assert raw_compression(broker.bootstrap, topic, 3) == {Compression[codec.upper()]}
    records = read_all(broker.bootstrap, topic, 3, 60)
    assert len(records) == 60
    for r in records:
        i = int(r.key[1:])
        assert r.value == (b"payload-%d-" % i) * 20
        assert r.headers == (("i", b"%d" % i),)
        # librdkafka's murmur2 partitioner agrees with ours
        assert (r.partition, r.offset) == delivered[r.key]
        assert r.partition == partition_for_key(r.key, 3)


def test_stateless_fetch_reports_bounds(broker: EmbeddedBroker, admin: Admin) -> None:
    admin.create_topic("bounds", 1)
    with Producer(broker.bootstrap) as p:
        for i in range(10):
            p.send("bounds", b"%d" % i)
        p.flush()
    with Consumer(broker.bootstrap) as c:
        result = c.fetch("bounds", 0, 4)
        assert [r.offset for r in result.records] == list(range(4, 10))
        assert (result.high_watermark, result.log_start_offset, result.next_offset) == (10, 0, 10)
        assert c.fetch("bounds", 0, 10).records == ()


def test_future_result_sends_a_buffered_record(broker: EmbeddedBroker, admin: Admin) -> None:
    admin.create_topic("lazy", 1)
    with Producer(broker.bootstrap) as p:
        first = p.send("lazy", b"a")
        second = p.send("lazy", b"b")
        assert not first.done()
        assert first.result().offset == 0  # sends everything buffered
        assert second.done() and second.result().offset == 1
        assert [m.offset for m in p.flush()] == [0, 1]
        assert p.flush() == []


def test_send_to_missing_topic_or_partition_raises(broker: EmbeddedBroker, admin: Admin) -> None:
    admin.create_topic("one", 1)
    with Producer(broker.bootstrap) as p:
        with pytest.raises(KafkaError) as info:
            p.send("never-created", b"x")
        assert info.value.code is ErrorCode.unknown_topic_or_partition
        with pytest.raises(KafkaError):
            p.send("one", b"x", partition=3)
