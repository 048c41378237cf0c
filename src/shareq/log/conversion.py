"""What a topic's configs ask of an appended batch, besides offsets (Kafka's ``LogValidator``),
without I/O: the timestamp window, ``LogAppendTime`` and the topic's codec.

Batches stay bytes where the topic allows. A CreateTime topic checks every record's timestamp
against ``message.timestamp.before.max.ms`` / ``after.max.ms``, as Kafka does: the header's
``maxTimestamp`` bounds every record from above, so the default window (one hour ahead, no limit
behind) needs the header only, and the records are read (timestamps only) when the header shows a
record too far ahead or when ``before.max.ms`` is bounded (a record may be older than the batch's
first). A compacted topic reads every record's key length and refuses records without a key.
Refusals name each record, as Kafka's ``RecordValidationException`` does.
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
from .errors import CorruptRecordError, InvalidRecordError, InvalidTimestampError
from .record_spans import plain_batch, record_spans

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
    compacted: bool = False

    @classmethod
    def from_configs(
        cls,
        *,
        compression_type: str,
        timestamp_type: str,
        before_max_ms: int,
        after_max_ms: int,
        levels: dict[str, int] | None = None,
        compacted: bool = False,
    ) -> AppendPolicy:
        codec = CODECS.get(compression_type)
        level = None if codec is None else (levels or {}).get(compression_type)
        return cls(
            codec=codec,
            level=level,
            log_append_time=timestamp_type == "LogAppendTime",
            before_max_ms=before_max_ms,
            after_max_ms=after_max_ms,
            compacted=compacted,
        )


DEFAULT_POLICY = AppendPolicy()


def apply_policy(buf: bytearray, policy: AppendPolicy, now_ms: int, where: str = "") -> bytearray:
    """Check ``buf``'s batches against ``policy`` and return the batches to append: ``buf`` itself
    when nothing changes, else a new buffer. ``where`` names the partition (``topic-n``) in
    refusals. Raises :class:`InvalidTimestampError`, :class:`InvalidRecordError` or
    :class:`CorruptRecordError`."""
    converts = policy.codec is not None or policy.log_append_time
    checks_time = not policy.log_append_time and (
        policy.before_max_ms < LONG_MAX or policy.after_max_ms < LONG_MAX
    )
    if not converts and not checks_time and not policy.compacted:
        return buf
    out: bytearray | None = None
    pos, total = 0, len(buf)
    while pos < total:
        if pos + HEADER_SIZE > total:
            break  # the append's own checks name the fault
        h = HEADER.unpack_from(buf, pos)
        length, attributes, max_ts = h[1], h[5], h[8]
        size = length + LOG_OVERHEAD
        if length < MIN_BATCH_LENGTH or pos + size > total:
            break
        control = bool(attributes & CONTROL_MASK)
        if not control:
            times = checks_time and not attributes & TIMESTAMP_TYPE_MASK
            # The header's maximum bounds every record from above; a bounded before.max.ms needs
            # each record's own timestamp.
            read_times = times and (policy.before_max_ms < LONG_MAX or max_ts - now_ms > policy.after_max_ms)
            if policy.compacted or read_times:
                _check_records(bytes(buf[pos : pos + size]), policy, now_ms, where, times=times)
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


def _java_long(value: int) -> int:
    """``value`` as a Java long would hold it (Kafka prints the window's ends after overflow)."""
    return (value + 2**63) % 2**64 - 2**63


def _check_records(batch: bytes, policy: AppendPolicy, now_ms: int, where: str, *, times: bool) -> None:
    """Kafka's per-record checks: a key on a compacted topic (first), then the timestamp window.
    Every refused record is named; the batch is refused whole."""
    if crc32c(batch[ATTRIBUTES_OFFSET:]) != _U32.unpack_from(batch, CRC_OFFSET)[0]:
        raise CorruptRecordError("batch fails its CRC32C check")
    errors: list[tuple[int, str]] = []
    late = False
    for index, record in enumerate(record_spans(plain_batch(batch))):
        if policy.compacted and record.key is None:
            errors.append(
                (index, f"Compacted topic cannot accept message without key in topic partition {where}")
            )
            continue
        ts = record.timestamp
        if times and ts >= 0 and (now_ms - ts > policy.before_max_ms or ts - now_ms > policy.after_max_ms):
            low, high = _java_long(now_ms - policy.before_max_ms), _java_long(now_ms + policy.after_max_ms)
            errors.append(
                (
                    index,
                    f"Timestamp {ts} of message with offset {record.offset} is out of range. "
                    f"The timestamp should be within [{low}, {high}]",
                )
            )
            late = True
    if not errors:
        return
    if late:
        raise InvalidTimestampError(
            "One or more records have been rejected due to invalid timestamp", tuple(errors)
        )
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors[:3])
    raise InvalidRecordError(
        f"One or more records have been rejected due to {len(errors)} record errors in total, "
        f"and only showing the first three errors at most: [{shown}]",
        tuple(errors),
    )


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
