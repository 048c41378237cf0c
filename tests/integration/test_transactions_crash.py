"""Exactly-once consume-transform-produce while the broker is SIGKILLed and restarted.

A librdkafka group consumer and a transactional producer copy an input topic to an output topic,
committing the group's offsets with each transaction (``send_offsets_to_transaction``). A
thread kills the broker (SIGKILL) and restarts it on the same data directory a few times at
random points. Any client error discards both clients and starts over from the committed offsets
with a new producer of the same transactional id (which fences and aborts the old one). At the
end a read_committed reader must find every input record's output exactly once, and the group's
committed offsets must be at the input's end.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
from broker_harness import FAST_FAILURE, BrokerProcess
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from txn_clients import CONSUMER_FAST, create_topic, read_all

pytestmark = [pytest.mark.integration]

RECORDS = 1200
PARTITIONS = 2
KILLS = 4
DEADLINE_S = 120.0


def _clients(bootstrap: str, group: str, txn_id: str, source: str) -> tuple[Consumer, Producer]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "session.timeout.ms": 6000,
            **CONSUMER_FAST,
        }
    )
    consumer.subscribe([source])
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, **FAST_FAILURE})
    producer.init_transactions(20)
    return consumer, producer


def _close(consumer: Consumer | None, producer: Producer | None) -> None:
    if consumer is not None:
        with contextlib.suppress(KafkaException, RuntimeError):
            consumer.close()
    del producer  # librdkafka destroys the handle; the next init_transactions fences it anyway


def _committed(bootstrap: str, group: str, source: str) -> list[int]:
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": group, **CONSUMER_FAST})
    try:
        parts = reader.committed([TopicPartition(source, p) for p in range(PARTITIONS)], timeout=10)
        return [tp.offset for tp in parts]
    finally:
        reader.close()


def test_exactly_once_through_broker_kills(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data").start()
    killer_done = threading.Event()
    try:
        bootstrap = broker.bootstrap
        source, sink = create_topic(bootstrap, PARTITIONS), create_topic(bootstrap, PARTITIONS)
        feeder = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, **FAST_FAILURE})
        for i in range(RECORDS):
            feeder.produce(source, f"r{i}".encode(), partition=i % PARTITIONS)
        assert feeder.flush(20) == 0
        input_ends = [RECORDS // PARTITIONS] * PARTITIONS
        group, txn_id = f"eos-{uuid.uuid4().hex[:6]}", f"eos-{uuid.uuid4().hex[:6]}"
        rng = random.Random(12)
        kills: list[float] = []

        def killer() -> None:
            try:
                for _ in range(KILLS):
                    time.sleep(rng.uniform(0.5, 1.5))
                    broker.kill()
                    kills.append(time.monotonic())
                    broker.start()
            finally:
                killer_done.set()

        threading.Thread(target=killer, daemon=True).start()
        deadline = time.monotonic() + DEADLINE_S
        consumer: Consumer | None = None
        producer: Producer | None = None
        restarts = 0
        committed_after_kills = 0  # transactions committed after the first kill
        while True:
            assert time.monotonic() < deadline, f"not done within {DEADLINE_S}s ({restarts} client restarts)"
            try:
                if consumer is None or producer is None:
                    consumer, producer = _clients(bootstrap, group, txn_id, source)
                messages = [m for m in consumer.consume(10, timeout=0.3) if m.error() is None]
                if not messages:
                    if killer_done.is_set() and _committed(bootstrap, group, source) == input_ends:
                        break
                    continue
                producer.begin_transaction()
                for m in messages:
                    producer.produce(sink, b"out-" + m.value(), partition=m.partition())  # type: ignore[operator]
                positions = consumer.position(consumer.assignment())
                producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 10)
                producer.commit_transaction(10)
                committed_after_kills += bool(kills)
            except KafkaException:
                # Whatever failed (abortable, fatal, timed out), start over from the committed
                # offsets; the new producer's init_transactions aborts any open transaction.
                restarts += 1
                _close(consumer, producer)
                consumer = producer = None
        _close(consumer, producer)
        assert len(kills) == KILLS
        print(f"{restarts} client restarts, {committed_after_kills} transactions after the first kill")
        assert committed_after_kills > 0, "the kills did not interrupt the work"
        outputs = read_all(bootstrap, sink, PARTITIONS, "read_committed", deadline_s=30)
        counts = Counter(outputs)
        assert set(counts) == {f"out-r{i}" for i in range(RECORDS)}, "lost records"
        assert [v for v, n in counts.items() if n > 1] == [], "duplicated records"
        assert _committed(bootstrap, group, source) == input_ends
    finally:
        killer_done.wait(30)
        broker.kill()


def _wait_dead(broker: BrokerProcess, timeout_s: float = 30.0) -> None:
    assert broker.process is not None
    broker.process.wait(timeout=timeout_s)


@pytest.mark.parametrize("point", ["txn.after_prepare", "txn.after_marker:1", "txn.before_complete"])
def test_decision_logged_before_a_crash_is_completed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, point: str
) -> None:
    """The broker dies inside commit_transaction after PrepareCommit; the restarted broker writes
    the missing markers (never a second one), completes the commit, and the client's retried
    EndTxn succeeds: every record is visible to read_committed and the LSO is the log end."""
    monkeypatch.setenv("SHAREQ_CRASH_AT", point)
    broker = BrokerProcess(tmp_path / "data").start()
    monkeypatch.delenv("SHAREQ_CRASH_AT")
    restarter: threading.Thread | None = None
    try:
        bootstrap = broker.bootstrap
        topic = create_topic(bootstrap, 3)
        producer = Producer(
            {"bootstrap.servers": bootstrap, "transactional.id": f"crash-{point}", **FAST_FAILURE}
        )
        producer.init_transactions(15)
        producer.begin_transaction()
        for i in range(9):
            producer.produce(topic, f"v{i}".encode(), partition=i % 3)
        assert producer.flush(15) == 0

        def restart() -> None:
            _wait_dead(broker)
            broker.start()

        restarter = threading.Thread(target=restart, daemon=True)
        restarter.start()
        # Survives the crash: librdkafka retries EndTxn; a retriable error (the restart took
        # longer than a request timeout) is retried by calling commit again, as documented.
        for attempt in range(3):
            try:
                producer.commit_transaction(40)
                break
            except KafkaException as error:
                if attempt == 2 or not error.args[0].retriable():
                    raise
        restarter.join(30)
        assert sorted(read_all(bootstrap, topic, 3, "read_committed")) == sorted(f"v{i}" for i in range(9))
        reader = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "x",
                "isolation.level": "read_committed",
                **CONSUMER_FAST,
            }
        )
        try:
            # 3 records and exactly one marker per partition; the LSO is the log end
            assert [
                reader.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(3)
            ] == [4, 4, 4]
        finally:
            reader.close()
    finally:
        if restarter is not None:
            restarter.join(30)
        broker.kill()


def test_open_transaction_at_a_crash_is_aborted_by_the_next_producer(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        bootstrap = broker.bootstrap
        topic = create_topic(bootstrap, 2)
        txn_id = f"open-{uuid.uuid4().hex[:6]}"
        first = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, **FAST_FAILURE})
        first.init_transactions(15)
        first.begin_transaction()
        for i in range(4):
            first.produce(topic, f"lost{i}".encode(), partition=i % 2)
        assert first.flush(15) == 0
        committed = Producer(
            {"bootstrap.servers": bootstrap, "transactional.id": txn_id + "-c", **FAST_FAILURE}
        )
        committed.init_transactions(15)
        committed.begin_transaction()
        committed.produce(topic, b"kept", partition=0)
        committed.commit_transaction(15)
        broker.kill()
        broker.start()
        assert read_all(bootstrap, topic, 2, "read_committed") == []  # the open transaction holds the LSO
        successor = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, **FAST_FAILURE})
        successor.init_transactions(15)  # fences the first producer and aborts its transaction
        assert read_all(bootstrap, topic, 2, "read_committed") == ["kept"]
        assert len(read_all(bootstrap, topic, 2, "read_uncommitted")) == 5
    finally:
        broker.kill()
