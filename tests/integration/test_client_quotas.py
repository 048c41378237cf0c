"""Client quotas: stored durably, described with Kafka's entity matching, and enforced on produce
and fetch byte rates with Kafka's throttle time, observed by librdkafka's throttle callback."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from broker_harness import FAST_FAILURE
from confluent_kafka import Consumer, Producer, ShareConsumer, TopicPartition
from kio.schema.errors import ErrorCode

from shareq.client import (
    Admin,
    ClientQuota,
    ConfigResource,
    KafkaError,
    QuotaFilter,
    QuotaMatch,
    ResourceType,
)
from shareq.embedded import EmbeddedBroker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

KB = 1024


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(tmp_path / "data") as b:
        yield b


def quotas_of(
    admin: Admin, *components: QuotaFilter, strict: bool = False
) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
    return {
        tuple(sorted(q.entity.items(), key=lambda kv: kv[0])): dict(q.values)
        for q in admin.describe_client_quotas(components, strict=strict)
    }


def test_alter_describe_match_and_survive_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with EmbeddedBroker(data) as broker, Admin(broker.bootstrap) as admin:
        admin.alter_client_quotas(
            [
                ({"client-id": "app"}, {"producer_byte_rate": 1024.0, "consumer_byte_rate": 2048.0}),
                ({"client-id": None}, {"producer_byte_rate": 4096.0}),
                ({"user": "alice", "client-id": "app"}, {"request_percentage": 50.0}),
                ({"user": None}, {"consumer_byte_rate": 8192.0}),
                ({"ip": "10.0.0.1"}, {"connection_creation_rate": 5.0}),
            ]
        )
        # Refused as Kafka refuses, one error per alteration; nothing else changes.
        codes = admin.alter_client_quotas(
            [
                ({"client-id": "app"}, {"producer_byte_rate": 1.5}),
                ({"client-id": "app"}, {"connection_creation_rate": 1.0}),
                ({"ip": "10.0.0.1", "user": "bob"}, {"connection_creation_rate": 1.0}),
                ({"client-id": ""}, {"producer_byte_rate": 1.0}),
                ({"client-id": "app"}, {"consumer_byte_rate": -1.0}),
                ({"ip": "not-an-ip"}, {"connection_creation_rate": 1.0}),
            ],
            raise_on_error=False,
        )
        assert codes == [ErrorCode.invalid_request] * 6
        with pytest.raises(KafkaError) as refused:
            admin.alter_client_quotas([({"client-id": "app"}, {"producer_byte_rate": 0.5})])
        assert "fractional" in (refused.value.message or "")
        admin.alter_client_quotas([({"client-id": "app"}, {"producer_byte_rate": 9.0})], validate_only=True)

    with EmbeddedBroker(data) as broker, Admin(broker.bootstrap) as admin:
        everything = quotas_of(admin)
        assert everything == {
            (("client-id", "app"),): {"producer_byte_rate": 1024.0, "consumer_byte_rate": 2048.0},
            (("client-id", None),): {"producer_byte_rate": 4096.0},
            (("client-id", "app"), ("user", "alice")): {"request_percentage": 50.0},
            (("user", None),): {"consumer_byte_rate": 8192.0},
            (("ip", "10.0.0.1"),): {"connection_creation_rate": 5.0},
        }
        exact = QuotaFilter("client-id", QuotaMatch.EXACT, "app")
        assert set(quotas_of(admin, exact)) == {
            (("client-id", "app"),),
            (("client-id", "app"), ("user", "alice")),
        }
        assert set(quotas_of(admin, exact, strict=True)) == {(("client-id", "app"),)}
        default = QuotaFilter("client-id", QuotaMatch.DEFAULT)
        assert set(quotas_of(admin, default)) == {(("client-id", None),)}
        any_client = QuotaFilter("client-id", QuotaMatch.SPECIFIED)
        assert len(quotas_of(admin, any_client, strict=True)) == 2
        assert set(quotas_of(admin, QuotaFilter("user", QuotaMatch.SPECIFIED), strict=True)) == {
            (("user", None),)
        }
        with pytest.raises(KafkaError) as bad:
            admin.describe_client_quotas([QuotaFilter("ip", QuotaMatch.SPECIFIED), any_client])
        assert bad.value.code == ErrorCode.invalid_request
        with pytest.raises(KafkaError) as unknown:
            admin.describe_client_quotas([QuotaFilter("group", QuotaMatch.SPECIFIED)])
        assert unknown.value.code == ErrorCode.unsupported_version
        # Removing the last value removes the entity.
        admin.alter_client_quotas(
            [ClientQuota(entity={"ip": "10.0.0.1"}, values={"connection_creation_rate": None})]
        )  # type: ignore[dict-item]
        assert (("ip", "10.0.0.1"),) not in quotas_of(admin)


def _throttle_collector() -> tuple[list[int], object]:
    seen: list[int] = []

    def on_throttle(event: object) -> None:
        seen.append(int(event.throttle_time * 1000))  # type: ignore[attr-defined]

    return seen, on_throttle


def _produce(bootstrap: str, topic: str, client_id: str, count: int, size: int) -> tuple[list[int], float]:
    throttles, on_throttle = _throttle_collector()
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "linger.ms": 0,
            "batch.size": size + 200,
            "throttle_cb": on_throttle,
            **FAST_FAILURE,
        }
    )
    errors: list[object] = []
    start = time.monotonic()
    for _ in range(count):
        producer.produce(
            topic, b"x" * size, partition=0, on_delivery=lambda err, _m: errors.append(err) if err else None
        )
        producer.poll(0)
    assert producer.flush(30) == 0
    elapsed = time.monotonic() - start
    producer.poll(0.5)  # serve the last throttle callbacks
    assert errors == []
    return throttles, elapsed


def test_producer_byte_rate_is_enforced_with_a_throttle_time(broker: EmbeddedBroker) -> None:
    with Admin(broker.bootstrap) as admin:
        admin.create_topic("q")
        admin.alter_client_quotas([({"client-id": "slow"}, {"producer_byte_rate": 10 * KB})])
    # 130 KiB at 10 KiB/s: Kafka measures over at least 10 s of windows, so the rate passes the
    # quota after ~100 KiB, and the throttle is about (130 - 100) / 10 = 3 s.
    throttles, elapsed = _produce(broker.bootstrap, "q", "slow", 13, 10 * KB)
    assert throttles and max(throttles) > 0
    assert max(throttles) <= 3_500
    assert elapsed >= 1.0  # the connection was held while throttled
    # Another client id has no quota: never throttled.
    fast, _ = _produce(broker.bootstrap, "q", "fast", 13, 10 * KB)
    assert [t for t in fast if t > 0] == []


def test_consumer_byte_rate_is_enforced_and_nothing_is_lost(broker: EmbeddedBroker) -> None:
    """librdkafka asks for 50 MiB per fetch: the broker caps a fetch at what one quota window
    holds (10 s x 10 KiB/s), or every fetch of the 130 KiB backlog would be throttled for ever."""
    with Admin(broker.bootstrap) as admin:
        admin.create_topic("f")
        admin.alter_client_quotas([({"client-id": None}, {"consumer_byte_rate": 10 * KB})])
    _produce(broker.bootstrap, "f", "writer", 13, 10 * KB)  # the default quota limits consumers only
    throttles, on_throttle = _throttle_collector()
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "unused",
            "client.id": "reader",
            "enable.auto.commit": False,
            "throttle_cb": on_throttle,
            **{k: v for k, v in FAST_FAILURE.items() if k != "message.timeout.ms"},
        }
    )
    try:
        consumer.assign([TopicPartition("f", 0, 0)])
        offsets: list[int] = []
        deadline = time.monotonic() + 45
        while len(offsets) < 13:
            assert time.monotonic() < deadline, f"only {len(offsets)} of 13 records"
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                offsets.append(message.offset())
        assert offsets == list(range(13))
        consumer.poll(0.5)
        assert throttles and max(throttles) > 0
    finally:
        consumer.close()


def test_no_scram_users_are_listed(broker: EmbeddedBroker) -> None:
    """Kafka's ConfigCommand asks for SCRAM credentials after a users' quota description: none."""
    from kio.index import load_request_schema
    from kio_wire import KioConnection

    cls = load_request_schema(50, 0)
    module = __import__(cls.__module__, fromlist=["UserName"])
    connection = KioConnection(broker.bootstrap)
    try:
        everyone = connection.send(cls(users=None))
        named = connection.send(cls(users=(module.UserName(name="alice"),)))
    finally:
        connection.close()
    assert everyone.error_code == ErrorCode.none and everyone.results == ()
    assert [(r.user, r.error_code) for r in named.results] == [("alice", ErrorCode.resource_not_found)]


def test_consumer_byte_rate_meters_share_fetches(broker: EmbeddedBroker) -> None:
    """ShareFetch counts against consumer_byte_rate as Kafka meters it: a librdkafka ShareConsumer
    over its quota is told to back off (throttle time) and still gets every record exactly once."""
    with Admin(broker.bootstrap) as admin:
        admin.create_topic("sf")
        admin.alter_client_quotas([({"client-id": "share-reader"}, {"consumer_byte_rate": 10 * KB})])
        admin.alter_configs(ConfigResource(ResourceType.GROUP, "sg"), {"share.auto.offset.reset": "earliest"})
    _produce(broker.bootstrap, "sf", "writer", 13, 10 * KB)
    throttles, on_throttle = _throttle_collector()
    consumer = ShareConsumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "sg",
            "client.id": "share-reader",
            "throttle_cb": on_throttle,
        }
    )
    consumer.subscribe(["sf"])
    try:
        offsets: list[int] = []
        deadline = time.monotonic() + 60
        while len(offsets) < 13:
            assert time.monotonic() < deadline, f"only {len(offsets)} of 13 records"
            offsets += [m.offset() for m in consumer.poll(0.5) if m.error() is None]
        assert sorted(offsets) == list(range(13))
        consumer.poll(0.5)
        assert throttles and max(throttles) > 0
    finally:
        consumer.close()
