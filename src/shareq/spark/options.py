"""Options of the ``shareq`` data source, named like Spark's Kafka source where one exists.

Spark hands options over as a case-insensitive mapping of strings; they are parsed once into frozen
dataclasses so that readers and writers (which are pickled to executors) carry plain values.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

KAFKA_PREFIX = "kafka."
SHARE_PREFIX = "share."
DEFAULT_ACK_TOPIC = "shareq-spark-acks"


class OptionError(ValueError):
    """A data-source option is missing or malformed (a user error, reported at planning time)."""


def _get(options: Mapping[str, str], name: str) -> str | None:
    # Spark passes a case-insensitive dict; plain dicts in tests are matched case-insensitively too.
    lowered = name.lower()
    for key, value in options.items():
        if key.lower() == lowered:
            return value
    return None


def _int(options: Mapping[str, str], name: str, default: int | None) -> int | None:
    raw = _get(options, name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise OptionError(f"option {name!r} must be an integer, got {raw!r}") from exc
    if value <= 0:
        raise OptionError(f"option {name!r} must be positive, got {value}")
    return value


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = _get(options, name)
    if raw is None:
        return default
    if raw.strip().lower() in ("true", "1", "yes"):
        return True
    if raw.strip().lower() in ("false", "0", "no"):
        return False
    raise OptionError(f"option {name!r} must be true or false, got {raw!r}")


def _require(options: Mapping[str, str], name: str) -> str:
    value = _get(options, name)
    if not value:
        raise OptionError(f"option {name!r} is required")
    return value


def kafka_params(options: Mapping[str, str]) -> dict[str, str]:
    """The ``kafka.*`` passthrough options with the prefix removed (client configuration)."""
    return {
        key[len(KAFKA_PREFIX) :].lower(): value
        for key, value in options.items()
        if key.lower().startswith(KAFKA_PREFIX)
    }


def group_configs(options: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """``share.*`` options are share-group configs (``share.auto.offset.reset``,
    ``share.record.lock.duration.ms``, ...), set on the group when the query starts;
    ``startingOffsets`` (earliest/latest) is shorthand for ``share.auto.offset.reset``."""
    out = {key.lower(): value for key, value in options.items() if key.lower().startswith(SHARE_PREFIX)}
    starting = _get(options, "startingOffsets")
    if starting is not None:
        if starting.strip().lower() not in ("earliest", "latest"):
            raise OptionError("the share source's startingOffsets is 'earliest' or 'latest'")
        out.setdefault("share.auto.offset.reset", starting.strip().lower())
    return tuple(sorted(out.items()))


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectOptions:
    """Where the cluster is and how to talk to it; shared by every reader and writer."""

    bootstrap: str
    client_params: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> ConnectOptions:
        params = kafka_params(options)
        bootstrap = params.pop("bootstrap.servers", None)
        if not bootstrap:
            raise OptionError("option 'kafka.bootstrap.servers' is required")
        return cls(bootstrap=bootstrap, client_params=tuple(sorted(params.items())))


def _topics(options: Mapping[str, str]) -> tuple[str, ...]:
    raw = _require(options, "subscribe")
    topics = tuple(dict.fromkeys(t.strip() for t in raw.split(",") if t.strip()))
    if not topics:
        raise OptionError("option 'subscribe' names no topic")
    return topics


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareSourceOptions:
    """The streaming share-group source."""

    connect: ConnectOptions
    topics: tuple[str, ...]
    group_id: str
    include_headers: bool = False
    max_records_per_trigger: int | None = None
    min_partitions: int | None = None
    max_records_per_partition: int = 100_000
    poll_timeout_ms: int = 500
    acquire_time_budget_ms: int = 2_000
    ack_topic: str = DEFAULT_ACK_TOPIC
    renew_locks: bool = True
    trigger_interval_ms: int = 0
    group_configs: tuple[tuple[str, str], ...] = ()
    exactly_once: bool = False

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> ShareSourceOptions:
        group = _get(options, "group.id") or _get(options, "kafka.group.id")
        if not group:
            raise OptionError("option 'group.id' (the share group) is required")
        return cls(
            connect=ConnectOptions.parse(options),
            topics=_topics(options),
            group_id=group,
            include_headers=_bool(options, "includeHeaders", False),
            max_records_per_trigger=_int(options, "maxRecordsPerTrigger", None),
            min_partitions=_int(options, "minPartitions", None),
            max_records_per_partition=_int(options, "maxRecordsPerPartition", 100_000) or 100_000,
            poll_timeout_ms=_int(options, "pollTimeoutMs", 500) or 500,
            acquire_time_budget_ms=_int(options, "acquireTimeBudgetMs", 2_000) or 2_000,
            ack_topic=_get(options, "ackTopic") or DEFAULT_ACK_TOPIC,
            renew_locks=_bool(options, "renewLocks", True),
            trigger_interval_ms=_int(options, "triggerIntervalMs", None) or 0,
            group_configs=group_configs(options),
            exactly_once=_bool(options, "exactlyOnce", False),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchSourceOptions:
    """The batch source: offset ranges of topics, no side effects."""

    connect: ConnectOptions
    topics: tuple[str, ...]
    starting_offsets: str = "earliest"
    ending_offsets: str = "latest"
    include_headers: bool = False
    min_partitions: int | None = None
    max_records_per_partition: int = 100_000

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> BatchSourceOptions:
        return cls(
            connect=ConnectOptions.parse(options),
            topics=_topics(options),
            starting_offsets=_get(options, "startingOffsets") or "earliest",
            ending_offsets=_get(options, "endingOffsets") or "latest",
            include_headers=_bool(options, "includeHeaders", False),
            min_partitions=_int(options, "minPartitions", None),
            max_records_per_partition=_int(options, "maxRecordsPerPartition", 100_000) or 100_000,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class SinkOptions:
    """The topic sink: a default topic (rows may carry their own ``topic``)."""

    connect: ConnectOptions
    topic: str | None = None
    exactly_once: bool = False
    checkpoint_location: str | None = None
    ack_topic: str = DEFAULT_ACK_TOPIC

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SinkOptions:
        return cls(
            connect=ConnectOptions.parse(options),
            topic=_get(options, "topic"),
            exactly_once=_bool(options, "exactlyOnce", False),
            checkpoint_location=_get(options, "checkpointLocation"),
            ack_topic=_get(options, "ackTopic") or DEFAULT_ACK_TOPIC,
        )
