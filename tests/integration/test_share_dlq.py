"""Dead-letter queues (KIP-1191) end to end: librdkafka ShareConsumers REJECT and RELEASE records, a
plain Consumer reads the DLQ topic the broker wrote."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, Consumer, Producer
from share_consumers import FAST, SHARE_BROKER, share_consumer

from shareq.client import Admin, ConfigResource, KafkaError, ResourceType, ShareConsumer
from shareq.embedded import EmbeddedBroker
from shareq.share.persister import SharePartitionKey

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

DLQ_BROKER = {**SHARE_BROKER, "group.share.delivery.count.limit": "2"}
INVALID_CONFIG = 40


def _produce_keyed(bootstrap: str, topic: str, n: int, partitions: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **FAST})
    for i in range(n):
        producer.produce(
            topic, key=b"k%d" % i, value=b"v%d" % i, partition=i % partitions, headers=[("h", b"x%d" % i)]
        )
    assert producer.flush(15) == 0


def _alter_group(bootstrap: str, group: str, changes: dict[str, str | None]) -> None:
    with Admin(bootstrap) as admin:
        admin.alter_configs(ConfigResource(ResourceType.GROUP, group), changes)


def _read_topic(
    bootstrap: str, topic: str, until: Callable[[list[Any]], bool], timeout: float = 20
) -> list[Any]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex[:6]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "topic.metadata.refresh.interval.ms": 500,
            **FAST,
        }
    )
    consumer.subscribe([topic])
    out: list[Any] = []
    deadline = time.monotonic() + timeout
    try:
        while not until(out) and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None or message.error() is not None:
                continue
            out.append(message)
    finally:
        consumer.close()
    return out


def _wait(check: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)


def _share_partition(broker: EmbeddedBroker, group: str, topic: str, partition: int) -> Any:
    info = broker.broker.topics.get(topic)
    assert info is not None
    share = broker.broker.share
    assert share is not None
    key = SharePartitionKey(group_id=group, topic_id=info.topic_id, partition=partition)
    return share.partitions.cached(key)


def _settled(broker: EmbeddedBroker, group: str, topic: str, partition: int) -> bool:
    """The share-partition's SPSO reached the end of what readers see (nothing ARCHIVING holds it
    back): the log end, less the in-log persister's share state at its tail."""

    def read() -> bool:
        sp = _share_partition(broker, group, topic, partition)
        plog = broker.broker.partition(topic, partition)
        if sp is None or plog is None:
            return False
        return plog.log.visible_end_offset <= sp.spso <= plog.log.log_end_offset

    return bool(broker.call(read))


def _consume_with(
    consumer: Any, decide: Callable[[Any], AcknowledgeType], done: Callable[[], bool], timeout: float = 30
) -> list[Any]:
    """Poll in explicit mode, acknowledging each record as ``decide`` says, committing each poll."""
    seen: list[Any] = []
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"consumed {len(seen)} records only"
        messages = consumer.poll(0.2)
        for message in messages:
            assert message.error() is None, message.error()
            seen.append(message)
            consumer.acknowledge(message, decide(message))
        if messages:
            assert all(v is None for v in consumer.commit_sync().values())
    return seen


def _headers(message: Any) -> dict[str, bytes]:
    return {name: value for name, value in (message.headers() or [])}


def test_rejected_and_exhausted_records_reach_the_dlq_with_their_history(
    tmp_path: Path, persister: str
) -> None:
    config = {**DLQ_BROKER, "errors.deadletterqueue.auto.create.topics.enable": "true"}
    with EmbeddedBroker(tmp_path / "d", config={**config, "share.persister": persister}) as broker:
        with Admin(broker.bootstrap) as admin:
            admin.create_topic("src", 3)
        _produce_keyed(broker.bootstrap, "src", 60, 3)
        _alter_group(
            broker.bootstrap,
            "g",
            {
                "errors.deadletterqueue.topic.name": "dlq.src",
                "errors.deadletterqueue.copy.record.enable": "true",
            },
        )
        rejected = {i for i in range(60) if i % 5 == 0}
        released = {i for i in range(60) if i % 5 == 1}
        deliveries: dict[int, int] = {}

        def decide(message: Any) -> AcknowledgeType:
            i = int(message.value()[1:])
            deliveries[i] = max(deliveries.get(i, 0), message.delivery_count())
            if i in rejected:
                return AcknowledgeType.REJECT
            if i in released:
                return AcknowledgeType.RELEASE
            return AcknowledgeType.ACCEPT

        consumer = share_consumer(
            broker.bootstrap, "g", ["src"], **{"share.acknowledgement.mode": "explicit"}
        )
        try:
            _consume_with(
                consumer,
                decide,
                lambda: len(deliveries) == 60 and all(deliveries[i] == 2 for i in released),
            )
        finally:
            consumer.close()
        for p in range(3):
            _wait(lambda p=p: _settled(broker, "g", "src", p))  # type: ignore[misc]
        dead = _read_topic(broker.bootstrap, "dlq.src", lambda out: len(out) >= 24)
        assert len(dead) == 24
        got = {int(m.value()[1:]): m for m in dead}
        assert set(got) == rejected | released  # accepted records never appear
        for i, m in got.items():
            h = _headers(m)
            assert m.key() == b"k%d" % i and h["h"] == b"x%d" % i  # copied
            assert h["__dlq.errors.topic"] == b"src"
            assert h["__dlq.errors.partition"] == str(i % 3).encode()
            assert h["__dlq.errors.group"] == b"g"
            assert int(h["__dlq.errors.offset"]) == i // 3
            if i in rejected:
                assert h["__dlq.errors.delivery.count"] == b"1"
                assert h["__dlq.errors.message"] == b"Offset rejected by client."
            else:
                assert h["__dlq.errors.delivery.count"] == b"2"
                assert h["__dlq.errors.message"] == b"Offset delivery count exceeded the threshold."
        info = broker.broker.topics.get("dlq.src")
        assert info is not None and info.configs.get("errors.deadletterqueue.group.enable") == "true"


def test_dlq_partition_is_source_mod_count_and_copy_off_sends_headers_only(
    tmp_path: Path, persister: str
) -> None:
    with EmbeddedBroker(tmp_path / "d", config={**DLQ_BROKER, "share.persister": persister}) as broker:
        with Admin(broker.bootstrap) as admin:
            admin.create_topic("src", 3)
            admin.create_topic("dlq.two", 2, configs={"errors.deadletterqueue.group.enable": "true"})
        _produce_keyed(broker.bootstrap, "src", 30, 3)
        _alter_group(broker.bootstrap, "g", {"errors.deadletterqueue.topic.name": "dlq.two"})
        seen: set[int] = set()

        def reject_odd(message: Any) -> AcknowledgeType:
            i = int(message.value()[1:])
            seen.add(i)
            return AcknowledgeType.REJECT if i % 2 else AcknowledgeType.ACCEPT

        consumer = share_consumer(
            broker.bootstrap, "g", ["src"], **{"share.acknowledgement.mode": "explicit"}
        )
        try:
            _consume_with(consumer, reject_odd, lambda: len(seen) == 30)
        finally:
            consumer.close()
        dead = _read_topic(broker.bootstrap, "dlq.two", lambda out: len(out) >= 15)
        assert len(dead) == 15
        for m in dead:
            h = _headers(m)
            assert m.key() is None and m.value() is None and "h" not in h
            assert m.partition() == int(h["__dlq.errors.partition"]) % 2
        assert sorted(
            int(_headers(m)["__dlq.errors.offset"]) * 3 + int(_headers(m)["__dlq.errors.partition"])
            for m in dead
        ) == [i for i in range(30) if i % 2]


def test_lock_expiry_at_the_limit_dead_letters(tmp_path: Path, persister: str) -> None:
    """Records acquired and never acknowledged come back when their lock expires; when the expiry
    comes at the delivery limit they go to the DLQ instead."""
    config = {
        **DLQ_BROKER,
        "group.share.min.record.lock.duration.ms": "500",
        "group.share.record.lock.duration.ms": "500",
        "errors.deadletterqueue.auto.create.topics.enable": "true",
    }
    with EmbeddedBroker(tmp_path / "d", config={**config, "share.persister": persister}) as broker:
        with Admin(broker.bootstrap) as admin:
            admin.create_topic("src", 1)
        _produce_keyed(broker.bootstrap, "src", 5, 1)
        _alter_group(broker.bootstrap, "g", {"errors.deadletterqueue.topic.name": "dlq.exp"})
        counts: dict[int, int] = {}
        with ShareConsumer(broker.bootstrap, "g", topics=["src"]) as consumer:
            deadline = time.monotonic() + 30
            while not _settled(broker, "g", "src", 0):  # never acknowledging: each lock lapses
                assert time.monotonic() < deadline, counts
                for record in consumer.poll(0.2):
                    counts[record.offset] = record.delivery_count or 0
        assert counts == {offset: 2 for offset in range(5)}
        dead = _read_topic(broker.bootstrap, "dlq.exp", lambda out: len(out) >= 5)
        assert sorted(int(_headers(m)["__dlq.errors.offset"]) for m in dead) == list(range(5))
        assert {_headers(m)["__dlq.errors.delivery.count"] for m in dead} == {b"2"}
        assert {_headers(m)["__dlq.errors.message"] for m in dead} == {
            b"Offset delivery count exceeded the threshold."
        }


def _reject_one(broker: EmbeddedBroker, group: str, topic: str) -> None:
    consumer = share_consumer(broker.bootstrap, group, [topic], **{"share.acknowledgement.mode": "explicit"})
    try:
        _consume_with(consumer, lambda m: AcknowledgeType.REJECT, lambda: _settled(broker, group, topic, 0))
    finally:
        consumer.close()


def test_write_time_validation_archives_counted_and_logged(
    tmp_path: Path, persister: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Each of Kafka's write-time rules (and shareq's source-topic rule): the record is archived
    without a DLQ record, counted, the message logged, the broker still serving."""
    caplog.set_level(logging.WARNING, logger="shareq.share.dlq")
    with EmbeddedBroker(tmp_path / "d", config={**DLQ_BROKER, "share.persister": persister}) as broker:
        with Admin(broker.bootstrap) as admin:
            admin.create_topic("src", 1)
            admin.create_topic("dlq.plain", 1)  # not opted in
            admin.create_topic("other", 1, configs={"errors.deadletterqueue.group.enable": "true"})
            admin.create_topic("dlq.loop", 1, configs={"errors.deadletterqueue.group.enable": "true"})
        _produce_keyed(broker.bootstrap, "src", 1, 1)
        _produce_keyed(broker.bootstrap, "dlq.loop", 1, 1)
        cases = [
            (
                "g-plain",
                "dlq.plain",
                "src",
                "DLQ is not enabled on configured DLQ topic for share group: g-plain",
            ),
            (
                "g-prefix",
                "other",
                "src",
                "does not comply with the DLQ topic prefix in share group: g-prefix",
            ),
            ("g-missing", "dlq.none", "src", "DLQ topic does not exist and auto create is disabled"),
            ("g-loop", "dlq.loop", "dlq.loop", "is the topic its dead letters come from"),
        ]
        for group, dlq, source, message in cases:
            _alter_group(broker.bootstrap, group, {"errors.deadletterqueue.topic.name": dlq})
            _reject_one(broker, group, source)

            def counted(group: str = group) -> bool:
                share = broker.broker.share
                assert share is not None
                stats = share.dead_letters.stats.get(group)
                return stats is not None and stats.archived_without_record == 1 and stats.records == 0

            _wait(lambda: bool(broker.call(counted)))
            assert any(message in r.getMessage() for r in caplog.records), message
        assert broker.broker.topics.get("dlq.none") is None
        for topic in ("dlq.plain", "other"):
            assert broker.broker.partition(topic, 0).log.log_end_offset == 0  # type: ignore[union-attr]
        # still serving: a fresh group reads the record
        consumer = share_consumer(broker.bootstrap, "g-after", ["src"])
        try:
            got: list[Any] = []
            deadline = time.monotonic() + 20
            while not got and time.monotonic() < deadline:
                got = [m for m in consumer.poll(0.2) if m.error() is None]
            assert [m.value() for m in got] == [b"v0"]
        finally:
            consumer.close()


def test_alter_time_validation(tmp_path: Path, persister: str) -> None:
    """A ``__`` DLQ name is refused with INVALID_CONFIG (Kafka's message); so is a topic the group
    consumes (shareq's check); a missing or not-opted-in topic is accepted (checked at write time)."""
    with EmbeddedBroker(tmp_path / "d", config={**DLQ_BROKER, "share.persister": persister}) as broker:
        with Admin(broker.bootstrap) as admin:
            admin.create_topic("src", 1)
        with pytest.raises(KafkaError) as refused:
            _alter_group(broker.bootstrap, "g", {"errors.deadletterqueue.topic.name": "__dlq"})
        assert refused.value.code == INVALID_CONFIG
        assert "DLQ topic name must not start with '__'" in str(refused.value)
        _alter_group(broker.bootstrap, "g", {"errors.deadletterqueue.topic.name": "dlq.absent"})
        consumer = share_consumer(broker.bootstrap, "g", ["src"])
        try:
            consumer.poll(0.5)

            def joined() -> bool:
                share = broker.broker.share
                assert share is not None
                group = share.coordinator._groups.get("g")
                return group is not None and bool(group.members)

            _wait(lambda: bool(broker.call(joined)))
            with pytest.raises(KafkaError) as looped:
                _alter_group(broker.bootstrap, "g", {"errors.deadletterqueue.topic.name": "src"})
            assert looped.value.code == INVALID_CONFIG
        finally:
            consumer.close()


def test_a_record_too_large_for_the_dlq_is_archived_counted_and_logged(
    tmp_path: Path, persister: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="shareq.share.dlq")
    with EmbeddedBroker(tmp_path / "d", config={**DLQ_BROKER, "share.persister": persister}) as broker:
        with Admin(broker.bootstrap) as admin:
            admin.create_topic("src", 1)
            admin.create_topic(
                "dlq.small",
                1,
                configs={"errors.deadletterqueue.group.enable": "true", "max.message.bytes": "600"},
            )
        producer = Producer({"bootstrap.servers": broker.bootstrap, **FAST})
        producer.produce("src", value=b"B" * 2000, partition=0)
        producer.produce("src", value=b"s", partition=0)
        assert producer.flush(15) == 0
        _alter_group(
            broker.bootstrap,
            "g",
            {
                "errors.deadletterqueue.topic.name": "dlq.small",
                "errors.deadletterqueue.copy.record.enable": "true",
            },
        )
        _reject_one(broker, "g", "src")

        def stats() -> tuple[int, int]:
            share = broker.broker.share
            assert share is not None
            s = share.dead_letters.stats.get("g")
            return (0, 0) if s is None else (s.records, s.archived_without_record)

        _wait(lambda: broker.call(stats) == (1, 1))
        dead = _read_topic(broker.bootstrap, "dlq.small", lambda out: len(out) >= 1)
        assert [(m.value(), _headers(m)["__dlq.errors.offset"]) for m in dead] == [(b"s", b"1")]
        assert any("larger than DLQ topic dlq.small allows" in r.getMessage() for r in caplog.records)
