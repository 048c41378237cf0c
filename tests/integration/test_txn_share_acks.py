"""Transactional acknowledgements (KIP-1289) through the wire with our client: a share consumer's
acknowledgements staged in a producer's transaction, settled by its COMMIT or ABORT, kept across a
broker restart. Each test reads the share-partition's state (on the broker's loop) before and after."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import TopicPartition
from kio.schema.errors import ErrorCode
from share_consumers import user_records

from shareq.client import (
    AcknowledgeType,
    AckRange,
    Admin,
    KafkaError,
    Producer,
    ShareConsumer,
    UnsupportedVersionError,
)
from shareq.embedded import EmbeddedBroker
from shareq.share.persister import SharePartitionKey

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

CONFIG = {
    "share.coordinator.state.topic.num.partitions": "3",
    "group.share.auto.offset.reset": "earliest",
    "group.share.min.heartbeat.interval.ms": "100",
    "group.share.heartbeat.interval.ms": "100",
    "group.share.assignment.interval.ms": "0",
    "share.transactional.acks.enable": "true",
}
A = AcknowledgeType


def wait_for(check: Callable[[], Any], what: str, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


class Setup:
    def __init__(self, broker: EmbeddedBroker, records: int = 10) -> None:
        self.broker = broker
        self.bootstrap = broker.bootstrap
        self.topic = f"in-{uuid.uuid4().hex[:6]}"
        self.out = f"out-{uuid.uuid4().hex[:6]}"
        self.group = f"g-{uuid.uuid4().hex[:6]}"
        with Admin(self.bootstrap) as admin:
            admin.create_topic(self.topic, 1)
            admin.create_topic(self.out, 1)
        with Producer(self.bootstrap) as p:
            for i in range(records):
                p.send(self.topic, f"v{i}".encode(), partition=0)

    def consumer(self) -> ShareConsumer:
        return ShareConsumer(self.bootstrap, self.group, topics=[self.topic], max_poll_records=100)

    def producer(self, tid: str | None = None) -> Producer:
        p = Producer(self.bootstrap, transactional_id=tid or f"tx-{uuid.uuid4().hex[:6]}")
        p.init_transactions()
        return p

    def runs(self) -> list[tuple[int, int, str, str | None, bool]]:
        """(first, last, state, member, staged by a transaction) of the share-partition."""

        def read() -> list[tuple[int, int, str, str | None, bool]]:
            share = self.broker.broker.share
            assert share is not None
            info = self.broker.broker.topics.get(self.topic)
            assert info is not None
            key = SharePartitionKey(group_id=self.group, topic_id=info.topic_id, partition=0)
            sp = share.partitions.cached(key)
            if sp is None:
                return []
            return [
                (r.first_offset, r.last_offset, r.state.name, r.member, r.producer_id is not None)
                for r in sp.runs()
            ]

        return self.broker.call(read)  # type: ignore[no-any-return]

    def spso(self) -> int:
        with Admin(self.bootstrap) as admin:
            return admin.describe_share_group_offsets(self.group)[(self.topic, 0)].start_offset

    def past_the_data(self) -> bool:
        """The SPSO has passed every data record and stands on share state or the log end (with the
        in-log persister, share state follows the data: the engine passes it without acquiring)."""
        partition = self.broker.broker.partition(self.topic, 0)
        assert partition is not None
        end, count = user_records(partition.log)
        spso = self.spso()
        return count == end and spso >= end

    def committed_out(self) -> list[bytes]:
        """What a read_committed consumer (librdkafka) reads of the output, up to the LSO."""
        tp = TopicPartition(self.out, 0, 0)
        c = KafkaConsumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"reader-{uuid.uuid4().hex[:6]}",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
            }
        )
        try:
            c.assign([tp])
            _, lso = c.get_watermark_offsets(TopicPartition(self.out, 0), timeout=10)
            got: list[bytes] = []
            if lso <= 0:
                return got

            def caught_up() -> bool:
                for m in c.consume(100, 0.2):
                    if m.error() is None:
                        got.append(m.value())
                return c.position([TopicPartition(self.out, 0)])[0].offset >= lso

            wait_for(caught_up, "the output up to its LSO")
            return got
        finally:
            c.close()


def poll_n(consumer: ShareConsumer, n: int) -> list[Any]:
    got: list[Any] = []
    wait_for(lambda: got.extend(consumer.poll(0.2)) or len(got) >= n, f"{n} records")
    return got


@pytest.fixture
def broker(tmp_path: Path, persister: str) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(tmp_path / "data", config={**CONFIG, "share.persister": persister}) as b:
        yield b


def test_commit_acknowledges_and_makes_the_output_visible(broker: EmbeddedBroker) -> None:
    s = Setup(broker)
    consumer = s.consumer()
    try:
        records = poll_n(consumer, 10)
        member = consumer.member_id
        assert s.runs() == [(0, 9, "ACQUIRED", member, False)]
        p = s.producer()
        p.begin_transaction()
        for r in records:
            p.send(s.out, r.value.upper(), partition=0)
        p.send_share_acknowledgements_to_transaction(
            [(r, A.ACCEPT) for r in records], consumer.share_group_metadata()
        )
        assert s.runs() == [(0, 9, "TX_PENDING", member, True)]
        assert s.committed_out() == []
        p.commit_transaction()
        assert s.runs() == []
        assert s.past_the_data()
        assert sorted(s.committed_out()) == sorted(f"V{i}".encode() for i in range(10))
        p.close()
    finally:
        consumer.close()


def test_abort_gives_the_records_back_and_a_plain_acknowledge_then_works(broker: EmbeddedBroker) -> None:
    s = Setup(broker)
    consumer = s.consumer()
    try:
        records = poll_n(consumer, 10)
        member = consumer.member_id
        p = s.producer()
        p.begin_transaction()
        p.send(s.out, b"x", partition=0)
        p.send_share_acknowledgements_to_transaction(
            [(r, A.ACCEPT) for r in records], consumer.share_group_metadata()
        )
        # Plain acknowledgements and renewals of pending records are refused.
        consumer.acknowledge(records[0], A.ACCEPT)
        results = consumer.commit()
        assert results[(s.topic, 0)] == ErrorCode.invalid_record_state
        assert s.runs() == [(0, 9, "TX_PENDING", member, True)]
        p.abort_transaction()
        assert s.runs() == [(0, 9, "ACQUIRED", member, False)]
        assert s.committed_out() == []
        for r in records:
            consumer.acknowledge(r, A.ACCEPT)
        consumer.commit()
        wait_for(s.past_the_data, "the SPSO after plain acknowledgements")
        p.close()
    finally:
        consumer.close()


def test_errors_release_renew_stale_epoch_unknown_member_and_fenced_producer(broker: EmbeddedBroker) -> None:
    s = Setup(broker)
    consumer = s.consumer()
    try:
        records = poll_n(consumer, 10)
        md = consumer.share_group_metadata()
        topic_id = records[0].topic_id
        p = s.producer("tx-errors")
        p.begin_transaction()
        with pytest.raises(ValueError):
            p.send_share_acknowledgements_to_transaction([(records[0], A.RELEASE)], md)
        stale = type(md)(group_id=md.group_id, member_id=md.member_id, member_epoch=md.member_epoch + 7)
        with pytest.raises(KafkaError) as err:
            p.send_share_acknowledgements_to_transaction([(records[0], A.ACCEPT)], stale)
        assert err.value.code.name == "stale_member_epoch"
        nobody = type(md)(group_id=md.group_id, member_id="nobody", member_epoch=-1)
        with pytest.raises(KafkaError) as err:
            p.send_share_acknowledgements_to_transaction([(records[0], A.ACCEPT)], nobody)
        assert err.value.code.name == "unknown_member_id"
        # Offsets past what was acquired: nothing is staged, anywhere in the request.
        bad = [AckRange(topic_id=topic_id, partition=0, first_offset=0, last_offset=40)]
        with pytest.raises(KafkaError):
            p.send_share_acknowledgements_to_transaction(bad, md)
        assert all(r[2] == "ACQUIRED" for r in s.runs())
        # A newer instance fences this one: its staging is refused.
        newer = s.producer("tx-errors")
        with pytest.raises(KafkaError) as err:
            p.send_share_acknowledgements_to_transaction([(records[0], A.ACCEPT)], md)
        assert err.value.code.name in ("producer_fenced", "invalid_producer_epoch")
        assert all(r[2] == "ACQUIRED" for r in s.runs())
        newer.close()
        p.close()
    finally:
        consumer.close()


def test_pending_survives_a_restart_and_the_commit_after_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    tid = f"tx-{uuid.uuid4().hex[:6]}"
    with EmbeddedBroker(data, config=CONFIG) as broker:
        s = Setup(broker)
        consumer = s.consumer()
        records = poll_n(consumer, 10)
        p = s.producer(tid)
        p.begin_transaction()
        p.send(s.out, b"out", partition=0)
        p.send_share_acknowledgements_to_transaction(
            [(r, A.ACCEPT if r.offset % 2 else A.REJECT) for r in records], consumer.share_group_metadata()
        )
        p.flush()
        consumer.close()  # the session closes: pending records stay staged, ownerless
        assert {r[2] for r in s.runs()} == {"TX_PENDING"}
    with EmbeddedBroker(data, config=CONFIG) as broker:
        s.broker = broker
        s.bootstrap = broker.bootstrap
        # The staged records are not handed out again while their transaction is open.
        other = s.consumer()
        try:
            assert other.poll(1.0) == []
            assert {r[2] for r in s.runs()} == {"TX_PENDING"}
            p2 = Producer(s.bootstrap, transactional_id=tid)
            p2.init_transactions()  # fences the old instance: its open transaction is aborted
            assert {r[2] for r in s.runs()} == {"AVAILABLE"}
            again = poll_n(other, 10)
            assert sorted(r.offset for r in again) == list(range(10))
            p2.close()
        finally:
            other.close()


def test_retry_is_idempotent_and_session_close_keeps_pending_records(broker: EmbeddedBroker) -> None:
    s = Setup(broker)
    consumer = s.consumer()
    records = poll_n(consumer, 10)
    md = consumer.share_group_metadata()
    p = s.producer()
    p.begin_transaction()
    acks = [(r, A.ACCEPT) for r in records[:5]]
    p.send_share_acknowledgements_to_transaction(acks, md)
    p.send_share_acknowledgements_to_transaction(acks, md)  # the same again: no-op
    before = s.runs()
    assert before == [(0, 4, "TX_PENDING", md.member_id, True), (5, 9, "ACQUIRED", md.member_id, False)]
    consumer.close()  # session closes, member leaves: ACQUIRED ones released, pending ones stay
    wait_for(
        lambda: s.runs() == [(0, 4, "TX_PENDING", None, True), (5, 9, "AVAILABLE", None, False)], "release"
    )
    # Offsets cannot be altered under staged records (the group is empty now).
    with Admin(s.bootstrap) as admin:
        with pytest.raises(KafkaError) as err:
            admin.alter_share_group_offsets(s.group, {(s.topic, 0): 0})
        assert err.value.code == ErrorCode.unstable_offset_commit
        p.commit_transaction()
        assert s.runs() == [(5, 9, "AVAILABLE", None, False)]
        assert s.spso() == 5
        admin.alter_share_group_offsets(s.group, {(s.topic, 0): 0})
    p.close()


def test_lease_lost_before_staging_is_refused(broker: EmbeddedBroker) -> None:
    s = Setup(broker)
    first = s.consumer()
    records = poll_n(first, 10)
    md = first.share_group_metadata()
    first.close()  # its records go back to the group
    second = s.consumer()
    try:
        poll_n(second, 10)
        assert {r[3] for r in s.runs()} == {second.member_id}
        p = s.producer()
        p.begin_transaction()
        with pytest.raises(KafkaError) as err:  # the old member's metadata: gone from the group
            p.send_share_acknowledgements_to_transaction([(r, A.ACCEPT) for r in records], md)
        assert err.value.code in (ErrorCode.unknown_member_id, ErrorCode.invalid_record_state)
        # Another member's claim on these records is refused per offset too.
        md2 = second.share_group_metadata()
        other = type(md2)(group_id=md2.group_id, member_id=md.member_id, member_epoch=-1)
        with pytest.raises(KafkaError):
            p.send_share_acknowledgements_to_transaction([(r, A.ACCEPT) for r in records], other)
        assert {r[2] for r in s.runs()} == {"ACQUIRED"}
        p.abort_transaction()
        p.close()
    finally:
        second.close()


def test_transaction_timeout_aborts_and_the_records_return(broker: EmbeddedBroker) -> None:
    s = Setup(broker)
    consumer = s.consumer()
    try:
        records = poll_n(consumer, 10)
        member = consumer.member_id
        p = Producer(s.bootstrap, transactional_id=f"tx-{uuid.uuid4().hex[:6]}", transaction_timeout_ms=500)
        p.init_transactions()
        p.begin_transaction()
        p.send_share_acknowledgements_to_transaction(
            [(r, A.ACCEPT) for r in records], consumer.share_group_metadata()
        )
        assert s.runs() == [(0, 9, "TX_PENDING", member, True)]
        # The coordinator aborts it at its timeout; the lock (30 s) still runs: back to the owner.
        wait_for(lambda: s.runs() == [(0, 9, "ACQUIRED", member, False)], "the timeout abort")
        with pytest.raises(KafkaError):
            p.commit_transaction()  # fenced by the timeout abort
        p.close()
    finally:
        consumer.close()


def test_advertised_only_when_enabled(tmp_path: Path) -> None:
    plain = {k: v for k, v in CONFIG.items() if k != "share.transactional.acks.enable"}
    for directory, config, expected in (("plain", plain, None), ("on", CONFIG, (0, 0))):
        with EmbeddedBroker(tmp_path / directory, config=config) as b, Admin(b.bootstrap) as admin:
            conn = admin.cluster.any_connection()
            conn.connect()
            assert conn.broker_versions.get(93) == expected


def test_a_broker_without_it_is_named_with_the_setting_that_turns_it_on(tmp_path: Path) -> None:
    """Our client against a broker that does not serve KIP-1289: the error says what is missing and,
    for shareq, which setting turns it on; nothing is staged."""
    plain = {k: v for k, v in CONFIG.items() if k != "share.transactional.acks.enable"}
    with EmbeddedBroker(tmp_path / "plain", config=plain) as b:
        s = Setup(b)
        consumer = s.consumer()
        try:
            records = poll_n(consumer, 10)
            p = Producer(b.bootstrap, transactional_id=f"tx-{uuid.uuid4().hex[:6]}")
            p.init_transactions()
            p.begin_transaction()
            with pytest.raises(UnsupportedVersionError) as raised:
                p.send_share_acknowledgements_to_transaction(
                    [(r, A.ACCEPT) for r in records], consumer.share_group_metadata()
                )
            p.close()
            assert [run[2] for run in s.runs()] == ["ACQUIRED"]  # nothing staged
        finally:
            consumer.close()
    message = str(raised.value)
    assert "does not serve transactional acknowledgements (KIP-1289" in message, message
    assert "share.transactional.acks.enable=true" in message and "api key 93" in message, message
