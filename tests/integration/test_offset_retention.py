"""Offset retention through the wire: with ``offsets.retention.minutes=1`` an emptied group's offsets
and the group itself are gone after a minute, while a live group's offsets of the topics it consumes
stay however old they are."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from shareq.client import Admin
from shareq.embedded import EmbeddedBroker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(150)]


def _member(bootstrap: str, group: str) -> Consumer:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe(["events"])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            consumer.commit(message, asynchronous=False)
            return consumer
    raise AssertionError(f"{group} consumed nothing")


def test_offsets_of_an_emptied_group_expire_and_a_live_group_keeps_them(tmp_path: Path) -> None:
    config = {"offsets.retention.minutes": "1", "offsets.retention.check.interval.ms": "200"}
    with EmbeddedBroker(tmp_path / "data", config=config) as broker, Admin(broker.bootstrap) as admin:
        admin.create_topic("events", 1)
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        producer.produce("events", value=b"e")
        assert producer.flush(10) == 0
        live = _member(broker.bootstrap, "live")
        leaving = _member(broker.bootstrap, "leaving")
        leaving.close()
        left_at = time.monotonic()
        try:
            gone_at = None
            while time.monotonic() < left_at + 90:
                live.poll(0.2)
                if not admin.list_consumer_group_offsets("leaving"):
                    gone_at = time.monotonic()
                    break
            assert gone_at is not None and gone_at - left_at >= 55
            assert "leaving" not in {g.group_id for g in admin.list_groups()}
            assert admin.list_consumer_group_offsets("live")[("events", 0)].offset == 1
        finally:
            live.close()
