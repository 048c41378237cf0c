"""Columnar decoding of fetched v2 record batches, straight into Arrow column lists.

A task wants a few runs of offsets out of whatever batches a Fetch returns. Decoding every record
into an object first (what a general consumer does) costs more than the rest of the read path
together, so this walks each batch once: records outside the runs are skipped after three varints,
records inside append their fields to the builder's columns. Compressed batches are inflated with
the client's codecs; control batches are skipped; CRCs are checked.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from shareq.log.batch import HEADER_SIZE, LOG_OVERHEAD, BatchHeader, Compression, crc_ok, read_batch_header
from shareq.log.errors import CorruptRecordError
from shareq.log.records import read_varint

from .offsets import Run
from .schema import ArrowBuilder

_LENGTH = struct.Struct(">qi")
_CONTROL = 0x20
_LOG_APPEND_TIME = 0x08


def _inflate(buf: bytes, pos: int, size: int, codec: int) -> bytes:
    from shareq.client.records import decompress

    return decompress(Compression(codec), bytes(buf[pos + HEADER_SIZE : pos + size]))


class RunCursor:
    """Walks sorted runs forward: is an offset wanted, and with which delivery count."""

    __slots__ = ("_index", "_runs")

    def __init__(self, runs: Sequence[Run]) -> None:
        self._runs = runs
        self._index = 0

    @property
    def done(self) -> bool:
        return self._index >= len(self._runs)

    def count_for(self, offset: int) -> int | None:
        """The run's delivery count if ``offset`` is wanted, else None (offsets must not go back)."""
        runs = self._runs
        i = self._index
        while i < len(runs) and runs[i][1] < offset:
            i += 1
        self._index = i
        if i < len(runs) and runs[i][0] <= offset:
            return runs[i][2]
        return None


def decode_into(
    blob: bytes, cursor: RunCursor, builder: ArrowBuilder, *, share: bool, position: int
) -> tuple[int, int]:
    """Append the wanted records of ``blob`` to ``builder``.

    Returns ``(next fetch offset, records appended)``; the next offset stays at ``position`` when
    the blob holds no whole batch.
    """
    pos = 0
    end = len(blob)
    next_offset = position
    added = 0
    while pos + LOG_OVERHEAD <= end and not cursor.done:
        _base, length = _LENGTH.unpack_from(blob, pos)
        size = length + LOG_OVERHEAD
        if pos + size > end or size < HEADER_SIZE:
            break  # a truncated trailing batch: fetch it again from its start
        header = read_batch_header(blob, pos)
        next_offset = max(next_offset, header.base_offset + header.last_offset_delta + 1)
        if header.attributes & _CONTROL or header.base_offset + header.last_offset_delta < position:
            pos += size
            continue
        if not crc_ok(blob, pos, header):
            raise CorruptRecordError(f"batch at offset {header.base_offset} fails its CRC32C check")
        codec = header.attributes & 0x07
        if codec:
            body, p, limit_all = _inflate(blob, pos, size, codec), 0, None
        else:
            body, p, limit_all = blob, pos + HEADER_SIZE, pos + size
        added += _records(body, p, header, cursor, builder, share=share, limit_all=limit_all)
        pos += size
    return next_offset, added


def _records(
    buf: bytes,
    p: int,
    header: BatchHeader,
    cursor: RunCursor,
    builder: ArrowBuilder,
    *,
    share: bool,
    limit_all: int | None,
) -> int:
    base_offset = header.base_offset
    base_ts = header.base_timestamp
    log_append = bool(header.attributes & _LOG_APPEND_TIME)
    ts_type = 1 if log_append else 0
    end = len(buf) if limit_all is None else limit_all
    added = 0
    for _ in range(header.records_count):
        b = buf[p]
        if b < 0x80:
            length, p = (b >> 1) ^ -(b & 1), p + 1
        else:
            length, p = read_varint(buf, p)
        limit = p + length
        if length < 0 or limit > end:
            raise CorruptRecordError("record length runs past the end of its batch")
        p += 1  # record attributes
        b = buf[p]
        if b < 0x80:
            ts_delta, p = (b >> 1) ^ -(b & 1), p + 1
        else:
            ts_delta, p = read_varint(buf, p)
        b = buf[p]
        if b < 0x80:
            offset_delta, p = (b >> 1) ^ -(b & 1), p + 1
        else:
            offset_delta, p = read_varint(buf, p)
        offset = base_offset + offset_delta
        count = cursor.count_for(offset)
        if count is None:
            p = limit
            if cursor.done:
                break
            continue
        b = buf[p]
        if b < 0x80:
            n, p = (b >> 1) ^ -(b & 1), p + 1
        else:
            n, p = read_varint(buf, p)
        if n < 0:
            key = None
        else:
            key, p = buf[p : p + n], p + n
        b = buf[p]
        if b < 0x80:
            n, p = (b >> 1) ^ -(b & 1), p + 1
        else:
            n, p = read_varint(buf, p)
        if n < 0:
            value = None
        else:
            value, p = buf[p : p + n], p + n
        headers: list[tuple[str, bytes | None]] = []
        b = buf[p]
        if b < 0x80:
            n_headers, p = (b >> 1) ^ -(b & 1), p + 1
        else:
            n_headers, p = read_varint(buf, p)
        for _ in range(n_headers):
            n, p = read_varint(buf, p)
            name = buf[p : p + n].decode()
            p += n
            n, p = read_varint(buf, p)
            if n < 0:
                headers.append((name, None))
            else:
                headers.append((name, buf[p : p + n]))
                p += n
        if p != limit:
            raise CorruptRecordError("record length does not match its fields")
        timestamp = header.max_timestamp if log_append else base_ts + ts_delta
        builder.append(offset, timestamp, ts_type, key, value, headers, count if share else None)
        added += 1
    return added
