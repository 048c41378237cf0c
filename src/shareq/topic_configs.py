"""Topic-level configs as Kafka 4.4 has them: names, types, defaults, the broker config each falls
back to, and validation with Kafka's messages (no I/O).

The table holds every topic config a Kafka 4.4 topic describes, one row each, in name order; a
feature that adds a topic config adds one row. ``honoured`` says whether a single shareq broker acts
on the value; the others (replication throttles, tiered storage, preallocation, ...) are accepted,
stored and described, and change nothing on one node (see docs/ARCHITECTURE.md, "Topic configs").

A config falls back to a broker config (its *synonym*, Kafka's ``ServerTopicConfigSynonyms``) when
the topic does not set it; :func:`broker_synonyms` gives those broker configs to the settings table
(:mod:`shareq.config`), so ``--config`` and IncrementalAlterConfigs on the broker take them under
Kafka's names.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from shareq.config import BrokerConfig

DLQ_GROUP_ENABLE = "errors.deadletterqueue.group.enable"
"""A topic opts in to receive share groups' dead letters (KIP-1191)."""


class InvalidConfigError(ValueError):
    """An unknown topic config or a value it cannot take (the message is Kafka's)."""


class ConfigType(enum.IntEnum):
    """DescribeConfigs ``ConfigType`` ids (v3+)."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    LONG = 5
    DOUBLE = 6
    LIST = 7


LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1
_BOUNDS = {ConfigType.INT: (-(2**31), INT_MAX), ConfigType.LONG: (-(2**63), LONG_MAX)}

Check = Callable[[object], "str | None"]
"""Returns Kafka's reason a parsed value is invalid, or ``None``."""


def at_least(minimum: float) -> Check:
    def check(value: object) -> str | None:
        return None if value >= minimum else f"Value must be at least {_num(minimum)}"  # type: ignore[operator]

    return check


def between(minimum: float, maximum: float) -> Check:
    def check(value: object) -> str | None:
        if value < minimum:  # type: ignore[operator]
            return f"Value must be at least {_num(minimum)}"
        if value > maximum:  # type: ignore[operator]
            return f"Value must be no more than {_num(maximum)}"
        return None

    return check


def one_of(*choices: str) -> Check:
    def check(value: object) -> str | None:
        items = value if isinstance(value, list) else [value]
        if all(item in choices for item in items):
            return None
        return f"String must be one of: {', '.join(choices)}"

    return check


def _gzip_level(value: object) -> str | None:
    return None if value == -1 or 1 <= value <= 9 else "Value must be between 1 and 9 or equal to -1"  # type: ignore[operator]


def _throttled_replicas(name: str) -> Check:
    def check(value: object) -> str | None:
        items = value if isinstance(value, list) else [value]
        if items == ["*"] or all(_replica_pair(item) for item in items):
            return None
        return (
            f"{name} must be the literal '*' or a list of replicas in the following format: "
            "[partitionId]:[brokerId],[partitionId]:[brokerId],..."
        )

    return check


def _replica_pair(item: object) -> bool:
    parts = str(item).split(":")
    return len(parts) == 2 and all(p.strip().isdigit() for p in parts)


_JAVA_INTEGER = re.compile(r"[+-]?[0-9]+")
_JAVA_DOUBLE = re.compile(
    r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?"
    r"|0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?[0-9]+[fFdD]?)"
)


def java_double(text: str) -> float | None:
    """``text`` read as Java's ``Double.valueOf`` reads it (Kafka's DOUBLE configs), or ``None``:
    ``NaN``, ``Infinity``, a ``d``/``f`` suffix and hexadecimal floats are numbers, ``nan``,
    ``inf`` and ``1_0`` are not."""
    if not _JAVA_DOUBLE.fullmatch(text):
        return None
    body = text.rstrip("fFdD") if not text.lower().startswith(("0x", "+0x", "-0x")) else text
    if body.lower().lstrip("+-").startswith("0x"):
        sign = -1.0 if body.startswith("-") else 1.0
        return sign * float.fromhex(body.lstrip("+-").rstrip("fFdD"))
    return float(body.replace("Infinity", "inf").replace("NaN", "nan"))


def _num(number: float) -> str:
    return str(int(number)) if float(number).is_integer() else str(number)


@dataclass(frozen=True, slots=True)
class TopicSetting:
    name: str
    type: ConfigType
    default: str
    synonym: str | None = None  # the broker config it falls back to
    check: Check | None = None
    honoured: bool = True  # False: accepted, stored and described, inert on one broker

    @property
    def kind(self) -> str:
        return self.type.name.lower()


_T = ConfigType
_TABLE = (
    TopicSetting("cleanup.policy", _T.LIST, "delete", "log.cleanup.policy", one_of("compact", "delete")),
    TopicSetting("compression.gzip.level", _T.INT, "-1", "compression.gzip.level", _gzip_level),
    TopicSetting("compression.lz4.level", _T.INT, "9", "compression.lz4.level", between(1, 17)),
    TopicSetting(
        "compression.type",
        _T.STRING,
        "producer",
        "compression.type",
        one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
    ),
    TopicSetting("compression.zstd.level", _T.INT, "3", "compression.zstd.level", between(-131072, 22)),
    TopicSetting("delete.retention.ms", _T.LONG, "86400000", "log.cleaner.delete.retention.ms", at_least(0)),
    # Dead-letter queues (KIP-1191) give this one its meaning; until then it is stored only.
    TopicSetting("errors.deadletterqueue.group.enable", _T.BOOLEAN, "false", None, honoured=False),
    TopicSetting(
        "file.delete.delay.ms", _T.LONG, "60000", "log.segment.delete.delay.ms", at_least(0), honoured=False
    ),
    TopicSetting("flush.messages", _T.LONG, str(LONG_MAX), "log.flush.interval.messages", at_least(1)),
    TopicSetting("flush.ms", _T.LONG, str(LONG_MAX), None, at_least(0), honoured=False),
    TopicSetting(
        "follower.replication.throttled.replicas",
        _T.LIST,
        "",
        None,
        _throttled_replicas("follower.replication.throttled.replicas"),
        honoured=False,
    ),
    TopicSetting("index.interval.bytes", _T.INT, "4096", "log.index.interval.bytes", at_least(0)),
    TopicSetting(
        "leader.replication.throttled.replicas",
        _T.LIST,
        "",
        None,
        _throttled_replicas("leader.replication.throttled.replicas"),
        honoured=False,
    ),
    TopicSetting(
        "local.retention.bytes", _T.LONG, "-2", "log.local.retention.bytes", at_least(-2), honoured=False
    ),
    TopicSetting("local.retention.ms", _T.LONG, "-2", "log.local.retention.ms", at_least(-2), honoured=False),
    TopicSetting(
        "max.compaction.lag.ms", _T.LONG, str(LONG_MAX), "log.cleaner.max.compaction.lag.ms", at_least(1)
    ),
    TopicSetting(
        "max.decompressed.message.bytes",
        _T.INT,
        "2147483639",
        "max.decompressed.message.bytes",
        at_least(0),
        honoured=False,
    ),
    TopicSetting("max.message.bytes", _T.INT, "1048588", "message.max.bytes", at_least(0)),
    TopicSetting(
        "message.timestamp.after.max.ms",
        _T.LONG,
        "3600000",
        "log.message.timestamp.after.max.ms",
        at_least(0),
    ),
    TopicSetting(
        "message.timestamp.before.max.ms",
        _T.LONG,
        str(LONG_MAX),
        "log.message.timestamp.before.max.ms",
        at_least(0),
    ),
    TopicSetting(
        "message.timestamp.type",
        _T.STRING,
        "CreateTime",
        "log.message.timestamp.type",
        one_of("CreateTime", "LogAppendTime"),
    ),
    TopicSetting(
        "min.cleanable.dirty.ratio", _T.DOUBLE, "0.5", "log.cleaner.min.cleanable.ratio", between(0, 1)
    ),
    TopicSetting("min.compaction.lag.ms", _T.LONG, "0", "log.cleaner.min.compaction.lag.ms", at_least(0)),
    TopicSetting("min.insync.replicas", _T.INT, "1", "min.insync.replicas", at_least(1)),
    TopicSetting("preallocate", _T.BOOLEAN, "false", "log.preallocate", honoured=False),
    TopicSetting("remote.copy.lag.bytes", _T.LONG, "-1", "log.remote.copy.lag.bytes", honoured=False),
    TopicSetting("remote.copy.lag.ms", _T.LONG, "0", "log.remote.copy.lag.ms", honoured=False),
    TopicSetting("remote.log.copy.disable", _T.BOOLEAN, "false", None, honoured=False),
    TopicSetting("remote.log.delete.on.disable", _T.BOOLEAN, "false", None, honoured=False),
    TopicSetting("remote.storage.enable", _T.BOOLEAN, "false", None, honoured=False),
    TopicSetting("retention.bytes", _T.LONG, "-1", "log.retention.bytes", at_least(-1)),
    TopicSetting("retention.ms", _T.LONG, "604800000", "log.retention.ms", at_least(-1)),
    TopicSetting("segment.bytes", _T.INT, "1073741824", "log.segment.bytes", at_least(1024 * 1024)),
    TopicSetting(
        "segment.index.bytes", _T.INT, "10485760", "log.index.size.max.bytes", at_least(4), honoured=False
    ),
    TopicSetting("segment.jitter.ms", _T.LONG, "0", None, at_least(0), honoured=False),
    TopicSetting("segment.ms", _T.LONG, "604800000", "log.roll.ms", at_least(1)),
    TopicSetting(
        "unclean.leader.election.enable",
        _T.BOOLEAN,
        "false",
        "unclean.leader.election.enable",
        honoured=False,
    ),
)
TOPIC_SETTINGS: dict[str, TopicSetting] = {s.name: s for s in _TABLE}

_TIERED_STORAGE_OFF = (
    "Tiered Storage functionality is disabled in the broker. "
    "Topic cannot be configured with remote log storage."
)


def parse_value(setting: TopicSetting, text: str) -> object:
    """The typed value of ``text``; raises :class:`InvalidConfigError` with Kafka's message."""
    name, kind = setting.name, setting.type
    stripped = text.strip()
    value: object
    if kind in (ConfigType.INT, ConfigType.LONG):
        value = int(stripped) if _JAVA_INTEGER.fullmatch(stripped) else None
        low, high = _BOUNDS[kind]
        if value is None or not low <= value <= high:
            raise InvalidConfigError(
                f"Invalid value {text} for configuration {name}: Not a number of type {kind.name}"
            )
    elif kind is ConfigType.DOUBLE:
        value = java_double(stripped)
        if value is None:
            raise InvalidConfigError(
                f"Invalid value {text} for configuration {name}: Not a number of type DOUBLE"
            )
    elif kind is ConfigType.BOOLEAN:
        if stripped.lower() not in ("true", "false"):
            raise InvalidConfigError(
                f"Invalid value {text} for configuration {name}: Expected value to be either true or false"
            )
        value = stripped.lower() == "true"
    elif kind is ConfigType.LIST:
        value = [item.strip() for item in stripped.split(",")] if stripped else []
        if "" in value:
            raise InvalidConfigError(f"Configuration '{name}' values must not be empty.")
    else:
        value = stripped
    if setting.check is not None:
        reason = setting.check(value)
        if reason is not None:
            shown = _shown(value, setting)
            raise InvalidConfigError(f"Invalid value {shown} for configuration {name}: {reason}")
    return value


def _shown(value: object, setting: TopicSetting) -> str:
    """The value as Kafka's message prints it: a list validator names the first bad item, the
    throttled-replica validator the whole list."""
    if isinstance(value, list):
        if setting.name.endswith("throttled.replicas"):
            return "[" + ", ".join(value) + "]"
        bad = [item for item in value if setting.check is not None and setting.check(item) is not None]
        return str(bad[0] if bad else value)
    return _text(value)


def validate_topic_configs(configs: Mapping[str, str | None]) -> dict[str, str]:
    """Check names and values; returns the overrides as strings (``None`` values are dropped)."""
    result: dict[str, str] = {}
    for name, value in configs.items():
        setting = TOPIC_SETTINGS.get(name)
        if setting is None:
            raise InvalidConfigError(f"Unknown topic config name: {name}")
        if value is None:
            continue
        parsed = parse_value(setting, value)
        if name == "remote.storage.enable" and parsed is True:
            raise InvalidConfigError(_TIERED_STORAGE_OFF)
        result[name] = value
    return result


def effective_topic_configs(
    overrides: Mapping[str, str], broker: BrokerConfig
) -> dict[str, tuple[str, bool]]:
    """Every topic config's value and whether it was set on the topic (True) or defaulted."""
    result: dict[str, tuple[str, bool]] = {}
    for name, setting in TOPIC_SETTINGS.items():
        if name in overrides:
            result[name] = (overrides[name], True)
            continue
        value = _fallback(setting, broker)
        result[name] = (setting.default if value is None else value, False)
    return result


def _fallback(setting: TopicSetting, broker: BrokerConfig) -> str | None:
    """The broker config's value a topic config without its own takes (None: the default). A
    broker's log.retention.ms below -1 (no bound in Kafka) is retention.ms -1, no time limit, as
    Kafka's topics describe it."""
    if setting.synonym is None:
        return None
    value = broker.text(setting.synonym)
    if setting.synonym == "log.retention.ms" and value is not None and int(value) < -1:
        return "-1"
    return value


def topic_value(name: str, overrides: Mapping[str, str], broker: BrokerConfig) -> object:
    """One topic config's effective value, typed."""
    setting = TOPIC_SETTINGS[name]
    text = overrides.get(name)
    if text is None:
        text = _fallback(setting, broker)
    return parse_value(setting, setting.default if text is None else text)


# -- the broker configs the topic configs fall back to ----------------------------------------------

_PYTHON_TYPES: dict[ConfigType, type] = {
    ConfigType.INT: int,
    ConfigType.LONG: int,
    ConfigType.DOUBLE: float,
    ConfigType.BOOLEAN: bool,
    ConfigType.STRING: str,
    ConfigType.LIST: str,
}


def _broker_check(setting: TopicSetting) -> Callable[[object], bool]:
    def valid(value: object) -> bool:
        try:
            parse_value(setting, value if isinstance(value, str) else _text(value))
        except InvalidConfigError:
            return False
        return True

    return valid


def _text(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def broker_synonyms() -> Iterator[tuple[str, type, object, Callable[[object], bool]]]:
    """The broker configs topic configs fall back to: ``(name, type, default, validator)``, for the
    settings table to register (it keeps its own definition of a name it already has)."""
    for setting in _TABLE:
        if setting.synonym is None:
            continue
        default: object = setting.default
        if setting.type is not ConfigType.LIST:
            default = parse_value(setting, setting.default)
        yield setting.synonym, _PYTHON_TYPES[setting.type], default, _broker_check(setting)


BROKER_SYNONYMS: frozenset[str] = frozenset(s.synonym for s in _TABLE if s.synonym is not None)
"""Broker configs a topic config falls back to: each is dynamic per broker, as in Kafka."""
