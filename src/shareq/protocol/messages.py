"""From frame to decoded request and from response object to frame.

This is the whole sans-I/O request path: ``decode_request`` turns one frame into a ``Request``
(or raises a peer fault / ``UnsupportedApiError``), and the ``encode_*`` functions return the bytes
to send, already length-prefixed.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from .api_keys import API_VERSIONS
from .codec import Codec, build, codec
from .errors import LocalProtocolError, UnsupportedApiError
from .framing import frame
from .header import RequestHeader, parse_request_header, response_header, skip_tagged_fields
from .versions import API_VERSIONS_FALLBACK_VERSION, VersionRange

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


@dataclass(frozen=True, slots=True, kw_only=True)
class Request:
    """One decoded request: its header, its codec and the kio request entity."""

    header: RequestHeader
    codec: Codec
    body: Any

    @property
    def api_key(self) -> int:
        return self.header.api_key

    @property
    def api_version(self) -> int:
        return self.header.api_version


def decode_request(payload: bytes, supported: Mapping[int, VersionRange]) -> Request:
    """Decode a frame's payload.

    Raises ``UnsupportedApiError`` (answerable, carries the header) for versions outside
    ``supported`` and ``MalformedRequestError`` for anything undecodable.
    """
    header = parse_request_header(payload)
    allowed = supported.get(header.api_key)
    if allowed is None or header.api_version not in allowed:
        raise UnsupportedRequest(header)
    try:
        request_codec = codec(header.api_key, header.api_version)
    except Exception as error:  # kio does not know this version: treat as unsupported
        raise UnsupportedRequest(header) from error
    offset = header.body_offset
    if request_codec.request_header_version >= 2:
        offset = skip_tagged_fields(payload, offset)
    body = request_codec.decode(payload, offset)
    return Request(header=header, codec=request_codec, body=body)


class UnsupportedRequest(UnsupportedApiError):
    """An unsupported request whose header could be read, so it can be answered."""

    def __init__(self, header: RequestHeader) -> None:
        super().__init__(header.api_key, header.api_version)
        self.header = header


def encode_response(request_codec: Codec, correlation_id: int, response: Any) -> bytes:
    """Frame a response for ``request_codec``'s version.

    Written into one buffer with the length patched in afterwards, so a fetch response carrying
    megabytes of records is copied as few times as kio allows.
    """
    if isinstance(response, DirectResponse):
        response = response.entity()
    if type(response) is not request_codec.response_class:
        raise MalformedResponse(
            f"api {request_codec.api_key} v{request_codec.version} handler returned {type(response).__name__}"
        )
    out = io.BytesIO()
    out.write(b"\x00\x00\x00\x00")
    out.write(response_header(correlation_id, request_codec.response_header_version))
    request_codec.writer(out, response)
    size = out.tell() - 4
    out.seek(0)
    out.write(_I32.pack(size))
    return out.getvalue()


Buffer = bytes | bytearray | memoryview

# Byte values at least this long (record batches) are kept by reference rather than copied.
BY_REFERENCE = 1024


class DirectResponse:
    """A response that writes its own bytes, for the hottest request paths.

    kio stays the reference encoding: ``entity()`` builds the kio response object (what an
    authorizer inspects, and what tests compare against), and ``encode_chunks`` must produce the
    very bytes ``encode_response_chunks`` would produce for that entity, record batches passed
    by reference. A subclass is validated byte for byte against kio in the unit tests.
    """

    __slots__ = ()

    def entity(self) -> Any:
        raise NotImplementedError

    def encode_chunks(self, request_codec: Codec, correlation_id: int) -> list[Buffer]:
        raise NotImplementedError


class _Chunks:
    """A kio ``Writable`` that gathers a response as a list of buffers.

    Small writes (lengths, ints, strings) accumulate in a ``bytearray``; long byte values, which
    are the record batches of Fetch and ShareFetch, are appended as they are, so the log's bytes
    reach the socket without a copy in this process.
    """

    __slots__ = ("chunks", "size", "small")

    def __init__(self) -> None:
        self.small = bytearray()
        self.chunks: list[Buffer] = [self.small]
        self.size = 0

    def write(self, data: Buffer) -> int:
        n = len(data)
        self.size += n
        if n >= BY_REFERENCE and not isinstance(data, bytearray):
            self.chunks.append(data)
            self.small = bytearray()
            self.chunks.append(self.small)
        else:
            self.small += data
        return n


def encode_response_chunks(request_codec: Codec, correlation_id: int, response: Any) -> list[Buffer]:
    """Frame a response as buffers to write in order; record bytes are passed through uncopied."""
    if isinstance(response, DirectResponse):
        return response.encode_chunks(request_codec, correlation_id)
    if type(response) is not request_codec.response_class:
        raise MalformedResponse(
            f"api {request_codec.api_key} v{request_codec.version} handler returned {type(response).__name__}"
        )
    out = _Chunks()
    out.write(b"\x00\x00\x00\x00")
    out.write(response_header(correlation_id, request_codec.response_header_version))
    request_codec.writer(out, response)
    first = out.chunks[0]
    assert isinstance(first, bytearray)
    _I32.pack_into(first, 0, out.size - 4)
    return [c for c in out.chunks if len(c)]


class MalformedResponse(LocalProtocolError):
    """A handler returned the wrong response type (a local bug)."""


def encode_api_versions_fallback(correlation_id: int, supported: Mapping[int, VersionRange]) -> bytes:
    """The v0 ApiVersions reply with UNSUPPORTED_VERSION that tells a client to retry lower."""
    fallback = codec(API_VERSIONS, API_VERSIONS_FALLBACK_VERSION)
    module = fallback.response_module
    response = build(
        fallback.response_class,
        error_code=ErrorCode.unsupported_version,
        api_keys=api_version_entries(module, supported),
    )
    return encode_response(fallback, correlation_id, response)


def api_version_entries(response_module: Any, supported: Mapping[int, VersionRange]) -> tuple[Any, ...]:
    entry = response_module.ApiVersion
    return tuple(
        entry(api_key=key, min_version=r.min_version, max_version=r.max_version)
        for key, r in sorted(supported.items())
    )


def encode_unsupported(request: UnsupportedRequest, supported: Mapping[int, VersionRange]) -> bytes:
    """Answer an unsupported api key or version.

    ApiVersions gets the proper v0 fallback. Other apis have no common response shape, so the reply
    is the correlation id and an UNSUPPORTED_VERSION error code: a client that sent a version it was
    never offered gets an error, not silence.
    """
    if request.header.api_key == API_VERSIONS:
        return encode_api_versions_fallback(request.header.correlation_id, supported)
    head = response_header(request.header.correlation_id, 0)
    return frame(head + _I16.pack(int(ErrorCode.unsupported_version)))
