"""DescribeConfigs names what each config falls back to, most specific first, as Kafka 4.4 does;
cluster defaults (BROKER "") stay apart from the broker's own dynamic configs, across restarts."""

from __future__ import annotations

from pathlib import Path

import pytest
from broker_harness import BrokerProcess

from ci_support import require
from shareq.client import Admin, ConfigResource, ConfigSource, ResourceType

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

S = ConfigSource
TOPIC_U = ConfigResource(ResourceType.TOPIC, "u")
TOPIC_T = ConfigResource(ResourceType.TOPIC, "t")
BROKER_0 = ConfigResource(ResourceType.BROKER, "0")
DEFAULT = ConfigResource(ResourceType.BROKER, "")
GROUP = ConfigResource(ResourceType.GROUP, "g")


def synonyms(
    admin: Admin, resource: ConfigResource, name: str
) -> tuple[str | None, S, list[tuple[S, str, str | None]]]:
    entry = admin.describe_configs([resource], include_synonyms=True)[resource][name]
    return entry.value, entry.source, [(y.source, y.name, y.value) for y in entry.synonyms]


def test_synonyms_and_cluster_defaults_survive_restart(tmp_path: Path) -> None:
    broker = BrokerProcess(
        tmp_path / "data", "log.segment.bytes=2000000", "group.share.delivery.count.limit=4"
    )
    broker.start()
    try:
        with Admin(broker.bootstrap) as admin:
            admin.create_topic("t", configs={"retention.ms": "1000"})
            admin.create_topic("u")
            # Fresh: Kafka keeps log.retention.ms's default on log.retention.hours and drops the
            # synonyms listed before the name, so an unset retention.ms names nothing.
            assert synonyms(admin, TOPIC_U, "retention.ms") == ("604800000", S.DEFAULT_CONFIG, [])
            assert synonyms(admin, TOPIC_U, "retention.bytes") == (
                "-1",
                S.DEFAULT_CONFIG,
                [(S.DEFAULT_CONFIG, "log.retention.bytes", "-1")],
            )
            assert synonyms(admin, TOPIC_U, "segment.bytes") == (
                "2000000",
                S.STATIC_BROKER_CONFIG,
                [
                    (S.STATIC_BROKER_CONFIG, "log.segment.bytes", "2000000"),
                    (S.DEFAULT_CONFIG, "log.segment.bytes", "1073741824"),
                ],
            )
            assert synonyms(admin, TOPIC_U, "cleanup.policy")[2] == [
                (S.DEFAULT_CONFIG, "log.cleanup.policy", "delete")
            ]
            # A fresh cluster's one default, as KRaft writes it at format time.
            fresh = admin.describe_configs([DEFAULT])[DEFAULT]
            assert {n: (e.value, e.source) for n, e in fresh.items()} == {
                "min.insync.replicas": ("1", S.DYNAMIC_DEFAULT_BROKER_CONFIG)
            }

            admin.alter_configs(DEFAULT, {"log.retention.ms": "5000", "log.retention.bytes": "7777"})
            admin.alter_configs(BROKER_0, {"log.retention.ms": "6000"})
            admin.alter_configs(GROUP, {"share.record.lock.duration.ms": "20000"})
        assert broker.terminate() == 0
        broker.start()
        with Admin(broker.bootstrap) as admin:
            assert synonyms(admin, TOPIC_U, "retention.ms") == (
                "6000",
                S.DYNAMIC_BROKER_CONFIG,
                [
                    (S.DYNAMIC_BROKER_CONFIG, "log.retention.ms", "6000"),
                    (S.DYNAMIC_DEFAULT_BROKER_CONFIG, "log.retention.ms", "5000"),
                    (S.DEFAULT_CONFIG, "log.retention.hours", "168"),
                ],
            )
            assert synonyms(admin, TOPIC_T, "retention.ms") == (
                "1000",
                S.DYNAMIC_TOPIC_CONFIG,
                [
                    (S.DYNAMIC_TOPIC_CONFIG, "retention.ms", "1000"),
                    (S.DYNAMIC_BROKER_CONFIG, "log.retention.ms", "6000"),
                    (S.DYNAMIC_DEFAULT_BROKER_CONFIG, "log.retention.ms", "5000"),
                    (S.DEFAULT_CONFIG, "log.retention.hours", "168"),
                ],
            )
            assert synonyms(admin, TOPIC_U, "retention.bytes") == (
                "7777",
                S.DYNAMIC_DEFAULT_BROKER_CONFIG,
                [
                    (S.DYNAMIC_DEFAULT_BROKER_CONFIG, "log.retention.bytes", "7777"),
                    (S.DEFAULT_CONFIG, "log.retention.bytes", "-1"),
                ],
            )
            # The cluster default lists only what was set on it, each naming only that layer.
            cluster = admin.describe_configs([DEFAULT], include_synonyms=True)[DEFAULT]
            assert {n: (e.value, e.source, len(e.synonyms)) for n, e in cluster.items()} == {
                "log.retention.bytes": ("7777", S.DYNAMIC_DEFAULT_BROKER_CONFIG, 1),
                "log.retention.ms": ("5000", S.DYNAMIC_DEFAULT_BROKER_CONFIG, 1),
                "min.insync.replicas": ("1", S.DYNAMIC_DEFAULT_BROKER_CONFIG, 1),
            }
            # Broker 0's own config wins over the cluster default; a static one shows as static.
            assert synonyms(admin, BROKER_0, "log.retention.ms")[:2] == ("6000", S.DYNAMIC_BROKER_CONFIG)
            assert synonyms(admin, BROKER_0, "log.retention.bytes")[:2] == (
                "7777",
                S.DYNAMIC_DEFAULT_BROKER_CONFIG,
            )
            assert synonyms(admin, BROKER_0, "log.segment.bytes")[:2] == ("2000000", S.STATIC_BROKER_CONFIG)
            # Group configs fall back to group.share.*; auto.offset.reset has no broker synonym.
            assert synonyms(admin, GROUP, "share.record.lock.duration.ms") == (
                "20000",
                S.GROUP_CONFIG,
                [
                    (S.GROUP_CONFIG, "share.record.lock.duration.ms", "20000"),
                    (S.DEFAULT_CONFIG, "group.share.record.lock.duration.ms", "30000"),
                ],
            )
            assert synonyms(admin, GROUP, "share.delivery.count.limit") == (
                "4",
                S.STATIC_BROKER_CONFIG,
                [
                    (S.STATIC_BROKER_CONFIG, "group.share.delivery.count.limit", "4"),
                    (S.DEFAULT_CONFIG, "group.share.delivery.count.limit", "5"),
                ],
            )
            assert synonyms(admin, GROUP, "share.auto.offset.reset") == (
                "latest",
                S.DEFAULT_CONFIG,
                [(S.DEFAULT_CONFIG, "share.auto.offset.reset", "latest")],
            )
            # Deleting the broker's own value falls back to the cluster default.
            admin.alter_configs(BROKER_0, {"log.retention.ms": None})
            assert synonyms(admin, TOPIC_U, "retention.ms")[:2] == ("5000", S.DYNAMIC_DEFAULT_BROKER_CONFIG)
            # Without include_synonyms there are none.
            plain = admin.describe_configs([TOPIC_U])[TOPIC_U]["retention.ms"]
            assert plain.synonyms == () and plain.source is S.DYNAMIC_DEFAULT_BROKER_CONFIG
    finally:
        broker.kill()


def test_kafka_python_reads_the_synonyms(tmp_path: Path) -> None:
    admin_module = require("kafka.admin")
    broker = BrokerProcess(tmp_path / "data")
    broker.start()
    client = admin_module.KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    try:
        with Admin(broker.bootstrap) as admin:
            admin.create_topic("k")
            admin.alter_configs(DEFAULT, {"log.segment.bytes": "3000000"})
        resource = admin_module.ConfigResource(admin_module.ConfigResourceType.TOPIC, "k")
        described = client.describe_configs([resource], include_synonyms=True, config_filter="all")
        segment = next(iter(described.values()))["k"]["segment.bytes"]
        assert (segment["value"], segment["config_source"]) == ("3000000", "DYNAMIC_DEFAULT_BROKER_CONFIG")
        assert segment["synonyms"] == [
            {"name": "log.segment.bytes", "value": "3000000", "source": "DYNAMIC_DEFAULT_BROKER_CONFIG"},
            {"name": "log.segment.bytes", "value": "1073741824", "source": "DEFAULT_CONFIG"},
        ]
    finally:
        client.close()
        broker.kill()
