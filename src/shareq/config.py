"""Broker configuration under Kafka's names, from ``--config key=value`` pairs.

A table of ``Setting(name, type, default, validator)``; other layers add their own keys (for
example ``group.share.*``) with ``register`` so a typo is an error rather than silently ignored.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from shareq.kafka_configs import BROKER_CONFIGS, KafkaConfig
from shareq.topic_configs import broker_synonyms, java_double

logger = logging.getLogger(__name__)


class ConfigError(ValueError):
    """An unknown key or an invalid value."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Setting:
    name: str
    type: type[Any]
    default: Any
    validator: Callable[[Any], bool] | None = None
    doc: str = ""
    bounds: str = ""
    """What the validator accepts, in words, for the configuration reference (when not obvious)."""
    kafka: KafkaConfig | None = None
    """Kafka's definition, for a setting taken from Kafka's table that shareq only stores: its
    values are checked as Kafka checks them, with Kafka's messages."""

    @property
    def kafka_type(self) -> str:
        """The type as Kafka names it (DescribeConfigs' ConfigType)."""
        kafka = BROKER_CONFIGS.get(self.name)
        return kafka.type if kafka is not None else _KAFKA_NAMES.get(self.type, "STRING")

    @property
    def stored_only(self) -> bool:
        """Accepted, stored and described, but nothing in a one-node shareq acts on it."""
        return self.kafka is not None and self.name not in KAFKA_CONFIGS_ACTED_ON

    def parse(self, raw: str | Any) -> Any:
        if self.kafka is not None and isinstance(raw, str):
            return parse_kafka_value(self.kafka, raw)
        try:
            if self.type is bool and isinstance(raw, str):
                lowered = raw.strip().lower()
                if lowered not in ("true", "false"):
                    raise ValueError(raw)
                value: Any = lowered == "true"
            elif self.type is int and isinstance(raw, str):
                value = int(raw.strip())
            elif self.type is str and raw is None:
                value = None
            else:
                value = self.type(raw)
        except (TypeError, ValueError) as error:
            reason = (
                "Expected value to be either true or false"
                if self.type is bool
                else f"Not a number of type {self.kafka_type}"
            )
            raise ConfigError(f"Invalid value {raw} for configuration {self.name}: {reason}") from error
        if self.validator is not None and value is not None and not self.validator(value):
            kafka = BROKER_CONFIGS.get(self.name)
            if kafka is not None:  # Kafka's words where Kafka refuses it too
                parse_kafka_value(kafka, raw if isinstance(raw, str) else config_text(raw) or "")
            accepted = f" (accepted: {self.bounds})" if self.bounds else ""
            raise ConfigError(f"Invalid value {raw} for configuration {self.name}: out of range{accepted}")
        return value


_KAFKA_NAMES = {int: "LONG", float: "DOUBLE", str: "STRING", bool: "BOOLEAN"}
_RANGE = re.compile(r"\[(-?\d+),\.\.\.(?:,(-?\d+))?\]")
_INTEGER = re.compile(r"[+-]?[0-9]+")
_INTEGER_BOUNDS = {"SHORT": 2**15, "INT": 2**31, "LONG": 2**63}
PYTHON_TYPES: dict[str, type[Any]] = {
    "BOOLEAN": bool,
    "INT": int,
    "SHORT": int,
    "LONG": int,
    "DOUBLE": float,
}


def parse_kafka_value(config: KafkaConfig, raw: str) -> Any:
    """``raw`` typed and validated as Kafka's ConfigDef does it; ``ConfigError`` with its message."""
    name, kind, text = config.name, config.type, raw.strip()

    def invalid(reason: str, shown: object = raw) -> ConfigError:
        return ConfigError(f"Invalid value {shown} for configuration {name}: {reason}")

    value: Any = text
    if kind in _INTEGER_BOUNDS:
        bound = _INTEGER_BOUNDS[kind]
        if not _INTEGER.fullmatch(text) or not -bound <= int(text) < bound:
            raise invalid(f"Not a number of type {kind}")
        value = int(text)
    elif kind == "DOUBLE":
        value = java_double(text)
        if value is None:
            raise invalid("Not a number of type DOUBLE")
    elif kind == "BOOLEAN":
        if text.lower() not in ("true", "false"):
            raise invalid("Expected value to be either true or false")
        value = text.lower() == "true"
    validator = config.validator or ""
    bounds = _RANGE.fullmatch(validator)
    if bounds is not None and isinstance(value, int | float) and not isinstance(value, bool):
        low, high = int(bounds.group(1)), bounds.group(2)
        if value < low:
            raise invalid(f"Value must be at least {low}", value)
        if high is not None and value > int(high):
            raise invalid(f"Value must be no more than {high}", value)
    elif validator.startswith(("[", "(case insensitive) [")) and "..." not in validator:
        insensitive = validator.startswith("(")
        choices = [c.strip() for c in validator[validator.index("[") + 1 : -1].split(",")]
        items = [i.strip() for i in text.split(",")] if kind == "LIST" else [text]
        for item in items:
            if kind == "LIST" and not text:
                break
            found = item.lower() in (c.lower() for c in choices) if insensitive else item in choices
            if not found and not (item.startswith("by_duration:") and "by_duration:PnDTnHnMn.nS" in choices):
                raise invalid(f"String must be one of: {', '.join(choices)}", item)
    return value


def _positive(v: int) -> bool:
    return v > 0


def _non_negative(v: int) -> bool:
    return v >= 0


def _at_least_minus_one(v: int) -> bool:
    return v >= -1


SETTINGS: dict[str, Setting] = {}


def register(*settings: Setting) -> None:
    """Add settings to the table (idempotent for identical definitions)."""
    for setting in settings:
        existing = SETTINGS.get(setting.name)
        if existing is not None and existing != setting:
            raise ConfigError(f"setting {setting.name} is already registered differently")
        SETTINGS[setting.name] = setting


register(
    Setting(name="node.id", type=int, default=0, validator=_non_negative, doc="this broker's id"),
    Setting(name="advertised.host", type=str, default=None, doc="host given to clients (default: bind host)"),
    Setting(
        name="advertised.port", type=int, default=None, doc="port given to clients (default: bound port)"
    ),
    Setting(name="num.partitions", type=int, default=1, validator=_positive),
    Setting(name="auto.create.topics.enable", type=bool, default=True),
    Setting(name="log.segment.bytes", type=int, default=1024 * 1024 * 1024, validator=_positive),
    Setting(
        name="log.retention.ms",
        type=int,
        default=7 * 24 * 3600 * 1000,
        bounds="any (as in Kafka; a negative value is no time limit)",
    ),
    Setting(name="log.retention.bytes", type=int, default=-1, validator=_at_least_minus_one),
    Setting(name="log.flush.interval.messages", type=int, default=2**63 - 1, validator=_positive),
    Setting(name="log.retention.check.interval.ms", type=int, default=300_000, validator=_positive),
    Setting(name="message.max.bytes", type=int, default=1024 * 1024 + 12, validator=_positive),
    Setting(name="socket.request.max.bytes", type=int, default=100 * 1024 * 1024, validator=_positive),
    Setting(
        name="http.port",
        type=int,
        default=None,
        validator=lambda v: 0 <= v <= 65_535,
        bounds="0 .. 65535",
        doc="port of /metrics, the web view and /healthz, /readyz (unset: off; 0: any free port)",
    ),
    Setting(name="http.host", type=str, default=None, doc="host the HTTP port binds (default: bind host)"),
    Setting(
        name="http.push.interval.ms",
        type=int,
        default=1_000,
        validator=_positive,
        doc="how often the web view's event stream pushes a fresh state",
    ),
)

# Listeners, TLS, SASL and ACLs (Kafka's names; read by ``server/security.py``). Per-listener
# overrides use Kafka's ``listener.name.<listener>.`` prefix.
register(
    Setting(
        name="listeners",
        type=str,
        default=None,
        doc="NAME://host:port,... (default: PLAINTEXT on --host/--port)",
    ),
    Setting(
        name="advertised.listeners", type=str, default=None, doc="endpoints given to clients, per listener"
    ),
    Setting(
        name="listener.security.protocol.map",
        type=str,
        default=BROKER_CONFIGS["listener.security.protocol.map"].default,
    ),
    Setting(name="inter.broker.listener.name", type=str, default=None, doc="accepted; one node has no peers"),
    Setting(
        name="security.inter.broker.protocol", type=str, default=None, doc="accepted; one node has no peers"
    ),
    Setting(name="ssl.keystore.type", type=str, default=None, validator=lambda v: v.upper() == "PEM"),
    Setting(name="ssl.keystore.location", type=str, default=None, doc="PEM file with the key and its chain"),
    Setting(name="ssl.keystore.key", type=str, default=None, doc="PEM private key, inline"),
    Setting(name="ssl.keystore.certificate.chain", type=str, default=None, doc="PEM chain, inline"),
    Setting(name="ssl.keystore.password", type=str, default=None),
    Setting(name="ssl.key.password", type=str, default=None, doc="password of an encrypted PEM key"),
    Setting(name="ssl.truststore.type", type=str, default=None, validator=lambda v: v.upper() == "PEM"),
    Setting(
        name="ssl.truststore.location", type=str, default=None, doc="PEM file of trusted CA certificates"
    ),
    Setting(name="ssl.truststore.certificates", type=str, default=None, doc="PEM CA certificates, inline"),
    Setting(name="ssl.truststore.password", type=str, default=None),
    Setting(
        name="ssl.client.auth",
        type=str,
        default="none",
        validator=lambda v: v in ("required", "requested", "none"),
    ),
    Setting(name="ssl.endpoint.identification.algorithm", type=str, default="https"),
    Setting(name="sasl.enabled.mechanisms", type=str, default="PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"),
    Setting(name="sasl.mechanism.inter.broker.protocol", type=str, default="GSSAPI"),
    Setting(name="connections.max.reauth.ms", type=int, default=0, validator=_non_negative),
    Setting(
        name="authorizer.class.name",
        type=str,
        default="",
        doc="any non-empty value turns on ACL checks (Kafka's class names carry over)",
    ),
    Setting(name="super.users", type=str, default=None, doc="User:a;User:b, allowed everything"),
    Setting(name="allow.everyone.if.no.acl.found", type=bool, default=False),
    Setting(name="max.connections", type=int, default=2**31 - 1, validator=_positive),
    Setting(name="max.connections.per.ip", type=int, default=2**31 - 1, validator=_positive),
    Setting(name="connections.max.idle.ms", type=int, default=600_000, validator=_at_least_minus_one),
)

# Share groups (Kafka's ``group.share.*`` names; the group coordinator reads them through
# ``ShareBrokerConfig.from_properties``) and the share coordinator's state topic.
register(
    *(
        Setting(name=f"group.share.{name}", type=int, default=default, validator=_positive, doc=doc)
        for name, default, doc in (
            ("record.lock.duration.ms", 30_000, "how long an acquired record stays locked to its consumer"),
            ("min.record.lock.duration.ms", 15_000, "lower bound of a group's share.record.lock.duration.ms"),
            ("max.record.lock.duration.ms", 60_000, "upper bound of a group's share.record.lock.duration.ms"),
            ("delivery.count.limit", 5, "deliveries before a record is archived (or dead-lettered)"),
            ("min.delivery.count.limit", 2, "lower bound of a group's share.delivery.count.limit"),
            ("max.delivery.count.limit", 10, "upper bound of a group's share.delivery.count.limit"),
            ("partition.max.record.locks", 2_000, "in-flight window per share-partition (records)"),
            ("min.partition.max.record.locks", 100, "lower bound of a group's window"),
            (
                "max.partition.max.record.locks",
                1_000_000,
                "upper bound of a group's window (Kafka: 4,000; shareq keeps in-flight records as runs, "
                "so a window costs its runs, not its records)",
            ),
            ("heartbeat.interval.ms", 5_000, "share consumers' heartbeat interval"),
            ("min.heartbeat.interval.ms", 5_000, "lower bound of a group's heartbeat interval"),
            ("max.heartbeat.interval.ms", 15_000, "upper bound of a group's heartbeat interval"),
            ("session.timeout.ms", 45_000, "a member without a heartbeat this long is removed"),
            ("min.session.timeout.ms", 45_000, "lower bound of a group's session timeout"),
            ("max.session.timeout.ms", 60_000, "upper bound of a group's session timeout"),
            ("max.size", 200, "members per share group"),
            ("max.share.sessions", 2_000, "share sessions the broker keeps at once"),
        )
    ),
    *(
        Setting(name=f"group.share.{name}", type=int, default=default, validator=_non_negative, doc=doc)
        for name, default, doc in (
            ("assignment.interval.ms", 1_000, "a group's share.assignment.interval.ms unless it sets one"),
            ("min.assignment.interval.ms", 0, "lower bound of a group's share.assignment.interval.ms"),
            ("max.assignment.interval.ms", 15_000, "upper bound of a group's share.assignment.interval.ms"),
        )
    ),
    Setting(
        name="group.share.auto.offset.reset",
        type=str,
        default="latest",
        validator=lambda v: v in ("earliest", "latest") or v.startswith("by_duration:"),
        bounds="earliest | latest | by_duration:<ISO-8601 duration>",
    ),
    Setting(name="group.share.isolation.level", type=str, default="read_uncommitted"),
    Setting(
        name="shareq.redelivery.backoff.ceiling.ms",
        type=int,
        default=900_000,
        validator=_non_negative,
        doc="the longest redelivery delay a share group (or a client's release) may ask for",
    ),
    # KIP-1289 (Kafka gates it with the feature share.version >= 2): TxnShareAcknowledge is
    # advertised and served only when this is on.
    Setting(name="share.transactional.acks.enable", type=bool, default=False),
    Setting(name="transaction.max.timeout.ms", type=int, default=900_000, validator=_positive),
    Setting(
        name="transactional.id.expiration.ms", type=int, default=7 * 24 * 3600 * 1000, validator=_positive
    ),
    Setting(
        name="errors.deadletterqueue.auto.create.topics.enable",
        type=bool,
        default=False,
        doc="create a share group's missing dead-letter topic on its first dead letter",
    ),
    Setting(
        name="errors.deadletterqueue.topic.name.prefix",
        type=str,
        default="dlq.",
        doc="dead-letter topics must start with this prefix (empty: no rule)",
    ),
    Setting(name="share.coordinator.state.topic.num.partitions", type=int, default=50, validator=_positive),
    Setting(
        name="share.coordinator.state.topic.segment.bytes",
        type=int,
        default=8 * 1024 * 1024,
        validator=_positive,
    ),
    Setting(
        name="share.coordinator.snapshot.update.records.per.snapshot",
        type=int,
        default=500,
        validator=_non_negative,
    ),
    Setting(
        name="share.coordinator.cold.partition.snapshot.interval.ms",
        type=int,
        default=300_000,
        validator=_positive,
    ),
    Setting(
        name="share.coordinator.state.topic.prune.interval.ms",
        type=int,
        default=300_000,
        validator=_positive,
    ),
    Setting(
        name="share.persister",
        type=str,
        default="coordinator",
        validator=lambda v: v in ("coordinator", "in-log"),
        bounds="coordinator | in-log",
        doc="where share-partition state is kept: the __share_group_state topic (coordinator) or "
        "control records in each share-partition's own topic-partition (in-log)",
    ),
    Setting(
        name="share.coordinator.state.flush.mode",
        type=str,
        default="group",
        validator=lambda v: v in ("fsync", "group", "none"),
        bounds="fsync | group | none",
        doc="fsync | group | none: what a reported share-state write survives",
    ),
)

# Classic consumer groups (Kafka's names and defaults; read by ``server/consumer_groups.py``).
register(
    Setting(name="group.min.session.timeout.ms", type=int, default=6_000, validator=_positive),
    Setting(name="group.max.session.timeout.ms", type=int, default=1_800_000, validator=_positive),
    Setting(name="group.initial.rebalance.delay.ms", type=int, default=3_000, validator=_non_negative),
    Setting(name="group.max.size", type=int, default=2**31 - 1, validator=_positive),
    Setting(name="group.consumer.session.timeout.ms", type=int, default=45_000, validator=_positive),
    Setting(name="group.consumer.heartbeat.interval.ms", type=int, default=5_000, validator=_positive),
    Setting(name="group.consumer.max.size", type=int, default=2**31 - 1, validator=_positive),
    Setting(name="group.consumer.min.session.timeout.ms", type=int, default=45_000, validator=_positive),
    Setting(name="group.consumer.max.session.timeout.ms", type=int, default=60_000, validator=_positive),
    Setting(name="group.consumer.min.heartbeat.interval.ms", type=int, default=5_000, validator=_positive),
    Setting(name="group.consumer.max.heartbeat.interval.ms", type=int, default=15_000, validator=_positive),
    Setting(
        name="offsets.retention.minutes",
        type=int,
        default=10_080,
        validator=_positive,
        doc="how long an empty group keeps its committed offsets (7 days, as Kafka)",
    ),
    Setting(name="offsets.retention.check.interval.ms", type=int, default=600_000, validator=_positive),
    Setting(
        name="group.consumer.assignors",
        type=str,
        default="uniform,range",
        validator=lambda v: bool(consumer_assignors(v)),
        bounds="comma-separated list of uniform, range",
        doc="server-side assignors KIP-848 members may choose (uniform, range); the first is the default",
    ),
)

# The internal topics' configs (read by ``server/internal_topics.py``).
register(
    Setting(
        name="offsets.topic.segment.bytes",
        type=int,
        default=100 * 1024 * 1024,
        validator=lambda v: v >= 1024 * 1024,
    ),
    Setting(
        name="transaction.state.log.segment.bytes",
        type=int,
        default=100 * 1024 * 1024,
        validator=lambda v: v >= 1024 * 1024,
    ),
    Setting(name="transaction.state.log.min.isr", type=int, default=2, validator=lambda v: v >= 1),
)

# The log cleaner (read by ``server/compaction.py``).
register(
    Setting(name="log.cleaner.enable", type=bool, default=True),
    Setting(
        name="log.cleaner.backoff.ms", type=int, default=15_000, validator=lambda v: v >= 0, bounds=">= 0"
    ),
    Setting(
        name="log.cleaner.dedupe.buffer.size",
        type=int,
        default=128 * 1024 * 1024,
        validator=lambda v: v > 0,
        bounds=">= 1",
    ),
)

# The broker configs topic configs fall back to, from the topic-config table (a name this table
# already defines keeps its definition). Last, so the table is whole once this module is imported:
# which other modules were imported never decides whether a setting is known.
register(
    *(
        Setting(name=name, type=kind, default=default, validator=validator)
        for name, kind, default, validator in broker_synonyms()
        if name not in SETTINGS and not (name in BROKER_CONFIGS and BROKER_CONFIGS[name].default is None)
    )
)

KAFKA_CONFIGS_ACTED_ON: dict[str, str] = {
    "broker.id": "this broker's id when node.id is not set",
    "broker.rack": "the rack Metadata, DescribeCluster and ShareFetch give for this broker",
    "controller.listener.names": "listeners of this name are not bound: one node serves no controller quorum",
    "delete.topic.enable": "false: DeleteTopics answers TOPIC_DELETION_DISABLED",
    "fetch.max.bytes": "the most a Fetch or ShareFetch response carries, whatever it asks for",
    "log.dir": "the data directory when neither --data-dir nor log.dirs is given",
    "log.dirs": "the data directory (its first entry) when --data-dir is not given",
    "log.retention.hours": "log.retention.ms in hours, when neither it nor log.retention.minutes is set",
    "log.retention.minutes": "log.retention.ms in minutes, when it is not set",
    "log.roll.hours": "log.roll.ms in hours, when it is not set",
    "log.roll.ms": "default of the topic config `segment.ms`",
    "offset.metadata.max.bytes": "longest metadata of an offset commit (OFFSET_METADATA_TOO_LARGE)",
    "ssl.enabled.protocols": "the TLS versions a client may negotiate (TLSv1.2, TLSv1.3)",
}
"""Kafka configs from Kafka's table that shareq reads, with what it does with them."""

# Every other broker config Kafka 4.4 has: accepted at start and by IncrementalAlterConfigs where
# Kafka changes it at runtime, stored and described with Kafka's default and type; nothing here
# acts on it (replication, controllers, threads, tiered storage... mean nothing on one node).
# Last again, so every shareq setting keeps its own definition.
register(
    *(
        Setting(
            name=config.name,
            type=PYTHON_TYPES.get(config.type, str),
            default=None if config.default is None else parse_kafka_value(config, config.default),
            kafka=config,
        )
        for config in BROKER_CONFIGS.values()
        if config.name not in SETTINGS
    )
)

_ASSIGNOR_CLASSES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}


def consumer_assignors(value: str) -> tuple[str, ...]:
    """``group.consumer.assignors`` as assignor names (Kafka's class names map to theirs); empty if any
    entry is unknown."""
    names = [_ASSIGNOR_CLASSES.get(part.strip(), part.strip()) for part in value.split(",") if part.strip()]
    if not names or any(name not in ("uniform", "range") for name in names):
        return ()
    return tuple(dict.fromkeys(names))


class BrokerConfig:
    """Resolved broker settings; read with ``config["num.partitions"]``."""

    __slots__ = ("_values", "explicit", "unknown")

    def __init__(
        self,
        values: Mapping[str, Any],
        explicit: Iterable[str] = (),
        unknown: Mapping[str, str] | None = None,
    ) -> None:
        self._values = dict(values)
        self.explicit: frozenset[str] = frozenset(explicit)
        """The names given explicitly (on the command line or as overrides), not defaulted."""
        self.unknown: dict[str, str] = dict(unknown or {})
        """Names neither Kafka nor shareq has (a plugin's, a later Kafka's, a typo): kept as given,
        used by nothing, as Kafka keeps them (it logs them as supplied but not used)."""

    @classmethod
    def from_pairs(cls, pairs: Iterable[str]) -> BrokerConfig:
        """Parse ``key=value`` strings as given on the command line."""
        overrides: dict[str, str] = {}
        for pair in pairs:
            key, sep, value = pair.partition("=")
            if not sep:
                raise ConfigError(f"expected key=value, got {pair!r}")
            overrides[key.strip()] = value
        return cls.from_mapping(overrides)

    @classmethod
    def from_mapping(cls, overrides: Mapping[str, Any]) -> BrokerConfig:
        known, unknown = _split_known(overrides)
        if unknown:
            logger.warning(
                "These configurations '%s' were supplied but are not used yet.", ", ".join(sorted(unknown))
            )
        values = {name: s.default for name, s in SETTINGS.items()}
        for key, raw in known.items():
            values[key] = _parse(key, raw)
        _derive(values, set(known))
        return cls(values, known, unknown)

    def __getitem__(self, name: str) -> Any:
        if name not in self._values:
            setting = SETTINGS.get(name)
            if setting is None:
                raise KeyError(name)
            return setting.default
        return self._values[name]

    def with_overrides(self, overrides: Mapping[str, Any]) -> BrokerConfig:
        """A copy with some values replaced (validated; unknown names kept as given)."""
        known, unknown = _split_known(overrides)
        values = dict(self._values)
        for key, raw in known.items():
            values[key] = _parse(key, raw)
        _derive(values, self.explicit | set(known))
        return BrokerConfig(values, self.explicit | set(known), {**self.unknown, **unknown})

    def for_listener(self, listener: str, name: str) -> Any:
        """Kafka's per-listener override ``listener.name.<listener>.<name>``, else ``name``."""
        prefixed = f"{LISTENER_PREFIX}{listener.lower()}.{name}"
        if prefixed in self._values:
            return _parse(name, self._values[prefixed]) if name in SETTINGS else self._values[prefixed]
        return self[name]

    def listener_text(self, listener: str, name: str) -> str | None:
        """A per-listener key that has no broker-wide form (``listener.name.<l>.plain.sasl.jaas.config``)."""
        value = self._values.get(f"{LISTENER_PREFIX}{listener.lower()}.{name}")
        return None if value is None else str(value)

    def text(self, name: str) -> str | None:
        """The value as Kafka prints it (booleans in lower case; ``None`` when unset)."""
        return config_text(self[name])

    def items(self) -> list[tuple[str, Any]]:
        return sorted({name: self[name] for name in SETTINGS}.items())


LISTENER_PREFIX = "listener.name."
"""Keys under this prefix are per-listener overrides (``listener.name.sasl_ssl.ssl.client.auth``),
kept as text and read through ``BrokerConfig.for_listener``."""


# Kafka's coarser names for a setting shareq reads under the finest one: (setting, coarser name,
# factor), the first one given wins, as in Kafka (log.retention.ms, else .minutes, else .hours).
_COARSER = (
    ("log.retention.ms", "log.retention.minutes", 60_000),
    ("log.retention.ms", "log.retention.hours", 3_600_000),
    ("log.roll.ms", "log.roll.hours", 3_600_000),
    ("node.id", "broker.id", 1),
)


def _derive(values: dict[str, Any], explicit: set[str] | frozenset[str]) -> None:
    """Give a setting the value of a coarser Kafka name when only that one was set."""
    done: set[str] = set()
    for name, coarser, factor in _COARSER:
        if name in explicit or name in done or coarser not in explicit or values.get(coarser) is None:
            continue
        if not (name == "node.id" and values[coarser] < 0):
            values[name] = values[coarser] * factor
            done.add(name)


def _split_known(overrides: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """The overrides shareq or Kafka knows (per-listener ones included), and the others."""
    known: dict[str, Any] = {}
    unknown: dict[str, str] = {}
    for key, raw in overrides.items():
        if key in SETTINGS or key.startswith(LISTENER_PREFIX):
            known[key] = raw
        else:
            unknown[key] = str(raw)
    return known, unknown


def _parse(key: str, raw: Any) -> Any:
    setting = SETTINGS.get(key)
    return raw if setting is None else setting.parse(raw)


def config_text(value: Any) -> str | None:
    """A config value as text, as Kafka describes it."""
    if value is None:
        return None
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return java_double_text(value)
    return str(value)


def java_double_text(value: float) -> str:
    """A double as Java's ``Double.toString`` prints it (``0.5``, ``1.0E7``, ``1.7976931348623157E308``)."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        text = repr(value)
        return text if "." in text or "e" in text else text + ".0"
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    shown = "".join(map(str, digits))
    assert isinstance(exponent, int)
    return f"{'-' if sign else ''}{shown[0]}.{shown[1:] or '0'}E{len(shown) + exponent - 1}"
