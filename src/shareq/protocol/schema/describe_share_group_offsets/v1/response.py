"""DescribeShareGroupOffsetsResponse v1, kio's generated classes with one shareq extension.

Each partition carries a tagged field (tag 10000, far from the tags Kafka hands out from 0) naming
the transactions holding records of the share-partition in TX_PENDING (KIP-1289): producer id,
epoch and how many records. Kafka clients skip tagged fields they do not know, so the response
stays Kafka's for them; shareq's admin client reads it. Two more (tags 10001 and 10002) give the
records waiting out a redelivery backoff and the earliest instant one becomes deliverable again.
"""

import uuid
from dataclasses import dataclass, field
from typing import ClassVar

from kio.schema.errors import ErrorCode
from kio.schema.response_header.v1.header import ResponseHeader
from kio.schema.types import GroupId, TopicName
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32, i32Timedelta, i64

PENDING_TRANSACTIONS_TAG = 10000
DELAYED_RECORDS_TAG = 10001
NEXT_REDELIVERY_TAG = 10002


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeShareGroupOffsetsPendingTransaction:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(90)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    producer_id: i64 = field(metadata={"kafka_type": "int64"})
    """The producer id of the transaction that staged the records."""
    producer_epoch: i16 = field(metadata={"kafka_type": "int16"})
    """Its epoch when it staged them."""
    records: i64 = field(metadata={"kafka_type": "int64"})
    """How many records of the share-partition it holds in TX_PENDING."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeShareGroupOffsetsResponsePartition:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(90)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    """The partition index."""
    start_offset: i64 = field(metadata={"kafka_type": "int64"})
    """The share-partition start offset."""
    leader_epoch: i32 = field(metadata={"kafka_type": "int32"})
    """The leader epoch of the partition."""
    lag: i64 = field(metadata={"kafka_type": "int64"}, default=i64(-1))
    """The share-partition lag."""
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    """The partition-level error code, or 0 if there was no error."""
    error_message: str | None = field(metadata={"kafka_type": "string"}, default=None)
    """The partition-level error message, or null if there was no error."""
    pending_transactions: tuple[DescribeShareGroupOffsetsPendingTransaction, ...] = field(
        metadata={"tag": PENDING_TRANSACTIONS_TAG}, default=()
    )
    """shareq: the transactions holding records in TX_PENDING (tagged; empty is not sent)."""
    delayed_records: i64 = field(metadata={"kafka_type": "int64", "tag": DELAYED_RECORDS_TAG}, default=i64(0))
    """shareq: records waiting out a redelivery backoff (tagged; 0 is not sent)."""
    next_redelivery_ms: i64 = field(
        metadata={"kafka_type": "int64", "tag": NEXT_REDELIVERY_TAG}, default=i64(0)
    )
    """shareq: when the first of them becomes deliverable again (epoch ms; 0: none)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeShareGroupOffsetsResponseTopic:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(90)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    topic_name: TopicName = field(metadata={"kafka_type": "string"})
    """The topic name."""
    topic_id: uuid.UUID | None = field(metadata={"kafka_type": "uuid"})
    """The unique topic ID."""
    partitions: tuple[DescribeShareGroupOffsetsResponsePartition, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeShareGroupOffsetsResponseGroup:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(90)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    group_id: GroupId = field(metadata={"kafka_type": "string"})
    """The group identifier."""
    topics: tuple[DescribeShareGroupOffsetsResponseTopic, ...]
    """The results for each topic."""
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    """The group-level error code, or 0 if there was no error."""
    error_message: str | None = field(metadata={"kafka_type": "string"}, default=None)
    """The group-level error message, or null if there was no error."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeShareGroupOffsetsResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(90)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    """The duration in milliseconds for which the request was throttled due to a quota violation."""
    groups: tuple[DescribeShareGroupOffsetsResponseGroup, ...]
    """The results for each group."""
