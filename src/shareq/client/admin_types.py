"""Result and argument types of ``Admin``: frozen dataclasses, errors carried as ``ErrorCode``."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum

from kio.schema.errors import ErrorCode

from .errors import KafkaError


class ResourceType(IntEnum):
    """Config resource types (DescribeConfigs / IncrementalAlterConfigs)."""

    TOPIC = 2
    GROUP = 32
    BROKER = 4


class ConfigSource(IntEnum):
    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


class AlterOp(IntEnum):
    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


class OffsetSpec(IntEnum):
    """Special ListOffsets timestamps."""

    LATEST = -1
    EARLIEST = -2
    MAX_TIMESTAMP = -3


@dataclass(frozen=True, slots=True, kw_only=True)
class NewTopic:
    name: str
    num_partitions: int = 1
    replication_factor: int = 1
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatedTopic:
    name: str
    topic_id: uuid.UUID | None
    num_partitions: int
    replication_factor: int
    error: ErrorCode = ErrorCode.none
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class ConfigResource:
    type: ResourceType
    name: str


@dataclass(frozen=True, slots=True)
class ConfigSynonym:
    """A layer a config falls back to: a topic or group override, a broker config, a default."""

    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigEntry:
    name: str
    value: str | None
    source: ConfigSource
    read_only: bool = False
    is_sensitive: bool = False
    is_default: bool = False
    synonyms: tuple[ConfigSynonym, ...] = ()
    """Most specific first; only when asked for (``include_synonyms``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FeatureMetadata:
    """Feature levels from ApiVersions v3+: ``supported`` and ``finalized`` map a feature name to its
    ``(min, max)`` levels; ``finalized_epoch`` is None when the broker reports none."""

    supported: Mapping[str, tuple[int, int]]
    finalized: Mapping[str, tuple[int, int]]
    finalized_epoch: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetInfo:
    """A ListOffsets answer for one partition."""

    offset: int
    timestamp: int
    leader_epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str
    type: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareMember:
    member_id: str
    client_id: str
    client_host: str
    rack_id: str | None
    member_epoch: int
    subscribed_topics: tuple[str, ...]
    assignment: Mapping[str, tuple[int, ...]]


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupDescription:
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor: str
    members: tuple[ShareMember, ...]
    error: ErrorCode = ErrorCode.none
    error_message: str | None = None

    def raise_for_error(self) -> None:
        if self.error != ErrorCode.none:
            raise KafkaError(self.error, self.error_message, context=f"group {self.group_id}")


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupOffset:
    """A share-partition's start offset (SPSO) for a group, its lag when the broker reports it,
    and the transactions holding its records in TX_PENDING (shareq brokers; KIP-1289)."""

    topic: str
    topic_id: uuid.UUID | None
    partition: int
    start_offset: int
    leader_epoch: int
    lag: int | None = None
    error: ErrorCode = ErrorCode.none
    error_message: str | None = None
    pending: tuple[PendingTransaction, ...] = ()
    delayed_records: int = 0
    """Records waiting out a redelivery backoff (shareq brokers)."""
    next_redelivery_ms: int | None = None
    """When the first of them becomes deliverable again (epoch ms), if any."""

    @property
    def pending_records(self) -> int:
        """Records of this share-partition staged by transactions not yet ended."""
        return sum(p.records for p in self.pending)


@dataclass(frozen=True, slots=True)
class PendingTransaction:
    """A transaction holding records of a share-partition in TX_PENDING."""

    producer_id: int
    producer_epoch: int
    records: int


class QuotaMatch(IntEnum):
    """How a DescribeClientQuotas filter component matches an entity's name."""

    EXACT = 0
    DEFAULT = 1
    SPECIFIED = 2  # any entity that has this type, whatever its name


@dataclass(frozen=True, slots=True)
class QuotaFilter:
    """``QuotaFilter("client-id", QuotaMatch.EXACT, "app")``; DEFAULT and SPECIFIED take no name."""

    entity_type: str
    match_type: QuotaMatch
    match: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientQuota:
    """One entity's quotas: ``entity`` maps ``user``/``client-id``/``ip`` to a name (None: the
    default of that type); ``values`` maps a quota key to its value."""

    entity: Mapping[str, str | None]
    values: Mapping[str, float]


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupMember:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    assignment: Mapping[str, tuple[int, ...]]


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupDescription:
    """A consumer group of either protocol: ``classic`` (JoinGroup) or ``consumer`` (KIP-848)."""

    group_id: str
    type: str
    state: str
    assignor: str
    """The classic group's protocol (its client-side assignor), or the KIP-848 server-side assignor."""
    epoch: int | None
    """The KIP-848 group epoch (``None`` for classic groups)."""
    members: tuple[ConsumerGroupMember, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupOffset:
    """A committed offset (-1: none)."""

    topic: str
    partition: int
    offset: int
    metadata: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TransactionListing:
    """One transactional id as ListTransactions reports it."""

    transactional_id: str
    producer_id: int
    state: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TransactionDescription:
    """One transactional id as DescribeTransactions reports it (``start_ms`` -1 unless Ongoing)."""

    transactional_id: str
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_ms: int
    partitions: tuple[tuple[str, int], ...]
