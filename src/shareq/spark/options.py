"""Options of the ``shareq`` data source, named like Spark's Kafka source where one exists.

Spark hands options over as a case-insensitive mapping of strings; they are parsed once into frozen
dataclasses so that readers and writers (which are pickled to executors) carry plain values.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

KAFKA_PREFIX = "kafka."
SHARE_PREFIX = "share."
SHAREQ_PREFIX = "shareq."
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


# ``kafka.*`` settings the client honours, by role. Anything else is refused by name rather than
# dropped: a setting that changes nothing would be a silent difference from Spark's connector.
CLIENT_SETTINGS = frozenset(
    {
        "bootstrap.servers",
        "client.id",
        "request.timeout.ms",
        "security.protocol",
        "sasl.mechanism",
        "sasl.mechanisms",
        "sasl.username",
        "sasl.password",
        "sasl.jaas.config",
        "ssl.ca.location",
        "ssl.certificate.location",
        "ssl.key.location",
        "ssl.key.password",
        "ssl.endpoint.identification.algorithm",
    }
)
SHARE_SETTINGS = frozenset({"group.id"})
SINK_SETTINGS = frozenset({"acks", "linger.ms", "batch.size", "retries"})

# Settings Spark's connector refuses too, with its reasons.
SPARK_REFUSED = {
    "auto.offset.reset": "set the source option 'startingOffsets' instead",
    "key.deserializer": "keys are always read as bytes; cast the key column instead",
    "value.deserializer": "values are always read as bytes; cast the value column instead",
    "key.serializer": "keys are always written as bytes; cast the key column to binary or string",
    "value.serializer": "values are always written as bytes; cast the value column to binary or string",
    "enable.auto.commit": "the source commits nothing to a consumer group",
    "interceptor.classes": "the client has no interceptors",
}

# Source options of Spark's Kafka connector that the shareq sources do not take, and why.
SPARK_UNSUPPORTED = {
    "maxoffsetspertrigger": "the share source caps micro-batches by records: use 'maxRecordsPerTrigger'",
    "minoffsetspertrigger": "the share source has no minimum micro-batch size",
    "maxtriggerdelay": "the share source has no minimum micro-batch size",
    "groupidprefix": "name the share group with 'group.id'",
    "kafkaconsumer.polltimeoutms": "use 'pollTimeoutMs'",
    "fetchoffset.numretries": "offsets are read with the client's own retries",
    "fetchoffset.retryintervalms": "offsets are read with the client's own retries",
}

BATCH_READ = "the batch source (spark.read)"
SHARE_READ = "the share-group source (spark.readStream)"
SINK = "the sink (write/writeStream)"


def _options(*names: str) -> dict[str, str]:
    """Option names by their lowercase form (Spark lowercases option keys), with their spelling."""
    return {name.lower(): name for name in names}


BATCH_OPTIONS = _options(
    "subscribe",
    "assign",
    "subscribePattern",
    "startingOffsets",
    "endingOffsets",
    "startingTimestamp",
    "endingTimestamp",
    "startingOffsetsByTimestamp",
    "endingOffsetsByTimestamp",
    "startingOffsetsByTimestampStrategy",
    "includeHeaders",
    "minPartitions",
    "maxRecordsPerPartition",
    "failOnDataLoss",
)
SHARE_OPTIONS = _options(
    "subscribe",
    "group.id",
    "startingOffsets",
    "includeHeaders",
    "maxRecordsPerTrigger",
    "minPartitions",
    "maxRecordsPerPartition",
    "failOnDataLoss",
    "pollTimeoutMs",
    "acquireTimeBudgetMs",
    "ackTopic",
    "renewLocks",
    "triggerIntervalMs",
    "exactlyOnce",
    "failedRows",
)
# A streaming writer is handed the query's own options (checkpointLocation, path) too.
SINK_OPTIONS = _options("topic", "checkpointLocation", "path", "exactlyOnce", "ackTopic")

_WHY_NOT = {
    SHARE_READ: {
        "assign": "a share group subscribes to topics; the broker assigns the partitions",
        "subscribepattern": "a share group subscribes to named topics: use 'subscribe'",
        "endingoffsets": "a streaming query has no end (use trigger(availableNow=True) to stop when drained)",
        "endingtimestamp": "a streaming query has no end",
        "endingoffsetsbytimestamp": "a streaming query has no end",
        "startingtimestamp": "a share group starts at 'earliest' or 'latest' (startingOffsets or "
        "share.auto.offset.reset)",
        "startingoffsetsbytimestamp": "a share group starts at 'earliest' or 'latest' (startingOffsets or "
        "share.auto.offset.reset)",
        "startingoffsetsbytimestampstrategy": "the share source takes no starting timestamps",
    },
    BATCH_READ: {
        "group.id": "the batch source reads by offsets and uses no group",
        "maxrecordspertrigger": "a batch query has no triggers",
    },
}


def check_options(options: Mapping[str, str], role: str) -> None:
    """Refuse, by name, every option ``role`` would not honour (Spark's connector ignores unknown
    options; here a misspelt or unsupported option is an error rather than a silent difference)."""
    if role == SINK:
        known: Mapping[str, str] = SINK_OPTIONS
        settings = CLIENT_SETTINGS | SINK_SETTINGS
    elif role == SHARE_READ:
        known = SHARE_OPTIONS
        settings = CLIENT_SETTINGS | SHARE_SETTINGS
    else:
        known = BATCH_OPTIONS
        settings = CLIENT_SETTINGS
    why_not = _WHY_NOT.get(role, {})
    for key in options:
        lowered = key.lower()
        if lowered.startswith(KAFKA_PREFIX):
            setting = lowered[len(KAFKA_PREFIX) :]
            if setting in SPARK_REFUSED:
                raise OptionError(f"Kafka option {setting!r} is not supported: {SPARK_REFUSED[setting]}")
            if setting not in settings:
                raise OptionError(
                    f"option {key!r} is not supported by {role}; the kafka.* settings it honours are: "
                    + ", ".join(sorted(settings))
                )
            continue
        if role == SHARE_READ and lowered.startswith((SHARE_PREFIX, SHAREQ_PREFIX)):
            continue  # share-group configs, checked by the broker when the query sets them
        if lowered in known:
            continue
        reason = why_not.get(lowered) or SPARK_UNSUPPORTED.get(lowered)
        if reason is not None:
            raise OptionError(f"option {key!r} is not supported by {role}: {reason}")
        raise OptionError(f"unknown option {key!r} for {role}; it takes: " + ", ".join(_spelled(known)))


def _spelled(names: Mapping[str, str]) -> list[str]:
    return [*sorted(names.values()), "kafka.*"]


def group_configs(options: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """``share.*`` options are share-group configs (``share.auto.offset.reset``,
    ``share.record.lock.duration.ms``, ...), set on the group when the query starts, and so are
    shareq's own (``shareq.redelivery.backoff.ms``, ...); ``startingOffsets`` (earliest/latest) is
    shorthand for ``share.auto.offset.reset``."""
    out = {
        key.lower(): value
        for key, value in options.items()
        if key.lower().startswith((SHARE_PREFIX, SHAREQ_PREFIX))
    }
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
        params.pop("group.id", None)  # the share group, not a client setting
        return cls(bootstrap=bootstrap, client_params=tuple(sorted(params.items())))


@dataclass(frozen=True, slots=True, kw_only=True)
class Subscription:
    """What a batch query reads: Spark's ``subscribe``, ``assign`` or ``subscribePattern`` (one of)."""

    topics: tuple[str, ...] = ()
    assign: tuple[tuple[str, int], ...] = ()
    pattern: str | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str], *, share: bool) -> Subscription:
        given = [name for name in ("subscribe", "assign", "subscribePattern") if _get(options, name)]
        if len(given) != 1:
            raise OptionError(
                "exactly one of the options 'subscribe', 'assign' and 'subscribePattern' is required"
                + (f" (got {', '.join(given)})" if given else "")
            )
        if given[0] == "subscribe":
            return cls(topics=_topics(options))
        if share:
            raise OptionError(f"option {given[0]!r} is not supported by {SHARE_READ}: use 'subscribe'")
        if given[0] == "subscribePattern":
            raw = _require(options, "subscribePattern")
            try:
                re.compile(raw)
            except re.error as exc:
                raise OptionError(f"option 'subscribePattern' is not a regular expression: {exc}") from exc
            return cls(pattern=raw)
        raw = _require(options, "assign")
        try:
            data = json.loads(raw)
            pairs = sorted({(str(t), int(p)) for t, parts in dict(data).items() for p in parts})
        except (ValueError, TypeError, AttributeError) as exc:
            raise OptionError(
                f'option \'assign\' must be JSON like {{"topicA": [0, 1], "topicB": [2]}}, got {raw!r}'
            ) from exc
        if not pairs:
            raise OptionError("option 'assign' names no partition")
        return cls(assign=tuple(pairs))


def _topics(options: Mapping[str, str]) -> tuple[str, ...]:
    raw = _require(options, "subscribe")
    topics = tuple(dict.fromkeys(t.strip() for t in raw.split(",") if t.strip()))
    if not topics:
        raise OptionError("option 'subscribe' names no topic")
    return topics


def _timestamp(options: Mapping[str, str], name: str) -> int | None:
    raw = _get(options, name)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError as exc:
        raise OptionError(f"option {name!r} must be a timestamp in milliseconds, got {raw!r}") from exc
    if value < 0:
        raise OptionError(f"option {name!r} must not be negative, got {value}")
    return value


def _timestamps_json(options: Mapping[str, str], name: str) -> tuple[tuple[str, int, int], ...] | None:
    raw = _get(options, name)
    if raw is None:
        return None
    try:
        data = json.loads(raw)
        out = tuple(
            sorted(
                (str(t), int(p), int(ts)) for t, parts in dict(data).items() for p, ts in dict(parts).items()
            )
        )
    except (ValueError, TypeError, AttributeError) as exc:
        raise OptionError(
            f'option {name!r} must be JSON like {{"topicA": {{"0": 1700000000000}}}}, got {raw!r}'
        ) from exc
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareSourceOptions:
    """The streaming share-group source."""

    connect: ConnectOptions
    topics: tuple[str, ...]
    group_id: str
    include_headers: bool = False
    max_records_per_trigger: int | None = None
    min_partitions: int | None = None
    max_records_per_partition: int | None = None  # as in Spark: no cap unless set
    fail_on_data_loss: bool = True
    poll_timeout_ms: int = 500
    acquire_time_budget_ms: int = 2_000
    ack_topic: str = DEFAULT_ACK_TOPIC
    renew_locks: bool = True
    trigger_interval_ms: int = 0
    group_configs: tuple[tuple[str, str], ...] = ()
    exactly_once: bool = False
    release_failed: bool = False
    """``failedRows=release``: rows marked failed with REJECT are RELEASEd instead, so they come back
    after the group's redelivery backoff (``shareq.redelivery.backoff.ms``), up to its delivery
    limit, rather than being archived at once."""

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> ShareSourceOptions:
        check_options(options, SHARE_READ)
        group = _get(options, "group.id") or _get(options, "kafka.group.id")
        if not group:
            raise OptionError("option 'group.id' (the share group) is required")
        failed = (_get(options, "failedRows") or "reject").strip().lower()
        if failed not in ("reject", "release"):
            raise OptionError(f"option 'failedRows' is 'reject' or 'release', got {failed!r}")
        exactly_once = _bool(options, "exactlyOnce", False)
        if failed == "release" and exactly_once:
            raise OptionError(
                "option 'failedRows=release' cannot go with 'exactlyOnce': a transaction can accept or "
                "reject a record, not release it"
            )
        return cls(
            connect=ConnectOptions.parse(options),
            topics=Subscription.parse(options, share=True).topics,
            group_id=group,
            include_headers=_bool(options, "includeHeaders", False),
            max_records_per_trigger=_int(options, "maxRecordsPerTrigger", None),
            min_partitions=_int(options, "minPartitions", None),
            max_records_per_partition=_int(options, "maxRecordsPerPartition", None),
            fail_on_data_loss=_bool(options, "failOnDataLoss", True),
            poll_timeout_ms=_int(options, "pollTimeoutMs", 500) or 500,
            acquire_time_budget_ms=_int(options, "acquireTimeBudgetMs", 2_000) or 2_000,
            ack_topic=_get(options, "ackTopic") or DEFAULT_ACK_TOPIC,
            renew_locks=_bool(options, "renewLocks", True),
            trigger_interval_ms=_int(options, "triggerIntervalMs", None) or 0,
            group_configs=group_configs(options),
            exactly_once=exactly_once,
            release_failed=failed == "release",
        )


STRATEGIES = ("error", "latest")


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchSourceOptions:
    """The batch source: offset ranges of topics, no side effects.

    Where a query's start or end is given several ways, Spark's precedence holds: a timestamp for
    every partition beats timestamps per partition, which beat offsets."""

    connect: ConnectOptions
    subscription: Subscription
    starting_offsets: str = "earliest"
    ending_offsets: str = "latest"
    starting_timestamp: int | None = None
    ending_timestamp: int | None = None
    starting_by_timestamp: tuple[tuple[str, int, int], ...] | None = None
    ending_by_timestamp: tuple[tuple[str, int, int], ...] | None = None
    starting_timestamp_strategy: str = "error"
    include_headers: bool = False
    min_partitions: int | None = None
    max_records_per_partition: int | None = None  # as in Spark: no cap unless set
    fail_on_data_loss: bool = True

    @property
    def topics(self) -> tuple[str, ...]:
        return self.subscription.topics

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> BatchSourceOptions:
        check_options(options, BATCH_READ)
        starting = (_get(options, "startingOffsets") or "earliest").strip()
        ending = (_get(options, "endingOffsets") or "latest").strip()
        # Spark's checks: a batch query neither starts at the log end nor ends at its start.
        if starting.lower() == "latest":
            raise OptionError("option 'startingOffsets' can't be 'latest' for a batch query")
        if ending.lower() == "earliest":
            raise OptionError("option 'endingOffsets' can't be 'earliest' for a batch query")
        strategy = (_get(options, "startingOffsetsByTimestampStrategy") or "error").strip().lower()
        if strategy not in STRATEGIES:
            raise OptionError(
                f"option 'startingOffsetsByTimestampStrategy' is 'error' or 'latest', got {strategy!r}"
            )
        return cls(
            connect=ConnectOptions.parse(options),
            subscription=Subscription.parse(options, share=False),
            starting_offsets=starting,
            ending_offsets=ending,
            starting_timestamp=_timestamp(options, "startingTimestamp"),
            ending_timestamp=_timestamp(options, "endingTimestamp"),
            starting_by_timestamp=_timestamps_json(options, "startingOffsetsByTimestamp"),
            ending_by_timestamp=_timestamps_json(options, "endingOffsetsByTimestamp"),
            starting_timestamp_strategy=strategy,
            include_headers=_bool(options, "includeHeaders", False),
            min_partitions=_int(options, "minPartitions", None),
            max_records_per_partition=_int(options, "maxRecordsPerPartition", None),
            fail_on_data_loss=_bool(options, "failOnDataLoss", True),
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
        check_options(options, SINK)
        return cls(
            connect=ConnectOptions.parse(options),
            topic=_get(options, "topic"),
            exactly_once=_bool(options, "exactlyOnce", False),
            checkpoint_location=_get(options, "checkpointLocation"),
            ack_topic=_get(options, "ackTopic") or DEFAULT_ACK_TOPIC,
        )
