"""Broker configuration under Kafka's names, from ``--config key=value`` pairs.

A table of ``Setting(name, type, default, validator)``; other layers add their own keys (for
example ``group.share.*``) with ``register`` so a typo is an error rather than silently ignored.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from shareq.topic_configs import broker_synonyms


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

    def parse(self, raw: str | Any) -> Any:
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
            raise ConfigError(f"{self.name}: {raw!r} is not a valid {self.type.__name__}") from error
        if self.validator is not None and value is not None and not self.validator(value):
            raise ConfigError(f"{self.name}: {value!r} is out of range")
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
    Setting(name="log.retention.ms", type=int, default=7 * 24 * 3600 * 1000, validator=_at_least_minus_one),
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
    Setting(name="listener.security.protocol.map", type=str, default=None),
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
        if name not in SETTINGS
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

    __slots__ = ("_values", "explicit")

    def __init__(self, values: Mapping[str, Any], explicit: Iterable[str] = ()) -> None:
        self._values = dict(values)
        self.explicit: frozenset[str] = frozenset(explicit)
        """The names given explicitly (on the command line or as overrides), not defaulted."""

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
        _check_known(overrides)
        values = {name: s.default for name, s in SETTINGS.items()}
        for key, raw in overrides.items():
            values[key] = _parse(key, raw)
        return cls(values, overrides)

    def __getitem__(self, name: str) -> Any:
        if name not in self._values:
            setting = SETTINGS.get(name)
            if setting is None:
                raise KeyError(name)
            return setting.default
        return self._values[name]

    def with_overrides(self, overrides: Mapping[str, Any]) -> BrokerConfig:
        """A copy with some values replaced (validated)."""
        _check_known(overrides)
        values = dict(self._values)
        for key, raw in overrides.items():
            values[key] = _parse(key, raw)
        return BrokerConfig(values, self.explicit | set(overrides))

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


def _check_known(overrides: Mapping[str, Any]) -> None:
    unknown = sorted(k for k in overrides if k not in SETTINGS and not k.startswith(LISTENER_PREFIX))
    if unknown:
        raise ConfigError(f"unknown config key(s): {', '.join(unknown)}")


def _parse(key: str, raw: Any) -> Any:
    setting = SETTINGS.get(key)
    return raw if setting is None else setting.parse(raw)


def config_text(value: Any) -> str | None:
    """A config value as text, as Kafka describes it."""
    if value is None:
        return None
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)
