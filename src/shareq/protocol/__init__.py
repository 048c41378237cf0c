"""The Kafka wire protocol without I/O: framing, headers, cached kio codecs, supported versions."""

from .codec import Codec, build, codec
from .error_codes import error_code_for
from .errors import (
    FrameTooLargeError,
    LocalProtocolError,
    MalformedRequestError,
    PeerProtocolError,
    ProtocolError,
    UnsupportedApiError,
)
from .framing import DEFAULT_MAX_FRAME_BYTES, FrameDecoder, frame, read_frame_size
from .header import RequestHeader, parse_request_header
from .messages import (
    DirectResponse,
    Request,
    UnsupportedRequest,
    api_version_entries,
    decode_request,
    encode_api_versions_fallback,
    encode_response,
    encode_response_chunks,
    encode_unsupported,
)
from .versions import VersionRange

__all__ = [
    "DEFAULT_MAX_FRAME_BYTES",
    "Codec",
    "DirectResponse",
    "FrameDecoder",
    "FrameTooLargeError",
    "LocalProtocolError",
    "MalformedRequestError",
    "PeerProtocolError",
    "ProtocolError",
    "Request",
    "RequestHeader",
    "UnsupportedApiError",
    "UnsupportedRequest",
    "VersionRange",
    "api_version_entries",
    "build",
    "codec",
    "decode_request",
    "encode_api_versions_fallback",
    "encode_response",
    "encode_response_chunks",
    "encode_unsupported",
    "error_code_for",
    "frame",
    "parse_request_header",
    "read_frame_size",
]
