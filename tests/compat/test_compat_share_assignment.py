"""Share-group assignment pacing as Kafka 4.4 does it (``share.assignment.interval.ms``, KIP-1263): the
same librdkafka consumers and the same admin observations on Kafka and shareq."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from compat_support import Server, create_topic, set_group_configs, share_consumer
from kio.schema.errors import ErrorCode

from shareq.client import Admin, KafkaError

pytestmark = pytest.mark.timeout(120)

INTERVAL_MS = 8_000  # long enough that the checks after the second join fall well inside it


def test_a_consumer_joining_within_the_interval_waits_for_the_next_assignment(
    server: Server, names: tuple[str, str]
) -> None:
    """With the group's interval at 8 s, a consumer that joins just after the first one got both partitions
    is a member with nothing, at the last target's epoch, while the group epoch runs ahead; once the
    interval has passed, the next target splits the two partitions between them."""
    topic, group = names
    create_topic(server, topic, partitions=2)
    set_group_configs(
        server,
        group,
        {"share.auto.offset.reset": "earliest", "share.assignment.interval.ms": str(INTERVAL_MS)},
    )
    stop = threading.Event()
    consumers: list[Any] = []
    threads: list[threading.Thread] = []

    def start_consumer() -> None:
        consumer = share_consumer(server, group, [topic])
        consumers.append(consumer)

        def poll() -> None:  # heartbeats ride on the consumer's own threads; keep it polled
            while not stop.is_set():
                consumer.poll(0.1)

        threads.append(threading.Thread(target=poll, daemon=True))
        threads[-1].start()

    with Admin(server.bootstrap) as admin:

        def described() -> Any:
            try:
                return admin.describe_share_group(group)
            except KafkaError as error:  # before the first consumer's join
                assert error.code == ErrorCode.group_id_not_found
                return None

        def holdings() -> list[tuple[int, ...]]:
            found = described()
            members = () if found is None else found.members
            return sorted(tuple(sorted(p for ps in m.assignment.values() for p in ps)) for m in members)

        def wait_until(expected: list[tuple[int, ...]]) -> None:
            deadline = time.monotonic() + 3 * INTERVAL_MS / 1000 + 20
            while holdings() != expected:
                assert time.monotonic() < deadline, holdings()
                time.sleep(0.1)

        try:
            start_consumer()
            wait_until([(0, 1)])
            start_consumer()
            deadline = time.monotonic() + 20
            while (found := described()) is None or len(found.members) < 2:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            assert found.group_epoch > found.assignment_epoch
            assert holdings() == [(), (0, 1)]
            assert {m.member_epoch for m in found.members} == {found.assignment_epoch}
            wait_until([(0,), (1,)])
            after = described()
            assert after is not None and after.assignment_epoch == after.group_epoch
        finally:
            stop.set()
            for thread in threads:
                thread.join(5)
            for consumer in consumers:
                consumer.close()
