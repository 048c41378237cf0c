"""A compacted topic through the wire: after the cleaner runs, a consumer reading from the start sees
each key's latest value once, at the offset it was produced at, and no tombstone past
delete.retention.ms; a share group on the topic acquires only what the log still holds."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, ShareConsumer, TopicPartition

from shareq.client import Admin
from shareq.embedded import EmbeddedBroker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

CONFIG = {
    "log.cleaner.backoff.ms": "50",
    "log.segment.bytes": "8192",
    "share.coordinator.state.topic.num.partitions": "1",
    "group.share.auto.offset.reset": "earliest",
}
TOPIC_CONFIG = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "0"}
KEYS = 100


def produce(bootstrap: str, records: list[tuple[bytes, bytes | None]]) -> list[int]:
    """Produce in order; the offset each record got."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 4000})
    offsets: dict[int, int] = {}
    for i, (key, value) in enumerate(records):
        producer.produce(
            "c",
            key=key,
            value=value,
            partition=0,
            on_delivery=lambda e, m, i=i: offsets.__setitem__(i, m.offset()),
        )
        producer.poll(0)
    assert producer.flush(30) == 0
    return [offsets[i] for i in range(len(records))]


def read_all(bootstrap: str, end: int) -> list[tuple[int, bytes, bytes | None]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False})
    out: list[tuple[int, bytes, bytes | None]] = []
    try:
        consumer.assign([TopicPartition("c", 0, 0)])
        deadline = time.monotonic() + 20
        while (not out or out[-1][0] < end - 1) and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                out.append((message.offset(), message.key(), message.value()))
    finally:
        consumer.close()
    return out


def test_compacted_topic_keeps_the_latest_value_of_each_key(tmp_path: Path) -> None:
    with EmbeddedBroker(tmp_path / "d", CONFIG) as broker, Admin(broker.bootstrap) as admin:
        admin.create_topic("c", 1, configs=TOPIC_CONFIG)
        records: list[tuple[bytes, bytes | None]] = [
            (b"k%d" % (i % KEYS), b"v%d" % i + b"." * 40) for i in range(3000)
        ]
        records += [(b"k%d" % k, None) for k in range(10)]  # tombstones
        records += [(b"filler%d" % i, b"f" * 40) for i in range(300)]  # closes the tombstones' segment
        offsets = produce(broker.bootstrap, records)
        end = offsets[-1] + 1
        latest: dict[bytes, tuple[int, bytes | None]] = {}
        for (key, value), offset in zip(records, offsets, strict=True):
            latest[key] = (offset, value)
        wanted = sorted((o, k, v) for k, (o, v) in latest.items() if v is not None)

        deadline = time.monotonic() + 40
        read = read_all(broker.bootstrap, end)
        while time.monotonic() < deadline:
            survivors = [r for r in read if not r[1].startswith(b"filler")]
            if len(survivors) == KEYS - 10:
                break
            time.sleep(0.2)
            read = read_all(broker.bootstrap, end)
        keyed = [r for r in read if not r[1].startswith(b"filler")]
        assert keyed == [w for w in wanted if not w[1].startswith(b"filler")]
        # Fillers in the active segment stay as written; none was moved.
        for offset, key, value in read:
            assert latest[key] == (offset, value) or key.startswith(b"filler")


def test_share_group_on_a_compacted_topic(tmp_path: Path) -> None:
    """After cleaning, a share consumer from the start gets each surviving record exactly once."""
    with EmbeddedBroker(tmp_path / "d", CONFIG) as broker, Admin(broker.bootstrap) as admin:
        admin.create_topic("c", 1, configs=TOPIC_CONFIG)
        records: list[tuple[bytes, bytes | None]] = [
            (b"k%d" % (i % 20), b"v%d" % i + b"." * 60) for i in range(800)
        ]
        offsets = produce(broker.bootstrap, records)
        end = offsets[-1] + 1
        deadline = time.monotonic() + 40
        while len(read_all(broker.bootstrap, end)) > 200 and time.monotonic() < deadline:
            time.sleep(0.2)
        expected = {o for o, _k, _v in read_all(broker.bootstrap, end)}
        assert len(expected) < 400
        consumer: Any = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": "s"})
        consumer.subscribe(["c"])
        got: list[int] = []
        try:
            deadline = time.monotonic() + 30
            while set(got) != expected and time.monotonic() < deadline:
                got += [m.offset() for m in consumer.poll(0.5) if m.error() is None]
        finally:
            consumer.close()
        assert sorted(got) == sorted(expected)


@pytest.mark.timeout(180)  # four kills and restarts, each waiting for a cleaning: slow on a busy box
def test_sigkill_during_cleaning_loses_no_latest_value(tmp_path: Path) -> None:
    """The broker is killed (SIGKILL) while its cleaner writes, four times, with more overwrites after each
    restart: every key's latest value is still there, at its offset, and no cleaning is left behind."""
    from broker_harness import BrokerProcess

    broker = BrokerProcess(
        tmp_path / "data",
        "log.cleaner.backoff.ms=20",
        "log.segment.bytes=65536",
        "share.coordinator.state.topic.num.partitions=1",
    )
    broker.start()
    latest: dict[bytes, tuple[int, bytes | None]] = {}
    caught = 0
    try:
        with Admin(broker.bootstrap) as admin:
            admin.create_topic("c", 1, configs={**TOPIC_CONFIG, "delete.retention.ms": "86400000"})
        for round_ in range(4):
            records: list[tuple[bytes, bytes | None]] = [
                (b"k%d" % ((i * 7 + round_) % 500), b"r%d-%d" % (round_, i) + b"." * 50) for i in range(8000)
            ]
            for (key, value), offset in zip(records, produce(broker.bootstrap, records), strict=True):
                latest[key] = (offset, value)
            directory = tmp_path / "data" / "c-0"
            deadline = time.monotonic() + 10
            while not list(directory.glob("*.cleaned")) and time.monotonic() < deadline:
                time.sleep(0.002)
            caught += bool(list(directory.glob("*.cleaned")))
            broker.kill()
            broker.start()
        end = max(o for o, _v in latest.values()) + 1
        read = read_all(broker.bootstrap, end)
        assert {key: (offset, value) for offset, key, value in read} == latest
        deadline = time.monotonic() + 40
        while len(read) == 4 * 8000 and time.monotonic() < deadline:  # the last restart's cleaning
            time.sleep(0.2)
            read = read_all(broker.bootstrap, end)
        assert len(read) < 4 * 8000
        assert {key: (offset, value) for offset, key, value in read} == latest
    finally:
        broker.kill()
    assert caught >= 1, "never killed while a cleaning was in progress"


def _group_metadata_log_bytes(data: Path) -> int:
    return sum(f.stat().st_size for f in (data / "__consumer_offsets-0").glob("*.log"))


def test_group_metadata_log_is_compacted_and_replays_the_same(tmp_path: Path) -> None:
    """__consumer_offsets is compacted by the same cleaner: after hundreds of overwritten offset
    commits, an aborted transactional commit, a committed one and a deleted group, the log shrinks and
    a restarted broker answers the same committed offsets and groups."""
    from confluent_kafka.admin import AdminClient

    data = tmp_path / "d"
    config = {**CONFIG, "offsets.topic.segment.bytes": str(1024 * 1024)}
    metadata = "m" * 3000
    with EmbeddedBroker(data, config) as broker, Admin(broker.bootstrap) as admin:
        admin.create_topic("t", 2)
        committer = Consumer(
            {"bootstrap.servers": broker.bootstrap, "group.id": "g", "enable.auto.commit": False}
        )
        doomed = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "gone"})
        try:
            for i in range(450):  # ~1.4 MB of commits of the same two keys: segments roll
                committer.commit(
                    offsets=[TopicPartition("t", 0, i, metadata=metadata), TopicPartition("t", 1, 2 * i)],
                    asynchronous=False,
                )
            doomed.commit(offsets=[TopicPartition("t", 0, 5)], asynchronous=False)
            # A transaction commits an offset for partition 1 of g, a later one aborts another: the
            # aborted record is the key's last, yet the committed one must stay.
            for commit, offset in ((True, 7777), (False, 9999)):
                producer = Producer(
                    {"bootstrap.servers": broker.bootstrap, "transactional.id": f"tx-{commit}"}
                )
                producer.init_transactions(30)
                producer.begin_transaction()
                producer.send_offsets_to_transaction(
                    [TopicPartition("t", 1, offset)], committer.consumer_group_metadata(), 30
                )
                if commit:
                    producer.commit_transaction(30)
                else:
                    producer.abort_transaction(30)
            # More overwrites after the transactions, so that their segment closes too.
            for i in range(450, 800):
                committer.commit(offsets=[TopicPartition("t", 0, i, metadata=metadata)], asynchronous=False)
        finally:
            doomed.close()
        kafka_admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        kafka_admin.delete_consumer_groups(["gone"])["gone"].result(15)
        # What was written is known from the commits themselves (800 carry the 3,000-byte metadata);
        # the size on disk is not a measure of it, since the cleaner may already be at work.
        written = 800 * len(metadata)
        deadline = time.monotonic() + 40
        while _group_metadata_log_bytes(data) > written // 3 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _group_metadata_log_bytes(data) <= written // 3, (
            "the cleaner never compacted __consumer_offsets"
        )
        before = committer.committed([TopicPartition("t", 0), TopicPartition("t", 1)], timeout=15)
        committer.close()
    assert [(p.offset, p.metadata) for p in before] == [(799, metadata), (7777, None)]
    with EmbeddedBroker(data, config) as broker:
        reader = Consumer(
            {"bootstrap.servers": broker.bootstrap, "group.id": "g", "enable.auto.commit": False}
        )
        try:
            after = reader.committed([TopicPartition("t", 0), TopicPartition("t", 1)], timeout=15)
        finally:
            reader.close()
        assert [(p.offset, p.metadata) for p in after] == [(799, metadata), (7777, None)]
        kafka_admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        groups = kafka_admin.list_consumer_groups().result(15)
        assert "gone" not in {g.group_id for g in groups.valid}


@pytest.mark.parametrize(
    ("records", "keys"),
    [
        pytest.param(50_000, 1_000, id="50k-over-1k"),
        pytest.param(1_000_000, 10_000, id="1M-over-10k", marks=[pytest.mark.slow, pytest.mark.timeout(600)]),
    ],
)
def test_many_overwrites_and_tombstones(tmp_path: Path, records: int, keys: int) -> None:
    """``records`` records over ``keys`` keys (every key overwritten many times, every tenth key then
    tombstoned), produced with librdkafka: once the cleaner is done a consumer from the start reads
    exactly the latest value of every live key, at the offset it was produced at, and no tombstone
    (delete.retention.ms=0). The full scale (1M over 10k) is in the slow tier."""
    config = {
        "log.cleaner.backoff.ms": "100",
        "log.segment.bytes": str(4 * 1024 * 1024),
        "share.coordinator.state.topic.num.partitions": "1",
    }
    with EmbeddedBroker(tmp_path / "d", config) as broker, Admin(broker.bootstrap) as admin:
        admin.create_topic("c", 1, configs={**TOPIC_CONFIG, "segment.ms": "500"})
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20, "batch.size": 1 << 20})
        latest: dict[bytes, tuple[int, bytes | None]] = {}

        def delivered(err: Any, message: Any) -> None:
            assert err is None, err
            key = message.key()
            if key not in latest or latest[key][0] < message.offset():
                latest[key] = (message.offset(), message.value())

        value = b"v" * 60
        for i in range(records):
            producer.produce(
                "c", key=b"key-%06d" % (i % keys), value=value + b"%d" % i, partition=0, on_delivery=delivered
            )
            if i % 10_000 == 0:
                producer.poll(0)
        for k in range(0, keys, 10):
            producer.produce("c", key=b"key-%06d" % k, value=None, partition=0, on_delivery=delivered)
        assert producer.flush(60) == 0
        expected = sorted((o, k, v) for k, (o, v) in latest.items() if v is not None)
        assert len(expected) == keys - keys // 10
        end = max(o for o, _v in latest.values()) + 1
        time.sleep(0.6)  # past segment.ms: the next record rolls the segment holding the tombstones
        producer.produce("c", key=b"roll", value=b"r", partition=0, on_delivery=delivered)
        assert producer.flush(15) == 0
        deadline = time.monotonic() + (40 if records <= 50_000 else 300)

        def cleaned() -> list[tuple[int, bytes, bytes | None]]:
            return [r for r in read_all(broker.bootstrap, end) if r[0] < end]

        read = cleaned()
        while len(read) != len(expected) and time.monotonic() < deadline:
            time.sleep(0.5)
            read = cleaned()
        assert read == expected
