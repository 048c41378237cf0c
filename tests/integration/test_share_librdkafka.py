"""librdkafka's ShareConsumer (unmodified) against the broker's share groups, end to end."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import AcknowledgeType
from share_consumers import SHARE_BROKER, consume_then_die, create_topic, poll_values, produce, share_consumer
from share_wire_log import ACQUIRED, AVAILABLE, TERMINAL, ShareWireLog

from shareq.embedded import EmbeddedBroker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


@pytest.fixture
def share_broker(tmp_path: Path, persister: str) -> Iterator[EmbeddedBroker]:
    """The share-group test broker, once per persister."""
    with EmbeddedBroker(tmp_path / "data", config={**SHARE_BROKER, "share.persister": persister}) as broker:
        yield broker


def _tid(broker: EmbeddedBroker, topic: str) -> object:
    info = broker.broker.topics.get(topic)
    assert info is not None
    return info.topic_id


def test_implicit_mode_consumes_everything_once(share_broker: EmbeddedBroker) -> None:
    log = ShareWireLog(share_broker).install()
    create_topic(share_broker.bootstrap, "imp", 2)
    values = [b"r%d" % i for i in range(300)]
    produce(share_broker.bootstrap, "imp", values, 2, per_batch=10)
    started = time.monotonic()
    consumer = share_consumer(share_broker.bootstrap, "g", ["imp"])
    try:
        first = poll_values(consumer, lambda out: bool(out))
        assert first and time.monotonic() - started < 5.0  # the assignment came with the first heartbeat
        rest = poll_values(consumer, lambda out: len(first) + len(out) >= 300)
        got = [m.value() for m in first + rest]
        assert sorted(got) == sorted(values) and len(set(got)) == 300
        assert all(m.delivery_count() == 1 for m in first + rest)
        assert poll_values(consumer, lambda out: False, timeout=1.0) == []  # the acks ride on these fetches
    finally:
        consumer.close()
    tid = _tid(share_broker, "imp")
    for part in (0, 1):
        assert set(log.states("g", tid, part).values()) == {TERMINAL}  # type: ignore[arg-type]
    # librdkafka: join at epoch 0, Metadata by id, then ShareFetch v1 sessions; leave at -1
    heartbeats = [(epoch, detail) for kind, epoch, detail in log.calls if kind == "heartbeat"]
    assert heartbeats[0][0] == 0 and heartbeats[-1][0] == -1


def test_explicit_accept_release_reject(share_broker: EmbeddedBroker) -> None:
    log = ShareWireLog(share_broker).install()
    create_topic(share_broker.bootstrap, "exp", 1)
    produce(share_broker.bootstrap, "exp", [b"x%d" % i for i in range(30)], 1, per_batch=5)
    consumer = share_consumer(
        share_broker.bootstrap, "g", ["exp"], **{"share.acknowledgement.mode": "explicit"}
    )
    try:
        kinds = {0: AcknowledgeType.ACCEPT, 1: AcknowledgeType.RELEASE, 2: AcknowledgeType.REJECT}
        first = poll_values(
            consumer,
            lambda out: len(out) >= 30,
            on_message=lambda m: consumer.acknowledge(m, kinds[m.offset() % 3]),
        )
        assert sorted(m.offset() for m in first) == list(range(30))
        results = consumer.commit_sync()
        assert all(v is None for v in results.values()), results
        again = poll_values(
            consumer,
            lambda out: len(out) >= 10,
            on_message=lambda m: consumer.acknowledge(m, AcknowledgeType.ACCEPT),
        )
        # only the RELEASEd offsets come back, with a higher delivery count
        assert sorted(m.offset() for m in again) == [o for o in range(30) if o % 3 == 1]
        assert {m.delivery_count() for m in again} == {2}
        assert all(v is None for v in consumer.commit_sync().values())
        assert poll_values(consumer, lambda out: False, timeout=1.0) == []  # REJECTs never come back
    finally:
        consumer.close()
    assert set(log.states("g", _tid(share_broker, "exp"), 0).values()) == {TERMINAL}  # type: ignore[arg-type]


def test_delivery_count_limit_archives(tmp_path: Path, persister: str) -> None:
    config = {**SHARE_BROKER, "group.share.delivery.count.limit": "2", "share.persister": persister}
    with EmbeddedBroker(tmp_path / "d", config=config) as broker:
        log = ShareWireLog(broker).install()
        create_topic(broker.bootstrap, "poison", 1)
        produce(broker.bootstrap, "poison", [b"p0", b"p1", b"p2"], 1, per_batch=3)
        consumer = share_consumer(
            broker.bootstrap, "g", ["poison"], **{"share.acknowledgement.mode": "explicit"}
        )
        try:
            counts: dict[int, list[int]] = {}
            for _ in range(2):
                # explicit mode: each poll's records are acknowledged before the next poll
                got = poll_values(
                    consumer,
                    lambda out: len(out) >= 3,
                    on_message=lambda m: consumer.acknowledge(m, AcknowledgeType.RELEASE),
                )
                assert len(got) == 3
                for m in got:
                    counts.setdefault(m.offset(), []).append(m.delivery_count())
                assert all(v is None for v in consumer.commit_sync().values())
            assert counts == {0: [1, 2], 1: [1, 2], 2: [1, 2]}
            # the second release hit the limit: archived, never delivered again
            assert poll_values(consumer, lambda out: False, timeout=1.0) == []
            assert set(log.states("g", _tid(broker, "poison"), 0).values()) == {TERMINAL}  # type: ignore[arg-type]
        finally:
            consumer.close()


def test_lock_expiry_redelivers_records_of_a_dead_consumer(tmp_path: Path, persister: str) -> None:
    config = {
        **SHARE_BROKER,
        "share.persister": persister,
        "group.share.min.record.lock.duration.ms": "500",
        "group.share.record.lock.duration.ms": "1000",
    }
    with EmbeddedBroker(tmp_path / "d", config=config) as broker:
        create_topic(broker.bootstrap, "locks", 1)
        produce(broker.bootstrap, "locks", [b"l%d" % i for i in range(20)], 1, per_batch=20)
        assert consume_then_die(broker.bootstrap, "locks") == 20
        started = time.monotonic()
        consumer = share_consumer(broker.bootstrap, "g", ["locks"])
        try:
            got = poll_values(consumer, lambda out: len(out) >= 20)
            assert sorted(m.offset() for m in got) == list(range(20))
            assert {m.delivery_count() for m in got} == {2}  # the dead member's lease lapsed
            assert time.monotonic() - started < 10
        finally:
            consumer.close()


def test_six_consumers_on_two_partitions_all_receive(share_broker: EmbeddedBroker) -> None:
    create_topic(share_broker.bootstrap, "six", 2)
    consumers = [share_consumer(share_broker.bootstrap, "g", ["six"]) for _ in range(6)]
    received: list[list[bytes]] = [[] for _ in consumers]
    errors: list[str] = []  # an assert in a thread would only end that thread, not the test
    stop = threading.Event()

    def run(i: int) -> None:
        while not stop.is_set():
            for m in consumers[i].poll(0.2):
                if m.error() is not None:
                    errors.append(str(m.error()))
                else:
                    received[i].append(m.value())

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(6)]
    for t in threads:
        t.start()
    try:
        values: list[bytes] = []
        deadline = time.monotonic() + 30
        wave = 0
        while time.monotonic() < deadline and not all(received):
            batch = [b"s%d-%d" % (wave, i) for i in range(40)]
            values += batch
            produce(share_broker.bootstrap, "six", batch, 2, per_batch=1)
            wave += 1
            time.sleep(0.2)
        while time.monotonic() < deadline and sum(map(len, received)) < len(values):
            time.sleep(0.05)
        assert errors == []
        assert all(received), [len(r) for r in received]
        everything = [v for r in received for v in r]
        assert sorted(everything) == sorted(values)  # each record went to exactly one consumer
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=10)
        for c in consumers:
            c.close()


def test_clean_close_acknowledges_pending_and_releases_the_rest(share_broker: EmbeddedBroker) -> None:
    log = ShareWireLog(share_broker).install()
    create_topic(share_broker.bootstrap, "closing", 1)
    produce(share_broker.bootstrap, "closing", [b"c%d" % i for i in range(10)], 1, per_batch=10)
    consumer = share_consumer(
        share_broker.bootstrap, "g", ["closing"], **{"share.acknowledgement.mode": "explicit"}
    )
    got = poll_values(consumer, lambda out: len(out) >= 10)
    assert len(got) == 10
    for m in got[:3]:
        consumer.acknowledge(m, AcknowledgeType.ACCEPT)
    consumer.close()  # sends the three ACCEPTs, then releases the other seven
    states = log.states("g", _tid(share_broker, "closing"), 0)  # type: ignore[arg-type]
    assert states == {**{o: TERMINAL for o in range(3)}, **{o: AVAILABLE for o in range(3, 10)}}
    second = share_consumer(share_broker.bootstrap, "g", ["closing"])
    try:
        again = poll_values(second, lambda out: len(out) >= 7)
        assert sorted(m.offset() for m in again) == list(range(3, 10))
        assert {m.delivery_count() for m in again} == {2}
    finally:
        second.close()
    assert ACQUIRED not in log.states("g", _tid(share_broker, "closing"), 0).values()  # type: ignore[arg-type]
