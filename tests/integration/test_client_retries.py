"""The client retries what Kafka's clients retry: a broker restarted under produce, share
consumption and admin calls costs a pause, not an error; and an error that does end a call is the
first real one, not a later consequence of it."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from broker_harness import BrokerProcess

from shareq.client import Admin, BrokerConnectionError, ClientError, GroupConsumer, Producer, ShareConsumer

pytestmark = [pytest.mark.integration]

CONFIGS = (
    "group.share.auto.offset.reset=earliest",
    "group.share.min.heartbeat.interval.ms=100",
    "group.share.heartbeat.interval.ms=100",
    "group.share.assignment.interval.ms=0",
)
DOWN_S = 1.5  # how long the broker stays down: the scenario, not a wait for a condition


def _restart_later(broker: BrokerProcess) -> threading.Thread:
    broker.kill()
    thread = threading.Thread(target=lambda: (time.sleep(DOWN_S), broker.start()), daemon=True)
    thread.start()
    return thread


@pytest.mark.timeout(120)
def test_produce_share_consume_and_admin_ride_out_a_broker_restart(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", *CONFIGS).start()
    try:
        with Admin(broker.bootstrap, request_timeout=10) as admin:
            admin.create_topic("r", 2)
            admin.cluster.wait_for_topic("r", 10)
        producer = Producer(broker.bootstrap, request_timeout=5, delivery_timeout_ms=30_000)
        consumer = ShareConsumer(broker.bootstrap, "g", topics=["r"], request_timeout=5)
        admin = Admin(broker.bootstrap, request_timeout=5)
        try:
            for i in range(100):
                producer.send("r", b"%d" % i, partition=i % 2)
            producer.flush()
            seen: set[bytes] = set()
            deadline = time.monotonic() + 20
            while len(seen) < 50 and time.monotonic() < deadline:
                seen.update(bytes(r.value or b"") for r in consumer.poll(0.5))
            consumer.commit()
            assert len(seen) >= 50, f"only {len(seen)} records before the restart"

            # Broker down: each call below starts while it is down and must finish once it is back.
            restart = _restart_later(broker)
            for i in range(100, 200):
                producer.send("r", b"%d" % i, partition=i % 2)
            producer.flush()  # InitProducerId done; Produce retried on new connections
            restart.join(30)
            assert broker.alive()

            restart = _restart_later(broker)
            ends = admin.list_offsets("r")  # ListOffsets retried with fresh metadata
            assert sum(info.offset for info in ends.values()) == 200
            restart.join(30)

            restart = _restart_later(broker)
            progress = admin.describe_share_group_offsets("g", {"r": [0, 1]})  # a coordinator call
            assert set(progress) == {("r", 0), ("r", 1)}
            restart.join(30)

            restart = _restart_later(broker)
            deadline = time.monotonic() + 60
            while len(seen) < 200 and time.monotonic() < deadline:
                seen.update(bytes(r.value or b"") for r in consumer.poll(0.5))
            restart.join(30)
            assert seen == {b"%d" % i for i in range(200)}  # at least once: every record
        finally:
            consumer.close()
            producer.close()
            admin.close()
    finally:
        broker.kill()


@pytest.mark.timeout(60)
def test_a_failed_send_reports_the_first_error_not_a_later_one(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        with Admin(broker.bootstrap) as admin:
            admin.create_topic("gone", 1)
            admin.cluster.wait_for_topic("gone", 10)
        producer = Producer(broker.bootstrap, request_timeout=2, delivery_timeout_ms=3_000)
        producer.cluster.topic("gone")  # metadata known, no producer id yet
        broker.kill()
        future = producer.send("gone", b"x")
        started = time.monotonic()
        with pytest.raises(BrokerConnectionError):
            producer.flush()
        assert time.monotonic() - started < 20  # bounded by the delivery timeout
        assert isinstance(future.exception(), BrokerConnectionError)
        # Closing reports the same error again, never "record was never sent".
        with pytest.raises(ClientError) as closing:
            producer.close()
        assert "never sent" not in str(closing.value)
    finally:
        broker.kill()


@pytest.mark.timeout(120)
def test_a_group_consumer_rides_out_a_broker_restart(tmp_path: Path) -> None:
    """shareq's KIP-848 ``GroupConsumer`` keeps polling through a restart of its coordinator: its
    heartbeats find the coordinator again (and wait out COORDINATOR_LOAD_IN_PROGRESS) as Kafka's
    consumer does, and every record is read at least once."""
    broker = BrokerProcess(tmp_path / "data", *CONFIGS).start()
    try:
        with Admin(broker.bootstrap, request_timeout=10) as admin:
            admin.create_topic("gc", 2)
            admin.cluster.wait_for_topic("gc", 10)
        producer = Producer(broker.bootstrap, request_timeout=5)
        try:
            for i in range(100):
                producer.send("gc", b"%d" % i, partition=i % 2)
            producer.flush()
        finally:
            producer.close()
        consumer = GroupConsumer(broker.bootstrap, "cg", ["gc"], request_timeout=5)
        try:
            seen: set[bytes] = set()
            deadline = time.monotonic() + 20
            while len(seen) < 30 and time.monotonic() < deadline:
                seen.update(bytes(r.value or b"") for r in consumer.poll(0.2, max_records=10))
            consumer.commit()
            assert len(seen) >= 30, f"only {len(seen)} records before the restart"
            restart = _restart_later(broker)
            deadline = time.monotonic() + 60
            while len(seen) < 100 and time.monotonic() < deadline:
                seen.update(bytes(r.value or b"") for r in consumer.poll(0.2, max_records=10))
            restart.join(30)
            assert seen == {b"%d" % i for i in range(100)}
        finally:
            consumer.close()
    finally:
        broker.kill()
