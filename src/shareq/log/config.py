"""Per-partition log settings, named after Kafka's topic and broker configs."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from .conversion import DEFAULT_POLICY, LONG_MAX, AppendPolicy

GIB = 1 << 30
WEEK_MS = 7 * 24 * 60 * 60 * 1000
MAX_SEGMENT_BYTES = (1 << 31) - 1  # positions in the offset index are 32-bit, as in Kafka
CLEANUP_POLICIES = frozenset({"", "delete", "compact", "compact,delete", "delete,compact"})
"""An empty policy (Kafka 4.x, KIP-1161) neither deletes nor compacts: the log is kept whole."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LogConfig:
    """Settings of one partition log.

    ``segment_ms``, ``retention_ms`` and ``retention_bytes`` use -1 (or None for ``segment_ms``) for
    "no limit"; ``flush_interval_messages=None`` means the log never fsyncs on its own except on
    roll, flush and close (Kafka's default: durability comes from the page cache and replication).
    """

    segment_bytes: int = GIB  # log.segment.bytes / segment.bytes
    segment_ms: int | None = WEEK_MS  # log.roll.ms / segment.ms
    retention_ms: int = WEEK_MS  # log.retention.ms / retention.ms
    retention_bytes: int = -1  # log.retention.bytes / retention.bytes
    flush_interval_messages: int | None = None  # log.flush.interval.messages / flush.messages
    index_interval_bytes: int = 4096  # log.index.interval.bytes / index.interval.bytes
    max_message_bytes: int = 1048588  # message.max.bytes / max.message.bytes
    cleanup_policy: str = "delete"  # log.cleanup.policy / cleanup.policy
    compression_type: str = "producer"  # compression.type
    message_timestamp_type: str = "CreateTime"  # log.message.timestamp.type / message.timestamp.type
    timestamp_before_max_ms: int = LONG_MAX  # message.timestamp.before.max.ms
    timestamp_after_max_ms: int = 3_600_000  # message.timestamp.after.max.ms
    compression_levels: tuple[tuple[str, int], ...] = ()  # compression.<codec>.level set explicitly
    policy: AppendPolicy = field(init=False, repr=False, compare=False, default=DEFAULT_POLICY)

    def __post_init__(self) -> None:
        if not 14 <= self.segment_bytes <= MAX_SEGMENT_BYTES:
            raise ValueError(f"segment_bytes must be in [14, {MAX_SEGMENT_BYTES}], got {self.segment_bytes}")
        if self.segment_ms is not None and self.segment_ms <= 0:
            raise ValueError(f"segment_ms must be positive, got {self.segment_ms}")
        if self.retention_ms < -1:
            raise ValueError(f"retention_ms must be >= -1, got {self.retention_ms}")
        if self.retention_bytes < -1:
            raise ValueError(f"retention_bytes must be >= -1, got {self.retention_bytes}")
        if self.flush_interval_messages is not None and self.flush_interval_messages <= 0:
            raise ValueError(f"flush_interval_messages must be positive, got {self.flush_interval_messages}")
        if self.index_interval_bytes < 0:
            raise ValueError(f"index_interval_bytes must be >= 0, got {self.index_interval_bytes}")
        if self.max_message_bytes <= 0:
            raise ValueError(f"max_message_bytes must be positive, got {self.max_message_bytes}")
        if self.cleanup_policy not in CLEANUP_POLICIES:
            raise ValueError(f"cleanup_policy must be delete and/or compact, got {self.cleanup_policy!r}")

        policy = AppendPolicy.from_configs(
            compression_type=self.compression_type,
            timestamp_type=self.message_timestamp_type,
            before_max_ms=self.timestamp_before_max_ms,
            after_max_ms=self.timestamp_after_max_ms,
            levels=dict(self.compression_levels),
            compacted=self.compact,
        )
        object.__setattr__(self, "policy", policy)

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @classmethod
    def from_kafka(cls, configs: Mapping[str, str], base: LogConfig | None = None) -> LogConfig:
        """Overlay Kafka config strings (topic-level or broker ``log.*`` names) on ``base``.

        Topic-level names win over broker-level ones; unknown names are ignored so a whole topic or
        broker config map can be passed. Bad values raise :class:`ValueError` naming the key.
        """
        changes: dict[str, Any] = {}
        # Broker-level names first, so topic-level names overwrite them.
        for table in (_BROKER_NAMES, _TOPIC_NAMES):
            for name, (attr, parse) in table.items():
                if name in configs:
                    try:
                        changes[attr] = parse(configs[name])
                    except ValueError as exc:
                        raise ValueError(f"invalid value {configs[name]!r} for {name}: {exc}") from None
        # Coarser broker units apply only when no finer name is given (Kafka's precedence).
        derived = (
            ("retention_ms", ("retention.ms", "log.retention.ms"), "log.retention.minutes", 60_000),
            (
                "retention_ms",
                ("retention.ms", "log.retention.ms", "log.retention.minutes"),
                "log.retention.hours",
                3_600_000,
            ),
            ("segment_ms", ("segment.ms", "log.roll.ms"), "log.roll.hours", 3_600_000),
        )
        for attr, finer, name, factor in derived:
            if name in configs and not any(f in configs for f in finer):
                try:
                    n = _parse_int(configs[name]) * factor
                    changes[attr] = _retention(n) if attr == "retention_ms" else _segment_ms(str(n))
                except ValueError as exc:
                    raise ValueError(f"invalid value {configs[name]!r} for {name}: {exc}") from None
        levels = {
            codec: _parse_int(configs[f"compression.{codec}.level"])
            for codec in ("gzip", "lz4", "zstd")
            if f"compression.{codec}.level" in configs
        }
        if levels:
            changes["compression_levels"] = tuple(sorted(levels.items()))
        try:
            return replace(base or cls(), **changes)
        except ValueError as exc:
            raise ValueError(f"invalid log config: {exc}") from None

    def to_kafka(self) -> dict[str, str]:
        """Topic-level Kafka names and values (for DescribeConfigs)."""
        out: dict[str, str] = {}
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        for name, (attr, _parse) in _TOPIC_NAMES.items():
            value = values[attr]
            if value is None:
                value = "9223372036854775807"
            out[name] = str(value)
        return out


def _parse_int(text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise ValueError("not an integer") from None


def _retention(n: int) -> int:
    return -1 if n < 0 else n


def _broker_retention_ms(text: str) -> int:
    """A broker's log.retention.ms: no lower bound in Kafka, any negative value is no time limit."""
    return _retention(_parse_int(text))


def _retention_value(text: str) -> int:
    n = _parse_int(text)
    if n < -1:
        raise ValueError("must be -1 (unlimited) or at least 0")
    return n


def _segment_ms(text: str) -> int | None:
    n = _parse_int(text)
    if n <= 0:
        raise ValueError("must be positive")
    return None if n >= (1 << 63) - 1 else n


def _flush_messages(text: str) -> int | None:
    n = _parse_int(text)
    if n <= 0:
        raise ValueError("must be positive")
    return None if n >= (1 << 63) - 1 else n


def _policy(text: str) -> str:
    items = [p.strip() for p in text.split(",")] if text.strip() else []
    policy = ",".join(dict.fromkeys(items))  # Kafka accepts a repeated item
    if policy not in CLEANUP_POLICIES:
        raise ValueError("must be delete, compact or both")
    return policy


_Parser = Callable[[str], Any]

_TOPIC_NAMES: dict[str, tuple[str, _Parser]] = {
    "segment.bytes": ("segment_bytes", _parse_int),
    "segment.ms": ("segment_ms", _segment_ms),
    "retention.ms": ("retention_ms", _retention_value),
    "retention.bytes": ("retention_bytes", _retention_value),
    "flush.messages": ("flush_interval_messages", _flush_messages),
    "index.interval.bytes": ("index_interval_bytes", _parse_int),
    "max.message.bytes": ("max_message_bytes", _parse_int),
    "cleanup.policy": ("cleanup_policy", _policy),
    "compression.type": ("compression_type", str.strip),
    "message.timestamp.type": ("message_timestamp_type", str.strip),
    "message.timestamp.before.max.ms": ("timestamp_before_max_ms", _parse_int),
    "message.timestamp.after.max.ms": ("timestamp_after_max_ms", _parse_int),
}

_BROKER_NAMES: dict[str, tuple[str, _Parser]] = {
    "log.segment.bytes": ("segment_bytes", _parse_int),
    "log.roll.ms": ("segment_ms", _segment_ms),
    "log.retention.ms": ("retention_ms", _broker_retention_ms),
    "log.retention.bytes": ("retention_bytes", _retention_value),
    "log.flush.interval.messages": ("flush_interval_messages", _flush_messages),
    "log.index.interval.bytes": ("index_interval_bytes", _parse_int),
    "message.max.bytes": ("max_message_bytes", _parse_int),
    "log.cleanup.policy": ("cleanup_policy", _policy),
    "log.message.timestamp.type": ("message_timestamp_type", str.strip),
    "log.message.timestamp.before.max.ms": ("timestamp_before_max_ms", _parse_int),
    "log.message.timestamp.after.max.ms": ("timestamp_after_max_ms", _parse_int),
}
