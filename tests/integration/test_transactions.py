"""Transactions with real clients: librdkafka's and kafka-python's transactional producers against
read_committed and read_uncommitted consumers; fencing, timeouts, the last stable offset."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from broker_harness import FAST_FAILURE
from confluent_kafka import Consumer, KafkaException, TopicPartition
from txn_clients import CONSUMER_FAST, create_topic, end_offsets, produce_txn, read_all, txn_producer

from shareq.embedded import EmbeddedBroker

pytestmark = [pytest.mark.integration]


def test_commit_and_abort_over_partitions(embedded_broker: EmbeddedBroker) -> None:
    bootstrap = embedded_broker.bootstrap
    topic = create_topic(bootstrap, 3)
    producer = txn_producer(bootstrap, f"tx-{uuid.uuid4().hex[:6]}")
    committed = [f"c{i}" for i in range(30)]
    aborted = [f"a{i}" for i in range(30)]
    later = [f"d{i}" for i in range(30)]
    produce_txn(producer, topic, committed, 3, commit=True)
    produce_txn(producer, topic, aborted, 3, commit=False)
    produce_txn(producer, topic, later, 3, commit=True)
    # each partition: 10 records + one marker per transaction
    assert end_offsets(bootstrap, topic, 3) == [33, 33, 33]
    assert sorted(read_all(bootstrap, topic, 3, "read_committed")) == sorted(committed + later)
    assert sorted(read_all(bootstrap, topic, 3, "read_uncommitted")) == sorted(committed + aborted + later)


def test_open_transaction_holds_the_last_stable_offset(embedded_broker: EmbeddedBroker) -> None:
    bootstrap = embedded_broker.bootstrap
    topic = create_topic(bootstrap, 1)
    plain = txn_producer(bootstrap, f"tx-{uuid.uuid4().hex[:6]}")
    produce_txn(plain, topic, ["before-0", "before-1"], 1, commit=True)  # offsets 0, 1; marker 2
    producer = txn_producer(bootstrap, f"tx-{uuid.uuid4().hex[:6]}")
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, f"open-{i}".encode(), partition=0)
    assert producer.flush(15) == 0
    committed_reader = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "lso",
            "isolation.level": "read_committed",
            **CONSUMER_FAST,
        }
    )
    try:
        low, high = committed_reader.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        assert (low, high) == (0, 3)  # ListOffsets(read_committed) answers the LSO
        assert end_offsets(bootstrap, topic, 1) == [8]
        assert read_all(bootstrap, topic, 1, "read_committed") == ["before-0", "before-1"]
        producer.commit_transaction(15)
        assert committed_reader.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 9)
    finally:
        committed_reader.close()
    assert read_all(bootstrap, topic, 1, "read_committed") == ["before-0", "before-1"] + [
        f"open-{i}" for i in range(5)
    ]


def test_zombie_producer_is_fenced(embedded_broker: EmbeddedBroker) -> None:
    bootstrap = embedded_broker.bootstrap
    topic = create_topic(bootstrap, 2)
    txn_id = f"tx-{uuid.uuid4().hex[:6]}"
    zombie = txn_producer(bootstrap, txn_id)
    zombie.begin_transaction()
    for i in range(4):
        zombie.produce(topic, f"zombie-{i}".encode(), partition=i % 2)
    assert zombie.flush(15) == 0
    successor = txn_producer(bootstrap, txn_id)  # aborts the zombie's open transaction
    with pytest.raises(KafkaException) as failure:
        zombie.commit_transaction(15)
    assert failure.value.args[0].fatal()
    produce_txn(successor, topic, ["after-0", "after-1"], 2, commit=True)
    assert sorted(read_all(bootstrap, topic, 2, "read_committed")) == ["after-0", "after-1"]
    assert len(read_all(bootstrap, topic, 2, "read_uncommitted")) == 6


def test_transaction_left_open_times_out(tmp_path: Path) -> None:
    with EmbeddedBroker(tmp_path / "data") as broker:
        bootstrap = broker.bootstrap
        topic = create_topic(bootstrap, 1)
        producer = txn_producer(
            bootstrap,
            f"tx-{uuid.uuid4().hex[:6]}",
            **{"transaction.timeout.ms": 1500, "socket.timeout.ms": 1500, "message.timeout.ms": 1500},
        )
        producer.begin_transaction()
        producer.produce(topic, b"never-visible", partition=0)
        assert producer.flush(15) == 0
        reader = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "t",
                "isolation.level": "read_committed",
                **CONSUMER_FAST,
            }
        )
        try:
            deadline = time.monotonic() + 10
            while reader.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1] != 2:
                assert time.monotonic() < deadline, "the open transaction was not aborted by its timeout"
                time.sleep(0.1)  # polling the broker's LSO: there is no event to wait on from here
        finally:
            reader.close()
        with pytest.raises(KafkaException):
            producer.commit_transaction(15)
        assert read_all(bootstrap, topic, 1, "read_committed") == []


def test_produce_outside_the_transaction_is_refused(embedded_broker: EmbeddedBroker) -> None:
    """A transactional batch for a partition not in the open transaction is refused with
    INVALID_TXN_STATE (no hanging transaction), and a stale epoch is fenced."""
    import datetime

    from kio.schema.add_partitions_to_txn.v3 import request as add_request
    from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
    from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
    from kio_wire import KioConnection

    from shareq.log.records import Record, encode_batch

    bootstrap = embedded_broker.bootstrap
    topic = create_topic(bootstrap, 2)
    connection = KioConnection(bootstrap)
    try:
        init = connection.send(
            InitProducerIdRequest(
                transactional_id="raw-txn", transaction_timeout=datetime.timedelta(seconds=60), producer_id=-1
            )
        )
        assert init.error_code == 0
        pid, epoch = init.producer_id, init.producer_epoch
        added = connection.send(
            add_request.AddPartitionsToTxnRequest(
                v3_and_below_transactional_id="raw-txn",
                v3_and_below_producer_id=pid,
                v3_and_below_producer_epoch=epoch,
                v3_and_below_topics=(add_request.AddPartitionsToTxnTopic(name=topic, partitions=(0,)),),
            )
        )
        assert [
            r.partition_error_code
            for t in added.results_by_topic_v3_and_below
            for r in t.results_by_partition
        ] == [0]

        def produce(partition: int, producer_epoch: int, sequence: int) -> int:
            batch = encode_batch(
                [Record(value=b"x")],
                producer_id=pid,
                producer_epoch=producer_epoch,
                base_sequence=sequence,
                transactional=True,
            )
            response = connection.send(
                ProduceRequest(
                    transactional_id="raw-txn",
                    acks=-1,
                    timeout=datetime.timedelta(seconds=5),
                    topic_data=(
                        TopicProduceData(
                            name=topic, partition_data=(PartitionProduceData(index=partition, records=batch),)
                        ),
                    ),
                )
            )
            return int(response.responses[0].partition_responses[0].error_code)

        assert produce(0, epoch, 0) == 0
        assert produce(1, epoch, 0) == 48  # INVALID_TXN_STATE: partition 1 is not in the transaction
        assert produce(0, epoch + 1, 0) == 47  # INVALID_PRODUCER_EPOCH
    finally:
        connection.close()


def test_kafka_python_transactional_producer(embedded_broker: EmbeddedBroker) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    bootstrap = embedded_broker.bootstrap
    topic = create_topic(bootstrap, 2)
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"kp-{uuid.uuid4().hex[:6]}")
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for i in range(6):
            producer.send(topic, f"kp-commit-{i}".encode(), partition=i % 2)
        producer.commit_transaction()
        producer.begin_transaction()
        for i in range(6):
            producer.send(topic, f"kp-abort-{i}".encode(), partition=i % 2)
        producer.flush()
        producer.abort_transaction()
    finally:
        producer.close(timeout=10)
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        isolation_level="read_committed",
        consumer_timeout_ms=3000,
        enable_auto_commit=False,
    )
    try:
        consumer.assign([__import__("kafka").TopicPartition(topic, p) for p in range(2)])
        consumer.seek_to_beginning()
        seen = sorted(m.value.decode() for m in consumer)
    finally:
        consumer.close()
    assert seen == sorted(f"kp-commit-{i}" for i in range(6))
    assert sorted(read_all(bootstrap, topic, 2, "read_committed")) == seen
    assert len(read_all(bootstrap, topic, 2, "read_uncommitted")) == 12


_ = FAST_FAILURE


def test_send_offsets_to_transaction(embedded_broker: EmbeddedBroker) -> None:
    """Consume-transform-produce: the group's offsets commit with the output, stay pending (and
    invisible to a require_stable fetch) until the marker, and an abort leaves the old ones."""
    from confluent_kafka import Producer

    bootstrap = embedded_broker.bootstrap
    source, sink = create_topic(bootstrap, 1), create_topic(bootstrap, 1)
    feeder = Producer({"bootstrap.servers": bootstrap, **FAST_FAILURE})
    for i in range(20):
        feeder.produce(source, f"in-{i}".encode(), partition=0)
    assert feeder.flush(15) == 0
    group = f"ctp-{uuid.uuid4().hex[:6]}"
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            **CONSUMER_FAST,
        }
    )
    producer = txn_producer(bootstrap, f"ctp-{uuid.uuid4().hex[:6]}")
    try:
        consumer.subscribe([source])
        messages: list[object] = []
        deadline = time.monotonic() + 20
        while len(messages) < 10:
            assert time.monotonic() < deadline, "the group consumer got no records"
            messages += [m for m in consumer.consume(10 - len(messages), timeout=0.5) if m.error() is None]
        producer.begin_transaction()
        for m in messages:
            producer.produce(sink, m.value().upper(), partition=0)  # type: ignore[attr-defined]
        producer.send_offsets_to_transaction(
            [TopicPartition(source, 0, 10)], consumer.consumer_group_metadata(), 15
        )
        assert producer.flush(15) == 0
        # Pending until the marker: librdkafka asks with require_stable and keeps retrying on
        # UNSTABLE_OFFSET_COMMIT, so the lookup cannot complete before the commit.
        with pytest.raises(KafkaException, match="Timed out"):
            consumer.committed([TopicPartition(source, 0)], timeout=1)
        producer.commit_transaction(15)
        assert consumer.committed([TopicPartition(source, 0)], timeout=10)[0].offset == 10
        producer.begin_transaction()
        producer.produce(sink, b"ABORTED", partition=0)
        producer.send_offsets_to_transaction(
            [TopicPartition(source, 0, 20)], consumer.consumer_group_metadata(), 15
        )
        producer.abort_transaction(15)
        assert consumer.committed([TopicPartition(source, 0)], timeout=10)[0].offset == 10
    finally:
        consumer.close()
    assert sorted(read_all(bootstrap, sink, 1, "read_committed")) == sorted(f"IN-{i}" for i in range(10))


def test_kafka_python_send_offsets_and_fencing(embedded_broker: EmbeddedBroker) -> None:
    """kafka-python (TxnOffsetCommit v3 without member information, EndTxn v3): the offsets commit
    with the transaction, and a zombie gets PRODUCER_FENCED (90)."""
    from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata
    from kafka import TopicPartition as KTopicPartition
    from kafka.errors import KafkaError, ProducerFencedError

    bootstrap = embedded_broker.bootstrap
    source, sink = create_topic(bootstrap, 1), create_topic(bootstrap, 1)
    feeder = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(10):
        feeder.send(source, f"v{i}".encode(), partition=0)
    feeder.flush()
    feeder.close()
    group = f"kp-{uuid.uuid4().hex[:6]}"
    consumer = KafkaConsumer(
        source,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        isolation_level="read_committed",
    )
    txn_id = f"kp-{uuid.uuid4().hex[:6]}"
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id)
    successor = None
    try:
        producer.init_transactions()
        got: list[object] = []
        deadline = time.monotonic() + 20
        while len(got) < 10:
            assert time.monotonic() < deadline, "kafka-python consumer got no records"
            for records in consumer.poll(200).values():
                got += records
        producer.begin_transaction()
        for m in got:
            producer.send(sink, m.value.upper(), partition=0)  # type: ignore[attr-defined]
        producer.send_offsets_to_transaction(
            {KTopicPartition(source, 0): OffsetAndMetadata(10, "", -1)}, group
        )
        producer.commit_transaction()
        assert consumer.committed(KTopicPartition(source, 0)) == 10
        successor = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id)
        successor.init_transactions()
        producer.begin_transaction()
        producer.send(sink, b"zombie", partition=0)
        # The fencing reaches kafka-python either on the commit itself or first on the send's
        # AddPartitionsToTxn in its sender thread, which puts the producer in an error state
        # that the commit then reports, naming the same PRODUCER_FENCED (90).
        with pytest.raises(KafkaError) as fenced:
            producer.commit_transaction()
        assert isinstance(fenced.value, ProducerFencedError) or "ProducerFencedError" in str(fenced.value)
    finally:
        consumer.close()
        producer.close(timeout=5)
        if successor is not None:
            successor.close(timeout=5)
    assert sorted(read_all(bootstrap, sink, 1, "read_committed")) == sorted(f"V{i}" for i in range(10))
