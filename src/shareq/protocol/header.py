"""Request headers (v1/v2) parsed by hand, and response headers written by hand.

The header is parsed before the body's codec is known to exist, so an unsupported api key or
version still yields a correlation id to answer with.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .errors import MalformedRequestError
from .varint import read_uvarint as _read_uvarint

_FIXED = struct.Struct(">hhih")  # api key, api version, correlation id, client id length
_I32 = struct.Struct(">i")


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestHeader:
    """The common part of every request header; ``body_offset`` is where the header ended
    for header v1 (tagged fields of v2 are skipped by ``skip_tagged_fields``)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_offset: int


def parse_request_header(payload: bytes) -> RequestHeader:
    """Parse api key, version, correlation id and client id (the v1 layout, shared by v2)."""
    if len(payload) < _FIXED.size:
        raise MalformedRequestError(f"request header needs {_FIXED.size} bytes, got {len(payload)}")
    api_key, api_version, correlation_id, client_len = _FIXED.unpack_from(payload, 0)
    offset = _FIXED.size
    client_id: str | None = None
    if client_len >= 0:
        end = offset + client_len
        if end > len(payload):
            raise MalformedRequestError("client id runs past the end of the frame")
        try:
            client_id = payload[offset:end].decode()
        except UnicodeDecodeError as error:
            raise MalformedRequestError("client id is not UTF-8") from error
        offset = end
    elif client_len != -1:
        raise MalformedRequestError(f"invalid client id length {client_len}")
    return RequestHeader(
        api_key=api_key,
        api_version=api_version,
        correlation_id=correlation_id,
        client_id=client_id,
        body_offset=offset,
    )


def read_uvarint(payload: bytes, offset: int) -> tuple[int, int]:
    return _read_uvarint(payload, offset, MalformedRequestError)


def skip_tagged_fields(payload: bytes, offset: int) -> int:
    """Skip a tagged-field section (header v2 carries one; no header tag is meaningful to us)."""
    count, offset = read_uvarint(payload, offset)
    for _ in range(count):
        _tag, offset = read_uvarint(payload, offset)
        size, offset = read_uvarint(payload, offset)
        offset += size
        if offset > len(payload):
            raise MalformedRequestError("tagged field runs past the end of the frame")
    return offset


def response_header(correlation_id: int, header_version: int) -> bytes:
    """Response header v0 is the correlation id; v1 adds an empty tagged-field section."""
    if header_version >= 1:
        return _I32.pack(correlation_id) + b"\x00"
    return _I32.pack(correlation_id)
