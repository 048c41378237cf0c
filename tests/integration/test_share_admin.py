"""Share-group administration against a real broker: groups, offsets and lag, group configs.

Consumption uses our ``ShareConsumer``; admin calls use ``Admin``; the classic/consumer describe
APIs (which no client here sends for share groups) go through a raw kio connection.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kio.schema.consumer_group_describe.v1.request import ConsumerGroupDescribeRequest
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest as DescribeGroupsV5
from kio.schema.describe_groups.v6.request import DescribeGroupsRequest as DescribeGroupsV6
from kio.schema.errors import ErrorCode
from kio_wire import KioConnection

from ci_support import require
from shareq.client import (
    Admin,
    ConfigResource,
    ConfigSource,
    ConsumerRecord,
    KafkaError,
    Producer,
    ResourceType,
    ShareConsumer,
)
from shareq.embedded import EmbeddedBroker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

EARLIEST = {"share.auto.offset.reset": "earliest"}


@pytest.fixture
def broker(tmp_path: Path, persister: str) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(tmp_path / "data", {"share.persister": persister}) as b:
        yield b


@pytest.fixture
def admin(broker: EmbeddedBroker) -> Iterator[Admin]:
    with Admin(broker.bootstrap) as a:
        yield a


def produce(bootstrap: str, topic: str, per_partition: dict[int, int]) -> None:
    producer = Producer(bootstrap)
    try:
        for partition, count in per_partition.items():
            for i in range(count):
                producer.send(topic, f"{partition}-{i}".encode(), partition=partition)
        producer.flush()
    finally:
        producer.close()


def consume(consumer: ShareConsumer, count: int, deadline_s: float = 30.0) -> list[ConsumerRecord]:
    """Poll until ``count`` records arrived, accepting each; fail at the deadline."""
    got: list[ConsumerRecord] = []
    deadline = time.monotonic() + deadline_s
    while len(got) < count:
        assert time.monotonic() < deadline, f"only {len(got)} of {count} records arrived"
        for record in consumer.poll(0.5, max_records=count - len(got)):
            consumer.acknowledge(record)
            got.append(record)
    consumer.commit()
    return got


def group_resource(group: str) -> ConfigResource:
    return ConfigResource(ResourceType.GROUP, group)


def test_list_describe_lag_alter_and_resume(admin: Admin, broker: EmbeddedBroker) -> None:
    admin.create_topic("orders", 2)
    admin.alter_configs(group_resource("g1"), EARLIEST)
    produce(broker.bootstrap, "orders", {0: 5, 1: 5})

    consumer = ShareConsumer(broker.bootstrap, "g1", topics=["orders"])
    try:
        got = consume(consumer, 4)
        listed = admin.list_groups()
        assert [(g.group_id, g.type, g.state, g.protocol_type) for g in listed] == [
            ("g1", "share", "Stable", "share")
        ]
        assert [g.group_id for g in admin.list_groups(types=["SHARE"])] == ["g1"]
        assert admin.list_groups(types=["consumer"]) == []
        assert admin.list_groups(states=["empty"]) == []
        described = admin.describe_share_group("g1")
        assert described.state == "Stable" and len(described.members) == 1
        assert described.members[0].assignment == {"orders": (0, 1)}
        assert described.members[0].client_host == "/127.0.0.1"  # Kafka's InetAddress form, no port
        with pytest.raises(KafkaError) as refused:
            admin.alter_share_group_offsets("g1", {("orders", 0): 0})
        assert refused.value.code == ErrorCode.non_empty_group
        with pytest.raises(KafkaError) as refused:
            admin.delete_share_group_offsets("g1", ["orders"])
        assert refused.value.code == ErrorCode.non_empty_group
        assert admin.delete_groups(["g1"], raise_on_error=False) == {"g1": ErrorCode.non_empty_group}
    finally:
        consumer.close(release=True)

    # 4 of 10 records accepted: lag is what is left, per partition.
    offsets = admin.describe_share_group_offsets("g1")
    accepted = {p: sum(1 for r in got if r.partition == p) for p in (0, 1)}
    assert {p: offsets[("orders", p)].lag for p in (0, 1)} == {p: 5 - accepted[p] for p in (0, 1)}
    assert admin.describe_share_group("g1").state == "Empty"
    assert [g.state for g in admin.list_groups(states=["Empty"])] == ["Empty"]

    # Alter on the empty group: the SPSO moves, lag follows at once, and a new consumer starts there.
    result = admin.alter_share_group_offsets("g1", {("orders", 0): 3, ("orders", 1): 5})
    assert set(result.values()) == {ErrorCode.none}
    offsets = admin.describe_share_group_offsets("g1")
    assert {p: (offsets[("orders", p)].start_offset, offsets[("orders", p)].lag) for p in (0, 1)} == {
        0: (3, 2),
        1: (5, 0),
    }
    consumer = ShareConsumer(broker.bootstrap, "g1", topics=["orders"])
    try:
        again = consume(consumer, 2)
        assert sorted((r.partition, r.offset) for r in again) == [(0, 3), (0, 4)]
    finally:
        consumer.close(release=True)
    offsets = admin.describe_share_group_offsets("g1")
    assert offsets[("orders", 0)].lag == 0


def test_offsets_error_paths(admin: Admin, broker: EmbeddedBroker) -> None:
    admin.create_topic("t", 1)
    produce(broker.bootstrap, "t", {0: 3})
    # Alter creates the group (as Kafka does); per-partition errors leave the rest applied.
    result = admin.alter_share_group_offsets(
        "g2", {("t", 0): 1, ("t", 9): 0, ("missing", 0): 0}, raise_on_error=False
    )
    assert result == {
        ("t", 0): ErrorCode.none,
        ("t", 9): ErrorCode.unknown_topic_or_partition,
        ("missing", 0): ErrorCode.unknown_topic_or_partition,
    }
    negative = admin.alter_share_group_offsets("g2", {("t", 0): -5}, raise_on_error=False)
    assert negative == {("t", 0): ErrorCode.invalid_request}
    assert admin.describe_share_group("g2").state == "Empty"
    # Unknown topics and partitions without state describe as start offset -1, as in Kafka.
    asked = admin.describe_share_group_offsets("g2", {"t": [0], "missing": [0]})
    assert (asked[("t", 0)].start_offset, asked[("t", 0)].lag) == (1, 2)
    assert (asked[("missing", 0)].start_offset, asked[("missing", 0)].lag) == (-1, None)
    assert admin.describe_share_group_offsets("nobody") == {}

    admin.create_topic("other", 1)
    deleted = admin.delete_share_group_offsets("g2", ["t", "other", "missing"], raise_on_error=False)
    assert deleted == {
        "t": ErrorCode.none,
        "other": ErrorCode.unknown_topic_or_partition,
        "missing": ErrorCode.unknown_topic_or_partition,
    }
    assert admin.describe_share_group_offsets("g2") == {}
    with pytest.raises(KafkaError) as unknown:
        admin.delete_share_group_offsets("nobody", ["t"])
    assert unknown.value.code == ErrorCode.group_id_not_found
    with pytest.raises(KafkaError) as unknown:
        admin.describe_share_group("nobody")
    assert unknown.value.code == ErrorCode.group_id_not_found

    assert admin.delete_groups(["g2", "nobody"], raise_on_error=False) == {
        "g2": ErrorCode.none,
        "nobody": ErrorCode.group_id_not_found,
    }
    assert admin.list_groups() == []


def test_delete_group_removes_state_and_configs(admin: Admin, broker: EmbeddedBroker, persister: str) -> None:
    admin.create_topic("d", 1)
    admin.alter_configs(group_resource("g3"), {**EARLIEST, "share.delivery.count.limit": "3"})
    produce(broker.bootstrap, "d", {0: 4})
    with ShareConsumer(broker.bootstrap, "g3", topics=["d"]) as consumer:
        consume(consumer, 4)
    done = admin.describe_share_group_offsets("g3")[("d", 0)]
    if persister == "coordinator":
        assert done.start_offset == 4
    else:  # the group's own state records follow the data: the start offset may have passed them
        log_end = broker.call(lambda: broker.broker.partition("d", 0).log.log_end_offset)  # type: ignore[union-attr]
        assert 4 <= done.start_offset <= log_end and done.lag == 0
    admin.delete_groups(["g3"])
    assert admin.list_groups() == []
    configs = admin.describe_configs([group_resource("g3")])[group_resource("g3")]
    assert configs["share.delivery.count.limit"].source is ConfigSource.DEFAULT_CONFIG
    # A new group of the same name starts afresh: its state was deleted, not left to fence it.
    admin.alter_configs(group_resource("g3"), EARLIEST)
    with ShareConsumer(broker.bootstrap, "g3", topics=["d"]) as consumer:
        assert [r.offset for r in consume(consumer, 4)] == [0, 1, 2, 3]


def test_share_group_is_unknown_to_classic_and_consumer_describe(
    admin: Admin, broker: EmbeddedBroker
) -> None:
    admin.create_topic("c", 1)
    admin.alter_share_group_offsets("g4", {("c", 0): 0})
    conn = KioConnection(broker.bootstrap)
    try:
        v6 = conn.send(DescribeGroupsV6(groups=("g4", "none"), include_authorized_operations=False))
        assert [(g.group_state, g.error_code) for g in v6.groups] == [
            ("Dead", ErrorCode.group_id_not_found),
            ("Dead", ErrorCode.group_id_not_found),
        ]
        assert "not a classic group" in (v6.groups[0].error_message or "")
        v5 = conn.send(DescribeGroupsV5(groups=("g4",), include_authorized_operations=False))
        assert [(g.group_state, g.error_code) for g in v5.groups] == [("Dead", ErrorCode.none)]
        described = conn.send(
            ConsumerGroupDescribeRequest(group_ids=("g4",), include_authorized_operations=False)
        )
        assert described.groups[0].error_code == ErrorCode.group_id_not_found
        assert "not a consumer group" in (described.groups[0].error_message or "")
    finally:
        conn.close()


def test_group_configs_bounds_and_restart(tmp_path: Path, persister: str) -> None:
    data = tmp_path / "data"
    bounds = {"group.share.max.record.lock.duration.ms": 40_000, "share.persister": persister}
    with EmbeddedBroker(data, bounds) as broker, Admin(broker.bootstrap) as admin:
        resource = group_resource("g5")
        admin.alter_configs(resource, {"share.record.lock.duration.ms": "35000"})
        for name, value, fragment in [
            ("share.record.lock.duration.ms", "50000", "in the range 15000 to 40000 inclusive"),
            ("share.delivery.count.limit", "1", "in the range 2 to 10 inclusive"),
            ("share.auto.offset.reset", "sometimes", "share.auto.offset.reset"),
            ("share.heartbeat.interval.ms", "abc", "Not a number of type INT"),
            ("no.such.config", "1", "Unknown group config name: no.such.config"),
        ]:
            with pytest.raises(KafkaError) as bad:
                admin.alter_configs(resource, {name: value})
            assert bad.value.code == ErrorCode.invalid_config
            assert fragment in (bad.value.message or "")
        admin.alter_configs(resource, {"share.delivery.count.limit": "7"}, validate_only=True)
        before = admin.describe_configs([resource])[resource]
        assert before["share.record.lock.duration.ms"].value == "35000"
        assert before["share.record.lock.duration.ms"].source is ConfigSource.GROUP_CONFIG
        assert before["share.delivery.count.limit"].value == "5"
        assert before["share.delivery.count.limit"].is_default
        broker_configs = admin.describe_configs([ConfigResource(ResourceType.BROKER, "0")])
        entry = broker_configs[ConfigResource(ResourceType.BROKER, "0")][
            "group.share.max.record.lock.duration.ms"
        ]
        assert entry.value == "40000" and entry.source is ConfigSource.STATIC_BROKER_CONFIG
    with EmbeddedBroker(data, bounds) as broker, Admin(broker.bootstrap) as admin:
        after = admin.describe_configs([resource])[resource]
        assert after["share.record.lock.duration.ms"].value == "35000"
        assert after["share.record.lock.duration.ms"].source is ConfigSource.GROUP_CONFIG
        admin.alter_configs(resource, {"share.record.lock.duration.ms": None})
        cleared = admin.describe_configs([resource])[resource]
        assert cleared["share.record.lock.duration.ms"].source is ConfigSource.DEFAULT_CONFIG


def test_offsets_survive_restart(tmp_path: Path, persister: str) -> None:
    data = tmp_path / "data"
    config = {"share.persister": persister}
    with EmbeddedBroker(data, config) as broker, Admin(broker.bootstrap) as admin:
        admin.create_topic("r", 1)
        produce(broker.bootstrap, "r", {0: 6})
        admin.alter_share_group_offsets("g6", {("r", 0): 2})
        admin.alter_share_group_offsets("gone", {("r", 0): 0})
        admin.alter_configs(group_resource("gone"), {"share.delivery.count.limit": "3"})
        admin.delete_groups(["gone"])
    with EmbeddedBroker(data, config) as broker, Admin(broker.bootstrap) as admin:
        offsets = admin.describe_share_group_offsets("g6")
        assert (offsets[("r", 0)].start_offset, offsets[("r", 0)].lag) == (2, 4)
        assert [g.group_id for g in admin.list_groups()] == ["g6"]
        assert admin.describe_share_group_offsets("gone", {"r": [0]})[("r", 0)].start_offset == -1
        configs = admin.describe_configs([group_resource("gone")])[group_resource("gone")]
        assert configs["share.delivery.count.limit"].is_default


def test_librdkafka_admin_on_a_share_group(admin: Admin, broker: EmbeddedBroker) -> None:
    """Kafka lists share groups with protocol type ``share``; librdkafka's ListConsumerGroups keeps
    only protocol types ``consumer`` and empty, so it answers without error and without them."""
    confluent_admin = require("confluent_kafka.admin")
    admin.create_topic("k", 1)
    admin.alter_share_group_offsets("g7", {("k", 0): 0})
    client = confluent_admin.AdminClient({"bootstrap.servers": broker.bootstrap})
    listed = client.list_consumer_groups(request_timeout=10).result(timeout=15)
    assert listed.errors == []
    assert "g7" not in [g.group_id for g in listed.valid]
    assert [g.group_id for g in admin.list_groups()] == ["g7"]
    # ConsumerGroupDescribe says GROUP_ID_NOT_FOUND; librdkafka falls back to DescribeGroups: Dead.
    described = client.describe_consumer_groups(["g7"], request_timeout=10)["g7"].result(timeout=15)
    assert described.state.name == "DEAD" and described.members == []
    # DeleteGroups deletes share groups for any client, as in Kafka.
    assert client.delete_consumer_groups(["g7"], request_timeout=10)["g7"].result(timeout=15) is None
    assert admin.list_groups() == []
