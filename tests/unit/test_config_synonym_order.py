"""Kafka's synonym order for described configs, as pure functions of the config layers."""

from __future__ import annotations

from shareq.server.config_synonyms import (
    ConfigLayers,
    Source,
    Synonym,
    config_synonyms,
    default_layer,
    describe_broker_config,
    describe_cluster_default,
    describe_group_config,
    describe_topic_config,
)

DEFAULTS = default_layer(
    {
        "log.retention.ms": "604800000",
        "log.segment.bytes": "1073741824",
        "log.cleanup.policy": "delete",
        "group.share.record.lock.duration.ms": "30000",
    }
)


def test_layers_are_named_most_specific_first() -> None:
    layers = ConfigLayers(
        dynamic_broker={"log.segment.bytes": "4"},
        dynamic_default={"log.segment.bytes": "3"},
        static={"log.segment.bytes": "2"},
        defaults=DEFAULTS,
    )
    assert config_synonyms("log.segment.bytes", layers) == [
        Synonym("log.segment.bytes", "4", Source.DYNAMIC_BROKER_CONFIG),
        Synonym("log.segment.bytes", "3", Source.DYNAMIC_DEFAULT_BROKER_CONFIG),
        Synonym("log.segment.bytes", "2", Source.STATIC_BROKER_CONFIG),
        Synonym("log.segment.bytes", "1073741824", Source.DEFAULT_CONFIG),
    ]


def test_retention_ms_default_lives_on_retention_hours() -> None:
    assert "log.retention.ms" not in DEFAULTS and DEFAULTS["log.retention.hours"] == "168"
    fresh = ConfigLayers(defaults=DEFAULTS)
    # Kafka drops the synonyms before the name itself: nothing is left for an unset retention.ms.
    assert config_synonyms("log.retention.ms", fresh) == []
    assert describe_topic_config("retention.ms", "604800000", {}, fresh).source is Source.DEFAULT_CONFIG
    dynamic = ConfigLayers(dynamic_default={"log.retention.ms": "5000"}, defaults=DEFAULTS)
    assert [(s.name, s.source) for s in config_synonyms("log.retention.ms", dynamic)] == [
        ("log.retention.ms", Source.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("log.retention.hours", Source.DEFAULT_CONFIG),
    ]


def test_topic_override_comes_first() -> None:
    layers = ConfigLayers(static={"log.segment.bytes": "2"}, defaults=DEFAULTS)
    described = describe_topic_config("segment.bytes", "9", {"segment.bytes": "9"}, layers)
    assert described.source is Source.DYNAMIC_TOPIC_CONFIG
    assert [s.source for s in described.synonyms] == [
        Source.DYNAMIC_TOPIC_CONFIG,
        Source.STATIC_BROKER_CONFIG,
        Source.DEFAULT_CONFIG,
    ]
    fixed = describe_topic_config("cleanup.policy", "delete", {}, layers)
    assert fixed.synonyms == (Synonym("log.cleanup.policy", "delete", Source.DEFAULT_CONFIG),)


def test_cluster_default_names_only_its_own_layer() -> None:
    layers = ConfigLayers(
        dynamic_broker={"log.segment.bytes": "4"},
        dynamic_default={"log.segment.bytes": "3"},
        defaults=DEFAULTS,
    )
    described = describe_cluster_default("log.segment.bytes", layers)
    assert described.synonyms == (Synonym("log.segment.bytes", "3", Source.DYNAMIC_DEFAULT_BROKER_CONFIG),)
    assert describe_broker_config("log.segment.bytes", layers).source is Source.DYNAMIC_BROKER_CONFIG
    assert describe_broker_config("num.partitions", ConfigLayers()).synonyms == ()


def test_group_configs_fall_back_to_group_share_settings() -> None:
    layers = ConfigLayers(defaults=DEFAULTS)
    lock = describe_group_config("share.record.lock.duration.ms", "20000", "30000", True, layers)
    assert lock.synonyms == (
        Synonym("share.record.lock.duration.ms", "20000", Source.GROUP_CONFIG),
        Synonym("group.share.record.lock.duration.ms", "30000", Source.DEFAULT_CONFIG),
    )
    # No Kafka broker synonym: the group config is its own default.
    reset = describe_group_config("share.auto.offset.reset", "latest", "latest", False, layers)
    assert reset.synonyms == (Synonym("share.auto.offset.reset", "latest", Source.DEFAULT_CONFIG),)
    # ... unless the operator set shareq's broker-level setting.
    static = ConfigLayers(static={"group.share.auto.offset.reset": "earliest"}, defaults=DEFAULTS)
    described = describe_group_config("share.auto.offset.reset", "earliest", "earliest", False, static)
    assert described.source is Source.STATIC_BROKER_CONFIG
    assert described.synonyms == (
        Synonym("group.share.auto.offset.reset", "earliest", Source.STATIC_BROKER_CONFIG),
    )
    dlq = describe_group_config("errors.deadletterqueue.topic.name", "", "", False, layers)
    assert dlq.synonyms == (Synonym("errors.deadletterqueue.topic.name", "", Source.DEFAULT_CONFIG),)
