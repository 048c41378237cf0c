"""The record codecs of Kafka's v2 batches, for the one place the broker re-encodes a batch: a topic
whose ``compression.type`` names a codec other than the batch's (see :mod:`shareq.log.conversion`).

gzip comes with Python; snappy, lz4 and zstd need their libraries (``cramjam`` or
``python-snappy``, ``lz4``, ``zstandard``), and without them such a conversion fails with
:class:`UnsupportedCompressionError`. Output follows the framings Kafka's Java clients read:
xerial-framed snappy, LZ4 frames without a content size, plain gzip and zstd frames.
"""

from __future__ import annotations

import gzip
import struct

from .batch import Compression
from .errors import CorruptRecordError, UnsupportedCompressionError

_XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024
_I32 = struct.Struct(">i")


def compress(codec: Compression, data: bytes, level: int | None = None) -> bytes:
    """``data`` (a batch's record bytes) encoded with ``codec``; ``level`` as the topic's
    ``compression.<codec>.level`` (``None`` or -1: the codec's default)."""
    try:
        if codec is Compression.NONE:
            return data
        if codec is Compression.GZIP:
            return gzip.compress(data, compresslevel=9 if level in (None, -1) else level, mtime=0)
        if codec is Compression.SNAPPY:
            return _snappy(data)
        if codec is Compression.LZ4:
            import lz4.frame  # type: ignore[import-untyped]

            return bytes(
                lz4.frame.compress(
                    data,
                    compression_level=9 if level is None else level,
                    block_size=lz4.frame.BLOCKSIZE_MAX64KB,
                    content_checksum=False,
                    store_size=False,
                )
            )
        if codec is Compression.ZSTD:
            import zstandard

            return bytes(zstandard.ZstdCompressor(level=3 if level is None else level).compress(data))
    except ImportError as exc:
        raise UnsupportedCompressionError(f"no library to write {codec.name} batches: {exc}") from exc
    raise UnsupportedCompressionError(f"unknown compression codec {codec}")


def decompress(codec: Compression, data: bytes) -> bytes:
    """A batch's record bytes, decoded."""
    try:
        if codec is Compression.NONE:
            return data
        if codec is Compression.GZIP:
            return gzip.decompress(data)
        if codec is Compression.SNAPPY:
            return _unsnappy(data)
        if codec is Compression.LZ4:
            import lz4.frame

            return bytes(lz4.frame.decompress(data))
        if codec is Compression.ZSTD:
            import zstandard

            return bytes(zstandard.ZstdDecompressor().decompressobj().decompress(data))
    except ImportError as exc:
        raise UnsupportedCompressionError(f"no library to read {codec.name} batches: {exc}") from exc
    except Exception as exc:
        raise CorruptRecordError(f"corrupt {codec.name} batch: {exc!r}") from exc
    raise UnsupportedCompressionError(f"unknown compression codec {codec}")


def _raw_snappy() -> tuple[object, object]:
    try:
        import cramjam

        return cramjam.snappy.compress_raw, cramjam.snappy.decompress_raw
    except ImportError:
        import snappy  # type: ignore[import-untyped]

        return snappy.compress, snappy.decompress


def _snappy(data: bytes) -> bytes:
    squash, _ = _raw_snappy()
    out = bytearray(_XERIAL_HEADER)
    for start in range(0, len(data), _XERIAL_BLOCK):
        block = bytes(squash(data[start : start + _XERIAL_BLOCK]))  # type: ignore[operator]
        out += _I32.pack(len(block)) + block
    return bytes(out)


def _unsnappy(data: bytes) -> bytes:
    _, inflate = _raw_snappy()
    if not data.startswith(_XERIAL_HEADER[:8]):
        return bytes(inflate(data))  # type: ignore[operator]
    out = bytearray()
    pos = 16
    while pos < len(data):
        (n,) = _I32.unpack_from(data, pos)
        pos += 4
        out += bytes(inflate(data[pos : pos + n]))  # type: ignore[operator]
        pos += n
    return bytes(out)
