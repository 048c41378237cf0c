"""Records as the client hands them out, and decoding of fetched record batches.

Uncompressed batches go straight to ``shareq.log.records.decode_batch``. Compressed batches (written by other
producers) are inflated here, rewrapped as an uncompressed batch and decoded the same way: decompression is
a client concern, the broker never decodes records.
"""

from __future__ import annotations

import gzip
import struct
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

from shareq.log.batch import (
    COMPRESSION_MASK,
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    Compression,
    crc_ok,
    read_batch_header,
)
from shareq.log.errors import CorruptRecordError
from shareq.log.records import RecordBatch, decode_batch

from .errors import ClientError

Header = tuple[str, bytes | None]


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerRecord:
    """One consumed record. ``topic_id``/``partition``/``offset`` identify it for a later acknowledgement,
    from any process. ``delivery_count`` is set for records acquired through a share group."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()
    timestamp: int = -1
    topic_id: uuid.UUID | None = None
    delivery_count: int | None = None
    leader_epoch: int = -1


class DecompressionError(ClientError):
    """A compressed batch could not be inflated (unknown codec, missing library or corrupt data)."""


_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_I32 = struct.Struct(">i")
_LENGTH_AND_ATTRS = struct.Struct(">qi")


def _snappy(data: bytes) -> bytes:
    try:
        import cramjam

        def raw(b: bytes) -> bytes:
            return bytes(cramjam.snappy.decompress_raw(b))
    except ImportError:  # pragma: no cover - depends on installed extras
        import snappy  # type: ignore[import-untyped]

        def raw(b: bytes) -> bytes:
            return bytes(snappy.decompress(b))

    if data.startswith(_XERIAL_MAGIC):
        # Java's framing: 16-byte header, then (length i32, raw snappy block)*.
        out = bytearray()
        pos = 16
        while pos < len(data):
            (n,) = _I32.unpack_from(data, pos)
            pos += 4
            out += raw(data[pos : pos + n])
            pos += n
        return bytes(out)
    return raw(data)


def _lz4(data: bytes) -> bytes:
    import lz4.frame  # type: ignore[import-untyped]

    return bytes(lz4.frame.decompress(data))


def _zstd(data: bytes) -> bytes:
    import zstandard

    # Frames from some producers omit the content size: stream-decompress instead of one-shot.
    return bytes(zstandard.ZstdDecompressor().decompressobj().decompress(data))


def decompress(codec: Compression, data: bytes) -> bytes:
    try:
        if codec is Compression.GZIP:
            return gzip.decompress(data)
        if codec is Compression.SNAPPY:
            return _snappy(data)
        if codec is Compression.LZ4:
            return _lz4(data)
        if codec is Compression.ZSTD:
            return _zstd(data)
    except ImportError as exc:
        raise DecompressionError(f"no library to inflate {codec.name} batches: {exc}") from exc
    except Exception as exc:
        raise DecompressionError(f"corrupt {codec.name} batch: {exc!r}") from exc
    raise DecompressionError(f"unknown compression codec {codec}")


def _inflate(buf: bytes, pos: int, header: BatchHeader) -> bytes:
    """Rebuild a compressed batch as the equivalent uncompressed one (CRC not recomputed)."""
    body = decompress(header.compression, bytes(buf[pos + HEADER_SIZE : pos + header.size]))
    out = bytearray(buf[pos : pos + HEADER_SIZE])
    out += body
    _I32.pack_into(out, 8, len(out) - LOG_OVERHEAD)
    out[22] = out[22] & ~COMPRESSION_MASK & 0xFF  # low byte of the i16 attributes at offset 21
    return bytes(out)


def iter_record_batches(buf: bytes) -> Iterator[RecordBatch]:
    """Decode every whole batch in a fetched ``records`` blob; a truncated trailing batch is ignored."""
    pos = 0
    end = len(buf)
    while pos + LOG_OVERHEAD <= end:
        (_base, length) = _LENGTH_AND_ATTRS.unpack_from(buf, pos)
        size = length + LOG_OVERHEAD
        if pos + size > end or size < HEADER_SIZE:
            return
        header = read_batch_header(buf, pos)
        if header.compression is Compression.NONE:
            yield decode_batch(buf, pos, verify_crc=True)
        else:
            if not crc_ok(buf, pos, header):
                raise CorruptRecordError(f"batch at offset {header.base_offset} fails its CRC32C check")
            inflated = decode_batch(_inflate(buf, pos, header), 0, verify_crc=False)
            yield RecordBatch(header=header, records=inflated.records)  # keep the real header
        pos += size


def batch_headers(buf: bytes) -> Iterator[BatchHeader]:
    """The headers of every whole batch in ``buf`` (no decoding of records)."""
    pos = 0
    end = len(buf)
    while pos + LOG_OVERHEAD <= end:
        (_base, length) = _LENGTH_AND_ATTRS.unpack_from(buf, pos)
        size = length + LOG_OVERHEAD
        if pos + size > end or size < HEADER_SIZE:
            return
        yield read_batch_header(buf, pos)
        pos += size
