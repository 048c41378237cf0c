"""Length-prefixed frames: a 4-byte big-endian size, then that many bytes.

``FrameDecoder`` is fed bytes as they arrive and hands back whole frames; it never touches a socket.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from .errors import FrameTooLargeError, PeerProtocolError

_SIZE = struct.Struct(">i")
DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes


class FrameDecoder:
    """Splits a byte stream into frames; raises ``FrameTooLargeError`` as soon as a prefix is too big."""

    __slots__ = ("_buffer", "_max_frame_bytes")

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self._buffer = bytearray()
        self._max_frame_bytes = max_frame_bytes

    def receive_data(self, data: bytes) -> None:
        self._buffer += data

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    def frames(self) -> Iterator[bytes]:
        """Yield every complete frame buffered so far."""
        while True:
            frame = self.next_frame()
            if frame is None:
                return
            yield frame

    def next_frame(self) -> bytes | None:
        buffer = self._buffer
        if len(buffer) < 4:
            return None
        (size,) = _SIZE.unpack_from(buffer, 0)
        check_frame_size(size, self._max_frame_bytes)
        end = 4 + size
        if len(buffer) < end:
            return None
        frame = bytes(buffer[4:end])
        del buffer[:end]
        return frame


def check_frame_size(size: int, max_frame_bytes: int) -> None:
    """Reject negative or oversized length prefixes (a peer fault)."""
    if size < 0:
        raise PeerProtocolError(f"negative frame size {size}")
    if size > max_frame_bytes:
        raise FrameTooLargeError(f"frame of {size} bytes exceeds the limit of {max_frame_bytes}")


def read_frame_size(prefix: bytes, max_frame_bytes: int) -> int:
    """Decode and check a 4-byte length prefix."""
    size: int = _SIZE.unpack(prefix)[0]
    check_frame_size(size, max_frame_bytes)
    return size


def frame(payload: bytes) -> bytes:
    """Prefix ``payload`` with its length."""
    return _SIZE.pack(len(payload)) + payload
