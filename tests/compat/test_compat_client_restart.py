"""shareq's client beside a restarting broker, Kafka 4.4 and shareq: the idempotent CLI producer right
after a node starts (Kafka answers InitProducerId with COORDINATOR_LOAD_IN_PROGRESS for a while), then
produce, ListOffsets, a coordinator call and share consumption each started while the node is down. All
of them finish once it is back; nothing is lost."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from broker_harness import BrokerProcess
from click.testing import CliRunner
from compat_support import COMMON, Server, earliest_group, kafka_cluster

import kafka_harness
from shareq.cli.main import main
from shareq.client import Admin, Producer, ShareConsumer

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("kafka"), pytest.mark.timeout(420)]

DOWN_S = 2.0  # how long the node stays down: the scenario, not a wait for a condition


class Node:
    """A one-node cluster that can be killed and started again on the same data."""

    def __init__(self, bootstrap: str, kill: Callable[[], None], start: Callable[[], None]) -> None:
        self.bootstrap = bootstrap
        self.kill = kill
        self.start = start
        # A node's process dies with the thread that started it (the harness asks the kernel so), so
        # the threads that restart it live until the test ends.
        self.done = threading.Event()

    def restart_later(self) -> threading.Event:
        """Kill the node now and start it again after DOWN_S; the event is set once it is back."""
        self.kill()
        back = threading.Event()

        def run() -> None:
            time.sleep(DOWN_S)
            self.start()
            back.set()
            self.done.wait()

        threading.Thread(target=run, daemon=True).start()
        return back


@pytest.fixture(params=["kafka", "shareq"])
def node(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Node]:
    if request.param == "shareq":
        broker = BrokerProcess(tmp_path / "data", *(f"{k}={v}" for k, v in COMMON.items())).start()
        node = Node(broker.bootstrap, broker.kill, lambda: broker.start() and None)
        try:
            yield node
        finally:
            node.done.set()
            broker.kill()
        return
    with kafka_cluster(tmp_path / "kafka", 1) as cluster:
        kafka = cluster.nodes[0]

        def start() -> None:
            kafka.start()
            cluster.wait_ready(kafka_harness.START_DEADLINE_S)

        node = Node(cluster.bootstrap, kafka.kill, start)
        try:
            yield node
        finally:
            node.done.set()


def test_the_client_rides_out_a_node_restart(node: Node) -> None:
    """shareq's CLI producer right after the node starts, then its producer, ListOffsets, a group
    coordinator call and a share consumer each through a restart of the node: no error reaches the
    caller and every record arrives."""
    # Right after the node started: the CLI's idempotent producer.
    with Admin(node.bootstrap, request_timeout=30) as admin:
        admin.create_topic("r", 2)
        admin.cluster.wait_for_topic("r", 30)
        earliest_group(Server("node", node.bootstrap), "g")
    result = CliRunner().invoke(
        main,
        ["produce", "--topic", "r", "--bootstrap", node.bootstrap],
        input="".join(f"{i}\n" for i in range(100)),
    )
    assert result.exit_code == 0, result.output

    producer = Producer(node.bootstrap, request_timeout=10)
    consumer = ShareConsumer(node.bootstrap, "g", topics=["r"], request_timeout=10)
    admin = Admin(node.bootstrap, request_timeout=60)
    seen: set[bytes] = set()

    def consume(until: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while len(seen) < until and time.monotonic() < deadline:
            seen.update(bytes(r.value or b"") for r in consumer.poll(0.5))
        consumer.commit()

    try:
        consume(50, 60)
        assert len(seen) >= 50, f"only {len(seen)} records before the restart"

        restart = node.restart_later()
        for i in range(100, 200):
            producer.send("r", b"%d" % i, partition=i % 2)
        producer.flush()
        assert restart.wait(150), "the node did not come back"

        restart = node.restart_later()
        assert sum(info.offset for info in admin.list_offsets("r").values()) == 200
        assert restart.wait(150), "the node did not come back"

        restart = node.restart_later()
        assert set(admin.describe_share_group_offsets("g", {"r": [0, 1]})) == {("r", 0), ("r", 1)}
        assert restart.wait(150), "the node did not come back"

        restart = node.restart_later()
        consume(200, 180)
        assert restart.wait(150), "the node did not come back"
        assert seen == {b"%d" % i for i in range(200)}  # at least once: every record
    finally:
        consumer.close()
        producer.close()
        admin.close()
