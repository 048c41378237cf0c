"""Where each record of a batch lies, with its offset, key and timestamp, reading only lengths,
deltas and keys (values and headers are skipped, never copied).

Three places need more than a batch header and less than a full decode: the cleaner (keys and
timestamps), the append checks a topic asks for (a compacted topic refuses records without a key;
a bounded ``message.timestamp.before.max.ms`` checks every record's timestamp, which the header
does not bound from below) and ListOffsets (the record carrying a timestamp). A compressed batch is
decompressed first with :func:`plain_batch`.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from .batch import ATTRIBUTES_OFFSET, COMPRESSION_MASK, HEADER, HEADER_SIZE, LOG_OVERHEAD, Compression
from .codecs import decompress
from .errors import CorruptRecordError
from .records import read_varint

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_H_BASE_OFFSET, _H_ATTRIBUTES, _H_BASE_TIMESTAMP, _H_MAX_TIMESTAMP, _H_RECORDS = 0, 5, 7, 8, 12
_LOG_APPEND_TIME = 0x08


class RecordSpan(NamedTuple):
    start: int  # byte position of the record (its length varint) in the plain batch
    end: int
    offset: int  # base offset + offset delta
    key: bytes | None
    timestamp: int
    tombstone: bool


def plain_batch(batch: bytes) -> bytes:
    """``batch`` with its records section uncompressed (length and codec bits patched; the CRC is
    left as it was, so the result is for reading only)."""
    attributes = _I16.unpack_from(batch, ATTRIBUTES_OFFSET)[0]
    codec = Compression(attributes & COMPRESSION_MASK)
    if codec is Compression.NONE:
        return batch
    out = bytearray(batch[:HEADER_SIZE])
    out += decompress(codec, batch[HEADER_SIZE:])
    _I32.pack_into(out, 8, len(out) - LOG_OVERHEAD)
    _I16.pack_into(out, ATTRIBUTES_OFFSET, attributes & ~COMPRESSION_MASK)
    return bytes(out)


def record_spans(plain: bytes) -> list[RecordSpan]:
    """The records of an uncompressed batch. Raises :class:`CorruptRecordError` if a record runs
    past the batch."""
    header = HEADER.unpack_from(plain, 0)
    base, base_ts, max_ts = header[_H_BASE_OFFSET], header[_H_BASE_TIMESTAMP], header[_H_MAX_TIMESTAMP]
    log_append = bool(header[_H_ATTRIBUTES] & _LOG_APPEND_TIME)
    out: list[RecordSpan] = []
    pos, end = HEADER_SIZE, len(plain)
    try:
        for _ in range(header[_H_RECORDS]):
            length, body = read_varint(plain, pos)
            limit = body + length
            if length < 0 or limit > end:
                raise CorruptRecordError("record length runs past the end of its batch")
            ts_delta, p = read_varint(plain, body + 1)
            offset_delta, p = read_varint(plain, p)
            key_length, p = read_varint(plain, p)
            key = None if key_length < 0 else plain[p : p + key_length]
            p += max(key_length, 0)
            value_length, p = read_varint(plain, p)
            timestamp = max_ts if log_append else base_ts + ts_delta
            out.append(RecordSpan(pos, limit, base + offset_delta, key, timestamp, value_length < 0))
            pos = limit
    except (IndexError, ValueError) as exc:
        raise CorruptRecordError(f"unreadable record: {exc}") from exc
    return out
