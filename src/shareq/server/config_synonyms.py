"""Where a described config's value comes from: Kafka's synonyms, most specific first (no I/O).

A config a topic or a group does not set falls back to a broker config, which falls back in turn
through four layers. DescribeConfigs names each layer that holds a value, in this order (Kafka's
``ConfigHelper.configSynonyms``):

1. ``DYNAMIC_BROKER_CONFIG``: set on this broker at runtime (IncrementalAlterConfigs, BROKER "0");
2. ``DYNAMIC_DEFAULT_BROKER_CONFIG``: the cluster default set at runtime (BROKER "", what
   ``ConfigCommand --entity-type brokers --entity-default`` alters);
3. ``STATIC_BROKER_CONFIG``: given at start-up (``shareq serve --config``);
4. ``DEFAULT_CONFIG``: the built-in default.

A topic override (``DYNAMIC_TOPIC_CONFIG``) or a group override (``GROUP_CONFIG``, which Kafka's
tools print as ``DYNAMIC_GROUP_CONFIG``) comes before them. The described source is the first
synonym's. Kafka's quirks are kept where its tools show them: ``log.retention.ms`` has the
synonyms ``log.retention.minutes`` and ``log.retention.hours`` and its built-in default lives on
``log.retention.hours`` (168), and Kafka drops the synonyms listed before the described name, so a
``retention.ms`` nobody set has no synonyms at all.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from shareq.kafka_configs import BROKER_CONFIGS, GROUP_CONFIGS
from shareq.topic_configs import TOPIC_SETTINGS


class Source(enum.IntEnum):
    """DescribeConfigs ``ConfigSource`` ids."""

    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    GROUP_CONFIG = 8


@dataclass(frozen=True, slots=True)
class Synonym:
    name: str
    value: str | None
    source: Source


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigLayers:
    """The broker-level layers, each a map from a broker config name to its value as text."""

    dynamic_broker: Mapping[str, str] = field(default_factory=dict)
    dynamic_default: Mapping[str, str] = field(default_factory=dict)
    static: Mapping[str, str] = field(default_factory=dict)
    defaults: Mapping[str, str] = field(default_factory=dict)


# Kafka's DynamicBrokerConfig.brokerConfigSynonyms: names that set the same broker config.
_BROKER_SYNONYMS: dict[str, tuple[str, ...]] = {
    "log.retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
}

# Built-in defaults Kafka keeps under another name or that shareq fixes (no broker setting).
KAFKA_ONLY_DEFAULTS: dict[str, str] = {
    "log.retention.hours": "168",
}
# Defaults that Kafka keeps on a synonym instead (log.retention.ms has none of its own).
DEFAULT_ON_SYNONYM = frozenset({"log.retention.ms"})

# Kafka's ServerTopicConfigSynonyms: the broker config a topic config falls back to.
TOPIC_CONFIG_SYNONYMS: dict[str, str] = {
    s.name: s.synonym for s in TOPIC_SETTINGS.values() if s.synonym is not None
}

# The broker config a share-group config falls back to. The last two are shareq's own broker
# settings (Kafka has none): they appear only when an operator set them, and otherwise the group
# config names itself as its default, as Kafka describes it.
GROUP_CONFIG_SYNONYMS: dict[str, str] = {
    "share.record.lock.duration.ms": "group.share.record.lock.duration.ms",
    "share.delivery.count.limit": "group.share.delivery.count.limit",
    "share.partition.max.record.locks": "group.share.partition.max.record.locks",
    "share.heartbeat.interval.ms": "group.share.heartbeat.interval.ms",
    "share.session.timeout.ms": "group.share.session.timeout.ms",
    "share.assignment.interval.ms": "group.share.assignment.interval.ms",
    "share.auto.offset.reset": "group.share.auto.offset.reset",
    "share.isolation.level": "group.share.isolation.level",
    "consumer.session.timeout.ms": "group.consumer.session.timeout.ms",
    "consumer.heartbeat.interval.ms": "group.consumer.heartbeat.interval.ms",
}
# Kafka's other group configs (streams groups', the consumer assignment interval) fall back to the
# broker configs its table names.
GROUP_CONFIG_SYNONYMS.update(
    {
        name: c.synonyms[0]
        for name, c in GROUP_CONFIGS.items()
        if c.synonyms and name not in GROUP_CONFIG_SYNONYMS
    }
)
_SHAREQ_ONLY_BROKER_KEYS = frozenset({"group.share.auto.offset.reset", "group.share.isolation.level"})


def config_synonyms(name: str, layers: ConfigLayers) -> list[Synonym]:
    """The layers holding broker config ``name`` (or a synonym of it), most specific first."""
    kafka = BROKER_CONFIGS.get(name)
    names = kafka.synonyms if kafka is not None and kafka.synonyms else _BROKER_SYNONYMS.get(name, (name,))
    found: list[Synonym] = []
    for values, source in (
        (layers.dynamic_broker, Source.DYNAMIC_BROKER_CONFIG),
        (layers.dynamic_default, Source.DYNAMIC_DEFAULT_BROKER_CONFIG),
        (layers.static, Source.STATIC_BROKER_CONFIG),
        (layers.defaults, Source.DEFAULT_CONFIG),
    ):
        for synonym in names:
            if synonym in values:
                found.append(Synonym(synonym, values[synonym], source))
    while found and found[0].name != name:  # Kafka drops synonyms listed before the name itself
        found.pop(0)
    return found


@dataclass(frozen=True, slots=True)
class Described:
    """One described config: its source and its synonyms (the value is the caller's)."""

    source: Source
    synonyms: tuple[Synonym, ...]


def _described(synonyms: list[Synonym]) -> Described:
    return Described(synonyms[0].source if synonyms else Source.DEFAULT_CONFIG, tuple(synonyms))


def describe_broker_config(name: str, layers: ConfigLayers) -> Described:
    """A config of broker "0" (every layer)."""
    return _described(config_synonyms(name, layers))


def describe_cluster_default(name: str, layers: ConfigLayers) -> Described:
    """A config of BROKER "" (the cluster defaults): only the dynamic-default layer is named."""
    synonyms = [s for s in config_synonyms(name, layers) if s.source is Source.DYNAMIC_DEFAULT_BROKER_CONFIG]
    return _described(synonyms)


def describe_topic_config(
    name: str, value: str | None, overrides: Mapping[str, str], layers: ConfigLayers
) -> Described:
    """A topic config: its override, then the broker config it falls back to."""
    synonyms: list[Synonym] = []
    if name in overrides:
        synonyms.append(Synonym(name, value, Source.DYNAMIC_TOPIC_CONFIG))
    broker_name = TOPIC_CONFIG_SYNONYMS.get(name)
    if broker_name is not None:
        synonyms += config_synonyms(broker_name, layers)
    return _described(synonyms)


def describe_group_config(
    name: str, value: str | None, default: str | None, overridden: bool, layers: ConfigLayers
) -> Described:
    """A share-group config: its override, then the ``group.share.*`` broker config, else itself
    as the default (``default`` is the value it would have without the override)."""
    synonyms: list[Synonym] = []
    if overridden:
        synonyms.append(Synonym(name, value, Source.GROUP_CONFIG))
    broker_name = GROUP_CONFIG_SYNONYMS.get(name)
    fallback: list[Synonym] = []
    if broker_name is not None:
        fallback = config_synonyms(broker_name, layers)
        if broker_name in _SHAREQ_ONLY_BROKER_KEYS:
            fallback = [s for s in fallback if s.source is not Source.DEFAULT_CONFIG]
    if not fallback:
        fallback = [Synonym(name, default, Source.DEFAULT_CONFIG)]
    return _described(synonyms + fallback)


def default_layer(defaults: Mapping[str, str | None]) -> dict[str, str]:
    """Built-in defaults as Kafka names them: ``None`` defaults left out, ``log.retention.ms``'s
    default moved to ``log.retention.hours``, and the broker defaults shareq fixes added."""
    layer = {k: v for k, v in defaults.items() if v is not None and k not in DEFAULT_ON_SYNONYM}
    layer.update(KAFKA_ONLY_DEFAULTS)
    return layer
