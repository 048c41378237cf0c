"""Group configs: defaults, broker bounds, validation errors and described sources."""

from __future__ import annotations

import pytest

from shareq.coordinators.group import (
    ConfigSource,
    GroupErrorCode,
    GroupRequestError,
    ShareBrokerConfig,
    ShareGroupCoordinator,
)
from shareq.coordinators.group.config import (
    AutoOffsetReset,
    parse_iso_duration_ms,
    resolve_group_config,
)

B = ShareBrokerConfig()


def test_defaults_match_kafka() -> None:
    cfg = resolve_group_config({}, B)
    assert cfg.record_lock_duration_ms == 30_000
    assert cfg.delivery_count_limit == 5
    assert cfg.partition_max_record_locks == 2_000
    assert cfg.auto_offset_reset == AutoOffsetReset(strategy="latest")
    assert cfg.isolation_level == "read_uncommitted"
    assert cfg.heartbeat_interval_ms == 5_000
    assert cfg.session_timeout_ms == 45_000
    assert cfg.dlq_topic_name == ""
    assert cfg.assignment_interval_ms == 1_000
    assert cfg.renew_acknowledge_enable is True
    assert B.max_size == 200 and B.max_share_sessions == 2_000


@pytest.mark.parametrize(
    ("name", "low", "high"),
    [
        ("share.record.lock.duration.ms", 15_000, 60_000),
        ("share.delivery.count.limit", 2, 10),
        ("share.partition.max.record.locks", 100, 1_000_000),  # (Kafka's bound: 4,000)
        ("share.heartbeat.interval.ms", 5_000, 15_000),
        ("share.session.timeout.ms", 45_000, 60_000),
        ("share.assignment.interval.ms", 0, 15_000),
    ],
)
def test_numeric_bounds_are_inclusive(name: str, low: int, high: int) -> None:
    for ok in (low, high):
        resolve_group_config({name: str(ok)}, B)
    for bad in (low - 1, high + 1):
        with pytest.raises(GroupRequestError) as info:
            resolve_group_config({name: str(bad)}, B)
        assert info.value.code is GroupErrorCode.INVALID_CONFIG
        assert name in info.value.message


def test_renew_acknowledge_enable() -> None:
    assert (
        resolve_group_config({"share.renew.acknowledge.enable": "FALSE"}, B).renew_acknowledge_enable is False
    )
    assert (
        resolve_group_config({"share.renew.acknowledge.enable": "true"}, B).renew_acknowledge_enable is True
    )


def test_broker_bounds_are_configurable() -> None:
    broker = ShareBrokerConfig.from_properties(
        {"group.share.max.record.lock.duration.ms": "120000", "group.share.max.size": "7"}
    )
    assert broker.max_size == 7
    assert (
        resolve_group_config({"share.record.lock.duration.ms": "120000"}, broker).record_lock_duration_ms
        == 120_000
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("earliest", AutoOffsetReset(strategy="earliest")),
        ("LATEST", AutoOffsetReset(strategy="latest")),
        ("by_duration:PT1H", AutoOffsetReset(strategy="by_duration", duration_ms=3_600_000)),
        ("by_duration:P1DT30M", AutoOffsetReset(strategy="by_duration", duration_ms=86_400_000 + 1_800_000)),
        ("by_duration:PT0.5S", AutoOffsetReset(strategy="by_duration", duration_ms=500)),
    ],
)
def test_auto_offset_reset(text: str, expected: AutoOffsetReset) -> None:
    assert resolve_group_config({"share.auto.offset.reset": text}, B).auto_offset_reset == expected


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("share.auto.offset.reset", "none"),
        ("share.auto.offset.reset", "by_duration:"),
        ("share.auto.offset.reset", "by_duration:PT"),
        ("share.auto.offset.reset", "by_duration:1H"),
        ("share.auto.offset.reset", "by_duration:-PT1H"),
        ("share.isolation.level", "serializable"),
        ("errors.deadletterqueue.topic.name", "bad topic!"),
        ("share.delivery.count.limit", "five"),
        ("share.renew.acknowledge.enable", "yes"),
        ("share.no.such.config", "1"),
    ],
)
def test_invalid_values(name: str, value: str) -> None:
    with pytest.raises(GroupRequestError) as info:
        resolve_group_config({name: value}, B)
    assert info.value.code is GroupErrorCode.INVALID_CONFIG


def test_heartbeat_must_be_below_session_timeout() -> None:
    broker = ShareBrokerConfig(min_session_timeout_ms=10_000, max_heartbeat_interval_ms=20_000)
    with pytest.raises(GroupRequestError):
        resolve_group_config(
            {"share.heartbeat.interval.ms": "20000", "share.session.timeout.ms": "15000"}, broker
        )


def test_iso_duration_parser() -> None:
    assert parse_iso_duration_ms("P2D") == 172_800_000
    assert parse_iso_duration_ms("pt1m30s") == 90_000
    with pytest.raises(ValueError):
        parse_iso_duration_ms("P")


def test_alter_and_describe_with_sources() -> None:
    broker = ShareBrokerConfig.from_properties({"group.share.delivery.count.limit": "4"})
    c = ShareGroupCoordinator(broker)
    records = c.alter_configs("g", {"share.record.lock.duration.ms": "20000"})
    assert len(records) == 1
    entries = {e.name: e for e in c.describe_configs("g")}
    assert entries["share.record.lock.duration.ms"].value == "20000"
    assert entries["share.record.lock.duration.ms"].source is ConfigSource.DYNAMIC_GROUP_CONFIG
    assert entries["share.delivery.count.limit"].value == "4"
    assert entries["share.delivery.count.limit"].source is ConfigSource.STATIC_BROKER_CONFIG
    assert entries["share.session.timeout.ms"].source is ConfigSource.DEFAULT_CONFIG
    assert entries["share.session.timeout.ms"].is_default
    assert c.group_config("g").record_lock_duration_ms == 20_000
    assert c.group_config("g").delivery_count_limit == 4
    # Deleting an override falls back to the broker.
    c.alter_configs("g", {"share.record.lock.duration.ms": None})
    assert c.group_config("g").record_lock_duration_ms == 30_000


def test_alter_is_atomic_and_validate_only_changes_nothing() -> None:
    c = ShareGroupCoordinator()
    with pytest.raises(GroupRequestError):
        c.alter_configs("g", {"share.record.lock.duration.ms": "20000", "share.delivery.count.limit": "99"})
    assert c.group_config("g").record_lock_duration_ms == 30_000
    assert c.alter_configs("g", {"share.delivery.count.limit": "3"}, validate_only=True) == ()
    assert c.group_config("g").delivery_count_limit == 5
    assert c.alter_configs("g", {}) == ()


def test_share_ordering_defaults_to_none_and_is_described() -> None:
    c = ShareGroupCoordinator()
    assert c.group_config("g").ordering == "none"
    entries = {e.name: e for e in c.describe_configs("g")}
    assert entries["shareq.share.ordering"].value == "none"
    assert entries["shareq.share.ordering"].is_default
    assert entries["shareq.share.key.lookahead"].value == "5000"
    c.alter_configs("g", {"shareq.share.ordering": "key"})
    assert c.group_config("g").ordering == "key"
    entries = {e.name: e for e in c.describe_configs("g")}
    assert entries["shareq.share.ordering"].source is ConfigSource.DYNAMIC_GROUP_CONFIG


def test_unknown_ordering_is_invalid_config_naming_the_key_and_the_allowed_values() -> None:
    with pytest.raises(GroupRequestError) as info:
        resolve_group_config({"shareq.share.ordering": "partition"}, B)
    assert info.value.code is GroupErrorCode.INVALID_CONFIG
    assert "shareq.share.ordering" in str(info.value)
    assert "none, key" in str(info.value)
    with pytest.raises(GroupRequestError):
        resolve_group_config({"shareq.share.key.lookahead": "0"}, B)
