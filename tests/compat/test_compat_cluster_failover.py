"""shareq's client on a three-node Kafka 4.4 cluster with a broker killed mid-stream: the group's
coordinator, or a broker that is not. Two share consumers drain a six-partition topic replicated on
every node while the producer goes on; nothing is lost, no client call fails (the client rides out the
kill), and the duplicates (acknowledgements sent to a dead leader are lost, so Kafka redelivers) are
counted and reported."""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from compat_support import Server, earliest_group, kafka_cluster

import kafka_harness
from shareq.client import Admin, Producer, ShareConsumer

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("kafka"), pytest.mark.timeout(600)]

TOPIC, GROUP, PARTITIONS = "failover", "g-failover", 6
BEFORE, AFTER = 6_000, 3_000


@pytest.fixture
def three_nodes(tmp_path: Path) -> Iterator[kafka_harness.KafkaCluster]:
    with kafka_cluster(tmp_path / "kafka", 3) as cluster:
        yield cluster


def _produce(bootstrap: str, first: int, n: int) -> None:
    with Producer(bootstrap, request_timeout=10) as producer:
        for i in range(first, first + n):
            producer.send(TOPIC, b"%d" % i, partition=i % PARTITIONS)
        producer.flush()


@pytest.mark.parametrize("victim", ["coordinator", "other"])
def test_a_share_group_drains_through_a_killed_broker(
    three_nodes: kafka_harness.KafkaCluster, victim: str
) -> None:
    """Three Kafka nodes, a topic replicated on all: two shareq.client share consumers drain it while
    the producer goes on and the group's coordinator (or another broker) is killed; nothing is lost, no
    call of a member fails, duplicates are counted."""
    bootstrap = three_nodes.bootstrap
    with Admin(bootstrap, request_timeout=30) as admin:
        admin.create_topic(TOPIC, PARTITIONS, replication_factor=3)
        admin.cluster.wait_for_topic(TOPIC, 30)
    earliest_group(Server("kafka", bootstrap, nodes=3), GROUP)
    _produce(bootstrap, 0, BEFORE)

    counts: collections.Counter[bytes] = collections.Counter()
    lock = threading.Lock()
    stop = threading.Event()
    errors: list[BaseException] = []

    def member() -> None:
        try:
            consumer = ShareConsumer(bootstrap, GROUP, topics=[TOPIC], request_timeout=10)
            try:
                while not stop.is_set():
                    try:
                        records = consumer.poll(0.5)
                        for record in records:
                            consumer.acknowledge(record)
                        if records:
                            consumer.commit()
                    except Exception as error:  # kept (it fails the test); the member goes on meanwhile
                        errors.append(error)
                        continue
                    with lock:
                        counts.update(bytes(r.value or b"") for r in records)
            finally:
                consumer.close()
        except BaseException as error:  # the member itself failed (its start or its close)
            errors.append(error)

    members = [threading.Thread(target=member, daemon=True) for _ in range(2)]
    for thread in members:
        thread.start()
    try:
        deadline = time.monotonic() + 120
        while len(counts) < BEFORE // 3:
            assert time.monotonic() < deadline, f"only {len(counts)} records before the kill"
            time.sleep(0.1)
        with Admin(bootstrap) as admin:
            coordinator = admin.cluster.coordinator(GROUP).node_id
        killed = next(n for n in three_nodes.nodes if (n.node_id == coordinator) == (victim == "coordinator"))
        killed.kill()
        _produce(",".join(n.bootstrap for n in three_nodes.nodes if n is not killed), BEFORE, AFTER)
        want = {b"%d" % i for i in range(BEFORE + AFTER)}
        deadline = time.monotonic() + 240
        while set(counts) != want:
            assert time.monotonic() < deadline, (
                f"{len(want - set(counts))} records never delivered; failed calls: {errors!r}"
            )
            time.sleep(0.2)
    finally:
        stop.set()
        for thread in members:
            thread.join(30)
    assert not [t for t in members if t.is_alive()], "a member did not stop"
    duplicates = sum(counts.values()) - len(counts)
    print(
        f"killed the {victim} broker (node {killed.node_id}): {len(counts)} records, "
        f"{duplicates} duplicates, "
        f"{len(errors)} failed calls"
    )
    assert set(counts) == want  # nothing lost; duplicates are at-least-once redeliveries
    assert errors == [], "client calls failed:\n" + "\n".join(f"{type(e).__name__}: {e}" for e in errors)
