"""Error kinds of the wire layer: peer faults (the client sent something wrong) versus local bugs.

Only the server edge turns these into a closed connection or an ``ErrorCode``.
"""

from __future__ import annotations


class ProtocolError(Exception):
    """Base class of every wire-layer error."""


class PeerProtocolError(ProtocolError):
    """The peer violated the protocol (bad frame, bad header, undecodable body): close its connection."""


class FrameTooLargeError(PeerProtocolError):
    """A length prefix announced more than the configured maximum frame size."""


class MalformedRequestError(PeerProtocolError):
    """A request header or body could not be decoded."""


class UnsupportedApiError(ProtocolError):
    """An api key or version this broker does not implement; answered, not fatal to the connection."""

    def __init__(self, api_key: int, api_version: int) -> None:
        super().__init__(f"unsupported api key {api_key} version {api_version}")
        self.api_key = api_key
        self.api_version = api_version


class LocalProtocolError(ProtocolError):
    """This side tried to produce something the protocol forbids (a bug here, not in the peer)."""
