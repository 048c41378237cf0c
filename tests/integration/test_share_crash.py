"""SIGKILL the broker while librdkafka ShareConsumers acknowledge over the wire.

An acknowledgement reported successful (commit_sync gave None for its partition) must never be
undone: its record is never delivered again. Every record is eventually acknowledged: checked in
the durable share state (an acknowledgement may become durable while its reply is lost to a kill,
so the client's view alone cannot tell).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from broker_harness import BrokerProcess
from confluent_kafka import AcknowledgeType, KafkaException, TopicPartition
from share_consumers import SHARE_BROKER, as_pairs, create_topic, produce, share_consumer, user_records

from shareq.embedded import EmbeddedBroker
from shareq.share.persister import SharePartitionKey

pytestmark = [pytest.mark.integration]

TOPIC = "crashq"
PARTITIONS = 2


class Tracker:
    """Per-record bookkeeping shared by the consumers: what was confirmed, and any delivery after that."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.confirmed: set[tuple[int, int]] = set()
        self.redelivered_after_confirm: list[tuple[int, int, int]] = []
        self.deliveries = 0
        self.errors: list[str] = []


def consume(bootstrap: str, tracker: Tracker, stop: threading.Event, total: int) -> None:
    consumer = share_consumer(
        bootstrap, "g", [TOPIC], **{"share.acknowledgement.mode": "explicit", "socket.timeout.ms": 3000}
    )
    try:
        while not stop.is_set() and len(tracker.confirmed) < total:
            pending: dict[int, list[int]] = {}
            for m in consumer.poll(0.2):
                if m.error() is not None:
                    tracker.errors.append(str(m.error()))
                    continue
                key = (m.partition(), m.offset())
                with tracker.lock:
                    tracker.deliveries += 1
                    if key in tracker.confirmed:
                        tracker.redelivered_after_confirm.append((*key, m.delivery_count()))
                consumer.acknowledge(m, AcknowledgeType.ACCEPT)
                pending.setdefault(m.partition(), []).append(m.offset())
            if not pending:
                continue
            try:
                results = consumer.commit_sync(5)
            except KafkaException:
                continue  # nothing of this round counts as confirmed
            for tp, outcome in results.items():
                assert isinstance(tp, TopicPartition)
                if outcome is None:
                    with tracker.lock:
                        tracker.confirmed.update((tp.partition, o) for o in pending.get(tp.partition, ()))
    finally:
        consumer.close()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kills", [1, 4])
def test_acknowledged_records_survive_sigkill(tmp_path: Path, kills: int, persister: str) -> None:
    config = {**SHARE_BROKER, "share.persister": persister}
    broker = BrokerProcess(tmp_path / "data", *as_pairs(config))
    broker.start()
    stop = threading.Event()
    tracker = Tracker()
    total = 3000
    threads: list[threading.Thread] = []
    try:
        create_topic(broker.bootstrap, TOPIC, PARTITIONS)
        produce(broker.bootstrap, TOPIC, [b"c%d" % i for i in range(total)], PARTITIONS, per_batch=5)
        threads = [
            threading.Thread(target=consume, args=(broker.bootstrap, tracker, stop, total), daemon=True)
            for _ in range(2)
        ]
        for t in threads:
            t.start()
        for _ in range(kills):
            deadline = time.monotonic() + 20
            seen = tracker.deliveries
            while tracker.deliveries < seen + 40 and time.monotonic() < deadline:
                time.sleep(0.01)  # some progress before each kill
            broker.kill()
            broker.start()
        deadline = time.monotonic() + 60
        idle_since, seen = time.monotonic(), tracker.deliveries
        while time.monotonic() < deadline and len(tracker.confirmed) < total:
            if tracker.deliveries != seen:
                idle_since, seen = time.monotonic(), tracker.deliveries
            elif time.monotonic() - idle_since > 4.0:
                break  # nothing left to deliver
            time.sleep(0.05)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
        broker.kill()
    assert tracker.errors == []
    # nobody ever saw a record again after its acknowledgement was reported successful
    assert tracker.redelivered_after_confirm == []
    assert len(tracker.confirmed) > 0
    # everything is acknowledged in the durable state: the SPSO reached the end of both partitions
    with EmbeddedBroker(tmp_path / "data", config=config) as reopened:
        share = reopened.broker.share
        info = reopened.broker.topics.get(TOPIC)
        assert share is not None and info is not None

        async def spsos() -> list[tuple[int, int]]:
            out = []
            for part in range(PARTITIONS):
                key = SharePartitionKey(group_id="g", topic_id=info.topic_id, partition=part)
                sp = await share.partitions.get(key)
                plog = reopened.broker.partition(TOPIC, part)
                assert plog is not None
                end, count = user_records(plog.log)  # the in-log persister's state lies around them
                out.append((sp.spso, end, count))
            return out

        ends = reopened.run(spsos())
    assert all(spso >= end for spso, end, _ in ends), ends
    assert sum(count for _, _, count in ends) == total
