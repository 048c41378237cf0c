"""LogConfig defaults and Kafka config names."""

from __future__ import annotations

import pytest

from shareq.log.config import LogConfig


def test_defaults_match_kafka() -> None:
    c = LogConfig()
    assert c.segment_bytes == 1 << 30
    assert c.retention_ms == 7 * 24 * 3600 * 1000
    assert (c.retention_bytes, c.flush_interval_messages, c.index_interval_bytes) == (-1, None, 4096)
    assert (c.max_message_bytes, c.cleanup_policy) == (1048588, "delete")


def test_topic_names_override_broker_names() -> None:
    c = LogConfig.from_kafka(
        {
            "log.segment.bytes": "1000",
            "segment.bytes": "2000",
            "log.retention.hours": "1",
            "retention.bytes": "-1",
            "max.message.bytes": "500",
            "cleanup.policy": "compact, delete",
            "flush.messages": "10",
            "unrelated.name": "ignored",
        }
    )
    assert c.segment_bytes == 2000
    assert c.retention_ms == 3_600_000
    assert c.max_message_bytes == 500
    assert c.cleanup_policy == "compact,delete" and c.compact
    assert c.flush_interval_messages == 10


def test_unit_precedence_and_base() -> None:
    base = LogConfig(segment_bytes=5_000)
    c = LogConfig.from_kafka(
        {"log.retention.hours": "2", "log.retention.minutes": "3", "log.roll.hours": "1"}, base
    )
    assert (c.segment_bytes, c.retention_ms, c.segment_ms) == (5_000, 180_000, 3_600_000)
    assert LogConfig.from_kafka({"retention.ms": "-1"}).retention_ms == -1
    assert LogConfig.from_kafka({"flush.messages": str(2**63 - 1)}).flush_interval_messages is None


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("segment.bytes", "ten"),
        ("segment.bytes", "5"),
        ("segment.ms", "0"),
        ("retention.ms", "-5"),
        ("cleanup.policy", "shred"),
        ("max.message.bytes", "0"),
        ("log.retention.hours", "x"),
    ],
)
def test_bad_values_name_the_key(name: str, value: str) -> None:
    with pytest.raises(ValueError, match=r"invalid"):
        LogConfig.from_kafka({name: value})


def test_round_trip_to_kafka_names() -> None:
    c = LogConfig(segment_bytes=1234, retention_ms=-1, cleanup_policy="compact")
    assert LogConfig.from_kafka(c.to_kafka()) == c
