"""shareq's retry group configs: defaults (Kafka's behaviour), validation naming the key, the broker
ceiling, and how they are described."""

from __future__ import annotations

import pytest

from shareq.coordinators.group import ConfigSource, GroupErrorCode, GroupRequestError, ShareBrokerConfig
from shareq.coordinators.group.config import describe_group_config, resolve_group_config
from shareq.coordinators.group.retry_config import RETRY_CONFIG_DEFAULTS, RetryConfig

B = ShareBrokerConfig()


def test_defaults_are_kafkas_behaviour() -> None:
    retry = resolve_group_config({}, B).retry
    assert retry == RetryConfig()
    assert retry.backoff_ms == 0 and not retry.window_count and not retry.durable_counts
    assert retry.stall_warning is None


def test_values_are_resolved() -> None:
    retry = resolve_group_config(
        {
            "shareq.redelivery.backoff.ms": "200",
            "shareq.redelivery.backoff.multiplier": "3",
            "shareq.redelivery.backoff.max.ms": "5000",
            "shareq.redelivery.backoff.jitter": "0",
            "shareq.redelivery.backoff.on": "release, timeout",
            "shareq.share.window.mode": "COUNT",
            "shareq.delivery.count.durable": "true",
        },
        B,
    ).retry
    assert (retry.backoff_ms, retry.multiplier, retry.max_ms, retry.jitter) == (200, 3.0, 5000, 0.0)
    assert retry.on == frozenset({"release", "timeout"})
    assert retry.window_count and retry.durable_counts


def test_backoff_with_the_span_window_warns() -> None:
    retry = resolve_group_config({"shareq.redelivery.backoff.ms": "100"}, B).retry
    assert retry.stall_warning is not None and "stall" in retry.stall_warning


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("shareq.redelivery.backoff.ms", "-1"),
        ("shareq.redelivery.backoff.ms", "abc"),
        ("shareq.redelivery.backoff.ms", "900001"),
        ("shareq.redelivery.backoff.multiplier", "0.5"),
        ("shareq.redelivery.backoff.multiplier", "nan"),
        ("shareq.redelivery.backoff.multiplier", "x"),
        ("shareq.redelivery.backoff.max.ms", "-5"),
        ("shareq.redelivery.backoff.max.ms", "1.5"),
        ("shareq.redelivery.backoff.jitter", "1.5"),
        ("shareq.redelivery.backoff.jitter", "-0.1"),
        ("shareq.redelivery.backoff.on", "release,crash"),
        ("shareq.share.window.mode", "spam"),
        ("shareq.delivery.count.durable", "yes"),
    ],
)
def test_bad_values_are_invalid_config_naming_the_key(name: str, value: str) -> None:
    with pytest.raises(GroupRequestError) as info:
        resolve_group_config({name: value}, B)
    assert info.value.code is GroupErrorCode.INVALID_CONFIG
    assert name in info.value.message


def test_the_broker_ceiling_bounds_the_delays() -> None:
    broker = ShareBrokerConfig.from_properties({"shareq.redelivery.backoff.ceiling.ms": "1000"})
    assert broker.redelivery_backoff_ceiling_ms == 1000
    assert resolve_group_config({"shareq.redelivery.backoff.ms": "1000"}, broker).retry.backoff_ms == 1000
    with pytest.raises(GroupRequestError, match=r"shareq\.redelivery\.backoff\.ms"):
        resolve_group_config({"shareq.redelivery.backoff.ms": "1001"}, broker)
    assert resolve_group_config({}, broker).retry.max_ms == 1000


def test_described_with_defaults_and_sources() -> None:
    entries = {e.name: e for e in describe_group_config({"shareq.share.window.mode": "count"}, B)}
    for name, default in RETRY_CONFIG_DEFAULTS.items():
        if name == "shareq.share.window.mode":
            assert entries[name].value == "count"
            assert entries[name].source is ConfigSource.DYNAMIC_GROUP_CONFIG
        else:
            assert (entries[name].value, entries[name].source) == (default, ConfigSource.DEFAULT_CONFIG)
