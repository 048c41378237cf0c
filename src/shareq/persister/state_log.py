"""Fast key/value record batches for the state topic.

The state topic holds only uncompressed v2 batches of key/value records without headers, written
here. Encoding and scanning them directly (instead of through general ``Record`` objects) keeps
group-commit appends and start-up replay cheap; the bytes are ordinary v2 batches that
``shareq.log.records.decode_batch`` reads too.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence

from crc32c import crc32c

from shareq.log.batch import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
)
from shareq.log.errors import CorruptRecordError
from shareq.log.records import read_varint

KeyValue = tuple[bytes, bytes | None]
MAX_BATCH_BYTES = 512 * 1024
"""Batches are cut at about this size, well under the log's default max message size."""


def _zigzag_varint(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


_SMALL = [_zigzag_varint(i) for i in range(8192)]
_NULL = _zigzag_varint(-1)


def _varint(n: int) -> bytes:
    return _SMALL[n] if 0 <= n < 8192 else _zigzag_varint(n)


def encode_batches(
    records: Sequence[KeyValue], *, timestamp: int, max_batch_bytes: int = MAX_BATCH_BYTES
) -> list[bytes]:
    """Uncompressed v2 batches (base offset 0; the log assigns offsets) holding ``records``.

    A batch closes once it reaches ``max_batch_bytes`` (it always holds at least one record), so
    the caller can keep each append within the log's segment and message size limits.
    """
    out: list[bytes] = []
    i = 0
    while i < len(records):
        body = bytearray(HEADER_SIZE)
        delta = 0
        while i < len(records):
            key, value = records[i]
            rec = b"\x00\x00" + _varint(delta) + _varint(len(key)) + key
            rec += _NULL + b"\x00" if value is None else _varint(len(value)) + value + b"\x00"
            size = _varint(len(rec))
            if delta and len(body) + len(size) + len(rec) > max_batch_bytes:
                break
            body += size
            body += rec
            delta += 1
            i += 1
        HEADER.pack_into(
            body,
            0,
            0,
            len(body) - LOG_OVERHEAD,
            -1,
            2,
            0,
            0,
            delta - 1,
            timestamp,
            timestamp,
            -1,
            -1,
            -1,
            delta,
        )
        body[CRC_OFFSET : CRC_OFFSET + 4] = crc32c(memoryview(body)[ATTRIBUTES_OFFSET:]).to_bytes(4, "big")
        out.append(bytes(body))
    return out


def iter_records(buf: bytes, *, min_offset: int = 0) -> Iterator[tuple[int, bytes, bytes | None]]:
    """``(offset, key, value)`` of every record at or above ``min_offset`` in whole batches ``buf``."""
    pos = 0
    end = len(buf)
    try:
        while pos < end:
            (base, length, _, magic, crc, attributes, _, _, _, _, _, _, count) = HEADER.unpack_from(buf, pos)
            batch_end = pos + LOG_OVERHEAD + length
            if magic != 2 or batch_end > end or length < MIN_BATCH_LENGTH:
                raise CorruptRecordError(f"bad state batch at byte {pos}")
            if attributes & 0x07:
                raise CorruptRecordError("state batches are never compressed")
            if crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : batch_end]) != crc:
                raise CorruptRecordError(f"state batch at offset {base} fails its CRC32C check")
            p = pos + HEADER_SIZE
            for _ in range(count):
                # One- and two-byte varints are the rule here (record lengths and offset deltas
                # pass 63 quickly); read those inline.
                b = buf[p]
                if b < 0x80:
                    limit = p + 1 + (b >> 1)
                    p += 1
                elif buf[p + 1] < 0x80:
                    limit = p + 2 + (((b & 0x7F) | (buf[p + 1] << 7)) >> 1)
                    p += 2
                else:
                    length_r, p = read_varint(buf, p)
                    limit = p + length_r
                p += 1  # attributes
                if buf[p] < 0x80:  # timestamp delta, unused
                    p += 1
                else:
                    _, p = read_varint(buf, p)
                b = buf[p]
                if b < 0x80:
                    delta = (b >> 1) ^ -(b & 1)
                    p += 1
                elif buf[p + 1] < 0x80:
                    z = (b & 0x7F) | (buf[p + 1] << 7)
                    delta = (z >> 1) ^ -(z & 1)
                    p += 2
                else:
                    delta, p = read_varint(buf, p)
                b = buf[p]
                if b < 0x80 and not b & 1:
                    klen = b >> 1
                    p += 1
                else:
                    klen, p = read_varint(buf, p)
                    if klen < 0:
                        raise CorruptRecordError("state record without a key")
                key = buf[p : p + klen]
                p += klen
                b = buf[p]
                if b < 0x80:
                    vlen = (b >> 1) ^ -(b & 1)
                    p += 1
                else:
                    vlen, p = read_varint(buf, p)
                value = None
                if vlen >= 0:
                    value = buf[p : p + vlen]
                if base + delta >= min_offset:
                    yield base + delta, key, value
                p = limit  # record headers (none written) are skipped
            pos = batch_end
    except (IndexError, ValueError, struct.error) as exc:
        raise CorruptRecordError(f"truncated state batch: {exc}") from None


def batches_end_offset(buf: bytes) -> int:
    """The offset after the last batch in whole batches ``buf`` (0 when empty)."""
    pos = 0
    end_offset = 0
    while pos + HEADER_SIZE <= len(buf):
        header = HEADER.unpack_from(buf, pos)
        end_offset = header[0] + header[6] + 1  # baseOffset + lastOffsetDelta + 1
        pos += LOG_OVERHEAD + header[1]
    return end_offset
