"""Share groups with ``share.isolation.level=read_committed`` on a topic mixing committed and
aborted transactions: librdkafka's ShareConsumer gets exactly the committed records, the markers
are acknowledged as gaps, and the SPSO reaches the log end."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from share_consumers import SHARE_BROKER, poll_values, share_consumer
from txn_clients import create_topic, end_offsets, produce_txn, txn_producer

from shareq.client import Admin
from shareq.embedded import EmbeddedBroker

pytestmark = [pytest.mark.integration]


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_share_group_isolation(tmp_path: Path, isolation: str) -> None:
    config = {**SHARE_BROKER, "group.share.isolation.level": isolation}
    with EmbeddedBroker(tmp_path / "data", config=config) as broker:
        bootstrap = broker.bootstrap
        topic = create_topic(bootstrap, 2)
        producer = txn_producer(bootstrap, f"tx-{uuid.uuid4().hex[:6]}")
        expected: list[str] = []
        every: list[str] = []
        for n in range(6):
            values = [f"t{n}-{i}" for i in range(10)]
            produce_txn(producer, topic, values, 2, commit=n % 2 == 0)
            every += values
            if n % 2 == 0:
                expected += values
        ends = end_offsets(bootstrap, topic, 2)
        assert ends == [36, 36]  # 6 transactions of 5 records and a marker per partition
        group = f"share-{uuid.uuid4().hex[:6]}"
        want = expected if isolation == "read_committed" else every
        consumer = share_consumer(bootstrap, group, [topic])
        try:
            messages = poll_values(consumer, lambda got: len(got) >= len(want))
            got = sorted(m.value().decode() for m in messages)
            assert got == sorted(want)
            # Nothing else arrives, and the group's start offsets reach the log end once the
            # implicit acknowledgements (control offsets as gaps) land.
            deadline = time.monotonic() + 15
            with Admin(bootstrap) as admin:
                while True:
                    extra = [m for m in consumer.poll(0.2) if m.error() is None]
                    assert extra == [], [m.value() for m in extra]
                    offsets = admin.describe_share_group_offsets(group)
                    starts = [offsets[(topic, p)].start_offset for p in range(2)]
                    if starts == ends:
                        break
                    assert time.monotonic() < deadline, f"SPSO stuck at {starts}, log ends {ends}"
        finally:
            consumer.close()


def test_share_group_skips_a_large_aborted_transaction(tmp_path: Path) -> None:
    """An aborted transaction larger than one share fetch's read does not stall the group."""
    config = {**SHARE_BROKER, "group.share.isolation.level": "read_committed"}
    with EmbeddedBroker(tmp_path / "data", config=config) as broker:
        bootstrap = broker.bootstrap
        topic = create_topic(bootstrap, 1)
        producer = txn_producer(
            bootstrap, f"tx-{uuid.uuid4().hex[:6]}", **{"linger.ms": 0, "batch.num.messages": 50}
        )
        produce_txn(producer, topic, [f"gone-{i}" for i in range(3000)], 1, commit=False)
        produce_txn(producer, topic, [f"kept-{i}" for i in range(20)], 1, commit=True)
        (end,) = end_offsets(bootstrap, topic, 1)
        assert end == 3022
        group = f"share-{uuid.uuid4().hex[:6]}"
        consumer = share_consumer(bootstrap, group, [topic])
        try:
            messages = poll_values(consumer, lambda got: len(got) >= 20)
            assert sorted(m.value().decode() for m in messages) == sorted(f"kept-{i}" for i in range(20))
            deadline = time.monotonic() + 15
            with Admin(bootstrap) as admin:
                while admin.describe_share_group_offsets(group)[(topic, 0)].start_offset != end:
                    assert [m for m in consumer.poll(0.2) if m.error() is None] == []
                    assert time.monotonic() < deadline, "the SPSO did not reach the log end"
        finally:
            consumer.close()
