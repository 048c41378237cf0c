"""KIP-1289's corner cases (and the design's extra ones) that need more than one transaction, a short
lock, a delivery limit, two partitions or a broker kill, through the wire with our client, each showing
the share-partition's state before and after. ``docs/transactional-acks.md`` maps every case to its test.
Also: the describe API and the CLI name the records a transaction holds and its producer id."""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from kio.schema.errors import ErrorCode
from test_txn_share_acks import CONFIG, Setup, poll_n, wait_for

from shareq.cli.main import main as shareq_cli
from shareq.client import (
    AcknowledgeType,
    AckRange,
    Admin,
    ClientError,
    KafkaError,
    PendingTransaction,
    Producer,
    ShareConsumer,
)
from shareq.client import _transactions as wire
from shareq.embedded import EmbeddedBroker
from shareq.share.persister import SharePartitionKey

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

A = AcknowledgeType
SHORT_LOCK = {
    **CONFIG,
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.record.lock.duration.ms": "1000",
}


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(tmp_path / "data", config=CONFIG) as b:
        yield b


@pytest.fixture
def short_lock(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(tmp_path / "data", config=SHORT_LOCK) as b:
        yield b


def producer_ids(p: Producer) -> tuple[int, int]:
    _tid, pid, epoch = p._txn_ids()
    return pid, epoch


def run_cli(bootstrap: str, *args: str) -> Any:
    result = CliRunner().invoke(shareq_cli, [*args, "--bootstrap", bootstrap, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_describe_and_cli_name_pending_records_and_their_producer(broker: EmbeddedBroker) -> None:
    """DescribeShareGroupOffsets (shareq's tagged field), `shareq offsets describe` and `shareq groups
    describe` show how many records a transaction holds in TX_PENDING and its producer id; none once it
    commits."""
    s = Setup(broker)
    consumer = s.consumer()
    try:
        records = poll_n(consumer, 10)
        p = s.producer()
        p.begin_transaction()
        p.send_share_acknowledgements_to_transaction(
            [(r, A.ACCEPT) for r in records[:6]], consumer.share_group_metadata()
        )
        pid, epoch = producer_ids(p)
        with Admin(s.bootstrap) as admin:
            offset = admin.describe_share_group_offsets(s.group)[(s.topic, 0)]
        assert offset.pending == (PendingTransaction(pid, epoch, 6),) and offset.pending_records == 6
        (row,) = run_cli(s.bootstrap, "offsets", "describe", s.group)
        assert (row["tx_pending"], row["pending_transactions"]) == (
            6,
            [{"producer_id": pid, "producer_epoch": epoch, "records": 6}],
        )
        described = run_cli(s.bootstrap, "groups", "describe", s.group)
        assert [(t["topic"], t["partition"], t["tx_pending"]) for t in described["tx_pending"]] == [
            (s.topic, 0, 6)
        ]
        p.commit_transaction()
        with Admin(s.bootstrap) as admin:
            offset = admin.describe_share_group_offsets(s.group)[(s.topic, 0)]
        assert (offset.start_offset, offset.pending) == (6, ())
        assert run_cli(s.bootstrap, "offsets", "describe", s.group)[0]["tx_pending"] == 0
        assert run_cli(s.bootstrap, "groups", "describe", s.group)["tx_pending"] == []
        p.close()
    finally:
        consumer.close()


def test_lock_expiry_while_pending_neither_reverts_nor_redelivers(short_lock: EmbeddedBroker) -> None:
    """KIP case 6 (shareq deviates: the lock is suspended). With a 1 s lock, records staged for 3 s stay
    TX_PENDING, a second consumer gets nothing; the commit acknowledges them, none is delivered again."""
    s = Setup(short_lock)
    first = s.consumer()
    second = s.consumer()
    try:
        records = poll_n(first, 10)
        p = s.producer()
        p.begin_transaction()
        p.send(s.out, b"o", partition=0)
        p.send_share_acknowledgements_to_transaction(
            [(r, A.ACCEPT) for r in records], first.share_group_metadata()
        )
        before = s.runs()
        assert before == [(0, 9, "TX_PENDING", first.member_id, True)]
        deadline = time.monotonic() + 3.0
        got: list[Any] = []
        while time.monotonic() < deadline:  # three lock durations
            got += second.poll(0.3)
        assert got == [] and s.runs() == before
        p.commit_transaction()
        assert s.runs() == [] and s.spso() == 10
        assert second.poll(1.0) == [] and s.committed_out() == [b"o"]
        p.close()
    finally:
        first.close()
        second.close()


def test_abort_after_the_lock_passed_releases_for_one_redelivery(short_lock: EmbeddedBroker) -> None:
    """KIP case 7 when the lock has run out meanwhile: the ABORT marker releases the records (AVAILABLE),
    and another consumer gets each once more, delivery count 2."""
    s = Setup(short_lock)
    first = s.consumer()
    try:
        records = poll_n(first, 10)
        p = s.producer()
        p.begin_transaction()
        p.send_share_acknowledgements_to_transaction(
            [(r, A.ACCEPT) for r in records], first.share_group_metadata()
        )
        time.sleep(1.5)  # past the 1 s lock the staging suspended
        assert s.runs() == [(0, 9, "TX_PENDING", first.member_id, True)]
        p.abort_transaction()
        assert [(r[0], r[1], r[2], r[4]) for r in s.runs()] == [(0, 9, "AVAILABLE", False)]
        second = s.consumer()
        try:
            again = poll_n(second, 10)
            assert sorted(r.offset for r in again) == list(range(10))
            assert {r.delivery_count for r in again} == {2}
        finally:
            second.close()
        p.close()
    finally:
        first.close()


def test_abort_at_the_delivery_limit_archives(tmp_path: Path) -> None:
    """Case 20: records at the delivery limit (2) whose owner left are archived by the ABORT marker (the
    release rules), not made available again; the start offset moves past them."""
    config = {**CONFIG, "group.share.delivery.count.limit": "2"}
    with EmbeddedBroker(tmp_path / "data", config=config) as broker:
        s = Setup(broker)
        first = s.consumer()
        records = poll_n(first, 10)
        for r in records:
            first.acknowledge(r, A.RELEASE)
        first.commit()
        records = poll_n(first, 10)
        assert {r.delivery_count for r in records} == {2}
        p = s.producer()
        p.begin_transaction()
        p.send_share_acknowledgements_to_transaction(
            [(r, A.ACCEPT) for r in records], first.share_group_metadata()
        )
        first.close()  # the owner leaves: the staged records stay, ownerless
        assert s.runs() == [(0, 9, "TX_PENDING", None, True)]
        p.abort_transaction()
        assert s.runs() == []
        assert s.spso() == 10
        other = s.consumer()
        try:
            assert other.poll(1.0) == []
        finally:
            other.close()
        p.close()


def test_gap_commits_to_archived_and_release_is_refused_by_the_broker(broker: EmbeddedBroker) -> None:
    """Case 10: GAP may be staged (control-record offsets) and its COMMIT archives; RELEASE sent on the
    wire (below the client's own check) is refused with INVALID_RECORD_STATE and changes nothing."""
    s = Setup(broker)
    consumer = s.consumer()
    try:
        records = poll_n(consumer, 10)
        md = consumer.share_group_metadata()
        topic_id = records[0].topic_id
        assert topic_id is not None
        p = s.producer()
        p.begin_transaction()
        release = [AckRange(topic_id=topic_id, partition=0, first_offset=5, last_offset=9, type=A.RELEASE)]
        codes = wire.txn_share_acknowledge(p.cluster.any_connection(), p._txn_ids(), md, release)
        assert codes == {(topic_id, 0): ErrorCode.invalid_record_state}
        assert s.runs() == [(0, 9, "ACQUIRED", consumer.member_id, False)]
        p.send_share_acknowledgements_to_transaction(
            [AckRange(topic_id=topic_id, partition=0, first_offset=0, last_offset=4, type=A.GAP)], md
        )
        assert s.runs()[0] == (0, 4, "TX_PENDING", consumer.member_id, True)
        p.commit_transaction()
        assert s.runs() == [(5, 9, "ACQUIRED", consumer.member_id, False)]
        assert s.spso() == 5
        p.close()
    finally:
        consumer.close()


def test_one_bad_partition_stages_nothing_anywhere(broker: EmbeddedBroker) -> None:
    """Case 11 and acceptance 7: a request naming two partitions, one fine and one holding an
    ACKNOWLEDGED record, is refused (INVALID_RECORD_STATE) and stages nothing on either."""
    s = Setup(broker, records=0)
    topic = f"two-{uuid.uuid4().hex[:6]}"
    with Admin(s.bootstrap) as admin:
        admin.create_topic(topic, 2)
    with Producer(s.bootstrap) as feeder:
        for i in range(10):
            feeder.send(topic, b"v%d" % i, partition=i % 2)
    consumer = ShareConsumer(s.bootstrap, s.group, topics=[topic], max_poll_records=100)
    try:
        records = poll_n(consumer, 10)
        done = next(r for r in records if r.partition == 1)
        consumer.acknowledge(done, A.ACCEPT)
        consumer.commit()
        share = broker.broker.share
        info = broker.broker.topics.get(topic)
        assert share is not None and info is not None

        def states() -> list[list[tuple[int, int, str]]]:
            def read() -> list[list[tuple[int, int, str]]]:
                out = []
                for partition in (0, 1):
                    key = SharePartitionKey(group_id=s.group, topic_id=info.topic_id, partition=partition)
                    sp = share.partitions.cached(key)
                    out.append(
                        []
                        if sp is None
                        else [(r.first_offset, r.last_offset, r.state.name) for r in sp.runs()]
                    )
                return out

            return broker.call(read)  # type: ignore[no-any-return]

        before = states()
        assert before == [[(0, 4, "ACQUIRED")], [(1, 4, "ACQUIRED")]]  # offset 0 of partition 1: acknowledged
        p = s.producer()
        p.begin_transaction()
        with pytest.raises(KafkaError) as err:
            p.send_share_acknowledgements_to_transaction(
                [(r, A.ACCEPT) for r in records], consumer.share_group_metadata()
            )
        assert err.value.code == ErrorCode.invalid_record_state
        assert states() == before
        # Each partition's answer: the one at fault, and the one left alone because of it.
        ranges = wire.ack_ranges([(r, A.ACCEPT) for r in records])
        codes = wire.txn_share_acknowledge(
            p.cluster.any_connection(), p._txn_ids(), consumer.share_group_metadata(), ranges
        )
        assert codes == {
            (info.topic_id, 0): ErrorCode.operation_not_attempted,
            (info.topic_id, 1): ErrorCode.invalid_record_state,
        }
        assert states() == before
        p.abort_transaction()
        p.close()
    finally:
        consumer.close()


def test_successive_transactions_of_one_producer(broker: EmbeddedBroker) -> None:
    """Case 18 (TV1: every transaction of a producer has the same id and epoch): the first commits its
    records, the second aborts its own; neither marker touches the other's records."""
    s = Setup(broker)
    consumer = s.consumer()
    try:
        records = poll_n(consumer, 10)
        md = consumer.share_group_metadata()
        member = consumer.member_id
        p = s.producer()
        p.begin_transaction()
        p.send_share_acknowledgements_to_transaction([(r, A.ACCEPT) for r in records[:5]], md)
        first_ids = producer_ids(p)
        p.commit_transaction()
        assert s.runs() == [(5, 9, "ACQUIRED", member, False)] and s.spso() == 5
        p.begin_transaction()
        p.send_share_acknowledgements_to_transaction([(r, A.REJECT) for r in records[5:]], md)
        assert producer_ids(p) == first_ids
        assert s.runs() == [(5, 9, "TX_PENDING", member, True)]
        p.abort_transaction()
        assert s.runs() == [(5, 9, "ACQUIRED", member, False)] and s.spso() == 5
        p.close()
    finally:
        consumer.close()


def test_broker_killed_after_staging_then_the_commit_acknowledges(tmp_path: Path) -> None:
    """Case 1 (and acceptance 5): the broker is SIGKILLed after staging; after the restart the records
    are TX_PENDING (from the state log, ownerless) and not delivered; the producer's commit then succeeds
    and acknowledges them."""
    from broker_harness import BrokerProcess

    broker = BrokerProcess(tmp_path / "data", *(f"{k}={v}" for k, v in CONFIG.items())).start()
    try:
        bootstrap = broker.bootstrap
        topic, out, group = "in-k", "out-k", "g-kill"
        with Admin(bootstrap) as admin:
            admin.create_topic(topic, 1)
            admin.create_topic(out, 1)
        with Producer(bootstrap) as feeder:
            for i in range(10):
                feeder.send(topic, b"v%d" % i, partition=0)
        consumer = ShareConsumer(bootstrap, group, topics=[topic], request_timeout=5)
        records = poll_n(consumer, 10)
        p = Producer(bootstrap, transactional_id="tx-kill", request_timeout=5)
        p.init_transactions()
        p.begin_transaction()
        p.send(out, b"o", partition=0)
        p.send_share_acknowledgements_to_transaction(
            [(r, A.ACCEPT) for r in records], consumer.share_group_metadata()
        )
        pid, epoch = producer_ids(p)
        p.flush()
        broker.kill()
        with contextlib.suppress(Exception):
            consumer.close()
        broker.start()
        with Admin(bootstrap) as admin:
            offset = wait_for(
                lambda: admin.describe_share_group_offsets(group).get((topic, 0)), "the group's offsets"
            )
        assert (offset.start_offset, offset.pending) == (0, (PendingTransaction(pid, epoch, 10),))
        other = ShareConsumer(bootstrap, group, topics=[topic], request_timeout=5)
        try:
            assert other.poll(1.5) == []
            deadline = time.monotonic() + 30
            while True:  # the producer's connection broke: retry as a client does
                try:
                    p.commit_transaction()
                    break
                except (ClientError, OSError):
                    assert time.monotonic() < deadline, "the commit never succeeded"
                    time.sleep(0.1)
            with Admin(bootstrap) as admin:
                offset = admin.describe_share_group_offsets(group)[(topic, 0)]
            assert (offset.start_offset, offset.pending) == (10, ())
            assert other.poll(1.0) == []
        finally:
            other.close()
            p.close()
    finally:
        broker.kill()


def test_failed_registration_stages_nothing(broker: EmbeddedBroker, monkeypatch: pytest.MonkeyPatch) -> None:
    """Case 2: when the share-state partitions cannot join the transaction (the transaction log refuses
    the write: a disk fault, injected here), the request fails (KAFKA_STORAGE_ERROR) and nothing is
    staged; once the log writes again, the same staging goes through."""
    from shareq.log.errors import LogIOError
    from shareq.log.partition_log import PartitionLog

    s = Setup(broker)
    consumer = s.consumer()
    try:
        records = poll_n(consumer, 10)
        md = consumer.share_group_metadata()
        p = s.producer()
        p.begin_transaction()
        real_append = PartitionLog.append
        failing = True

        def append(self: PartitionLog, *args: Any, **kwargs: Any) -> Any:
            if failing and self.directory.name == "__transaction_state-0":
                raise LogIOError("injected: the disk refused the write")
            return real_append(self, *args, **kwargs)

        monkeypatch.setattr(PartitionLog, "append", append)
        with pytest.raises(KafkaError) as err:
            p.send_share_acknowledgements_to_transaction([(r, A.ACCEPT) for r in records], md)
        assert err.value.code == ErrorCode.kafka_storage_error
        assert s.runs() == [(0, 9, "ACQUIRED", consumer.member_id, False)]
        failing = False
        p.send_share_acknowledgements_to_transaction([(r, A.ACCEPT) for r in records], md)
        assert s.runs() == [(0, 9, "TX_PENDING", consumer.member_id, True)]
        p.commit_transaction()
        assert s.runs() == [] and s.spso() == 10
        p.close()
    finally:
        consumer.close()
