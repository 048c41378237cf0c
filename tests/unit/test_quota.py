"""Client quotas without I/O: Kafka's windowed rate, throttle time, entity rules and matching."""

from __future__ import annotations

import pytest

from shareq.quota import (
    ClientQuotas,
    FilterComponent,
    QuotaError,
    QuotaUsage,
    WindowedRate,
    make_entity,
    throttle_ms,
)
from shareq.quota.entities import MATCH_DEFAULT, MATCH_EXACT, MATCH_SPECIFIED


def test_a_young_rate_is_measured_over_at_least_samples_minus_one_windows() -> None:
    rate = WindowedRate(samples=11, window_ms=1000)
    rate.record(10_000, now_ms=0)
    assert rate.window_size_ms(0) == 10_000
    assert rate.measure(0) == 1_000.0  # 10 000 bytes over 10 s
    rate.record(10_000, now_ms=5_500)
    assert rate.window_size_ms(5_500) == 10_500  # 5 full windows + 0.5 s, padded to 10 full ones
    assert rate.measure(5_500) == pytest.approx(20_000 / 10.5)


def test_old_windows_expire() -> None:
    rate = WindowedRate(samples=3, window_ms=1000)
    rate.record(300, now_ms=0)
    rate.record(300, now_ms=1_000)
    assert rate.measure(1_000) == pytest.approx(600 / 2.0)
    assert rate.measure(3_000) == pytest.approx(300 / 2.0)  # the first window is gone
    assert rate.measure(4_000) == 0.0 and rate.idle


def test_throttle_brings_the_rate_back_to_the_quota() -> None:
    rate = WindowedRate(samples=11, window_ms=1000)
    rate.record(13 * 10_240, now_ms=0)  # 13.3 KB/s over 10 s against 10 KB/s
    assert throttle_ms(rate, 10_240, 0) == 3_000  # (13 - 10) / 10 * 10 s
    # O * W / (W + X) = T: over the window stretched by the throttle, the rate is the quota.
    assert 13 * 10_240 / ((10_000 + 3_000) / 1000) == 10_240
    # A young sensor's window is padded to 10 s; past that, the throttle shrinks as the window
    # grows, and the first window expires after 11 s (as in Kafka).
    assert throttle_ms(rate, 10_240, 9_000) == 3_000
    assert throttle_ms(rate, 10_240, 10_999) == 2_001
    assert throttle_ms(rate, 10_240, 11_000) == 0


def test_entity_rules_are_kafkas() -> None:
    assert make_entity([("user", "a"), ("client-id", None)]) == (("client-id", None), ("user", "a"))
    for pairs, fragment in (
        ([], "empty client quota entity"),
        ([("user", "a"), ("user", "b")], "duplicate entity entry user"),
        ([("group", "g")], "Unhandled client quota entity type"),
        ([("client-id", "")], "Empty client-id not supported"),
        ([("ip", "1.2.3.4"), ("user", "a")], "IP entity should not be combined"),
        ([("ip", "nope")], "not a valid IP"),
    ):
        with pytest.raises(QuotaError, match=fragment):
            make_entity(pairs)
    quotas = ClientQuotas()
    client = make_entity([("client-id", "c")])
    with pytest.raises(QuotaError, match="Invalid configuration key connection_creation_rate"):
        quotas.check_alter(client, {"connection_creation_rate": 1.0})
    with pytest.raises(QuotaError, match="must be greater than 0"):
        quotas.check_alter(client, {"producer_byte_rate": 0.0})
    with pytest.raises(QuotaError, match="fractional"):
        quotas.check_alter(client, {"producer_byte_rate": 2.5})
    quotas.check_alter(client, {"request_percentage": 2.5, "producer_byte_rate": None})


def test_describe_filters_as_kafka_does() -> None:
    quotas = ClientQuotas()
    for pairs in (
        [("client-id", "c")],
        [("client-id", None)],
        [("user", "u"), ("client-id", "c")],
        [("ip", None)],
    ):
        assert quotas.alter(
            make_entity(pairs),
            {"request_percentage" if pairs[0][0] != "ip" else "connection_creation_rate": 1.0},
        )

    def names(*components: FilterComponent, strict: bool = False) -> set[tuple[tuple[str, str | None], ...]]:
        return {entity for entity, _ in quotas.describe(components, strict=strict)}

    assert len(names()) == 4
    assert names(strict=True) == set()
    assert names(FilterComponent("client-id", MATCH_EXACT, "c")) == {
        (("client-id", "c"),),
        (("client-id", "c"), ("user", "u")),
    }
    assert names(FilterComponent("client-id", MATCH_DEFAULT), strict=True) == {(("client-id", None),)}
    assert names(FilterComponent("client-id", MATCH_SPECIFIED), strict=True) == {
        (("client-id", "c"),),
        (("client-id", None),),
    }
    assert names(FilterComponent("ip", MATCH_DEFAULT)) == {(("ip", None),)}
    with pytest.raises(QuotaError, match="cannot appear more than once"):
        names(FilterComponent("user", MATCH_SPECIFIED), FilterComponent("user", MATCH_DEFAULT))
    with pytest.raises(QuotaError) as unsupported:
        names(FilterComponent("group", MATCH_SPECIFIED))
    assert unsupported.value.error == "unsupported_version"
    with pytest.raises(QuotaError, match="MATCH_TYPE_EXACT, but set match string to null"):
        names(FilterComponent("user", MATCH_EXACT, None))


def test_resolution_is_most_specific_first_and_counts_per_tags() -> None:
    quotas = ClientQuotas()
    quotas.alter(make_entity([("client-id", None)]), {"producer_byte_rate": 100.0})
    assert quotas.resolve("producer_byte_rate", "ANONYMOUS", "a") == (100.0, ("", "a"))
    quotas.alter(make_entity([("client-id", "a")]), {"producer_byte_rate": 200.0})
    assert quotas.resolve("producer_byte_rate", "ANONYMOUS", "a") == (200.0, ("", "a"))
    quotas.alter(make_entity([("user", None)]), {"producer_byte_rate": 300.0})
    assert quotas.resolve("producer_byte_rate", "ANONYMOUS", "a") == (300.0, ("ANONYMOUS", ""))
    quotas.alter(make_entity([("user", "ANONYMOUS"), ("client-id", None)]), {"producer_byte_rate": 400.0})
    assert quotas.resolve("producer_byte_rate", "ANONYMOUS", "a") == (400.0, ("ANONYMOUS", "a"))
    assert quotas.resolve("consumer_byte_rate", "ANONYMOUS", "a") is None
    restored = ClientQuotas.from_json(quotas.to_json())
    assert restored.entries == quotas.entries


def test_usage_throttles_mutes_and_takes_back() -> None:
    quotas = ClientQuotas()
    quotas.alter(make_entity([("client-id", None)]), {"consumer_byte_rate": 1_000.0})
    usage = QuotaUsage(quotas)
    assert usage.record("consumer_byte_rate", "ANONYMOUS", "a", 10_000, 0) == 0  # exactly at quota
    assert usage.record("consumer_byte_rate", "ANONYMOUS", "b", 10_000, 0) == 0  # b counts apart
    throttle = usage.record("consumer_byte_rate", "ANONYMOUS", "a", 5_000, 0)
    assert throttle == 5_000
    usage.unrecord("consumer_byte_rate", "ANONYMOUS", "a", 5_000, 0)
    assert usage.record("consumer_byte_rate", "ANONYMOUS", "a", 0, 0) == 0
    assert usage.record("producer_byte_rate", "ANONYMOUS", "a", 10**9, 0) == 0  # no such quota
    assert usage.max_value_in_window("consumer_byte_rate", "ANONYMOUS", "a") == 10_000.0  # 10 windows
    assert usage.max_value_in_window("producer_byte_rate", "ANONYMOUS", "a") is None
    usage.mute(7, now_ms=100, duration_ms=throttle)
    assert usage.muted_for(7, 100) == 5_000
    assert usage.muted_for(7, 5_099) == 1
    assert usage.muted_for(7, 5_100) == 0 and usage.muted_for(8, 0) == 0
