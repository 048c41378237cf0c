"""Kafka's whole broker config set in the settings table: every name taken and checked as Kafka checks
it, the coarser names of settings shareq has read as Kafka reads them, a server.properties file."""

from __future__ import annotations

import pytest

from shareq.cli.serve import read_properties
from shareq.config import SETTINGS, BrokerConfig, ConfigError
from shareq.kafka_configs import BROKER_CONFIGS, GROUP_CONFIGS
from shareq.server.security import resolve_listeners
from shareq.topic_configs import effective_topic_configs


def test_every_kafka_broker_config_is_a_setting() -> None:
    assert set(BROKER_CONFIGS) <= set(SETTINGS)
    assert len(BROKER_CONFIGS) >= 350 and len(GROUP_CONFIGS) == 21


@pytest.mark.parametrize(
    ("pair", "message"),
    [
        (
            "num.io.threads=abc",
            "Invalid value abc for configuration num.io.threads: Not a number of type INT",
        ),
        ("num.io.threads=0", "Invalid value 0 for configuration num.io.threads: Value must be at least 1"),
        ("num.partitions=0", "Invalid value 0 for configuration num.partitions: Value must be at least 1"),
        ("num.partitions=x", "Invalid value x for configuration num.partitions: Not a number of type INT"),
        ("auto.leader.rebalance.enable=maybe", "Expected value to be either true or false"),
        ("log.cleanup.policy=bogus", "String must be one of: compact, delete"),
        ("metadata.log.segment.bytes=10", "Value must be at least 8388608"),
        ("group.coordinator.threads=0", "Value must be at least 1"),
        ("ssl.client.auth=sometimes", "configuration ssl.client.auth"),
    ],
)
def test_a_bad_value_is_refused_in_kafkas_words(pair: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        BrokerConfig.from_pairs([pair])


def test_a_name_nobody_knows_is_kept_and_not_used() -> None:
    config = BrokerConfig.from_pairs(["group.share.max.groups=50", "num.io.threads=8"])
    assert config.unknown == {"group.share.max.groups": "50"}
    assert config["num.io.threads"] == 8


def test_coarser_kafka_names_set_what_shareq_reads() -> None:
    """log.retention.hours/minutes give log.retention.ms, log.roll.hours gives segment.ms's default, and
    broker.id the node id, unless the finer name is set too."""
    config = BrokerConfig.from_pairs(["log.retention.hours=1", "log.roll.hours=2", "broker.id=3"])
    assert (config["log.retention.ms"], config["node.id"]) == (3_600_000, 3)
    effective = effective_topic_configs({}, config)
    assert (effective["retention.ms"][0], effective["segment.ms"][0]) == ("3600000", "7200000")
    finer = BrokerConfig.from_pairs(["log.retention.minutes=2", "log.retention.hours=1", "log.roll.ms=5000"])
    assert finer["log.retention.ms"] == 120_000
    assert effective_topic_configs({}, finer)["segment.ms"][0] == "5000"
    assert effective_topic_configs({}, BrokerConfig.from_pairs([]))["segment.ms"][0] == "604800000"


def test_a_server_properties_file() -> None:
    text = (
        "# A comment\n! another\nprocess.roles=broker,controller\nnode.id = 1\n"
        "listeners: PLAINTEXT://:9092,\\\n    CONTROLLER://:9093\nlog.dirs /tmp/logs\nempty=\n"
    )
    assert read_properties(text) == {
        "process.roles": "broker,controller",
        "node.id": "1",
        "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093",
        "log.dirs": "/tmp/logs",
        "empty": "",
    }


def test_controller_listeners_are_not_bound() -> None:
    config = BrokerConfig.from_pairs(
        [
            "listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
            "advertised.listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093",
            "controller.listener.names=CONTROLLER",
            "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        ]
    )
    listeners, advertised = resolve_listeners(config, "127.0.0.1", 0)
    assert [listener.name for listener in listeners] == ["PLAINTEXT"]
    assert sorted(advertised) == ["PLAINTEXT"]
