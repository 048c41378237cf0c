"""Share-state control batches (SHARE_CHECKPOINT, SHARE_DELTA) in a user topic, seen through the wire.

A topic's partitions hold thousands of them, interleaved with user records the way the in-log
persister leaves them: a run at the start, runs between produced batches longer than one fetch,
and a run at the end. librdkafka's Consumer (both isolation levels), its ShareConsumer and
kafka-python's consumer must see exactly the user records, and end with no lag; a client cannot
produce one; retention keeps what a hold protects and deletes the rest once it is released.
"""

from __future__ import annotations

import datetime
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12 import request as fetch_v12
from kio.schema.produce.v9 import request as produce_v9
from kio_wire import KioConnection
from share_consumers import FAST, SHARE_BROKER, poll_values, share_consumer
from txn_clients import create_topic, end_offsets, produce_txn, read_all, txn_producer

from shareq.client import Admin, ConfigResource, OffsetSpec, ResourceType
from shareq.embedded import EmbeddedBroker
from shareq.log.batch import ATTRIBUTES_OFFSET, CONTROL_MASK
from shareq.log.records import (
    CONTROL_TYPE_COMMIT,
    CONTROL_TYPE_SHARE_CHECKPOINT,
    CONTROL_TYPE_SHARE_DELTA,
    RecordBatch,
    control_record_type,
    decode_batches,
    encode_share_control_batch,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

TOPIC = "mixed"
ATTRIBUTES_END = ATTRIBUTES_OFFSET + 2  # a batch's bytes up to its attributes
PARTITIONS = 2
LEADING = 40  # share-state batches before the first record of each partition
CHUNKS = 12  # produced chunks per partition
PER_CHUNK = 20  # records per chunk
BETWEEN = 120  # share-state batches after each chunk (the last run ends the partition)
FETCH_BYTES = 4096  # per-partition fetch size: a run between chunks spans several fetches


def _append_share_state(broker: EmbeddedBroker, partition: int, count: int, topic: str = TOPIC) -> None:
    """Append ``count`` share-state control batches to ``topic``-``partition`` on the broker's loop,
    as the in-log persister does (control allowed, fetchers woken)."""

    def append() -> None:
        target = broker.broker.partition(topic, partition)
        assert target is not None
        now = int(time.time() * 1000)
        for i in range(count):
            kind = CONTROL_TYPE_SHARE_CHECKPOINT if i % 10 == 0 else CONTROL_TYPE_SHARE_DELTA
            target.log.append(
                encode_share_control_batch(kind, b"state-%05d" % i * 4, timestamp=now), now_ms=now
            )
        target.notify()

    broker.call(append)


def _fill(broker: EmbeddedBroker) -> dict[int, list[bytes]]:
    """The topic with user records and share state interleaved; the values produced per partition."""
    with Admin(broker.bootstrap) as admin:
        admin.create_topic(TOPIC, PARTITIONS)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, **FAST})
    produced: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    for p in range(PARTITIONS):
        _append_share_state(broker, p, LEADING)
    for chunk in range(CHUNKS):
        for p in range(PARTITIONS):
            for i in range(PER_CHUNK):
                value = b"p%d-c%02d-r%02d" % (p, chunk, i)
                producer.produce(TOPIC, value=value, partition=p)
                produced[p].append(value)
            assert producer.flush(15) == 0
            _append_share_state(broker, p, BETWEEN)
    return produced


def _end_offsets(broker: EmbeddedBroker) -> dict[int, int]:
    return {
        p: broker.call(lambda p=p: broker.broker.partition(TOPIC, p).log.log_end_offset)
        for p in range(PARTITIONS)
    }


@pytest.fixture
def mixed(tmp_path: Path) -> tuple[EmbeddedBroker, dict[int, list[bytes]]]:
    broker = EmbeddedBroker(tmp_path / "data", SHARE_BROKER).start()
    try:
        produced = _fill(broker)
        hidden = LEADING + CHUNKS * BETWEEN
        assert all(end == hidden + CHUNKS * PER_CHUNK for end in _end_offsets(broker).values())
        yield broker, produced
    finally:
        broker.stop()


def _raw_fetch(connection: KioConnection, offset: int, isolation: int) -> object:
    request = fetch_v12.FetchRequest(
        cluster_id=None,
        max_wait=datetime.timedelta(0),
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=isolation,
        topics=(
            fetch_v12.FetchTopic(
                topic=TOPIC,
                partitions=(
                    fetch_v12.FetchPartition(
                        partition=0, fetch_offset=offset, partition_max_bytes=FETCH_BYTES
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
    )
    return connection.send(request).responses[0].partitions[0]


def _whole_batches(records: bytes) -> list[RecordBatch]:
    """The whole batches of a Fetch answer, as a client decodes them. A cut batch ending it (the
    answer stops at the byte limit, as Kafka's does) is dropped, and is never a control batch here:
    no piece of share state goes out, and this topic has no transactions."""
    whole = 0
    while whole + 12 <= len(records):
        size = int.from_bytes(records[whole + 8 : whole + 12], "big") + 12
        if whole + size > len(records):
            break
        whole += size
    tail = records[whole:]
    assert len(tail) < ATTRIBUTES_END or not tail[ATTRIBUTES_END - 1] & CONTROL_MASK, tail[:ATTRIBUTES_END]
    return decode_batches(records[:whole])


@pytest.mark.parametrize("isolation", [0, 1])
def test_fetch_responses_hold_no_share_state(
    mixed: tuple[EmbeddedBroker, dict[int, list[bytes]]], isolation: int
) -> None:
    """On the wire: no SHARE_CHECKPOINT/SHARE_DELTA batch in any response; every response moves
    the offset on; share state ending a response comes as a producer-less COMMIT marker."""
    broker, produced = mixed
    end = _end_offsets(broker)[0]
    connection = KioConnection(broker.bootstrap)
    try:
        offset = 0
        values: list[bytes] = []
        fetches = 0
        while offset < end:
            fetches += 1
            assert fetches < 500, offset
            result = _raw_fetch(connection, offset, isolation)
            assert result.error_code == ErrorCode.none
            batches = _whole_batches(result.records)
            assert batches, f"no progress at {offset}"
            for i, batch in enumerate(batches):
                if batch.header.is_control:
                    [marker] = batch.records
                    assert control_record_type(marker) == CONTROL_TYPE_COMMIT
                    assert batch.header.producer_id == -1 and i == len(batches) - 1
                    assert marker.offset == batch.header.last_offset  # the position passes it
                else:
                    values += [r.value for r in batch.records if r.offset >= offset and r.value is not None]
            assert batches[-1].header.next_offset > offset
            offset = batches[-1].header.next_offset
        assert offset == end
        assert values == produced[0]
    finally:
        connection.close()


@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_librdkafka_consumer_sees_exactly_the_records_and_ends_without_lag(
    mixed: tuple[EmbeddedBroker, dict[int, list[bytes]]], isolation: str
) -> None:
    broker, produced = mixed
    ends = _end_offsets(broker)
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": f"plain-{isolation}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "max.partition.fetch.bytes": FETCH_BYTES,
            "fetch.wait.max.ms": 100,
            **FAST,
        }
    )
    try:
        consumer.subscribe([TOPIC])
        seen: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
        tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        deadline = time.monotonic() + 60
        while True:
            assert time.monotonic() < deadline, (
                {p: len(v) for p, v in seen.items()},
                [tp.offset for tp in consumer.position(tps)],
            )
            message = consumer.poll(0.1)
            if message is not None:
                assert message.error() is None, message.error()
                seen[message.partition()].append(message.value())
            positions = {tp.partition: tp.offset for tp in consumer.position(tps)}
            if positions == ends and sum(map(len, seen.values())) >= CHUNKS * PER_CHUNK * PARTITIONS:
                break
        assert seen == produced
        consumer.commit(asynchronous=False)
        committed = {tp.partition: tp.offset for tp in consumer.committed(tps, timeout=10)}
        assert committed == ends  # lag 0: the share state at the tail was passed, not delivered
    finally:
        consumer.close()


def test_kafka_python_consumer_sees_exactly_the_records_and_ends_without_lag(
    mixed: tuple[EmbeddedBroker, dict[int, list[bytes]]],
) -> None:
    broker, produced = mixed
    ends = _end_offsets(broker)
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        group_id="kafka-python",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        max_partition_fetch_bytes=FETCH_BYTES,
        fetch_max_wait_ms=100,
    )
    try:
        tps = [KafkaTopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        seen: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
        deadline = time.monotonic() + 60
        while {tp.partition: consumer.position(tp) for tp in tps} != ends:
            assert time.monotonic() < deadline, {p: len(v) for p, v in seen.items()}
            for tp, records in consumer.poll(100).items():
                seen[tp.partition] += [r.value for r in records]
        assert seen == produced
        assert consumer.end_offsets(tps) == {tp: ends[tp.partition] for tp in tps}
    finally:
        consumer.close()


def test_share_consumer_gets_each_record_once_and_the_group_ends_without_lag(
    mixed: tuple[EmbeddedBroker, dict[int, list[bytes]]],
) -> None:
    broker, produced = mixed
    consumer = share_consumer(broker.bootstrap, "share", [TOPIC])
    total = CHUNKS * PER_CHUNK * PARTITIONS
    try:
        messages = poll_values(consumer, lambda got: len(got) >= total, timeout=60)
        seen: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
        for message in sorted(messages, key=lambda m: (m.partition(), m.offset())):
            seen[message.partition()].append(message.value())
        assert seen == produced
        # More share state lands at the tail after everything was consumed (as the persister's
        # own writes do): the group still owes nothing.
        for p in range(PARTITIONS):
            _append_share_state(broker, p, 25)
        with Admin(broker.bootstrap) as admin:
            deadline = time.monotonic() + 30
            while True:
                consumer.poll(0.2)  # acknowledges the last records and lets the engine read on
                offsets = admin.describe_share_group_offsets("share")
                lags = {p: offsets[(TOPIC, p)].lag for p in range(PARTITIONS)}
                if lags == dict.fromkeys(range(PARTITIONS), 0):
                    break
                assert time.monotonic() < deadline, lags
            assert not poll_values(consumer, lambda got: bool(got), timeout=1.0)  # nothing more

        def engine() -> tuple[int, int, dict[int, int]]:
            sps = [sp for sp in broker.broker.share.partitions if sp.key.group_id == "share"]
            return (
                sum(sp.stats.acquired for sp in sps),
                sum(sp.stats.archived for sp in sps),
                {sp.key.partition: sp.spso for sp in sps},
            )

        # Share state was never acquired (nor acknowledged as a gap); the SPSO passed it all.
        assert broker.call(engine) == (total, 0, _end_offsets(broker))

        def state_log_ends() -> list[int]:
            return [
                p.log.log_end_offset for (t, _), p in broker.broker.partitions.items() if t == STATE_TOPIC
            ]

        # Passing share state writes nothing (a write of the in-log persister would itself be
        # share state to pass, and so on for ever).
        before = broker.call(state_log_ends)
        for p in range(PARTITIONS):
            _append_share_state(broker, p, 10)
        ends = _end_offsets(broker)
        deadline = time.monotonic() + 20
        while broker.call(engine)[2] != ends:
            assert time.monotonic() < deadline, broker.call(engine)
            assert not consumer.poll(0.2)
        assert broker.call(state_log_ends) == before
    finally:
        consumer.close()


def test_a_client_cannot_produce_share_state(tmp_path: Path) -> None:
    with EmbeddedBroker(tmp_path / "d") as broker:
        broker.call(broker.broker.create_topic, TOPIC, 1)
        connection = KioConnection(broker.bootstrap)
        try:
            for kind in (CONTROL_TYPE_SHARE_CHECKPOINT, CONTROL_TYPE_SHARE_DELTA):
                response = connection.send(
                    produce_v9.ProduceRequest(
                        transactional_id=None,
                        acks=-1,
                        timeout=datetime.timedelta(seconds=5),
                        topic_data=(
                            produce_v9.TopicProduceData(
                                name=TOPIC,
                                partition_data=(
                                    produce_v9.PartitionProduceData(
                                        index=0, records=encode_share_control_batch(kind, b"forged")
                                    ),
                                ),
                            ),
                        ),
                    )
                )
                result = response.responses[0].partition_responses[0]
                assert result.error_code == ErrorCode.corrupt_message
        finally:
            connection.close()
        assert broker.call(lambda: broker.broker.partition(TOPIC, 0).log.log_end_offset) == 0


STATE_TOPIC = "__share_group_state"


def _engine_of(broker: EmbeddedBroker, group: str) -> tuple[list[int], int]:
    """(sorted SPSOs, records acquired) of ``group``'s share-partitions (on the broker's loop)."""
    sps = [sp for sp in broker.broker.share.partitions if sp.key.group_id == group]
    return sorted(sp.spso for sp in sps), sum(sp.stats.acquired for sp in sps)


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_transactions_and_share_state_together(tmp_path: Path, isolation: str) -> None:
    """Committed and aborted transactions with share state between and after them: consumers
    and a share group of either isolation level get what they would without the share state."""
    config = {**SHARE_BROKER, "group.share.isolation.level": isolation}
    with EmbeddedBroker(tmp_path / "data", config=config) as broker:
        topic = create_topic(broker.bootstrap, 2)
        producer = txn_producer(broker.bootstrap, f"tx-{isolation}")
        committed: list[str] = []
        every: list[str] = []
        for n in range(6):
            values = [f"t{n}-{i}" for i in range(10)]
            produce_txn(producer, topic, values, 2, commit=n % 2 == 0)
            every += values
            committed += values if n % 2 == 0 else []
            for p in range(2):
                _append_share_state(broker, p, 60, topic)
        want = committed if isolation == "read_committed" else every
        assert sorted(read_all(broker.bootstrap, topic, 2, isolation)) == sorted(want)
        ends = end_offsets(broker.bootstrap, topic, 2)
        consumer = share_consumer(broker.bootstrap, "txn-share", [topic])
        try:
            messages = poll_values(consumer, lambda got: len(got) >= len(want), timeout=30)
            assert sorted(m.value().decode() for m in messages) == sorted(want)
            deadline = time.monotonic() + 20
            with Admin(broker.bootstrap) as admin:
                while True:  # markers acknowledged as gaps, share state passed: SPSO at the end
                    assert not [m for m in consumer.poll(0.2) if m.error() is None]
                    offsets = admin.describe_share_group_offsets("txn-share")
                    if [offsets[(topic, p)].lag for p in range(2)] == [0, 0]:
                        spsos, acquired = broker.call(lambda: _engine_of(broker, "txn-share"))
                        if spsos == sorted(ends):
                            # every offset but the share state's was acquired once (markers and
                            # aborted records included), the share state never
                            assert acquired == sum(ends) - 2 * 6 * 60
                            break
                    assert time.monotonic() < deadline, (offsets, ends)
        finally:
            consumer.close()


RETENTION = {
    **SHARE_BROKER,
    "log.retention.check.interval.ms": "100",
    "log.segment.bytes": "2048",  # a topic's own segment.bytes is at least 1 MiB, as in Kafka
}


def _earliest(admin: Admin, partition: int) -> int:
    return admin.list_offsets(TOPIC, [partition], spec=OffsetSpec.EARLIEST)[partition].offset


def test_retention_keeps_what_a_hold_protects_and_deletes_the_rest(tmp_path: Path) -> None:
    with EmbeddedBroker(tmp_path / "d", RETENTION) as broker, Admin(broker.bootstrap) as admin:
        _fill(broker)
        end = _end_offsets(broker)[0]
        hold = end // 2
        log_of = broker.broker.partition(TOPIC, 0)
        assert log_of is not None
        segments = broker.call(lambda: log_of.log.segment_count)
        assert segments > 10
        broker.call(log_of.log.set_retention_hold, "test-group", hold)
        admin.alter_configs(ConfigResource(ResourceType.TOPIC, TOPIC), {"retention.ms": "1"})
        deadline = time.monotonic() + 20
        while _earliest(admin, 1) == 0:  # the partition without a hold loses all but the active segment
            assert time.monotonic() < deadline, "retention never ran"
            time.sleep(0.05)
        # Partition 0 lost the segments wholly below the hold, not the one holding it.
        while (earliest := _earliest(admin, 0)) == 0:
            assert time.monotonic() < deadline, "retention never ran on the held partition"
            time.sleep(0.05)
        assert 0 < earliest <= hold
        kept = broker.call(lambda: log_of.log.segment_count)
        assert 1 < kept < segments
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
        try:  # the held offset and everything after it are still there for a reader
            tp = KafkaTopicPartition(TOPIC, 0)
            consumer.assign([tp])
            consumer.seek(tp, hold)
            deadline = time.monotonic() + 20
            while consumer.position(tp) < end:
                assert time.monotonic() < deadline
                consumer.poll(100)
        finally:
            consumer.close()
        # DeleteRecords past the hold stops at it, and says so in its low watermark.
        assert admin.delete_records(TOPIC, {0: end - 1}) == {0: hold}
        assert _earliest(admin, 0) == hold
        # Released, the hold no longer keeps anything: retention takes the rest.
        broker.call(log_of.log.set_retention_hold, "test-group", None)
        deadline = time.monotonic() + 20
        while _earliest(admin, 0) <= hold:
            assert time.monotonic() < deadline, "retention did not go on after the release"
            time.sleep(0.05)
        assert broker.call(lambda: log_of.log.segment_count) == 1
