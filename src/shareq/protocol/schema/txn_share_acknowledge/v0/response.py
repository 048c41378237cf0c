"""TxnShareAcknowledgeResponse v0 (KIP-1289), written by hand in kio's generated style.

A response carries its request's key (93; the KIP's text labels it 94). The KIP's tagged
CurrentLeader/NodeEndpoints are left out: on one node NOT_LEADER_OR_FOLLOWER never applies.
"""

import uuid
from dataclasses import dataclass, field
from typing import ClassVar

from kio.schema.errors import ErrorCode
from kio.schema.response_header.v1.header import ResponseHeader
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32, i32Timedelta


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnShareAcknowledgePartitionResponse:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(93)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    """The partition index."""
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    """The error code, or 0."""
    error_message: str | None = field(metadata={"kafka_type": "string"}, default=None)
    """The error message, or null."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnShareAcknowledgeTopicResponse:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(93)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    topic_id: uuid.UUID | None = field(metadata={"kafka_type": "uuid"})
    """The unique topic ID."""
    partitions: tuple[TxnShareAcknowledgePartitionResponse, ...]
    """The partitions."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnShareAcknowledgeResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(93)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    """Throttle time."""
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    """The top-level error code."""
    responses: tuple[TxnShareAcknowledgeTopicResponse, ...]
    """The topics."""
