"""TxnShareAcknowledgeRequest v0 (KIP-1289), written by hand in kio's generated style.

Flexible, header v2. Shaped like TxnOffsetCommitRequest, carrying acknowledgement batches instead
of offsets: the share consumer's acknowledgements of one transaction.
"""

import uuid
from dataclasses import dataclass, field
from typing import ClassVar

from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.types import GroupId, ProducerId, TransactionalId
from kio.static.constants import EntityType
from kio.static.primitive import i8, i16, i32, i64


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnShareAcknowledgeBatch:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(93)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    first_offset: i64 = field(metadata={"kafka_type": "int64"})
    """First offset of the batch (inclusive)."""
    last_offset: i64 = field(metadata={"kafka_type": "int64"})
    """Last offset of the batch (inclusive)."""
    acknowledge_types: tuple[i8, ...] = field(metadata={"kafka_type": "int8"}, default=())
    """Per-offset acknowledge types (one value: the whole range); only 1 Accept, 3 Reject (and 0 Gap)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnShareAcknowledgePartition:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(93)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    """The partition index."""
    acknowledgement_batches: tuple[TxnShareAcknowledgeBatch, ...]
    """Record batches to acknowledge within the transaction."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnShareAcknowledgeTopic:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(93)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    topic_id: uuid.UUID | None = field(metadata={"kafka_type": "uuid"})
    """The unique topic ID."""
    partitions: tuple[TxnShareAcknowledgePartition, ...]
    """The partitions."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnShareAcknowledgeRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(93)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    transactional_id: TransactionalId | None = field(metadata={"kafka_type": "string"})
    """The producer's transactional id."""
    group_id: GroupId = field(metadata={"kafka_type": "string"})
    """The share group id."""
    producer_id: ProducerId = field(metadata={"kafka_type": "int64"})
    """The producer id (fencing)."""
    producer_epoch: i16 = field(metadata={"kafka_type": "int16"})
    """The producer epoch (fencing)."""
    member_id: str = field(metadata={"kafka_type": "string"})
    """The share group member id that holds the records."""
    member_epoch: i32 = field(metadata={"kafka_type": "int32"})
    """The member epoch; -1 skips the epoch check (ownership of each offset is still checked)."""
    topics: tuple[TxnShareAcknowledgeTopic, ...]
    """The topics."""
