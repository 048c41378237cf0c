"""The sans-I/O wire layer: frames, headers, decoding and the unsupported-version replies."""

from __future__ import annotations

import contextlib
import datetime
import io
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

from shareq.protocol import (
    FrameDecoder,
    FrameTooLargeError,
    MalformedRequestError,
    PeerProtocolError,
    UnsupportedRequest,
    codec,
    decode_request,
    encode_response,
    encode_unsupported,
    frame,
    parse_request_header,
)
from shareq.protocol import api_keys as api
from shareq.protocol.header import skip_tagged_fields
from shareq.protocol.versions import VersionRange

BASE_VERSIONS: dict[int, VersionRange] = {
    api.PRODUCE: VersionRange(3, 13),
    api.FETCH: VersionRange(4, 17),
    api.LIST_OFFSETS: VersionRange(1, 11),
    api.METADATA: VersionRange(4, 13),
    api.FIND_COORDINATOR: VersionRange(0, 6),
    api.API_VERSIONS: VersionRange(0, 4),
    api.CREATE_TOPICS: VersionRange(2, 7),
    api.DELETE_TOPICS: VersionRange(1, 6),
    api.INIT_PRODUCER_ID: VersionRange(0, 5),
    api.DESCRIBE_CONFIGS: VersionRange(1, 4),
    api.INCREMENTAL_ALTER_CONFIGS: VersionRange(0, 1),
}
"""The broker's first eleven apis and their versions: a supported table for decoding and for the
unsupported-version replies, apart from the handler table."""


def request_bytes(
    api_key: int, version: int, correlation_id: int, body: object, client_id: str = "t"
) -> bytes:
    cls = load_request_schema(api_key, version)
    head = entity_writer(cls.__header_schema__)
    out = io.BytesIO()
    head(
        out,
        cls.__header_schema__(
            request_api_key=api_key,
            request_api_version=version,
            correlation_id=correlation_id,
            client_id=client_id,
        ),
    )
    entity_writer(cls)(out, body)
    return out.getvalue()


@given(st.lists(st.binary(max_size=300), max_size=20), st.integers(min_value=1, max_value=64))
def test_frames_split_anywhere_come_back_whole(payloads: list[bytes], chunk: int) -> None:
    stream = b"".join(frame(p) for p in payloads)
    decoder = FrameDecoder()
    received: list[bytes] = []
    for start in range(0, len(stream), chunk):
        decoder.receive_data(stream[start : start + chunk])
        received.extend(decoder.frames())
    assert received == payloads
    assert decoder.buffered == 0


def test_oversized_and_negative_prefixes_are_peer_faults() -> None:
    decoder = FrameDecoder(max_frame_bytes=1024)
    decoder.receive_data(struct.pack(">i", 2**31 - 1))
    with pytest.raises(FrameTooLargeError):
        decoder.next_frame()
    negative = FrameDecoder()
    negative.receive_data(struct.pack(">i", -5))
    with pytest.raises(PeerProtocolError):
        negative.next_frame()


def test_header_v2_with_tagged_fields_and_null_client_id() -> None:
    payload = struct.pack(">hhih", 18, 3, 77, -1) + b"\x01\x05\x02ab" + b"rest"
    header = parse_request_header(payload)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (18, 3, 77, None)
    assert payload[skip_tagged_fields(payload, header.body_offset) :] == b"rest"


@pytest.mark.parametrize("payload", [b"", b"\x00\x12\x00", struct.pack(">hhih", 18, 3, 1, 50) + b"short"])
def test_truncated_headers_are_malformed(payload: bytes) -> None:
    with pytest.raises(MalformedRequestError):
        parse_request_header(payload)


def test_decode_round_trip_and_stray_trailing_bytes() -> None:
    cls = load_request_schema(3, 13)
    body = cls(topics=None, allow_auto_topic_creation=True, include_topic_authorized_operations=False)
    request = decode_request(request_bytes(3, 13, 9, body) + b"\x00\x00\x00", BASE_VERSIONS)
    assert request.body == body
    assert request.header.correlation_id == 9
    assert request.header.client_id == "t"


def test_malformed_body_for_known_api() -> None:
    payload = struct.pack(">hhih", 3, 13, 1, 1) + b"x" + b"\x00" + b"\xff\xff\xff\xff\x0f"
    with pytest.raises(MalformedRequestError):
        decode_request(payload, BASE_VERSIONS)


def test_unsupported_key_and_version_get_an_answer() -> None:
    unknown_key = struct.pack(">hhih", 999, 0, 5, -1)
    with pytest.raises(UnsupportedRequest) as caught:
        decode_request(unknown_key, BASE_VERSIONS)
    reply = encode_unsupported(caught.value, BASE_VERSIONS)
    assert reply == struct.pack(">iih", 6, 5, int(ErrorCode.unsupported_version))


def test_too_new_api_versions_gets_a_v0_fallback_listing_versions() -> None:
    payload = struct.pack(">hhih", 18, 99, 42, -1) + b"\x00garbage"
    with pytest.raises(UnsupportedRequest) as caught:
        decode_request(payload, BASE_VERSIONS)
    reply = encode_unsupported(caught.value, BASE_VERSIONS)
    (size, correlation_id) = struct.unpack_from(">ii", reply)
    assert size == len(reply) - 4 and correlation_id == 42
    response, _ = entity_reader(load_response_schema(18, 0))(reply, 8)
    assert response.error_code == ErrorCode.unsupported_version
    advertised = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert advertised[0][0] <= 3 and advertised[1][0] <= 4


def test_encode_response_uses_the_versions_header() -> None:
    # ApiVersions v3 is flexible but answers with response header v0 (no tagged-field byte).
    api_versions = codec(18, 3)
    body = api_versions.response_class(
        error_code=ErrorCode.none, api_keys=(), throttle_time=datetime.timedelta(0)
    )
    framed = encode_response(api_versions, 7, body)
    assert framed[4:8] == struct.pack(">i", 7)
    assert framed[8:] == api_versions.encode_body(body)
    metadata = codec(3, 13)
    framed = encode_response(
        metadata,
        8,
        metadata.response_class(
            throttle_time=datetime.timedelta(0),
            brokers=(),
            cluster_id=None,
            controller_id=0,
            topics=(),
            error_code=ErrorCode.none,
        ),
    )
    assert framed[4:9] == struct.pack(">i", 8) + b"\x00"


def test_codec_is_cached() -> None:
    assert codec(1, 16) is codec(1, 16)


SUPPORTED = sorted(
    (key, v) for key, r in BASE_VERSIONS.items() for v in range(r.min_version, r.max_version + 1)
)


@pytest.mark.parametrize(("api_key", "version"), SUPPORTED)
@settings(max_examples=60, deadline=None)  # the first example builds the codec (kio schema load)
@given(data=st.binary(max_size=200), lengths=st.lists(st.integers(0, 2**32 - 1), max_size=6))
def test_random_bodies_never_abort_the_decoder(
    api_key: int, version: int, data: bytes, lengths: list[int]
) -> None:
    # Huge length prefixes spliced into noise: decoding may fail, but only with a peer fault.
    body = b"".join(struct.pack(">I", n) for n in lengths) + data
    request_codec = codec(api_key, version)
    with contextlib.suppress(MalformedRequestError):
        request_codec.decode(body, 0)


def test_huge_array_count_is_refused_before_allocation() -> None:
    payload = struct.pack(">hhih", 3, 13, 1, 1) + b"x" + b"\x00" + b"\xff\xff\xff\xff\x0f"
    with pytest.raises(MalformedRequestError):
        decode_request(payload, BASE_VERSIONS)
    legacy = struct.pack(">hhih", 3, 4, 1, -1) + struct.pack(">i", 2**31 - 1)
    with pytest.raises(MalformedRequestError):
        decode_request(legacy, BASE_VERSIONS)


def test_unknown_tagged_fields_are_skipped() -> None:
    # Metadata v13: empty topic array, two booleans, then tagged fields with an unknown tag 7.
    body = b"\x01" + b"\x01\x00" + b"\x01" + b"\x07\x03abc"
    payload = struct.pack(">hhih", 3, 13, 5, -1) + b"\x00" + body
    request = decode_request(payload, BASE_VERSIONS)
    assert request.body.topics == () and request.body.allow_auto_topic_creation is True
    # A known tag (ApiVersions v3 has none in the request; Fetch v12+ has cluster_id = tag 0) kept.
    fetch_cls = load_request_schema(1, 13)
    fetch = fetch_cls(
        cluster_id="c1",
        max_wait=datetime.timedelta(milliseconds=5),
        min_bytes=1,
        topics=(),
        forgotten_topics_data=(),
    )
    out = io.BytesIO()
    entity_writer(fetch_cls)(out, fetch)
    encoded = out.getvalue()
    assert encoded.endswith(b"\x01\x00\x03\x03c1")  # one tagged field: tag 0, size 3, compact "c1"
    with_unknown = encoded[:-6] + b"\x02\x00\x03\x03c1\x09\x01\x00"
    decoded = codec(1, 13).decode(with_unknown, 0)
    assert decoded == fetch
