"""The envelope ShareFetch and ShareAcknowledge responses share, and their direct encoding.

This broker leads every partition at epoch 0 and names itself as the only node endpoint, so both
responses carry the same leader, lock timeout and endpoint list around their per-partition data.

A successful response is a ``ShareReply``: plain values that encode themselves straight into a
small ``bytearray`` around the acquired record batches (passed by reference), without building
kio entities, since one is built and encoded per round trip of every share consumer. kio stays
the reference: ``ShareReply.entity()`` builds the kio response (what an authorizer filters), and
the unit tests hold the direct bytes equal to kio's encoding of that entity for every version.
"""

from __future__ import annotations

import datetime
import struct
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from shareq.protocol import Codec, DirectResponse
from shareq.protocol.api_keys import SHARE_FETCH
from shareq.protocol.header import response_header
from shareq.protocol.messages import BY_REFERENCE, Buffer
from shareq.protocol.varint import write_uvarint
from shareq.share import AcquiredRecords

from ..context import NO_THROTTLE, RequestContext

if TYPE_CHECKING:
    from ..share.services import ShareServices


_I32 = struct.Struct(">i")
# throttle_time_ms, error_code, error_message (null); the lock timeout follows where the version has it
_TOP = struct.Struct(">ihB")
# partition_index, error_code, error_message (null), acknowledge_error_code,
# acknowledge_error_message (null), current_leader (leader id, epoch 0, no tags)
_FETCH_PARTITION = struct.Struct(">ihBhBiiB")
# partition_index, error_code, error_message (null), current_leader (leader id, epoch 0, no tags), no tags
_ACK_PARTITION = struct.Struct(">ihBiiBB")
# first_offset, last_offset, delivery_count, no tags
_RANGE = struct.Struct(">qqhB")


def error_response(ctx: RequestContext, code: ErrorCode, message: str | None = None) -> Any:
    """A whole-request failure: no partitions, no lock timeout, no endpoints."""
    return ctx.build(
        throttle_time=NO_THROTTLE,
        error_code=code,
        error_message=message,
        acquisition_lock_timeout=datetime.timedelta(0),
        responses=(),
        node_endpoints=(),
    )


def current_leader(ctx: RequestContext) -> Any:
    return ctx.build("LeaderIdAndEpoch", leader_id=ctx.broker.node_id, leader_epoch=0)


class FetchedPartition:
    """One partition of a ShareFetch response: its fetch and acknowledgement error codes, the
    whole log batches handed out and the acquired ranges within them."""

    __slots__ = ("ack_code", "code", "partition", "ranges", "records")

    def __init__(
        self,
        partition: int,
        code: ErrorCode,
        ack_code: ErrorCode,
        records: Buffer,
        ranges: Sequence[AcquiredRecords],
    ) -> None:
        self.partition = partition
        self.code = code
        self.ack_code = ack_code
        self.records = records
        self.ranges = ranges


class ShareReply(DirectResponse):
    """A successful ShareFetch or ShareAcknowledge response.

    ``topics`` lists each topic id with its partitions in response order: ``FetchedPartition`` for
    ShareFetch, ``(partition_index, error_code)`` for ShareAcknowledge.
    """

    __slots__ = ("api_key", "ctx", "lock_ms", "throttle_ms", "topics")

    def __init__(
        self,
        ctx: RequestContext,
        api_key: int,
        topics: list[tuple[uuid.UUID, list[Any]]],
        lock_ms: int,
        throttle_ms: int = 0,
    ) -> None:
        self.ctx = ctx
        self.api_key = api_key
        self.topics = topics
        self.lock_ms = lock_ms
        self.throttle_ms = throttle_ms

    # -- the reference: kio entities --------------------------------------------------------

    def entity(self) -> Any:
        ctx = self.ctx
        build = ctx.build
        broker = ctx.broker
        leader = current_leader(ctx)
        if self.api_key == SHARE_FETCH:
            topic_entity = "ShareFetchableTopicResponse"
            responses = tuple(
                build(
                    topic_entity,
                    topic_id=topic_id,
                    partitions=tuple(
                        build(
                            "PartitionData",
                            partition_index=p.partition,
                            error_code=p.code,
                            error_message=None,
                            acknowledge_error_code=p.ack_code,
                            acknowledge_error_message=None,
                            current_leader=leader,
                            records=p.records,
                            acquired_records=tuple(
                                build(
                                    "AcquiredRecords",
                                    first_offset=r.first_offset,
                                    last_offset=r.last_offset,
                                    delivery_count=r.delivery_count,
                                )
                                for r in p.ranges
                            ),
                        )
                        for p in parts
                    ),
                )
                for topic_id, parts in self.topics
            )
        else:
            responses = tuple(
                build(
                    "ShareAcknowledgeTopicResponse",
                    topic_id=topic_id,
                    partitions=tuple(
                        build(
                            "PartitionData",
                            partition_index=partition,
                            error_code=code,
                            error_message=None,
                            current_leader=leader,
                        )
                        for partition, code in parts
                    ),
                )
                for topic_id, parts in self.topics
            )
        throttle = self.throttle_ms
        return build(
            throttle_time=datetime.timedelta(milliseconds=throttle) if throttle else NO_THROTTLE,
            error_code=ErrorCode.none,
            error_message=None,
            acquisition_lock_timeout=datetime.timedelta(milliseconds=self.lock_ms),
            responses=responses,
            node_endpoints=(
                build(
                    "NodeEndpoint",
                    node_id=broker.node_id,
                    host=ctx.advertised_host,
                    port=ctx.advertised_port,
                    rack=broker.config["broker.rack"],
                ),
            ),
        )

    # -- the hot path: direct bytes ---------------------------------------------------------

    def encode_chunks(self, request_codec: Codec, correlation_id: int) -> list[Buffer]:
        ctx = self.ctx
        node_id = ctx.broker.node_id
        out = bytearray(b"\x00\x00\x00\x00")
        out += response_header(correlation_id, request_codec.response_header_version)
        out += _TOP.pack(self.throttle_ms, 0, 0)
        if self.api_key == SHARE_FETCH or request_codec.version >= 2:
            out += _I32.pack(self.lock_ms)
        chunks: list[Buffer] = [out]
        size = 0
        topics = self.topics
        write_uvarint(out, len(topics) + 1)
        if self.api_key == SHARE_FETCH:
            pack_partition = _FETCH_PARTITION.pack
            pack_range = _RANGE.pack
            for topic_id, parts in topics:
                out += topic_id.bytes
                write_uvarint(out, len(parts) + 1)
                for p in parts:
                    out += pack_partition(p.partition, p.code, 0, p.ack_code, 0, node_id, 0, 0)
                    records = p.records
                    n = len(records)
                    write_uvarint(out, n + 1)
                    if n >= BY_REFERENCE and not isinstance(records, bytearray):
                        size += len(out) + n
                        chunks.append(records)
                        out = bytearray()
                        chunks.append(out)
                    else:
                        out += records
                    ranges = p.ranges
                    write_uvarint(out, len(ranges) + 1)
                    for r in ranges:
                        out += pack_range(r.first_offset, r.last_offset, r.delivery_count, 0)
                    out += b"\x00"
                out += b"\x00"
        else:
            pack_ack = _ACK_PARTITION.pack
            for topic_id, parts in topics:
                out += topic_id.bytes
                write_uvarint(out, len(parts) + 1)
                for partition, code in parts:
                    out += pack_ack(partition, code, 0, node_id, 0, 0, 0)
                out += b"\x00"
        out += _endpoints(node_id, ctx.advertised_host, ctx.advertised_port)
        out += b"\x00"
        size += len(out)
        first = chunks[0]
        assert isinstance(first, bytearray)
        _I32.pack_into(first, 0, size - 4)
        return [c for c in chunks if len(c)]


_ENDPOINTS: dict[tuple[int, str, int], bytes] = {}


def _endpoints(node_id: int, host: str, port: int) -> bytes:
    """The node endpoint list (this broker alone), encoded once per listener."""
    key = (node_id, host, port)
    encoded = _ENDPOINTS.get(key)
    if encoded is None:
        name = host.encode()
        out = bytearray()
        write_uvarint(out, 2)
        out += _I32.pack(node_id)
        write_uvarint(out, len(name) + 1)
        out += name
        out += _I32.pack(port)
        out += b"\x00"  # rack: null
        out += b"\x00"  # no tagged fields
        encoded = bytes(out)
        if len(_ENDPOINTS) < 64:
            _ENDPOINTS[key] = encoded
    return encoded


def share_reply(
    ctx: RequestContext,
    share: ShareServices,
    group_id: str,
    api_key: int,
    topics: list[tuple[uuid.UUID, list[Any]]],
    throttle_ms: int = 0,
) -> ShareReply:
    """A successful response of ``api_key`` carrying ``topics`` (see ``ShareReply``)."""
    return ShareReply(ctx, api_key, topics, share.lock_duration_ms(group_id), throttle_ms)
