"""Exactly-once from a share group to a topic (KIP-1289 with durable TX_PENDING) through broker kills.

Workers, each a ShareConsumer of group ``in`` plus a transactional Producer (our client), copy the
input to an output topic: per poll one transaction holding the outputs and the acknowledgements
(``send_share_acknowledgements_to_transaction``). A thread SIGKILLs and restarts the broker at
random points; once the broker kills itself right after a decision is logged, before any marker.
A worker that sees any error drops its clients and starts over (its next producer, same
transactional id, fences the old one and aborts its open transaction). At the end a read_committed
reader finds every input record's output exactly once, and every input record is acknowledged
(the group's start offsets are at the input's end).
"""

from __future__ import annotations

import contextlib
import os
import random
import subprocess
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
from broker_harness import BrokerProcess
from txn_clients import read_all

from shareq.client import AcknowledgeType, Admin, ClientError, Producer, ShareConsumer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(150)]

RECORDS = 5000
PARTITIONS = 2
WORKERS = 2
KILLS = 3
DEADLINE_S = 110.0
CONFIGS = (
    "share.transactional.acks.enable=true",
    "share.coordinator.state.topic.num.partitions=3",
    "group.share.auto.offset.reset=earliest",
    "group.share.min.heartbeat.interval.ms=200",
    "group.share.heartbeat.interval.ms=300",
    "group.share.assignment.interval.ms=0",
    "group.share.min.record.lock.duration.ms=1000",
    "group.share.record.lock.duration.ms=3000",
)


def _starts(bootstrap: str, group: str, topic: str) -> list[int]:
    with Admin(bootstrap, request_timeout=5) as admin:
        offsets = admin.describe_share_group_offsets(group)
        return [offsets[(topic, p)].start_offset if (topic, p) in offsets else -1 for p in range(PARTITIONS)]


def test_exactly_once_share_group_to_topic_through_broker_kills(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", *CONFIGS).start()
    bootstrap = broker.bootstrap
    source, sink = f"in-{uuid.uuid4().hex[:6]}", f"out-{uuid.uuid4().hex[:6]}"
    group = f"eos-{uuid.uuid4().hex[:6]}"
    with Admin(bootstrap) as admin:
        admin.create_topic(source, PARTITIONS)
        admin.create_topic(sink, PARTITIONS)
    with Producer(bootstrap) as feeder:
        for i in range(RECORDS):
            feeder.send(source, f"r{i}".encode(), partition=i % PARTITIONS)
    ends = [RECORDS // PARTITIONS] * PARTITIONS
    stop = threading.Event()
    progress = threading.Event()
    killer_done = threading.Event()
    stats = Counter[str]()
    failures: list[BaseException] = []
    rng = random.Random(7)

    def killer() -> None:
        try:
            for n in range(KILLS):
                # Each kill lands while work is under way: after a few more commits, at a random
                # moment within the next transaction.
                # (If the work is done or stalled for 5 s, kill anyway.)
                target = stats["transactions"] + 2
                while stats["transactions"] < target and progress.wait(5):
                    progress.clear()
                time.sleep(rng.uniform(0.0, 0.2))
                broker.kill()
                if n == 0:  # this run dies right after its first decision is logged
                    os.environ["SHAREQ_CRASH_AT"] = "txn.after_prepare"
                    try:
                        broker.start()
                    except RuntimeError:
                        pass  # it died in recovery, completing a decision found in the log
                    finally:
                        del os.environ["SHAREQ_CRASH_AT"]
                    assert broker.process is not None
                    try:
                        broker.process.wait(timeout=30)
                        stats["self_kills"] += 1
                    except subprocess.TimeoutExpired:  # no transaction reached a decision
                        broker.kill()
                broker.start()
                stats["kills"] += 1
        except BaseException as error:
            failures.append(error)
        finally:
            killer_done.set()

    def worker(index: int) -> None:
        txn_id = f"{group}-w{index}"
        consumer: ShareConsumer | None = None
        producer: Producer | None = None
        while not stop.is_set():
            try:
                if consumer is None or producer is None:
                    consumer = ShareConsumer(
                        bootstrap, group, topics=[source], max_poll_records=250, request_timeout=5
                    )
                    producer = Producer(bootstrap, transactional_id=txn_id, request_timeout=5)
                    producer.init_transactions()
                records = consumer.poll(0.3)
                if not records:
                    continue
                producer.begin_transaction()
                for r in records:
                    producer.send(sink, b"out-" + (r.value or b""), partition=r.partition)
                producer.send_share_acknowledgements_to_transaction(
                    [(r, AcknowledgeType.ACCEPT) for r in records], consumer.share_group_metadata()
                )
                producer.commit_transaction()
                stats["transactions"] += 1
                progress.set()
                stats["after_kill"] += bool(stats["kills"])
            except Exception as error:  # any client failure: start over (counted by kind)
                stats[f"restart:{type(error).__name__}"] += 1
                for client in (consumer, producer):
                    with contextlib.suppress(Exception):
                        if client is not None:
                            client.close()
                consumer = producer = None
                stop.wait(0.05)  # back off while the broker is down
        for client in (consumer, producer):
            with contextlib.suppress(Exception):
                if client is not None:
                    client.close()

    threads = [threading.Thread(target=killer, daemon=True)]
    threads += [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(WORKERS)]
    try:
        for t in threads:
            t.start()
        deadline = time.monotonic() + DEADLINE_S
        while True:
            assert not failures, failures
            assert time.monotonic() < deadline, f"not done within {DEADLINE_S}s: {dict(stats)}"
            if killer_done.is_set():
                with contextlib.suppress(ClientError, OSError):
                    if _starts(bootstrap, group, source) == ends:
                        break
            time.sleep(0.2)
        stop.set()
        for t in threads[1:]:
            t.join(30)
        print(dict(stats))
        assert stats["kills"] == KILLS and stats["self_kills"] == 1
        assert stats["after_kill"] > 0, "the kills did not interrupt the work"
        outputs = read_all(bootstrap, sink, PARTITIONS, "read_committed", deadline_s=30)
        counts = Counter(outputs)
        assert set(counts) == {f"out-r{i}" for i in range(RECORDS)}, "lost records"
        assert [v for v, n in counts.items() if n > 1] == [], "duplicated records"
    finally:
        stop.set()
        killer_done.wait(60)
        broker.kill()


@pytest.mark.parametrize("point", ["txn.after_prepare", "txn.after_share_markers"])
def test_commit_decided_before_a_crash_completes_on_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, point: str
) -> None:
    """The broker dies inside commit_transaction once the decision is logged (before or after the
    share-state markers); the restarted broker completes the commit, the client's retried commit
    succeeds, the output is visible once and every input record is acknowledged."""
    monkeypatch.setenv("SHAREQ_CRASH_AT", point)
    broker = BrokerProcess(tmp_path / "data", *CONFIGS).start()
    monkeypatch.delenv("SHAREQ_CRASH_AT")
    try:
        bootstrap = broker.bootstrap
        source, sink, group = f"in-{uuid.uuid4().hex[:6]}", f"out-{uuid.uuid4().hex[:6]}", "crash-g"
        with Admin(bootstrap) as admin:
            admin.create_topic(source, 1)
            admin.create_topic(sink, 1)
        with Producer(bootstrap) as feeder:
            for i in range(10):
                feeder.send(source, f"r{i}".encode(), partition=0)
        consumer = ShareConsumer(bootstrap, group, topics=[source], request_timeout=5)
        records: list[object] = []
        deadline = time.monotonic() + 30
        while len(records) < 10:
            assert time.monotonic() < deadline, "records not delivered"
            records += consumer.poll(0.3)
        producer = Producer(bootstrap, transactional_id="crash-tx", request_timeout=5)
        producer.init_transactions()
        producer.begin_transaction()
        for r in records:
            producer.send(sink, b"out-" + (r.value or b""), partition=0)  # type: ignore[attr-defined]
        producer.send_share_acknowledgements_to_transaction(
            [(r, AcknowledgeType.ACCEPT) for r in records],  # type: ignore[misc]
            consumer.share_group_metadata(),
        )
        with pytest.raises((ClientError, OSError)):
            producer.commit_transaction()  # the broker dies on the way
        assert broker.process is not None
        broker.process.wait(timeout=30)
        with contextlib.suppress(Exception):
            consumer.close()
        broker.start()
        deadline = time.monotonic() + 30
        while True:  # retry the commit, as a client does after a connection error
            try:
                producer.commit_transaction()
                break
            except (ClientError, OSError):
                assert time.monotonic() < deadline, "the retried commit never succeeded"
                time.sleep(0.1)
        producer.close()
        assert sorted(read_all(bootstrap, sink, 1, "read_committed")) == sorted(
            f"out-r{i}" for i in range(10)
        )
        with Admin(bootstrap) as admin:
            assert admin.describe_share_group_offsets(group)[(source, 0)].start_offset == 10
    finally:
        broker.kill()
