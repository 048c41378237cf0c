"""Per-group dynamic configuration, bounded by broker-level ``group.share.*`` / ``group.consumer.*`` settings.

Share groups read the ``share.*`` and ``errors.deadletterqueue.*`` configs; KIP-848 consumer groups
read ``consumer.session.timeout.ms`` and ``consumer.heartbeat.interval.ms``. Like Kafka, a group id
may carry any of them, whatever its type.

A group config is a sparse map of Kafka-named overrides (``share.record.lock.duration.ms`` ...);
anything not overridden falls back to the broker's value, which falls back to Kafka's default. The
broker also sets the bounds an override must respect (``group.share.min/max.*``), so an operator
can let tenants tune a group without letting them pin records for an hour.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields

from shareq.config import ConfigError, parse_kafka_value
from shareq.coordinators.group.errors import GroupErrorCode, GroupRequestError
from shareq.coordinators.group.retry_config import (
    BACKOFF_CEILING_PROPERTY,
    DEFAULT_BACKOFF_CEILING_MS,
    RETRY_CONFIG_DEFAULTS,
    RETRY_CONFIG_NAMES,
    RetryConfig,
    resolve_retry_config,
)
from shareq.kafka_configs import BROKER_CONFIGS, GROUP_CONFIGS

_ACTED_ON = frozenset(
    {
        "share.record.lock.duration.ms",
        "share.delivery.count.limit",
        "share.partition.max.record.locks",
        "share.auto.offset.reset",
        "share.isolation.level",
        "share.heartbeat.interval.ms",
        "share.session.timeout.ms",
        "share.assignment.interval.ms",
        "share.renew.acknowledge.enable",
        "errors.deadletterqueue.topic.name",
        "errors.deadletterqueue.copy.record.enable",
        "consumer.session.timeout.ms",
        "consumer.heartbeat.interval.ms",
    }
)
RECORD_LOCK_DURATION_MS = "share.record.lock.duration.ms"
DELIVERY_COUNT_LIMIT = "share.delivery.count.limit"
PARTITION_MAX_RECORD_LOCKS = "share.partition.max.record.locks"
AUTO_OFFSET_RESET = "share.auto.offset.reset"
ISOLATION_LEVEL = "share.isolation.level"
HEARTBEAT_INTERVAL_MS = "share.heartbeat.interval.ms"
SESSION_TIMEOUT_MS = "share.session.timeout.ms"
ASSIGNMENT_INTERVAL_MS = "share.assignment.interval.ms"
RENEW_ACKNOWLEDGE_ENABLE = "share.renew.acknowledge.enable"
DLQ_TOPIC_NAME = "errors.deadletterqueue.topic.name"
DLQ_COPY_RECORD_ENABLE = "errors.deadletterqueue.copy.record.enable"
CONSUMER_SESSION_TIMEOUT_MS = "consumer.session.timeout.ms"
CONSUMER_HEARTBEAT_INTERVAL_MS = "consumer.heartbeat.interval.ms"
STORED_ONLY_GROUP_CONFIGS: tuple[str, ...] = tuple(name for name in GROUP_CONFIGS if name not in _ACTED_ON)
"""Kafka's other group configs (streams groups' and the consumer assignment interval): a group
takes them, validated as Kafka validates them, and describes them; nothing in shareq reads them."""
SHARE_ORDERING = "shareq.share.ordering"
"""``none`` (Kafka's unordered sharing) or ``key``: a key's records are held by one member at a time,
in offset order (see docs/key-ordering.md)."""
SHARE_KEY_LOOKAHEAD = "shareq.share.key.lookahead"
"""How many records past the next fetch offset a ``key`` group's acquisition may look at to find
records whose key is not blocked."""

GROUP_CONFIG_NAMES: tuple[str, ...] = (
    RECORD_LOCK_DURATION_MS,
    DELIVERY_COUNT_LIMIT,
    PARTITION_MAX_RECORD_LOCKS,
    AUTO_OFFSET_RESET,
    ISOLATION_LEVEL,
    HEARTBEAT_INTERVAL_MS,
    SESSION_TIMEOUT_MS,
    ASSIGNMENT_INTERVAL_MS,
    RENEW_ACKNOWLEDGE_ENABLE,
    DLQ_TOPIC_NAME,
    DLQ_COPY_RECORD_ENABLE,
    CONSUMER_SESSION_TIMEOUT_MS,
    CONSUMER_HEARTBEAT_INTERVAL_MS,
    SHARE_ORDERING,
    SHARE_KEY_LOOKAHEAD,
    *RETRY_CONFIG_NAMES,
    *STORED_ONLY_GROUP_CONFIGS,
)

ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
ORDERING_MODES = ("none", "key")
KEY_LOOKAHEAD_DEFAULT = 5_000
KEY_LOOKAHEAD_BOUNDS = (1, 1_000_000)


class ConfigSource(enum.IntEnum):
    """Where a described value comes from (values are Kafka's DescribeConfigs ``ConfigSource`` ids)."""

    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_GROUP_CONFIG = 8


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareBrokerConfig:
    """Broker-level share-group settings (Kafka's ``ShareGroupConfig`` defaults)."""

    record_lock_duration_ms: int = 30_000
    min_record_lock_duration_ms: int = 15_000
    max_record_lock_duration_ms: int = 60_000
    delivery_count_limit: int = 5
    min_delivery_count_limit: int = 2
    max_delivery_count_limit: int = 10
    partition_max_record_locks: int = 2_000
    min_partition_max_record_locks: int = 100
    # Kafka's default is 4,000 (its window is per record); shareq's in-flight state is run-length,
    # so a group may ask for a window that fits a Spark micro-batch (groups keep 2,000 by default).
    max_partition_max_record_locks: int = 1_000_000
    heartbeat_interval_ms: int = 5_000
    min_heartbeat_interval_ms: int = 5_000
    max_heartbeat_interval_ms: int = 15_000
    session_timeout_ms: int = 45_000
    min_session_timeout_ms: int = 45_000
    max_session_timeout_ms: int = 60_000
    assignment_interval_ms: int = 1_000
    min_assignment_interval_ms: int = 0
    max_assignment_interval_ms: int = 15_000
    max_size: int = 200
    max_share_sessions: int = 2_000
    auto_offset_reset: str = "latest"
    isolation_level: str = "read_uncommitted"
    consumer_session_timeout_ms: int = 45_000
    consumer_min_session_timeout_ms: int = 45_000
    consumer_max_session_timeout_ms: int = 60_000
    consumer_heartbeat_interval_ms: int = 5_000
    consumer_min_heartbeat_interval_ms: int = 5_000
    consumer_max_heartbeat_interval_ms: int = 15_000
    redelivery_backoff_ceiling_ms: int = DEFAULT_BACKOFF_CEILING_MS
    """``shareq.redelivery.backoff.ceiling.ms``: no redelivery delay is longer."""
    explicit: frozenset[str] = field(default=frozenset())
    """Broker property names set by the operator (described with source STATIC_BROKER_CONFIG)."""
    kafka_props: tuple[tuple[str, str], ...] = ()
    """Other Kafka group-coordinator properties the operator set (``group.streams.*`` ...): the
    bounds of the group configs shareq only stores."""

    def kafka_value(self, name: str) -> str:
        """A Kafka broker property as set, else Kafka's default."""
        return dict(self.kafka_props).get(name) or BROKER_CONFIGS[name].default or ""

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> ShareBrokerConfig:
        """Build from broker properties named as in Kafka (``group.share.max.size`` ...)."""
        by_prop = {_broker_prop(f.name): f.name for f in fields(cls) if f.name != "explicit"}
        values: dict[str, object] = {}
        others: list[tuple[str, str]] = []
        for prop, raw in props.items():
            attr = by_prop.get(prop)
            if attr is None:
                others.append((prop, str(raw)))
                continue
            values[attr] = raw if attr in ("auto_offset_reset", "isolation_level") else int(raw)
        explicit = frozenset(p for p in props if p in by_prop)
        return cls(**values, explicit=explicit, kafka_props=tuple(sorted(others)))  # type: ignore[arg-type]


def _broker_prop(attr: str) -> str:
    """``min_record_lock_duration_ms`` -> ``group.share.min.record.lock.duration.ms``."""
    if attr == "redelivery_backoff_ceiling_ms":
        return BACKOFF_CEILING_PROPERTY
    if attr == "auto_offset_reset":
        return "group.share.auto.offset.reset"
    if attr == "isolation_level":
        return "group.share.isolation.level"
    if attr.startswith("consumer_"):  # consumer_min_x_ms -> group.consumer.min.x.ms
        return "group.consumer." + attr.removeprefix("consumer_").replace("_", ".")
    return "group.share." + attr.replace("_", ".")


@dataclass(frozen=True, slots=True, kw_only=True)
class AutoOffsetReset:
    """Where a share-partition with no durable state starts: ``earliest``, ``latest`` or ``by_duration``.

    For ``by_duration`` the SPSO is the first offset whose timestamp is at or after now minus
    ``duration_ms`` (a ListOffsets by timestamp).
    """

    strategy: str
    duration_ms: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupConfig:
    """The effective configuration of one share group (overrides resolved against the broker)."""

    record_lock_duration_ms: int
    delivery_count_limit: int
    partition_max_record_locks: int
    auto_offset_reset: AutoOffsetReset
    isolation_level: str
    heartbeat_interval_ms: int
    session_timeout_ms: int
    dlq_topic_name: str
    dlq_copy_record: bool = False
    assignment_interval_ms: int = 1_000
    """The least time between two target assignments of the group (Kafka's KIP-1263)."""
    renew_acknowledge_enable: bool = True
    consumer_session_timeout_ms: int = 45_000
    consumer_heartbeat_interval_ms: int = 5_000
    ordering: str = "none"
    """``shareq.share.ordering``: ``none`` or ``key``."""
    key_lookahead: int = KEY_LOOKAHEAD_DEFAULT
    """``shareq.share.key.lookahead``: records a ``key`` acquisition may look past blocked ones."""
    retry: RetryConfig = field(default_factory=RetryConfig)
    """shareq's retry configs (redelivery backoff, window mode, durable counts)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigEntry:
    """One described config: its effective value, where it came from and whether it is the default."""

    name: str
    value: str
    source: ConfigSource
    is_default: bool


_DURATION = re.compile(
    r"P(?:(?P<d>[0-9]+)D)?(?:T(?=[0-9])(?:(?P<h>[0-9]+)H)?(?:(?P<m>[0-9]+)M)?"
    r"(?:(?P<s>[0-9]+)(?:[.,](?P<f>[0-9]{1,9}))?S)?)?",
    re.IGNORECASE,
)
_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")


def parse_iso_duration_ms(text: str) -> int:
    """Parse a non-negative ISO-8601 duration (``PT1H``, ``P1DT30M``, ``PT0.5S``) to milliseconds."""
    match = _DURATION.fullmatch(text)
    if match is None or text.upper() in ("P", "PT"):
        raise ValueError(f"not an ISO-8601 duration: {text!r}")
    d, h, m, s = (int(match.group(g) or 0) for g in "dhms")
    frac = (match.group("f") or "").ljust(3, "0")[:3]
    return (((d * 24 + h) * 60 + m) * 60 + s) * 1000 + int(frac)


def parse_auto_offset_reset(text: str) -> AutoOffsetReset:
    """Parse ``earliest``, ``latest`` or ``by_duration:<ISO-8601 duration>``."""
    lowered = text.strip().lower()
    if lowered in ("earliest", "latest"):
        return AutoOffsetReset(strategy=lowered)
    if lowered.startswith("by_duration:"):
        return AutoOffsetReset(
            strategy="by_duration", duration_ms=parse_iso_duration_ms(text.strip()[len("by_duration:") :])
        )
    raise ValueError(f"expected earliest, latest or by_duration:<ISO-8601 duration>, got {text!r}")


def _invalid(message: str) -> GroupRequestError:
    return GroupRequestError(GroupErrorCode.INVALID_CONFIG, message)


def _bounded_int(name: str, raw: str, low: int, high: int) -> int:
    value = int(raw.strip()) if re.fullmatch(r"[+-]?[0-9]+", raw.strip()) else None
    if value is None or not -(2**31) <= value < 2**31:  # Kafka's words for a group config's INT
        raise _invalid(f"Invalid value {raw} for configuration {name}: Not a number of type INT")
    if not low <= value <= high:
        raise _invalid(f"{name} must be in the range {low} to {high} inclusive.")
    return value


def _boolean(name: str, raw: str) -> bool:
    value = raw.strip().lower()
    if value not in ("true", "false"):
        raise _invalid(
            f"Invalid value {raw} for configuration {name}: Expected value to be either true or false"
        )
    return value == "true"


# Broker bounds of the group configs shareq only stores, as Kafka's GroupConfig checks them.
_STORED_RANGES = {
    "streams.session.timeout.ms": "group.streams.{}.session.timeout.ms",
    "streams.heartbeat.interval.ms": "group.streams.{}.heartbeat.interval.ms",
    "streams.assignment.interval.ms": "group.streams.{}.assignment.interval.ms",
    "consumer.assignment.interval.ms": "group.consumer.{}.assignment.interval.ms",
}


def _check_stored_bounds(name: str, value: object, broker: ShareBrokerConfig) -> None:
    bounds = _STORED_RANGES.get(name)
    if bounds is not None and isinstance(value, int):
        low, high = (int(broker.kafka_value(bounds.format(end))) for end in ("min", "max"))
        if not low <= value <= high:
            raise _invalid(f"{name} must be in the range {low} to {high} inclusive.")
    elif name == "streams.num.standby.replicas" and isinstance(value, int):
        most = int(broker.kafka_value("group.streams.max.standby.replicas"))
        if value > most:
            raise _invalid(f"{name} must be less than or equal to {most}")
    elif name == "streams.assignor.name":
        registered = [
            a.strip() for a in broker.kafka_value("group.streams.assignors").split(",") if a.strip()
        ]
        if value not in registered:
            raise _invalid(
                f"{name} '{value}' is not a registered task assignor. "
                f"Registered assignors are: [{', '.join(registered)}]."
            )


def resolve_group_config(overrides: Mapping[str, str], broker: ShareBrokerConfig) -> ShareGroupConfig:
    """Validate ``overrides`` against ``broker``'s bounds and resolve the effective config.

    Raises ``GroupRequestError(INVALID_CONFIG)`` naming the offending key.
    """
    unknown = sorted(set(overrides) - set(GROUP_CONFIG_NAMES))
    if unknown:
        raise _invalid(f"Unknown group config name: {unknown[0]}")
    for name in STORED_ONLY_GROUP_CONFIGS:
        if name in overrides:
            try:
                value = parse_kafka_value(GROUP_CONFIGS[name], overrides[name])
            except ConfigError as error:
                raise _invalid(str(error)) from None
            _check_stored_bounds(name, value, broker)
    b = broker

    def num(name: str, default: int, low: int, high: int) -> int:
        raw = overrides.get(name)
        return default if raw is None else _bounded_int(name, raw, low, high)

    lock = num(
        RECORD_LOCK_DURATION_MS,
        b.record_lock_duration_ms,
        b.min_record_lock_duration_ms,
        b.max_record_lock_duration_ms,
    )
    count = num(
        DELIVERY_COUNT_LIMIT, b.delivery_count_limit, b.min_delivery_count_limit, b.max_delivery_count_limit
    )
    locks = num(
        PARTITION_MAX_RECORD_LOCKS,
        b.partition_max_record_locks,
        b.min_partition_max_record_locks,
        b.max_partition_max_record_locks,
    )
    heartbeat = num(
        HEARTBEAT_INTERVAL_MS,
        b.heartbeat_interval_ms,
        b.min_heartbeat_interval_ms,
        b.max_heartbeat_interval_ms,
    )
    session = num(
        SESSION_TIMEOUT_MS, b.session_timeout_ms, b.min_session_timeout_ms, b.max_session_timeout_ms
    )
    if heartbeat >= session:
        raise _invalid(
            f"{HEARTBEAT_INTERVAL_MS} ({heartbeat}) must be less than {SESSION_TIMEOUT_MS} ({session})"
        )
    try:
        reset = parse_auto_offset_reset(overrides.get(AUTO_OFFSET_RESET, b.auto_offset_reset))
    except ValueError as exc:
        raise _invalid(f"{AUTO_OFFSET_RESET}: {exc}") from None
    isolation = overrides.get(ISOLATION_LEVEL, b.isolation_level).strip().lower()
    if isolation not in ISOLATION_LEVELS:
        raise _invalid(f"{ISOLATION_LEVEL} must be one of {', '.join(ISOLATION_LEVELS)}, got {isolation!r}")
    dlq = overrides.get(DLQ_TOPIC_NAME, "").strip()
    if dlq.startswith("__"):  # Kafka's GroupConfig.validateValues, word for word
        raise _invalid(f"{DLQ_TOPIC_NAME}: DLQ topic name must not start with '__'")
    if dlq and (_TOPIC_NAME.fullmatch(dlq) is None or dlq in (".", "..")):
        raise _invalid(f"{DLQ_TOPIC_NAME} is not a legal topic name: {dlq!r}")
    copy_record = _boolean(DLQ_COPY_RECORD_ENABLE, overrides.get(DLQ_COPY_RECORD_ENABLE, "false"))
    renew = _boolean(RENEW_ACKNOWLEDGE_ENABLE, overrides.get(RENEW_ACKNOWLEDGE_ENABLE, "true"))
    interval = num(
        ASSIGNMENT_INTERVAL_MS,
        b.assignment_interval_ms,
        b.min_assignment_interval_ms,
        b.max_assignment_interval_ms,
    )
    consumer_session = num(
        CONSUMER_SESSION_TIMEOUT_MS,
        b.consumer_session_timeout_ms,
        b.consumer_min_session_timeout_ms,
        b.consumer_max_session_timeout_ms,
    )
    consumer_heartbeat = num(
        CONSUMER_HEARTBEAT_INTERVAL_MS,
        b.consumer_heartbeat_interval_ms,
        b.consumer_min_heartbeat_interval_ms,
        b.consumer_max_heartbeat_interval_ms,
    )
    if consumer_heartbeat >= consumer_session:
        raise _invalid(
            f"{CONSUMER_HEARTBEAT_INTERVAL_MS} ({consumer_heartbeat}) must be less than "
            f"{CONSUMER_SESSION_TIMEOUT_MS} ({consumer_session})"
        )
    ordering = overrides.get(SHARE_ORDERING, "none").strip().lower()
    if ordering not in ORDERING_MODES:
        raise _invalid(f"{SHARE_ORDERING} must be one of {', '.join(ORDERING_MODES)}, got {ordering!r}")
    lookahead = num(SHARE_KEY_LOOKAHEAD, KEY_LOOKAHEAD_DEFAULT, *KEY_LOOKAHEAD_BOUNDS)
    retry = resolve_retry_config(overrides, b.redelivery_backoff_ceiling_ms)
    return ShareGroupConfig(
        record_lock_duration_ms=lock,
        delivery_count_limit=count,
        partition_max_record_locks=locks,
        auto_offset_reset=reset,
        isolation_level=isolation,
        heartbeat_interval_ms=heartbeat,
        session_timeout_ms=session,
        dlq_topic_name=dlq,
        dlq_copy_record=copy_record,
        assignment_interval_ms=interval,
        renew_acknowledge_enable=renew,
        consumer_session_timeout_ms=consumer_session,
        consumer_heartbeat_interval_ms=consumer_heartbeat,
        ordering=ordering,
        key_lookahead=lookahead,
        retry=retry,
    )


_BROKER_DEFAULT_ATTR = {
    CONSUMER_SESSION_TIMEOUT_MS: "consumer_session_timeout_ms",
    CONSUMER_HEARTBEAT_INTERVAL_MS: "consumer_heartbeat_interval_ms",
    RECORD_LOCK_DURATION_MS: "record_lock_duration_ms",
    DELIVERY_COUNT_LIMIT: "delivery_count_limit",
    PARTITION_MAX_RECORD_LOCKS: "partition_max_record_locks",
    AUTO_OFFSET_RESET: "auto_offset_reset",
    ISOLATION_LEVEL: "isolation_level",
    HEARTBEAT_INTERVAL_MS: "heartbeat_interval_ms",
    SESSION_TIMEOUT_MS: "session_timeout_ms",
    ASSIGNMENT_INTERVAL_MS: "assignment_interval_ms",
}


_GROUP_ONLY_DEFAULTS = {
    DLQ_TOPIC_NAME: "",
    DLQ_COPY_RECORD_ENABLE: "false",
    RENEW_ACKNOWLEDGE_ENABLE: "true",
    SHARE_ORDERING: "none",
    SHARE_KEY_LOOKAHEAD: str(KEY_LOOKAHEAD_DEFAULT),
    **RETRY_CONFIG_DEFAULTS,
}


def describe_group_config(overrides: Mapping[str, str], broker: ShareBrokerConfig) -> tuple[ConfigEntry, ...]:
    """Every group config with its effective value and source, in ``GROUP_CONFIG_NAMES`` order."""
    entries = []
    for name in GROUP_CONFIG_NAMES:
        if name in overrides:
            entries.append(
                ConfigEntry(
                    name=name,
                    value=overrides[name],
                    source=ConfigSource.DYNAMIC_GROUP_CONFIG,
                    is_default=False,
                )
            )
            continue
        attr = _BROKER_DEFAULT_ATTR.get(name)
        if attr is None:  # the dead-letter and renew configs have no broker-level default
            entries.append(
                ConfigEntry(
                    name=name,
                    value=_GROUP_ONLY_DEFAULTS.get(name, ""),
                    source=ConfigSource.DEFAULT_CONFIG,
                    is_default=True,
                )
            )
            continue
        from_broker = _broker_prop(attr) in broker.explicit
        entries.append(
            ConfigEntry(
                name=name,
                value=str(getattr(broker, attr)),
                source=ConfigSource.STATIC_BROKER_CONFIG if from_broker else ConfigSource.DEFAULT_CONFIG,
                is_default=not from_broker,
            )
        )
    return tuple(entries)
