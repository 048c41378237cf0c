"""Encode and decode UNCOMPRESSED v2 record batches.

The broker's hot paths never call this module: it serves internal topics (the share-group state
topic), tests and our own client. Compressed batches are refused with
:class:`UnsupportedCompressionError`; they pass through the log untouched anyway.

Record layout inside a batch (varints are zigzag-encoded)::

    length varint | attributes i8 | timestampDelta varlong | offsetDelta varint
    keyLength varint | key | valueLength varint | value
    headerCount varint | (keyLength varint | key utf-8 | valueLength varint | value)*
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

from crc32c import crc32c

from .batch import (
    ATTRIBUTES_OFFSET,
    CONTROL_MASK,
    CRC_OFFSET,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchHeader,
    Compression,
    TimestampType,
    crc_ok,
    read_batch_header,
)
from .errors import CorruptRecordError, UnsupportedCompressionError

Header = tuple[str, bytes | None]

_CRC = struct.Struct(">I")
_CONTROL_KEY = struct.Struct(">hh")  # version, type
_CONTROL_VALUE = struct.Struct(">hi")  # version, coordinatorEpoch
CONTROL_TYPE_ABORT = 0
CONTROL_TYPE_COMMIT = 1
# Seed 004's in-log share state: control records that only the share-partition leader reads.
CONTROL_TYPE_SHARE_CHECKPOINT = 5
CONTROL_TYPE_SHARE_DELTA = 6
SHARE_CONTROL_TYPES = frozenset((CONTROL_TYPE_SHARE_CHECKPOINT, CONTROL_TYPE_SHARE_DELTA))


@dataclass(frozen=True, slots=True, kw_only=True)
class Record:
    """One record. ``offset`` and ``timestamp`` are absolute; when encoding, ``offset`` is ignored
    (records get consecutive offsets) and ``timestamp=None`` means the batch's base timestamp."""

    key: bytes | None = None
    value: bytes | None = None
    headers: tuple[Header, ...] = ()
    timestamp: int | None = None
    offset: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordBatch:
    """A decoded batch: its header plus its records (absolute offsets and timestamps)."""

    header: BatchHeader
    records: tuple[Record, ...] = field(default=())


def _zigzag(n: int) -> int:
    return (n << 1) ^ (n >> 63)


def write_varint(out: bytearray, n: int) -> None:
    """Append the zigzag varint (up to 64 bits) of ``n``."""
    z = _zigzag(n) & 0xFFFFFFFFFFFFFFFF
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)


def read_varint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Read a zigzag varint at ``pos``; return ``(value, next position)``.

    The one-byte case returns at once: it is nearly every length and delta in a batch, and this
    reader serves the state-log replay and the Spark decoder's hot loops too.
    """
    try:
        b = buf[pos]
        if b < 0x80:
            return (b >> 1) ^ -(b & 1), pos + 1
        result = b & 0x7F
        shift = 7
        pos += 1
        while True:
            b = buf[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                return (result >> 1) ^ -(result & 1), pos
            shift += 7
            if shift > 63:
                raise CorruptRecordError("varint longer than 10 bytes")
    except IndexError:
        raise CorruptRecordError("truncated varint") from None


def _read_bytes(buf: bytes | bytearray | memoryview, pos: int, limit: int) -> tuple[bytes | None, int]:
    n, pos = read_varint(buf, pos)
    if n < 0:
        return None, pos
    if pos + n > limit:
        raise CorruptRecordError("record field runs past the end of its record")
    return bytes(buf[pos : pos + n]), pos + n


_ONE_BYTE = [bytes((z,)) for z in range(0x80)]
_NULL = _ONE_BYTE[1]  # zigzag(-1): a null key, value or header value
_NAMES: dict[str, bytes] = {}
_NAMES_MAX = 1024


def _varint(n: int) -> bytes:
    """The zigzag varint of ``n`` as bytes; small values (lengths, deltas) from a table."""
    z = ((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF
    if z < 0x80:
        return _ONE_BYTE[z]
    if z < 0x4000:  # record lengths of up to 8 KiB
        return bytes(((z & 0x7F) | 0x80, z >> 7))
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def _header_name(name: str) -> bytes:
    """A header name with its length prefix, cached: producers and the dead-letter writer repeat
    the same few names on every record."""
    encoded = _NAMES.get(name)
    if encoded is None:
        raw = name.encode()
        encoded = _varint(len(raw)) + raw
        if len(_NAMES) < _NAMES_MAX:
            _NAMES[name] = encoded
    return encoded


def _encode_record(out: bytearray, record: Record, offset_delta: int, timestamp_delta: int) -> None:
    # one join per record: a list of ready parts rather than a varint loop per field
    parts = [b"\x00", _varint(timestamp_delta), _varint(offset_delta)]  # attributes: unused
    key, value, headers = record.key, record.value, record.headers
    if key is None:
        parts.append(_NULL)
    else:
        parts += (_varint(len(key)), key)
    if value is None:
        parts.append(_NULL)
    else:
        parts += (_varint(len(value)), value)
    parts += (_varint(len(headers)), encode_headers(headers))
    body = b"".join(parts)
    out += _varint(len(body))
    out += body


def encode_batch(
    records: Sequence[Record],
    *,
    base_offset: int = 0,
    base_timestamp: int | None = None,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    transactional: bool = False,
    control: bool = False,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    partition_leader_epoch: int = -1,
) -> bytes:
    """Build one uncompressed v2 batch holding ``records`` at consecutive offsets from ``base_offset``."""
    if not records:
        raise ValueError("a record batch needs at least one record")
    stamps = [r.timestamp for r in records if r.timestamp is not None]
    if base_timestamp is None:
        base_timestamp = min(stamps) if stamps else 0
    max_timestamp = max([base_timestamp, *stamps])
    out = bytearray(HEADER_SIZE)
    for delta, record in enumerate(records):
        ts = base_timestamp if record.timestamp is None else record.timestamp
        _encode_record(out, record, delta, ts - base_timestamp)
    attributes = int(Compression.NONE)
    if timestamp_type is TimestampType.LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    if transactional:
        attributes |= TRANSACTIONAL_MASK
    if control:
        attributes |= CONTROL_MASK
    return _seal(
        out,
        len(records),
        base_offset=base_offset,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        attributes=attributes,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        partition_leader_epoch=partition_leader_epoch,
    )


def _seal(
    out: bytearray,
    count: int,
    *,
    base_offset: int,
    base_timestamp: int,
    max_timestamp: int,
    attributes: int,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    partition_leader_epoch: int = -1,
    last_offset_delta: int | None = None,
) -> bytes:
    """Fill in the batch header before the records already in ``out``, then the CRC.

    ``last_offset_delta`` defaults to ``count - 1`` (consecutive offsets); a batch whose records
    leave offsets out (a gap marker) spans more."""
    HEADER.pack_into(
        out,
        0,
        base_offset,
        len(out) - LOG_OVERHEAD,
        partition_leader_epoch,
        2,
        0,
        attributes,
        count - 1 if last_offset_delta is None else last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    )
    _CRC.pack_into(out, CRC_OFFSET, crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)


def encode_headers(headers: Sequence[Header]) -> bytes:
    """Headers as a record carries them after its header count (the count itself not included)."""
    parts: list[bytes] = []
    for name, data in headers:
        parts.append(_header_name(name))
        if data is None:
            parts.append(_NULL)
        else:
            parts += (_varint(len(data)), data)
    return b"".join(parts)


def encode_record_tail(key: bytes | None, value: bytes | None, headers: bytes, header_count: int) -> bytes:
    """What follows a record's offset delta in a batch: key, value, header count and the headers
    (``headers`` as :func:`encode_headers` gives them). A writer that builds many similar records
    (the dead-letter writer) assembles tails from ready parts and batches them with
    :func:`encode_tails_batch`."""
    return b"".join(
        (
            _NULL if key is None else _varint(len(key)) + key,
            _NULL if value is None else _varint(len(value)) + value,
            _varint(header_count),
            headers,
        )
    )


TAIL_OVERHEAD = 9
"""Bytes a record adds to its tail in a batch of at most 2**20 records each under 64 MiB: length
varint (at most 4), attributes (1), timestamp delta 0 (1), offset delta (at most 3)."""

_TAIL_HEAD = b"\x00\x00"  # attributes (unused), timestamp delta 0


class _LengthVarints(dict[int, bytes]):
    """``_varint(n)`` of record lengths, kept once computed: a batch of similar records asks for
    a handful of lengths hundreds of times, and a dict lookup costs a third of the call."""

    def __missing__(self, n: int) -> bytes:
        encoded = _varint(n)
        if len(self) < 1 << 14:
            self[n] = encoded
        return encoded


_LENGTH_VARINTS = _LengthVarints()


_HEADS: list[bytes] = []


def _tail_heads(n: int) -> list[bytes]:
    """What precedes the tails of records 0..n-1 of a batch (attributes, timestamp delta 0,
    offset delta), kept for the largest batch seen up to 65,536 records."""
    heads = _HEADS
    if len(heads) < n:
        heads.extend(_TAIL_HEAD + _varint(delta) for delta in range(len(heads), min(n, 1 << 16)))
        if len(heads) < n:
            return heads + [_TAIL_HEAD + _varint(delta) for delta in range(len(heads), n)]
    return heads


def encode_tails_batch(tails: Sequence[bytes], *, base_timestamp: int) -> bytes:
    """One uncompressed batch of records given as tails (:func:`encode_record_tail`), every one
    stamped ``base_timestamp`` (create time), at consecutive offsets; no producer id. The same
    bytes :func:`encode_batch` gives for the same records, without a ``Record`` per record."""
    if not tails:
        raise ValueError("a record batch needs at least one record")
    parts: list[bytes] = [bytes(HEADER_SIZE)]
    extend = parts.extend
    lengths = _LENGTH_VARINTS
    heads = _tail_heads(len(tails))
    for head, tail in zip(heads, tails, strict=False):  # heads may be the longer
        extend((lengths[len(head) + len(tail)], head, tail))
    out = bytearray(b"".join(parts))
    return _seal(
        out,
        len(tails),
        base_offset=0,
        base_timestamp=base_timestamp,
        max_timestamp=base_timestamp,
        attributes=int(Compression.NONE),
    )


def encode_control_batch(
    *,
    commit: bool,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int = 0,
    timestamp: int = 0,
    base_offset: int = 0,
) -> bytes:
    """A transaction marker: a control batch holding one COMMIT or ABORT record."""
    marker_type = CONTROL_TYPE_COMMIT if commit else CONTROL_TYPE_ABORT
    record = Record(
        key=_CONTROL_KEY.pack(0, marker_type),
        value=_CONTROL_VALUE.pack(0, coordinator_epoch),
        timestamp=timestamp,
    )
    return encode_batch(
        [record],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transactional=True,
        control=True,
    )


def encode_share_control_batch(control_type: int, value: bytes, *, timestamp: int = 0) -> bytes:
    """A SHARE_CHECKPOINT or SHARE_DELTA control batch (seed 004): one record, key (version 0,
    type), ``value`` the persister's payload; not transactional, no producer id."""
    if control_type not in SHARE_CONTROL_TYPES:
        raise ValueError(f"{control_type} is not a share-state control record type")
    record = Record(key=_CONTROL_KEY.pack(0, control_type), value=value, timestamp=timestamp)
    return encode_batch([record], control=True)


def encode_spanning_control_batch(
    control_type: int, value: bytes, *, first_offset: int, last_offset: int, timestamp: int
) -> bytes:
    """A control batch spanning ``first_offset..last_offset`` that holds one control record, at
    ``last_offset``: key (version 0, ``control_type``), ``value``; not transactional, no producer
    id. The offsets before the record are a gap that every reader steps over."""
    span = last_offset - first_offset
    out = bytearray(HEADER_SIZE)
    record = Record(key=_CONTROL_KEY.pack(0, control_type), value=value)
    _encode_record(out, record, span, 0)
    return _seal(
        out,
        1,
        base_offset=first_offset,
        base_timestamp=timestamp,
        max_timestamp=timestamp,
        attributes=int(Compression.NONE) | CONTROL_MASK,
        last_offset_delta=span,
    )


def control_record_type(record: Record) -> int:
    """The control type of a record taken from a control batch: 0 ABORT or 1 COMMIT for a
    transaction marker, 5 SHARE_CHECKPOINT or 6 SHARE_DELTA for share state; callers that look for
    markers compare with the marker types rather than assume one of two."""
    if record.key is None or len(record.key) < _CONTROL_KEY.size:
        raise CorruptRecordError("control record key shorter than 4 bytes")
    return int(_CONTROL_KEY.unpack_from(record.key)[1])


def decode_batch(
    buf: bytes | bytearray | memoryview, pos: int = 0, *, verify_crc: bool = True
) -> RecordBatch:
    """Decode the uncompressed batch at ``pos`` into a :class:`RecordBatch`."""
    header = read_batch_header(buf, pos)
    if verify_crc and not crc_ok(buf, pos, header):
        raise CorruptRecordError(f"batch at offset {header.base_offset} fails its CRC32C check")
    if header.compression is not Compression.NONE:
        raise UnsupportedCompressionError(f"cannot decode a {header.compression.name} batch here")
    end = pos + header.size
    p = pos + HEADER_SIZE
    records: list[Record] = []
    for _ in range(header.records_count):
        length, p = read_varint(buf, p)
        limit = p + length
        if length < 0 or limit > end:
            raise CorruptRecordError("record length runs past the end of its batch")
        p += 1  # attributes
        ts_delta, p = read_varint(buf, p)
        offset_delta, p = read_varint(buf, p)
        key, p = _read_bytes(buf, p, limit)
        value, p = _read_bytes(buf, p, limit)
        n_headers, p = read_varint(buf, p)
        if n_headers < 0:
            raise CorruptRecordError("negative header count")
        headers: list[Header] = []
        for _ in range(n_headers):
            name, p = _read_bytes(buf, p, limit)
            if name is None:
                raise CorruptRecordError("record header with a null key")
            hvalue, p = _read_bytes(buf, p, limit)
            headers.append((name.decode(), hvalue))
        if p != limit:
            raise CorruptRecordError("record length does not match its fields")
        timestamp = (
            header.max_timestamp
            if header.timestamp_type is TimestampType.LOG_APPEND_TIME
            else header.base_timestamp + ts_delta
        )
        records.append(
            Record(
                key=key,
                value=value,
                headers=tuple(headers),
                timestamp=timestamp,
                offset=header.base_offset + offset_delta,
            )
        )
    if p != end:
        raise CorruptRecordError("records do not fill their batch")
    return RecordBatch(header=header, records=tuple(records))


def decode_batches(buf: bytes | bytearray | memoryview, *, verify_crc: bool = True) -> list[RecordBatch]:
    """Decode every batch in ``buf`` (which must hold whole batches only)."""
    out: list[RecordBatch] = []
    pos = 0
    while pos < len(buf):
        batch = decode_batch(buf, pos, verify_crc=verify_crc)
        out.append(batch)
        pos += batch.header.size
    return out
