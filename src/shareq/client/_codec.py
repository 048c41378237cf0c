"""Request/response codec for the client: kio entities cached per (api key, version).

The request header version follows the request class (v2 when flexible, v1 otherwise); the response header is
read with the class kio attaches to each response (ApiVersions always uses response header v0).
"""

from __future__ import annotations

import functools
import io
import struct
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from kio.index import load_payload_module, load_request_schema, load_response_schema
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32

_SIZE = struct.Struct(">i")
_CORRELATION = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class Codec:
    """Everything needed to speak one (api key, version)."""

    api_key: int
    version: int
    request_class: type[Any]
    response_class: type[Any]
    write_request: Callable[[io.BytesIO, Any], None]
    read_response: Callable[[bytes, int], tuple[Any, int]]
    read_response_header: Callable[[bytes, int], tuple[Any, int]]


@functools.cache
def codec(api_key: int, version: int) -> Codec:
    request_class = load_request_schema(api_key, version)
    response_class = load_response_schema(api_key, version)
    return Codec(
        api_key=api_key,
        version=version,
        request_class=request_class,
        response_class=response_class,
        write_request=entity_writer(request_class),
        read_response=entity_reader(response_class),
        read_response_header=entity_reader(response_class.__header_schema__),
    )


@functools.cache
def request_module(api_key: int, version: int) -> ModuleType:
    """The kio module holding the request classes (top level and nested) of one version."""
    return load_payload_module(api_key, version, EntityType.request)


@functools.cache
def response_module(api_key: int, version: int) -> ModuleType:
    return load_payload_module(api_key, version, EntityType.response)


_write_header_v1 = entity_writer(RequestHeaderV1)
_write_header_v2 = entity_writer(RequestHeaderV2)


def encode_request(request: Any, correlation_id: int, client_id: str | None) -> bytes:
    """Serialise ``request`` with its header, length-prefixed, ready for the socket."""
    c = codec(int(request.__api_key__), int(request.__version__))
    buf = io.BytesIO()
    buf.write(b"\x00\x00\x00\x00")
    if request.__flexible__:
        _write_header_v2(
            buf,
            RequestHeaderV2(
                request_api_key=i16(c.api_key),
                request_api_version=i16(c.version),
                correlation_id=i32(correlation_id),
                client_id=client_id,
            ),
        )
    else:
        _write_header_v1(
            buf,
            RequestHeaderV1(
                request_api_key=i16(c.api_key),
                request_api_version=i16(c.version),
                correlation_id=i32(correlation_id),
                client_id=client_id,
            ),
        )
    c.write_request(buf, request)
    out = buf.getbuffer()
    _SIZE.pack_into(out, 0, len(out) - 4)
    return bytes(out)


def peek_correlation_id(payload: bytes) -> int:
    """Every response header starts with the correlation id."""
    return int(_CORRELATION.unpack_from(payload, 0)[0])


def decode_response(api_key: int, version: int, payload: bytes) -> Any:
    """Parse a response frame (without its length prefix). Trailing bytes are tolerated."""
    c = codec(api_key, version)
    _header, pos = c.read_response_header(payload, 0)
    response, _ = c.read_response(payload, pos)
    return response
