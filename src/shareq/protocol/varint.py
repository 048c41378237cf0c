"""Kafka's unsigned varint (array and string lengths, tagged fields of flexible versions).

One reader and one writer serve request headers, the body guard and the share-state records; the
caller names the error a malformed varint should raise, so each layer keeps its own fault kind.
"""

from __future__ import annotations

MAX_UVARINT_BYTES = 5
"""Kafka's unsigned varints carry 32 bits, so five bytes at most."""


def read_uvarint(
    buf: bytes | bytearray | memoryview, pos: int, error: type[Exception] = ValueError
) -> tuple[int, int]:
    """The unsigned varint at ``pos`` and the position after it; ``error`` when cut short or too long."""
    result = 0
    end = len(buf)
    for shift in range(0, 7 * MAX_UVARINT_BYTES, 7):
        if pos >= end:
            raise error("unsigned varint runs past the end of its buffer")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
    raise error(f"unsigned varint longer than {MAX_UVARINT_BYTES} bytes")


def write_uvarint(out: bytearray, n: int) -> None:
    """Append ``n`` (non-negative) as an unsigned varint."""
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
