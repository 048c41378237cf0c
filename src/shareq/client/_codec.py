"""The client's side of the kio codec: requests out, responses in.

Classes come from ``shareq.protocol.codec`` (cached per (api key, version)); this module adds, once per
(api key, version), the request writer and response readers the client direction needs, and hand-written
request headers (v1, or v2 with an empty tagged-field section when the request is flexible).
"""

from __future__ import annotations

import functools
import io
import struct
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from kio.serial import entity_reader, entity_writer

from shareq.protocol import codec as server_codec
from shareq.protocol import frame
from shareq.protocol.guard import check_body

_HEADER = struct.Struct(">hhi")  # api key, api version, correlation id
_I16 = struct.Struct(">h")
_CORRELATION = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class ClientCodec:
    api_key: int
    version: int
    flexible_request: bool
    response_class: type[Any]
    write_request: Callable[[io.BytesIO, Any], None]
    read_response: Callable[[bytes, int], tuple[Any, int]]
    read_response_header: Callable[[bytes, int], tuple[Any, int]]


@functools.cache
def client_codec(api_key: int, version: int) -> ClientCodec:
    c = server_codec(api_key, version)
    return ClientCodec(
        api_key=api_key,
        version=version,
        flexible_request=c.request_header_version >= 2,
        response_class=c.response_class,
        write_request=entity_writer(c.request_class),
        read_response=entity_reader(c.response_class),
        read_response_header=entity_reader(c.response_class.__header_schema__),
    )


@functools.cache
def request_module(api_key: int, version: int) -> ModuleType:
    """The kio module holding the request classes (top level and nested) of one version."""
    import sys

    return sys.modules[server_codec(api_key, version).request_class.__module__]


def encode_request(request: Any, correlation_id: int, client_id: str | None) -> bytes:
    """Serialise ``request`` with its header, length-prefixed, ready for the socket."""
    c = client_codec(int(request.__api_key__), int(request.__version__))
    buf = io.BytesIO()
    buf.write(_HEADER.pack(c.api_key, c.version, correlation_id))
    if client_id is None:
        buf.write(_I16.pack(-1))
    else:
        raw = client_id.encode()
        buf.write(_I16.pack(len(raw)))
        buf.write(raw)
    if c.flexible_request:
        buf.write(b"\x00")  # no tagged fields in the header
    c.write_request(buf, request)
    return frame(buf.getvalue())


def peek_correlation_id(payload: bytes) -> int:
    """Every response header starts with the correlation id."""
    return int(_CORRELATION.unpack_from(payload, 0)[0])


def decode_response(api_key: int, version: int, payload: bytes) -> Any:
    """Parse a response frame (without its length prefix). Trailing bytes are tolerated."""
    c = client_codec(api_key, version)
    _header, pos = c.read_response_header(payload, 0)
    # Same guard as for requests: lengths must fit the frame, unknown tagged fields are dropped.
    payload = check_body(c.response_class, payload, pos)
    response, _ = c.read_response(payload, pos)
    return response


@functools.cache
def response_module(api_key: int, version: int) -> ModuleType:
    """The kio module holding the response classes of one version (used by tests and parsers)."""
    import sys

    return sys.modules[server_codec(api_key, version).response_class.__module__]
