"""Redelivery backoff and the count window with real clients: a librdkafka ShareConsumer that RELEASEs
one record sees it come back after growing delays and then in the DLQ; the same through lock expiry
and through a consumer's close; a delayed head record does not stall a count-mode window (and does
stall the span window, Kafka's); the configs go through IncrementalAlterConfigs and bad values are
refused with INVALID_CONFIG naming the key.

Delays are short (200 ms doubling) so the tests stay quick; the behaviour shown is the same as with
seconds."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from confluent_kafka import AcknowledgeType, Consumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)
from monitor_support import get, scrape, value
from share_consumers import FAST, SHARE_BROKER, produce, share_consumer

from shareq.cli.main import main
from shareq.client import Admin, ShareConsumer
from shareq.client import ConfigResource as GroupResource
from shareq.client import ResourceType as GroupResourceType
from shareq.embedded import EmbeddedBroker
from shareq.share.persister import SharePartitionKey

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

BACKOFF = {
    "shareq.redelivery.backoff.ms": "200",
    "shareq.redelivery.backoff.multiplier": "2",
    "shareq.redelivery.backoff.jitter": "0.2",
}
JITTER = 0.2
SLACK = 0.6
"""Seconds a redelivery may come after its due time (polling, the commit's round trip, a busy
machine)."""


def _alter_group(bootstrap: str, group: str, changes: dict[str, str]) -> None:
    """IncrementalAlterConfigs on the group, as confluent-kafka's AdminClient sends it."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(
        ResourceType.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in changes.items()
        ],
    )
    admin.incremental_alter_configs([resource], request_timeout=15)[resource].result()


def _share_partition(broker: EmbeddedBroker, group: str, topic: str) -> Any:
    info = broker.broker.topics.get(topic)
    assert info is not None and broker.broker.share is not None
    key = SharePartitionKey(group_id=group, topic_id=info.topic_id, partition=0)
    return broker.broker.share.partitions.cached(key)


def _wait(check: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)


def _check_gaps(times: list[float], base: float, extra: float = 0.0) -> None:
    """Deliveries ``times`` apart by ``base`` doubling each time (± the jitter), plus ``extra``."""
    for n, (earlier, later) in enumerate(itertools.pairwise(times)):
        delay = base * 2**n
        gap = later - earlier
        assert delay * (1 - JITTER) + extra <= gap <= delay * (1 + JITTER) + extra + SLACK, (n, gap, times)


def test_released_record_backs_off_then_is_dead_lettered(tmp_path: Path) -> None:
    """RELEASE one offset every time: its deliveries come 0.2, 0.4, 0.8, 1.6 s apart with delivery
    counts 1..5, then it is in the DLQ; the other records are all accepted before its second delivery."""
    config = {**SHARE_BROKER, "errors.deadletterqueue.auto.create.topics.enable": "true"}
    with EmbeddedBroker(tmp_path / "d", config=config) as broker:
        with Admin(broker.bootstrap) as admin:
            admin.create_topic("src", 1)
        produce(broker.bootstrap, "src", [b"v%d" % i for i in range(300)], 1, per_batch=50)
        _alter_group(broker.bootstrap, "g", {**BACKOFF, "errors.deadletterqueue.topic.name": "dlq.src"})
        deliveries: list[tuple[float, int]] = []
        accepted: dict[int, float] = {}
        consumer = share_consumer(
            broker.bootstrap, "g", ["src"], **{"share.acknowledgement.mode": "explicit"}
        )
        try:
            deadline = time.monotonic() + 30
            while len(deliveries) < 5 or len(accepted) < 299:
                assert time.monotonic() < deadline, (deliveries, len(accepted))
                messages = consumer.poll(0.1)
                for message in messages:
                    assert message.error() is None, message.error()
                    if message.offset() == 7:
                        deliveries.append((time.monotonic(), message.delivery_count()))
                        consumer.acknowledge(message, AcknowledgeType.RELEASE)
                    else:
                        accepted.setdefault(message.offset(), time.monotonic())
                        consumer.acknowledge(message, AcknowledgeType.ACCEPT)
                if messages:
                    consumer.commit_sync()
        finally:
            consumer.close()
        assert [count for _, count in deliveries] == [1, 2, 3, 4, 5]
        _check_gaps([t for t, _ in deliveries], 0.2)
        assert max(accepted.values()) < deliveries[1][0]  # the delay held nothing else back
        dlq = Consumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": "reader",
                "auto.offset.reset": "earliest",
                **FAST,
            }
        )
        dlq.subscribe(["dlq.src"])
        try:
            deadline = time.monotonic() + 15
            while True:
                assert time.monotonic() < deadline, "nothing in the DLQ"
                message = dlq.poll(0.2)
                if message is not None and message.error() is None:
                    break
        finally:
            dlq.close()
        headers = dict(message.headers() or [])
        assert headers["__dlq.errors.offset"] == b"7"
        assert headers["__dlq.errors.delivery.count"] == b"5"


def test_lock_expiry_backs_off_too(tmp_path: Path) -> None:
    """A record never acknowledged comes back when its lock lapses, and only after the delay."""
    config = {
        **SHARE_BROKER,
        "group.share.min.record.lock.duration.ms": "300",
        "group.share.record.lock.duration.ms": "300",
    }
    with EmbeddedBroker(tmp_path / "d", config=config) as broker:
        with Admin(broker.bootstrap) as admin:
            admin.create_topic("src", 1)
        produce(broker.bootstrap, "src", [b"x"], 1)
        _alter_group(broker.bootstrap, "g", {**BACKOFF, "share.delivery.count.limit": "4"})
        times: list[float] = []
        with ShareConsumer(broker.bootstrap, "g", topics=["src"]) as consumer:
            deadline = time.monotonic() + 30
            while len(times) < 4:
                assert time.monotonic() < deadline, times
                for record in consumer.poll(0.1):
                    assert record.delivery_count == len(times) + 1
                    times.append(time.monotonic())
        _check_gaps(times, 0.2, extra=0.3)


def test_a_closing_consumer_releases_with_the_delay(tmp_path: Path) -> None:
    """A librdkafka ShareConsumer closes holding a record it did not acknowledge: the record comes
    back to the next consumer only after the delay."""
    with EmbeddedBroker(tmp_path / "d", config=SHARE_BROKER) as broker:
        with Admin(broker.bootstrap) as admin:
            admin.create_topic("src", 1)
        produce(broker.bootstrap, "src", [b"x"], 1)
        _alter_group(broker.bootstrap, "g", {**BACKOFF, "shareq.redelivery.backoff.ms": "1500"})
        explicit = {"share.acknowledgement.mode": "explicit"}
        first = share_consumer(broker.bootstrap, "g", ["src"], **explicit)
        deadline = time.monotonic() + 20
        while not first.poll(0.1):
            assert time.monotonic() < deadline
        closing = time.monotonic()
        first.close()
        second = share_consumer(broker.bootstrap, "g", ["src"], **explicit)
        try:
            deadline = time.monotonic() + 20
            while not (messages := second.poll(0.1)):
                assert time.monotonic() < deadline
            back = time.monotonic()
            second.acknowledge(messages[0], AcknowledgeType.ACCEPT)
            second.commit_sync()
        finally:
            second.close()
        assert messages[0].delivery_count() == 2
        assert back - closing >= 1.5 * (1 - JITTER)


def _consume_past_delayed_head(broker: EmbeddedBroker, group: str, more: int, timeout: float) -> int:
    """Release offset 0 with a 60 s delay, produce ``more`` records, accept what comes within ``timeout``."""
    consumer = share_consumer(broker.bootstrap, group, ["src"], **{"share.acknowledgement.mode": "explicit"})
    accepted: set[int] = set()
    try:
        released = False
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and len(accepted) < more:
            messages = consumer.poll(0.1)
            for message in messages:
                assert message.error() is None, message.error()
                if message.offset() == 0:
                    consumer.acknowledge(message, AcknowledgeType.RELEASE)
                    released = True
                else:
                    accepted.add(message.offset())
                    consumer.acknowledge(message, AcknowledgeType.ACCEPT)
            if messages:
                consumer.commit_sync()
                if released and not accepted:
                    produce(broker.bootstrap, "src", [b"m"] * more, 1, per_batch=100)
    finally:
        consumer.close()
    return len(accepted)


@pytest.mark.timeout(90)
def test_count_window_passes_a_delayed_head_the_span_window_stalls(tmp_path: Path) -> None:
    """Cap 100, one record released for 60 s: in count mode the 2,000 behind it are all consumed; in
    span mode (Kafka's window) consumption stops after about the cap."""
    with EmbeddedBroker(tmp_path / "d", config=SHARE_BROKER) as broker:
        with Admin(broker.bootstrap) as admin:
            admin.create_topic("src", 1)
        produce(broker.bootstrap, "src", [b"head"], 1)
        common = {
            "shareq.redelivery.backoff.ms": "60000",
            "shareq.redelivery.backoff.jitter": "0",
            "share.partition.max.record.locks": "100",
        }
        _alter_group(broker.bootstrap, "count", {**common, "shareq.share.window.mode": "count"})
        assert _consume_past_delayed_head(broker, "count", 2_000, timeout=40) == 2_000
        sp = _share_partition(broker, "count", "src")
        assert broker.call(lambda: sp.spso) == 0 and broker.call(sp.delayed)[0] == 1
        _alter_group(broker.bootstrap, "span", common)
        stalled = _consume_past_delayed_head(broker, "span", 2_000, timeout=6)
        assert 99 <= stalled <= 200, stalled


def test_configs_are_described_and_bad_values_refused_naming_the_key(tmp_path: Path) -> None:
    with EmbeddedBroker(tmp_path / "d", config=SHARE_BROKER) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        _alter_group(
            broker.bootstrap,
            "g",
            {"shareq.redelivery.backoff.ms": "250", "shareq.share.window.mode": "count"},
        )
        resource = ConfigResource(ResourceType.GROUP, "g")
        entries = admin.describe_configs([resource], request_timeout=15)[resource].result()
        assert entries["shareq.redelivery.backoff.ms"].value == "250"
        assert entries["shareq.share.window.mode"].value == "count"
        assert entries["shareq.redelivery.backoff.multiplier"].value == "2.0"
        assert entries["shareq.redelivery.backoff.multiplier"].is_default
        assert entries["shareq.delivery.count.durable"].value == "false"
        bad = [
            ("shareq.redelivery.backoff.ms", "-1"),
            ("shareq.redelivery.backoff.ms", "soon"),
            ("shareq.redelivery.backoff.ms", "900001"),
            ("shareq.redelivery.backoff.multiplier", "0.5"),
            ("shareq.redelivery.backoff.max.ms", "1e3"),
            ("shareq.redelivery.backoff.jitter", "2"),
            ("shareq.redelivery.backoff.on", "release,never"),
            ("shareq.share.window.mode", "window"),
            ("shareq.delivery.count.durable", "1"),
        ]
        for name, value in bad:
            with pytest.raises(Exception) as info:
                _alter_group(broker.bootstrap, "g", {name: value})
            error = info.value.args[0]
            assert error.code() == 40 and name in error.str(), (name, value, error)  # INVALID_CONFIG
        with Admin(broker.bootstrap) as ours:
            described = ours.describe_configs([GroupResource(GroupResourceType.GROUP, "g")])
        values = {n: e.value for n, e in next(iter(described.values())).items()}
        assert values["shareq.redelivery.backoff.ms"] == "250"  # refused changes changed nothing


def test_delayed_records_are_visible_in_describe_the_cli_metrics_and_the_web_view(tmp_path: Path) -> None:
    """A record released for a minute: the admin client's offsets, ``shareq groups describe`` (with
    the span window's stall warning), ``/metrics`` and the web view's snapshot all show it."""
    with EmbeddedBroker(tmp_path / "d", config={**SHARE_BROKER, "http.port": 0}) as broker:
        with Admin(broker.bootstrap) as admin:
            admin.create_topic("src", 1)
        produce(broker.bootstrap, "src", [b"x"], 1)
        _alter_group(
            broker.bootstrap,
            "g",
            {"shareq.redelivery.backoff.ms": "60000", "shareq.redelivery.backoff.jitter": "0"},
        )
        consumer = share_consumer(
            broker.bootstrap, "g", ["src"], **{"share.acknowledgement.mode": "explicit"}
        )
        try:
            deadline = time.monotonic() + 20
            released = 0.0
            while not released:
                assert time.monotonic() < deadline
                for message in consumer.poll(0.1):
                    consumer.acknowledge(message, AcknowledgeType.RELEASE)
                    released = time.time()
                    consumer.commit_sync()
            with Admin(broker.bootstrap) as ours:
                offsets = ours.describe_share_group_offsets("g")
            o = offsets[("src", 0)]
            assert o.delayed_records == 1 and o.next_redelivery_ms is not None
            assert abs(o.next_redelivery_ms / 1000 - (released + 60)) < 5
            result = CliRunner().invoke(
                main, ["groups", "describe", "g", "--json", "--bootstrap", broker.bootstrap]
            )
            assert result.exit_code == 0, result.output
            described = json.loads(result.output)
            assert described["window_mode"] == "span" and described["redelivery_backoff_ms"] == 60000
            assert described["delayed"] == [
                {"topic": "src", "partition": 0, "records": 1, "next_redelivery_ms": o.next_redelivery_ms}
            ]
            assert described["warnings"] and "stall" in described["warnings"][0]
            samples = scrape(broker.http_url)
            part = {"group": "g", "topic": "src", "partition": "0"}
            assert value(samples, "shareq_share_partition_delayed_records", **part) == 1
            due = value(samples, "shareq_share_partition_next_redelivery_timestamp_seconds", **part)
            assert abs(due - o.next_redelivery_ms / 1000) < 0.01
            status, text = get(broker.http_url + "/api/state")
            assert status == 200, text
            group = next(g for g in json.loads(text)["share_groups"] if g["group_id"] == "g")
            assert group["window_mode"] == "span" and group["delayed"] == 1 and group["stall_warning"]
        finally:
            consumer.close()


def test_our_client_asks_for_a_delay_per_release_capped_by_the_ceiling(tmp_path: Path) -> None:
    """shareq's consumer RELEASEs with a delay of its own (no group backoff): the record waits that
    long; a delay beyond the broker's ceiling is capped, not refused; accepted records stay accepted."""
    config = {**SHARE_BROKER, "shareq.redelivery.backoff.ceiling.ms": "1500"}
    with EmbeddedBroker(tmp_path / "d", config=config) as broker:
        with Admin(broker.bootstrap) as admin:
            admin.create_topic("src", 1)
        produce(broker.bootstrap, "src", [b"a", b"b", b"c"], 1)
        with ShareConsumer(broker.bootstrap, "g", topics=["src"]) as consumer:
            records: list[Any] = []
            deadline = time.monotonic() + 20
            while len(records) < 3:
                assert time.monotonic() < deadline, records
                records += consumer.poll(0.1)
            consumer.acknowledge(records[2])  # ACCEPT
            assert set(consumer.commit().values()) == {0}
            released = time.monotonic()
            assert set(consumer.release([records[0]], delay_ms=1000).values()) == {0}
            assert set(consumer.release([records[1]], delay_ms=3_600_000).values()) == {0}  # capped
            back: dict[int, float] = {}
            while len(back) < 2:
                assert time.monotonic() - released < 10, back
                for record in consumer.poll(0.1):
                    assert record.offset in (0, 1) and record.delivery_count == 2  # never offset 2 again
                    back[record.offset] = time.monotonic() - released
                    consumer.acknowledge(record)
            consumer.commit()
        assert 1.0 <= back[0] < 1.0 + SLACK + 0.5
        assert 1.5 <= back[1] < 1.5 + SLACK + 0.5
