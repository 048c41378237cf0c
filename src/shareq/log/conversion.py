"""What a topic's configs ask of an appended batch, besides offsets (Kafka's ``LogValidator``),
without I/O: the timestamp window, ``LogAppendTime`` and the topic's codec.

Batches stay bytes. A CreateTime topic checks each batch's first and maximum timestamps against
``message.timestamp.before.max.ms`` / ``after.max.ms`` (Kafka checks every record; the header
holds the first and the largest, which bound all of them except a record dated before the first).
A ``LogAppendTime`` topic sets the timestamp-type bit and ``maxTimestamp`` to the broker's clock.
A topic whose ``compression.type`` names a codec re-encodes a batch in another codec: the records
section is decompressed and compressed again, record bytes untouched. The CRC32C of a changed
batch is recomputed; the original's is checked first so a corrupt batch is never laundered.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from crc32c import crc32c

from .batch import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    CONTROL_MASK,
    CRC_OFFSET,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAX_TIMESTAMP_OFFSET,
    MIN_BATCH_LENGTH,
    TIMESTAMP_TYPE_MASK,
    Compression,
)
from .codecs import compress, decompress
from .errors import CorruptRecordError, InvalidTimestampError

LONG_MAX = 2**63 - 1
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")

CODECS = {
    "uncompressed": Compression.NONE,
    "gzip": Compression.GZIP,
    "snappy": Compression.SNAPPY,
    "lz4": Compression.LZ4,
    "zstd": Compression.ZSTD,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class AppendPolicy:
    """The topic configs an append honours. ``codec=None`` keeps the producer's codec."""

    codec: Compression | None = None
    level: int | None = None
    log_append_time: bool = False
    before_max_ms: int = LONG_MAX
    after_max_ms: int = 3_600_000

    @classmethod
    def from_configs(
        cls,
        *,
        compression_type: str,
        timestamp_type: str,
        before_max_ms: int,
        after_max_ms: int,
        levels: dict[str, int] | None = None,
    ) -> AppendPolicy:
        codec = CODECS.get(compression_type)
        level = None if codec is None else (levels or {}).get(compression_type)
        return cls(
            codec=codec,
            level=level,
            log_append_time=timestamp_type == "LogAppendTime",
            before_max_ms=before_max_ms,
            after_max_ms=after_max_ms,
        )


DEFAULT_POLICY = AppendPolicy()


def apply_policy(buf: bytearray, policy: AppendPolicy, now_ms: int) -> bytearray:
    """Check ``buf``'s batches against ``policy`` and return the batches to append: ``buf`` itself
    when nothing changes, else a new buffer. Raises :class:`InvalidTimestampError` or
    :class:`CorruptRecordError`."""
    converts = policy.codec is not None or policy.log_append_time
    bounded = policy.before_max_ms < LONG_MAX or policy.after_max_ms < LONG_MAX
    checks = not policy.log_append_time and bounded
    if not converts and not checks:
        return buf
    low = now_ms - policy.before_max_ms if policy.before_max_ms < now_ms else -(2**63)
    high = now_ms + policy.after_max_ms if policy.after_max_ms < LONG_MAX - now_ms else LONG_MAX
    out: bytearray | None = None
    pos, total = 0, len(buf)
    while pos < total:
        if pos + HEADER_SIZE > total:
            break  # the append's own checks name the fault
        h = HEADER.unpack_from(buf, pos)
        length, attributes, base_ts, max_ts = h[1], h[5], h[7], h[8]
        size = length + LOG_OVERHEAD
        if length < MIN_BATCH_LENGTH or pos + size > total:
            break
        control = bool(attributes & CONTROL_MASK)
        if checks and not control and not attributes & TIMESTAMP_TYPE_MASK:
            for ts in (base_ts, max_ts):
                if ts >= 0 and not low <= ts <= high:
                    raise InvalidTimestampError(
                        f"Timestamp {ts} of message with offset 0 is out of range. "
                        f"The timestamp should be within [{low}, {high}]"
                    )
        if converts and not control:
            batch = bytes(buf[pos : pos + size])
            converted = _convert(batch, policy, now_ms)
            if converted is not batch:
                if out is None:
                    out = bytearray(buf[:pos])
                out += converted
                pos += size
                continue
        if out is not None:
            out += buf[pos : pos + size]
        pos += size
    if out is None:
        return buf
    out += buf[pos:]
    return out


def _convert(batch: bytes, policy: AppendPolicy, now_ms: int) -> bytes:
    attributes = _I16.unpack_from(batch, ATTRIBUTES_OFFSET)[0]
    codec = Compression(attributes & COMPRESSION_MASK)
    recompress = policy.codec is not None and policy.codec is not codec
    if not recompress and not policy.log_append_time:
        return batch
    if crc32c(batch[ATTRIBUTES_OFFSET:]) != _U32.unpack_from(batch, CRC_OFFSET)[0]:
        raise CorruptRecordError("batch fails its CRC32C check")
    out = bytearray(batch[:HEADER_SIZE])
    if recompress:
        assert policy.codec is not None
        body = compress(policy.codec, decompress(codec, batch[HEADER_SIZE:]), policy.level)
        attributes = (attributes & ~COMPRESSION_MASK) | int(policy.codec)
        out += body
        _I32.pack_into(out, 8, len(out) - LOG_OVERHEAD)
    else:
        out += batch[HEADER_SIZE:]
    if policy.log_append_time:
        attributes |= TIMESTAMP_TYPE_MASK
        _I64.pack_into(out, MAX_TIMESTAMP_OFFSET, now_ms)
    _I16.pack_into(out, ATTRIBUTES_OFFSET, attributes)
    _U32.pack_into(out, CRC_OFFSET, crc32c(out[ATTRIBUTES_OFFSET:]))
    return bytes(out)
