"""ShareFetch and ShareAcknowledge responses encoded directly are byte for byte kio's encoding.

The broker writes these two responses without building kio entities; kio stays the reference:
for every version, any mix of topics, partitions, error codes, record batches and acquired
ranges, the direct bytes equal ``encode_response`` of the kio entity the same reply builds, and
record batches long enough to pass by reference are written as the very objects handed in.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from shareq.config import BrokerConfig
from shareq.protocol import codec, encode_response, encode_response_chunks
from shareq.protocol.api_keys import SHARE_ACKNOWLEDGE, SHARE_FETCH
from shareq.protocol.header import RequestHeader
from shareq.protocol.messages import BY_REFERENCE
from shareq.security.listeners import Listener, SecurityProtocol
from shareq.server.broker import Broker
from shareq.server.context import RequestContext
from shareq.server.handlers.share_response import FetchedPartition, ShareReply
from shareq.server.security import ConnectionSession
from shareq.share import AcquiredRecords

CODES = [
    ErrorCode.none,
    ErrorCode.unknown_topic_id,
    ErrorCode.unknown_topic_or_partition,
    ErrorCode.invalid_record_state,
    ErrorCode.not_leader_or_follower,
    ErrorCode.unknown_server_error,
]


def context(tmp: Path, api_key: int, version: int, node_id: int, host: str, port: int) -> RequestContext:
    broker = Broker(tmp, BrokerConfig.from_mapping({"node.id": node_id}))
    listener = Listener("PLAINTEXT", host, port, SecurityProtocol.PLAINTEXT)
    header = RequestHeader(
        api_key=api_key, api_version=version, correlation_id=0, client_id=None, body_offset=0
    )
    return RequestContext(
        broker=broker,
        header=header,
        codec=codec(api_key, version),
        peer="127.0.0.1:5555",
        connection_id=1,
        session=ConnectionSession(listener=listener, advertised=listener, client_host="127.0.0.1"),
    )


records_st = st.one_of(
    st.just(b""),
    st.binary(min_size=1, max_size=64),
    st.binary(min_size=BY_REFERENCE, max_size=BY_REFERENCE + 300),
    st.binary(min_size=BY_REFERENCE, max_size=BY_REFERENCE + 300).map(memoryview),
    st.binary(min_size=200, max_size=20_000).map(lambda b: memoryview(b)[100:]),
)
ranges_st = st.lists(
    st.builds(
        AcquiredRecords,
        first_offset=st.integers(0, 2**62),
        last_offset=st.integers(0, 2**62),
        delivery_count=st.integers(1, 2**15 - 1),
    ),
    max_size=140,  # past 127 entries the array length takes two varint bytes
)
fetched_st = st.builds(
    FetchedPartition,
    st.integers(0, 2**31 - 1),
    st.sampled_from(CODES),
    st.sampled_from(CODES),
    records_st,
    ranges_st,
)
acked_st = st.tuples(st.integers(0, 2**31 - 1), st.sampled_from(CODES))


@st.composite
def replies(draw: Any) -> tuple[int, int, list[tuple[uuid.UUID, list[Any]]], int, int, int, str, int]:
    api_key = draw(st.sampled_from([SHARE_FETCH, SHARE_ACKNOWLEDGE]))
    version = draw(st.sampled_from([1, 2]))
    part = fetched_st if api_key == SHARE_FETCH else acked_st
    topics = draw(
        st.lists(
            st.tuples(st.uuids(), st.lists(part, max_size=4)),
            max_size=4 if draw(st.booleans()) else 130,
        )
    )
    lock_ms = draw(st.integers(0, 2**31 - 1))
    throttle_ms = draw(st.sampled_from([0, 1, draw(st.integers(0, 2**31 - 1))]))
    node_id = draw(st.integers(0, 2**31 - 1))
    host = draw(st.sampled_from(["127.0.0.1", "localhost", "::1", "brøker.example", "h" * 200]))
    port = draw(st.integers(1, 65535))
    return api_key, version, topics, lock_ms, throttle_ms, node_id, host, port


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(reply=replies(), correlation_id=st.integers(-(2**31), 2**31 - 1))
def test_direct_bytes_equal_kio_encoding(tmp_path: Path, reply: Any, correlation_id: int) -> None:
    api_key, version, topics, lock_ms, throttle_ms, node_id, host, port = reply
    ctx = context(tmp_path, api_key, version, node_id, host, port)
    direct = ShareReply(ctx, api_key, topics, lock_ms, throttle_ms)
    request_codec = codec(api_key, version)
    chunks = encode_response_chunks(request_codec, correlation_id, direct)
    assert b"".join(chunks) == encode_response(request_codec, correlation_id, direct.entity())
    # the same entity through the general chunked encoder: the bytes a broker sent before
    assert b"".join(chunks) == b"".join(
        encode_response_chunks(request_codec, correlation_id, direct.entity())
    )
    if api_key == SHARE_FETCH:
        passed = [
            p.records
            for _, parts in topics
            for p in parts
            if len(p.records) >= BY_REFERENCE and not isinstance(p.records, bytearray)
        ]
        for records in passed:  # record batches are not copied
            assert any(chunk is records for chunk in chunks)


@pytest.mark.parametrize("version", [1, 2])
def test_a_fetch_response_decodes_to_what_it_was_given(tmp_path: Path, version: int) -> None:
    """Read back with kio's reader: every field lands where the schema puts it."""
    from kio.serial import entity_reader

    topic = uuid.uuid4()
    batches = bytes(range(256)) * 8
    parts = [
        FetchedPartition(
            3,
            ErrorCode.none,
            ErrorCode.invalid_record_state,
            batches,
            [AcquiredRecords(first_offset=5, last_offset=9, delivery_count=2)],
        ),
        FetchedPartition(7, ErrorCode.unknown_topic_or_partition, ErrorCode.none, b"", []),
    ]
    ctx = context(tmp_path, SHARE_FETCH, version, 4, "broker.local", 9092)
    direct = ShareReply(ctx, SHARE_FETCH, [(topic, parts)], 30_000, 25)
    framed = b"".join(encode_response_chunks(codec(SHARE_FETCH, version), 77, direct))
    assert int.from_bytes(framed[:4], "big") == len(framed) - 4
    assert int.from_bytes(framed[4:8], "big") == 77
    response, _ = entity_reader(codec(SHARE_FETCH, version).response_class)(framed, 9)
    assert response.throttle_time.total_seconds() == 0.025
    assert response.acquisition_lock_timeout.total_seconds() == 30
    (decoded,) = response.responses
    assert decoded.topic_id == topic
    first, second = decoded.partitions
    assert (first.partition_index, first.error_code, first.acknowledge_error_code) == (
        3,
        ErrorCode.none,
        ErrorCode.invalid_record_state,
    )
    assert bytes(first.records) == batches
    assert [(r.first_offset, r.last_offset, r.delivery_count) for r in first.acquired_records] == [(5, 9, 2)]
    assert first.current_leader.leader_id == 4
    assert (second.partition_index, second.error_code, second.acquired_records) == (
        7,
        ErrorCode.unknown_topic_or_partition,
        (),
    )
    (endpoint,) = response.node_endpoints
    assert (endpoint.node_id, endpoint.host, endpoint.port, endpoint.rack) == (4, "broker.local", 9092, None)
